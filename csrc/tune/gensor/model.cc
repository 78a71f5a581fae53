#include "tune/gensor/model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/check.h"

namespace tessera::tune::gensor {

namespace {

double ceil_div(double a, double b) { return std::ceil(a / b); }

// Memory level (cost::MemoryHierarchy index) holding one unit of an ETIR level.
int memory_level_of(int etir_level) {
  switch (etir_level) {
    case kL2:
      return cost::kLevelL2;
    case kL1:
      return cost::kLevelL1;
    default:
      return cost::kLevelReg;
  }
}

// One parallel loop's dispatch and join on the host's thread team.
constexpr double kDispatchMs = 0.004;

// Vector registers kept free for temporaries (addresses live in general registers): one.
constexpr int kSpareRegisters = 1;

// Does tensor t's region grow along iterator `iter`?
bool varies_along(const cost::AccessRegions& ar, size_t t, int iter) {
  std::vector<int64_t> a(ar.num_iters(), 1), b(ar.num_iters(), 1);
  b[iter] = std::min<int64_t>(2, ar.extents()[iter]);
  return ar.region_shape(t, a) != ar.region_shape(t, b);
}

int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// The innermost register-tile loop axis that has more than one register tile per mid tile (per
// cache tile without a mid level): the one whose sweep decides what stays in L1 and in which
// order the output is written (axes of one tile do not loop).
int innermost_swept_axis(const schedule::StageAnnotation& ann) {
  const std::vector<int> order = ann.s1_loop_order();
  const std::vector<int64_t> mid = ann.mid_tiles();
  for (size_t k = order.size(); k-- > 0;) {
    const int a = order[k];
    if (mid[a] > ann.tile_reg[a]) return a;
  }
  return order.back();
}

double product(const std::vector<int64_t>& v) {
  double p = 1;
  for (int64_t x : v) p *= static_cast<double>(x);
  return p;
}

double tensor_bytes(const cost::TensorAccesses& t) {
  double bytes = t.elem_bytes;
  for (int64_t dim : t.shape) bytes *= static_cast<double>(std::max<int64_t>(1, dim));
  return bytes;
}

// The loops of one task around a register tile's inner reduce steps, innermost first (see the
// sketch in schedule/annotation.h): the register-tile loops of a mid tile (S2) in reverse s1
// order, then the R0 loops, then the mid-tile loops (S1) that iterate. Without a mid level the
// last group is empty and the list is the three-level one.
struct TaskLoop {
  int iter;        // iterator it advances
  double trips;    // iterations
  int64_t extent;  // the iterator's extent covered once the loop has run
};

std::vector<TaskLoop> task_loops(const StageSpace& sp, const schedule::StageAnnotation& ann) {
  const int n = sp.num_spatial, m = sp.num_reduce;
  std::vector<TaskLoop> loops;
  const std::vector<int> order = ann.s1_loop_order();
  const std::vector<int64_t> mid = ann.mid_tiles();
  for (size_t k = order.size(); k-- > 0;) {
    const int a = order[k];
    loops.push_back(
        {a, static_cast<double>(mid[a] / ann.tile_reg[a]), std::min(mid[a], sp.extents[a])});
  }
  for (int r = m; r-- > 0;) {
    const double e = static_cast<double>(sp.extents[n + r]);
    loops.push_back(
        {n + r, std::ceil(e / static_cast<double>(ann.tile_reduce[r])), sp.extents[n + r]});
  }
  for (size_t k = order.size(); k-- > 0;) {
    const int a = order[k];
    if (ann.tile_outer[a] == mid[a]) continue;
    loops.push_back({a, static_cast<double>(ann.tile_outer[a] / mid[a]),
                     std::min(ann.tile_outer[a], sp.extents[a])});
  }
  return loops;
}

// Lines the region of tensor `t` over `ext` puts into the fullest set of a cache with `ways` ways
// of `set_span` bytes each. Its rows lie a row stride apart, and rows whose stride shares a large
// power of two with the set span land in the same sets: GEMM 2048 C blocks of 8 KiB rows fill a
// 16-way, 128 KiB-span L2 set with one line per 16 rows.
double lines_in_fullest_set(const cost::AccessRegions& ar, size_t t,
                            const std::vector<int64_t>& ext, int64_t set_span, int line) {
  const cost::TensorAccesses& tensor = ar.tensors()[t];
  const size_t rank = tensor.shape.size();
  if (rank < 2 || set_span <= 0) return 0;
  for (int64_t dim : tensor.shape) {
    if (dim <= 0) return 0;
  }
  const std::vector<int64_t> region = ar.region_shape(t, ext);
  const int64_t row_bytes = tensor.shape[rank - 1] * tensor.elem_bytes;
  const double row_lines =
      std::ceil(static_cast<double>(region[rank - 1] * tensor.elem_bytes) / line);
  double rows = 1;
  for (size_t i = 0; i + 1 < rank; ++i) rows *= static_cast<double>(region[i]);
  const double period = static_cast<double>(set_span / gcd64(row_bytes, set_span));
  const double sets = std::min(static_cast<double>(set_span / line), period * row_lines);
  return std::ceil(rows * row_lines / sets);
}

// Bytes of tensor t's region over `ext` in a cache of `line`-byte lines. A packed operand is
// read from contiguous panels: its region is one run of elements, not rows each rounded up to
// lines (a 3x3 convolution's weights have 12-byte rows: counted as rows, 5x their bytes).
double cached_region_bytes(const cost::AccessRegions& ar, size_t t, const std::vector<int64_t>& ext,
                           int line, bool packed) {
  if (!packed) return ar.region_bytes(t, ext, line);
  return std::ceil(ar.region_bytes(t, ext) / line) * line;
}

// Bytes each tensor moves into a cache of `cap` bytes over one task, by reuse distance. One
// register tile's reduce steps fetch its region once; a loop around that reuses the data of earlier
// iterations when everything one iteration touches fits in the cache (the loop then moves the
// distinct data of all its iterations), and fetches it all again per iteration when it does not.
// The output is moved twice (read for ownership, written back). Unlike a whole-task footprint check
// this lets an operand stream through a cache that holds only the reused panel: a task over the
// whole reduction with a tall tile keeps its B panel in L2 while A streams (measured, GEMM 2048,
// 510x128 tasks over k 2048: 0.96x torch.mm, where 96x256 tasks in k steps of 128 that fit L2 whole
// run at 0.85x).
// With `kept_share` < 1, reused data that fills more than that share of the cache is kept only
// in part: the fraction refetched grows linearly from none at the share to all at the capacity.
std::vector<double> task_traffic(const cost::AccessRegions& ar, const std::vector<int64_t>& body,
                                 const std::vector<TaskLoop>& loops, double cap, int line,
                                 const schedule::StageAnnotation& ann,
                                 const cost::MemoryLevel* aliasing = nullptr,
                                 double kept_share = 1.0) {
  const auto& tensors = ar.tensors();
  // Set-aliasing check per tensor: only with a known associativity, and not for packed operands
  // (copied into contiguous panels, nothing aliases).
  const int64_t set_span =
      aliasing != nullptr && aliasing->ways > 0 ? aliasing->capacity_bytes / aliasing->ways : 0;
  std::vector<bool> packed(tensors.size()), may_alias(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) {
    packed[t] = is_packed(ann, tensors[t].name);
    may_alias[t] = set_span > 0 && !packed[t];
  }
  auto region = [&](size_t t, const std::vector<int64_t>& e) {
    return cached_region_bytes(ar, t, e, line, packed[t]);
  };
  std::vector<int64_t> ext = body;
  std::vector<double> bytes(tensors.size());
  for (size_t t = 0; t < tensors.size(); ++t) bytes[t] = region(t, ext);
  for (const TaskLoop& loop : loops) {
    if (loop.trips <= 1) {
      ext[loop.iter] = loop.extent;
      continue;
    }
    std::vector<double> regions(tensors.size());
    double iteration = 0;
    for (size_t t = 0; t < tensors.size(); ++t) iteration += regions[t] = region(t, ext);
    // An aliasing tensor gets the ways the other tensors' data leaves free, spread evenly over
    // the sets: GEMM 2048's 258 x 128 C blocks over k steps of 512 put 16-17 lines into each set
    // they use, next to 784 KiB of A and B in a 2 MiB, 16-way L2; counted against all 16 ways they
    // looked as if they stayed, and such tasks run 10-15% slower than tasks over the whole k.
    bool fits = true;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (!may_alias[t]) continue;
      const double others = (iteration - regions[t]) / aliasing->capacity_bytes;
      const double free_ways = aliasing->ways * std::max(0.0, 1.0 - others);
      fits = fits && lines_in_fullest_set(ar, t, ext, set_span, line) <= free_ways;
    }
    // Share of the reused data that stays between iterations.
    double kept = 0;
    if (fits && iteration <= cap) {
      const double full = kept_share * cap;
      kept = iteration <= full ? 1.0 : (cap - iteration) / (cap - full);
    }
    std::vector<int64_t> after = ext;
    after[loop.iter] = loop.extent;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const double before = regions[t];
      const double reused = bytes[t] * (before > 0 ? region(t, after) / before : 1.0);
      bytes[t] = kept * reused + (1 - kept) * bytes[t] * loop.trips;
    }
    ext = std::move(after);
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_output) bytes[t] *= 2;
  }
  return bytes;
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

}  // namespace

