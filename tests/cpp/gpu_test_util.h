#pragma once
// Helpers shared by the GPU schedule tests: run a GPU kernel's loop IR with the GPU-semantics
// interpreter on random inputs and compare its outputs with the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "ir/tensor.h"
#include "loop/interpreter.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"

namespace tessera::gpu_test {

using SizeValues = std::map<const ir::ExprNode*, int64_t>;

inline std::vector<int64_t> concrete(const ir::Tensor& t, const SizeValues& sizes) {
  std::vector<int64_t> s;
  for (const ir::Expr& d : t->shape) {
    s.push_back(d->is_const_int() ? d->int_value : sizes.at(d.get()));
  }
  return s;
}

// Runs `f` (ABI: `ins` then `outs`, then its size variables) with loop::interpret_gpu and
// expects no race, no out-of-bounds access, and every output within `tol` (relative) of
// ops::run_reference.
inline void expect_gpu_matches_reference(const loop::LoweredFunc& f,
                                         const std::vector<ir::Tensor>& outs,
                                         const std::vector<ir::Tensor>& ins,
                                         const SizeValues& sizes = {}, double tol = 1e-5) {
  std::map<const ir::TensorNode*, runtime::NDArray> inputs;
  std::vector<runtime::NDArray> arrays;
  for (size_t i = 0; i < ins.size(); ++i) {
    arrays.push_back(runtime::NDArray::random(ins[i]->dtype, concrete(ins[i], sizes), 17 + i));
    inputs[ins[i].get()] = arrays.back();
  }
  for (const ir::Tensor& t : outs) arrays.emplace_back(t->dtype, concrete(t, sizes));
  std::vector<void*> ptrs;
  for (runtime::NDArray& a : arrays) ptrs.push_back(a.data());
  std::vector<int64_t> size_args;
  for (const ir::Var& v : f.size_vars) size_args.push_back(sizes.at(v.get()));
  const loop::GpuCheckReport report = loop::interpret_gpu(f, ptrs, size_args);
  EXPECT_EQ(report.races, 0) << (report.messages.empty() ? "" : report.messages[0]);
  EXPECT_EQ(report.out_of_bounds, 0) << (report.messages.empty() ? "" : report.messages[0]);
  EXPECT_EQ(report.uninitialized_reads, 0) << (report.messages.empty() ? "" : report.messages[0]);

  const std::vector<runtime::NDArray> want = ops::run_reference(outs, inputs, sizes);
  for (size_t o = 0; o < outs.size(); ++o) {
    const runtime::NDArray& got = arrays[ins.size() + o];
    ASSERT_EQ(got.numel(), want[o].numel());
    for (int64_t i = 0; i < got.numel(); ++i) {
      const float g = got.f32()[i], w = want[o].f32()[i];
      ASSERT_NEAR(g, w, tol * (1 + std::fabs(w))) << outs[o]->name << " at flat index " << i;
    }
  }
}

}  // namespace tessera::gpu_test
