// Canonical text parser: every operator of the library prints, parses back and prints the same
// text (several shapes, symbolic sizes, dtypes, fused epilogues); the plan hints make the parsed
// DAG plan like the original; damaged text throws tessera::Error and never crashes; and a task
// sent as text is measured in "another process" (measure_canonical) like the original.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "db/canonical_parse.h"
#include "db/canonical_text.h"
#include "ir/structural_hash.h"
#include "ops/extra_elementwise.h"
#include "ops/extra_index.h"
#include "ops/ops.h"
#include "schedule/random_schedule.h"
#include "schedule/stage_plan.h"
#include "tune/remote_measure.h"
#include "util/check.h"

namespace tessera {
namespace {

using ir::DType;
using ir::Expr;
using ir::Tensor;

struct Workload {
  std::string name;
  std::vector<Tensor> outputs;
  std::vector<Tensor> inputs;
};

Tensor ph(const std::string& name, std::vector<Expr> shape, DType t = DType::kFloat32) {
  return ir::placeholder(name, std::move(shape), t);
}

// One workload per operator constructor of csrc/ops/, over inputs of `dtype` (float ops only get
// float dtypes) with dims n (maybe symbolic) and 8, 6.
std::vector<Workload> op_workloads(DType dt, const Expr& n) {
  std::vector<Workload> w;
  auto unary = [&](const std::string& name, const std::function<Tensor(const Tensor&)>& f) {
    Tensor x = ph("x", {n, 8}, dt);
    w.push_back({name, {f(x)}, {x}});
  };
  auto binary = [&](const std::string& name,
                    const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
    Tensor a = ph("a", {n, 8}, dt), b = ph("b", {8}, dt);  // broadcast
    w.push_back({name, {f(a, b)}, {a, b}});
  };
  binary("add", [](auto& a, auto& b) { return ops::add(a, b); });
  binary("sub", [](auto& a, auto& b) { return ops::sub(a, b); });
  binary("mul", [](auto& a, auto& b) { return ops::mul(a, b); });
  binary("maximum", [](auto& a, auto& b) { return ops::maximum(a, b); });
  binary("minimum", [](auto& a, auto& b) { return ops::minimum(a, b); });
  unary("add_scalar", [](auto& x) { return ops::add(x, 2.5); });
  unary("neg", [](auto& x) { return ops::neg(x); });
  unary("abs", [](auto& x) { return ops::abs(x); });
  unary("relu", [](auto& x) { return ops::relu(x); });
  unary("clamp", [](auto& x) { return ops::clamp(x, -1.0, 3.0); });
  unary("cast", [](auto& x) { return ops::cast(x, DType::kFloat64); });
  unary("compare", [](auto& x) { return ops::compare(x, 0.5, ops::Compare::kLT); });
  unary("logical_not",
        [](auto& x) { return ops::logical_not(ops::compare(x, 0.0, ops::Compare::kGT)); });
  binary("logical_and_or", [](auto& a, auto& b) {
    Tensor p = ops::compare(a, b, ops::Compare::kGE), q = ops::compare(a, 1.0, ops::Compare::kNE);
    return ops::logical_or(ops::logical_and(p, q), q);
  });
  binary("where",
         [](auto& a, auto& b) { return ops::where(ops::compare(a, b, ops::Compare::kEQ), a, b); });
  unary("permute", [](auto& x) { return ops::permute(x, {1, 0}); });
  unary("transpose", [](auto& x) { return ops::transpose(x, 0, 1); });
  unary("reshape", [&](auto& x) { return ops::reshape(x, {n, 2, 4}); });
  unary("slice", [](auto& x) { return ops::slice(x, 1, 1, 7, 2); });
  unary("pad", [](auto& x) { return ops::pad(x, {{0, 0}, {2, 1}}, -1.5); });
  unary("broadcast_to", [&](auto& x) { return ops::broadcast_to(x, {3, n, 8}); });
  binary("concat", [&](auto& a, auto&) { return ops::concat({a, ops::relu(a)}, 1); });
  unary("sum", [](auto& x) { return ops::reduce_sum(x, {1}); });
  unary("sum_all_keepdim", [](auto& x) { return ops::reduce_sum(x, {}, true); });
  unary("max", [](auto& x) { return ops::reduce_max(x, {0}); });
  unary("min", [](auto& x) { return ops::reduce_min(x, {1}, true); });
  {
    Tensor ids = ph("ids", {5}, DType::kInt64), x = ph("x", {n, 8}, dt);
    w.push_back({"index_select", {ops::index_select(x, 0, ids)}, {x, ids}});
    Tensor idx = ph("idx", {n, 3}, DType::kInt64);
    w.push_back({"gather", {ops::gather(x, 1, idx)}, {x, idx}});
  }
  {
    Tensor x = ph("x", {n, 8}, dt);
    Tensor f = ops::add(x, ops::full({n, 8}, 3.0, dt));
    w.push_back({"full", {f}, {x}});
    Tensor r = ph("r", {n}, dt);
    w.push_back(
        {"arange", {ops::add(r, ops::arange(n, 1.0, ir::is_float(dt) ? 0.5 : 2.0, dt))}, {r}});
  }
  if (!ir::is_float(dt)) return w;

  unary("gelu", [](auto& x) { return ops::gelu(x); });
  unary("tanh", [](auto& x) { return ops::tanh(x); });
  unary("exp", [](auto& x) { return ops::exp(x); });
  unary("log", [](auto& x) { return ops::log(x); });
  unary("sqrt", [](auto& x) { return ops::sqrt(x); });
  unary("rsqrt", [](auto& x) { return ops::rsqrt(x); });
  unary("sigmoid", [](auto& x) { return ops::sigmoid(x); });
  unary("erf", [](auto& x) { return ops::erf(x); });
  unary("floor_ceil", [](auto& x) { return ops::ceil(ops::floor(x)); });
  binary("div", [](auto& a, auto& b) { return ops::div(a, b); });
  binary("pow", [](auto& a, auto& b) { return ops::pow(a, b); });
  unary("mean", [](auto& x) { return ops::reduce_mean(x, {0, 1}); });
  unary("softmax", [](auto& x) { return ops::softmax(x); });
  unary("log_softmax", [](auto& x) { return ops::log_softmax(x, 0); });
  {
    Tensor x = ph("x", {n, 8}, dt), g = ph("g", {8}, dt), b = ph("b", {8}, dt);
    w.push_back({"layer_norm", {ops::layer_norm(x, 1, g, b, 1e-6)}, {x, g, b}});
  }
  {
    Tensor a = ph("a", {n, 16}, dt), b = ph("b", {16, 24}, dt), bt = ph("bt", {24, 16}, dt);
    w.push_back({"matmul", {ops::matmul(a, b)}, {a, b}});
    w.push_back({"matmul_tb", {ops::matmul(a, bt, false, true)}, {a, bt}});
    Tensor bias = ph("bias", {24}, dt);
    // Fused epilogue: bias + gelu after the reduction.
    w.push_back({"dense_gelu", {ops::gelu(ops::dense(a, bt, bias))}, {a, bt, bias}});
    Tensor x3 = ph("x3", {2, n, 16}, dt), y3 = ph("y3", {2, 16, 4}, dt);
    w.push_back({"batch_matmul", {ops::batch_matmul(x3, y3)}, {x3, y3}});
  }
  {
    Tensor x = ph("x", {1, 3, 10, 9}, dt), k = ph("k", {4, 3, 3, 3}, dt), b = ph("b", {4}, dt);
    w.push_back({"conv2d_pad", {ops::relu(ops::conv2d(x, k, b, {2, 1}, {1, 1}))}, {x, k, b}});
    Tensor kg = ph("kg", {6, 1, 3, 3}, dt);
    w.push_back(
        {"conv2d_groups", {ops::conv2d(x, kg, nullptr, {1, 1}, {0, 0}, {2, 2}, 3)}, {x, kg}});
    Tensor kt = ph("kt", {3, 2, 3, 3}, dt);
    w.push_back({"conv_transpose2d",
                 {ops::conv_transpose2d(x, kt, nullptr, {2, 2}, {1, 1}, {1, 0})},
                 {x, kt}});
    w.push_back({"avg_pool", {ops::avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, true, false)}, {x}});
    w.push_back({"max_pool", {ops::max_pool2d(x, {2, 3}, {1, 2}, {1, 1}, {2, 1})}, {x}});
  }
  {
    // Two outputs sharing a producer, and an input the outputs never read.
    Tensor x = ph("x", {n, 8}, dt), unused = ph("unused", {3}, dt);
    Tensor e = ops::exp(x);
    w.push_back({"two_outputs", {ops::reduce_sum(e, {1}), ops::mul(e, 2.0)}, {unused, x}});
  }
  return w;
}

// The parsed DAG prints the same text, hashes the same, and (with hints) keeps the ops' tags
// and summation order.
void expect_round_trip(const Workload& w) {
  SCOPED_TRACE(w.name);
  const db::CanonicalForm form = db::canonicalize(w.outputs, w.inputs);
  const db::ParsedDag plain = db::parse_canonical(form.text);
  EXPECT_EQ(db::canonicalize(plain.outputs, plain.inputs).text, form.text);
  EXPECT_EQ(plain.canonical, form.text);
  EXPECT_EQ(ir::structural_hash(plain.outputs), ir::structural_hash(w.outputs));

  const db::ParsedDag hinted = db::parse_canonical(form.text + db::plan_hints(form));
  const db::CanonicalForm again = db::canonicalize(hinted.outputs, hinted.inputs);
  EXPECT_EQ(again.text, form.text);
  EXPECT_EQ(hinted.canonical, form.text);
  EXPECT_EQ(again.reduce_order, form.reduce_order);
  ASSERT_EQ(again.tensors.size(), form.tensors.size());
  for (size_t i = 0; i < form.tensors.size(); ++i) {
    ASSERT_EQ(again.tensors[i]->is_placeholder(), form.tensors[i]->is_placeholder());
    EXPECT_EQ(again.tensors[i]->name, "t" + std::to_string(i));
    if (!form.tensors[i]->is_placeholder()) {
      EXPECT_EQ(again.tensors[i]->op->tag, form.tensors[i]->op->tag);
    }
  }
}

// Stage plans of the original and the hinted parse: the same stages over the same canonical ids.
void expect_same_plan(const Workload& w) {
  SCOPED_TRACE(w.name);
  const db::CanonicalForm form = db::canonicalize(w.outputs, w.inputs);
  const db::ParsedDag parsed = db::parse_canonical(form.text + db::plan_hints(form));
  const schedule::StagePlan a = schedule::plan_stages(w.outputs, w.inputs);
  const schedule::StagePlan b = schedule::plan_stages(parsed.outputs, parsed.inputs);
  auto id_of = [](const db::CanonicalForm& f, const Tensor& t) {
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      if (f.tensors[i].get() == t.get()) return static_cast<int>(i);
    }
    return -1;  // a tensor the planner made (split sums): compared by count only
  };
  const db::CanonicalForm fb = db::canonicalize(parsed.outputs, parsed.inputs);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  EXPECT_EQ(a.inlined.size(), b.inlined.size());
  for (size_t s = 0; s < a.stages.size(); ++s) {
    EXPECT_EQ(id_of(form, a.stages[s].op), id_of(fb, b.stages[s].op)) << "stage " << s;
    EXPECT_EQ(a.stages[s].epilogue == nullptr, b.stages[s].epilogue == nullptr);
  }
}

