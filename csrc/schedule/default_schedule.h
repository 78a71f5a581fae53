#pragma once
// A sensible schedule for every stage before any tuning: register-blocked multi-level tiling for
// reductions with operand reuse (matmul, conv), cross-lane reduction for row reductions
// (softmax, norms), vectorised parallel loops for injective ops.
#include <cstdint>

#include "schedule/annotation.h"
#include "schedule/stage_plan.h"

namespace tessera::schedule {

// What the schedule heuristics need to know about the machine.
struct Target {
  int vector_lanes = 16;  // fp32 lanes of one SIMD register
  int num_vector_registers = 32;
  int num_threads = 1;
  int64_t l1_bytes = 32 * 1024;    // per core
  int64_t l2_bytes = 1024 * 1024;  // per core
  static Target host();            // probed (cache sizes, ISA, thread pool size)
};

KernelSchedule default_schedule(const StagePlan& plan, const Target& target);
// Whether the stage, given its rules' annotation `rules` (default_stage_annotation), is a
// transposing copy (its vector lanes gather from an input whose innermost dim another axis
// walks): the rules block it and, where they can, transpose lanes x lanes tiles in registers;
// models that count gathered lines misjudge it.
bool is_transposing_copy(const Stage& stage, const StagePlan& plan, const StageAnnotation& rules);
StageAnnotation default_stage_annotation(const Stage& stage, const StagePlan& plan,
                                         const Target& target);

// How a stage's accesses relate to its axes; the sketch rules and later tuners read this.
struct AccessPattern {
  int vector_axis = -1;            // the candidate vector axis analysed
  int row_axis = -1;               // spatial axis along which vector-loaded operands are reused
  bool reduce_contiguous = false;  // the last reduce axis is some input's innermost index
  // Reads that depend on the last reduce axis other than by walking their innermost dim with it:
  // they become gathers when that axis is on the vector lanes (cross-lane reduction).
  int reduce_gathers = 0;
  std::vector<std::string> packable;  // inputs indexed by the vector axis in one dim, with reuse
  // Reads that depend on the vector axis and are neither packable nor walk their innermost dim
  // with it: they become gathers in vector code.
  int gathers = 0;
};
// Does some access in `body` walk its innermost dimension one element per step of `v`
// (x[v], or x[q * c + v] after a split)?
bool reads_innermost_along(const ir::Expr& body, const ir::Var& v);

// Analysis for vectorising along spatial axis `vector_axis` (-1: the output's innermost axis).
AccessPattern analyze_access_pattern(const Stage& stage, const StagePlan& plan,
                                     int vector_axis = -1);

// Register tile (rows x vectors) for a register-blocked stage, by a port-pressure model.
struct RegisterTile {
  int64_t rows = 1;
  int64_t vectors = 1;
  double cost = 0;  // estimated cycles per output point and reduction step
};
RegisterTile choose_register_tile(int64_t row_extent, int64_t vec_extent, const Target& target);

// Unrolls the inner reduce loop of a register-blocked stage: 4 steps per group once its tile
// has 16 or more (a GEMM's K), 2 when it is shorter (a convolution window's width) and the
// register tile leaves registers for the unrolled steps' operands (16 accumulators at most). Every
// unrolled group opens with prefetch hints (tile_prefetch.h): the next register tiles' operands
// are hinted while this one computes.
void unroll_inner_reduce(StageAnnotation& ann);

}  // namespace tessera::schedule
