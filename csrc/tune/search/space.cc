#include "tune/search/space.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "schedule/default_schedule.h"
#include "schedule/lower.h"
#include "util/check.h"
#include "util/divisors.h"

namespace tessera::tune::search {

using schedule::KernelSchedule;
using schedule::Sketch;
using schedule::StageAnnotation;

namespace {

// The lowering's hard limit on register-tile points (it unrolls them all).
constexpr int64_t kLoweringMaxRegisterPoints = 1024;
// Most register-tile rows sampled on a non-vector axis when the space has no ladder for it.
constexpr int64_t kMaxRegisterRows = 16;
// Full vectors a sampled vector-axis register tile may hold when the space has no ladder for it.
constexpr int64_t kMaxRegisterVectors = 4;
// Odds of the coin flips of sampling (chosen, not fitted: the evolution corrects them).
constexpr double kParallelOdds = 0.75;         // a sampled stage runs its tiles in parallel
constexpr double kPrefetchOdds = 0.75;         // an unrolled reduction gets prefetch hints
constexpr double kFlipPrefetchOdds = 0.25;     // an unroll mutation flips the hints instead
constexpr double kDefaultOrderOdds = 0.5;      // the S1 order is the rules' order, not shuffled
constexpr double kMidLevelOdds = 0.5;          // a sampled tiling splits cache tiles into mid tiles
constexpr double kFlipParallelOdds = 1.0 / 3;  // a parallel mutation flips on/off

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool coin(std::mt19937_64& rng, double p) {
  return std::uniform_real_distribution<double>(0, 1)(rng) < p;
}

template <typename T>
const T& pick(const std::vector<T>& v, std::mt19937_64& rng) {
  TESSERA_CHECK(!v.empty()) << "pick from an empty list";
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}

int pick_int(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, std::max(lo, hi))(rng);
}

// Distinct prime factors of x (x >= 1).
std::vector<int64_t> prime_factors(int64_t x) {
  std::vector<int64_t> f;
  for (int64_t p = 2; p * p <= x; ++p) {
    if (x % p != 0) continue;
    f.push_back(p);
    while (x % p == 0) x /= p;
  }
  if (x > 1) f.push_back(x);
  return f;
}

// Tile counts an axis of `n` elements may be cut into: its divisors (no edge tiles) and the
// powers of two below it (edge tiles, but the sizes hardware likes), ascending.
std::vector<int64_t> factor_choices(int64_t n) {
  n = std::max<int64_t>(1, n);
  std::vector<int64_t> v;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    v.push_back(d);
    v.push_back(n / d);
  }
  for (int64_t p = 1; p < n; p *= 2) v.push_back(p);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool is_pow2(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

// Largest power of two <= cap dividing x.
int largest_pow2_divisor(int64_t x, int cap) {
  int w = 1;
  while (w * 2 <= cap && x % (w * 2) == 0) w *= 2;
  return w;
}

// Register-tile values for axis `a` of a tiled stage: the space's ladder when its sketch tiles,
// else the same kind of list (rows 1..16; vector axis: widths and a few full vectors).
std::vector<int64_t> register_choices(const StageChoices& c, int a) {
  const gensor::StageSpace& sp = c.space;
  const std::vector<int64_t>& ladder = sp.ladder[gensor::kReg][a];
  if (!ladder.empty() && sp.vector_axis == c.vector_axis) return ladder;
  const int64_t e = sp.extents[a];
  std::vector<int64_t> v;
  if (a == c.vector_axis) {
    for (int64_t w = 1; w <= sp.lanes && w <= std::max<int64_t>(e, 1); w *= 2) v.push_back(w);
    for (int64_t k = 2; k <= kMaxRegisterVectors && k * sp.lanes <= e; ++k)
      v.push_back(k * sp.lanes);
  } else {
    for (int64_t r = 1; r <= std::min(kMaxRegisterRows, e); ++r) v.push_back(r);
  }
  if (v.empty()) v.push_back(1);
  return v;
}

// Cache tile along axis a not split in the parallel loop: the whole axis in register tiles.
int64_t full_tile(int64_t extent, int64_t reg) { return gensor::round_up(extent, reg); }

// A tiled stage's tiles along one spatial axis as the sizes of its four levels, outside in:
// cache tiles (S0, a count that covers the extent), mid tiles per cache tile (S1), register
// tiles per mid tile (S2) and the register tile (S3). Without a mid level S1 is 1.
struct AxisLevels {
  static constexpr int kS0 = 0, kS1 = 1, kS2 = 2, kS3 = 3, kNum = 4;
  int64_t size[kNum];

  static AxisLevels of(const StageAnnotation& ann, int a, int64_t extent) {
    const int64_t mid = ann.mid_tiles()[a], reg = ann.tile_reg[a];
    return {{ceil_div(extent, ann.tile_outer[a]), ann.tile_outer[a] / mid, mid / reg, reg}};
  }
  int64_t reg() const { return size[kS3]; }
  int64_t mid() const { return reg() * size[kS2]; }
  int64_t outer() const { return mid() * size[kS1]; }

  // Writes the tiles back (tile_mid made explicit; normalize_mid drops it when unused).
  void store(StageAnnotation& ann, int a) const {
    if (ann.tile_mid.size() != ann.tile_outer.size()) ann.tile_mid = ann.mid_tiles();
    ann.tile_reg[a] = reg();
    ann.tile_mid[a] = mid();
    ann.tile_outer[a] = outer();
  }
};

// Moves a prime factor of one level of spatial axis `a` to another (kTileSize). A tiled stage
// has all four levels; a cross-lane stage only cache tiles, so its moves are S0 <-> S2 (its
// register tile is 1 and it has no mid level). A factor taken from the cache-tile count grows
// the destination only as far as the extent needs. False when the draw changes nothing.
bool move_spatial_factor(StageAnnotation& ann, int a, int64_t extent, bool tiled,
                         std::mt19937_64& rng) {
  using L = AxisLevels;
  const std::vector<int> levels =
      tiled ? std::vector<int>{L::kS0, L::kS1, L::kS2, L::kS3} : std::vector<int>{L::kS0, L::kS2};
  const int src = pick(levels, rng);
  int dst = src;
  while (dst == src) dst = pick(levels, rng);
  AxisLevels lv = AxisLevels::of(ann, a, extent);
  std::vector<int64_t> f = prime_factors(lv.size[src]);
  if (f.empty()) return false;
  const int64_t p = pick(f, rng);
  if (src != L::kS0) lv.size[src] /= p;
  if (dst != L::kS0) {
    const int64_t before = lv.size[dst];
    lv.size[dst] *= p;
    if (src == L::kS0) {
      // What the tiles inside the destination level leave of the extent.
      const int64_t inner = dst == L::kS1 ? lv.mid() : dst == L::kS2 ? lv.reg() : 1;
      lv.size[dst] = std::min(lv.size[dst], ceil_div(extent, inner));
      if (lv.size[dst] == before) return false;
    }
  }
  lv.store(ann, a);
  return true;
}

// tile_mid cleared when it splits no cache tile: one text per kernel (annotation.h).
void normalize_mid(StageAnnotation& ann) {
  if (!ann.has_mid_level()) ann.tile_mid.clear();
}

}  // namespace

const char* mutation_name(Mutation m) {
  switch (m) {
    case Mutation::kTileSize:
      return "tile_size";
    case Mutation::kUnroll:
      return "unroll";
    case Mutation::kParallel:
      return "parallel";
    case Mutation::kVectorWidth:
      return "vector_width";
    case Mutation::kPack:
      return "pack";
    case Mutation::kOrder:
      return "order";
    case Mutation::kSketch:
      return "sketch";
    case Mutation::kPlan:
      return "plan";
  }
  return "?";
}

std::string schedule_key(const KernelSchedule& s) {
  std::string k = s.plan.is_default() ? "" : s.plan.to_json().dump();
  for (const StageAnnotation& a : s.stages) k += a.to_json().dump();
  return k;
}

SearchSpace::SearchSpace(const Task& task, SpaceLimits limits) : task_(task), limits_(limits) {
  TESSERA_CHECK(!task.plan.stages.empty()) << "task " << task.name << " has no stages";
  variants_.push_back(make_variant(task.plan));
  // Only choices that decide some op of this kernel are planned; a plan that still comes out
  // with the stages of one offered already adds nothing.
  for (const schedule::PlanChoices& choices : schedule::PlanChoices::all()) {
    if (!schedule::may_plan_differently(task.plan, choices)) continue;
    const schedule::StagePlan& plan = task.plan_for(choices);
    bool known = false;
    for (const PlanVariant& v : variants_) {
      known = known || schedule::same_stages(task.plan_for(v.choices), plan);
    }
    if (!known) variants_.push_back(make_variant(plan));
  }
}

PlanVariant SearchSpace::make_variant(const schedule::StagePlan& plan) const {
  PlanVariant variant;
  variant.choices = plan.choices;
  for (int i = 0; i < static_cast<int>(plan.stages.size()); ++i) {
    const schedule::Stage& stage = plan.stages[i];
    StageChoices c;
    c.space = gensor::make_stage_space(plan, i, task_.target);
    const gensor::StageSpace& sp = c.space;
    c.work = sp.work();
    const schedule::AccessPattern ap = schedule::analyze_access_pattern(stage, plan);
    c.cross_lane_legal = sp.num_reduce > 0 && ap.reduce_contiguous;
    if (sp.cross_lane()) c.cross_lane_legal = true;  // the rules chose it: legal by construction
    // The tiling sketch keeps the space's vector axis. Behind a cross-lane base the space has
    // none; the output's innermost axis is then the one a tiling would vectorise.
    if (!sp.cross_lane()) {
      c.vector_axis = sp.base.vector_axis;
    } else if (sp.num_spatial > 0 && sp.extents[sp.num_spatial - 1] > 1) {
      c.vector_axis = sp.num_spatial - 1;
    }
    if (c.vector_axis >= 0 && sp.num_reduce > 0) {
      c.packable = schedule::analyze_access_pattern(stage, plan, c.vector_axis).packable;
      for (const gensor::StageSpace::RowOperand& r : sp.row_packable) {
        if (std::find(c.packable.begin(), c.packable.end(), r.name) == c.packable.end())
          c.packable.push_back(r.name);
      }
    }
    c.tiling_space = sp;
    c.tiling_space.base.sketch = Sketch::kMultiLevelTiling;
    c.cross_lane_space = sp;
    c.cross_lane_space.base.sketch = Sketch::kCrossLaneReduction;
    variant.stages.push_back(std::move(c));
  }
  return variant;
}

int SearchSpace::variant_index(const schedule::PlanChoices& choices) const {
  for (int v = 0; v < num_variants(); ++v) {
    if (variants_[v].choices == choices) return v;
  }
  return -1;
}

bool SearchSpace::fits_variant(const KernelSchedule& s) const {
  const int v = variant_index(s.plan);
  return v >= 0 && s.stages.size() == variants_[v].stages.size();
}

const std::vector<StageChoices>& SearchSpace::stages_of(const KernelSchedule& s) const {
  const int v = variant_index(s.plan);
  TESSERA_CHECK(v >= 0) << "search space of " << task_.name << " offers no plan with "
                        << s.plan.text();
  TESSERA_CHECK(s.stages.size() == variants_[v].stages.size())
      << "schedule has " << s.stages.size() << " stages, the plan with " << s.plan.text() << " has "
      << variants_[v].stages.size();
  return variants_[v].stages;
}

int64_t SearchSpace::register_budget(const StageChoices& c, int vector_width) const {
  const gensor::StageSpace& sp = c.space;
  int64_t b = limits_.max_injective_register_points;
  if (sp.num_reduce > 0) {
    const int64_t vectors = std::max<int64_t>(
        1, static_cast<int64_t>(limits_.accumulator_register_share * sp.num_vector_registers));
    b = vectors * std::max(1, vector_width);
  }
  return std::min(b, kLoweringMaxRegisterPoints);
}

int SearchSpace::pick_stage(const std::vector<StageChoices>& stages, std::mt19937_64& rng) {
  std::vector<double> w;
  for (const StageChoices& c : stages) w.push_back(std::log2(2.0 + c.work));
  return static_cast<int>(std::discrete_distribution<int>(w.begin(), w.end())(rng));
}

StageAnnotation SearchSpace::sample_tiling(const StageChoices& c, std::mt19937_64& rng) const {
  const gensor::StageSpace& sp = c.space;
  const int n = sp.num_spatial, m = sp.num_reduce, v = c.vector_axis;
  StageAnnotation ann;
  ann.sketch = Sketch::kMultiLevelTiling;
  ann.op = sp.op_name;
  ann.tile_reg.assign(n, 1);
  ann.tile_outer.assign(n, 1);
  int vw = 1;
  if (v >= 0) {
    ann.tile_reg[v] = pick(register_choices(c, v), rng);
    vw = gensor::vector_width_for(ann.tile_reg[v], sp.lanes);
    ann.vector_axis = v;
    ann.vector_width = vw;
  }
  // Register tiles axis by axis in random order, each within what the budget leaves.
  const int64_t budget = register_budget(c, vw);
  int64_t points = ann.tile_reg.empty() || v < 0 ? 1 : ann.tile_reg[v];
  if (points > budget) {  // a vector tile alone over budget: fall back to one vector
    ann.tile_reg[v] = vw;
    points = vw;
  }
  std::vector<int> axes(n);
  std::iota(axes.begin(), axes.end(), 0);
  std::shuffle(axes.begin(), axes.end(), rng);
  for (int a : axes) {
    if (a == v) continue;
    std::vector<int64_t> fit;
    for (int64_t r : register_choices(c, a)) {
      if (points * r <= budget) fit.push_back(r);
    }
    ann.tile_reg[a] = fit.empty() ? 1 : pick(fit, rng);
    points *= ann.tile_reg[a];
  }
  // The first `depth` axes are split in the parallel loop; the others are whole in each task.
  const int depth = n > 0 ? pick_int(rng, 1, n) : 0;
  for (int a = 0; a < n; ++a) {
    const int64_t count = ceil_div(sp.extents[a], ann.tile_reg[a]);
    const int64_t mid = a < depth ? pick(factor_choices(count), rng) : count;
    ann.tile_outer[a] = ann.tile_reg[a] * mid;
  }
  // Mid tiles (S1): per axis a divisor of the register tiles per cache tile.
  if (n > 0 && coin(rng, kMidLevelOdds)) {
    ann.tile_mid.resize(n);
    for (int a = 0; a < n; ++a) {
      ann.tile_mid[a] =
          ann.tile_reg[a] * pick(util::divisors(ann.tile_outer[a] / ann.tile_reg[a]), rng);
    }
    normalize_mid(ann);
  }
  for (int r = 0; r < m; ++r)
    ann.tile_reduce.push_back(pick(factor_choices(sp.extents[n + r]), rng));
  if (m > 0) {
    std::vector<int64_t> unrolls;
    for (int64_t u = 1; u <= limits_.max_reduce_unroll; u *= 2) unrolls.push_back(u);
    ann.reduce_unroll = pick(unrolls, rng);
    ann.prefetch = ann.reduce_unroll > 1 && coin(rng, kPrefetchOdds);
  }
  const std::vector<int> base_order = sp.base.s1_loop_order();
  if (coin(rng, kDefaultOrderOdds) && !sp.cross_lane() &&
      static_cast<int>(base_order.size()) == n) {
    ann.s1_order = base_order;
  } else {
    ann.s1_order.resize(n);
    std::iota(ann.s1_order.begin(), ann.s1_order.end(), 0);
    std::shuffle(ann.s1_order.begin(), ann.s1_order.end(), rng);
  }
  if (v >= 0) {
    for (const std::string& p : c.packable) {
      if (coin(rng, 0.5)) ann.pack.push_back(p);
    }
  }
  ann.parallel = coin(rng, kParallelOdds);
  return ann;
}

StageAnnotation SearchSpace::sample_cross_lane(const StageChoices& c, std::mt19937_64& rng) const {
  const gensor::StageSpace& sp = c.space;
  const int n = sp.num_spatial, m = sp.num_reduce;
  StageAnnotation ann;
  ann.sketch = Sketch::kCrossLaneReduction;
  ann.op = sp.op_name;
  std::vector<int64_t> widths;
  for (int64_t w = 1; w <= sp.lanes; w *= 2) widths.push_back(w);
  ann.vector_width = static_cast<int>(pick(widths, rng));
  ann.vector_axis = -1;
  ann.tile_reg.assign(n, 1);
  const int depth = n > 0 ? pick_int(rng, 1, n) : 0;
  for (int a = 0; a < n; ++a) {
    ann.tile_outer.push_back(a < depth ? pick(factor_choices(sp.extents[a]), rng) : sp.extents[a]);
  }
  for (int r = 0; r < m; ++r) ann.tile_reduce.push_back(sp.extents[n + r]);
  ann.parallel = coin(rng, kParallelOdds);
  return ann;
}

StageAnnotation SearchSpace::sample_stage(const StageChoices& c, std::mt19937_64& rng) const {
  const bool cross = c.cross_lane_legal && coin(rng, 0.5);
  return cross ? sample_cross_lane(c, rng) : sample_tiling(c, rng);
}

StageAnnotation SearchSpace::sample_stage(int i, std::mt19937_64& rng) const {
  return sample_stage(stage(i), rng);
}

KernelSchedule SearchSpace::sample(std::mt19937_64& rng) const {
  std::string why;
  for (int t = 0; t < limits_.max_sample_tries; ++t) {
    // Variants are drawn uniformly: which plan is faster depends on the kernel, and the
    // evolution moves the population towards the variants that measure well.
    // (No draw for a single plan: its samples are what they were before plans were searched.)
    const PlanVariant& variant =
        num_variants() > 1 ? variants_[pick_int(rng, 0, num_variants() - 1)] : variants_[0];
    KernelSchedule k;
    k.tuner = "search";
    k.plan = variant.choices;
    for (const StageChoices& c : variant.stages) k.stages.push_back(sample_stage(c, rng));
    why = check_structure(k);
    if (why.empty() && try_lower(k, &why)) return k;
  }
  TESSERA_FAIL() << "search space of " << task_.name << ": no valid sample in "
                 << limits_.max_sample_tries << " tries (last: " << why << ")";
}

std::string SearchSpace::check_stage(int i, const StageAnnotation& ann) const {
  return check_stage(stage(i), ann);
}

std::string SearchSpace::check_stage(const StageChoices& c, const StageAnnotation& ann) const {
  const gensor::StageSpace& sp = c.space;
  const size_t n = sp.num_spatial, m = sp.num_reduce;
  if (!ann.op.empty() && ann.op != sp.op_name) return "annotation for another op";
  if (ann.tile_outer.size() != n || ann.tile_reg.size() != n || ann.tile_reduce.size() != m)
    return "tile lists do not match the axes";
  for (int64_t t : ann.tile_reduce) {
    if (t < 1) return "reduce tile < 1";
  }
  if (ann.sketch == Sketch::kCrossLaneReduction) {
    if (!c.cross_lane_legal) return "cross-lane reduction not legal here";
    for (int64_t t : ann.tile_outer) {
      if (t < 1) return "cache tile < 1";
    }
    if (ann.vector_width < 1 || ann.vector_width > sp.lanes) return "vector width out of range";
    if (!ann.pack.empty() || ann.vector_axis >= 0) return "cross-lane stages neither pack nor tile";
    if (!ann.tile_mid.empty()) return "cross-lane stages have no mid tiles";
    return "";
  }
  if (!ann.tile_mid.empty() && ann.tile_mid.size() != n) return "tile_mid does not match the axes";
  const std::vector<int64_t> mid = ann.mid_tiles();
  int64_t points = 1;
  for (size_t a = 0; a < n; ++a) {
    if (ann.tile_reg[a] < 1 || mid[a] < ann.tile_reg[a] || mid[a] % ann.tile_reg[a] != 0)
      return "mid tile not a multiple of the register tile";
    if (ann.tile_outer[a] % mid[a] != 0) return "cache tile not a multiple of the mid tile";
    points *= ann.tile_reg[a];
  }
  const int vw = ann.vector_axis >= 0 ? ann.vector_width : 1;
  if (points > register_budget(c, vw)) return "register tile over the register budget";
  if (ann.reduce_unroll < 1 || ann.reduce_unroll > limits_.max_reduce_unroll)
    return "reduce unroll out of range";
  if (ann.vector_axis >= 0) {
    if (ann.vector_axis != c.vector_axis) return "not the space's vector axis";
    if (!is_pow2(ann.vector_width) || ann.vector_width > sp.lanes ||
        ann.tile_reg[ann.vector_axis] % ann.vector_width != 0)
      return "vector width must be a power of two <= lanes dividing the register tile";
  } else if (!ann.pack.empty()) {
    return "packing needs the vector axis";
  }
  for (const std::string& p : ann.pack) {
    if (std::find(c.packable.begin(), c.packable.end(), p) == c.packable.end())
      return "packs an operand that is not packable";
  }
  const std::vector<int> order = ann.s1_loop_order();
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t a = 0; a < sorted.size(); ++a) {
    if (sorted[a] != static_cast<int>(a) || sorted.size() != n) return "s1_order not a permutation";
  }
  return "";
}