TEST(CanonicalParse, EveryOperatorRoundTrips) {
  const Expr n = ir::size_var("n", 1, 4096);
  int count = 0;
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32}) {
    for (const Expr& rows : {Expr(int64_t{5}), Expr(int64_t{12}), n}) {
      for (const Workload& w : op_workloads(dt, rows)) {
        expect_round_trip(w);
        ++count;
      }
    }
  }
  EXPECT_GT(count, 200);
}

TEST(CanonicalParse, PlansLikeTheOriginal) {
  const Expr n = ir::size_var("n", 1, 4096);
  for (const Expr& rows : {Expr(int64_t{12}), n}) {
    for (const Workload& w : op_workloads(DType::kFloat32, rows)) expect_same_plan(w);
  }
}

// Shared subexpressions print as let bindings; constants of every kind (signed zero, inf, nan,
// int32 and bool), unbounded and int32 sizes, and a reduction whose reduce_axes list is not in
// the order the body uses them.
TEST(CanonicalParse, LetsConstantsSizesAndSummationOrder) {
  const double inf = std::numeric_limits<double>::infinity();
  const Expr m = ir::var("m", ir::kNoLowerBound, ir::kNoUpperBound, DType::kInt64);
  const Expr k = ir::var("k", 2, 64, DType::kInt32);
  Tensor x = ph("x", {m, 4});
  Tensor y = ir::compute("y", {m, 4}, [&](const std::vector<ir::Var>& i) {
    Expr v = ir::access(x, {i[0], i[1]});
    Expr shared = ir::exp(v * v);  // used twice: a let binding
    Expr c = ir::cast(DType::kFloat32, ir::add(k, ir::int_imm(3, DType::kInt32)));
    Expr cond = ir::logical_and(ir::lt(v, ir::float_imm(-0.0)), ir::bool_imm(true));
    Expr special = ir::select(cond, ir::float_imm(inf), ir::float_imm(std::nan("")));
    return shared + shared * c + special + ir::float_imm(-1e-30);
  });
  // Summation iterators declared (r0 over 6, r1 over 5) but used (r1, r0).
  Tensor a = ph("a", {5, 6, 4});
  Tensor s = ir::reduce("s", {4}, {6, 5}, ir::ReduceKind::kMax,
                        [&](const std::vector<ir::Var>& i, const std::vector<ir::Var>& r) {
                          return ir::access(a, {r[1], r[0], i[0]}) + ir::float_imm(2.0);
                        });
  for (const Workload& w : {Workload{"lets", {y}, {x}}, Workload{"order", {s}, {a}}}) {
    expect_round_trip(w);
  }
  const std::string text = db::canonicalize({y}, {x}).text;
  EXPECT_NE(text.find("(let %0="), std::string::npos) << text;
  EXPECT_NE(text.find("int32[2,64]"), std::string::npos) << text;
  EXPECT_NE(text.find("[-inf,inf]"), std::string::npos) << text;
}

