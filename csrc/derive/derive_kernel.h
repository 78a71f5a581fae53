#pragma once
// The derivation pipeline of one expression, as a user meets it (tessera.op(derive=True),
// benchmarks/derive.py): EinNet's Algorithm 1 (inter-expression variants, then the
// distance-guided search), choice by measurement, and a last check of its finalists against the
// original, all compiled as they will run: the fastest derived program is kept only when its
// compiled kernel is faster than the original's, so a derivation never makes a kernel slower.
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "ir/tensor.h"
#include "runtime/measure.h"

namespace tessera::derive {

struct DeriveOptions {
  int depth = 2;               // explorative depth (SearchConfig::explorative_depth)
  double time_limit_s = 60.0;  // of the search
  std::vector<int> weights;    // positions of inputs fixed across calls (weight-only scopes)
  runtime::MeasureOptions measure;
  // How the original and the finalists (choose.h) are compiled for the last check: as the
  // kernel will be.
  compiler::TuneMode tune = compiler::TuneMode::kConstruct;
};

struct DeriveReport {
  // A derived program was chosen: verified against the original and measured faster, both
  // compiled by Tessera.
  bool found = false;
  std::vector<ir::Tensor> outputs;   // the program to compile (explicit padding): derived or not
  std::vector<ir::Tensor> original;  // the original program with explicit padding
  std::vector<std::string> rules;    // the chosen derivation's rules, in order (empty: none)
  std::string program;               // the chosen program, printed
  int derivations = 0;               // distinct derived programs the search produced
  size_t states = 0;                 // distinct states kept by the search
  size_t generated = 0;              // successor states the rules produced
  size_t pruned = 0;                 // successors dropped as repeats by fingerprint
  double pruned_share = 0;           // of the explorative stage (SearchStats)
  double search_s = 0;
  double original_ms = -1;  // the original compiled, measured
  // The fastest of choose_by_measurement's finalists, compiled, measured side by side with the
  // original (-1: none verified); kept only when it beats original_ms.
  double derived_ms = -1;
  double rel_error = -1;  // of the chosen program's check
};

// `outputs` in EinNet's form over `inputs` (constant shapes). Throws tessera::Error when the
// original does not compile.
DeriveReport derive_kernel(const std::vector<ir::Tensor>& outputs,
                           const std::vector<ir::Tensor>& inputs,
                           const DeriveOptions& options = {});

}  // namespace tessera::derive
