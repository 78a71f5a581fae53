// _C.attention_kernel: the fused attention kernel (schedule/attention.h) for the backend's
// attention partitions (tessera.backend.attention).
#include <pybind11/stl.h>

#include <memory>

#include "loop/printer.h"
#include "python/bindings.h"
#include "runtime/kernel.h"
#include "runtime/parallel.h"
#include "schedule/attention.h"
#include "schedule/default_schedule.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

struct AttentionKernel {
  schedule::AttentionSpec spec;
  schedule::AttentionTiles tiles;
  std::shared_ptr<const runtime::Kernel> kernel;
  std::string loop_ir;
};

template <typename T>
T get_or(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

schedule::AttentionSpec spec_from(const py::dict& d) {
  schedule::AttentionSpec s;
  s.batch = d["batch"].cast<int64_t>();
  s.q_heads = d["q_heads"].cast<int64_t>();
  s.kv_heads = d["kv_heads"].cast<int64_t>();
  s.q_len = d["q_len"].cast<int64_t>();
  s.kv_len = d["kv_len"].cast<int64_t>();
  s.head_dim = d["head_dim"].cast<int64_t>();
  s.value_dim = d["value_dim"].cast<int64_t>();
  s.causal = get_or<bool>(d, "causal", false);
  s.scale = d["scale"].cast<double>();
  s.q_strides = d["q_strides"].cast<std::vector<int64_t>>();
  s.k_strides = d["k_strides"].cast<std::vector<int64_t>>();
  s.v_strides = d["v_strides"].cast<std::vector<int64_t>>();
  s.out_strides = d["out_strides"].cast<std::vector<int64_t>>();
  s.lse_strides = d["lse_strides"].cast<std::vector<int64_t>>();
  if (d.contains("mask_strides") && !d["mask_strides"].is_none()) {
    s.has_mask = true;
    s.mask_strides = d["mask_strides"].cast<std::vector<int64_t>>();
  }
  return s;
}

py::dict tiles_dict(const schedule::AttentionTiles& t) {
  py::dict d;
  d["rows_per_task"] = t.rows_per_task;
  d["row_tile"] = t.row_tile;
  d["key_block"] = t.key_block;
  return d;
}

}  // namespace

void bind_attention(py::module_& m) {
  py::class_<AttentionKernel, std::shared_ptr<AttentionKernel>>(
      m, "AttentionKernel", "A compiled fused attention kernel (see attention_kernel).")
      .def(
          "run",
          [](const AttentionKernel& k, const std::vector<uintptr_t>& ptrs) {
            std::vector<void*> buffers;
            for (uintptr_t p : ptrs) buffers.push_back(reinterpret_cast<void*>(p));
            py::gil_scoped_release release;  // kernels run on the thread pool
            k.kernel->run(buffers, {});
          },
          py::arg("ptrs"), "Runs on data pointers in argument order: q, k, v, [mask], out, lse.")
      .def_property_readonly("loop_ir", [](const AttentionKernel& k) { return k.loop_ir; })
      .def_property_readonly(
          "assembly", [](const AttentionKernel& k) { return k.kernel->compiled().assembly(); })
      .def_property_readonly("jit_ms",
                             [](const AttentionKernel& k) { return k.kernel->compile_ms(); })
      .def_property_readonly("tiles", [](const AttentionKernel& k) { return tiles_dict(k.tiles); });
  m.def(
      "attention_tile_candidates",
      [](const py::dict& spec) {
        py::list out;
        for (const schedule::AttentionTiles& t : schedule::attention_tile_candidates(
                 spec_from(spec), schedule::Target::host().vector_lanes,
                 runtime::get_num_threads())) {
          out.append(tiles_dict(t));
        }
        return out;
      },
      py::arg("spec"),
      "Tiles (dicts for attention_kernel's `tiles`) worth timing for `spec`, the rules' first.");
  m.def(
      "attention_kernel",
      [](const py::dict& spec, const py::object& tiles, bool keep_source) {
        auto k = std::make_shared<AttentionKernel>();
        k->spec = spec_from(spec);
        const int64_t lanes = schedule::Target::host().vector_lanes;
        k->tiles = schedule::default_attention_tiles(k->spec, lanes, runtime::get_num_threads());
        if (!tiles.is_none()) {
          const py::dict t = tiles.cast<py::dict>();
          k->tiles.rows_per_task = get_or<int64_t>(t, "rows_per_task", k->tiles.rows_per_task);
          k->tiles.row_tile = get_or<int64_t>(t, "row_tile", k->tiles.row_tile);
          k->tiles.key_block = get_or<int64_t>(t, "key_block", k->tiles.key_block);
        }
        loop::LoweredFunc f = schedule::lower_attention(k->spec, k->tiles, lanes);
        k->loop_ir = loop::to_string(f);
        py::gil_scoped_release release;
        codegen::CompileOptions options;
        options.keep_ir = options.keep_asm = keep_source;
        k->kernel = std::make_shared<const runtime::Kernel>(runtime::Kernel::compile(f, options));
        return k;
      },
      py::arg("spec"), py::arg("tiles") = py::none(), py::arg("keep_source") = false,
      "Compiles softmax(Q K^T * scale + mask) V for `spec` (a dict: batch, q_heads, kv_heads, "
      "q_len, kv_len, head_dim, value_dim, causal, scale, and the element strides of q, k, v, "
      "out (4 each), lse (3) and, for an additive float mask, mask_strides). `tiles` overrides "
      "rows_per_task, row_tile or key_block; keep_source keeps the host assembly. Raises when the "
      "kernel cannot compute the spec.");
}

}  // namespace tessera::python