const char* eq1_name(Eq1Form f) { return f == Eq1Form::kPrinted ? "printed" : "corrected"; }

Eq1Form eq1_from_name(const std::string& name) {
  if (name == "printed") return Eq1Form::kPrinted;
  TESSERA_CHECK(name == "corrected")
      << "eq1 must be 'printed' or 'corrected', got '" << name << "'";
  return Eq1Form::kCorrected;
}

AnalyticModel::AnalyticModel(cost::MemoryHierarchy hw, ModelOptions options)
    : hw_(std::move(hw)), opts_(options) {
  TESSERA_CHECK(hw_.levels.size() == cost::kNumLevels)
      << "memory hierarchy needs dram, llc, l2, l1, reg";
  opts_.cores = std::max(1, opts_.cores);
}

double AnalyticModel::cycle_ms() const { return 1.0 / (hw_.ghz() * 1e6); }

std::vector<int64_t> AnalyticModel::level_tile(const StageSpace& sp, const EtirState& s,
                                               int level) const {
  const int n = sp.num_spatial, d = sp.num_iters();
  std::vector<int64_t> t(d, 1);
  if (level == kReg) {
    if (sp.cross_lane()) {
      for (int r = n; r < d; ++r) t[r] = 1;
      if (d > n) t[d - 1] = sp.lanes * s.vthread[d - 1];
    } else {
      for (int a = 0; a < n; ++a) t[a] = effective_reg_tile(sp, s, a);
    }
    return t;
  }
  for (int i = 0; i < d; ++i) t[i] = s.tile[level][i];
  return t;
}

