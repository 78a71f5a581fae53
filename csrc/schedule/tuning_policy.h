#pragma once
// Tuning policy: which kernels are tuned, how hard, and how much a measured win must be worth.
// The one place for these decisions; the compile call (compiler/compile.h), the backend's
// partition choices and its whole-graph check read them from here (Python through
// _C.tuning_policy()).
#include <cstdint>
#include <string>

#include "schedule/stage_plan.h"

namespace tessera::schedule {

struct TuningPolicy {
  // Graphs tuned automatically (TuneScope::kAutomatic) tune a kernel when its summing stages
  // take at least this long at the host's FMA peak: below it a tuned schedule's gain is a few
  // microseconds a call, within the per-call and timing overhead, and tuning (about a second)
  // cannot pay back. Streaming stages are bound by memory traffic and do not count.
  double min_tuned_kernel_us = 45;
  // ... and a kernel doing at least this share of its graph's summation work, down to
  // min_share_kernel_us: the graph's time is mostly that kernel's.
  double large_share = 1.0 / 3;
  double min_share_kernel_us = 10;
  // A challenger (a tuned schedule, a Tessera kernel against ATen, eager against a compiled
  // graph) replaces the incumbent only when its paired time ratio is below this (timing noise
  // must not flip a choice; runtime/paired_timing.h is the one noise rule).
  double win_margin = 0.97;
  // Kernels reading and writing fewer bytes than this, and iterating over fewer points than
  // serial_points, run on the calling thread alone: waking the other threads costs more than it
  // saves. Both must be small: a 128x256x256 matmul moves 0.5 MiB but does 8.4M multiply-adds.
  int64_t serial_bytes = 2 << 20;
  double serial_points = 1 << 20;
  // Dense matmuls/convolutions above this many flops are left to ATen's kernel unless tuning is
  // on: Tessera's default-schedule kernel loses to BLAS/oneDNN there.
  double big_anchor_flops = 16e6;
  // Construct mode in the compile call: measured top-k, Markov chains and steps per chain.
  int construct_top_k = 4;
  int construct_chains = 16;
  int construct_iterations = 60;
  // Search mode: measured candidates per kernel, per round, and the evolved population.
  int search_trials = 256;
  int search_per_round = 64;
  int search_population = 2048;
  // Where search mode measures candidates (tune/runner.h): "workers" (forked processes: a
  // crashing or hanging candidate cannot take the caller down) or "in-process".
  std::string search_runner = "workers";
  // Seconds of tuning per process; past it kernels get the default schedule (logged).
  double process_tune_budget_s = 180.0;
};

// The policy in force (the defaults above).
const TuningPolicy& tuning_policy();

// Iteration points (spatial x summation extents) of one stage; symbolic extents count as
// `symbolic_guess`.
double stage_points(const Stage& stage, int64_t symbolic_guess);
// Iteration points of the plan's stages that sum over an axis:
// the work a tuner can reorganise. Symbolic extents count as `symbolic_guess`.
double reduce_points(const StagePlan& plan, int64_t symbolic_guess);
// Iteration points of all the plan's stages (symbolic extents as `symbolic_guess`).
double total_points(const StagePlan& plan, int64_t symbolic_guess);
// Bytes the kernel reads and writes at its boundary (symbolic extents as `symbolic_guess`).
int64_t boundary_bytes(const StagePlan& plan, int64_t symbolic_guess);

}  // namespace tessera::schedule