std::string SearchSpace::check_structure(const KernelSchedule& s) const {
  const int v = variant_index(s.plan);
  if (v < 0) return "the space offers no plan with " + s.plan.text();
  const std::vector<StageChoices>& stages = variants_[v].stages;
  if (s.stages.size() != stages.size()) return "stage count differs";
  for (size_t i = 0; i < stages.size(); ++i) {
    std::string why = check_stage(stages[i], s.stages[i]);
    if (!why.empty()) return "stage " + std::to_string(i) + ": " + why;
  }
  return "";
}

std::optional<loop::LoweredFunc> SearchSpace::try_lower(const KernelSchedule& s,
                                                        std::string* why) const {
  try {
    return schedule::lower(task_.plan_for(s.plan), s, task_.name);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
    return std::nullopt;
  }
}

bool SearchSpace::mutate_stage(const StageChoices& c, StageAnnotation& ann, Mutation m,
                               std::mt19937_64& rng) const {
  const gensor::StageSpace& sp = c.space;
  const int n = sp.num_spatial, nr = sp.num_reduce;
  const bool tiled = ann.sketch == Sketch::kMultiLevelTiling;
  const int v = tiled ? ann.vector_axis : -1;
  // After the register tile of the vector axis changed, the widest width it still allows.
  auto fit_width = [&]() {
    if (v >= 0) ann.vector_width = largest_pow2_divisor(ann.tile_reg[v], ann.vector_width);
  };
  switch (m) {
    case Mutation::kTileSize: {
      // A few (axis, move) draws until one applies: a level of size 1 has no factor to give.
      // Cross-lane stages keep the whole reduction per point: only spatial axes are tiled.
      const int axes = tiled ? n + nr : n;
      if (axes == 0) return false;
      for (int attempt = 0; attempt < 8; ++attempt) {
        const int axis = pick_int(rng, 0, axes - 1);
        if (axis >= n) {  // reduce axis: R0 count <-> R1 tile
          int64_t& t = ann.tile_reduce[axis - n];
          const int64_t e = sp.extents[axis];
          if (coin(rng, 0.5)) {
            std::vector<int64_t> f = prime_factors(ceil_div(e, t));
            if (f.empty()) continue;
            t = std::min(e, t * pick(f, rng));
          } else {
            std::vector<int64_t> f = prime_factors(t);
            if (f.empty()) continue;
            t /= pick(f, rng);
          }
          return true;
        }
        if (move_spatial_factor(ann, axis, sp.extents[axis], tiled, rng)) {
          if (axis == v) fit_width();
          normalize_mid(ann);
          return true;
        }
      }
      return false;
    }
    case Mutation::kUnroll: {
      if (!tiled || nr == 0) return false;
      if (ann.reduce_unroll > 1 && coin(rng, kFlipPrefetchOdds)) {
        ann.prefetch = !ann.prefetch;
        return true;
      }
      std::vector<int64_t> other;
      for (int64_t u = 1; u <= limits_.max_reduce_unroll; u *= 2) {
        if (u != ann.reduce_unroll) other.push_back(u);
      }
      ann.reduce_unroll = pick(other, rng);
      if (ann.reduce_unroll == 1) ann.prefetch = false;
      return true;
    }
    case Mutation::kParallel: {
      if (n == 0 || coin(rng, kFlipParallelOdds)) {
        ann.parallel = !ann.parallel;
        return true;
      }
      // Cache tiles are whole mid tiles; without a mid level the mid tile follows the cache
      // tile, and the unit is the register tile.
      const int a = pick_int(rng, 0, n - 1);
      const bool has_mid = ann.has_mid_level();
      const int64_t unit = has_mid ? ann.tile_mid[a] : ann.tile_reg[a];
      const int64_t full = full_tile(sp.extents[a], unit);
      if (ann.tile_outer[a] < full) {  // split in the parallel loop: take it out
        ann.tile_outer[a] = full;
      } else {
        std::vector<int64_t> counts = factor_choices(ceil_div(sp.extents[a], unit));
        counts.pop_back();  // the whole axis, which it is now
        if (counts.empty()) return false;
        ann.tile_outer[a] = unit * pick(counts, rng);
      }
      if (has_mid) normalize_mid(ann);
      return true;
    }
    case Mutation::kVectorWidth: {
      std::vector<int> widths;
      for (int w = 1; w <= sp.lanes; w *= 2) {
        if (w == ann.vector_width) continue;
        if (tiled && (v < 0 || ann.tile_reg[v] % w != 0)) continue;
        widths.push_back(w);
      }
      if (widths.empty()) return false;
      ann.vector_width = pick(widths, rng);
      return true;
    }
    case Mutation::kPack: {
      if (!tiled || v < 0 || c.packable.empty()) return false;
      const std::string& p = pick(c.packable, rng);
      auto it = std::find(ann.pack.begin(), ann.pack.end(), p);
      if (it == ann.pack.end()) {
        ann.pack.push_back(p);
      } else {
        ann.pack.erase(it);
      }
      return true;
    }
    case Mutation::kOrder: {
      if (!tiled || n < 2) return false;
      ann.s1_order = ann.s1_loop_order();
      const int a = pick_int(rng, 0, n - 1);
      int b = pick_int(rng, 0, n - 2);
      if (b >= a) ++b;
      std::swap(ann.s1_order[a], ann.s1_order[b]);
      return true;
    }
    case Mutation::kSketch: {
      if (!c.cross_lane_legal) return false;
      ann = tiled ? sample_cross_lane(c, rng) : sample_tiling(c, rng);
      return true;
    }
    case Mutation::kPlan:
      return false;  // kernel-wide: switch_variant
  }
  return false;
}

