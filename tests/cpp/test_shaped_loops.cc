// Loops around vector code Tessera shaped (codegen/llvm/emit_stmt.cc: shaped_loop_metadata) keep
// LLVM's unroller off, even in a module whose scalar stage turns LLVM's loop passes on.
#include <gtest/gtest.h>

#include <string>

#include "codegen/llvm/compile.h"
#include "const_dims.h"
#include "cost/hardware.h"
#include "e2e_harness.h"
#include "loop/pipeline.h"
#include "loop/scalar_loops.h"
#include "ops/ops.h"
#include "schedule/annotation.h"
#include "schedule/lower.h"
#include "schedule/stage_plan.h"
#include "test_llvm_util.h"

namespace tessera {
namespace {

using codegen::llvm_test::count_of;

// A 3x3 convolution over 32 channels, padded by a scalar stage (no vector axis), its own stage a
// register tile of 2 rows x 7 columns x as many vectors of the host's lanes as its registers hold
// beside the weights and a broadcast: 2 x 16 lanes with AVX-512's 32 registers (28 accumulators),
// 1 x 8 lanes with AVX2's 16 (14). One FMA per accumulator per step of the (channel, ky, kx)
// window.
TEST(ShapedLoops, ARegisterTileNextToAScalarStageIsNotUnrolledByLlvm) {
  ir::Tensor x = ir::placeholder("X", testing::dims({2, 32, 14, 14}));
  ir::Tensor w = ir::placeholder("W", testing::dims({32, 32, 3, 3}));
  ir::Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  schedule::StagePlan plan = schedule::plan_stages({y}, {x, w});
  ASSERT_EQ(plan.stages.size(), 2u);
  schedule::KernelSchedule ks = schedule::KernelSchedule::parse(R"({"stages": [
    {"op": "X_pad", "pack": [], "parallel": true, "s1_order": [1, 0, 2, 3],
     "sketch": "multi_level_tiling", "tile_outer": [2, 1, 16, 16], "tile_reduce": [],
     "tile_reg": [2, 1, 4, 1], "vector_axis": -1, "vector_width": 1},
    {"op": "conv2d", "pack": ["W"], "parallel": true, "s1_order": [0, 2, 3, 1],
     "sketch": "multi_level_tiling", "tile_outer": [2, 32, 14, 14], "tile_reduce": [32, 3, 3],
     "tile_reg": [1, 32, 2, 7], "vector_axis": 1, "vector_width": 16}]})");
  // The CPU's own ISA (no TESSERA_HW_FILE override): the one the JIT compiles for.
  const cost::HardwareInfo cpu = cost::detect_host_hardware();
  const int lanes = cpu.vector_bits / 32, vectors = cpu.num_vector_registers >= 32 ? 2 : 1;
  ks.stages[1].tile_reg[1] = vectors * lanes;  // 32 with AVX-512, as written
  ks.stages[1].vector_width = lanes;
  ASSERT_EQ(32 % ks.stages[1].tile_reg[1], 0) << lanes << " lanes";
  loop::LoweredFunc f = loop::prepare_for_cpu(schedule::lower(plan, ks, "conv_next_to_scalar"));
  // The scalar padding stage is what turns LLVM's loop passes on for the module.
  ASSERT_TRUE(loop::has_scalar_inner_loops(f));
  codegen::CompileOptions opts;
  opts.keep_asm = true;
  auto k = codegen::compile_cpu(f, opts);
  const std::string& asm_text = k->assembly();
  // One window step's FMAs, not the 3-wide kx loop unrolled around them (3x as many: 84 with
  // AVX-512), which made the scheduler hoist broadcasts and spill accumulators.
  EXPECT_EQ(count_of(asm_text, "vfmadd"), static_cast<size_t>(vectors * 2 * 7)) << asm_text;
  // Nor do accumulators leave their registers between the FMAs.
  const size_t first = asm_text.find("vfmadd"), last = asm_text.rfind("vfmadd");
  ASSERT_NE(first, std::string::npos);
  const std::string fma_loop = asm_text.substr(first, last - first);
  EXPECT_EQ(count_of(fma_loop, "Spill") + count_of(fma_loop, "Reload"), 0u) << fma_loop;
  testing::check_graph({{y}, {x, w}}, ks, /*use_jit=*/true);
}

TEST(ShapedLoops, VectorizedLoopsAreFoundAtAnyDepth) {
  ir::Buffer a = ir::make_buffer("a", ir::DType::kFloat32, {ir::int_imm(64)});
  ir::Var i = ir::var("i", 0, 3), v = ir::var("v", 0, 15);
  loop::Stmt vec = loop::make_for(v, ir::int_imm(0), ir::int_imm(16), loop::ForKind::kVectorized,
                                  loop::make_store(a, i * 16 + v, 1.0));
  loop::Stmt scalar = loop::make_for(v, ir::int_imm(0), ir::int_imm(16), loop::ForKind::kSerial,
                                     loop::make_store(a, i * 16 + v, 1.0));
  EXPECT_TRUE(loop::contains_vectorized_loop(
      loop::make_for(i, ir::int_imm(0), ir::int_imm(4), loop::ForKind::kSerial, vec)));
  EXPECT_FALSE(loop::contains_vectorized_loop(
      loop::make_for(i, ir::int_imm(0), ir::int_imm(4), loop::ForKind::kSerial, scalar)));
}

}  // namespace
}  // namespace tessera
