#include "derive/fold.h"

#include "ops/reference.h"

namespace tessera::derive {

using ir::Tensor;

namespace {

// Weight-only scopes whose values the rest of the program needs.
std::vector<Tensor> maximal_weight_scopes(const State& s, const DeriveContext& ctx) {
  std::vector<Tensor> out;
  for (const Tensor& t : scopes(s)) {
    if (!is_weight_only(t, ctx)) continue;
    bool needed = is_output(s, t);
    for (const Tensor& c : consumers(s, t)) needed |= !is_weight_only(c, ctx);
    if (needed) out.push_back(t);
  }
  return out;
}

}  // namespace

FoldedProgram fold_compile_time(const State& s, const DeriveContext& ctx,
                                const std::map<const ir::TensorNode*, runtime::NDArray>& weights) {
  FoldedProgram out;
  out.ctx = ctx;
  std::map<const ir::TensorNode*, Replacement> repl;
  ops::ReferenceOptions opts;
  opts.out_of_bounds_reads_pad_value = true;  // EinNet padding, as everywhere in derivation
  for (const Tensor& t : maximal_weight_scopes(s, ctx)) {
    runtime::NDArray values = ops::run_reference({t}, weights, {}, opts)[0];
    auto p =
        std::make_shared<ir::TensorNode>(*ir::placeholder(t->name + "_folded", t->shape, t->dtype));
    p->pad_value = t->pad_value;  // reads outside it keep seeing the scope's pad value
    out.constants.emplace(p.get(), std::move(values));
    out.ctx.weights.insert(p.get());
    repl[t.get()] = {p, {}};
  }
  out.state = repl.empty() ? s : replace_scopes(s, repl, "fold_compile_time");
  return out;
}

}  // namespace tessera::derive
