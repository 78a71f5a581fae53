#pragma once
// EinNet's three inter-expression derivation rules (paper 4.2): splitting an expression into
// independent ones, merging independent expressions with the same computation, and fusing
// dependent expressions. Explicit forms check legality and return nullopt when illegal.
#include <optional>
#include <vector>

#include "derive/state.h"

namespace tessera::derive {

// Expression splitting: the traversal space of `scope` along traversal iterator `axis` is cut
// at `point` (0 < point < extent) into two independent scopes over [0, point) and
// [point, extent), joined by a concatenation eOperator select(i < point, S1[i], S2[i - point])
// that replaces `scope`. Always legal for constant extents.
std::optional<State> split_expression(const State& s, const ir::Tensor& scope, int axis,
                                      int64_t point);
// Candidates: every traversal iterator of extent >= 2 of every scope, cut in half.
std::vector<State> expression_splittings(const State& s);

// Expression merging: two independent scopes `a` and `b` computing the same expression become
// one scope M whose traversal iterator `axis` covers both ranges; a and b are replaced by
// views of M (a at [0, ea), b at [ea, ea + eb)). Two forms are recognized:
//  - adjacent ranges: b's body is a's body with the iterator shifted by ea (the inverse of
//    split_expression);
//  - different inputs: the bodies are equal except for reads of different tensors T1 / T2,
//    each read with the merged iterator alone in one index dimension j (and nowhere else) and
//    with T1, T2 equal in shape except at j (sizes ea and eb); M then reads the concatenation
//    of T1 and T2 along j (a scope, folded at compile time when both are weights). This is
//    EinNet's merge of two matmuls sharing an input.
// Refused when the scopes depend on each other, differ in any other way, or are the same.
std::optional<State> merge_expressions(const State& s, const ir::Tensor& a, const ir::Tensor& b,
                                       int axis);
// Candidates: every pair of independent scopes, every traversal iterator.
std::vector<State> expression_mergings(const State& s);

// Expression fusion: a producer `producer` reduced by a sum, read exactly once by `consumer`
// as a factor of its body (consumer = P[pi] * g, with a sum or no reduction), becomes part of
// the consumer: L_x sum_y g * {L_z sum_w f}[pi]  =>  L_x sum_{y,w} g * f(pi, w). Legal when the
// read pi lies provably inside P's shape (elsewhere the read gives the pad value, the fused
// body would not). A non-linear consumer (e.g. a ReLU after a sum) cannot be one scope of the
// IR; Tessera's scheduler fuses such epilogues instead.
std::optional<State> fuse_expressions(const State& s, const ir::Tensor& consumer,
                                      const ir::Tensor& producer);
std::vector<State> expression_fusions(const State& s);

}  // namespace tessera::derive
