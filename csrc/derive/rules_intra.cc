#include "derive/rules_intra.h"

namespace tessera::derive {

std::vector<State> intra_successors(const State& s) {
  std::vector<State> out;
  for (auto* rule : {&summation_splittings, &variable_substitutions, &traversal_mergings,
                     &boundary_relaxings, &boundary_tightenings, &dilated_read_layouts}) {
    std::vector<State> next = rule(s);
    for (State& n : next) out.push_back(std::move(n));
  }
  return out;
}

}  // namespace tessera::derive
