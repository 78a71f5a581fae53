#pragma once
// Layout propagation (ALT): a layout chosen for one tensor spreads along same-shape elementwise
// paths, in both directions, so that producer and consumer share it and no conversion is
// needed between them. A compute tensor C and a tensor P it reads are on such a path when C
// has no summation, P and C have the same shape, and every read of P in C's body is at C's own
// iterators in order (C[i] = f(..., P[i], ...): a bias add, an activation, a residual add).
// Placeholders never receive a layout this way: a kernel input's layout is its caller's choice.
// The caller may offer some (weights it lays out once, `relayable_inputs`): a convolution stored
// NHWC then reads such a weight in HWIO order (reorder(2,3,1,0): output channels innermost,
// the vector lanes of the NHWC loop nest, instead of a gather at stride I*KH*KW).
// One more rule carries an input's order into the kernel: a pad op (tag "pad", materialised
// for a convolution) reading a transposed view of an input (a compute that reads a placeholder
// at a permutation of its own iterators, e.g. an NHWC tensor seen as NCHW) is stored in the
// input's order, so the convolution reads its padded copy in that order too.
#include <set>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "layout/relayout.h"

namespace tessera::layout {

// `layouts` extended to every compute tensor of the DAG below `outputs` reachable from a laid
// tensor along same-shape elementwise paths (a tensor already given a layout keeps it; the
// first layout to reach a tensor wins, in the DAG's topological order).
LayoutMap propagate_layouts(const std::vector<ir::Tensor>& outputs, LayoutMap layouts,
                            const std::set<std::string>& relayable_inputs = {});

}  // namespace tessera::layout
