#pragma once
// Splits the compute DAG of one kernel into stages: which ops get their own loop nest, which are
// inlined into their consumers, and which elementwise outputs ride along as epilogues of a
// reduction's write-back (e.g. bias + relu after a matmul). Two of these decisions are choices a
// schedule may make differently from the rules (plan_choices.h).
#include <optional>
#include <set>
#include <vector>

#include "ir/tensor.h"
#include "schedule/plan_choices.h"

namespace tessera::schedule {

// Per dim of a tensor a stage writes, the axes of the stage's op it runs along, outer first: one
// axis (the dim is that axis), none (a unit dim the op lacks, indexed 0), or two (the op's axes
// merged row-major: an epilogue that reads its reduction through a reshape).
using AxisGroups = std::vector<std::vector<int>>;

struct Stage {
  ir::Tensor op;        // the compute op whose loop nest this stage is
  ir::Tensor epilogue;  // optional elementwise consumer fused into the write-back (null if none)
  // Set when `epilogue` reads `op` through a reshape (a [B, N / D, D, W] reduction read as
  // [B, N, W]): how the epilogue's dims merge the op's axes. Empty otherwise.
  AxisGroups epilogue_reshape;
  // The tensor whose buffer the stage writes: the epilogue when present, otherwise `op`.
  const ir::Tensor& written() const { return epilogue ? epilogue : op; }
};

struct StagePlan {
  PlanChoices choices;              // what plan_stages was asked for
  std::vector<ir::Tensor> inputs;   // kernel inputs (ABI order)
  std::vector<ir::Tensor> outputs;  // kernel outputs (ABI order, after inputs)
  std::vector<Stage> stages;        // execution order
  std::set<const ir::TensorNode*> inlined;
  // Tensors materialised in kernel-owned temporaries (written by a stage, not an output).
  std::vector<ir::Tensor> temporaries;
  // How many ops each choice decided here (whichever way): pad ops read by a reduction that no
  // other rule materialises, and reductions with an epilogue to fuse. A choice that decided
  // nothing plans the same stages either way.
  int pads_decided = 0;
  int epilogues_decided = 0;
};

// An injective op is inlined only while the expression it grows into (its body with the inlined
// producers substituted) stays within these bounds; past them it is materialised.
constexpr int64_t kMaxInlinedDepth = 96;
constexpr int64_t kMaxInlinedNodes = 4096;
// An injective op read more than once is inlined only while its expression has at most this
// many nodes: each read would compute it again.
constexpr int64_t kMaxRereadInlinedNodes = 64;

// Rules: outputs and reductions are materialised; injective ops with the "pad" or "relayout"
// tag that feed a reduction are materialised when choices.pad is kMaterialize (the default: a
// padded copy saves a select per load of the inner loop, a regrouped one gives unit-stride
// reads); other injective ops are inlined. With choices.epilogue
// kFused (the default), a non-output reduction whose single consumer is an output elementwise
// op reading it at identical indices (or through unit dims: an [M, N] matmul read by its
// [1, M, N] view's bias add; or through a reshape that splits some of the consumer's axes in
// two: a derived [B, N / D, D, W] band product read as [B, N, W]) becomes that op's epilogue,
// writing the output's buffer directly; with kSeparate every
// materialised op is its own stage.
// Floating-point sums over more than kSumChunk values are first split into a tree of chunk sums
// (split_reduction.h), so `outputs` of the plan may be other nodes than the ones passed (same
// names, shapes and dtypes).
StagePlan plan_stages(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const PlanChoices& choices = {});

// Whether planning the DAG of `plan` with `choices` could give other stages: some choice that
// differs from plan.choices decided an op of this DAG (pads_decided, epilogues_decided).
bool may_plan_differently(const StagePlan& plan, const PlanChoices& choices);

// Whether two plans of one DAG have the same stages (ops and epilogues, by name, in order) and
// inline the same tensors: then every schedule builds the same kernel with either.
bool same_stages(const StagePlan& a, const StagePlan& b);

// Body of `t`'s op with every inlined producer substituted (recursively).
ir::Expr inline_body(const ir::Tensor& t, const std::set<const ir::TensorNode*>& inlined);
// Same for an arbitrary expression.
ir::Expr inline_expr(const ir::Expr& e, const std::set<const ir::TensorNode*>& inlined);

// Replaces every access of tensor `target` in `e` by `value` (used for epilogues: the accumulator
// stands in for the reduction's result).
ir::Expr replace_access(const ir::Expr& e, const ir::TensorNode* target, const ir::Expr& value);

// How `consumer` reads `producer` through a reshape, when it does: every access in
// `consumer_body` indexes the producer's dims, in order, with consecutive groups, one per
// consumer axis: the axis itself (same extent), or the pair (v // E, v % E) for a constant inner
// extent E where v's extent is the pair's element count. At least one pair (else it is the
// identity); nullopt otherwise.
std::optional<AxisGroups> reshape_groups(const ir::Tensor& consumer, const ir::Expr& consumer_body,
                                         const ir::Tensor& producer);

// For each axis of `stage`'s epilogue, the axes of its reduction it runs along (AxisGroups): the
// identity when their shapes are equal; stage.epilogue_reshape when set; for an epilogue through
// unit dims the non-unit axes in order, so an [M, N] matmul's [1, M, N] epilogue maps
// {{}, {0}, {1}}. Throws when the stage has none.
AxisGroups epilogue_axis_map(const Stage& stage);

// The point whose dim d merges op_point at axis_map[d] row-major (over `op_extents`, the op's
// axis extents), or 0 where axis_map[d] is empty (a unit dim): how a point over an op's axes
// indexes the tensor an axis map describes.
std::vector<ir::Expr> point_through_axis_map(const AxisGroups& axis_map,
                                             const std::vector<ir::Expr>& op_point,
                                             const std::vector<ir::Expr>& op_extents);

// The point of stage.written() that the stage's op writes at `op_point` (a point over the op's
// axes): `op_point` itself without an epilogue, else mapped by epilogue_axis_map.
std::vector<ir::Expr> written_point(const Stage& stage, const std::vector<ir::Expr>& op_point);

// The stage's epilogue as an expression over its op's axes, producers inlined and the op's
// result replaced by `value`; null when the stage has none. Lowerings and cost models read an
// epilogue through this, so one through unit dims is indexed as its reduction is.
ir::Expr epilogue_over_op_axes(const Stage& stage, const std::set<const ir::TensorNode*>& inlined,
                               const ir::Expr& value);

}  // namespace tessera::schedule
