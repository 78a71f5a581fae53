#include "derive/derive_kernel.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "compiler/compile.h"
#include "derive/choose.h"
#include "derive/config.h"
#include "derive/implicit_padding.h"
#include "derive/search.h"
#include "ir/eval.h"
#include "runtime/paired_timing.h"
#include "schedule/tuning_policy.h"

namespace tessera::derive {

namespace {

std::map<const ir::TensorNode*, runtime::NDArray> random_inputs(
    const std::vector<ir::Tensor>& inputs) {
  std::map<const ir::TensorNode*, runtime::NDArray> in;
  uint64_t seed = 11;
  for (const ir::Tensor& p : inputs) {
    in.emplace(p.get(), runtime::NDArray::random(p->dtype, const_shape(p), seed++));
  }
  return in;
}

// A program compiled as it will be used (tuned by `tune`, the weights among its inputs read
// prepacked where its schedule packs them, as the backend runs it), with buffers to run it on.
struct Runnable {
  compiler::CompileResult compiled;
  std::vector<runtime::NDArray> outputs;
  std::vector<runtime::NDArray> packed;  // prepacked copies of weights, made once here
  std::vector<void*> ptrs;

  Runnable(const std::vector<ir::Tensor>& outs, const std::vector<ir::Tensor>& inputs,
           std::map<const ir::TensorNode*, runtime::NDArray>& values, compiler::TuneMode tune,
           const std::vector<int>& weights) {
    compiler::CompileRequest req;
    req.name = "derive_check";
    req.tune = tune;
    req.constant_inputs = weights;
    compiled = compiler::compile(outs, inputs, req);
    for (const ir::Tensor& p : inputs) ptrs.push_back(values.at(p.get()).data());
    for (const ir::Tensor& o : outs) outputs.emplace_back(o->dtype, const_shape(o));
    for (runtime::NDArray& o : outputs) ptrs.push_back(o.data());
    packed = compiled.kernel->pack_prepacked(&ptrs);
  }
  void run() { compiled.kernel->run(ptrs, {}); }
};

double numel_of(const ir::Tensor& t) {
  double n = 1;
  for (int64_t d : const_shape(t)) n *= static_cast<double>(d);
  return n;
}

// Elements of a program's intermediates (scopes that are not outputs).
double intermediate_elements(const State& s) {
  double n = 0;
  for (const ir::Tensor& t : scopes(s)) {
    if (!is_output(s, t)) n += numel_of(t);
  }
  return n;
}

// The derivations (programs some rule made) whose intermediates stay within
// kMaxIntermediateGrowth of the original's inputs and outputs.
SearchResult within_memory(SearchResult result, const std::vector<ir::Tensor>& outputs,
                           const std::vector<ir::Tensor>& inputs) {
  double io = 0;
  for (const ir::Tensor& t : outputs) io += numel_of(t);
  for (const ir::Tensor& t : inputs) io += numel_of(t);
  std::vector<Derivation> kept;
  for (Derivation& d : result.derivations) {
    // A state no rule made is the original program: timed against itself it can only "win"
    // by noise (seen in CI: found, with no rules).
    if (d.state.trace.empty()) continue;
    if (intermediate_elements(d.state) <= DeriveConstants::kMaxIntermediateGrowth * io) {
      kept.push_back(std::move(d));
    }
  }
  result.derivations = std::move(kept);
  return result;
}

}  // namespace

DeriveReport derive_kernel(const std::vector<ir::Tensor>& outputs,
                           const std::vector<ir::Tensor>& inputs, const DeriveOptions& options) {
  DeriveReport rep;
  // Guards that only keep reads inside their tensors (tessera.op's where(...)) are EinNet's
  // implicit padding: the rules and the matching table see the expression without them.
  const State given{outputs, {}};
  const State original = implicit_padding(given);
  DeriveContext ctx;
  for (int i : options.weights) ctx.weights.insert(inputs.at(static_cast<size_t>(i)).get());
  SearchConfig search;
  search.explorative_depth = options.depth;
  search.time_limit_s = options.time_limit_s;
  const SearchResult result =
      within_memory(optimize_program(original, ctx, search), outputs, inputs);
  rep.derivations = static_cast<int>(result.derivations.size());
  rep.states = result.stats.explored;
  rep.generated = result.stats.generated;
  rep.pruned = result.stats.pruned;
  rep.pruned_share = result.stats.explorative_pruned_share();
  rep.search_s = result.stats.seconds;

  const State plain = explicit_padding(given);
  rep.outputs = rep.original = plain.outputs;
  auto in = random_inputs(inputs);
  if (result.derivations.empty()) return rep;
  ChoiceConfig choice_config;
  choice_config.measure = options.measure;
  choice_config.tune = options.tune;
  const Choice choice = choose_by_measurement(original, result, ctx, choice_config);
  rep.original_ms = choice.original_ms;
  if (choice.finalists.empty()) return rep;
  // The choice estimated eOperators and timed operators alone: the original and the finalists
  // are compiled as they will be used and timed side by side (the one noise rule); the fastest
  // derived one must beat the original.
  Runnable before(plain.outputs, inputs, in, options.tune, options.weights);
  std::vector<State> finalists;
  std::vector<std::unique_ptr<Runnable>> after;
  std::vector<std::function<void()>> runs;
  for (int i : choice.finalists) {
    finalists.push_back(explicit_padding(result.derivations[static_cast<size_t>(i)].state));
    after.push_back(std::make_unique<Runnable>(finalists.back().outputs, inputs, in, options.tune,
                                               options.weights));
    runs.push_back([r = after.back().get()] { r->run(); });
  }
  const runtime::PairedTiming t = runtime::time_paired([&] { before.run(); }, runs);
  if (!t.reference_ok) return rep;
  rep.original_ms = t.reference_ms;
  // A finalist that failed has ratio +inf.
  const size_t fastest =
      static_cast<size_t>(std::min_element(t.ratio.begin(), t.ratio.end()) - t.ratio.begin());
  if (!t.ok[fastest]) return rep;
  rep.derived_ms = t.median_ms[fastest];
  if (runtime::paired_winner(t, schedule::tuning_policy().win_margin) < 0) return rep;
  const size_t chosen = static_cast<size_t>(choice.finalists[fastest]);
  const Derivation& d = result.derivations[chosen];
  const State& derived = finalists[fastest];
  rep.rel_error = choice.costs[chosen].rel_error;
  rep.found = true;
  rep.outputs = derived.outputs;
  rep.rules = d.state.trace;
  rep.program = to_string(d.state);
  return rep;
}

}  // namespace tessera::derive