std::optional<KernelSchedule> SearchSpace::switch_variant(const KernelSchedule& s,
                                                          std::mt19937_64& rng) const {
  if (num_variants() < 2) return std::nullopt;
  const int from = variant_index(s.plan);
  int to = pick_int(rng, 0, num_variants() - 2);
  if (to >= from) ++to;
  // A stage of the new plan whose op has a stage in the old one keeps that annotation when it is
  // valid there (the conv's tiles survive when its pad is inlined): the mutant differs in the
  // plan, not in everything, so that a better plan shows in its measurement instead of being
  // buried under a random retiling. Other stages are sampled.
  const PlanVariant& variant = variants_[to];
  KernelSchedule out;
  out.tuner = "search";
  out.plan = variant.choices;
  std::vector<bool> used(s.stages.size(), false);
  for (const StageChoices& c : variant.stages) {
    std::optional<StageAnnotation> kept;
    for (size_t j = 0; j < s.stages.size() && !kept; ++j) {
      if (used[j] || s.stages[j].op != c.space.op_name) continue;
      used[j] = true;
      if (check_stage(c, s.stages[j]).empty()) kept = s.stages[j];
    }
    out.stages.push_back(kept ? *kept : sample_stage(c, rng));
  }
  if (!check_structure(out).empty()) return std::nullopt;
  return out;
}

