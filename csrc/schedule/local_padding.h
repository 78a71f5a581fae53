#pragma once
// DietCode's local padding (StageAnnotation::edge == kLocalPad): a register tile cut by the end
// of the iteration space still runs the whole tile's code, so its reads past the end must be
// safe. A read is safe past the end of an axis when it goes through a packed panel split along
// exactly that axis (lower_pack zero-fills the last panel, and a register tile never crosses a
// panel boundary when the panel is a multiple of the tile); any other read that mentions the
// axis has the axis clamped into [0, extent - 1] in its indices. Clamped reads give some valid
// point's value: never written, because the write-back skips points past the end.
#include <cstdint>
#include <vector>

#include "ir/expr.h"
#include "ir/tensor.h"
#include "schedule/lower_access.h"

namespace tessera::schedule {

struct SafeReads {
  ir::Expr value;  // the body with clamped indices (still over the op's axis variables)
  // Every read that mentions the vector axis goes through a zero-filled panel along it: lanes
  // past the end need no mask in the compute, only in the write-back.
  bool lanes_padded = true;
};

// `body` (an op's per-point value, accesses not yet lowered) made safe to evaluate at points
// past the end of the axes with `cut[a]` set (axis a of `op`, register tile `tile_reg[a]`).
// The vector axis `vector_axis` is never clamped (a clamped lane index would turn vector loads
// into gathers): reads along it either are padded (lanes_padded) or need masked lanes.
SafeReads make_safe_reads(const ir::Expr& body, const ir::ComputeOpNode& op,
                          const std::vector<bool>& cut, const std::vector<int64_t>& tile_reg,
                          int vector_axis, const AccessLowering& al);

}  // namespace tessera::schedule
