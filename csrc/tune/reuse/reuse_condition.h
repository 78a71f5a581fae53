#pragma once
// ETO's reuse condition (Def. 2) over Tessera workloads, and its one-hop bridge operators
// (Def. 5).
//
// An operator for reuse is a kernel's compute DAG seen through three things:
//   type        the DAG with its extents abstracted away (operator_type.h)
//   sketch set  what search mode's sketch rules decide for it (sketch_set.h)
//   extents     its major loop nest: the anchor stage's traversal extents, then its summation
//               extents. The anchor is the stage with the most iteration points among the
//               reducing stages (the matmul, not its bias epilogue nor a pad stage); a kernel
//               without reduction anchors on its largest stage.
// Operator alpha may reuse operator beta's tuned program when both have the same type, the same
// sketch set, the same loop count, and alpha's extents are position-wise all <= or all >= beta's.
// The condition is symmetric and hardware-independent; the search cost of the two directions
// is not (trial_estimate.h).
#include <string>
#include <utility>
#include <vector>

#include "tune/common.h"
#include "tune/reuse/operator_type.h"

namespace tessera::tune::reuse {

struct ReuseOperator {
  std::string name;
  OperatorType type;
  std::string sketch_set;
  std::vector<int64_t> extents;  // anchor stage: spatial extents, then reduce extents
  int num_spatial = 0;
  // A one-hop bridge (one_hop_bridges): the positions in the operator list of the two operators
  // whose position-wise minimum it is (their tasks rebuild it, bridge_task.h); empty otherwise.
  std::vector<int> joins;

  // Iteration points of the anchor stage (|I(L)|), and of its reduce loops alone (|I(rL)|).
  double points() const;
  double reduce_points() const;
};

// Index in plan.stages of the anchor stage (see above). Throws tessera::Error for a plan without
// stages.
int anchor_stage_index(const schedule::StagePlan& plan);

// Describes the kernel of `task` (its plan's anchor stage). Symbolic extents count as their value
// in task.sizes when the extent is a size variable given there, else as kSymbolicSizeGuess.
// The sketch set is computed on reference_target(), whatever task.target is.
ReuseOperator describe_operator(const Task& task);
// Convenience: plans the DAG first.
ReuseOperator describe_operator(const std::vector<ir::Tensor>& outputs,
                                const std::vector<ir::Tensor>& inputs, const std::string& name);

// Condition 1 of Def. 2 plus the equal loop count: same type, same sketch set, as many loops
// split alike into spatial and reduce.
bool same_kind(const ReuseOperator& a, const ReuseOperator& b);

// Every extent of `a` <= the one of `b` at the same position (loop counts must match).
bool extents_dominated(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Def. 2: same kind and a's extents dominated by b's or dominating them.
bool can_reuse(const ReuseOperator& a, const ReuseOperator& b);

// Every ordered pair (user, source), user != source, with can_reuse(ops[user], ops[source]),
// sorted. A pair comes with its mirror, since the condition is symmetric.
std::vector<std::pair<int, int>> reuse_pairs(const std::vector<ReuseOperator>& ops);

// Def. 5: the operator of a's kind whose extents are the position-wise minimum of a's and b's.
// a and b must be of the same kind.
ReuseOperator bridge_operator(const ReuseOperator& a, const ReuseOperator& b);

// One-hop bridges of `ops`: bridge_operator of every same-kind pair that cannot reuse each other,
// without duplicates and without operators equal in kind and extents to one of `ops`. Ordered by
// first appearance (pairs in index order), named "bridge(<a>,<b>)".
std::vector<ReuseOperator> one_hop_bridges(const std::vector<ReuseOperator>& ops);

}  // namespace tessera::tune::reuse
