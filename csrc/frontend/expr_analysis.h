#pragma once
// Checks of a parsed program that need no shapes, and the facts later passes rely on: which
// names are inputs (in order of first appearance), how many dims each tensor has, and where each
// tensor is defined and first read.
#include "frontend/expr_ast.h"

namespace tessera::frontend {

// Fills p->inputs, ndim, first_use and defined_by from p->statements. Throws ExpressionError on:
// a tensor defined twice, read before its definition or by its own definition; accesses of one
// tensor with different numbers of indices; repeated output indices; an iterator that is neither
// an output index nor reduced over by an enclosing reduction; a reduction re-binding a bound
// iterator; an index that is not an integer expression of iterators and integer constants
// (+ - * // % and max/min); an intermediate tensor that nothing reads.
void analyze_program(Program* p);

// Iterators an expression mentions (in indices or as values), in order of first appearance,
// including those bound inside it by reductions.
std::vector<std::string> mentioned_iterators(const AstNode& node);

}  // namespace tessera::frontend
