#pragma once
// The `runner` argument of the compile entries (bind_compile.cc, bind_search.cc), one rule:
//   None                       the tuning policy's default (worker processes)
//   "workers" | "in-process"   the C++ runners (tune/runner.h)
//   a _C.Runner                as it is
//   any other string or an object with measure()   tessera.runners.native_runner(it): "ray",
//                              "auto", "ray://host:port", or the user's own runner object
#include <pybind11/pybind11.h>

#include <memory>

#include "tune/runner.h"

namespace tessera::python {

std::shared_ptr<tune::Runner> runner_from_arg(const pybind11::object& arg);

}  // namespace tessera::python
