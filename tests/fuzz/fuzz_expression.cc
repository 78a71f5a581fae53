// libFuzzer target over the expression frontend of tessera.op (parser, analysis, shape
// inference, conversion to tensor expressions) and the reference interpreter that evaluates
// what it builds.
//
// Input: two bytes that pick the inputs' shapes and dtypes, then the expression source. Every
// input must end in a program or in a clear error (ExpressionError at a column, or
// tessera::Error for a run-time problem such as an integer division by zero). A crash, a
// sanitizer report, an exception of any other type or a hang is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "frontend/expr_error.h"
#include "frontend/expr_parser.h"
#include "frontend/expr_to_te.h"
#include "ir/functor.h"
#include "ir/tensor.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "util/check.h"

namespace {

using tessera::frontend::ExpressionError;

// Small shapes (1..4 per dimension) and dtypes drawn from the two leading bytes.
struct Choices {
  uint32_t bits;
  int next(int n) {
    const int v = static_cast<int>(bits % static_cast<uint32_t>(n));
    bits = bits / static_cast<uint32_t>(n) * 2654435761u + 1;
    return v;
  }
};

// The reference interpreter evaluates every body once per point of its tensor and of its
// reduction: a long body under a reduction can take seconds (a libFuzzer timeout) without being
// wrong. Inputs whose total work is above this many node evaluations are only parsed and built.
constexpr int64_t kMaxReferenceWork = int64_t{1} << 22;

bool reference_work_is_small(const tessera::ir::Tensor& output) {
  int64_t work = 0;
  for (const tessera::ir::Tensor& t : tessera::ir::collect_dag({output}).computes) {
    int64_t n = tessera::ir::tree_size(t->op->body).nodes;
    if (n > kMaxReferenceWork) return false;
    for (const tessera::ir::Expr& d : t->shape) {
      if (!d->is_const_int() || d->int_value > kMaxReferenceWork) return false;
      n *= std::max<int64_t>(d->int_value, 1);
      if (n > kMaxReferenceWork) return false;
    }
    for (const tessera::ir::IterVar& r : t->op->reduce_axes) {
      if (!r.extent->is_const_int() || r.extent->int_value > kMaxReferenceWork) return false;
      n *= std::max<int64_t>(r.extent->int_value, 1);
      if (n > kMaxReferenceWork) return false;
    }
    work += n;
    if (work > kMaxReferenceWork) return false;
  }
  return true;
}

void run_one(const std::string& source, Choices choices) {
  tessera::frontend::Program program = tessera::frontend::parse_expression(source);
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, tessera::ir::DType> dtypes;
  const tessera::ir::DType kinds[] = {tessera::ir::DType::kFloat32, tessera::ir::DType::kFloat32,
                                      tessera::ir::DType::kInt32, tessera::ir::DType::kInt64};
  for (const std::string& name : program.inputs) {
    std::vector<int64_t> shape;
    for (int d = 0; d < program.ndim.at(name); ++d) shape.push_back(1 + choices.next(4));
    shapes[name] = shape;
    dtypes[name] = kinds[choices.next(4)];
  }
  tessera::frontend::TeProgram te = tessera::frontend::expression_to_te(source, shapes, dtypes);
  // Many input dims of up to 4 each multiply past what the reference should evaluate (and past
  // memory): such inputs are only parsed and built.
  for (const auto& [name, shape] : shapes) {
    int64_t elements = 1;
    for (int64_t d : shape) {
      elements *= d;
      if (elements > kMaxReferenceWork) return;
    }
  }
  std::map<const tessera::ir::TensorNode*, tessera::runtime::NDArray> inputs;
  uint64_t seed = 1;
  for (const tessera::ir::Tensor& t : te.inputs) {
    inputs[t.get()] = tessera::runtime::NDArray::random(t->dtype, shapes.at(t->name), seed++);
  }
  // Output extents may come from iterator arithmetic: skip evaluating absurdly large ones.
  int64_t points = 1;
  for (const tessera::ir::Expr& d : te.output->shape) {
    if (!d->is_const_int() || d->int_value > 4096) return;
    points *= d->int_value;
    if (points > 1 << 16) return;
  }
  if (!reference_work_is_small(te.output)) return;
  tessera::ops::run_reference({te.output}, inputs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Choices choices{static_cast<uint32_t>(data[0]) | (static_cast<uint32_t>(data[1]) << 8)};
  const std::string source(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    run_one(source, choices);
  } catch (const ExpressionError&) {
    // A clear error pointing at the source: the expected outcome for most inputs.
  } catch (const tessera::Error&) {
    // A run-time error of the evaluated program (division by zero, out-of-range read).
  }
  return 0;
}
