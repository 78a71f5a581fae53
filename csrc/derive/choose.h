#pragma once
// Choice by measurement (EinNet 6.1 "delayed code generation", 6.3): each derived program is
// costed as the sum of its scopes: predefined operators timed as Tessera kernels (ops::matmul /
// ops::batch_matmul over the matched shapes), eOperators estimated from the bytes they move at
// the machine's memory bandwidth (plus the layout eOperators a match needs on activations),
// compile-time scopes free. Candidates are then tried cheapest first: a derived program is
// compiled with Tessera and must compute the original's values on random inputs before it can
// be chosen, and it is chosen only when it is estimated faster than the original program,
// which is compiled and timed as a whole. The first few verified ones are the finalists that
// derive_kernel times as whole programs.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "derive/search.h"
#include "runtime/measure.h"

namespace tessera::derive {

struct ChoiceConfig {
  double bandwidth_gbs = 0;  // memory bandwidth for eOperators (0: the measured peak, all cores)
  runtime::MeasureOptions measure;
  uint64_t seed = 1;             // random inputs of the numeric check
  double tolerance = 1e-4;       // max |derived - original| / max |original|
  size_t max_verifications = 8;  // derived programs compiled and checked at most
  // Verified programs kept as finalists, cheapest estimate first: derivations that share their
  // timed operator differ only in eOperators, which the estimate ranks by bytes and not by the
  // strides they leave, so the last check times several whole programs side by side.
  size_t finalists = 3;
  // How G2BMM operators (derived scopes compiled by Tessera) are tuned for their timing: as the
  // chosen program will be compiled (DeriveOptions::tune).
  compiler::TuneMode tune = compiler::TuneMode::kDefault;
  // The bar every estimate must pass where the caller sets one; <= 0: the original timed here
  // with the rules' schedule, the basis the operators' timings share (a tuned original against
  // untuned operators would reject derivations that win once tuned).
  double original_ms = -1;
};

struct DerivationCost {
  // Timed predefined operators; for a derivation whose bound (operators at the FMA peak) does
  // not beat the original, that bound, untimed.
  double operator_ms = 0;
  bool operators_timed = false;
  double eoperator_ms = 0;  // estimated memory-bound scopes
  double total_ms() const { return operator_ms + eoperator_ms; }
  bool verified = false;  // compiled, run, equal to the original (only for those tried)
  double rel_error = -1;  // of the check (-1: not checked)
  std::string error;      // why the check failed
};

struct Choice {
  int chosen = -1;  // index into the search's derivations; -1 keeps the original program
  // The verified derivations estimated faster than the original, cheapest first (chosen is the
  // first), at most ChoiceConfig::finalists.
  std::vector<int> finalists;
  double original_ms = -1;
  std::vector<DerivationCost> costs;  // per derivation
};

// Reads outside a tensor's shape made explicit (a select of the read where it is inside, else the
// pad value), so the program compiles to code that never leaves a buffer.
State explicit_padding(const State& s);

// Whether a matched operator runs as a predefined Tessera kernel (matmul, batch matmul, conv2d,
// and G2BMM: the scope's own kernel) and is timed; elementwise scopes are costed like eOperators.
bool has_predefined_kernel(OperatorKind k);
// Median time of the matched operator as a Tessera kernel (ops::matmul, ops::batch_matmul or
// ops::conv2d over fresh inputs of the matched shapes; a G2BMM scope compiled alone, its compute
// inputs given).
double time_operator(const OperatorMatch& m, const runtime::MeasureOptions& options,
                     compiler::TuneMode tune = compiler::TuneMode::kDefault);
// Bytes read and written by a scope at the given bandwidth.
double estimate_eoperator_ms(const ir::Tensor& scope, double bandwidth_gbs);

Choice choose_by_measurement(const State& original, const SearchResult& result,
                             const DeriveContext& ctx, const ChoiceConfig& config = {});

// Compiles the state's program into one Tessera kernel (with explicit padding, tuned by `tune`),
// runs it on `inputs` and returns its outputs; with `time_ms`, also its median time.
std::vector<runtime::NDArray> run_compiled(
    const State& s, const std::map<const ir::TensorNode*, runtime::NDArray>& inputs,
    double* time_ms = nullptr, const runtime::MeasureOptions& options = {},
    compiler::TuneMode tune = compiler::TuneMode::kDefault);

}  // namespace tessera::derive
