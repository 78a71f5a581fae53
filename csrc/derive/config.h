#pragma once
// The chosen constants of the derivation optimizer (EinNet), each with its meaning. Defaults
// follow the paper where it gives a value; the others are named here so that no rule or search
// step carries a bare number.
#include <cstddef>
#include <cstdint>

namespace tessera::derive {

struct DeriveConstants {
  // A scope whose FLOPs per element of the tensors it reads and writes stay below this is
  // memory-bound: it becomes an eOperator that Tessera compiles itself (EinNet 5, "4 in our
  // evaluation").
  static constexpr double kEOperatorIntensity = 4.0;
  // Distance of a scope that does not have an operator's shape at all (not a product of two
  // reads under a sum, for matmul-like operators): larger than any count of mismatches.
  static constexpr int kNoMatchDistance = 1000;
  // Summation splitting as enumerated by the search tries every subset of a scope's summation
  // iterators; scopes with more than this many are skipped (2^6 - 2 = 62 splits at the limit).
  static constexpr size_t kMaxSplitSummationIterators = 6;
  // Boundary relaxing as enumerated by the search extends a summation iterator by one point at
  // its upper end, and only while its extent is odd (an even extent can then be halved, as in
  // conv5x5 -> conv6x6 -> conv3x3); explicit calls accept any amount.
  static constexpr int64_t kRelaxStep = 1;
  // A derived program whose intermediates take more than this many times the bytes of the
  // original's inputs and outputs is not considered (a dense stand-in for a band or a
  // convolution's offsets can take gigabytes: never worth the memory traffic).
  static constexpr double kMaxIntermediateGrowth = 32.0;
  // The choice bounds a predefined operator's time by its FLOPs at this many times the probed
  // FMA peak before timing it (headroom for padding points a kernel skips and probe error): a
  // derivation whose bound does not beat the original is never compiled or timed.
  static constexpr double kOperatorPeakHeadroom = 2.0;
  // A derived G2BMM is tuned for the choice (seconds per shape) only where its derivation, with
  // the rules' schedule, is within this factor of the original: tuning seldom gains more on a
  // band product that is not already close.
  static constexpr double kMaxTuningGain = 2.0;
};

}  // namespace tessera::derive
