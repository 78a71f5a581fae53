// implicit_padding: guards that only keep a factor's read inside its tensor (tessera.op's
// where(...), nested one select per conjunct) are dropped, so a guarded G2BMM is EinNet's
// G2BMM and derives like it; every other select stays.
#include <gtest/gtest.h>

#include "derive/implicit_padding.h"
#include "derive/search.h"
#include "derive_test_util.h"

namespace tessera {
namespace {

using derive::State;
using derivetest::dims;
using derivetest::kTolerance;
using derivetest::state_error;
using ir::Expr;
using ir::Tensor;

bool has_select(const State& s) {
  bool found = false;
  ir::visit_expr(s.outputs[0]->op->body,
                 [&](const Expr& e) { found |= e->kind == ir::ExprKind::kSelect; });
  return found;
}

// O[b, m, w] = sum_k select(0 <= row, select(row < n, A[b, m, k] * B[b, k, row], 0), 0) with
// row = m + 2 w - 6, as the frontend writes where(row >= 0 and row < n, ...); `lower` and
// `upper` replace the two bounds.
State guarded_g2bmm(const Expr& lower, int64_t upper) {
  Tensor a = ir::placeholder("A", dims({2, 16, 8}));
  Tensor b = ir::placeholder("B", dims({2, 8, 16}));
  return State{{ir::reduce(
                   "g2bmm", dims({2, 16, 7}), dims({8}), ir::ReduceKind::kSum,
                   [&](const std::vector<ir::Var>& v, const std::vector<ir::Var>& k) {
                     const Expr row = v[1] + ir::int_imm(2) * v[2] - ir::int_imm(6);
                     const Expr product =
                         ir::access(a, {v[0], v[1], k[0]}) * ir::access(b, {v[0], k[0], row});
                     return ir::select(ir::le(lower, row),
                                       ir::select(ir::lt(row, ir::int_imm(upper)), product,
                                                  ir::make_const(ir::DType::kFloat32, 0.0)),
                                       ir::make_const(ir::DType::kFloat32, 0.0));
                   },
                   "g2bmm")},
               {}};
}

TEST(DeriveImplicitPadding, ReadGuardsBecomeEinNetsPadding) {
  const State guarded = guarded_g2bmm(ir::int_imm(0), 16);
  const State plain = derive::implicit_padding(guarded);
  EXPECT_FALSE(has_select(plain)) << derive::to_string(plain);
  EXPECT_TRUE(plain.trace.empty());
  EXPECT_LE(state_error(plain, guarded), kTolerance);
  // EinNet's G2BMM now: the dilated band is separated and matched like derive::g2bmm_expr's.
  const derive::SearchResult r = derive::derive_programs(plain, {});
  bool regrouped = false;
  for (const derive::Derivation& d : r.derivations) {
    regrouped |= d.target == derive::OperatorKind::kG2bmm &&
                 d.state.trace[0].rfind("separate_dilated_read", 0) == 0;
  }
  EXPECT_TRUE(regrouped) << r.derivations.size() << " derivations";
}

TEST(DeriveImplicitPadding, OtherSelectsStay) {
  // row >= 1 drops row 0, which B has: not a padding guard.
  EXPECT_TRUE(has_select(derive::implicit_padding(guarded_g2bmm(ir::int_imm(1), 16))));
  // row < 15 drops row 15, which B has.
  EXPECT_TRUE(has_select(derive::implicit_padding(guarded_g2bmm(ir::int_imm(0), 15))));
  // A guard of a read that is a term, not a factor: A[i] + B[i - 1] is not 0 where B is.
  Tensor a = ir::placeholder("A", dims({8}));
  Tensor b = ir::placeholder("B", dims({8}));
  const State sum{{ir::compute(
                      "O", dims({8}),
                      [&](const std::vector<ir::Var>& v) {
                        const Expr i = v[0] - ir::int_imm(1);
                        return ir::select(ir::ge(i, ir::int_imm(0)),
                                          ir::access(a, {v[0]}) + ir::access(b, {i}),
                                          ir::make_const(ir::DType::kFloat32, 0.0));
                      },
                      "shift")},
                  {}};
  EXPECT_TRUE(has_select(derive::implicit_padding(sum)));
}

}  // namespace
}  // namespace tessera