TEST(CanonicalParse, HintsKeepSummationOrder) {
  Tensor a = ph("a", {5, 7});
  // The body uses r1 before r0: canonical order (r1, r0), so the hint must put it back.
  Tensor s = ir::reduce("s", {1}, {7, 5}, ir::ReduceKind::kSum,
                        [&](const std::vector<ir::Var>& i, const std::vector<ir::Var>& r) {
                          return ir::access(a, {r[1], r[0]}) + ir::cast(DType::kFloat32, i[0]);
                        });
  const db::CanonicalForm form = db::canonicalize({s}, {a});
  const std::string hints = db::plan_hints(form);
  const db::ParsedDag parsed = db::parse_canonical(form.text + hints);
  const Tensor& ps = parsed.outputs[0];
  ASSERT_EQ(ps->op->reduce_axes.size(), 2u);
  // The parsed op lists its summation iterators with the original's extents in its order.
  EXPECT_TRUE(ir::structural_equal(ps->op->reduce_axes[0].extent, s->op->reduce_axes[0].extent));
  EXPECT_TRUE(ir::structural_equal(ps->op->reduce_axes[1].extent, s->op->reduce_axes[1].extent));
  EXPECT_EQ(db::canonicalize(parsed.outputs, parsed.inputs).reduce_order, form.reduce_order);
}

