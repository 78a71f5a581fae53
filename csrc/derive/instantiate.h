#pragma once
// Expression instantiation (EinNet 5): how each scope of a derived program runs: as a
// predefined operator (matched at distance 0 and not memory-bound), as an eOperator that
// Tessera compiles itself (arithmetic intensity below DeriveConstants::kEOperatorIntensity, or
// no operator matches), or at compile time (it reads only weights).
#include <optional>
#include <vector>

#include "derive/matching.h"
#include "derive/state.h"

namespace tessera::derive {

// FLOPs (float arithmetic per point, plus one combine per summation point), elements read and
// written (whole tensors), and their ratio.
struct ScopeCost {
  double flops = 0;
  double elements = 0;
  double intensity() const { return elements > 0 ? flops / elements : 0; }
};
ScopeCost scope_cost(const ir::Tensor& scope);
// Memory-bound by EinNet's rule (intensity < DeriveConstants::kEOperatorIntensity).
bool is_eoperator(const ir::Tensor& scope);

// True when `t` is a weight or a scope that reads only weights (transitively): computable at
// compile time.
bool is_weight_only(const ir::Tensor& t, const DeriveContext& ctx);

// How each scope of a state would run.
enum class ScopeRole { kOperator, kEOperator, kCompileTime };
const char* scope_role_name(ScopeRole r);
struct ScopeChoice {
  ir::Tensor scope;
  ScopeRole role = ScopeRole::kEOperator;
  std::optional<OperatorMatch> match;  // for kOperator
  ScopeCost cost;
};
// Per scope, producers first: compile-time when weight-only; else an operator when one of the
// table's operators matches at distance 0 and the scope is not memory-bound; else an eOperator.
std::vector<ScopeChoice> instantiate(const State& s, const DeriveContext& ctx);

}  // namespace tessera::derive
