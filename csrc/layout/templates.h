#pragma once
// Layout templates (ALT): the candidate layouts of an operator's tensors, per operator kind.
//
// The anchor is the DAG's one summing op tagged conv2d or matmul. Candidates name layouts for the
// anchor's activation input (and the padded copy a convolution reads), its weight and its output
// (propagate_layouts spreads the output's to a fused epilogue):
//   conv2d     NCHW{b}c:  activations [N, C/b, H, W, b], weight O/b.I/b'.KH.KW.b'.b
//              NCHW->NCHW{b}c: the input stays NCHW (a stem with 3 channels), output blocked,
//                         weight O/b.I.KH.KW.b
//              NHWC:      activations [N, H, W, C], weight KH.KW.I.O
//   depthwise  the same families; the weight [C, 1, KH, KW] blocked as C/b.1.KH.KW.b or KH.KW.1.C
//   matmul     C [M, N] in column panels [N/b, M, b], the weight B in the same panels
// b is the machine's vector width in elements, or half of it when the channels are not a
// multiple (a family that does not divide is left out). The identity ("fixed") is always first.
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "layout/relayout.h"

namespace tessera::layout {

struct LayoutCandidate {
  std::string name;  // "fixed", "NCHW16c", "NHWC", ...
  LayoutMap layouts;
};

enum class AnchorKind { kNone, kConv, kDepthwise, kMatmul };
const char* anchor_kind_name(AnchorKind k);

// The anchor kind of the DAG below `outputs` (kNone: no single conv2d/matmul anchor with
// constant shapes).
AnchorKind anchor_kind(const std::vector<ir::Tensor>& outputs);

// Candidates for the DAG; `vector_lanes`: fp32 lanes of the target's vectors. Only "fixed" when
// the DAG has no anchor the templates know.
std::vector<LayoutCandidate> layout_candidates(const std::vector<ir::Tensor>& outputs,
                                               int vector_lanes);

}  // namespace tessera::layout