TEST(CanonicalParse, MalformedTextNamesThePosition) {
  Tensor a = ph("a", {4, 8}), b = ph("b", {8, 3});
  const std::string text = db::canonicalize({ops::matmul(a, b)}, {a, b}).text;
  auto error_of = [](const std::string& t) -> std::string {
    try {
      db::parse_canonical(t);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("").find("line 1 column 1"), std::string::npos) << error_of("");
  std::string bad_dtype = text;
  bad_dtype.replace(bad_dtype.find("float32"), 7, "float33");
  EXPECT_NE(error_of(bad_dtype).find("unknown dtype 'float33'"), std::string::npos);
  EXPECT_NE(error_of(bad_dtype).find("line 3"), std::string::npos) << error_of(bad_dtype);
  std::string forward = text;
  forward.replace(forward.find("access:float32 t0"), 17, "access:float32 t9");
  EXPECT_NE(error_of(forward).find("undefined tensor t9"), std::string::npos);
  EXPECT_NE(error_of(text + "garbage").find("expected 'hint '"), std::string::npos);
}

// Damaged texts (truncated, a character changed, deleted or inserted) either parse or throw
// tessera::Error; when they parse, the DAG prints without crashing.
TEST(CanonicalParse, DamagedTextNeverCrashes) {
  std::vector<std::string> texts;
  const Expr n = ir::size_var("n", 1, 4096);
  for (const Workload& w : op_workloads(DType::kFloat32, n)) {
    const db::CanonicalForm f = db::canonicalize(w.outputs, w.inputs);
    texts.push_back(f.text + db::plan_hints(f));
  }
  std::mt19937_64 rng(7);
  const std::string alphabet = "()%:=<>[], \n-0123456789anrtbx.p+letinsumaxhintcompute";
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    std::string t = texts[rng() % texts.size()];
    const size_t at = rng() % (t.size() + 1);
    switch (iter % 4) {
      case 0:
        t.resize(at);
        break;
      case 1:
        if (at < t.size()) t[at] = alphabet[rng() % alphabet.size()];
        break;
      case 2:
        if (at < t.size()) t.erase(at, 1 + rng() % 3);
        break;
      default:
        t.insert(at, 1, alphabet[rng() % alphabet.size()]);
        break;
    }
    try {
      const db::ParsedDag d = db::parse_canonical(t);
      (void)db::canonicalize(d.outputs, d.inputs);
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 3000);  // most damage is caught
  EXPECT_GT(parsed, 0);       // some edits (a constant's digit) still make a DAG
}

TEST(CanonicalParse, DeepNestingIsAnError) {
  std::string text = "tessera-workload-v1\nsizes: \nt0 = compute float32[] pad=0x0p+0 axes() := ";
  for (int i = 0; i < 100000; ++i) text += "(exp:float32 ";
  EXPECT_THROW(db::parse_canonical(text), Error);
}

// ---- measuring a task sent as text -------------------------------------------------------------

TEST(RemoteMeasure, MeasuresTheDriversSchedules) {
  Tensor a = ph("A", {64, 48}), b = ph("B", {48, 32}), bias = ph("bias", {32});
  Tensor out = ops::relu(ops::add(ops::matmul(a, b), bias));  // a fused epilogue
  const tune::Task task = tune::Task::create({out}, {a, b, bias});
  const tune::TaskText text(task);

  std::vector<std::string> sent;
  sent.push_back(text.to_canonical(task.default_schedule()));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 3; ++i) {
    sent.push_back(
        text.to_canonical(task.as_run(schedule::random_schedule(task.plan, task.target, rng))));
  }
  // A schedule naming an op the workload does not have fails to build; text that is not JSON
  // fails to parse. Neither takes the batch down.
  schedule::KernelSchedule wrong = task.default_schedule();
  wrong.stages[0].op = "no_such_op";
  sent.push_back(text.to_canonical(wrong));
  sent.push_back("{not json");

  const std::vector<tune::CandidateResult> r = tune::measure_canonical(text.dag_text(), sent, true);
  ASSERT_EQ(r.size(), sent.size());
  for (size_t i = 0; i + 2 < r.size(); ++i) {
    EXPECT_TRUE(r[i].ok) << i << ": " << r[i].error;
    EXPECT_GT(r[i].median_ms, 0) << i;
    EXPECT_EQ(r[i].kernel, nullptr);
  }
  EXPECT_FALSE(r[4].ok);
  EXPECT_NE(r[4].error.find("no_such_op"), std::string::npos) << r[4].error;
  EXPECT_FALSE(r[5].ok);
  EXPECT_NE(r[5].error.find("does not parse"), std::string::npos) << r[5].error;
}

