// The other cases: transposed conv derives into a matmul plus a gather-reduce, and a
// dilated G2BMM into a dense batch matmul plus a band gather. Each derived program evaluates
// equal to the original on a small instance; the full-size cases derive within the bound.
#include <gtest/gtest.h>

#include <chrono>

#include "derive/lower.h"
#include "derive/rules_intra.h"
#include "derive/search.h"
#include "derive_test_util.h"
#include "naive_ops.h"

namespace tessera {
namespace {

using derive::Derivation;
using derive::DeriveContext;
using derive::OperatorKind;
using derive::ScopeRole;
using derive::State;
using derivetest::dims;
using derivetest::kTolerance;
using derivetest::state_error;
using derivetest::weights_named;
using ir::Tensor;

// A derivation with exactly one operator of `kind` and an eOperator reading its output.
const Derivation* find_operator_plus_eoperator(const derive::SearchResult& r, OperatorKind kind,
                                               int64_t k) {
  for (const Derivation& d : r.derivations) {
    const derive::ScopeChoice* op = nullptr;
    int operators = 0;
    for (const auto& c : d.choices) {
      if (c.role == ScopeRole::kOperator) {
        ++operators;
        op = &c;
      }
    }
    if (operators != 1 || op->match->kind != kind || op->match->K != k) continue;
    for (const auto& c : d.choices) {
      if (c.role == ScopeRole::kEOperator &&
          !derive::accesses_of(c.scope->op->body, op->scope).empty()) {
        return &d;
      }
    }
  }
  return nullptr;
}

const derive::OperatorMatch& operator_of(const Derivation& d) {
  for (const auto& c : d.choices) {
    if (c.role == ScopeRole::kOperator) return *c.match;
  }
  throw std::runtime_error("no operator");
}

void expect_derived_and_lowered_equal(const Derivation& d, const State& original) {
  EXPECT_LE(state_error(d.state, original), kTolerance) << derive::to_string(d.state);
  const derive::OperatorMatch& m = operator_of(d);
  const State lowered =
      derive::replace_scope(d.state, m.scope, {derive::lower_match(m), {}}, "lower");
  EXPECT_LE(state_error(lowered, original), kTolerance) << derive::to_string(lowered);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void report(const char* name, const derive::SearchResult& r, double seconds) {
  std::cout << name << ": " << r.derivations.size() << " derivations, " << r.stats.explored
            << " states kept, " << r.stats.pruned << " of " << r.stats.generated << " pruned ("
            << 100 * r.stats.pruned_share() << "%), explorative: " << r.stats.explorative_kept
            << " states of " << r.stats.explorative_paths << " rule paths ("
            << 100 * r.stats.explorative_pruned_share() << "% pruned), " << seconds << " s\n";
}

TEST(DeriveCases, TransposedConvDefinitionMatchesTorch) {
  // The sum-over-input-positions form used below is torch's conv_transpose2d.
  Tensor x = ir::placeholder("X", dims({2, 3, 3, 2}));
  Tensor k = ir::placeholder("K", dims({3, 4, 4, 4}));
  const State s{{derivetest::conv_transpose2d(x, k, 2, 1)}, {}};
  auto in = derivetest::random_inputs(s, 3);
  naive::Conv2dParams p;
  p.sh = p.sw = 2;
  p.ph = p.pw = 1;
  const auto ref = naive::conv_transpose2d(in.at(x.get()), in.at(k.get()), nullptr, p, 0, 0);
  // The interpreter rounds its result to the output's float32.
  EXPECT_LE(derivetest::max_rel_error(derive::evaluate_state(s, in), {ref}), 1e-6);
}

TEST(DeriveCases, TransposedConvBecomesMatmulPlusGather) {
  Tensor x = ir::placeholder("X", dims({2, 6, 2, 2}));
  Tensor k = ir::placeholder("K", dims({6, 4, 4, 4}));
  const State s{{derivetest::conv_transpose2d(x, k, 2, 1)}, {}};
  const derive::SearchResult r = derive::derive_programs(s, weights_named(s, "K"));
  const Derivation* d = find_operator_plus_eoperator(r, OperatorKind::kMatmul, 6);
  ASSERT_NE(d, nullptr) << r.derivations.size() << " derivations";
  const derive::OperatorMatch& m = operator_of(*d);
  EXPECT_EQ(m.M * m.N, (2 * 2 * 2) * (4 * 4 * 4));  // (n, ih, iw) x (f, r, s)
  expect_derived_and_lowered_equal(*d, s);
}

TEST(DeriveCases, TransposedConvFullSize) {
  // [16, 448, 2, 2] -> 256, kernel 4, stride 2, pad 1: matmul 64 x 448 . 448 x 4096.
  Tensor x = ir::placeholder("X", dims({16, 448, 2, 2}));
  Tensor k = ir::placeholder("K", dims({448, 256, 4, 4}));
  const State s{{derivetest::conv_transpose2d(x, k, 2, 1)}, {}};
  const auto t0 = std::chrono::steady_clock::now();
  const derive::SearchResult r = derive::derive_programs(s, weights_named(s, "K"));
  const double seconds = seconds_since(t0);
  EXPECT_LE(seconds, 60.0);
  const Derivation* d = find_operator_plus_eoperator(r, OperatorKind::kMatmul, 448);
  ASSERT_NE(d, nullptr);
  const derive::OperatorMatch& m = operator_of(*d);
  EXPECT_EQ(std::min(m.M, m.N), 64);
  EXPECT_EQ(std::max(m.M, m.N), 4096);
  report("convT 448->256", r, seconds);
}

TEST(DeriveCases, Conv5x5BecomesMatmulPlusOffsetReduce) {
  // Small instance, checked numerically: K = C, N = F * 25.
  const State small = derivetest::conv_state(1, 4, 6, 6, 3, 5, 2);
  const derive::SearchResult r = derive::derive_programs(small, weights_named(small, "K"));
  const Derivation* d = find_operator_plus_eoperator(r, OperatorKind::kMatmul, 4);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(operator_of(*d).M * operator_of(*d).N, 36 * 3 * 25);
  expect_derived_and_lowered_equal(*d, small);
}

TEST(DeriveCases, Conv5x5FullSize) {
  // [1, 32, 224, 224] -> 32: matmul 50176 x 32 . 32 x 800 plus a 25-offset reduce.
  const State s = derivetest::conv_state(1, 32, 224, 224, 32, 5, 2);
  const auto t0 = std::chrono::steady_clock::now();
  const derive::SearchResult r = derive::derive_programs(s, weights_named(s, "K"));
  const double seconds = seconds_since(t0);
  EXPECT_LE(seconds, 60.0);
  const Derivation* d = find_operator_plus_eoperator(r, OperatorKind::kMatmul, 32);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(std::min(operator_of(*d).M, operator_of(*d).N), 800);
  EXPECT_EQ(std::max(operator_of(*d).M, operator_of(*d).N), 224 * 224);
  report("conv5x5 32ch 224", r, seconds);
}

class DeriveG2bmm : public ::testing::TestWithParam<int64_t> {};

TEST_P(DeriveG2bmm, BecomesDenseBatchMatmulPlusBandGather) {
  const int64_t dilation = GetParam();
  Tensor a = ir::placeholder("A", dims({2, 12, 16}));
  Tensor b = ir::placeholder("B", dims({2, 12, 16}));
  const State s{{derivetest::g2bmm(a, b, 3, dilation)}, {}};
  const derive::SearchResult r = derive::derive_programs(s, {});
  const Derivation* d = find_operator_plus_eoperator(r, OperatorKind::kBatchMatmul, 16);
  ASSERT_NE(d, nullptr) << r.derivations.size() << " derivations";
  const derive::OperatorMatch& m = operator_of(*d);
  EXPECT_EQ(m.B, 2);
  EXPECT_EQ(m.M, 12);  // every row against every row: the dense product
  EXPECT_EQ(m.N, 12);
  expect_derived_and_lowered_equal(*d, s);
}

TEST_P(DeriveG2bmm, FullSizeLongformer) {
  // [8, 10000, 64], band width 65: a dense 10000 x 10000 batch matmul per head.
  const int64_t dilation = GetParam();
  Tensor a = ir::placeholder("A", dims({8, 10000, 64}));
  Tensor b = ir::placeholder("B", dims({8, 10000, 64}));
  const State s{{derivetest::g2bmm(a, b, 32, dilation)}, {}};
  const auto t0 = std::chrono::steady_clock::now();
  const derive::SearchResult r = derive::derive_programs(s, {});
  const double seconds = seconds_since(t0);
  EXPECT_LE(seconds, 60.0);
  const Derivation* d = find_operator_plus_eoperator(r, OperatorKind::kBatchMatmul, 64);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(operator_of(*d).M, 10000);
  EXPECT_EQ(operator_of(*d).N, 10000);
  report(dilation == 2 ? "g2bmm d2" : "g2bmm d4", r, seconds);
}

// EinNet's own G2BMM reads its second operand k-major, I1[b, k, m + D*(w - W)]: the same band
// product as the row-major form over the transposed operand.
TEST_P(DeriveG2bmm, KMajorOperandComputesTheSameBand) {
  const int64_t dilation = GetParam();
  Tensor a = ir::placeholder("A", dims({2, 12, 16}));
  Tensor b_rows = ir::placeholder("B", dims({2, 12, 16}));
  Tensor b_cols = ir::placeholder("BT", dims({2, 16, 12}));
  const State rows{{derivetest::g2bmm(a, b_rows, 3, dilation)}, {}};
  const State cols{{derive::g2bmm_expr(a, b_cols, 3, dilation, /*b_k_major=*/true)}, {}};
  auto in = derivetest::random_inputs(rows, 7);
  runtime::NDArray bt(ir::DType::kFloat32, {2, 16, 12});
  const runtime::NDArray& bv = in.at(b_rows.get());
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t n = 0; n < 12; ++n) {
      for (int64_t k = 0; k < 16; ++k) bt.set(bt.flat_index({i, k, n}), bv.at({i, n, k}));
    }
  }
  in.emplace(b_cols.get(), bt);
  EXPECT_LE(
      derivetest::max_rel_error(derive::evaluate_state(cols, in), derive::evaluate_state(rows, in)),
      1e-12);
}

INSTANTIATE_TEST_SUITE_P(Derive, DeriveG2bmm, ::testing::Values(2, 4));

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Conv5x5 -> conv6x6 (relaxed kernel) -> the taps split into halves of 3 -> the halves' sums as
// traversal iterators: five explorative rules (EinNet Figure 6).
State conv5x5_opened(const State& conv) {
  State s = conv;
  for (int axis : {1, 2}) {  // relax r and s to 6 taps
    s = *derive::relax_boundary(s, s.outputs[0], true, axis, 0, 1);
  }
  s = *derive::split_summation_iterator(s, s.outputs[0], 1, 3);  // (c, r_o, r_i, s)
  s = *derive::split_summation_iterator(s, s.outputs[0], 3, 3);  // (c, r_o, r_i, s_o, s_i)
  return *derive::split_summation(s, s.outputs[0], {1, 3});      // outer sum over (r_o, s_o)
}

const Derivation* find_conv3x3(const derive::SearchResult& r, int64_t out_channels) {
  for (const Derivation& d : r.derivations) {
    for (const auto& c : d.choices) {
      if (c.role == ScopeRole::kOperator && c.match->kind == OperatorKind::kConv2d &&
          c.match->conv.w_shape[0] == out_channels && c.match->conv.w_shape[2] == 3 &&
          c.match->conv.w_shape[3] == 3) {
        return &d;
      }
    }
  }
  return nullptr;
}

TEST(DeriveCases, Conv5x5BecomesConv3x3WithFourTimesTheChannels) {
  const State conv = derivetest::conv_state(1, 3, 8, 8, 2, 5, 2);
  const State opened = conv5x5_opened(conv);
  EXPECT_LE(state_error(opened, conv), kTolerance) << derive::to_string(opened);
  derive::SearchConfig cfg;
  cfg.explorative_depth = 0;  // converging only, from the opened program
  cfg.targets = {OperatorKind::kConv2d};
  const derive::SearchResult r = derive::derive_programs(opened, weights_named(conv, "K"), cfg);
  const Derivation* d = find_conv3x3(r, 4 * 2);
  ASSERT_NE(d, nullptr) << r.derivations.size() << " derivations";
  expect_derived_and_lowered_equal(*d, conv);
}

TEST(DeriveCases, Conv5x5ToConv3x3Automatically) {
  // The same from the conv itself: the five opening rules are explorative (depth 5).
  const State conv = derivetest::conv_state(1, 32, 224, 224, 32, 5, 2);
  derive::SearchConfig cfg;
  cfg.explorative_depth = 5;
  cfg.targets = {OperatorKind::kConv2d};
  const auto t0 = std::chrono::steady_clock::now();
  const derive::SearchResult r = derive::derive_programs(conv, weights_named(conv, "K"), cfg);
  const double seconds = seconds_since(t0);
  report("conv5x5 -> conv3x3", r, seconds);
  EXPECT_LE(seconds, 60.0);
  EXPECT_NE(find_conv3x3(r, 4 * 32), nullptr);
}

}  // namespace
}  // namespace tessera
