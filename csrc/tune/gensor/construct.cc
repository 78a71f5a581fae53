#include "tune/gensor/construct.h"

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <map>
#include <optional>

#include "schedule/default_schedule.h"
#include "schedule/tuning_policy.h"
#include "tune/gensor/roller.h"
#include "util/check.h"

namespace tessera::tune::gensor {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Is every operand `ann` packs contiguous along the vector iterator by itself?
bool packs_only_contiguous_operands(const StageSpace& sp, const schedule::StageAnnotation& ann) {
  const auto& tensors = sp.regions->tensors();
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (is_packed(ann, tensors[t].name) && !sp.vector_contiguous[t]) return false;
  }
  return true;
}

// `ann` with register tile `reg_tile`, its cache tiles rounded up to multiples of it (capped at
// the extent rounded up) and its inner reduction unrolled to match.
schedule::StageAnnotation with_register_tile(const StageSpace& sp,
                                             const schedule::StageAnnotation& ann,
                                             const std::vector<int64_t>& reg_tile) {
  schedule::StageAnnotation v = ann;
  v.tile_reg = reg_tile;
  for (int a = 0; a < sp.num_spatial; ++a) {
    const int64_t reg = v.tile_reg[a];
    v.tile_outer[a] = std::min(round_up(ann.tile_outer[a], reg), round_up(sp.extents[a], reg));
  }
  schedule::unroll_inner_reduce(v);
  return v;
}

}  // namespace

