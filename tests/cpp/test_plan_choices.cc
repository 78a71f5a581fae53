// Plan choices (schedule/plan_choices.h): pad ops inlined or materialised, epilogues fused or
// separate. Every variant builds a kernel that matches the reference (JIT and loop-IR
// interpreter); the defaults plan and lower exactly as before the choices existed; schedules
// carry their choices through JSON; search mode samples, mutates and crosses over across them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "compiler/build.h"
#include "compiler/compile.h"
#include "const_dims.h"
#include "cost/memory_levels.h"
#include "e2e_harness.h"
#include "loop/printer.h"
#include "ops/ops.h"
#include "schedule/lower.h"
#include "schedule/stage_plan.h"
#include "tune/common.h"
#include "tune/gensor/model.h"
#include "tune/search/evolution.h"
#include "tune/search/space.h"
#include "util/check.h"

namespace tessera::testing {
namespace {

using ir::Tensor;
using schedule::EpiloguePlacement;
using schedule::KernelSchedule;
using schedule::PadPlacement;
using schedule::PlanChoices;
using schedule::StagePlan;

struct Named {
  std::string name;
  Graph graph;
};

// A padded convolution with bias and relu (a pad stage, and an epilogue of two elementwise ops),
// and a matmul with a gelu epilogue (no pad).
Named conv_bias_relu() {
  Tensor x = ir::placeholder("X", dims({1, 8, 10, 10})),
         w = ir::placeholder("W", dims({16, 8, 3, 3}));
  Tensor b = ir::placeholder("bias", dims({16}));
  return {"conv_bias_relu", Graph({ops::relu(ops::conv2d(x, w, b, {1, 1}, {1, 1}))}, {x, w, b})};
}

Named matmul_gelu() {
  Tensor a = ir::placeholder("A", dims({24, 40})), b = ir::placeholder("B", dims({40, 36}));
  return {"matmul_gelu", Graph({ops::gelu(ops::matmul(a, b))}, {a, b})};
}

tune::MeasureConfig quick_measure() {
  tune::MeasureConfig m;
  m.timing.min_time_ms = 0.1;
  m.timing.min_repeats = 1;
  m.timing.max_repeats = 1;
  m.rounds = 1;
  m.round_ms = 0.1;
  m.finalists = 0;
  return m;
}

bool has_stage_of(const StagePlan& plan, const std::string& op) {
  for (const schedule::Stage& s : plan.stages) {
    if (s.op->name == op) return true;
  }
  return false;
}

bool has_epilogue(const StagePlan& plan) {
  for (const schedule::Stage& s : plan.stages) {
    if (s.epilogue) return true;
  }
  return false;
}

TEST(PlanChoices, EachChoiceChangesWhatItSays) {
  const Named n = conv_bias_relu();
  const Graph& g = n.graph;
  const StagePlan rules = schedule::plan_stages(g.outputs, g.inputs);
  EXPECT_EQ(rules.choices, PlanChoices{});
  EXPECT_EQ(rules.pads_decided, 1);
  EXPECT_EQ(rules.epilogues_decided, 1);
  EXPECT_TRUE(has_stage_of(rules, "X_pad"));
  EXPECT_TRUE(has_epilogue(rules));

  const StagePlan inlined = schedule::plan_stages(g.outputs, g.inputs, {PadPlacement::kInline});
  EXPECT_FALSE(has_stage_of(inlined, "X_pad"));
  EXPECT_EQ(inlined.stages.size(), rules.stages.size() - 1);
  EXPECT_TRUE(has_epilogue(inlined));

  const StagePlan separate = schedule::plan_stages(
      g.outputs, g.inputs, {PadPlacement::kMaterialize, EpiloguePlacement::kSeparate});
  EXPECT_EQ(separate.stages.size(), rules.stages.size() + 1);
  EXPECT_FALSE(has_epilogue(separate));
  EXPECT_TRUE(has_stage_of(separate, "conv2d"));  // the reduction writes a temporary...
  bool conv_is_temporary = false;
  for (const Tensor& t : separate.temporaries) conv_is_temporary |= t->name == "conv2d";
  EXPECT_TRUE(conv_is_temporary);
  EXPECT_EQ(separate.stages.back().op->name, g.outputs[0]->name);  // ...the epilogue reads it

  for (const PlanChoices& c : PlanChoices::all()) {
    const StagePlan p = schedule::plan_stages(g.outputs, g.inputs, c);
    EXPECT_EQ(schedule::same_stages(p, rules), c.is_default()) << c.text();
    EXPECT_EQ(schedule::may_plan_differently(rules, c), !c.is_default()) << c.text();
  }
  // Without a pad op the pad choice decides nothing.
  const Named mm = matmul_gelu();
  const StagePlan mm_rules = schedule::plan_stages(mm.graph.outputs, mm.graph.inputs);
  EXPECT_EQ(mm_rules.pads_decided, 0);
  EXPECT_FALSE(schedule::may_plan_differently(mm_rules, {PadPlacement::kInline}));
  EXPECT_TRUE(schedule::may_plan_differently(
      mm_rules, {PadPlacement::kMaterialize, EpiloguePlacement::kSeparate}));
}

TEST(PlanChoices, EveryVariantMatchesTheReference) {
  for (const Named& n : {conv_bias_relu(), matmul_gelu()}) {
    for (const PlanChoices& c : PlanChoices::all()) {
      SCOPED_TRACE(n.name + " " + c.text());
      const StagePlan plan = schedule::plan_stages(n.graph.outputs, n.graph.inputs, c);
      const KernelSchedule ks = schedule::default_schedule(plan, schedule::Target::host());
      EXPECT_EQ(ks.plan, c);
      check_graph(n.graph, ks, /*use_jit=*/true);
      check_graph(n.graph, ks, /*use_jit=*/false);
    }
  }
}

TEST(PlanChoices, DefaultPlanLowersAsBefore) {
  // The old way: plan_stages without choices and a schedule that has never heard of them.
  for (const Named& n : {conv_bias_relu(), matmul_gelu()}) {
    SCOPED_TRACE(n.name);
    const StagePlan old_plan = schedule::plan_stages(n.graph.outputs, n.graph.inputs);
    const KernelSchedule old_schedule = KernelSchedule::parse(
        schedule::default_schedule(old_plan, schedule::Target::host()).dump());
    EXPECT_EQ(old_schedule.dump().find("plan"), std::string::npos);
    const std::string old_ir = loop::to_string(schedule::lower(old_plan, old_schedule, "k"));

    tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
    EXPECT_EQ(&task.plan_for(PlanChoices{}), &task.plan);
    EXPECT_EQ(loop::to_string(
                  schedule::lower(task.plan_for(PlanChoices{}), task.default_schedule(), "k")),
              old_ir);
    const compiler::BuiltKernel built = compiler::build_cpu(n.graph.outputs, n.graph.inputs);
    EXPECT_EQ(loop::to_string(schedule::lower(built.plan(), built.schedule(), "k")), old_ir);
  }
}

TEST(PlanChoices, ScheduleJsonKeepsTheChoicesAndOldTextStays) {
  const Named n = conv_bias_relu();
  const StagePlan rules = schedule::plan_stages(n.graph.outputs, n.graph.inputs);
  const KernelSchedule def = schedule::default_schedule(rules, schedule::Target::host());
  // An old record: no "plan" key; it reads back as the defaults and writes the same text.
  const std::string old_json = def.dump();
  ASSERT_EQ(old_json.find("plan"), std::string::npos);
  const KernelSchedule old = KernelSchedule::parse(old_json);
  EXPECT_TRUE(old.plan.is_default());
  EXPECT_EQ(old.dump(), old_json);
  EXPECT_EQ(old.stages_text(), util::Json::parse(old_json).at("stages").dump());

  const PlanChoices inline_separate{PadPlacement::kInline, EpiloguePlacement::kSeparate};
  const StagePlan plan = schedule::plan_stages(n.graph.outputs, n.graph.inputs, inline_separate);
  const KernelSchedule ks = schedule::default_schedule(plan, schedule::Target::host());
  const std::string json = ks.dump();
  EXPECT_NE(json.find(R"("plan":{"epilogue":"separate","pad":"inline"})"), std::string::npos)
      << json;
  const KernelSchedule back = KernelSchedule::parse(json);
  EXPECT_EQ(back.plan, inline_separate);
  EXPECT_EQ(back.dump(), json);
  EXPECT_NE(back.stages_text().find("inline"), std::string::npos);
  // The same stages under other choices are another kernel: their texts differ.
  KernelSchedule other = back;
  other.plan = {PadPlacement::kInline, EpiloguePlacement::kFused};
  EXPECT_NE(other.stages_text(), back.stages_text());
  // A key left out is the default; an unknown value is an error.
  const KernelSchedule partial = KernelSchedule::parse(R"({"plan":{"pad":"inline"},"stages":[]})");
  EXPECT_EQ(partial.plan, (PlanChoices{PadPlacement::kInline, EpiloguePlacement::kFused}));
  EXPECT_THROW(KernelSchedule::parse(R"({"plan":{"pad":"sometimes"},"stages":[]})"), Error);
}

TEST(PlanChoices, ASchedulesChoicesMustBeItsPlans) {
  const Named n = matmul_gelu();
  const StagePlan rules = schedule::plan_stages(n.graph.outputs, n.graph.inputs);
  KernelSchedule ks = schedule::default_schedule(rules, schedule::Target::host());
  ks.plan.epilogue = EpiloguePlacement::kSeparate;
  try {
    schedule::lower(rules, ks, "k");
    ADD_FAILURE() << "lowered a schedule for another plan";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epilogue=separate"), std::string::npos) << e.what();
  }
}

TEST(PlanChoices, TaskPlansEachChoiceOnce) {
  const Named n = conv_bias_relu();
  tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
  const PlanChoices inl{PadPlacement::kInline};
  const StagePlan& p = task.plan_for(inl);
  EXPECT_EQ(p.choices, inl);
  EXPECT_EQ(&task.plan_for(inl), &p);
  const tune::Task copy = task;
  EXPECT_EQ(&copy.plan_for(inl), &p);
}

TEST(PlanChoices, CompileBuildsAGivenVariant) {
  const Named n = conv_bias_relu();
  const PlanChoices c{PadPlacement::kInline, EpiloguePlacement::kSeparate};
  compiler::CompileRequest req;
  req.schedule = schedule::default_schedule(
      schedule::plan_stages(n.graph.outputs, n.graph.inputs, c), schedule::Target::host());
  const compiler::CompileResult r = compiler::compile(n.graph.outputs, n.graph.inputs, req);
  EXPECT_EQ(r.kernel->plan().choices, c);
  EXPECT_EQ(r.report.schedule.plan, c);
  check_graph(n.graph, r.report.schedule, /*use_jit=*/true);
}

// Search mode: samples cover every variant and every sample builds a kernel that agrees with the
// default schedule's (the measurer's verification) and, one per variant, with the reference.
TEST(PlanChoices, SearchSamplesCoverEveryVariantAndVerify) {
  for (const Named& n : {conv_bias_relu(), matmul_gelu()}) {
    SCOPED_TRACE(n.name);
    tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
    tune::search::SearchSpace space(task);
    const int want_variants = n.name == "conv_bias_relu" ? 4 : 2;
    ASSERT_EQ(space.num_variants(), want_variants);
    EXPECT_EQ(space.variant(0).choices, PlanChoices{});
    std::mt19937_64 rng(5);
    std::vector<KernelSchedule> samples;
    std::set<int> seen;
    for (int i = 0; i < 16; ++i) {
      samples.push_back(space.sample(rng));
      const int v = space.variant_index(samples.back().plan);
      ASSERT_GE(v, 0);
      EXPECT_EQ(samples.back().stages.size(), space.variant(v).stages.size());
      EXPECT_EQ(space.check_structure(samples.back()), "");
      if (seen.insert(v).second) check_graph(n.graph, samples.back(), /*use_jit=*/true);
    }
    EXPECT_EQ(static_cast<int>(seen.size()), want_variants);
    tune::CandidateMeasurer measurer(task, quick_measure());
    const std::vector<tune::CandidateResult> res = measurer.measure_all(samples);
    for (size_t i = 0; i < res.size(); ++i) {
      EXPECT_TRUE(res[i].ok) << res[i].error << "\n" << samples[i].dump();
    }
  }
}

TEST(PlanChoices, PlanMutationSwitchesVariantKeepingSharedStages) {
  const Named n = conv_bias_relu();
  tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
  tune::search::SearchSpace space(task);
  std::mt19937_64 rng(9);
  int kept_conv = 0;
  std::set<std::string> reached;
  for (int i = 0; i < 30; ++i) {
    const KernelSchedule parent = space.sample(rng);
    const std::optional<KernelSchedule> child =
        space.mutate(parent, tune::search::Mutation::kPlan, rng);
    ASSERT_TRUE(child.has_value());
    EXPECT_NE(child->plan, parent.plan);
    EXPECT_EQ(space.check_structure(*child), "");
    EXPECT_TRUE(space.try_lower(*child).has_value());
    reached.insert(child->plan.text());
    for (const auto& p : parent.stages) {
      for (const auto& c : child->stages)
        kept_conv += p.op == "conv2d" && c.to_json().dump() == p.to_json().dump();
    }
    // Crossover only within one variant.
    EXPECT_FALSE(space.crossover(parent, *child, rng).has_value());
    EXPECT_TRUE(space.crossover(parent, parent, rng).has_value());
  }
  EXPECT_EQ(static_cast<int>(reached.size()), space.num_variants());
  EXPECT_GT(kept_conv, 0) << "the conv's annotation should survive some plan switches";
  // A single-plan task has nothing to switch to.
  Tensor a = ir::placeholder("A", dims({24, 40})), b = ir::placeholder("B", dims({40, 36}));
  tune::Task plain = tune::Task::create({ops::matmul(a, b)}, {a, b}, "mm");
  tune::search::SearchSpace one(plain);
  EXPECT_EQ(one.num_variants(), 1);
  EXPECT_FALSE(one.mutate(one.sample(rng), tune::search::Mutation::kPlan, rng).has_value());
}

// Evolution follows the scores across variants: seeded with default-plan schedules only, it
// finds the plan the scorer prefers (by sampling and kPlan mutation).
TEST(PlanChoices, EvolutionReachesThePreferredVariant) {
  const Named n = conv_bias_relu();
  tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
  tune::search::SearchSpace space(task);
  const PlanChoices preferred{PadPlacement::kInline, EpiloguePlacement::kSeparate};
  const tune::search::Scorer scorer = [&](const std::vector<KernelSchedule>& batch) {
    std::vector<double> out;
    for (const KernelSchedule& s : batch) out.push_back(s.plan == preferred ? 2.0 : 1.0);
    return out;
  };
  tune::search::EvolutionOptions opts;
  opts.population = 64;
  opts.generations = 2;
  std::mt19937_64 rng(4);
  const std::vector<tune::search::Scored> best =
      tune::search::evolve(space, scorer, {task.default_schedule()}, {}, 8, opts, rng);
  ASSERT_EQ(best.size(), 8u);
  for (const tune::search::Scored& s : best) EXPECT_EQ(s.schedule.plan, preferred);
}

// The analytic model predicts every variant from the variant's own stage spaces: finite, and a
// separate epilogue (one more pass over the output) is not predicted faster than the fused one.
TEST(PlanChoices, AnalyticModelRanksEveryVariant) {
  for (const Named& n : {conv_bias_relu(), matmul_gelu()}) {
    SCOPED_TRACE(n.name);
    tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
    tune::search::SearchSpace space(task);
    tune::gensor::ModelOptions mo;
    mo.cores = std::max(1, task.target.num_threads);
    const tune::gensor::AnalyticModel model(cost::host_memory_hierarchy(), mo);
    std::map<std::string, double> predicted;
    for (int v = 0; v < space.num_variants(); ++v) {
      const PlanChoices c = space.variant(v).choices;
      const KernelSchedule ks = schedule::default_schedule(task.plan_for(c), task.target);
      double ms = 0;
      const std::vector<tune::search::StageChoices>& stages = space.stages_of(ks);
      for (size_t i = 0; i < stages.size(); ++i) {
        ms += model.predict(stages[i].space, ks.stages[i]).total_ms;
      }
      EXPECT_TRUE(std::isfinite(ms) && ms > 0) << c.text() << ": " << ms;
      predicted[c.text()] = ms;
    }
    EXPECT_GE(predicted["pad=materialize epilogue=separate"],
              predicted["pad=materialize epilogue=fused"]);
  }
  // The conv stage under one annotation: with the pad inlined each load of X also tests bounds.
  const Named n = conv_bias_relu();
  tune::Task task = tune::Task::create(n.graph.outputs, n.graph.inputs, n.name);
  tune::gensor::ModelOptions mo;
  mo.cores = std::max(1, task.target.num_threads);
  const tune::gensor::AnalyticModel model(cost::host_memory_hierarchy(), mo);
  const StagePlan& materialized = task.plan;
  const StagePlan& inlined = task.plan_for({PadPlacement::kInline});
  const int conv_m = static_cast<int>(materialized.stages.size()) - 1;
  const tune::gensor::StageSpace sm =
      tune::gensor::make_stage_space(materialized, conv_m, task.target);
  const tune::gensor::StageSpace si = tune::gensor::make_stage_space(inlined, 0, task.target);
  ASSERT_EQ(sm.op_name, "conv2d");
  ASSERT_EQ(si.op_name, "conv2d");
  const schedule::StageAnnotation ann =
      schedule::default_schedule(materialized, task.target).stages[conv_m];
  EXPECT_GT(model.predict(si, ann).compute_ms, model.predict(sm, ann).compute_ms);
}

}  // namespace
}  // namespace tessera::testing
