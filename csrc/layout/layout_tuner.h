#pragma once
// Joint tuning of layouts and loops (ALT), in two stages over one budget of measured candidates:
//   layout stage: every candidate layout assignment (templates.h, propagated) gets a short loop
//                 tuning (construct mode, `per_layout` measurements) and is scored by its best
//                 measured time; the best few layouts' kernels are then timed again together,
//                 in one paired batch (the race), since each layout's time came from its own
//                 batch, seconds apart on a machine whose speed drifts;
//   loop stage:   the race's winner gets the rest of the budget: the next candidates of the
//                 same construct-mode ranking that the layout stage did not measure, timed in
//                 one batch with the layout stage's best for that layout; the batch's best is
//                 kept.
// The chosen schedule carries its layouts (KernelSchedule::layouts, propagated ones included) and
// the tuner name "alt:<candidate>". Every measured candidate is verified against the rules'
// schedule of the same relaid DAG (the construct tuner's check), and relaid DAGs compute the same
// values as the original in their layouts (relayout.h), so a layout never changes results.
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "db/records.h"
#include "layout/relayout.h"
#include "layout/templates.h"

namespace tessera::layout {

struct LayoutTuneOptions {
  int budget = 16;     // measured candidates over both stages
  int per_layout = 3;  // measurements of each layout in the layout stage (rules' schedule included)
  uint64_t seed = 0;
  std::vector<std::string> constant_inputs;  // weights: measured prepacked, as they will run
  // The choice (layouts in the schedule's "layouts") is looked up here before tuning and stored
  // after it, under the workload's key on the target "<host>:layouts" (apart from the records
  // of the same operator in fixed layouts). Not owned; null: no records.
  db::RecordsDB* records = nullptr;
};

struct LayoutTrial {
  LayoutCandidate candidate;
  double best_ms = -1;  // best verified candidate (-1: none verified)
  int measured = 0;
  std::string error;  // why the layout could not be tuned (empty: it was)
};

// One layout in the race: its layout-stage best kernel, re-timed beside the others.
struct LayoutRaceEntry {
  std::string candidate;
  double ratio = 0;  // race time over the incumbent's (the layout stage's best); +inf: failed
};

struct LayoutTuneResult {
  LayoutCandidate chosen;
  Relaid relaid;  // the DAG in the chosen layouts (what `kernel` computes)
  compiler::CompileResult kernel;
  // The kernel's schedule with the chosen layouts (propagated ones included) and the tuner
  // "alt:<candidate>": what the records database keeps.
  schedule::KernelSchedule schedule;
  double best_ms = -1;
  std::vector<LayoutTrial> trials;  // layout stage, in candidate order
  // The race, the incumbent first (ratio 1); empty when fewer than two layouts were tuned.
  std::vector<LayoutRaceEntry> race;
  // The budget split: measurements spent per stage.
  int layout_stage_measured = 0;
  int loop_stage_measured = 0;
  bool from_records = false;  // replayed from the records database, nothing measured
};

// Tunes `candidates` (the first one is usually "fixed") for the DAG. Throws tessera::Error when
// no candidate can be tuned at all.
LayoutTuneResult tune_layouts(const std::vector<ir::Tensor>& outputs,
                              const std::vector<ir::Tensor>& inputs,
                              const std::vector<LayoutCandidate>& candidates,
                              const LayoutTuneOptions& options = {});

// Loops only, in the given layouts, with the whole budget (the fixed-layout baseline of the
// same budget when `candidate` is "fixed").
LayoutTuneResult tune_loops_only(const std::vector<ir::Tensor>& outputs,
                                 const std::vector<ir::Tensor>& inputs,
                                 const LayoutCandidate& candidate,
                                 const LayoutTuneOptions& options = {});

}  // namespace tessera::layout
