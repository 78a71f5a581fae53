// Bridge tasks (tune/reuse/bridge_task.h): two operators of one type rebuilt at the
// position-wise smaller extents are a real task whose loop nest is the bridge operator's and
// whose kernel computes what the operator computes at those sizes (checked against the
// reference interpreter); operators that do not line up give no bridge.
#include <gtest/gtest.h>

#include "compiler/build.h"
#include "const_dims.h"
#include "e2e_harness.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/verify.h"
#include "tune/reuse/bridge_task.h"
#include "tune/reuse/reuse_condition.h"
#include "tune/reuse/selector.h"

namespace tessera::tune::reuse {
namespace {

using ir::Tensor;
using testing::dims;

Task bmm_task(int64_t b, int64_t m, int64_t n, int64_t k, const std::string& name) {
  Tensor x = ir::placeholder("A", dims({b, m, k})), y = ir::placeholder("B", dims({b, k, n}));
  return Task::create({ops::batch_matmul(x, y)}, {x, y}, name);
}

Task conv_task(int64_t channels, int64_t size, const std::string& name) {
  Tensor x = ir::placeholder("X", dims({1, channels, size, size}));
  Tensor w = ir::placeholder("W", dims({channels * 2, channels, 3, 3}));
  return Task::create({ops::conv2d(x, w, nullptr, {1, 1}, {1, 1})}, {x, w}, name);
}

// The bridge's default kernel against the reference interpreter on random inputs.
void expect_bridge_computes_its_operator(const Task& t) {
  compiler::BuiltKernel k = compiler::build_cpu(t.plan, t.default_schedule(), t.name);
  std::map<const ir::TensorNode*, runtime::NDArray> by_tensor;
  std::vector<runtime::NDArray> ins, got;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    ins.push_back(runtime::NDArray::random(t.inputs[i]->dtype,
                                           testing::concrete_shape(t.inputs[i], {}), 5 + i));
    by_tensor[t.inputs[i].get()] = ins.back();
    ptrs.push_back(ins.back().data());
  }
  for (const Tensor& o : t.outputs) got.emplace_back(o->dtype, testing::concrete_shape(o, {}));
  for (auto& g : got) ptrs.push_back(g.data());
  k.run(ptrs, {});
  std::vector<runtime::NDArray> want = ops::run_reference(t.outputs, by_tensor, {});
  for (size_t i = 0; i < got.size(); ++i) {
    runtime::CompareResult c = runtime::allclose(got[i], want[i], 1e-4, 1e-4);
    EXPECT_TRUE(c.ok) << c.message;
  }
}

TEST(ReuseBridgeTask, BatchMatmulBridgeHasTheBridgeOperatorsLoopNest) {
  Task a = bmm_task(1, 32, 96, 96, "a"), b = bmm_task(4, 32, 16, 8, "b");
  std::optional<Task> t = bridge_task(a, b, "bridge");
  ASSERT_TRUE(t);
  const ReuseOperator oa = describe_operator(a), ob = describe_operator(b);
  const ReuseOperator ot = describe_operator(*t);
  EXPECT_TRUE(same_kind(ot, oa));
  EXPECT_EQ(ot.extents, bridge_operator(oa, ob).extents);
  EXPECT_TRUE(can_reuse(ot, oa));
  EXPECT_TRUE(can_reuse(ot, ob));
  expect_bridge_computes_its_operator(*t);
}

TEST(ReuseBridgeTask, PaddedConvolutionBridgeTakesTheSmallerBounds) {
  Task a = conv_task(8, 16, "a"), b = conv_task(4, 24, "b");
  std::optional<Task> t = bridge_task(a, b, "bridge");
  ASSERT_TRUE(t);
  const ReuseOperator ot = describe_operator(*t);
  EXPECT_EQ(ot.extents, bridge_operator(describe_operator(a), describe_operator(b)).extents);
  // 4 channels at 16x16: the pad stage's bounds checks follow the smaller image.
  EXPECT_EQ(t->inputs[0]->shape[1]->int_value, 4);
  EXPECT_EQ(t->inputs[0]->shape[2]->int_value, 16);
  expect_bridge_computes_its_operator(*t);
}

TEST(ReuseBridgeTask, OperatorsThatDoNotLineUpGiveNoBridge) {
  Tensor x = ir::placeholder("A", dims({1, 32, 16})), y = ir::placeholder("B", dims({1, 32, 16}));
  Task transposed = Task::create({ops::batch_matmul(x, y, false, true)}, {x, y}, "t");
  EXPECT_FALSE(bridge_task(bmm_task(1, 32, 32, 16, "a"), transposed, "bridge"));
  Tensor s = ir::placeholder("X", dims({1, 4, 16, 16}));
  Tensor w = ir::placeholder("W", dims({8, 4, 3, 3}));
  Task strided = Task::create({ops::conv2d(s, w, nullptr, {2, 2}, {1, 1})}, {s, w}, "s");
  EXPECT_FALSE(bridge_task(conv_task(4, 16, "a"), strided, "bridge"));
}

TEST(ReuseBridgeTask, BridgesOfEqualExtentsAreRebuiltFromTheirOwnKind) {
  // Two 3x3 convolutions of stride 1 and two of stride 2 (ResNet-50's) whose bridges have equal
  // extents ([1, 128, 14, 14, 128, 3, 3]) but are of different kinds: each bridge names the two
  // operators it joins, and its task rebuilt from them is of their kind.
  auto conv = [](int64_t c, int64_t size, int64_t stride, const std::string& name) {
    Tensor x = ir::placeholder("X", dims({1, c, size, size}));
    Tensor w = ir::placeholder("W", dims({c, c, 3, 3}));
    return Task::create({ops::conv2d(x, w, nullptr, {stride, stride}, {1, 1})}, {x, w}, name);
  };
  const std::vector<Task> tasks = {conv(128, 28, 1, "s1_wide"), conv(128, 56, 2, "s2_wide"),
                                   conv(256, 14, 1, "s1_deep"), conv(256, 28, 2, "s2_deep")};
  std::vector<ReuseOperator> ops;
  for (const Task& t : tasks) ops.push_back(describe_operator(t));
  const std::vector<ReuseOperator> bridges = one_hop_bridges(ops);
  ASSERT_EQ(bridges.size(), 2u);
  EXPECT_EQ(bridges[0].extents, bridges[1].extents);
  EXPECT_FALSE(same_kind(bridges[0], bridges[1]));
  for (const ReuseOperator& b : bridges) {
    ASSERT_EQ(b.joins.size(), 2u);
    const ReuseOperator& a = ops[b.joins[0]];
    EXPECT_TRUE(same_kind(a, b)) << b.name;
    std::optional<Task> t = bridge_task(tasks[b.joins[0]], tasks[b.joins[1]], b.name);
    ASSERT_TRUE(t) << b.name;
    const ReuseOperator rebuilt = describe_operator(*t);
    EXPECT_TRUE(can_reuse(rebuilt, a)) << b.name;
    EXPECT_TRUE(can_reuse(rebuilt, ops[b.joins[1]])) << b.name;
    EXPECT_EQ(rebuilt.extents, b.extents);
  }
  // The selection hands the joins on to its bridge steps.
  const ReuseSelection sel = select_reuse(ops, SelectionMethod::kGreedyBridges);
  for (const TuningStep& st : sel.steps) {
    if (!st.bridge) continue;
    ASSERT_EQ(st.joins.size(), 2u) << st.name;
    EXPECT_TRUE(same_kind(ops[st.joins[0]], ops[st.joins[1]])) << st.name;
  }
}

}  // namespace
}  // namespace tessera::tune::reuse
