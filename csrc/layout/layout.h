#pragma once
// Tensor layouts (ALT): how a tensor's logical elements are placed in its buffer.
//
// A layout is a sequence of primitives applied to the tensor's logical dims in order; each turns
// the current list of dims into a new one. The buffer is the final list of dims, row-major. Every
// primitive has an exact pair of index maps:
//   forward: a logical index -> the physical position that holds it,
//   inverse: a physical position -> the logical index it holds (which may fall outside the
//            logical shape: padding, or the overhang of a split that does not divide its dim).
// inverse(forward(i)) == i for every logical i, and forward is injective. Accesses of a relaid
// tensor are rewritten as S_X(S_Y^-1(L')) (relayout.h): the consumer's logical index L' is
// pushed through the producer's forward map.
//
// Primitives (dims are positions in the current list):
//   split(d, f)         d of extent E -> (ceil(E/f), f);          i -> (i / f, i % f)
//   reorder(p0, p1...)  dim k of the result is current dim p_k
//   fuse(d)             d, d+1 of extents (A, B) -> A*B;          (a, b) -> a*B + b
//   unfold(d, t, V, K)  overlapping windows of a stride-V, size-K sliding window (a convolution's
//                       input rows): d of extent E -> (T, V*(t-1)+K), T = ceil(outputs / t) tiles
//                       of t outputs each, outputs = ceil((E-K)/V) + 1 (every row covered);
//                       tile a starts at a*V*t. Each
//                       element is stored once per tile that reads it; forward picks the tile
//                       a = min(i / (V*t), T-1), or, when the index is a*V*t + r with `a` an
//                       iterator and 0 <= r < V*(t-1)+K, the copy in tile a (the reader's
//                       own tile: a tiled convolution's window). Requires K >= V (else rows between
//                       windows would have no place). ALT's paper gives the tile as t+K-1, which is
//                       right only for V = 1.
//   pad(d, lo, hi)      d of extent E -> lo + E + hi;              i -> i + lo
//   store_at(d, o, n)   d of extent E placed at offset o of a dim of extent n (o + E <= n) that
//                       other tensors share (ALT's store_at: e.g. a bias beside its weights);
//                       i -> i + o. The slots outside [o, o+E) are not this tensor's.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace tessera::layout {

enum class PrimitiveKind { kSplit, kReorder, kFuse, kUnfold, kPad, kStoreAt };
const char* primitive_name(PrimitiveKind k);

struct Primitive {
  PrimitiveKind kind = PrimitiveKind::kSplit;
  int dim = 0;
  // split: {f}; reorder: the permutation; fuse: {}; unfold: {t, V, K}; pad: {lo, hi};
  // store_at: {o, n}.
  std::vector<int64_t> args;

  static Primitive split(int dim, int64_t factor) { return {PrimitiveKind::kSplit, dim, {factor}}; }
  static Primitive reorder(std::vector<int64_t> perm) {
    return {PrimitiveKind::kReorder, 0, std::move(perm)};
  }
  static Primitive fuse(int dim) { return {PrimitiveKind::kFuse, dim, {}}; }
  static Primitive unfold(int dim, int64_t tile, int64_t stride, int64_t window) {
    return {PrimitiveKind::kUnfold, dim, {tile, stride, window}};
  }
  static Primitive pad(int dim, int64_t lo, int64_t hi) {
    return {PrimitiveKind::kPad, dim, {lo, hi}};
  }
  static Primitive store_at(int dim, int64_t offset, int64_t extent) {
    return {PrimitiveKind::kStoreAt, dim, {offset, extent}};
  }

  std::string to_string() const;  // "split(1,16)", "reorder(0,2,3,1)", ...
  bool operator==(const Primitive& o) const {
    return kind == o.kind && dim == o.dim && args == o.args;
  }
};

class Layout {
 public:
  Layout() = default;
  // Checks each primitive against the dims it acts on (tessera::Error when one does not fit).
  Layout(std::vector<int64_t> logical_shape, std::vector<Primitive> primitives);
  // The row-major layout of `shape`.
  static Layout identity(std::vector<int64_t> shape) { return Layout(std::move(shape), {}); }
  // Parses the text of to_string() ("" or "identity": no primitives).
  static Layout parse(std::vector<int64_t> logical_shape, const std::string& text);

  const std::vector<int64_t>& logical_shape() const { return logical_; }
  const std::vector<Primitive>& primitives() const { return primitives_; }
  const std::vector<int64_t>& physical_shape() const { return dims_.back(); }
  bool is_identity() const { return primitives_.empty(); }
  // Physical elements / logical elements (>= 1: padding, overhangs and unfold's copies).
  double expansion() const;

  // The maps, as index expressions (not simplified; callers simplify in context).
  std::vector<ir::Expr> forward(const std::vector<ir::Expr>& logical) const;
  std::vector<ir::Expr> inverse(const std::vector<ir::Expr>& physical) const;
  // Whether physical position `physical` holds an element of the tensor: its inverse lies inside
  // the logical shape (and, for store_at, inside the tensor's own slots). A constant true when
  // the layout has no padding, overhang or shared slots.
  ir::Expr holds_element(const std::vector<ir::Expr>& physical) const;
  // Whether every physical position holds an element (no pad, store_at, non-dividing split).
  bool is_dense() const;

  std::string to_string() const;  // primitives separated by spaces; "identity" when none
  bool operator==(const Layout& o) const {
    return logical_ == o.logical_ && primitives_ == o.primitives_;
  }
  bool operator!=(const Layout& o) const { return !(*this == o); }

 private:
  std::vector<int64_t> logical_;
  std::vector<Primitive> primitives_;
  // The conditions (each a bool expression) under which the inverse of `physical` is an element.
  std::vector<ir::Expr> inverse_conditions(const std::vector<ir::Expr>& physical) const;
  // dims_[k]: the dims before primitive k; dims_.back(): the physical shape.
  std::vector<std::vector<int64_t>> dims_;
};

}  // namespace tessera::layout
