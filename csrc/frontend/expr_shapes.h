#pragma once
// Extents of the iterators of a program, inferred from the shapes of its inputs.
//
// Per statement (iterators are local to their statement; one name has one extent everywhere in
// the statement):
//  1. extents given explicitly (ExtentHints) are taken first;
//  2. an iterator used as a plain index, A[.., k, ..], takes the size of that dim; every plain
//     use must agree (when both sizes are known numbers);
//  3. an iterator whose uses are all index arithmetic takes the largest extent that keeps every
//     affine index with it as the only unknown in bounds: for I[n, c, y + r, x + s] with r known,
//     y gets dim - extent(r) + 1 (a "valid" convolution). The rule needs a positive coefficient
//     and known other terms; anything else (i // 2, i * j, -i) needs an explicit extent;
//  4. iterators still unknown (e.g. an output index the right-hand side never uses) are errors
//     that name the missing extent.
// With concrete sizes every index is then checked to stay within its dim (interval arithmetic
// over the iterator ranges): reads are never out of bounds, including those a where(...) would
// discard -- clamp such indices, e.g. X[max(i - 1, 0)].
//
// Sizes are ir::Expr: numbers for a concrete call, size variables to derive output-shape
// formulas (the fake kernel under torch.compile); checks that need numbers are skipped then.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frontend/expr_ast.h"

namespace tessera::frontend {

struct ExtentHints {
  std::map<std::string, int64_t> iterators;             // iterator name -> extent
  std::map<std::string, std::vector<int64_t>> tensors;  // defined tensor -> its shape
  bool empty() const { return iterators.empty() && tensors.empty(); }
};

struct ProgramShapes {
  std::vector<std::map<std::string, ir::Expr>> extents;  // per statement: iterator -> extent
  std::map<std::string, std::vector<ir::Expr>> shapes;   // every tensor, inputs and defined
};

// `input_shapes` must hold every input of `p`. Throws ExpressionError (at the column of the
// access or iterator concerned) on wrong input ranks, inconsistent or uninferable extents and
// out-of-bounds indices; on hints that name nothing in the program.
ProgramShapes infer_shapes(const Program& p,
                           const std::map<std::string, std::vector<ir::Expr>>& input_shapes,
                           const ExtentHints& hints = {});

// Offset of the first character of an expression (the left operand's, for binary nodes).
size_t node_begin(const AstNode& n);

}  // namespace tessera::frontend
