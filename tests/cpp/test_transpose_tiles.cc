// Transposing register tiles (loop/transpose_tiles.h): a copy whose lanes gather from rows that
// the enclosing unrolled loop walks becomes a lanes x lanes register tile written row by row and
// read back as columns, which the CPU code generator transposes with shuffles. Checked on the
// loop IR and on the compiled kernels' values, with the rows guarded, at several dtypes, and on
// shapes whose tiles are cut at the edges.
#include "const_dims.h"
#include "e2e_harness.h"
#include "loop/printer.h"
#include "loop/stmt_functor.h"
#include "loop/transpose_tiles.h"
#include "schedule/default_schedule.h"
#include "synthetic_hw.h"

namespace tessera::testing {
namespace {

using ir::Tensor;

// Register-scope buffers a statement allocates, by name.
std::vector<std::string> register_buffers(const loop::Stmt& s) {
  struct Collect : loop::StmtVisitor {
    std::vector<std::string> names;
    void visit_allocate(const loop::Stmt& a) override {
      if (a->buffer->scope == ir::MemScope::kRegister) names.push_back(a->buffer->name);
      loop::StmtVisitor::visit_allocate(a);
    }
  } c;
  c.visit(s);
  return c.names;
}

// The kernel of `out` with the rules' schedule for 16 lanes, lowered, before and after the pass.
struct Lowered {
  loop::Stmt before, after;
  schedule::KernelSchedule schedule;
};
Lowered lower_with_rules(const Tensor& out, const std::vector<Tensor>& ins) {
  const schedule::StagePlan plan = schedule::plan_stages({out}, ins);
  Lowered l;
  l.schedule = schedule::default_schedule(plan, synthetic_target());
  l.before = schedule::lower(plan, l.schedule, "copy").body;
  l.after = loop::transpose_register_tiles(l.before);
  return l;
}

TEST(TransposeTiles, ARowMajorCopyWrittenColumnMajorIsTransposedInRegisters) {
  // T[b, k, n] = B[b, n, k], 200 rows of 96: full 16 x 16 tiles and tiles cut along n.
  for (const ir::DType dtype : {ir::DType::kFloat32, ir::DType::kFloat64, ir::DType::kBFloat16}) {
    Tensor b = ir::placeholder("B", dims({2, 200, 96}), dtype);
    Tensor t = ir::compute("T", dims({2, 96, 200}), [&](const std::vector<ir::Var>& v) {
      return ir::access(b, {v[0], v[2], v[1]});
    });
    const Lowered l = lower_with_rules(t, {b});
    EXPECT_EQ(l.schedule.stages[0].tile_reg, (std::vector<int64_t>{1, 16, 16}))
        << l.schedule.dump();
    EXPECT_TRUE(register_buffers(l.before).empty());
    EXPECT_EQ(register_buffers(l.after), (std::vector<std::string>{"T_tile"}))
        << loop::to_string(l.after);
    check_graph({{t}, {b}}, l.schedule, /*use_jit=*/true);
  }
}

TEST(TransposeTiles, RowsOutsideTheInputReadThePadValue) {
  // L[k, p, n] = B[2 (n - 3) + p, k] where that row exists, else 0: EinNet's regrouping of a
  // dilated operand. The guard depends on the row alone, so each tile row is loaded or zero.
  Tensor b = ir::placeholder("B", dims({100, 32}));
  Tensor l = ir::compute("L", dims({32, 2, 56}), [&](const std::vector<ir::Var>& v) {
    const ir::Expr row = ir::int_imm(2) * (v[2] - ir::int_imm(3)) + v[1];
    return ir::select(ir::logical_and(ir::ge(row, ir::int_imm(0)), ir::lt(row, ir::int_imm(100))),
                      ir::access(b, {row, v[0]}), ir::float_imm(0.0));
  });
  const Lowered low = lower_with_rules(l, {b});
  EXPECT_EQ(register_buffers(low.after).size(), 1u) << loop::to_string(low.after);
  check_graph({{l}, {b}}, low.schedule, /*use_jit=*/true);
}

TEST(TransposeTiles, CopiesThatReadAlongTheirLanesAreLeftAlone) {
  // S[k, b, n] = C[b, k, n] keeps C's innermost dim innermost: its lanes load vectors already.
  Tensor c = ir::placeholder("C", dims({2, 96, 200}));
  Tensor s = ir::compute("S", dims({96, 2, 200}), [&](const std::vector<ir::Var>& v) {
    return ir::access(c, {v[1], v[0], v[2]});
  });
  const Lowered l = lower_with_rules(s, {c});
  EXPECT_TRUE(register_buffers(l.after).empty()) << loop::to_string(l.after);
  // A transposing copy that computes more than a copy (the value is not the load or a guarded
  // load) keeps its gathers: g(in) = in * 2.
  Tensor b = ir::placeholder("B", dims({2, 64, 48}));
  Tensor scaled = ir::compute("X", dims({2, 48, 64}), [&](const std::vector<ir::Var>& v) {
    return ir::access(b, {v[0], v[2], v[1]}) * ir::float_imm(2.0);
  });
  const Lowered x = lower_with_rules(scaled, {b});
  EXPECT_TRUE(register_buffers(x.after).empty()) << loop::to_string(x.after);
  check_graph({{scaled}, {b}}, x.schedule, /*use_jit=*/true);
}

}  // namespace
}  // namespace tessera::testing
