#pragma once
// The tunable task of a one-hop bridge operator (ETO Def. 5): two operators of one type
// (operator_type.h) rebuilt as one DAG whose every loop extent, tensor dimension and bounds-check
// constant is the smaller of the two at the same place. The bridge is never run by the model;
// it is tuned (searched, or reused from another program) only so that the operators it joins
// can reuse its program.
#include <optional>
#include <string>

#include "tune/common.h"

namespace tessera::tune::reuse {

// Nullopt when the two DAGs do not line up node for node (the type matched only up to a
// permutation of summation iterators, or a constant other than an extent or a bounds check
// differs). Inputs follow a's order and names; `parallel` and constant inputs are a's.
std::optional<Task> bridge_task(const Task& a, const Task& b, const std::string& name);

}  // namespace tessera::tune::reuse