double AnalyticModel::footprint(const StageSpace& sp, const EtirState& s, int level) const {
  const int line = level == kReg ? 0 : hw_.levels[memory_level_of(level)].line_bytes;
  return sp.regions->footprint_bytes(level_tile(sp, s, level), line);
}

double AnalyticModel::traffic(const StageSpace& sp, const EtirState& s, int level) const {
  const int line = level == kReg ? 0 : hw_.levels[memory_level_of(level)].line_bytes;
  return sp.regions->traffic(level_tile(sp, s, level), line).total();
}

double AnalyticModel::accumulators(const StageSpace& sp, const EtirState& s) const {
  const int d = sp.num_iters();
  if (sp.cross_lane()) return d > sp.num_spatial ? static_cast<double>(s.vthread[d - 1]) : 1.0;
  double points = 1;
  for (int a = 0; a < sp.num_spatial; ++a)
    points *= static_cast<double>(effective_reg_tile(sp, s, a));
  int vw = sp.vector_axis >= 0
               ? vector_width_for(effective_reg_tile(sp, s, sp.vector_axis), sp.lanes)
               : 1;
  return points / vw;
}

int AnalyticModel::registers_needed(const StageSpace& sp, const EtirState& s) const {
  const auto& tensors = sp.regions->tensors();
  if (sp.cross_lane()) {
    int deps = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (!tensors[t].is_output && !tensors[t].epilogue) ++deps;
    }
    double v = accumulators(sp, s);
    return static_cast<int>(v * (1 + deps));
  }
  return registers_for_tile(sp, level_tile(sp, s, kReg));
}

int AnalyticModel::registers_for_tile(const StageSpace& sp,
                                      const std::vector<int64_t>& reg_tile) const {
  const auto& tensors = sp.regions->tensors();
  std::vector<int64_t> tile(sp.num_iters(), 1);  // reduce axes: one step per register tile
  for (int a = 0; a < sp.num_spatial; ++a) tile[a] = reg_tile[a];
  int vw = sp.vector_axis >= 0 ? vector_width_for(tile[sp.vector_axis], sp.lanes) : 1;
  double regs = 0;
  bool broadcasts = false;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].epilogue) continue;
    if (tensors[t].is_output || sp.vector_dependent[t]) {
      // Accumulators, and operand vectors live across the register tile.
      regs += std::ceil(product(sp.regions->region_shape(t, tile)) / vw);
    } else {
      broadcasts = true;
    }
  }
  // Broadcasts take one register, whatever the register tile: out-of-order cores rename it, so
  // a broadcast in flight needs no architectural register of its own (LLVM reuses one zmm for
  // every broadcast of a 32-channel x 2-row x 7-column conv tile, and spills nothing).
  return static_cast<int>(regs + (broadcasts ? 1 : 0));
}

bool AnalyticModel::feasible(const StageSpace& sp, const EtirState& s) const {
  const double l2_cap = hw_.levels[cost::kLevelL2].capacity_bytes * opts_.l2_usable;
  const double l1_cap = hw_.levels[cost::kLevelL1].capacity_bytes * opts_.l1_usable;
  if (l2_cap > 0 && footprint(sp, s, kL2) > l2_cap) return false;
  // The cross-lane sketch streams whole reduction rows; its L1 tile is not something it sizes.
  if (s.level >= kL1 && !sp.cross_lane() && l1_cap > 0 && footprint(sp, s, kL1) > l1_cap) {
    return false;
  }
  if (s.level >= kReg) {
    if (!sp.cross_lane()) {
      if (!register_tile_fits(sp, level_tile(sp, s, kReg))) return false;
    } else if (registers_needed(sp, s) > hw_.num_vector_registers - kSpareRegisters) {
      return false;
    } else if (sp.num_reduce > 0) {
      if (sp.lanes * s.vthread.back() > std::max<int64_t>(sp.lanes, sp.extents.back()))
        return false;
    }
  }
  return true;
}

bool AnalyticModel::register_tile_fits(const StageSpace& sp,
                                       const std::vector<int64_t>& reg_tile) const {
  double points = 1;
  for (int a = 0; a < sp.num_spatial; ++a) points *= static_cast<double>(reg_tile[a]);
  if (points > 1024) return false;  // the lowering unrolls the register tile fully
  return registers_for_tile(sp, reg_tile) <= hw_.num_vector_registers - kSpareRegisters;
}

double AnalyticModel::parallel_efficiency(const StageSpace& sp, const EtirState& s) const {
  if (!sp.base.parallel) return 1.0;
  double tasks = 1;
  for (int a = 0; a < sp.num_spatial; ++a) {
    tasks *= ceil_div(static_cast<double>(sp.extents[a]), static_cast<double>(s.tile[kL2][a]));
  }
  const double waves = ceil_div(tasks, opts_.cores);
  return tasks / (waves * opts_.cores);
}

bool AnalyticModel::fits_llc(const StageSpace& sp) const {
  const int64_t cap = hw_.levels[cost::kLevelLlc].capacity_bytes;
  double bytes = 0;
  for (const auto& t : sp.regions->tensors()) bytes += tensor_bytes(t);
  return cap > 0 && bytes <= static_cast<double>(cap);
}

