#include "derive/fingerprint.h"

#include "ir/structural_hash.h"

namespace tessera::derive {

uint64_t fingerprint(const State& s) { return ir::structural_hash(s.outputs); }

bool same_program(const State& a, const State& b) {
  const std::vector<ir::Tensor> pa = ir::collect_dag(a.outputs).placeholders;
  const std::vector<ir::Tensor> pb = ir::collect_dag(b.outputs).placeholders;
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) {
    if (pa[i].get() != pb[i].get()) return false;
  }
  return ir::structural_equal(a.outputs, b.outputs);
}

const size_t* StateSet::find(const std::vector<std::pair<State, size_t>>& bucket, const State& s) {
  for (const auto& [other, id] : bucket) {
    if (same_program(s, other)) return &id;
  }
  return nullptr;
}

std::pair<bool, size_t> StateSet::insert_or_find(const State& s, uint64_t fp) {
  std::vector<std::pair<State, size_t>>& bucket = buckets_[fp];
  if (const size_t* id = find(bucket, s)) return {false, *id};
  if (!bucket.empty()) ++collisions_;
  bucket.push_back({s, size_});
  return {true, size_++};
}

bool StateSet::contains(const State& s, uint64_t fp) const {
  auto it = buckets_.find(fp);
  return it != buckets_.end() && find(it->second, s) != nullptr;
}

}  // namespace tessera::derive
