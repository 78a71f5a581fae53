// Relaid DAGs (layout/relayout.h): a DAG with layouts on its inputs, intermediates and outputs
// computes the same values, stored in those layouts. Checked with the reference interpreter and
// with kernels built from the relaid DAG (the rules' schedule and construct mode), and the
// rewritten reads are checked to index physical dims without dividing.
#include <gtest/gtest.h>

#include <set>

#include "compiler/compile.h"
#include "const_dims.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "layout/propagate.h"
#include "layout/relayout.h"
#include "layout/templates.h"
#include "layout_check.h"
#include "ops/ops.h"
#include "schedule/stage_plan.h"
#include "util/check.h"

namespace tessera::layout {
namespace {

using ir::Tensor;
using testing::dims;
using testing::LayoutCase;

// Whether some read in `t`'s body divides or takes a remainder in an index.
bool divides_in_reads(const Tensor& t) {
  bool found = false;
  ir::visit_expr(t->op->body, [&](const ir::Expr& e) {
    if (e->kind != ir::ExprKind::kAccess) return;
    for (const ir::Expr& i : e->operands) {
      ir::visit_expr(i, [&](const ir::Expr& n) {
        found |= n->kind == ir::ExprKind::kFloorDiv || n->kind == ir::ExprKind::kFloorMod;
      });
    }
  });
  return found;
}

TEST(Relayout, BlockedConvolutionReadsAndWritesBlockedLayouts) {
  Tensor x = ir::placeholder("X", dims({1, 32, 9, 9})),
         w = ir::placeholder("W", dims({16, 32, 3, 3}));
  Tensor y = ops::relu(ops::conv2d(x, w, nullptr, {1, 1}, {0, 0}), "Y");
  LayoutCase c{{y}, {x, w}, {}};
  c.layouts.emplace("X", Layout::parse({1, 32, 9, 9}, "split(1,16) reorder(0,1,3,4,2)"));
  c.layouts.emplace("W",
                    Layout::parse({16, 32, 3, 3}, "split(0,8) split(2,16) reorder(0,2,4,5,3,1)"));
  c.layouts.emplace("Y", Layout::parse({1, 16, 7, 7}, "split(1,8) reorder(0,1,3,4,2)"));
  c.layouts = propagate_layouts(c.outputs, c.layouts);
  ASSERT_EQ(c.layouts.count("conv2d"), 1u);  // reached through the relu
  testing::expect_relaid_values(c);

  const Relaid r = apply_layouts(c.outputs, c.inputs, c.layouts);
  EXPECT_EQ(constant_shape(r.outputs[0]), (std::vector<int64_t>{1, 2, 7, 7, 8}));
  EXPECT_EQ(constant_shape(r.inputs[1]), (std::vector<int64_t>{2, 2, 3, 3, 16, 8}));
  // The summed channel is split to match the blocked input: no division left in the conv.
  const Tensor conv = ir::direct_inputs(r.outputs[0])[0];
  EXPECT_FALSE(divides_in_reads(conv)) << ir::to_string(conv);
  EXPECT_EQ(conv->op->reduce_axes.size(), 4u);
}

TEST(Relayout, ElementwiseConsumerOfARelaidProducerReadsItInPlace) {
  Tensor a = ir::placeholder("A", dims({6, 32})), b = ir::placeholder("B", dims({32, 24}));
  Tensor mm = ops::matmul(a, b, false, false, "MM");
  Tensor out = ops::relu(mm, "R");
  LayoutCase c{{out}, {a, b}, {}};
  c.layouts.emplace("MM", Layout::parse({6, 24}, "split(1,8) reorder(1,0,2)"));
  c.layouts = propagate_layouts(c.outputs, c.layouts);
  ASSERT_EQ(c.layouts.count("R"), 1u);  // forward from the matmul
  testing::expect_relaid_values(c);
  const Relaid r = apply_layouts(c.outputs, c.inputs, c.layouts);
  EXPECT_FALSE(divides_in_reads(r.outputs[0])) << ir::to_string(r.outputs[0]);
}

TEST(Relayout, PaddedAndUnfoldedLayoutsKeepValues) {
  // A split that does not divide (positions past the end hold the reduction's identity) and
  // the stride-2 unfold of a convolution's input rows.
  Tensor x = ir::placeholder("X", dims({1, 4, 11, 11})),
         w = ir::placeholder("W", dims({6, 4, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {2, 2}, {0, 0}, {1, 1}, 1, "Y");
  LayoutCase c{{y}, {x, w}, {}};
  c.layouts.emplace("X", Layout::parse({1, 4, 11, 11}, "unfold(2,2,2,3)"));
  c.layouts.emplace("Y", Layout::parse({1, 6, 5, 5}, "split(1,4) reorder(0,1,3,4,2)"));
  testing::expect_relaid_values(c);

  // Output rows tiled by 2 like the input's unfold: each output tile reads its own input tile,
  // at row offsets inside it (no min, no division).
  c.layouts.at("Y") = Layout::parse({1, 6, 5, 5}, "split(2,2) reorder(0,2,1,3,4)");
  testing::expect_relaid_values(c);
  const Relaid r = apply_layouts(c.outputs, c.inputs, c.layouts);
  EXPECT_FALSE(divides_in_reads(r.outputs[0])) << ir::to_string(r.outputs[0]);
}

// Every template candidate of a convolution (with bias and relu), a depthwise convolution and a
// linear layer relays to a DAG computing the same values.
TEST(Relayout, EveryTemplateCandidateKeepsValues) {
  Tensor x = ir::placeholder("X", dims({1, 16, 8, 8})),
         w = ir::placeholder("W", dims({32, 16, 3, 3}));
  Tensor bias = ir::placeholder("B", dims({32}));
  Tensor conv = ops::relu(ops::conv2d(x, w, bias, {1, 1}, {1, 1}), "Y");
  Tensor dx = ir::placeholder("X", dims({1, 32, 9, 9})),
         dw = ir::placeholder("W", dims({32, 1, 3, 3}));
  Tensor depthwise = ops::conv2d(dx, dw, nullptr, {2, 2}, {1, 1}, {1, 1}, 32);
  Tensor a = ir::placeholder("A", dims({12, 24})), lw = ir::placeholder("W", dims({32, 24}));
  Tensor linear = ops::matmul(a, lw, false, true, "Y");
  const std::vector<LayoutCase> graphs = {
      {{conv}, {x, w, bias}, {}}, {{depthwise}, {dx, dw}, {}}, {{linear}, {a, lw}, {}}};
  const std::vector<AnchorKind> kinds = {AnchorKind::kConv, AnchorKind::kDepthwise,
                                         AnchorKind::kMatmul};
  for (size_t g = 0; g < graphs.size(); ++g) {
    EXPECT_EQ(anchor_kind(graphs[g].outputs), kinds[g]);
    const std::vector<LayoutCandidate> cands = layout_candidates(graphs[g].outputs, 16);
    ASSERT_GE(cands.size(), 2u);
    EXPECT_EQ(cands[0].name, "fixed");
    for (const LayoutCandidate& cand : cands) {
      SCOPED_TRACE(std::string(anchor_kind_name(kinds[g])) + " " + cand.name);
      LayoutCase c = graphs[g];
      c.layouts = cand.layouts;
      testing::expect_relaid_values(c, {compiler::TuneMode::kDefault});
    }
  }
}

TEST(Relayout, APaddedCopyOfATransposedInputIsStoredInTheInputsOrder) {
  // An NHWC input seen as NCHW (the backend's view of a channels_last tensor), padded for a
  // convolution: the pad takes the input's order, so the conv reads channels contiguously.
  Tensor p = ir::placeholder("P", dims({1, 6, 7, 16}));
  Tensor x = ops::permute(p, {0, 3, 1, 2});
  Tensor w = ir::placeholder("W", dims({16, 16, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {1, 1}, {1, 1});
  const LayoutMap m = propagate_layouts({y}, {});
  const Tensor pad = ir::direct_inputs(y)[0];
  ASSERT_EQ(pad->op->tag, "pad");
  ASSERT_EQ(m.count(pad->name), 1u);
  EXPECT_EQ(m.at(pad->name).to_string(), "reorder(0,2,3,1)");
  LayoutCase c{{y}, {p, w}, m};
  testing::expect_relaid_values(c, {compiler::TuneMode::kDefault});
}

TEST(Relayout, AConvolutionStoredNHWCReadsARelayableWeightInHWIO) {
  // The backend's case: an NHWC input seen as NCHW, the convolution (dense and depthwise) and
  // its epilogue stored NHWC. A weight the caller offers (it lays weights out once) is read
  // with output channels innermost, the NHWC loop nest's vector lanes.
  for (int64_t groups : {int64_t{1}, int64_t{16}}) {
    SCOPED_TRACE("groups " + std::to_string(groups));
    Tensor p = ir::placeholder("P", dims({1, 6, 7, 16}));
    Tensor w = ir::placeholder("W", dims({16, 16 / groups, 3, 3}));
    Tensor y = ops::relu(
        ops::conv2d(ops::permute(p, {0, 3, 1, 2}), w, nullptr, {1, 1}, {1, 1}, {1, 1}, groups),
        "Y");
    LayoutMap given;
    given.emplace("Y", Layout::parse({1, 16, 6, 7}, "reorder(0,2,3,1)"));
    EXPECT_EQ(propagate_layouts({y}, given).count("W"), 0u);  // not offered: the caller's order
    const LayoutMap m = propagate_layouts({y}, given, {"W"});
    ASSERT_EQ(m.count("W"), 1u);
    EXPECT_EQ(m.at("W").to_string(), "reorder(2,3,1,0)");
    LayoutCase c{{y}, {p, w}, m};
    testing::expect_relaid_values(c, {compiler::TuneMode::kDefault});
  }
}

TEST(Relayout, AConvolutionStoredNHWCAtBatchOneKeepsItsEpilogueFused) {
  // Relaid at batch 1, the epilogue reads conv2d[0, l1, l2, l3]: the simplifier knows the
  // size-1 iterator is 0. That is still the identity read epilogue fusion needs.
  Tensor p = ir::placeholder("P", dims({1, 8, 8, 16}));
  Tensor w = ir::placeholder("W", dims({16, 1, 3, 3}));
  Tensor y = ops::relu(
      ops::conv2d(ops::permute(p, {0, 3, 1, 2}), w, nullptr, {1, 1}, {1, 1}, {1, 1}, 16), "Y");
  LayoutMap given;
  given.emplace("Y", Layout::parse({1, 16, 8, 8}, "reorder(0,2,3,1)"));
  const LayoutMap m = propagate_layouts({y}, given, {"W"});
  const Relaid r = apply_layouts({y}, {p, w}, m);
  const schedule::StagePlan plan = schedule::plan_stages(r.outputs, r.inputs);
  ASSERT_EQ(plan.stages.size(), 2u);  // the padded copy, then the conv with relu fused
  EXPECT_EQ(plan.stages[1].op->op->tag, "conv2d");
  ASSERT_NE(plan.stages[1].epilogue, nullptr);
  EXPECT_EQ(plan.stages[1].epilogue->name, "Y");
  LayoutCase c{{y}, {p, w}, m};
  testing::expect_relaid_values(c, {compiler::TuneMode::kDefault});
}

TEST(Relayout, UniquelyNamedRenamesLaterNamesakesAndKeepsValues) {
  // The backend names tensors by op: a partition easily has two "add"s, and layouts, given by
  // name, cannot tell them apart until the DAG is uniquely named.
  Tensor a = ir::placeholder("A", dims({4, 8})), b = ir::placeholder("B", dims({4, 8}));
  Tensor first = ops::add(a, b, "add");
  Tensor second = ops::add(first, a, "add");
  Tensor out = ops::relu(second, "add_1");  // the first free suffix is taken: skipped
  LayoutMap layouts;
  layouts.emplace("add_1", Layout::parse({4, 8}, "split(1,4) reorder(1,0,2)"));
  EXPECT_THROW(apply_layouts({out}, {a, b}, propagate_layouts({out}, layouts)), Error);

  const Relaid named = uniquely_named({out}, {a, b});
  const ir::TensorDAG dag = ir::collect_dag(named.outputs);
  std::set<std::string> names;
  for (const Tensor& t : dag.computes) EXPECT_TRUE(names.insert(t->name).second) << t->name;
  EXPECT_EQ(names, (std::set<std::string>{"add", "add_2", "add_1"}));
  EXPECT_EQ(named.outputs[0]->name, "add_1");
  EXPECT_EQ(named.inputs[0].get(), a.get());  // placeholders are kept
  LayoutCase c{named.outputs, named.inputs, layouts};
  c.layouts = propagate_layouts(c.outputs, c.layouts);
  EXPECT_EQ(c.layouts.count("add_2"), 1u);  // reached the renamed producer
  testing::expect_relaid_values(c, {compiler::TuneMode::kDefault});
}

TEST(Relayout, RejectsUnknownNamesAndOtherShapes) {
  Tensor a = ir::placeholder("A", dims({4, 8}));
  Tensor r = ops::relu(a, "R");
  EXPECT_THROW(apply_layouts({r}, {a}, {{"Q", Layout::identity({4, 8})}}), Error);
  EXPECT_THROW(apply_layouts({r}, {a}, {{"A", Layout::identity({8, 4})}}), Error);
  Tensor s = ir::placeholder("S", {ir::size_var("n", 1, 64), ir::int_imm(8)});
  EXPECT_THROW(apply_layouts({ops::relu(s, "T")}, {s}, {{"S", Layout::identity({4, 8})}}), Error);
}

}  // namespace
}  // namespace tessera::layout