const cost::MemoryLevel& AnalyticModel::refill_level(const StageSpace& sp) const {
  return hw_.levels[fits_llc(sp) ? cost::kLevelLlc : cost::kLevelDram];
}

double AnalyticModel::refill_bandwidth_gbs(const StageSpace& sp, double cores) const {
  const double dram_all =
      std::min(hw_.dram_bw_all_gbs, cores * hw_.levels[cost::kLevelDram].bandwidth_gbs);
  if (!fits_llc(sp)) return dram_all;
  return std::max(dram_all, cores * hw_.levels[cost::kLevelLlc].bandwidth_gbs);
}

double AnalyticModel::benefit_tile(const StageSpace& sp, const EtirState& s,
                                   const EtirState& next) const {
  if (!feasible(sp, next)) return 0;
  const int l = s.level;
  const double q0 = traffic(sp, s, l), q1 = traffic(sp, next, l);
  const double f0 = footprint(sp, s, l), f1 = footprint(sp, next, l);
  if (q1 <= 0 || f0 <= 0 || f1 <= 0) return 0;
  double b = opts_.eq1 == Eq1Form::kPrinted ? (q0 * f1) / (q1 * f0) : (q0 * f0) / (q1 * f1);
  if (l == kL2) b *= parallel_efficiency(sp, next) / parallel_efficiency(sp, s);
  return b;
}

double AnalyticModel::benefit_cache(const StageSpace& sp, const EtirState& s) const {
  if (s.level >= kReg) return 0;
  // Eq. 2 for the data of the current tile: read from where it comes from now (the level
  // outside: LLC or DRAM for the L2 tile, L2 for the L1 tile) versus from the level it is
  // cached in.
  const cost::MemoryLevel& low =
      s.level == kL2 ? refill_level(sp) : hw_.levels[memory_level_of(s.level) - 1];
  const cost::MemoryLevel& high = hw_.levels[memory_level_of(s.level)];
  const double bytes = footprint(sp, s, s.level);
  // GB/s = bytes per ns, so S / B is in ns like the latencies.
  const double eq2 =
      (low.latency_ns + bytes / low.bandwidth_gbs) / (high.latency_ns + bytes / high.bandwidth_gbs);
  // "based on the current memory level's utilization" (paper, IV-A): caching pays off once the
  // tile uses its level; with Eq. 2 alone (largest for tiny, latency-bound tiles) every chain
  // would move inward after a step or two, long before its tiles are worth caching.
  const double cap = static_cast<double>(high.capacity_bytes);
  const double utilization = cap > 0 ? std::min(1.0, bytes / cap) : 1.0;
  return eq2 * utilization;
}

double AnalyticModel::benefit_vthread(const StageSpace& sp, const EtirState& s,
                                      const EtirState& next) const {
  if (!feasible(sp, next)) return 0;
  const double chains = hw_.fma_latency_cycles * hw_.fma_ports;
  const double a0 = accumulators(sp, s), a1 = accumulators(sp, next);
  return std::ceil(chains / std::max(1.0, a0)) / std::ceil(chains / std::max(1.0, a1));
}

double AnalyticModel::benefit(const StageSpace& sp, const EtirState& s, const Action& a) const {
  EtirState next;
  if (!apply_action(sp, s, a, &next)) return 0;
  switch (a.kind) {
    case ActionKind::kTile:
    case ActionKind::kInvTile:
      return benefit_tile(sp, s, next);
    case ActionKind::kCache:
      return feasible(sp, next) ? benefit_cache(sp, s) : 0;
    case ActionKind::kSetVThread:
      return benefit_vthread(sp, s, next);
  }
  return 0;
}

// ---- time model ------------------------------------------------------------------------------

Prediction AnalyticModel::predict(const StageSpace& sp,
                                  const schedule::StageAnnotation& ann) const {
  return sp.cross_lane() ? predict_cross_lane(sp, ann) : predict_tiled(sp, ann);
}

