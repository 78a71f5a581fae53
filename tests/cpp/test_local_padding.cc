// Edge modes of multi-level tiling (StageAnnotation::edge): DietCode's local padding and the
// if-check baseline against the edge variants. Every mode computes what the reference
// interpreter computes for row counts that are symbolic at run time and not tile multiples
// (1, tile - 1, tile, tile + 1, odd primes), with the vector axis cut too, packed and unpacked
// operands, several outer reduce tiles, a fused epilogue and a long float sum; the loop-IR
// interpreter (which throws on any out-of-bounds access) checks that the reads local padding
// makes past the end stay inside their buffers. The loop IR shows the design: local padding
// computes cut tiles unpredicated with register accumulators (one body with full tiles when the
// reads need no clamp), the if-checks sit in the inner loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/llvm/compile.h"
#include "const_dims.h"
#include "dynamic_check.h"
#include "e2e_harness.h"
#include "loop/pipeline.h"
#include "loop/printer.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduction.h"
#include "schedule/annotation.h"
#include "schedule/lower.h"
#include "util/check.h"

namespace tessera {
namespace {

using schedule::EdgeMode;
using schedule::KernelSchedule;
using schedule::StageAnnotation;
using testing::dims;

constexpr EdgeMode kModes[] = {EdgeMode::kSplit, EdgeMode::kLocalPad, EdgeMode::kGuard};
constexpr int64_t kRegRows = 4;  // register tile rows of the dense schedules below

// Y[M, N] = X[M, K] W[N, K]^T (+ bias, relu) with M a size variable in [1, 64].
struct Dense {
  ir::Var m = ir::size_var("M", 1, 64);
  ir::Tensor x, w, bias, y;
  Dense(int64_t k, int64_t n, bool epilogue) {
    x = ir::placeholder("X", {m, ir::int_imm(k)});
    w = ir::placeholder("W", dims({n, k}));
    if (epilogue) {
      bias = ir::placeholder("bias", dims({n}));
      y = ops::relu(ops::dense(x, w, bias));
    } else {
      y = ops::dense(x, w);
    }
  }
  std::vector<ir::Tensor> inputs() const {
    std::vector<ir::Tensor> ins = {x, w};
    if (bias) ins.push_back(bias);
    return ins;
  }
  testing::Graph graph(int64_t rows) const {
    return testing::Graph({y}, inputs(), {{m.get(), rows}});
  }
};

// A dense schedule: register tile kRegRows x 16 (two vectors of 8 lanes), cache tile 8 x 32.
KernelSchedule dense_schedule(EdgeMode edge, std::vector<std::string> pack, int64_t reduce_tile) {
  StageAnnotation a;
  a.op = "dense";
  a.tile_outer = {2 * kRegRows, 32};
  a.tile_reg = {kRegRows, 16};
  a.tile_reduce = {reduce_tile};
  a.vector_axis = 1;
  a.vector_width = 8;
  a.pack = std::move(pack);
  a.reduce_unroll = 2;
  a.edge = edge;
  KernelSchedule s;
  s.stages = {a};
  return s;
}

std::vector<int64_t> edge_rows() { return {1, kRegRows - 1, kRegRows, kRegRows + 1, 7, 13, 31}; }

// Compiles `s` once for the symbolic DAG outputs <- inputs (one size variable) and checks it at
// every row count of edge_rows() against the reference, through the loop-IR interpreter first
// (which throws on an out-of-bounds access, where the JIT's kernel would corrupt memory) and
// then through the JIT.
void check_at_edge_rows(const std::vector<ir::Tensor>& outputs,
                        const std::vector<ir::Tensor>& inputs, const KernelSchedule& s,
                        double tol = 1e-4) {
  SCOPED_TRACE(s.dump());
  const tune::dynamic::DynamicWorkload w = tune::dynamic::DynamicWorkload::create(outputs, inputs);
  compiler::BuildOptions opts;
  opts.schedule = s;
  const compiler::BuiltKernel jit = compiler::build_cpu(outputs, inputs, opts);
  const loop::LoweredFunc f =
      schedule::lower(schedule::plan_stages(outputs, inputs, s.plan), s, "kernel");
  for (int64_t rows : edge_rows()) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    testing::expect_runs_like_reference(
        w, {rows},
        [&](const std::vector<void*>& b, const std::vector<int64_t>& sz) {
          loop::interpret(f, b, sz);
        },
        3, tol);
    if (::testing::Test::HasFailure()) return;  // the JIT's kernel might write out of bounds
    testing::expect_runs_like_reference(
        w, {rows},
        [&](const std::vector<void*>& b, const std::vector<int64_t>& sz) { jit.run(b, sz); }, 3,
        tol);
  }
}

std::string lowered_text(const testing::Graph& g, const KernelSchedule& s) {
  const schedule::StagePlan plan = schedule::plan_stages(g.outputs, g.inputs, s.plan);
  return loop::to_string(schedule::lower(plan, s, "kernel"));
}

TEST(LocalPadding, EdgeModeRoundTripsThroughJsonAndDefaultsToSplit) {
  KernelSchedule s = dense_schedule(EdgeMode::kSplit, {"W"}, 8);
  EXPECT_EQ(s.stages_text().find("edge"), std::string::npos) << "kSplit is not written";
  for (EdgeMode e : {EdgeMode::kLocalPad, EdgeMode::kGuard}) {
    s.stages[0].edge = e;
    const std::string text = s.dump();
    EXPECT_NE(text.find(std::string("\"edge\":\"") + schedule::edge_mode_name(e) + "\""),
              std::string::npos)
        << text;
    EXPECT_EQ(KernelSchedule::parse(text).stages[0].edge, e);
  }
  EXPECT_THROW(schedule::edge_mode_from_name("padded"), Error);
}

TEST(LocalPadding, EveryModeMatchesTheReferenceAtEdgeRowCounts) {
  // N = 40: the vector axis is cut too (16-wide register tiles). K = 24 over reduce tiles of 8:
  // three outer reduce tiles, so accumulators also start from the output's partial sums.
  for (bool epilogue : {false, true}) {
    const Dense d(24, 40, epilogue);
    for (EdgeMode mode : kModes) {
      for (const std::vector<std::string>& pack :
           std::vector<std::vector<std::string>>{{}, {"W"}, {"X", "W"}}) {
        for (int64_t reduce_tile : {8, 24}) {
          check_at_edge_rows({d.y}, d.inputs(), dense_schedule(mode, pack, reduce_tile));
        }
      }
    }
  }
}

TEST(LocalPadding, NoVectorAxisAndLongSumsMatchTheReference) {
  // Without a vector axis both axes are clamped row axes; a row sum longer than kSumChunk
  // restarts its accumulators per outer reduce tile and adds into the output.
  const Dense d(24, 10, false);
  KernelSchedule s = dense_schedule(EdgeMode::kLocalPad, {}, 8);
  s.stages[0].vector_axis = -1;
  s.stages[0].vector_width = 1;
  s.stages[0].tile_reg = {kRegRows, 4};
  s.stages[0].tile_outer = {kRegRows, 8};
  ir::Var m = ir::size_var("M", 1, 64);
  ir::Tensor l = ir::placeholder("L", {m, ir::int_imm(9000)});
  ir::Tensor sum = ops::reduce_sum(l, {1});
  for (EdgeMode mode : kModes) {
    s.stages[0].edge = mode;
    KernelSchedule long_sum;
    StageAnnotation a;
    a.op = sum->op->name;
    a.tile_outer = {2 * kRegRows};
    a.tile_reg = {kRegRows};
    a.tile_reduce = {4096};
    a.edge = mode;
    long_sum.stages = {a};
    check_at_edge_rows({d.y}, d.inputs(), s);
    check_at_edge_rows({sum}, {l}, long_sum, 1e-3);
  }
}

TEST(LocalPadding, InjectiveStagesMatchTheReference) {
  ir::Var m = ir::size_var("M", 1, 64);
  ir::Tensor x = ir::placeholder("X", {m, ir::int_imm(20)});
  ir::Tensor y = ops::relu(x);
  StageAnnotation a;
  a.op = y->op->name;
  a.tile_outer = {kRegRows, 16};
  a.tile_reg = {kRegRows, 16};
  a.vector_axis = 1;
  a.vector_width = 8;
  for (EdgeMode mode : kModes) {
    a.edge = mode;
    KernelSchedule s;
    s.stages = {a};
    check_at_edge_rows({y}, {x}, s);
  }
}

// Position of the next inner reduce loop at or after `from`: "for k_i in" (not unrolled) or
// "for k_i_g in" (groups of unrolled steps).
size_t next_reduce_loop(const std::string& text, size_t from) {
  return std::min(text.find("for k_i in", from), text.find("for k_i_g in", from));
}

// The lines of the `nth` inner reduce loop: its header and the lines indented deeper than it.
std::string inner_loop(const std::string& text, int nth = 0) {
  size_t p = next_reduce_loop(text, 0);
  for (int i = 0; i < nth && p != std::string::npos; ++i) p = next_reduce_loop(text, p + 1);
  EXPECT_NE(p, std::string::npos) << text;
  if (p == std::string::npos) return "";
  const size_t line_start = text.rfind('\n', p) + 1;
  const size_t indent = p - line_start;
  std::string out;
  for (size_t at = line_start; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(at, eol - at);
    if (at != line_start && line.find_first_not_of(' ') <= indent) break;
    out += line + "\n";
    at = eol + 1;
  }
  return out;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(LocalPadding, LoopStructureOfEachMode) {
  // N = 64: only rows can be cut, so each mode's structure shows alone.
  const Dense d(24, 64, false);
  const testing::Graph g = d.graph(13);
  const std::string split = lowered_text(g, dense_schedule(EdgeMode::kSplit, {"W"}, 24));
  const std::string local = lowered_text(g, dense_schedule(EdgeMode::kLocalPad, {"W"}, 24));
  const std::string guard = lowered_text(g, dense_schedule(EdgeMode::kGuard, {"W"}, 24));
  // kSplit: a second tile body whose rows loop serially over what is left of the tile.
  EXPECT_NE(split.find("i_r in [0, min("), std::string::npos) << split;
  EXPECT_GE(count(split, "allocate acc"), 2) << split;
  // kLocalPad, X read as it is: full tiles keep the full tile's body; cut ones run a second
  // body with register accumulators whose rows never loop over a bound, whose inner loop is
  // unpredicated and reads X at clamped rows, and whose write-back skips rows past the end.
  EXPECT_EQ(local.find("i_r in [0, min("), std::string::npos) << local;
  EXPECT_EQ(count(local, "allocate acc"), 2) << local;
  EXPECT_EQ(inner_loop(local, 0).find("min("), std::string::npos) << local;
  EXPECT_NE(inner_loop(local, 1).find("min("), std::string::npos) << local;
  EXPECT_EQ(inner_loop(local, 1).find("if "), std::string::npos) << local;
  const std::string row_guard = "+ i_r + tile // 2 * 8 < M:";  // the outermost tile: no mod
  EXPECT_NE(local.find(row_guard), std::string::npos) << local;
  // X packed: its zero-filled panels need no clamp, and one body serves every tile.
  const std::string packed = lowered_text(g, dense_schedule(EdgeMode::kLocalPad, {"X", "W"}, 24));
  EXPECT_EQ(count(packed, "allocate acc"), 1) << packed;
  EXPECT_EQ(inner_loop(packed).find("min("), std::string::npos) << packed;
  EXPECT_EQ(inner_loop(packed).find("if "), std::string::npos) << packed;
  EXPECT_NE(packed.find(row_guard), std::string::npos) << packed;
  // kGuard: one tile body, predicated inside the inner reduce loop.
  EXPECT_EQ(count(guard, "allocate acc"), 1) << guard;
  EXPECT_NE(inner_loop(guard).find("if "), std::string::npos) << guard;
}

TEST(LocalPadding, ACutVectorAxisKeepsItsAccumulatorsInRegisters) {
  // N = 40 in one register tile of 3 vectors of 16: the last vector's 8 lanes past the end are
  // masked. The masked accumulator accesses are plain loads, selects and stores to the tile's
  // stack slot, which LLVM promotes to registers (masked intrinsics would pin it in memory).
  ir::Tensor x = ir::placeholder("X", dims({16, 24})), w = ir::placeholder("W", dims({24, 40}));
  const testing::Graph g({ops::matmul(x, w)}, {x, w});
  StageAnnotation a;
  a.op = g.outputs[0]->name;
  a.tile_outer = {8, 48};
  a.tile_reg = {4, 48};
  a.tile_reduce = {24};
  a.vector_axis = 1;
  a.vector_width = 16;
  a.edge = EdgeMode::kLocalPad;
  KernelSchedule s;
  s.stages = {a};
  const schedule::StagePlan plan = schedule::plan_stages(g.outputs, g.inputs, s.plan);
  codegen::CompileOptions opts;
  opts.keep_ir = true;
  auto k = codegen::compile_cpu(loop::prepare_for_cpu(schedule::lower(plan, s, "cut")), opts);
  EXPECT_EQ(k->llvm_ir().find("= alloca ["), std::string::npos) << k->llvm_ir();
  testing::check_graph(g, s, /*use_jit=*/true);
}

}  // namespace
}  // namespace tessera