std::optional<KernelSchedule> SearchSpace::mutate(const KernelSchedule& s, Mutation m,
                                                  std::mt19937_64& rng) const {
  if (!fits_variant(s)) return std::nullopt;
  if (m == Mutation::kPlan) return switch_variant(s, rng);
  const std::vector<StageChoices>& stages = stages_of(s);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const int i = pick_stage(stages, rng);
    StageAnnotation ann = s.stages[i];
    if (!mutate_stage(stages[i], ann, m, rng) || !check_stage(stages[i], ann).empty()) continue;
    KernelSchedule out = s;
    out.tuner = "search";
    out.stages[i] = std::move(ann);
    return out;
  }
  return std::nullopt;
}

std::optional<KernelSchedule> SearchSpace::mutate(const KernelSchedule& s,
                                                  std::mt19937_64& rng) const {
  // kPlan (the last kind) is drawn only where there is another plan to switch to.
  const int kinds = num_variants() > 1 ? kNumMutations : kNumMutations - 1;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const Mutation m = static_cast<Mutation>(pick_int(rng, 0, kinds - 1));
    if (auto out = mutate(s, m, rng)) return out;
  }
  return std::nullopt;
}

std::optional<KernelSchedule> SearchSpace::crossover(const KernelSchedule& a,
                                                     const KernelSchedule& b,
                                                     std::mt19937_64& rng) const {
  if (a.plan != b.plan || !fits_variant(a) || !fits_variant(b)) return std::nullopt;
  const std::vector<StageChoices>& stages = stages_of(a);
  KernelSchedule child;
  child.tuner = "search";
  child.plan = a.plan;
  for (size_t i = 0; i < stages.size(); ++i) {
    const bool from_a = coin(rng, 0.5);
    const StageAnnotation& base = from_a ? a.stages[i] : b.stages[i];
    const StageAnnotation& other = from_a ? b.stages[i] : a.stages[i];
    StageAnnotation mixed = base;
    const bool mixable = base.sketch == other.sketch && base.sketch == Sketch::kMultiLevelTiling &&
                         base.vector_axis == other.vector_axis;
    if (mixable) {
      // An axis's three tiles travel together (mid tiles made explicit for the mix).
      const std::vector<int64_t> other_mid = other.mid_tiles();
      mixed.tile_mid = mixed.mid_tiles();
      for (size_t ax = 0; ax < mixed.tile_outer.size(); ++ax) {
        if (!coin(rng, 0.5)) continue;
        mixed.tile_outer[ax] = other.tile_outer[ax];
        mixed.tile_mid[ax] = other_mid[ax];
        mixed.tile_reg[ax] = other.tile_reg[ax];
      }
      normalize_mid(mixed);
      for (size_t r = 0; r < mixed.tile_reduce.size(); ++r) {
        if (coin(rng, 0.5)) mixed.tile_reduce[r] = other.tile_reduce[r];
      }
      if (mixed.vector_axis >= 0) {
        mixed.vector_width =
            largest_pow2_divisor(mixed.tile_reg[mixed.vector_axis], mixed.vector_width);
      }
    }
    child.stages.push_back(check_stage(stages[i], mixed).empty() ? mixed : base);
  }
  if (!check_structure(child).empty()) return std::nullopt;
  return child;
}

}  // namespace tessera::tune::search
