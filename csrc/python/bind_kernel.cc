// Building and running kernels from Python. Tensors cross the boundary as raw data pointers:
// the Python layer (tessera/kernel.py) checks dtype, device, contiguity and shapes first.
#include <pybind11/stl.h>

#include "compiler/compile.h"
#include "ir/eval.h"
#include "ir/printer.h"
#include "loop/printer.h"
#include "python/bindings.h"
#include "python/kernel_call.h"
#include "runtime/measure.h"
#include "runtime/program.h"
#include "util/check.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

// A compiled kernel and the report of how it was made (_C.compile).
struct PyKernel {
  std::shared_ptr<const compiler::BuiltKernel> built;
  compiler::CompileReport report;

  ir::EvalEnv env_for(const std::vector<int64_t>& sizes) const {
    const auto& vars = built->func().size_vars;
    TESSERA_CHECK(sizes.size() == vars.size())
        << "kernel takes " << vars.size() << " sizes, got " << sizes.size();
    ir::EvalEnv env;
    for (size_t i = 0; i < vars.size(); ++i) env.vars[vars[i].get()] = ir::Scalar::of_int(sizes[i]);
    return env;
  }

  // Size-variable values read off the concrete shapes of the inputs.
  std::vector<int64_t> infer_sizes(const std::vector<std::vector<int64_t>>& shapes) const {
    const auto& inputs = built->plan().inputs;
    TESSERA_CHECK(shapes.size() == inputs.size())
        << "kernel takes " << inputs.size() << " inputs, got " << shapes.size();
    std::map<const ir::ExprNode*, int64_t> found;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const auto& dims = inputs[i]->shape;
      TESSERA_CHECK(shapes[i].size() == dims.size())
          << "input " << inputs[i]->name << " has " << dims.size() << " dims, got "
          << shapes[i].size();
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d]->is_var()) found.emplace(dims[d].get(), shapes[i][d]);
      }
    }
    std::vector<int64_t> sizes;
    for (const ir::Var& v : built->func().size_vars) {
      auto it = found.find(v.get());
      TESSERA_CHECK(it != found.end())
          << "size " << v->name << " is not the extent of any input dimension";
      sizes.push_back(it->second);
    }
    // Check every input dim against the inferred sizes.
    ir::EvalEnv env = env_for(sizes);
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (size_t d = 0; d < inputs[i]->shape.size(); ++d) {
        int64_t want = ir::evaluate(inputs[i]->shape[d], env).i;
        TESSERA_CHECK(want == shapes[i][d]) << "input " << inputs[i]->name << " dim " << d << " is "
                                            << shapes[i][d] << ", expected " << want;
      }
    }
    return sizes;
  }

  std::vector<std::vector<int64_t>> output_shapes(const std::vector<int64_t>& sizes) const {
    ir::EvalEnv env = env_for(sizes);
    std::vector<std::vector<int64_t>> out;
    for (const ir::Tensor& t : built->plan().outputs) {
      std::vector<int64_t> s;
      for (const ir::Expr& d : t->shape) s.push_back(ir::evaluate(d, env).i);
      out.push_back(s);
    }
    return out;
  }

  void run(const std::vector<uintptr_t>& ptrs, const std::vector<int64_t>& sizes) const {
    std::vector<void*> bufs;
    for (uintptr_t p : ptrs) bufs.push_back(reinterpret_cast<void*>(p));
    py::gil_scoped_release release;  // kernels run on Tessera's own thread pool
    built->run(bufs, sizes);
  }
};

// Program.__call__: the pointers arrive as the call's own argument tuple and are read with the
// C API, which keeps a call to a few hundred nanoseconds plus the kernels.
void call_program(runtime::Program& p, const py::args& args) {
  const size_t ni = static_cast<size_t>(p.num_inputs());
  const size_t n = ni + static_cast<size_t>(p.num_outputs());
  TESSERA_CHECK(args.size() == n) << "program takes " << p.num_inputs() << " input and "
                                  << p.num_outputs() << " output pointers, got " << args.size();
  runtime::CallPointers ptrs(n);
  for (size_t i = 0; i < n; ++i) {
    PyObject* o = PyTuple_GET_ITEM(args.ptr(), static_cast<Py_ssize_t>(i));
    ptrs[i] = PyLong_AsVoidPtr(o);
    if (ptrs[i] == nullptr && PyErr_Occurred()) throw py::error_already_set();
  }
  py::gil_scoped_release release;  // kernels run on Tessera's own thread pool
  p.run_raw(ptrs.data(), ptrs.data() + ni);
}

}  // namespace

