#pragma once
// Gensor's analytic model on the CPU: the transition benefits of the construction walk
// (Eq. 1-3 of the paper), the capacity check, and the time estimate used to rank the states the
// walk visited.
//
// Benefits (bigger = more likely):
//   tile / invTile  Eq. 1 on the current level's traffic Q and footprint F (access regions):
//                     printed:   Q(T) F(T') / (Q(T') F(T))     (as in the paper: rewards a larger
//                                                             footprint twice)
//                     corrected: Q(T) F(T) / (Q(T') F(T'))     (traffic saved per footprint spent)
//                   times, at the L2 level, the change of parallel efficiency over the cores
//                   (tasks / (waves x cores)): the paper has no compute/occupancy term.
//   cache           Eq. 2: (L_low + S/B_low) / (L_high + S/B_high), S = the current footprint,
//                   low = where the current tile's data comes from (for the L2 tile the LLC when
//                   the stage's tensors fit there, else DRAM; L2 for the L1 tile), high = the level
//                   it is cached in; times the level's utilization F(T) / capacity (the paper's
//                   "based on the current memory level's utilization"; without it the latency-bound
//                   ratio of tiny tiles sends every chain inward after a step or two).
//   setVThread      Eq. 3, CPU form: ceil(C / A) / ceil(C / A') with A, A' the independent
//                   accumulator chains before/after and C = FMA latency x FMA ports, the chains
//                   needed to keep the FMA pipes busy (the paper's x / (V W) bank-conflict ratio).
// A state that does not fit (footprint over a level's capacity, register tile over the register
// file) has benefit 0. The walk multiplies the cache benefit by the annealing factor g(t).
#include <string>

#include "cost/memory_levels.h"
#include "schedule/annotation.h"
#include "tune/gensor/etir.h"
#include "tune/gensor/stage_space.h"

namespace tessera::tune::gensor {

enum class Eq1Form { kPrinted, kCorrected };
const char* eq1_name(Eq1Form f);
Eq1Form eq1_from_name(const std::string& name);  // "printed" | "corrected"

struct ModelOptions {
  Eq1Form eq1 = Eq1Form::kPrinted;  // measured better, see benchmarks/ops.py ablation
  int cores = 1;                    // threads the kernel runs on
  double l2_usable = 1.0;           // fraction of each cache the capacity check allows
  double l1_usable = 1.0;
};

// Breakdown of a predicted stage time (ms).
struct Prediction {
  double total_ms = 0;
  double compute_ms = 0;   // register-tile FMA/ALU time (with the scalar remainders)
  double l2_ms = 0;        // L2 -> L1 traffic (a bound: streams into L1 overlap the FMAs)
  double dram_ms = 0;      // refills of L2 from outside: from the LLC when the stage's tensors
                           // fit there, else from DRAM (task traffic by reuse distance)
  double overhead_ms = 0;  // tasks, parallel dispatch, packing, panel bursts (stalls of a sweep's
                           // first register tile while its reused panel arrives from outside L2)
  double tasks = 1;        // parallel tasks
  double parallel_efficiency = 1;
};

class AnalyticModel {
 public:
  AnalyticModel(cost::MemoryHierarchy hw, ModelOptions options);

  const cost::MemoryHierarchy& hardware() const { return hw_; }
  const ModelOptions& options() const { return opts_; }

  // ---- the walk's quantities at the state's current level -----------------------------------
  // The tile over all iterators that one unit of `level` covers (reduce tiles included).
  std::vector<int64_t> level_tile(const StageSpace& sp, const EtirState& s, int level) const;
  double footprint(const StageSpace& sp, const EtirState& s, int level) const;  // F, bytes
  double traffic(const StageSpace& sp, const EtirState& s, int level) const;    // Q, bytes
  // Vector registers the register tile needs (accumulators + operand vectors + a broadcast).
  int registers_needed(const StageSpace& sp, const EtirState& s) const;
  // The same for a register tile given by its spatial extents (not for cross-lane stages), and
  // whether that tile fits the register file (with spares) and the lowering's unroll limit.
  int registers_for_tile(const StageSpace& sp, const std::vector<int64_t>& reg_tile) const;
  bool register_tile_fits(const StageSpace& sp, const std::vector<int64_t>& reg_tile) const;
  // Independent accumulator chains of the register tile.
  double accumulators(const StageSpace& sp, const EtirState& s) const;
  // Capacity check of every level reached so far.
  bool feasible(const StageSpace& sp, const EtirState& s) const;
  // Parallel efficiency of the L2 tiling: tasks / (waves * cores).
  double parallel_efficiency(const StageSpace& sp, const EtirState& s) const;
  // Do all of the stage's tensors fit in the LLC share? Then L2 misses are served from there.
  bool fits_llc(const StageSpace& sp) const;
  // Where L2 misses are served from: the LLC when the stage fits it, else DRAM.
  const cost::MemoryLevel& refill_level(const StageSpace& sp) const;
  // Bandwidth (GB/s) of that level to `cores` cores: LLC slices add up, DRAM saturates.
  double refill_bandwidth_gbs(const StageSpace& sp, double cores) const;

  // Benefit of taking `a` in `s` (0 when the result is infeasible or undefined). The annealing
  // factor is the walk's business.
  double benefit(const StageSpace& sp, const EtirState& s, const Action& a) const;
  double benefit_tile(const StageSpace& sp, const EtirState& s, const EtirState& next) const;
  double benefit_cache(const StageSpace& sp, const EtirState& s) const;
  double benefit_vthread(const StageSpace& sp, const EtirState& s, const EtirState& next) const;

  // ---- ranking ---------------------------------------------------------------------------
  // Time estimate of the stage run with annotation `ann` (what the lowering will execute).
  Prediction predict(const StageSpace& sp, const schedule::StageAnnotation& ann) const;

 private:
  Prediction predict_tiled(const StageSpace& sp, const schedule::StageAnnotation& ann) const;
  Prediction predict_cross_lane(const StageSpace& sp, const schedule::StageAnnotation& ann) const;
  // Lines per reduction step that the broadcast operand's rows miss in L1 through set conflicts.
  double l1_conflict_lines_per_step(const StageSpace& sp,
                                    const schedule::StageAnnotation& ann) const;
  // Vector operands read unpacked whose rows along the innermost reduction lie a page or more
  // apart: each reduction step starts another page, where no prefetcher follows.
  double page_strided_operands(const StageSpace& sp, const schedule::StageAnnotation& ann) const;
  double cycle_ms() const;  // one core cycle in ms

  cost::MemoryHierarchy hw_;
  ModelOptions opts_;
};

}  // namespace tessera::tune::gensor