std::vector<size_t> pick_diverse(const std::vector<RankedAnnotation>& ranked, size_t k,
                                 int per_cache_tile) {
  // The model is a coarse ranking: neighbours in it often differ only in the register tile under
  // the same cache tiling, or only in the cache tiling around one register tile, and measuring
  // eight of those wastes the budget when that tile is the model's blind spot (measured, ResNet
  // conv1 7x7/2: the rules' 64-channel x 4-column tile, ranked first under eight cache tilings,
  // runs 1.7-2.0 ms; the walk's 32 x 8 runs 1.0). First pass: at most `per_cache_tile` per
  // (tile_outer, tile_reduce) and half of k per register tile; second pass: fill up in rank order.
  const int per_register_tile = static_cast<int>((k + 1) / 2);
  std::vector<size_t> picked;
  std::map<std::string, int> per_cache, per_register;
  std::vector<bool> taken(ranked.size(), false);
  auto key_of = [](std::initializer_list<const std::vector<int64_t>*> parts) {
    util::Json key = util::Json::array();
    for (const std::vector<int64_t>* part : parts) {
      for (int64_t t : *part) key.push_back(t);
    }
    return key.dump();
  };
  for (size_t i = 0; i < ranked.size() && picked.size() < k; ++i) {
    const schedule::StageAnnotation& a = ranked[i].annotation;
    int& cache_count = per_cache[key_of({&a.tile_outer, &a.tile_reduce})];
    int& register_count = per_register[key_of({&a.tile_reg})];
    if (cache_count >= per_cache_tile || register_count >= per_register_tile) continue;
    ++cache_count;
    ++register_count;
    picked.push_back(i);
    taken[i] = true;
  }
  for (size_t i = 0; i < ranked.size() && picked.size() < k; ++i) {
    if (!taken[i]) picked.push_back(i);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

std::optional<schedule::StageAnnotation> with_rules_register_tile(
    const StageSpace& sp, const schedule::StageAnnotation& ann) {
  // The walk reaches register tiles by single tile steps, and some seeds never reach the rules'
  // micro-kernel (6 rows x 4 vectors for a GEMM), which the model cannot tell from smaller ones
  // that load more per FMA (measured, GEMM 2048 over the whole k: 6x64 0.92-0.96x torch.mm,
  // 4x64 0.79-0.82x; ResNet res5 3x3: 32 channels x 7 columns 1.2 ms, 16 x 5 x 4 1.8 ms).
  const schedule::StageAnnotation& rules = sp.base;
  const int n = sp.num_spatial;
  if (ann.vector_axis < 0 || rules.vector_axis != ann.vector_axis ||
      static_cast<int>(rules.tile_reg.size()) != n || rules.tile_reg == ann.tile_reg) {
    return std::nullopt;
  }
  schedule::StageAnnotation v = ann;
  v.vector_width = rules.vector_width;
  return with_register_tile(sp, v, rules.tile_reg);
}

std::vector<schedule::StageAnnotation> with_grown_register_tiles(
    const StageSpace& sp, const AnalyticModel& model, const schedule::StageAnnotation& ann) {
  std::vector<schedule::StageAnnotation> out;
  if (sp.cross_lane() || ann.vector_axis != sp.vector_axis) return out;
  for (int a = 0; a < sp.num_spatial; ++a) {
    if (a == ann.vector_axis || ann.tile_reg[a] >= sp.extents[a]) continue;
    std::vector<int64_t> grown = ann.tile_reg;
    ++grown[a];
    if (model.register_tile_fits(sp, grown)) out.push_back(with_register_tile(sp, ann, grown));
  }
  return out;
}

std::vector<schedule::StageAnnotation> streamed_variants(const StageSpace& sp,
                                                         const schedule::StageAnnotation& ann) {
  // The walk sizes a task to fit L2 whole (the capacity check of its L2 level), so a long
  // reduction is cut into reduce tiles whose partial results are reloaded, and the panel the
  // register-tile sweep reuses is fetched from outside L2 every few tiles. A task may instead run
  // the whole reduction and let the other operand stream: only the reused panel has to stay in
  // L2. These variants do that, with the swept axis 1-8x longer so each panel is fetched for more
  // tiles; the model (task traffic by reuse distance, panel bursts) ranks them with the rest.
  std::vector<schedule::StageAnnotation> out;
  const int n = sp.num_spatial, m = sp.num_reduce;
  if (m == 0 || n == 0) return out;
  schedule::StageAnnotation whole = ann;
  for (int r = 0; r < m; ++r) whole.tile_reduce[r] = sp.extents[n + r];
  if (whole.tile_reduce == ann.tile_reduce) return out;
  const std::vector<int> order = whole.s1_loop_order();
  const int inner = order.back();
  const int64_t cap = round_up(sp.extents[inner], whole.tile_reg[inner]);
  for (int64_t stretch = 1; stretch <= 8; stretch *= 2) {
    schedule::StageAnnotation v = whole;
    v.tile_outer[inner] = std::min(ann.tile_outer[inner] * stretch, cap);
    if (stretch > 1 && v.tile_outer[inner] == out.back().tile_outer[inner]) break;
    schedule::unroll_inner_reduce(v);
    out.push_back(v);
  }
  return out;
}

std::optional<schedule::StageAnnotation> local_padded_variant(
    const StageSpace& sp, const AnalyticModel& model, const schedule::StageAnnotation& ann) {
  // kSplit runs an edge tile of a few lanes as separate code, not unrolled, its accumulators in
  // memory; local padding runs it as a full tile with the lanes past the end masked, and a
  // register tile over the whole rounded-up extent leaves no edge loop at all. The model does
  // not price edge code, so the variant is measured.
  const int v = ann.vector_axis;
  if (sp.cross_lane() || v < 0 || v >= sp.num_spatial || ann.edge != schedule::EdgeMode::kSplit ||
      sp.extents[v] % ann.tile_reg[v] == 0) {
    return std::nullopt;
  }
  schedule::StageAnnotation padded = ann;
  padded.edge = schedule::EdgeMode::kLocalPad;
  std::vector<int64_t> whole = ann.tile_reg;
  whole[v] = round_up(sp.extents[v], ann.vector_width);
  for (int a = 0; a < sp.num_spatial && !model.register_tile_fits(sp, whole); ++a) {
    if (a != v) whole[a] = 1;  // fewer rows to make room for the longer vector run
  }
  if (!model.register_tile_fits(sp, whole)) return padded;
  return with_register_tile(sp, padded, whole);
}

const char* construct_mode_name(ConstructMode m) {
  return m == ConstructMode::kGensor ? "gensor" : "roller";
}

ConstructMode construct_mode_from_name(const std::string& name) {
  if (name == "roller") return ConstructMode::kRoller;
  TESSERA_CHECK(name == "gensor") << "construct mode must be 'gensor' or 'roller', got '" << name
                                  << "'";
  return ConstructMode::kGensor;
}

std::vector<RankedAnnotation> rank_stage(const StageSpace& sp, const AnalyticModel& model,
                                         const std::vector<EtirState>& states) {
  std::vector<RankedAnnotation> out;
  std::map<std::string, size_t> index;  // annotation JSON -> position (different states often
                                        // realise the same schedule)
  auto add = [&](const schedule::StageAnnotation& ann) {
    std::string key = ann.to_json().dump();
    if (index.count(key)) return;
    index[key] = out.size();
    out.push_back({ann, model.predict(sp, ann)});
  };
  std::vector<schedule::StageAnnotation> tilings;
  for (const EtirState& s : states) {
    tilings.push_back(to_annotation(sp, s));
    std::optional<schedule::StageAnnotation> v = with_rules_register_tile(sp, tilings.back());
    if (v) tilings.push_back(*v);
  }
  for (size_t i = 0, walked = tilings.size(); i < walked; ++i) {
    for (schedule::StageAnnotation& g : with_grown_register_tiles(sp, model, tilings[i]))
      tilings.push_back(std::move(g));
  }
  for (const schedule::StageAnnotation& ann : tilings) {
    add(ann);
    if (ann.vector_axis < 0) continue;
    // The same tiling with the broadcast operands packed: the model weighs the copy against the
    // L1 conflicts of rows a stride apart.
    schedule::StageAnnotation packed = ann;
    for (const StageSpace::RowOperand& r : sp.row_packable) {
      if (ann.tile_reg[r.axis] > 1) packed.pack.push_back(r.name);
    }
    if (packed.pack.size() > ann.pack.size()) add(packed);
    // And without the rules' packing where it only reorders an operand already contiguous along
    // the vector (the B panels of a GEMM): that copy can cost more than it saves on small
    // operands (measured, BERT attention times values: 74-84 us unpacked, 96-101 packed,
    // torch.bmm 90-120). Operands strided along the vector stay packed: unpacked they are
    // gathered, far slower than the model's load count says (ResNet res5 3x3 with unpacked
    // weights: 9-15 ms, packed 1.9).
    if (!ann.pack.empty() && packs_only_contiguous_operands(sp, ann)) {
      schedule::StageAnnotation unpacked = ann;
      unpacked.pack.clear();
      add(unpacked);
    }
    for (const schedule::StageAnnotation& streamed : streamed_variants(sp, ann)) add(streamed);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RankedAnnotation& a, const RankedAnnotation& b) {
                     return a.prediction.total_ms < b.prediction.total_ms;
                   });
  return out;
}

std::vector<double> ConstructResult::predicted_ms() const {
  std::vector<double> v;
  for (const auto& c : candidates) v.push_back(c.predicted_ms);
  return v;
}

std::vector<double> ConstructResult::measured_ms() const {
  std::vector<double> v;
  for (const auto& c : candidates)
    v.push_back(c.measured && c.result.ok ? c.result.median_ms : -1.0);
  return v;
}

util::Json ConstructResult::to_json() const {
  util::Json j = util::Json::object();
  j["schedule"] = schedule.to_json();
  j["mode"] = mode;
  j["seed"] = static_cast<int64_t>(seed);
  j["eq1"] = eq1;
  j["interleave"] = interleave;
  j["predict_only"] = predict_only;
  j["fell_back_to_default"] = fell_back_to_default;
  j["chosen"] = chosen;
  j["construct_s"] = construct_s;
  j["search_s"] = search_s;
  j["measure_s"] = measure_s;
  j["main_stage"] = main_stage;
  j["states_visited"] = states_visited;
  j["walk_steps"] = walk_steps;
  j["revisits"] = revisits;
  j["top_results"] = top_results;
  j["last_state_predicted_ms"] = last_state_predicted_ms;
  j["distinct_schedules"] = distinct_schedules;
  util::Json pred = util::Json::array(), meas = util::Json::array(), errs = util::Json::array();
  util::Json build = util::Json::array();
  for (const auto& c : candidates) {
    build.push_back(c.result.build_ms);
    pred.push_back(c.predicted_ms);
    meas.push_back(c.measured && c.result.ok ? c.result.median_ms : -1.0);
    errs.push_back(c.measured && !c.result.ok ? c.result.error : std::string());
  }
  j["predicted_ms"] = pred;
  j["measured_ms"] = meas;
  j["errors"] = errs;
  j["build_ms"] = build;
  return j;
}

// Local padding of every ranked candidate with edge tiles along its vector axis, and the top
// candidate (and its local-padded variant) with the rules' annotations for the other stages.
void add_measured_variants(const Task& task, const AnalyticModel& model, int main_stage,
                           const schedule::KernelSchedule& rules,
                           std::vector<ConstructCandidate>* candidates) {
  std::vector<ConstructCandidate>& cands = *candidates;
  if (cands.empty()) return;
  // Appends `cand` unless a candidate with its stages is there already; true when appended.
  auto add = [&cands](ConstructCandidate cand) {
    const std::string text = cand.schedule.stages_text();
    for (const ConstructCandidate& c : cands) {
      if (c.schedule.stages_text() == text) return false;
    }
    cands.push_back(std::move(cand));
    return true;
  };
  const StageSpace main_space = make_stage_space(task.plan, main_stage, task.target);
  const size_t main = static_cast<size_t>(main_stage);
  std::vector<size_t> top = {0};
  for (size_t c = 0, ranked = cands.size(); c < ranked; ++c) {
    auto v = local_padded_variant(main_space, model, cands[c].schedule.stages[main]);
    if (!v) continue;
    ConstructCandidate cand = cands[c];
    cand.schedule.stages[main] = std::move(*v);
    if (add(std::move(cand)) && c == 0) top.push_back(cands.size() - 1);
  }
  // The other stages take their best-ranked annotations (or the rules', for transposing copies),
  // which the model can misjudge where it matters: the top candidate is measured with the rules'
  // annotations for all of them too.
  if (task.plan.stages.size() < 2) return;
  for (size_t c : top) {
    ConstructCandidate cand = cands[c];
    for (size_t i = 0; i < cand.schedule.stages.size(); ++i) {
      if (i != main) cand.schedule.stages[i] = rules.stages[i];
    }
    add(std::move(cand));
  }
}

ConstructResult construct(const Task& task, const ConstructOptions& options) {
  // Machine description first: a cold probe is a one-time cost per machine, not per task.
  cost::MemoryHierarchy hw = options.hardware ? *options.hardware : cost::host_memory_hierarchy();
  const auto t0 = std::chrono::steady_clock::now();
  ConstructResult res;
  res.mode = construct_mode_name(options.mode);
  res.seed = options.seed;
  res.eq1 = eq1_name(options.eq1);
  res.interleave = options.interleave && options.mode == ConstructMode::kGensor;
  res.predict_only = options.predict_only;

  ModelOptions mopts;
  mopts.eq1 = options.eq1;
  mopts.cores = std::max(1, task.target.num_threads);
  AnalyticModel model(hw, mopts);

  const int nstages = static_cast<int>(task.plan.stages.size());
  TESSERA_CHECK(nstages > 0) << "task " << task.name << " has no stages";
  std::vector<std::vector<RankedAnnotation>> ranked(nstages);
  double max_work = -1;
  std::vector<double> last_state_ms(nstages, 0);
  std::vector<double> default_stage_ms(nstages, 0);
  for (int i = 0; i < nstages; ++i) {
    StageSpace sp = make_stage_space(task.plan, i, task.target);
    default_stage_ms[i] = model.predict(sp, sp.base).total_ms;
    std::vector<EtirState> states;
    if (options.mode == ConstructMode::kGensor) {
      WalkOptions w;
      w.iterations = options.iterations;
      w.chains = options.chains;
      w.interleave = options.interleave;
      w.seed = options.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i);
      WalkResult wr = gensor_walk(sp, model, w);
      res.walk_steps += wr.steps;
      res.revisits += wr.revisits;
      res.top_results += static_cast<int>(wr.top_results.size());
      // What the paper returns: the last state of the (first) chain.
      last_state_ms[i] = model.predict(sp, to_annotation(sp, wr.finals.front())).total_ms;
      states = std::move(wr.visited);
    } else {
      states = roller_construct(sp, model).path;
      res.walk_steps += static_cast<int>(states.size()) - 1;
      last_state_ms[i] = model.predict(sp, to_annotation(sp, states.back())).total_ms;
    }
    res.states_visited += static_cast<int>(states.size());
    ranked[i] = rank_stage(sp, model, states);
    TESSERA_CHECK(!ranked[i].empty()) << "no schedule for stage " << sp.op_name;
    if (sp.work() > max_work) {
      max_work = sp.work();
      res.main_stage = i;
    }
  }
  res.distinct_schedules = static_cast<int>(ranked[res.main_stage].size());
  for (int i = 0; i < nstages; ++i) {
    res.last_state_predicted_ms +=
        i == res.main_stage ? last_state_ms[i] : ranked[i].front().prediction.total_ms;
  }

  // The other stages take their best-ranked annotations, except transposing copies and band
  // products, which the model misjudges (it counts gathered lines, not the rules' in-register
  // transposes, and sees no skewed register tiles): those keep the rules' annotation.
  const schedule::KernelSchedule rules = task.default_schedule();
  std::vector<RankedAnnotation> others(static_cast<size_t>(nstages));
  for (int i = 0; i < nstages; ++i) {
    if (i == res.main_stage) continue;
    RankedAnnotation& ra = others[static_cast<size_t>(i)];
    ra = ranked[i].front();
    const schedule::Stage& stage = task.plan.stages[static_cast<size_t>(i)];
    const schedule::StageAnnotation& rule = rules.stages[static_cast<size_t>(i)];
    if (schedule::is_transposing_copy(stage, task.plan, rule) || rule.skew_axis >= 0) {
      ra.annotation = rules.stages[static_cast<size_t>(i)];
      ra.prediction = model.predict(make_stage_space(task.plan, i, task.target), ra.annotation);
    }
  }
  const int k = std::max(1, options.top_k);
  const auto& main = ranked[res.main_stage];
  for (size_t c : pick_diverse(main, static_cast<size_t>(k))) {
    ConstructCandidate cand;
    cand.schedule.tuner = std::string("construct:") + res.mode;
    for (int i = 0; i < nstages; ++i) {
      const RankedAnnotation& ra = i == res.main_stage ? main[c] : others[static_cast<size_t>(i)];
      cand.schedule.stages.push_back(ra.annotation);
      cand.predicted_ms += ra.prediction.total_ms;
    }
    cand.schedule = task.as_run(std::move(cand.schedule));
    res.candidates.push_back(std::move(cand));
  }
  if (options.measure_variants && !options.predict_only) {
    add_measured_variants(task, model, res.main_stage, rules, &res.candidates);
  }
  if (options.include_default && !options.predict_only) {
    ConstructCandidate cand;
    cand.schedule = rules;
    bool duplicate = false;
    for (const ConstructCandidate& c : res.candidates) {
      duplicate = duplicate || c.schedule.stages_text() == cand.schedule.stages_text();
    }
    for (double ms : default_stage_ms) cand.predicted_ms += ms;
    if (!duplicate) res.candidates.push_back(std::move(cand));
  }
  res.search_s = seconds_since(t0);

  if (options.predict_only) {
    res.chosen = 0;
    res.schedule = res.candidates.front().schedule;
  } else {
    const auto m0 = std::chrono::steady_clock::now();
    CandidateMeasurer measurer(task, options.measure);
    std::vector<schedule::KernelSchedule> schedules;
    for (const ConstructCandidate& c : res.candidates) schedules.push_back(c.schedule);
    std::vector<CandidateResult> measured = measurer.measure_all(schedules);
    double best = 0;
    for (size_t c = 0; c < res.candidates.size(); ++c) {
      ConstructCandidate& cand = res.candidates[c];
      cand.result = measured[c];
      cand.measured = true;
      if (cand.result.ok && (res.chosen < 0 || cand.result.median_ms < best)) {
        best = cand.result.median_ms;
        res.chosen = static_cast<int>(c);
      }
    }
    res.measure_s = seconds_since(m0);
    if (res.chosen >= 0) {
      res.schedule = res.candidates[res.chosen].schedule;
    } else {
      res.fell_back_to_default = true;
      res.schedule = rules;
    }
  }
  res.construct_s = seconds_since(t0);
  return res;
}

ConstructOptions policy_construct_options(uint64_t seed) {
  const schedule::TuningPolicy& policy = schedule::tuning_policy();
  ConstructOptions opts;
  opts.seed = seed;
  opts.top_k = policy.construct_top_k;
  opts.chains = policy.construct_chains;
  opts.iterations = policy.construct_iterations;
  return opts;
}

}  // namespace tessera::tune::gensor
