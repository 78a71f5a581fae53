// Relaid DAGs (layout/relayout.h): a DAG with layouts on its inputs, intermediates and outputs
// computes the same values, stored in those layouts. Checked with the reference interpreter and
// with kernels built from the relaid DAG (the rules' schedule and construct mode), and the
// rewritten reads are checked to index physical dims without dividing.
#include <gtest/gtest.h>

#include "compiler/compile.h"
#include "const_dims.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "layout/propagate.h"
#include "layout/relayout.h"
#include "ops/ops.h"
#include "ops/reference.h"
#include "runtime/ndarray.h"
#include "util/check.h"

namespace tessera::layout {
namespace {

using ir::Tensor;
using runtime::NDArray;
using testing::dims;

// The values of `t` (a placeholder's array or a computed tensor of `inputs`) stored in `l`.
NDArray stored_in(const NDArray& logical, const Tensor& like, const Layout& l) {
  Tensor p = ir::placeholder(like->name + "_logical", like->shape, like->dtype);
  return ops::run_reference({to_physical(p, l, like->name + "_stored")}, {{p.get(), logical}})[0];
}

struct Case {
  std::vector<Tensor> outputs, inputs;
  LayoutMap layouts;
};

// Runs the original and the relaid DAG on the same random inputs (relaid inputs converted with
// to_physical) through the reference interpreter and through kernels built from the relaid DAG;
// every output must equal the original output stored in its layout.
void expect_same_values(const Case& c) {
  const Relaid r = apply_layouts(c.outputs, c.inputs, c.layouts);
  std::map<const ir::TensorNode*, NDArray> orig_in, relaid_in;
  std::vector<void*> ptrs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    std::vector<int64_t> shape = constant_shape(c.inputs[i]);
    NDArray a = NDArray::random(c.inputs[i]->dtype, shape, 40 + i);
    orig_in[c.inputs[i].get()] = a;
    auto l = c.layouts.find(c.inputs[i]->name);
    relaid_in[r.inputs[i].get()] = l == c.layouts.end() ? a : stored_in(a, c.inputs[i], l->second);
    ptrs.push_back(relaid_in[r.inputs[i].get()].data());
  }
  std::vector<NDArray> want = ops::run_reference(c.outputs, orig_in);
  for (size_t o = 0; o < want.size(); ++o) {
    auto l = c.layouts.find(c.outputs[o]->name);
    if (l != c.layouts.end()) want[o] = stored_in(want[o], c.outputs[o], l->second);
  }
  std::vector<NDArray> ref = ops::run_reference(r.outputs, relaid_in);
  for (size_t o = 0; o < want.size(); ++o) {
    runtime::CompareResult cmp = runtime::allclose(ref[o], want[o], 1e-9, 1e-9);
    EXPECT_TRUE(cmp.ok) << "reference of the relaid DAG: " << cmp.message;
  }
  for (compiler::TuneMode mode : {compiler::TuneMode::kDefault, compiler::TuneMode::kConstruct}) {
    compiler::CompileRequest req;
    req.tune = mode;
    compiler::CompileResult k = compiler::compile(r.outputs, r.inputs, req);
    std::vector<NDArray> got;
    std::vector<void*> args = ptrs;
    for (const Tensor& o : r.outputs) {
      got.emplace_back(o->dtype, constant_shape(o));
      args.push_back(got.back().data());
    }
    k.kernel->run(args, {});
    for (size_t o = 0; o < want.size(); ++o) {
      runtime::CompareResult cmp = runtime::allclose(got[o], want[o], 1e-4, 1e-4);
      EXPECT_TRUE(cmp.ok) << compiler::tune_mode_name(mode) << ": " << cmp.message
                          << "\nschedule: " << k.kernel->schedule().dump();
    }
  }
}

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
  Case c{{y}, {x, w}, {}};
  c.layouts.emplace("X", Layout::parse({1, 32, 9, 9}, "split(1,16) reorder(0,1,3,4,2)"));
  c.layouts.emplace("W",
                    Layout::parse({16, 32, 3, 3}, "split(0,8) split(2,16) reorder(0,2,4,5,3,1)"));
  c.layouts.emplace("Y", Layout::parse({1, 16, 7, 7}, "split(1,8) reorder(0,1,3,4,2)"));
  c.layouts = propagate_layouts(c.outputs, c.layouts);
  ASSERT_EQ(c.layouts.count("conv2d"), 1u);  // reached through the relu
  expect_same_values(c);

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
  Case c{{out}, {a, b}, {}};
  c.layouts.emplace("MM", Layout::parse({6, 24}, "split(1,8) reorder(1,0,2)"));
  c.layouts = propagate_layouts(c.outputs, c.layouts);
  ASSERT_EQ(c.layouts.count("R"), 1u);  // forward from the matmul
  expect_same_values(c);
  const Relaid r = apply_layouts(c.outputs, c.inputs, c.layouts);
  EXPECT_FALSE(divides_in_reads(r.outputs[0])) << ir::to_string(r.outputs[0]);
}

TEST(Relayout, PaddedAndUnfoldedLayoutsKeepValues) {
  // A split that does not divide (positions past the end hold the reduction's identity) and
  // the stride-2 unfold of a convolution's input rows.
  Tensor x = ir::placeholder("X", dims({1, 4, 11, 11})),
         w = ir::placeholder("W", dims({6, 4, 3, 3}));
  Tensor y = ops::conv2d(x, w, nullptr, {2, 2}, {0, 0}, {1, 1}, 1, "Y");
  Case c{{y}, {x, w}, {}};
  c.layouts.emplace("X", Layout::parse({1, 4, 11, 11}, "unfold(2,2,2,3)"));
  c.layouts.emplace("Y", Layout::parse({1, 6, 5, 5}, "split(1,4) reorder(0,1,3,4,2)"));
  expect_same_values(c);
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
