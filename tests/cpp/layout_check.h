#pragma once
// Checks of relaid DAGs for the layout tests: the values a relaid DAG (or a kernel built from
// it) computes must be the original DAG's values stored in the layouts.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "compiler/compile.h"
#include "layout/propagate.h"
#include "layout/relayout.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"

namespace tessera::testing {

struct LayoutCase {
  std::vector<ir::Tensor> outputs, inputs;
  layout::LayoutMap layouts;  // propagated before use
};

// `logical` (the values of a tensor shaped like `like`) stored in `l`.
inline runtime::NDArray stored_in(const runtime::NDArray& logical, const ir::Tensor& like,
                                  const layout::Layout& l) {
  ir::Tensor p = ir::placeholder(like->name + "_logical", like->shape, like->dtype);
  return ops::run_reference({layout::to_physical(p, l, like->name + "_stored")},
                            {{p.get(), logical}})[0];
}

// Random inputs in the relaid DAG's layouts and the original outputs stored in theirs.
struct RelaidData {
  std::map<const ir::TensorNode*, runtime::NDArray> inputs;  // by relaid input
  std::vector<void*> input_ptrs;                             // in input order
  std::vector<runtime::NDArray> want;                        // per output, in its layout
};

inline RelaidData relaid_data(const LayoutCase& c, const layout::Relaid& r) {
  const layout::LayoutMap m = layout::propagate_layouts(c.outputs, c.layouts);
  RelaidData d;
  std::map<const ir::TensorNode*, runtime::NDArray> orig;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    runtime::NDArray a =
        runtime::NDArray::random(c.inputs[i]->dtype, layout::constant_shape(c.inputs[i]), 40 + i);
    orig[c.inputs[i].get()] = a;
    auto l = m.find(c.inputs[i]->name);
    d.inputs[r.inputs[i].get()] = l == m.end() ? a : stored_in(a, c.inputs[i], l->second);
    d.input_ptrs.push_back(d.inputs[r.inputs[i].get()].data());
  }
  d.want = ops::run_reference(c.outputs, orig);
  for (size_t o = 0; o < d.want.size(); ++o) {
    auto l = m.find(c.outputs[o]->name);
    if (l != m.end()) d.want[o] = stored_in(d.want[o], c.outputs[o], l->second);
  }
  return d;
}

// Runs `k` (built from relaid outputs `outs`) on the data and compares every output.
inline void expect_kernel_matches(const compiler::BuiltKernel& k,
                                  const std::vector<ir::Tensor>& outs, const RelaidData& d) {
  std::vector<runtime::NDArray> got;
  std::vector<void*> args = d.input_ptrs;
  for (const ir::Tensor& o : outs) {
    got.emplace_back(o->dtype, layout::constant_shape(o));
    args.push_back(got.back().data());
  }
  ASSERT_TRUE(k.prepacks().empty()) << "the check passes inputs unpacked";
  k.run(args, {});
  for (size_t o = 0; o < d.want.size(); ++o) {
    runtime::CompareResult cmp = runtime::allclose(got[o], d.want[o], 1e-4, 1e-4);
    EXPECT_TRUE(cmp.ok) << cmp.message << "\nschedule: " << k.schedule().dump();
  }
}

// The relaid DAG's reference values, and kernels built from it in each of `modes`, equal the
// original values in their layouts.
inline void expect_relaid_values(const LayoutCase& c,
                                 const std::vector<compiler::TuneMode>& modes = {
                                     compiler::TuneMode::kDefault,
                                     compiler::TuneMode::kConstruct}) {
  const layout::Relaid r =
      layout::apply_layouts(c.outputs, c.inputs, layout::propagate_layouts(c.outputs, c.layouts));
  const RelaidData d = relaid_data(c, r);
  std::vector<runtime::NDArray> ref = ops::run_reference(r.outputs, d.inputs);
  for (size_t o = 0; o < d.want.size(); ++o) {
    runtime::CompareResult cmp = runtime::allclose(ref[o], d.want[o], 1e-9, 1e-9);
    EXPECT_TRUE(cmp.ok) << "reference of the relaid DAG: " << cmp.message;
  }
  for (compiler::TuneMode mode : modes) {
    compiler::CompileRequest req;
    req.tune = mode;
    compiler::CompileResult k = compiler::compile(r.outputs, r.inputs, req);
    SCOPED_TRACE(compiler::tune_mode_name(mode));
    expect_kernel_matches(*k.kernel, r.outputs, d);
  }
}

}  // namespace tessera::testing
