#pragma once
// Cascade summation: a floating-point sum over more than kSumChunk values is rewritten into sums
// of at most kSumChunk values each, combined level by level (a tree of chunk partials, as ATen's
// cascade sum does). One accumulator that runs over 2^25 values stops growing once its ulp
// exceeds the addend (a sum of 2^25 twos gives 2^25, not 2^26); chunk partials keep the error
// bounded by the chunk length times the number of levels, at any length.
//
// The rewrite happens on the compute DAG, before stage planning, so every schedule, tuner and
// sketch sees the same stages. Max and min are exact and integer sums are exact (modulo
// wrap-around, as in eager), so only floating-point sums are rewritten.
#include <vector>

#include "ir/tensor.h"

namespace tessera::schedule {

// The most values one accumulator of a floating-point sum combines before its partial is handed
// to the next level. Large enough that the row reductions of common models (softmax, norms over
// up to 8192 features) keep one stage.
constexpr int64_t kSumChunk = 8192;
// Sums with fewer output points than this are split whenever they are long: their chunk
// partials are what runs in parallel (rfactor).
constexpr int64_t kFewOutputPoints = 16;

// Returns the outputs of a DAG in which no floating-point sum reduces more than `chunk` values
// into one output point, except row sums of at most chunk^2 values over at least
// kFewOutputPoints outputs, whose lowering chunks them in place (lower_stage.h). Extents with no
// constant upper bound count as long.
// Tensors that need no rewrite are returned as they are; shapes, names and dtypes of the outputs
// are kept.
// Most values one output point of `op` combines (the product of its reduce extents' upper
// bounds; an unbounded size variable counts as 2^40), saturating at 2^40.
int64_t reduce_count_bound(const ir::ComputeOpNode& op);

// Is `op` (its values of `dtype`) a floating-point sum that may combine more than kSumChunk
// values per output point? A stage split_long_sums leaves whole keeps chunk partials itself
// (lower_stage.h).
bool is_long_float_sum(const ir::ComputeOpNode& op, ir::DType dtype);

std::vector<ir::Tensor> split_long_sums(const std::vector<ir::Tensor>& outputs,
                                        int64_t chunk = kSumChunk);

}  // namespace tessera::schedule
