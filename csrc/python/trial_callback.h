#pragma once
// A Python callable as the compile pipeline's per-trial callback (bind_compile.cc).
#include <pybind11/pybind11.h>

#include "compiler/compile.h"

namespace tessera::python {

// Called with the GIL taken (compiles run with it released); an exception in the callable is
// reported once as a RuntimeWarning and turns the callback off. None: no callback.
compiler::TrialCallback trial_callback(pybind11::object fn);

}  // namespace tessera::python