double AnalyticModel::l1_conflict_lines_per_step(const StageSpace& sp,
                                                 const schedule::StageAnnotation& ann) const {
  // Cache-set aliasing: the rows a register tile reads from a tensor that is not vector-loaded
  // (broadcast operands such as an unpacked A) sit one row stride apart; with a stride that is a
  // multiple of the L1 set span (4 KiB on 48 KiB / 12 ways) they all map to a few sets. Those sets
  // also hold the vector operands' panel of the reduce tile (kc x the register tile's vector
  // width: a B panel of 32 KiB takes 8 of 12 ways), and rows beyond the ways left over evict
  // each other: their reads come from L2, mostly hidden behind the FMAs (measured, GEMM 2048 with
  // 12x32 tiles and kc 256: 1.12x faster with A packed, where 8 rows per step miss L1). A packed
  // operand's rows are neighbours and do not alias.
  const int n = sp.num_spatial, m = sp.num_reduce, d = sp.num_iters();
  const auto& tensors = sp.regions->tensors();
  const int vw = ann.vector_axis >= 0 ? ann.vector_width : 1;
  const cost::MemoryLevel& l1 = hw_.levels[cost::kLevelL1];
  const double set_span =
      l1.capacity_bytes > 0 ? static_cast<double>(l1.capacity_bytes) / l1.ways : 4096;
  std::vector<int64_t> panel(d, 1);  // the vector operands' panel: register tile x reduce tile
  for (int a = 0; a < n; ++a) panel[a] = ann.tile_reg[a];
  for (int r = 0; r < m; ++r) panel[n + r] = ann.tile_reduce[r];
  double panel_ways = 0;  // ways per L1 set that panel occupies
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_output || tensors[t].epilogue || !(vw > 1 && sp.vector_dependent[t]))
      continue;
    panel_ways +=
        cached_region_bytes(*sp.regions, t, panel, l1.line_bytes, is_packed(ann, tensors[t].name)) /
        set_span;
  }
  // A panel larger than L1 cannot stay there: it streams through, and its lines with the ones
  // the prefetchers bring ahead of it hold about half of every set (measured, GEMM 2048 over the
  // whole k with a B panel streaming from L2 and A's rows unpacked: 6-row tiles 0.92-0.95x
  // torch.mm, 8-, 10- and 12-row tiles 0.80-0.87x).
  if (panel_ways > l1.ways) panel_ways = std::floor(l1.ways / 2.0);
  const double free_ways = std::max(1.0, std::floor(l1.ways - panel_ways));
  double conflict_lines_per_step = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_output || tensors[t].epilogue) continue;
    if (vw > 1 && sp.vector_dependent[t]) continue;
    if (is_packed(ann, tensors[t].name)) continue;
    for (int a = 0; a < n; ++a) {
      if (ann.tile_reg[a] <= 1) continue;
      const int64_t stride = sp.regions->element_stride(t, a) * tensors[t].elem_bytes;
      if (stride <= 0 || stride % l1.line_bytes != 0) continue;
      const double sets =
          set_span / static_cast<double>(gcd64(stride, static_cast<int64_t>(set_span)));
      // Rows read round-robin from more lines than the ways left: LRU evicts each one before
      // its next use, so all of them miss (measured, GEMM 2048 over the whole k with A's rows
      // unpacked: 12-row tiles 0.83-0.87x torch.mm, 6-row tiles 0.95-1.0x).
      if (ann.tile_reg[a] > free_ways * sets) conflict_lines_per_step += ann.tile_reg[a];
    }
  }
  return conflict_lines_per_step;
}

double AnalyticModel::page_strided_operands(const StageSpace& sp,
                                            const schedule::StageAnnotation& ann) const {
  constexpr int64_t kPageBytes = 4096;
  if (sp.num_reduce == 0 || ann.vector_axis < 0 || ann.vector_width <= 1) return 0;
  const int innermost_reduce = sp.num_iters() - 1;
  const auto& tensors = sp.regions->tensors();
  double count = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_output || tensors[t].epilogue || !sp.vector_dependent[t]) continue;
    if (is_packed(ann, tensors[t].name)) continue;
    const int64_t stride = sp.regions->element_stride(t, innermost_reduce);
    if (stride > 0 && stride * tensors[t].elem_bytes >= kPageBytes) count += 1;
  }
  return count;
}

