#pragma once
// Shared by the DietCode tests: a small dense layer with a dynamic row count, and a check that
// a kernel run at some sizes writes what the reference interpreter computes there.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <vector>

#include "const_dims.h"
#include "ir/eval.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "tune/dynamic/dynamic_kernel.h"
#include "tune/dynamic/workload.h"

namespace tessera::testing {

// Y[rows*T, n] = X[rows*T, k] W[n, k]^T with T in [lo, hi]; `prefix` renames every tensor.
struct DynamicDense {
  ir::Var t;
  ir::Tensor x, w, y;
  DynamicDense(int64_t rows, int64_t lo, int64_t hi, int64_t k = 24, int64_t n = 40,
               const std::string& prefix = "") {
    t = ir::size_var("T", lo, hi);
    x = ir::placeholder(prefix + "X", {ir::mul(ir::int_imm(rows), t), ir::int_imm(k)});
    w = ir::placeholder(prefix + "W", dims({n, k}));
    y = ops::dense(x, w, nullptr, prefix + "dense");
  }
  // `constant_inputs`: {1} makes W a weight (read packed once).
  tune::dynamic::DynamicWorkload workload(std::vector<int> constant_inputs = {}) const {
    return tune::dynamic::DynamicWorkload::create({y}, {x, w}, "dense", constant_inputs);
  }
};

inline std::vector<int64_t> shape_at(const ir::Tensor& t,
                                     const std::map<const ir::ExprNode*, int64_t>& sizes) {
  ir::EvalEnv env;
  for (const auto& [v, x] : sizes) env.vars[v] = ir::Scalar::of_int(x);
  std::vector<int64_t> s;
  for (const ir::Expr& d : t->shape) s.push_back(ir::evaluate(d, env).i);
  return s;
}

// Runs `run` (buffers = inputs then outputs) at `sizes` on random inputs and compares every
// output with the reference interpreter of `w`'s symbolic DAG. Sizes may lie outside the
// workload's ranges (the reference does not check them).
inline void expect_runs_like_reference(
    const tune::dynamic::DynamicWorkload& w, const tune::dynamic::SizePoint& sizes,
    const std::function<void(const std::vector<void*>&, const tune::dynamic::SizePoint&)>& run,
    uint64_t seed = 3, double tol = 1e-4) {
  const auto sm = w.size_map(sizes);
  std::map<const ir::TensorNode*, runtime::NDArray> ins;
  std::vector<runtime::NDArray> arrays;
  for (size_t i = 0; i < w.inputs().size(); ++i) {
    arrays.push_back(
        runtime::NDArray::random(w.inputs()[i]->dtype, shape_at(w.inputs()[i], sm), seed + i));
    ins[w.inputs()[i].get()] = arrays.back();
  }
  for (const ir::Tensor& o : w.outputs()) {
    arrays.emplace_back(o->dtype, shape_at(o, sm));
    arrays.back().fill(12345.0);  // unwritten elements show as mismatches
  }
  std::vector<void*> ptrs;
  for (auto& a : arrays) ptrs.push_back(a.data());
  run(ptrs, sizes);
  const std::vector<runtime::NDArray> want = ops::run_reference(w.outputs(), ins, sm);
  for (size_t o = 0; o < want.size(); ++o) {
    const runtime::CompareResult r =
        runtime::allclose(arrays[w.inputs().size() + o], want[o], tol, tol);
    EXPECT_TRUE(r.ok) << "sizes " << ::testing::PrintToString(sizes) << ": " << r.message;
  }
}

// A call of `k` as its callers make it: each packed argument made from the plain input first
// (buffers = the workload's inputs then outputs, as expect_runs_like_reference passes them).
inline std::function<void(const std::vector<void*>&, const tune::dynamic::SizePoint&)> packed_run(
    const tune::dynamic::DynamicKernel& k, const tune::dynamic::DynamicWorkload& w) {
  return [&k, &w](const std::vector<void*>& buffers, const tune::dynamic::SizePoint& sizes) {
    std::vector<void*> ptrs = buffers;
    std::vector<runtime::NDArray> packed;
    for (const tune::dynamic::PackedArgument& a : k.packed_constants().arguments()) {
      const size_t i = static_cast<size_t>(a.input);
      packed.emplace_back(w.inputs()[i]->dtype, std::vector<int64_t>{a.numel});
      k.packed_constants().pack(a.input, buffers[i], packed.back().data());
      ptrs[i] = packed.back().data();
    }
    k.run(ptrs, sizes);
  };
}

}  // namespace tessera::testing
