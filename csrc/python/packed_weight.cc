#include "python/packed_weight.h"

#include <utility>

namespace tessera::python {

namespace {

// The tensor's version, or nullopt for an inference tensor (it keeps no version counter).
std::optional<int64_t> version_of(const at::Tensor& t) {
  if (t.is_inference()) return std::nullopt;
  return static_cast<int64_t>(t.unsafeGetTensorImpl()->version_counter().current_version());
}

}  // namespace

void PackedWeight::set(at::Tensor packed, const at::Tensor& source,
                       std::optional<int64_t> version) {
  std::lock_guard<std::mutex> lock(mutex_);
  packed_ = std::move(packed);
  source_ = source.storage();
  source_ptr_ = source.data_ptr();
  version_ = version;
}

std::optional<void*> PackedWeight::current(const at::Tensor& weight) const {
  const std::optional<int64_t> version = version_of(weight);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!packed_.defined() || !version || !version_ || *version != *version_ ||
      weight.data_ptr() != source_ptr_) {
    return std::nullopt;
  }
  return packed_.data_ptr();
}

}  // namespace tessera::python