void bind_kernel(py::module_& m) {
  m.def("live_kernels", &codegen::live_kernels,
        "Compiled kernels alive in this process (each holds its code in the JIT).");
  py::class_<PyKernel>(m, "Kernel")
      .def("run", &PyKernel::run, py::arg("ptrs"), py::arg("sizes"),
           "Runs on raw data pointers (inputs then outputs) with the size values.")
      .def("infer_sizes", &PyKernel::infer_sizes, py::arg("input_shapes"))
      .def("output_shapes", &PyKernel::output_shapes, py::arg("sizes"))
      .def(
          "runner",
          [](const PyKernel& k) {
            KernelRunner r;
            r.run = [built = k.built](const std::vector<void*>& buffers,
                                      const std::vector<int64_t>& sizes) {
              built->run(buffers, sizes);
            };
            r.output_shapes = [k](const std::vector<int64_t>& sizes) {
              return k.output_shapes(sizes);
            };
            return r;
          },
          "The kernel's checked run and output shapes, for _C.KernelCall.")
      .def_property_readonly(
          "size_names",
          [](const PyKernel& k) {
            std::vector<std::string> names;
            for (const ir::Var& v : k.built->func().size_vars) names.push_back(v->name);
            return names;
          },
          "Names of the size variables run() takes values for, in order.")
      .def(
          "measure",
          [](const PyKernel& k, const std::vector<uintptr_t>& ptrs,
             const std::vector<int64_t>& sizes, double min_time_ms, int warmup) {
            std::vector<void*> bufs;
            for (uintptr_t p : ptrs) bufs.push_back(reinterpret_cast<void*>(p));
            runtime::MeasureOptions opts;
            opts.min_time_ms = min_time_ms;
            opts.warmup = warmup;
            runtime::MeasureResult r;
            {
              py::gil_scoped_release release;
              r = runtime::measure([&] { k.built->run(bufs, sizes); }, opts);
            }
            py::dict d;
            d["median_ms"] = r.median_ms;
            d["min_ms"] = r.min_ms;
            d["mean_ms"] = r.mean_ms;
            d["repeats"] = r.repeats;
            return d;
          },
          py::arg("ptrs"), py::arg("sizes"), py::arg("min_time_ms") = 200.0, py::arg("warmup") = 2,
          "Times the kernel in C++ (median of repeats).")
      .def_property_readonly(
          "prepacks",
          [](const PyKernel& k) {
            std::vector<std::pair<int, int64_t>> out;
            for (const compiler::Prepack& p : k.built->prepacks()) {
              out.emplace_back(p.input, p.kernel->arg_numels({})[1]);
            }
            return out;
          },
          "(input position, elements of its packed copy) of each input the kernel reads "
          "prepacked: pass the packed copy (made by prepack) in the input's place.")
      .def(
          "prepack",
          [](const PyKernel& k, int input, uintptr_t src, uintptr_t dst) {
            for (const compiler::Prepack& p : k.built->prepacks()) {
              if (p.input != input) continue;
              py::gil_scoped_release release;
              p.kernel->run({reinterpret_cast<void*>(src), reinterpret_cast<void*>(dst)}, {});
              return;
            }
            TESSERA_FAIL() << "input " << input << " is not read prepacked";
          },
          py::arg("input"), py::arg("src"), py::arg("dst"),
          "Writes the packed copy of input `input` (data pointer `src`) to `dst`, which holds "
          "the element count prepacks gives.")
      .def_property_readonly("jit_ms", [](const PyKernel& k) { return k.built->jit_ms(); })
      .def_property_readonly(
          "code_bytes",
          [](const PyKernel& k) { return k.built->kernel()->compiled().code_bytes(); },
          "Bytes of machine code and data the kernel holds in the JIT.")
      .def_property_readonly("lower_ms", [](const PyKernel& k) { return k.built->lower_ms(); })
      .def_property_readonly(
          "jit_times",
          [](const PyKernel& k) {
            const codegen::CompileTimes& t = k.built->kernel()->compiled().compile_times();
            return std::map<std::string, double>{{"ir_gen_ms", t.ir_gen_ms},
                                                 {"opt_ms", t.opt_ms},
                                                 {"codegen_ms", t.codegen_ms},
                                                 {"link_ms", t.link_ms},
                                                 {"total_ms", t.total_ms}};
          },
          "Milliseconds of each JIT phase: LLVM IR generation, optimisation, machine code, "
          "linking.")
      .def_property_readonly("schedule", [](const PyKernel& k) { return k.built->schedule(); })
      .def_readonly("report", &PyKernel::report)
      .def_property_readonly("loop_ir",
                             [](const PyKernel& k) { return loop::to_string(k.built->func()); })
      .def_property_readonly(
          "llvm_ir", [](const PyKernel& k) { return k.built->kernel()->compiled().llvm_ir(); })
      .def_property_readonly(
          "assembly", [](const PyKernel& k) { return k.built->kernel()->compiled().assembly(); })
      .def_property_readonly("num_inputs",
                             [](const PyKernel& k) { return k.built->plan().inputs.size(); })
      .def_property_readonly("num_outputs",
                             [](const PyKernel& k) { return k.built->plan().outputs.size(); })
      .def_property_readonly("output_dtypes", [](const PyKernel& k) {
        std::vector<std::string> out;
        for (const ir::Tensor& t : k.built->plan().outputs) out.push_back(ir::dtype_name(t->dtype));
        return out;
      });
  py::class_<runtime::Program, std::shared_ptr<runtime::Program>>(m, "Program")
      .def(py::init(
               [](const std::vector<std::tuple<std::string, int, int64_t>>& buffers,
                  const std::vector<
                      std::tuple<const PyKernel*, std::vector<int>, std::vector<int64_t>>>& steps) {
                 std::vector<runtime::ProgramBuffer> bufs;
                 for (const auto& [kind, io, bytes] : buffers) {
                   runtime::ProgramBuffer b;
                   if (kind == "input") {
                     b.kind = runtime::ProgramBuffer::Kind::kInput;
                   } else if (kind == "output") {
                     b.kind = runtime::ProgramBuffer::Kind::kOutput;
                   } else {
                     TESSERA_CHECK(kind == "temp") << "buffer kind must be input, output or temp";
                   }
                   b.io_index = io;
                   b.bytes = bytes;
                   bufs.push_back(b);
                 }
                 std::vector<runtime::ProgramStep> st;
                 for (const auto& [k, ids, sizes] : steps) {
                   st.push_back(runtime::ProgramStep{k->built->kernel(), ids, sizes});
                 }
                 return std::make_shared<runtime::Program>(std::move(bufs), std::move(st));
               }),
           py::arg("buffers"), py::arg("steps"),
           "A graph segment run from C++: buffers are (kind, io_index, bytes) with kind "
           "input/output/temp; steps are (kernel, buffer ids, sizes). Intermediates share one "
           "arena planned by liveness.")
      .def(
          "run",
          [](runtime::Program& p, const std::vector<uintptr_t>& ins,
             const std::vector<uintptr_t>& outs) {
            std::vector<void*> i, o;
            for (uintptr_t x : ins) i.push_back(reinterpret_cast<void*>(x));
            for (uintptr_t x : outs) o.push_back(reinterpret_cast<void*>(x));
            py::gil_scoped_release release;
            p.run(i, o);
          },
          py::arg("inputs"), py::arg("outputs"))
      .def("__call__", &call_program,
           "program(*ptrs): runs on raw data pointers, the inputs then the outputs. The per-call "
           "path of the backend's runner: positional ints, nothing converted to lists.")
      .def("offset_of", &runtime::Program::offset_of, py::arg("buffer"),
           "Arena offset of a temp buffer (-1 for inputs and outputs).")
      .def_property_readonly("num_inputs", &runtime::Program::num_inputs)
      .def_property_readonly("num_outputs", &runtime::Program::num_outputs)
      .def_property_readonly("num_steps", &runtime::Program::num_steps)
      .def_property_readonly("arena_bytes", &runtime::Program::arena_bytes)
      .def_property_readonly("temp_bytes", &runtime::Program::temp_bytes);
  m.def(
      "compile",
      [](const std::vector<PyTensor>& outputs, const std::vector<PyTensor>& inputs,
         const compiler::CompileRequest& request) {
        const std::vector<ir::Tensor> outs = unwrap(outputs), ins = unwrap(inputs);
        compiler::CompileResult r;
        {
          py::gil_scoped_release release;  // tuning runs candidates on Tessera's thread pool
          r = compiler::compile(outs, ins, request);
        }
        return PyKernel{std::move(r.kernel), std::move(r.report)};
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("request") = compiler::CompileRequest(),
      "The one compile call: the kernel computing `outputs` from `inputs` (in ABI order), built "
      "as `request` (a CompileRequest) asks; Kernel.report says how (schedule, its source, every "
      "candidate measured).");
}

}  // namespace tessera::python
