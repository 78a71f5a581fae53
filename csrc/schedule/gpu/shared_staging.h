#pragma once
// Shared-memory staging of operand tiles for the tiled GPU schedule (tiled_reduction.h).
//
// Inside one stage of a block, every loop variable v of the compute op runs over a tile:
// v = base(v) + local, local in [0, tile(v)), where base(v) depends only on the block and the
// reduce step (not on the thread). An access T[f_0(v), ..., f_d(v)] whose indices are affine in
// those variables with constant coefficients then touches a box of constant size per block and
// step: the region. The threads of the block copy the region into a __shared__ buffer together
// (cooperative fetch: element e by thread e mod threads), and the compute reads the buffer
// instead of global memory. Region elements outside T's bounds are filled with T's pad value:
// they are read only by accesses a select discards, or by iterations whose result is guarded.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/buffer.h"
#include "ir/tensor.h"
#include "loop/stmt.h"
#include "schedule/lower_access.h"

namespace tessera::schedule::gpu {

// The tile of one loop variable within a block and reduce step.
struct VarTile {
  ir::Expr base;     // the variable's value at local offset 0
  int64_t tile = 1;  // number of values it takes
};
using VarTiles = std::map<const ir::ExprNode*, VarTile>;

struct StagedAccess {
  ir::Tensor tensor;
  std::vector<ir::Expr> indices;  // as written in the op body (in the op's variables)
  ir::Buffer shared;              // kShared, shape = region extents
  std::vector<ir::Expr> origin;   // per dim: global index of the region's first element
};

// The region of `access` (a kAccess node) for the tiles, or nothing when some index is not
// affine in tiled variables with constant coefficients. `name` names the shared buffer.
std::optional<StagedAccess> stage_region(const ir::Expr& access, const VarTiles& tiles,
                                         const std::string& name);

// The copy of the region into its shared buffer by `threads` threads; `thread` is the thread's
// index in [0, threads). Global reads go through `al`.
loop::Stmt cooperative_fetch(const StagedAccess& s, const ir::Expr& thread, int64_t threads,
                             const AccessLowering& al);

// `e` with every access that matches a staged one (same tensor, identical indices) replaced by
// a load of its shared buffer.
ir::Expr read_staged(const ir::Expr& e, const std::vector<StagedAccess>& staged);

// Elements of a shared buffer (its constant size).
int64_t shared_elements(const StagedAccess& s);

}  // namespace tessera::schedule::gpu
