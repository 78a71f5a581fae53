#include "compiler/compile.h"

#include <chrono>
#include <exception>
#include <mutex>

#include "compiler/search_session.h"
#include "cost/peak_probe.h"
#include "ir/read_bounds.h"
#include "runtime/parallel.h"
#include "schedule/prepack.h"
#include "schedule/tuning_policy.h"
#include "tune/common.h"
#include "tune/gensor/construct.h"
#include "util/check.h"
#include "util/counters.h"

namespace tessera::compiler {

std::vector<std::string> input_names(const std::vector<ir::Tensor>& inputs,
                                     const std::vector<int>& positions) {
  std::vector<std::string> names;
  for (int i : positions) {
    TESSERA_CHECK(i >= 0 && i < static_cast<int>(inputs.size()))
        << "constant input " << i << " out of range: the kernel has " << inputs.size() << " inputs";
    names.push_back(inputs[static_cast<size_t>(i)]->name);
  }
  return names;
}

namespace {

using Clock = std::chrono::steady_clock;

// The names of the inputs a built kernel reads prepacked.
std::vector<std::string> prepacked_names(const BuiltKernel& k) {
  std::vector<std::string> names;
  for (const Prepack& p : k.prepacks()) {
    names.push_back(k.plan().inputs[static_cast<size_t>(p.input)]->name);
  }
  return names;
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Construct mode (Gensor) on the task; the winner must beat the rules' schedule, measured in the
// same paired rounds, by the policy's win margin.
Tuned tune_construct(const tune::Task& task, const CompileRequest& req, CompileReport* rep) {
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  tune::gensor::ConstructOptions opts = tune::gensor::policy_construct_options(req.seed);
  opts.include_default = true;
  tune::gensor::ConstructResult r = tune::gensor::construct(task, opts);
  rep->tuner = r.schedule.tuner;
  const std::string default_text = task.default_schedule().stages_text();
  int def = -1;
  for (size_t c = 0; c < r.candidates.size(); ++c) {
    const tune::gensor::ConstructCandidate& cand = r.candidates[c];
    CandidateReport cr;
    cr.schedule = cand.schedule;
    cr.predicted_ms = cand.predicted_ms;
    cr.ok = cand.measured && cand.result.ok;
    cr.error = cand.result.error;
    cr.median_ms = cr.ok ? cand.result.median_ms : -1;
    cr.build_ms = cand.result.build_ms;
    cr.prepacked = static_cast<int>(task.prepacked_inputs_or_none(cand.schedule).size());
    rep->candidates.push_back(cr);
    if (cand.measured) ++rep->trials;
    if (cand.schedule.stages_text() == default_text) def = static_cast<int>(c);
  }
  if (def >= 0 && rep->candidates[def].ok) rep->default_ms = rep->candidates[def].median_ms;
  if (r.fell_back_to_default) {
    rep->note = "no construct candidate passed verification; the rules' schedule is used";
    return {task.default_schedule(), nullptr};
  }
  int choice = r.chosen;
  if (def >= 0 && choice != def && rep->default_ms > 0 &&
      rep->candidates[choice].median_ms >= policy.win_margin * rep->default_ms) {
    choice = def;  // within the noise of the rules' schedule: keep the rules'
  }
  rep->candidates[choice].chosen = true;
  rep->median_ms = rep->candidates[choice].median_ms;
  Tuned t{r.candidates[choice].schedule, r.candidates[choice].result.kernel};
  if (choice == def) t.schedule.tuner = "default";
  return t;
}

// Search mode (Ansor-like evolutionary search with the learned cost model) to the end of its
// budget, seeded with construct mode's predicted top-k and the rules' schedule.
// With a records database (`key` not null) the session logs every measurement, resumes a search
// killed earlier from its log, and saves the learned model after each round.
Tuned tune_search(const tune::Task& task, const CompileRequest& req, const db::WorkloadKey* key,
                  CompileReport* rep) {
  SearchSettings settings = search_settings(req);
  if (key != nullptr && req.records != nullptr) {
    settings.log = req.records;
    settings.key = *key;
  }
  SearchSession session(task, std::move(settings), rep);
  while (session.round() > 0) {
  }
  return session.finish();
}

// The schedule from the records database, else tuned now (and stored); the rules' schedule when
// tuning is not possible. Sets rep->source.
Tuned records_or_tune(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const tune::Task& task, const CompileRequest& req, CompileReport* rep) {
  std::optional<db::WorkloadKey> key;
  if (req.records != nullptr) {
    key = db::make_workload_key(outputs, inputs);
    rep->workload = key->hash_hex();
    if (std::optional<db::Record> rec = req.records->best(*key)) {
      try {
        Tuned t{task.as_run(schedule::KernelSchedule::parse(rec->schedule_json)), nullptr};
        const size_t stages = task.plan_for(t.schedule.plan).stages.size();
        TESSERA_CHECK(t.schedule.stages.size() == stages)
            << "the record has " << t.schedule.stages.size() << " stages, the kernel " << stages;
        util::bump(util::Counter::kRecordHits);
        rep->source = "records";
        rep->note = "tuned earlier by " + rec->tuner;
        if (rec->median_ms) rep->median_ms = *rec->median_ms;
        return t;
      } catch (const std::exception& e) {
        rep->note = std::string("a stored schedule is unusable (") + e.what() + "); tuning again";
      }
    }
  }
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  if (util::tune_seconds() >= policy.process_tune_budget_s) {
    rep->note = "tuning used its " +
                std::to_string(static_cast<int>(policy.process_tune_budget_s)) +
                " s budget in this process; the rules' schedule is used";
    return {task.default_schedule(), nullptr};
  }
  const auto t0 = Clock::now();
  Tuned t;
  bool failed = false;
  try {
    t = req.tune == TuneMode::kSearch ? tune_search(task, req, key ? &*key : nullptr, rep)
                                      : tune_construct(task, req, rep);
  } catch (const std::exception& e) {
    // A tuner failure costs the tuning, not the kernel; nothing is stored, so a later process
    // tries again.
    rep->note = std::string(tune_mode_name(req.tune)) + " mode failed (" + e.what() +
                "); the rules' schedule is used";
    t = {task.default_schedule(), nullptr};
    failed = true;
  }
  rep->tune_s = ms_since(t0) / 1e3;
  util::add_tune_seconds(rep->tune_s);
  util::bump(util::Counter::kTuneRuns);
  rep->source = t.schedule.tuner == "default" ? "rules" : t.schedule.tuner;
  if (key && !failed) {
    req.records->put(
        db::make_record(*key, t.schedule.dump(), t.schedule.tuner,
                        rep->median_ms > 0 ? std::optional<double>(rep->median_ms) : std::nullopt,
                        std::nullopt, rep->trials));
  }
  return t;
}

}  // namespace

const char* tune_mode_name(TuneMode m) {
  switch (m) {
    case TuneMode::kDefault:
      return "default";
    case TuneMode::kConstruct:
      return "construct";
    case TuneMode::kSearch:
      return "search";
  }
  return "?";
}

TuneMode tune_mode_from_name(const std::string& name) {
  if (name == "default") return TuneMode::kDefault;
  if (name == "construct") return TuneMode::kConstruct;
  TESSERA_CHECK(name == "search") << "tune mode must be 'default', 'construct' or 'search', got '"
                                  << name << "'";
  return TuneMode::kSearch;
}

TuneScope tune_scope_from_name(const std::string& name) {
  TESSERA_CHECK(name == "every" || name == "automatic")
      << "tuning scope must be 'every' or 'automatic', got '" << name << "'";
  return name == "every" ? TuneScope::kEvery : TuneScope::kAutomatic;
}

Threads threads_from_name(const std::string& name) {
  TESSERA_CHECK(name == "auto" || name == "parallel" || name == "serial")
      << "threads must be 'auto', 'parallel' or 'serial', got '" << name << "'";
  return name == "auto"       ? Threads::kAuto
         : name == "parallel" ? Threads::kParallel
                              : Threads::kSerial;
}

bool runs_in_parallel(const schedule::StagePlan& plan, Threads threads) {
  if (threads != Threads::kAuto) return threads == Threads::kParallel;
  // One thread: a parallel loop runs inline, and the parallel schedule keeps its tiling.
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  return runtime::get_num_threads() <= 1 ||
         schedule::boundary_bytes(plan, tune::kSymbolicSizeGuess) >= policy.serial_bytes ||
         schedule::total_points(plan, tune::kSymbolicSizeGuess) >= policy.serial_points;
}

bool worth_tuning(const schedule::StagePlan& plan, TuneScope scope, double graph_reduce_points) {
  if (scope == TuneScope::kEvery) return true;
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  const double points = schedule::reduce_points(plan, tune::kSymbolicSizeGuess);
  // A summation point is one multiply-add: two flops at the all-core FMA peak.
  const double flops_per_us = cost::get_peak_info().fp32_gflops_all * 1e3;
  const double peak_us = flops_per_us > 0 ? 2 * points / flops_per_us : 0;
  if (peak_us >= policy.min_tuned_kernel_us) return true;
  return graph_reduce_points > 0 && points >= policy.large_share * graph_reduce_points &&
         peak_us >= policy.min_share_kernel_us;
}

CompileResult compile(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                      const CompileRequest& req) {
  util::bump(util::Counter::kCompileCalls);
  const auto t0 = Clock::now();
  ir::check_reads_within_shapes(outputs);
  CompileResult out;
  CompileReport& rep = out.report;
  rep.name = req.name;
  tune::Task task = tune::Task::create(outputs, inputs, req.name);
  task.constant_inputs = input_names(inputs, req.constant_inputs);
  rep.plan_ms = ms_since(t0);
  task.parallel = runs_in_parallel(task.plan, req.threads);
  rep.parallel = task.parallel;

  Tuned chosen;
  if (req.schedule) {
    chosen.schedule = *req.schedule;
    chosen.kernel = req.built;
    rep.source = "given";
  } else if (req.tune == TuneMode::kDefault) {
    chosen.schedule = task.default_schedule();
  } else if (!worth_tuning(task.plan, req.scope, req.graph_reduce_points)) {
    chosen.schedule = task.default_schedule();
    rep.note = "too little summation work to gain from tuning";
  } else {
    chosen = records_or_tune(outputs, inputs, task, req, &rep);
  }

  codegen::CompileOptions codegen;
  codegen.keep_ir = codegen.keep_asm = req.keep_source;
  std::vector<std::string> prepacked = task.prepacked_inputs_or_none(chosen.schedule);
  if (chosen.kernel != nullptr && !req.keep_source &&
      prepacked_names(*chosen.kernel) == prepacked) {
    out.kernel = std::move(chosen.kernel);
  } else {
    try {
      out.kernel = std::make_shared<const BuiltKernel>(build_cpu(
          task.plan_for(chosen.schedule.plan), chosen.schedule, req.name, codegen, prepacked));
    } catch (const std::exception& e) {
      if (rep.source != "records") throw;
      // A stored schedule from another Tessera version may not fit this one's lowering.
      rep.note = std::string("the stored schedule does not build (") + e.what() +
                 "); the rules' schedule is used";
      rep.source = "rules";
      chosen.schedule = task.default_schedule();
      prepacked = task.prepacked_inputs(chosen.schedule);
      out.kernel = std::make_shared<const BuiltKernel>(
          build_cpu(task.plan, chosen.schedule, req.name, codegen, prepacked));
    }
  }
  rep.schedule = out.kernel->schedule();
  rep.lower_ms = out.kernel->lower_ms();
  rep.jit_ms = out.kernel->jit_ms();
  rep.total_ms = ms_since(t0);
  return out;
}

}  // namespace tessera::compiler
