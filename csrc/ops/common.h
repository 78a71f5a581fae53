#pragma once
// Helpers shared by the operator library: constant-dimension queries, shape checks with clear
// messages, axis normalisation, and compute builders with chosen iterator names (so that a
// definition reads conv2d[n, o, y, x] = sum(rc, ry, rx) ... rather than with generic names).
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace tessera::ops {

using Shape = std::vector<ir::Expr>;
// (height, width) parameters of 2-D convolution and pooling.
using Int2 = std::array<int64_t, 2>;

// The value of a constant integer dimension, if it is one.
std::optional<int64_t> const_value(const ir::Expr& e);
bool is_const_value(const ir::Expr& e, int64_t v);

// "[4, N, 3]"
std::string shape_str(const Shape& s);
// "1,2" (the format of op attrs)
std::string ints_str(const std::vector<int64_t>& v);

// Throws tessera::Error mentioning `what` when both dims are constants that differ. Symbolic
// dims cannot be compared at definition time and are trusted to match.
void check_dims_equal(const ir::Expr& a, const ir::Expr& b, const std::string& what);
void check_ndim(const ir::Tensor& t, int ndim, const std::string& op, const std::string& operand);
void check_same_dtype(const ir::Tensor& a, const ir::Tensor& b, const std::string& op);
// Maps a possibly negative axis into [0, ndim); throws when out of range.
int64_t normalize_axis(int64_t axis, int ndim, const std::string& op);
// Product of dims (folded when constant).
ir::Expr shape_numel(const Shape& s);

// compute() / reduce() with explicit iterator names and op attributes. Empty name lists fall back
// to the IR's default names.
ir::Tensor compute_named(const std::string& name, const Shape& shape,
                         const std::vector<std::string>& axis_names,
                         const std::function<ir::Expr(const std::vector<ir::Var>&)>& f,
                         const std::string& tag, std::map<std::string, std::string> attrs = {});
ir::Tensor reduce_named(
    const std::string& name, const Shape& shape, const std::vector<std::string>& axis_names,
    const Shape& reduce_extents, const std::vector<std::string>& reduce_names, ir::ReduceKind kind,
    const std::function<ir::Expr(const std::vector<ir::Var>&, const std::vector<ir::Var>&)>& f,
    const std::string& tag, std::map<std::string, std::string> attrs = {});

// Padding of the two trailing (spatial) dims of an [N, C, H, W]-like tensor, as its own op
// (tag "pad") so the scheduler can inline or materialise it:
//   out[.., h, w] = X[.., (h - off_h) / s_h, (w - off_w) / s_w]  where that is a whole in-range
//   index, `value` elsewhere.
// off is the leading padding (negative crops) and s an interior dilation (1 for plain padding;
// > 1 inserts s-1 zeros between input rows, as transposed convolution needs).
ir::Tensor pad_spatial(const ir::Tensor& x, const ir::Expr& out_h, const ir::Expr& out_w,
                       const ir::Expr& off_h, const ir::Expr& off_w, int64_t s_h, int64_t s_w,
                       const ir::Expr& value, const std::string& name);

// Conjunction that drops conditions known to be true (undefined Exprs count as true).
ir::Expr and_all(const std::vector<ir::Expr>& conds);

}  // namespace tessera::ops
