#include "runtime/cuda/interpreter_check.h"

#include <map>

#include "loop/interpreter.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "runtime/verify.h"
#include "schedule/gpu/gpu_program.h"
#include "util/check.h"

namespace tessera::runtime::cuda {

namespace {

std::vector<int64_t> constant_shape(const ir::Tensor& t) {
  std::vector<int64_t> s;
  for (const ir::Expr& d : t->shape) {
    TESSERA_CHECK(d->is_const_int())
        << "check_gpu_schedule: " << t->name << " has a symbolic shape";
    s.push_back(d->int_value);
  }
  return s;
}

void run_case(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
              uint64_t seed, double rtol, double atol, InterpreterCase* c) {
  const schedule::gpu::GpuProgram program =
      schedule::gpu::lower_gpu_program(outputs, inputs, c->name);
  c->schedule = program.schedule();
  std::map<const ir::TensorNode*, NDArray> by_tensor;
  std::vector<NDArray> arrays;  // program.buffers(): inputs, outputs, temporaries
  for (size_t i = 0; i < inputs.size(); ++i) {
    arrays.push_back(NDArray::random(inputs[i]->dtype, constant_shape(inputs[i]), seed + i));
    by_tensor[inputs[i].get()] = arrays.back();
  }
  for (const ir::Tensor& t : outputs) arrays.emplace_back(t->dtype, constant_shape(t));
  for (const ir::Tensor& t : program.temporaries) arrays.emplace_back(t->dtype, constant_shape(t));
  for (const schedule::gpu::GpuLaunch& launch : program.launches) {
    std::vector<void*> ptrs;
    for (int b : launch.buffers) ptrs.push_back(arrays[b].data());
    const loop::GpuCheckReport report = loop::interpret_gpu(launch.func, ptrs, {});
    c->races += report.races;
    c->out_of_bounds += report.out_of_bounds;
    c->uninitialized_reads += report.uninitialized_reads;
    if (!report.messages.empty() && c->message.empty()) c->message = report.messages[0];
  }
  const std::vector<NDArray> want = ops::run_reference(outputs, by_tensor);
  c->matches = true;
  for (size_t o = 0; o < outputs.size(); ++o) {
    const NDArray& got = arrays[inputs.size() + o];
    TESSERA_CHECK(got.dtype == ir::DType::kFloat32)
        << "check_gpu_schedule: output " << outputs[o]->name << " is not float32";
    const CompareResult r = allclose(got.f32(), want[o].f32(), got.numel(), rtol, atol);
    if (!r.ok && c->matches) {
      c->matches = false;
      if (c->message.empty()) c->message = outputs[o]->name + ": " + r.message;
    }
  }
}

}  // namespace

InterpreterCase check_gpu_schedule(const std::vector<ir::Tensor>& outputs,
                                   const std::vector<ir::Tensor>& inputs, const std::string& name,
                                   uint64_t seed, double rtol, double atol) {
  InterpreterCase c;
  c.name = name;
  try {
    run_case(outputs, inputs, seed, rtol, atol, &c);
  } catch (const Error& e) {
    c.matches = false;
    c.message = e.what();
  }
  return c;
}

}  // namespace tessera::runtime::cuda
