// Tessera kernels on PyTorch's own threads.
//
// ATen runs its ops on an OpenMP team whose idle threads spin for a while after each op. A
// Tessera kernel that runs right after an ATen op on Tessera's own pool then shares the cores
// with those spinning threads: on a 2-core machine a MobileNetV2 1x1 convolution measured 3-15 ms
// inside the model against 0.3 ms on its own. Handing Tessera's parallel loops to the same
// OpenMP runtime (GOMP_parallel of the libgomp torch loaded; Intel's libiomp5 exports the same
// entry point) leaves one set of threads in the process.
//
// The symbol is looked up at run time in the OpenMP library torch already loaded, never linked:
// linking the system libgomp would start a second OpenMP runtime with a second team. Its
// omp_get_max_threads gives the team size torch.set_num_threads chose, so Tessera's loops follow
// that setting unless tessera.set_num_threads pins a count.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstring>
#include <string>

#include "python/bindings.h"
#include "runtime/parallel.h"

namespace py = pybind11;

namespace tessera::python {

namespace {

using GompParallel = void (*)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);

GompParallel g_gomp_parallel = nullptr;
int (*g_omp_get_max_threads)() = nullptr;

// Path of the first loaded shared object whose file name contains one of the OpenMP runtimes.
std::string loaded_openmp_library() {
  std::string found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* out) -> int {
        const char* name = info->dlpi_name;
        if (name == nullptr || *name == '\0') return 0;
        const char* base = std::strrchr(name, '/');
        base = base ? base + 1 : name;
        if (std::strstr(base, "libgomp") || std::strstr(base, "libiomp")) {
          *static_cast<std::string*>(out) = name;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

void launch_on_openmp(void (*member)(void*), void* data, int num_threads) {
  g_gomp_parallel(member, data, static_cast<unsigned>(num_threads), 0);
}

// libgomp's team does not survive fork(): a forked child that enters a parallel region after
// the parent used one hangs (torch's own ops included). Tessera's own pool starts afresh in a
// child, so children (e.g. forked data-loader workers) go back to it.
void use_own_pool_in_child() { runtime::set_team_launcher(nullptr); }

// Looks up GOMP_parallel once; returns the library it came from ("" when none is loaded).
std::string resolve_openmp() {
  static const std::string library = [] {
    pthread_atfork(nullptr, nullptr, &use_own_pool_in_child);
    std::string path = loaded_openmp_library();
    if (path.empty()) return std::string();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (handle == nullptr) return std::string();
    g_gomp_parallel = reinterpret_cast<GompParallel>(dlsym(handle, "GOMP_parallel"));
    g_omp_get_max_threads = reinterpret_cast<int (*)()>(dlsym(handle, "omp_get_max_threads"));
    return g_gomp_parallel ? path : std::string();
  }();
  return library;
}

}  // namespace

void bind_host_threads(py::module_& m) {
  m.def(
      "use_openmp_threads",
      [](bool enable) -> std::string {
        if (!enable) {
          runtime::set_team_launcher(nullptr);
          return "";
        }
        std::string library = resolve_openmp();
        if (library.empty()) {
          runtime::set_team_launcher(nullptr);
        } else {
          runtime::set_team_launcher(&launch_on_openmp, g_omp_get_max_threads);
        }
        return library;
      },
      py::arg("enable"),
      "Runs Tessera's parallel loops on the OpenMP team of the OpenMP runtime already loaded in "
      "the process (torch's), as many threads as it would use (torch.set_num_threads) unless "
      "set_num_threads pinned a count; or on Tessera's own pool (enable=False). Returns the "
      "OpenMP library used, '' when Tessera's pool is in use (none loaded, or disabled).");
  m.def(
      "thread_pool", [] { return runtime::team_launcher() ? "openmp" : "tessera"; },
      "Which threads run Tessera's parallel loops: 'openmp' (the host's team) or 'tessera'.");
}

}  // namespace tessera::python
