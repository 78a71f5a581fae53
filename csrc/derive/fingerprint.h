#pragma once
// Fingerprints of derivation states (EinNet 6.2): Tessera's structural hash of the output DAG,
// insensitive to iterator and tensor renaming and to summation order, confirmed by structural
// equality (summation iterators of the same range can collide) and by the identity of the
// program's inputs (the hash numbers placeholders by position and shape, so two same-shaped
// inputs swapped would hash alike).
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "derive/state.h"

namespace tessera::derive {

uint64_t fingerprint(const State& s);
// Same program: structurally equal outputs over the same input tensors in the same roles.
bool same_program(const State& a, const State& b);

// The visited states of a search.
class StateSet {
 public:
  // `fp` is fingerprint(s), for callers that look one state up in several sets.
  // Adds `s` unless an equal state is present; returns whether it was added.
  bool insert(const State& s) { return insert(s, fingerprint(s)); }
  bool insert(const State& s, uint64_t fp) { return insert_or_find(s, fp).first; }
  // Adds `s` unless an equal state is present; returns whether it was added and the id of the
  // state kept for it (ids count insertions from 0).
  std::pair<bool, size_t> insert_or_find(const State& s) {
    return insert_or_find(s, fingerprint(s));
  }
  std::pair<bool, size_t> insert_or_find(const State& s, uint64_t fp);
  bool contains(const State& s, uint64_t fp) const;
  size_t size() const { return size_; }
  // Hash matches that equality rejected (distinct states with one fingerprint).
  size_t collisions() const { return collisions_; }

 private:
  // The id of the state in `bucket` equal to `s`, or null.
  static const size_t* find(const std::vector<std::pair<State, size_t>>& bucket, const State& s);
  std::unordered_map<uint64_t, std::vector<std::pair<State, size_t>>> buckets_;
  size_t size_ = 0;
  size_t collisions_ = 0;
};

}  // namespace tessera::derive
