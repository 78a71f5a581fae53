// ETO's reuse condition over Tessera workloads: the extent-free operator type, the sketch set,
// the anchor loop nest, position-wise domination, the reuse pairs and one-hop bridges of the
// BERT-base batch matmuls (4 directed pairs alone, 24 with their three bridges).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "const_dims.h"
#include "ops/ops.h"
#include "tune/reuse/reuse_condition.h"
#include "util/check.h"

namespace tessera::tune::reuse {
namespace {

using ir::Tensor;
using testing::dims;

// [b, M, N, K]: C[b, M, N] = sum(k) A[b, M, K] B[b, K, N].
struct BmmShape {
  int64_t b, m, n, k;
};

std::vector<Tensor> bmm(const BmmShape& s, bool trans_b = false) {
  Tensor a = ir::placeholder("A", dims({s.b, s.m, s.k}));
  Tensor b = ir::placeholder("B", trans_b ? dims({s.b, s.n, s.k}) : dims({s.b, s.k, s.n}));
  return {ops::batch_matmul(a, b, false, trans_b), a, b};  // output, then inputs
}

ReuseOperator describe_bmm(const BmmShape& s, const std::string& name) {
  std::vector<Tensor> t = bmm(s);
  return describe_operator({t[0]}, {t[1], t[2]}, name);
}

OperatorType type_of(const Tensor& out) { return operator_type({out}); }

// A 3x3 convolution, `pad` rows of zeros around the input (a pad stage when pad > 0).
std::vector<Tensor> conv(int64_t channels, int64_t size, int64_t stride, int64_t pad = 1) {
  Tensor x = ir::placeholder("X", dims({1, channels, size, size}));
  Tensor w = ir::placeholder("W", dims({channels, channels, 3, 3}));
  return {ops::conv2d(x, w, nullptr, {stride, stride}, {pad, pad}), x, w};
}

ReuseOperator describe_conv(int64_t channels, int64_t size, const std::string& name) {
  std::vector<Tensor> t = conv(channels, size, 1);
  return describe_operator({t[0]}, {t[1], t[2]}, name);
}

// The five distinct batch matmuls of BERT-base at sequence 128, batch 1 (QKV/out projections,
// Q K^T per head, attention x V per head, FFN up, FFN down).
const std::vector<BmmShape> kBert = {{1, 128, 768, 768},
                                     {12, 128, 128, 64},
                                     {12, 128, 64, 128},
                                     {1, 128, 3072, 768},
                                     {1, 128, 768, 3072}};

std::vector<ReuseOperator> bert_operators() {
  std::vector<ReuseOperator> ops;
  for (size_t i = 0; i < kBert.size(); ++i)
    ops.push_back(describe_bmm(kBert[i], "op" + std::to_string(i)));
  return ops;
}

TEST(ReuseCondition, TypeIgnoresExtentsButNotStructure) {
  EXPECT_EQ(type_of(bmm({1, 128, 768, 768})[0]), type_of(bmm({12, 128, 64, 128})[0]));
  // Another body (a transposed operand) or another operator is another type.
  EXPECT_NE(type_of(bmm({1, 128, 768, 768})[0]), type_of(bmm({1, 128, 768, 768}, true)[0]));
  Tensor a = ir::placeholder("A", dims({128, 768})), b = ir::placeholder("B", dims({768, 768}));
  EXPECT_NE(type_of(ops::matmul(a, b)), type_of(bmm({1, 128, 768, 768})[0]));
  // A convolution's stride and padding are constants of its body, not extents; the bounds
  // checks of its pad stage (h < H + 1) are extents in disguise.
  EXPECT_EQ(type_of(conv(8, 16, 1)[0]), type_of(conv(16, 16, 1)[0]));
  EXPECT_EQ(type_of(conv(8, 16, 1)[0]), type_of(conv(8, 32, 1)[0]));
  EXPECT_NE(type_of(conv(8, 16, 1)[0]), type_of(conv(8, 16, 2)[0]));
  EXPECT_NE(type_of(conv(8, 16, 1)[0]), type_of(conv(8, 16, 1, 0)[0]));
  EXPECT_NE(type_of(conv(8, 16, 1, 1)[0]), type_of(conv(8, 16, 1, 2)[0]));
  // An epilogue is part of the DAG.
  EXPECT_NE(type_of(ops::relu(bmm({1, 8, 8, 8})[0])), type_of(bmm({1, 8, 8, 8})[0]));
}

TEST(ReuseCondition, AbstractDagHasOnlyFreshSizes) {
  std::vector<Tensor> abstract = abstract_extents({bmm({2, 3, 4, 5})[0]});
  const ir::TensorDAG dag = ir::collect_dag(abstract);
  std::set<const ir::ExprNode*> sizes;
  size_t dims_seen = 0;
  auto take = [&](const ir::Expr& e) {
    ASSERT_TRUE(e->is_var()) << "a dimension kept a constant";
    sizes.insert(e.get());
    ++dims_seen;
  };
  for (const Tensor& p : dag.placeholders) {
    for (const ir::Expr& d : p->shape) take(d);
  }
  for (const Tensor& c : dag.computes) {
    for (const ir::IterVar& iv : c->op->axes) take(iv.extent);
    for (const ir::IterVar& iv : c->op->reduce_axes) take(iv.extent);
  }
  // A: 3 dims, B: 3 dims, the product: 3 axes + 1 summation; each one its own size.
  EXPECT_EQ(dims_seen, 10u);
  EXPECT_EQ(sizes.size(), dims_seen);
}

TEST(ReuseCondition, ExtentsAreTheAnchorLoopNest) {
  ReuseOperator op = describe_bmm({12, 128, 64, 128}, "pv");
  EXPECT_EQ(op.extents, (std::vector<int64_t>{12, 128, 64, 128}));
  EXPECT_EQ(op.num_spatial, 3);
  EXPECT_DOUBLE_EQ(op.points(), 12.0 * 128 * 64 * 128);
  EXPECT_DOUBLE_EQ(op.reduce_points(), 128.0);
  // With a bias epilogue the anchor is still the product, not the elementwise add.
  Tensor x = ir::placeholder("X", dims({32, 48})), w = ir::placeholder("W", dims({16, 48}));
  Tensor bias = ir::placeholder("bias", dims({16}));
  ReuseOperator dense = describe_operator({ops::dense(x, w, bias)}, {x, w, bias}, "dense");
  EXPECT_EQ(dense.extents, (std::vector<int64_t>{32, 16, 48}));
  EXPECT_EQ(dense.num_spatial, 2);
}

TEST(ReuseCondition, DominationIsPositionWise) {
  EXPECT_TRUE(extents_dominated({1, 2, 3}, {1, 2, 3}));
  EXPECT_TRUE(extents_dominated({1, 2, 3}, {4, 2, 3}));
  EXPECT_FALSE(extents_dominated({1, 5, 3}, {4, 2, 3}));
  EXPECT_FALSE(extents_dominated({1, 2}, {1, 2, 3}));  // loop counts differ
  ReuseOperator small = describe_bmm({1, 64, 64, 64}, "small");
  ReuseOperator big = describe_bmm({2, 64, 128, 64}, "big");
  ReuseOperator crossed = describe_bmm({1, 128, 32, 64}, "crossed");
  EXPECT_TRUE(can_reuse(small, big));
  EXPECT_TRUE(can_reuse(big, small));
  EXPECT_FALSE(can_reuse(small, crossed));
  // Same extents, other sketch set or other type: no reuse either way.
  ReuseOperator other_sketches = big;
  other_sketches.sketch_set += "[another plan]";
  EXPECT_FALSE(can_reuse(small, other_sketches));
  std::vector<Tensor> t = bmm({2, 64, 128, 64}, true);
  EXPECT_FALSE(can_reuse(small, describe_operator({t[0]}, {t[1], t[2]}, "trans")));
}

TEST(ReuseCondition, SketchSetIsTheSameAcrossBertShapes) {
  std::vector<ReuseOperator> ops = bert_operators();
  ASSERT_FALSE(ops[0].sketch_set.empty());
  for (const ReuseOperator& op : ops) {
    EXPECT_TRUE(same_kind(ops[0], op)) << op.name << ":\n"
                                       << op.sketch_set << "vs\n"
                                       << ops[0].sketch_set;
  }
  // A fused epilogue is another type (and another plan): never the same kind as the bare product.
  std::vector<Tensor> t = bmm({1, 128, 768, 768});
  ReuseOperator with_relu = describe_operator({ops::relu(t[0])}, {t[1], t[2]}, "bmm_relu");
  EXPECT_FALSE(same_kind(ops[0], with_relu));
}

std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> pair_extents(
    const std::vector<ReuseOperator>& ops) {
  std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> out;
  for (auto [u, s] : reuse_pairs(ops)) out.insert({ops[u].extents, ops[s].extents});
  return out;
}

TEST(ReuseCondition, BertHasFourPairsWithoutBridges) {
  std::vector<ReuseOperator> ops = bert_operators();
  std::vector<std::pair<int, int>> pairs = reuse_pairs(ops);
  EXPECT_EQ(pairs.size(), 4u);
  // Both directions of [1,128,768,768] with each FFN matmul, nothing else.
  const std::set<std::pair<int, int>> want = {{0, 3}, {3, 0}, {0, 4}, {4, 0}};
  const std::set<std::pair<int, int>> got(pairs.begin(), pairs.end());
  EXPECT_EQ(got, want);
}

TEST(ReuseCondition, BertHasTwentyFourPairsWithOneHopBridges) {
  std::vector<ReuseOperator> ops = bert_operators();
  std::vector<ReuseOperator> bridges = one_hop_bridges(ops);
  std::set<std::vector<int64_t>> got;
  for (const ReuseOperator& g : bridges) got.insert(g.extents);
  const std::set<std::vector<int64_t>> want = {
      {1, 128, 128, 64}, {1, 128, 64, 128}, {12, 128, 64, 64}};
  EXPECT_EQ(got, want);
  EXPECT_EQ(bridges.size(), 3u);  // no duplicates
  std::vector<ReuseOperator> all = ops;
  all.insert(all.end(), bridges.begin(), bridges.end());
  EXPECT_EQ(reuse_pairs(all).size(), 24u);

  // A bridge is an operator like any other: built for real, it has the kind Def. 5 gives it and
  // the same pairs.
  std::vector<ReuseOperator> real = ops;
  for (const ReuseOperator& g : bridges) {
    ReuseOperator r =
        describe_bmm({g.extents[0], g.extents[1], g.extents[2], g.extents[3]}, g.name);
    EXPECT_TRUE(same_kind(r, g)) << g.name;
    EXPECT_EQ(r.extents, g.extents);
    real.push_back(r);
  }
  EXPECT_EQ(pair_extents(real), pair_extents(all));
}

TEST(ReuseCondition, PaddedConvolutionsOfTwoResolutionsMeetAtABridge) {
  // The paper's Sec. 6.2 situation: 64 channels at 56x56 against 128 channels at 28x28, both
  // 3x3 with padding 1. Neither dominates; the bridge has 64 channels at 28x28.
  std::vector<ReuseOperator> ops = {describe_conv(64, 56, "c56"), describe_conv(128, 28, "c28")};
  EXPECT_EQ(ops[0].extents, (std::vector<int64_t>{1, 64, 56, 56, 64, 3, 3}));
  ASSERT_TRUE(same_kind(ops[0], ops[1])) << ops[0].sketch_set << "vs\n" << ops[1].sketch_set;
  EXPECT_TRUE(reuse_pairs(ops).empty());
  std::vector<ReuseOperator> bridges = one_hop_bridges(ops);
  ASSERT_EQ(bridges.size(), 1u);
  EXPECT_EQ(bridges[0].extents, (std::vector<int64_t>{1, 64, 28, 28, 64, 3, 3}));
  ops.push_back(bridges[0]);
  EXPECT_EQ(reuse_pairs(ops).size(), 4u);
  EXPECT_TRUE(same_kind(describe_conv(64, 28, "real bridge"), bridges[0]));
}

TEST(ReuseCondition, BridgesSkipKnownOperatorsAndOtherKinds) {
  // [1,128,3072,768] and [1,128,768,3072] bridge to [1,128,768,768], which is one of the set.
  std::vector<ReuseOperator> ops = {describe_bmm({1, 128, 3072, 768}, "up"),
                                    describe_bmm({1, 128, 768, 3072}, "down")};
  ASSERT_EQ(one_hop_bridges(ops).size(), 1u);
  EXPECT_EQ(one_hop_bridges(ops)[0].extents, (std::vector<int64_t>{1, 128, 768, 768}));
  ops.push_back(describe_bmm({1, 128, 768, 768}, "proj"));
  EXPECT_TRUE(one_hop_bridges(ops).empty());
  // Different kinds are never bridged.
  std::vector<Tensor> t = bmm({1, 64, 32, 16}, true);
  std::vector<ReuseOperator> mixed = {describe_bmm({1, 16, 64, 64}, "plain"),
                                      describe_operator({t[0]}, {t[1], t[2]}, "trans")};
  EXPECT_TRUE(one_hop_bridges(mixed).empty());
  EXPECT_THROW(bridge_operator(mixed[0], mixed[1]), tessera::Error);
}

}  // namespace
}  // namespace tessera::tune::reuse
