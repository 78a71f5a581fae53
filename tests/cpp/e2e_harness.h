#pragma once
// Shared harness for end-to-end kernel tests: build a compute DAG, lower it with a schedule,
// run it through the loop-IR interpreter and/or the LLVM JIT, and compare with the
// double-precision reference interpreter of the compute definitions.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/build.h"
#include "loop/interpreter.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "schedule/lower.h"

namespace tessera::testing {

struct Graph {
  Graph(std::vector<ir::Tensor> outs, std::vector<ir::Tensor> ins,
        std::map<const ir::ExprNode*, int64_t> size_values = {})
      : outputs(std::move(outs)), inputs(std::move(ins)), sizes(std::move(size_values)) {}
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor> inputs;
  std::map<const ir::ExprNode*, int64_t> sizes;  // values of symbolic sizes
};

struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-4;
};

// Parallel loops in a loop-IR statement tree (each one a dispatch on the thread pool): kParallel
// loops, or their parallel calls once outlined.
inline int count_parallel_loops(const loop::Stmt& s) {
  if (!s) return 0;
  int n = (s->kind == loop::StmtKind::kFor && s->for_kind == loop::ForKind::kParallel) ||
                  s->kind == loop::StmtKind::kParallelCall
              ? 1
              : 0;
  n += count_parallel_loops(s->body) + count_parallel_loops(s->then_case) +
       count_parallel_loops(s->else_case);
  for (const loop::Stmt& c : s->seq) n += count_parallel_loops(c);
  return n;
}

inline std::vector<int64_t> concrete_shape(const ir::Tensor& t,
                                           const std::map<const ir::ExprNode*, int64_t>& sizes) {
  std::vector<int64_t> s;
  for (const ir::Expr& d : t->shape) {
    if (d->is_const_int()) {
      s.push_back(d->int_value);
    } else {
      auto it = sizes.find(d.get());
      if (it == sizes.end()) throw std::runtime_error("no value for size " + d->name);
      s.push_back(it->second);
    }
  }
  return s;
}

// Runs `g` with `schedule` (default when empty) and checks every output against the reference.
// `use_jit` = false runs the loop-IR interpreter instead of the LLVM JIT.
inline void check_graph(const Graph& g, const std::optional<schedule::KernelSchedule>& sched,
                        bool use_jit, Tolerance tol = {}, uint64_t seed = 7) {
  std::map<const ir::TensorNode*, runtime::NDArray> inputs;
  std::vector<runtime::NDArray> in_arrays;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    in_arrays.push_back(runtime::NDArray::random(g.inputs[i]->dtype,
                                                 concrete_shape(g.inputs[i], g.sizes), seed + i));
    inputs[g.inputs[i].get()] = in_arrays.back();
  }
  std::vector<runtime::NDArray> want = ops::run_reference(g.outputs, inputs, g.sizes);

  std::vector<runtime::NDArray> got;
  std::vector<void*> ptrs;
  for (auto& a : in_arrays) ptrs.push_back(a.data());
  for (const ir::Tensor& o : g.outputs) {
    got.emplace_back(o->dtype, concrete_shape(o, g.sizes));
    got.back().fill(12345.0);  // any unwritten element shows up as a mismatch
  }
  for (auto& a : got) ptrs.push_back(a.data());

  compiler::BuildOptions opts;
  opts.schedule = sched;
  schedule::StagePlan plan =
      schedule::plan_stages(g.outputs, g.inputs, sched ? sched->plan : schedule::PlanChoices{});
  schedule::KernelSchedule ks =
      sched ? *sched : schedule::default_schedule(plan, schedule::Target::host());
  loop::LoweredFunc f = schedule::lower(plan, ks, "kernel");
  std::vector<int64_t> size_values;
  for (const ir::Var& v : f.size_vars) {
    auto it = g.sizes.find(v.get());
    ASSERT_NE(it, g.sizes.end()) << "no value for size " << v->name;
    size_values.push_back(it->second);
  }
  if (use_jit) {
    opts.schedule = ks;
    compiler::BuiltKernel k = compiler::build_cpu(g.outputs, g.inputs, opts);
    k.run(ptrs, size_values);
  } else {
    loop::interpret(f, ptrs, size_values);
  }
  for (size_t i = 0; i < got.size(); ++i) {
    runtime::CompareResult r = runtime::allclose(got[i], want[i], tol.rtol, tol.atol);
    EXPECT_TRUE(r.ok) << "output " << g.outputs[i]->name << ": " << r.message
                      << "\nschedule: " << ks.dump();
  }
}

}  // namespace tessera::testing