Prediction AnalyticModel::predict_tiled(const StageSpace& sp,
                                        const schedule::StageAnnotation& ann) const {
  const int n = sp.num_spatial, m = sp.num_reduce, d = sp.num_iters();
  const auto& tensors = sp.regions->tensors();
  const double L = hw_.fma_latency_cycles, P_fma = hw_.fma_ports, P_ld = hw_.load_ports;
  const int vw = ann.vector_axis >= 0 ? ann.vector_width : 1;
  Prediction pr;

  // edge: accumulators of the smallest edge tile (cut along one axis) over a full tile's.
  double points = 1, reduce = 1, full = 1, reg_points = 1, tasks = 1, edge = 1;
  for (int a = 0; a < n; ++a) {
    const double e = static_cast<double>(sp.extents[a]), tr = static_cast<double>(ann.tile_reg[a]);
    points *= e;
    reg_points *= tr;
    full *= std::floor(e / tr) * tr / e;
    const double rem = e - std::floor(e / tr) * tr;
    if (rem > 0) edge = std::min(edge, rem / tr);
    tasks *= ceil_div(e, static_cast<double>(ann.tile_outer[a]));
  }
  double n_r0 = 1;
  for (int r = 0; r < m; ++r) {
    reduce *= static_cast<double>(sp.extents[n + r]);
    n_r0 *=
        ceil_div(static_cast<double>(sp.extents[n + r]), static_cast<double>(ann.tile_reduce[r]));
  }
  const double acc = reg_points / vw;

  // Operand loads per reduction step of one register tile: vector loads for tensors that move
  // with the vector axis (element loads when strided: gathers), broadcasts for the others.
  std::vector<int64_t> reg_tile(d, 1);
  for (int a = 0; a < n; ++a) reg_tile[a] = ann.tile_reg[a];
  double loads = 0;
  double guarded_loads = 0;  // of them, loads behind a bounds test (an inlined pad)
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_output || tensors[t].epilogue) continue;
    double elems = product(sp.regions->region_shape(t, reg_tile));
    const double before = loads;
    if (vw > 1 && sp.vector_dependent[t]) {
      // A packed operand is read from its panels, contiguous along the vector iterator
      // whichever of its dims that iterator indexes.
      const bool contiguous = sp.vector_contiguous[t] || is_packed(ann, tensors[t].name);
      loads += contiguous ? std::ceil(elems / vw) : elems;
    } else {
      loads += elems;
    }
    if (sp.guarded[t]) guarded_loads += loads - before;
  }

  const cost::MemoryLevel& l1 = hw_.levels[cost::kLevelL1];
  const double l2_bytes_per_cycle = hw_.levels[cost::kLevelL2].bandwidth_gbs / hw_.ghz();
  const double conflict_lines_per_step = l1_conflict_lines_per_step(sp, ann);

  double cycles = 0;
  double tile_cycles = 0;  // one register tile over one reduce tile
  const double fast_points = points * full;
  // A short reduction (a few taps: pooling windows, depthwise 3x3) is unrolled completely by
  // LLVM, and the loop over points around it then vectorises on its own: scalar code (register
  // tiles without a vector axis, remainder points) runs at vector speed instead of one latency-
  // bound chain per point (measured: depthwise 3x3 with 1x1 scalar register tiles 0.50 ms,
  // modelled as chains 16 ms).
  const bool llvm_vectorizes_points = m > 0 && reduce * sp.body_ops <= 32;
  const double scalar_pk = llvm_vectorizes_points
                               ? std::max(1.0 / P_fma, (loads + 1) / P_ld) * 4.0 / hw_.vector_lanes
                               : std::max(L, sp.body_ops);
  if (m > 0) {
    // FMA pipes, load ports, and the latency every accumulator chain waits per step.
    constexpr double kConflictExposed = 0.15;  // share of an L1 conflict miss not hidden
    // A vector operand read a page or more apart per step (an unpacked B of a GEMM whose rows are
    // 4 or 8 KiB long) defeats the prefetchers, which stop at page boundaries, and its set index
    // repeats every step: the step waits on L2 (measured, 6x64 tiles with B unpacked: GEMM 1024
    // 16.6 ms where packed runs 7.7, GEMM 2048 in k steps of 256 80-87 ms where packed runs 55-60).
    constexpr double kPageStrideCycles = 8;
    // Issue cycles a load behind an inlined pad's bounds test adds to a step (compares, select,
    // clamped index, on the ports the FMAs use). Fitted on ResNet 3x3 convs with the pad
    // inlined, one thread: 0.16-0.4 cycles per guarded broadcast.
    constexpr double kGuardedLoadCycles = 0.3;
    double per_step =
        std::max({acc / P_fma, loads / P_ld, L}) + 0.5 +
        kConflictExposed * conflict_lines_per_step * l1.line_bytes / l2_bytes_per_cycle +
        kPageStrideCycles * page_strided_operands(sp, ann) + kGuardedLoadCycles * guarded_loads;
    if (vw == 1 && llvm_vectorizes_points) per_step = std::min(per_step, reg_points * scalar_pk);
    cycles += fast_points * reduce / reg_points * per_step;
    tile_cycles = per_step * reduce / n_r0;
    if (vw > 1) {
      // Remainder points with a vector axis run the same vector code over what is left of the
      // tile (lower_stage.cc: rows cut short, lanes past the end masked) with the accumulators
      // in memory: per reduce step each one is loaded, updated and stored (one store a cycle),
      // and its chain waits an FMA plus a store-to-load forward. Measured, ResNet res5 3x3 with
      // 3-row tiles over 7 rows: 1.3-2 ms in all, where one scalar chain per point was 13 ms.
      constexpr double kStoreForwardCycles = 5;
      const double acc_edge = std::max(1.0, acc * edge);
      const double per_edge_step =
          std::max({acc_edge * (1 + loads / acc) / P_ld, acc_edge, L + kStoreForwardCycles}) + 0.5;
      cycles += (points - fast_points) / vw * reduce * per_edge_step / acc_edge;
    } else {
      // Remainder points: one scalar chain each, latency bound (unless vectorised, see above).
      cycles += (points - fast_points) * reduce * scalar_pk;
    }
    // Accumulators loaded/initialised and stored per register tile and R0 step: a vector load
    // and store each, or, where the output is strided along the vector axis (NCHW convolutions
    // vectorised over channels), a gather and a scatter of one element per lane. Measured, ResNet
    // res2 1x1 with 16-channel vectors: a reduce tile of 4 runs 4-14 ms, 32 1.1-1.9 ms, the whole
    // 256 0.7 ms.
    double acc_moves = acc;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].is_output && vw > 1 && sp.vector_dependent[t] && !sp.vector_contiguous[t]) {
        acc_moves = 2 * reg_points;
      }
    }
    cycles += (points / reg_points) * n_r0 * (acc_moves + 6);
  } else {
    const double per_tile = std::max(acc * sp.body_ops / P_fma, (loads + acc) / P_ld) + 2;
    cycles += fast_points / reg_points * per_tile;
    cycles += (points - fast_points) / vw * (std::max(sp.body_ops, 2.0) + 1);
  }

  // Traffic per task by reuse distance (task_traffic): L2 -> L1 and outside -> L2.
  const int line = l1.line_bytes;
  std::vector<int64_t> body(d, 1);
  for (int a = 0; a < n; ++a) body[a] = ann.tile_reg[a];
  for (int r = 0; r < m; ++r) body[n + r] = std::min(ann.tile_reduce[r], sp.extents[n + r]);
  const std::vector<TaskLoop> loops = task_loops(sp, ann);
  const double l1_cap = static_cast<double>(l1.capacity_bytes) * opts_.l1_usable;
  const double l2_cap = hw_.levels[cost::kLevelL2].capacity_bytes * opts_.l2_usable;
  // Data reused across a loop stays whole in L2 only while it takes at most about half of it:
  // the operand streaming past it, and the prefetchers running ahead of that stream, evict some
  // of the rest (measured, GEMM 2048 over the whole k with 6x64 tiles: rows swept inside columns,
  // reusing one 512 KiB B panel, run 3-8% faster than columns swept inside rows of 128-column
  // tasks, which reuse both of the task's panels, 1 MiB, and read A half as often; with all of L2
  // counted, the model ranked the second first and construct never measured the first).
  constexpr double kL2KeptShare = 0.5;
  // In L2, regions whose rows alias into a few sets do not stay even when they fit (measured, GEMM
  // 2048: 264 x 128 and 512 x 64 C blocks over k steps of 512 and 256, 0.69-0.82x torch.mm, where
  // 96 x 256 blocks run at 0.85x).
  const std::vector<double> l2_task = task_traffic(*sp.regions, body, loops, l2_cap, line, ann,
                                                   &hw_.levels[cost::kLevelL2], kL2KeptShare);
  const double q_l1 = tasks * sum(task_traffic(*sp.regions, body, loops, l1_cap, line, ann));
  const double q_l2 = tasks * sum(l2_task);
  // Every reduce tile after the first starts by loading its accumulators from the output, and
  // its FMAs wait for them: a latency on the critical path that no stream hides, paid once per
  // batch of lines a core keeps in flight; from L2 when the task's output block stays there
  // between reduce tiles, else from where L2 refills. Measured, GEMM 2048 with 6x64 tiles and
  // both operands already packed: tall tasks in k steps of 256 run 15% slower than over the whole
  // k, some 560 cycles per register tile and reduce step. This term explains less than that (the
  // rest is not understood), but it ranks the whole k first, as measured.
  constexpr double kLinesInFlight = 10;
  if (m > 0 && n_r0 > 1) {
    std::vector<int64_t> task_ext(d);
    for (int a = 0; a < n; ++a) task_ext[a] = std::min(ann.tile_outer[a], sp.extents[a]);
    for (int r = 0; r < m; ++r) task_ext[n + r] = sp.extents[n + r];
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (!tensors[t].is_output) continue;
      const double once = 2 * sp.regions->region_bytes(t, task_ext, line);
      const double refetched =
          once > 0 ? std::clamp((l2_task[t] / once - 1) / (n_r0 - 1), 0.0, 1.0) : 0.0;
      const double latency_ns = refetched * refill_level(sp).latency_ns +
                                (1 - refetched) * hw_.levels[cost::kLevelL2].latency_ns;
      cycles += (points / reg_points) * (n_r0 - 1) * std::ceil(acc / kLinesInFlight) * latency_ns *
                hw_.ghz();
    }
  }
  const int inner = n > 0 ? innermost_swept_axis(ann) : -1;
  const double cores = ann.parallel ? std::min<double>(opts_.cores, tasks) : 1.0;
  const double waves = ann.parallel ? ceil_div(tasks, opts_.cores) : tasks;
  const double per_task_share = waves / tasks;  // fraction of the total one core executes
  pr.tasks = tasks;
  pr.parallel_efficiency = ann.parallel ? tasks / (waves * opts_.cores) : 1.0 / opts_.cores;
  pr.compute_ms = cycles * per_task_share * cycle_ms();
  pr.l2_ms = q_l1 * per_task_share / (hw_.levels[cost::kLevelL2].bandwidth_gbs * 1e6);
  const double refill_bw = refill_bandwidth_gbs(sp, cores);
  pr.dram_ms = q_l2 / (refill_bw * 1e6);
  // Write-back order: register tiles visited down the rows (innermost S1 axis not the output's
  // contiguous one) write a few lines in each of many rows, one page per row, and the write
  // streams defeat the prefetchers and the TLB. Negligible behind a long reduction; behind a
  // short one the writes are the kernel (measured, 16384x32x1024 GEMM: 2.3x slower than rows
  // written in order).
  if (n > 1 && inner != n - 1) {
    for (const auto& t : tensors) {
      if (t.is_output) pr.dram_ms += 1.3 * tensor_bytes(t) / (refill_bw * 1e6);
    }
  }

  // Overheads: dispatch of the parallel loop and of each task, operand packing.
  // The runtime hands each thread one contiguous chunk of tasks: a task costs its loop overhead
  // (tile index decomposition, bounds) of a few tens of cycles, the loop one dispatch (~4 us).
  double overhead = (ann.parallel ? kDispatchMs : 0) + tasks * 30 * cycle_ms() / cores;
  // Packing is a parallel loop of its own before the compute loop: one more dispatch, the
  // operand read and written once (a tensor larger than the cores' L2 streams from outside), and
  // the panels one core packed are read by tasks on the others, through the LLC (measured, BERT
  // batch-matmuls of 0.1 ms: packing B costs 11-17 us where copy bandwidth alone says 3).
  for (const std::string& name : ann.pack) {
    for (const auto& t : tensors) {
      if (t.name != name) continue;
      const double bytes = tensor_bytes(t);
      const double l2_total =
          static_cast<double>(hw_.levels[cost::kLevelL2].capacity_bytes) * cores;
      const double bw =
          bytes > l2_total ? refill_bw : hw_.levels[cost::kLevelL2].bandwidth_gbs * cores;
      const double crossing = bytes * (cores - 1) / cores;
      overhead +=
          (ann.parallel ? kDispatchMs : 0) + 2 * bytes / (bw * 1e6) + crossing / (refill_bw * 1e6);
    }
  }
  // Panel bursts: the operands the innermost sweep reuses (a B panel) arrive while its first
  // register tile computes; what comes from outside L2 faster than the refill bandwidth of one
  // core can deliver stalls that tile. Measured, GEMM 2048 with 6x64 tiles: 96-row tasks in k
  // steps of 128 (a 32 KiB panel from the LLC per 16 tiles) run at 0.85x torch.mm, 510-row tasks
  // over the whole k (a 512 KiB panel per 85 tiles) at 0.96x.
  if (inner >= 0 && tile_cycles > 0) {
    size_t depth = 0;
    while (depth < loops.size() && loops[depth].iter != inner) ++depth;
    double sweeps = 1;
    for (size_t l = depth + 1; l < loops.size(); ++l) sweeps *= loops[l].trips;
    double panel_bytes = 0;
    for (size_t t = 0; t < tensors.size(); ++t) {
      if (!varies_along(*sp.regions, t, inner)) panel_bytes += l2_task[t] / sweeps;
    }
    const double bytes_per_cycle = refill_bandwidth_gbs(sp, 1) / hw_.ghz();
    const double stall = std::max(0.0, panel_bytes / bytes_per_cycle - tile_cycles);
    overhead += stall * sweeps * tasks * per_task_share * cycle_ms();
  }
  pr.overhead_ms = overhead;
  // Roofline max, plus a little of the rest: overlap of compute and memory is never perfect.
  // L1 refills from L2 count only as a bound: the streams they come in (panels read in order)
  // are prefetched into L1 behind the FMAs (measured: GEMM tasks streaming a 512 KiB B panel
  // from L2 per register tile are the fastest at 2048, 0.93-0.96x torch.mm).
  const double mx = std::max({pr.compute_ms, pr.l2_ms, pr.dram_ms});
  const double overlapped = std::max(pr.compute_ms, pr.dram_ms);
  pr.total_ms = mx + 0.2 * (pr.compute_ms + pr.dram_ms - overlapped) + overhead;
  return pr;
}

