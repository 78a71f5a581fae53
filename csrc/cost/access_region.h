#pragma once
// Access-region analysis of one compute definition: for a tile of its iteration space (a box
// [0, T_d) per iterator), which region of every tensor it touches, the tile's memory footprint
// F(T) and the traffic Q(T) of running the whole iteration space tile by tile.
//
// Nothing here knows about operators: the region of an access is the product over the tensor's
// dimensions of the span of the index expression over the tile's iterator ranges. Affine indices
// (the common case: i, k, y*stride + ry*dilation, ...) use their linear form, span = 1 +
// sum |coef| * (T - 1); anything else (floordiv/floormod of grouped convolutions, min/max of
// clamps) asks ir::const_int_bound with the tile ranges. Several accesses of one tensor merge into
// the bounding box of their regions. Spans are clamped to the tensor's shape when it is constant.
//
// Traffic follows Roller's tile model: every tile instance loads its whole input footprint (no
// reuse between neighbouring tiles), the output block is written once per spatial tile and, when
// the reduction is split into several tiles, read back and rewritten once per further reduce tile
// (the register accumulators are initialised from the partial result, as the lowering does).
#include <cstdint>
#include <string>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"

namespace tessera::cost {

// One tensor as the stage sees it, with every access made to it.
struct TensorAccesses {
  const ir::TensorNode* tensor = nullptr;
  std::string name;
  int elem_bytes = 4;
  std::vector<int64_t> shape;  // constant dims, -1 where symbolic
  bool is_output = false;      // the stage's result (indexed by the spatial iterators)
  bool epilogue = false;       // read only when the finished result is written back
  std::vector<std::vector<ir::Expr>> accesses;  // index lists, one per access
};

class AccessRegions {
 public:
  // iters: spatial iterators then reduce iterators; extents: their sizes (symbolic ones replaced
  // by a guess by the caller); num_spatial: how many of iters are spatial.
  AccessRegions(std::vector<ir::Var> iters, std::vector<int64_t> extents, int num_spatial);

  // Convenience: the stage `op` with (possibly inlined) body `body`, output tensor `out`, and an
  // optional epilogue expression over the op's axes (its accesses count as epilogue reads).
  // Symbolic extents are replaced by `symbolic_guess`. `out_point`: as add_output's.
  static AccessRegions for_compute(const ir::ComputeOpNode& op, const ir::Expr& body,
                                   const ir::TensorNode* out, const ir::Expr& epilogue = ir::Expr(),
                                   int64_t symbolic_guess = 256,
                                   const std::vector<ir::Expr>& out_point = {});

  // Records an access `tensor[indices]` (merged with earlier accesses of the same tensor).
  void add_access(const ir::TensorNode* tensor, const std::vector<ir::Expr>& indices,
                  bool epilogue = false);
  // Records the stage output, indexed by `point` (expressions of the spatial iterators: an
  // epilogue through unit dims writes [0, i, j] for the op's [i, j]); empty: the spatial
  // iterators in order.
  void add_output(const ir::TensorNode* tensor, const std::vector<ir::Expr>& point = {});

  int num_iters() const { return static_cast<int>(iters_.size()); }
  int num_spatial() const { return num_spatial_; }
  const std::vector<int64_t>& extents() const { return extents_; }
  const std::vector<TensorAccesses>& tensors() const { return tensors_; }

  // Elements per tensor dimension of the region tensor `t` touches in one tile. Tile sizes are
  // clamped to the extents.
  std::vector<int64_t> region_shape(size_t t, const std::vector<int64_t>& tile) const;
  // Bytes of that region; with line_bytes > 0 the innermost dimension is rounded up to whole
  // lines (what a cache actually holds and moves).
  double region_bytes(size_t t, const std::vector<int64_t>& tile, int line_bytes = 0) const;
  // F(T): sum of the regions of all tensors, output included.
  double footprint_bytes(const std::vector<int64_t>& tile, int line_bytes = 0) const;

  struct Traffic {
    double input_bytes = 0;   // reads of inputs over all tile instances
    double output_bytes = 0;  // writes (and read-backs) of the output
    double total() const { return input_bytes + output_bytes; }
  };
  // Q(T): bytes moved into the level holding one tile, over the whole iteration space.
  // output_stays: the loop over reduce tiles runs inside one spatial tile and its output block
  // stays at this level between reduce tiles (read back from there, not from outside), so the
  // output moves once per spatial tile.
  Traffic traffic(const std::vector<int64_t>& tile, int line_bytes = 0,
                  bool output_stays = false) const;

  // Distance in elements between the addresses tensor `t` reads at iterator `iter` and
  // `iter` + 1 (row-major, first access of the tensor), or -1 when the index is not affine in
  // the iterators or the shape is symbolic. Cache-set aliasing checks use it.
  int64_t element_stride(size_t t, int iter) const;

  // Number of tile instances along spatial / reduce iterators.
  double spatial_tiles(const std::vector<int64_t>& tile) const;
  double reduce_tiles(const std::vector<int64_t>& tile) const;

 private:
  struct IndexForm {
    bool affine = false;
    std::vector<int64_t> coef;  // per iterator (affine only)
    ir::Expr expr;              // for the bound-analysis path
  };
  struct Group {
    std::vector<std::vector<IndexForm>> accesses;  // [access][dim]
  };
  IndexForm analyze_index(const ir::Expr& e) const;
  // Inclusive [lo, hi] of one index over the tile box, relative to the tile's origin at 0.
  void index_range(const IndexForm& f, const std::vector<int64_t>& tile, int64_t* lo,
                   int64_t* hi) const;
  size_t group_of(const ir::TensorNode* t);

  std::vector<ir::Var> iters_;
  std::vector<int64_t> extents_;
  int num_spatial_;
  std::vector<TensorAccesses> tensors_;
  std::vector<Group> groups_;
};

}  // namespace tessera::cost