// A long sum is split by the planner; the driver sends the split DAG, so its schedules (one per
// chunk stage) apply on the worker.
TEST(RemoteMeasure, SplitSumsTravelAsPlanned) {
  Tensor x = ph("x", {2, 40000});
  Tensor s = ops::reduce_sum(x, {1});
  const tune::Task task = tune::Task::create({s}, {x});
  ASSERT_GT(task.plan.stages.size(), 1u);
  const tune::TaskText text(task);
  const auto r =
      tune::measure_canonical(text.dag_text(), {text.to_canonical(task.default_schedule())}, false);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].ok) << r[0].error;
}

TEST(RemoteMeasure, ConvWithPaddingKeepsItsPlan) {
  Tensor x = ph("x", {1, 4, 12, 12}), k = ph("k", {8, 4, 3, 3});
  Tensor c = ops::conv2d(x, k, nullptr, {1, 1}, {1, 1});
  const tune::Task task = tune::Task::create({c}, {x, k});
  const tune::TaskText text(task);
  std::mt19937_64 rng(5);
  const auto r = tune::measure_canonical(
      text.dag_text(),
      {text.to_canonical(task.default_schedule()),
       text.to_canonical(task.as_run(schedule::random_schedule(task.plan, task.target, rng)))},
      true);
  for (const auto& c : r) EXPECT_TRUE(c.ok) << c.error;
}

TEST(RemoteMeasure, BadTextThrows) {
  EXPECT_THROW(tune::measure_canonical("not a dag", {}, true), Error);
}

}  // namespace
}  // namespace tessera