Prediction AnalyticModel::predict_cross_lane(const StageSpace& sp,
                                             const schedule::StageAnnotation& ann) const {
  const int n = sp.num_spatial, m = sp.num_reduce, d = sp.num_iters();
  const auto& tensors = sp.regions->tensors();
  const double L = hw_.fma_latency_cycles, P_fma = hw_.fma_ports, P_ld = hw_.load_ports;
  Prediction pr;
  double points = 1, tasks = 1;
  for (int a = 0; a < n; ++a) {
    points *= static_cast<double>(sp.extents[a]);
    tasks *= ceil_div(static_cast<double>(sp.extents[a]), static_cast<double>(ann.tile_outer[a]));
  }
  double outer_reduce = 1;
  for (int r = 0; r + 1 < m; ++r) outer_reduce *= static_cast<double>(sp.extents[n + r]);
  const double klast = m > 0 ? static_cast<double>(sp.extents[d - 1]) : 1;
  const double vw = ann.vector_width;
  const double regs = std::max(1.0, vw / sp.lanes);
  // Loads per vector step: one per register for unit-stride operands, one per lane otherwise.
  std::vector<int64_t> unit(d, 1), two(d, 1);
  if (m > 0) two[d - 1] = 2;
  double loads = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    if (tensors[t].is_output || tensors[t].epilogue) continue;
    auto a = sp.regions->region_shape(t, unit), b = sp.regions->region_shape(t, two);
    if (a == b) continue;  // invariant in the reduction: hoisted by LLVM or one broadcast
    bool contiguous = b.back() == a.back() + 1;
    loads += contiguous ? regs : vw;
  }
  const double steps = std::floor(klast / vw);
  const double per_step = std::max({regs / P_fma, loads / P_ld, L}) + 0.5;
  double per_point = outer_reduce * (steps * per_step + (klast - steps * vw) * L);
  per_point += (vw - 1) * L + 10;  // serial fold of the lanes, write-back
  const double cycles = points * per_point;

  std::vector<int64_t> l2_tile(d, 1);
  for (int a = 0; a < n; ++a) l2_tile[a] = ann.tile_outer[a];
  for (int r = 0; r < m; ++r) l2_tile[n + r] = sp.extents[n + r];
  const int line = hw_.levels[cost::kLevelL2].line_bytes;
  double q_l2 = sp.regions->traffic(l2_tile, line).total();

  const double cores = ann.parallel ? std::min<double>(opts_.cores, tasks) : 1.0;
  const double waves = ann.parallel ? ceil_div(tasks, opts_.cores) : tasks;
  pr.tasks = tasks;
  pr.parallel_efficiency = ann.parallel ? tasks / (waves * opts_.cores) : 1.0 / opts_.cores;
  pr.compute_ms = cycles * (waves / tasks) * cycle_ms();
  pr.dram_ms = q_l2 / (refill_bandwidth_gbs(sp, cores) * 1e6);
  pr.overhead_ms = (ann.parallel ? 0.004 : 0) + tasks * 30 * cycle_ms() / cores;
  const double mx = std::max(pr.compute_ms, pr.dram_ms);
  pr.total_ms = mx + 0.2 * (pr.compute_ms + pr.dram_ms - mx) + pr.overhead_ms;
  return pr;
}

}  // namespace tessera::tune::gensor
