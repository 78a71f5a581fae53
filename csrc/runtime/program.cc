#include "runtime/program.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "util/check.h"

namespace tessera::runtime {

namespace {
constexpr int64_t kAlign = 64;
int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
void free_arena(std::byte* p) { std::free(p); }
}  // namespace

std::vector<int64_t> plan_arena(const std::vector<int64_t>& bytes,
                                const std::vector<std::pair<int, int>>& lifetimes, int64_t* total) {
  const size_t n = bytes.size();
  TESSERA_CHECK(lifetimes.size() == n) << "plan_arena: one lifetime per buffer";
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<int64_t> offset(n, -1);
  std::vector<size_t> placed;
  int64_t end = 0;
  for (size_t i : order) {
    // Intervals [offset, offset+size) of placed buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed) {
      bool overlap =
          lifetimes[i].first <= lifetimes[j].second && lifetimes[j].first <= lifetimes[i].second;
      if (overlap) busy.push_back({offset[j], offset[j] + align_up(bytes[j])});
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (auto [lo, hi] : busy) {
      if (at + align_up(bytes[i]) <= lo) break;
      at = std::max(at, hi);
    }
    offset[i] = at;
    end = std::max(end, at + align_up(bytes[i]));
    placed.push_back(i);
  }
  if (total) *total = end;
  return offset;
}

Program::Program(std::vector<ProgramBuffer> buffers, std::vector<ProgramStep> steps)
    : buffers_(std::move(buffers)), steps_(std::move(steps)) {
  const int nb = static_cast<int>(buffers_.size());
  for (const ProgramBuffer& b : buffers_) {
    TESSERA_CHECK(b.bytes >= 0) << "negative buffer size";
    if (b.kind == ProgramBuffer::Kind::kInput) num_inputs_ = std::max(num_inputs_, b.io_index + 1);
    if (b.kind == ProgramBuffer::Kind::kOutput)
      num_outputs_ = std::max(num_outputs_, b.io_index + 1);
  }
  // Each input and output position names exactly one buffer: a gap would leave a kernel
  // argument unset, a duplicate would make one pointer feed two buffers of different sizes.
  input_bytes_.assign(num_inputs_, -1);
  output_bytes_.assign(num_outputs_, -1);
  for (const ProgramBuffer& b : buffers_) {
    if (b.kind == ProgramBuffer::Kind::kTemp) continue;
    bool in = b.kind == ProgramBuffer::Kind::kInput;
    TESSERA_CHECK(b.io_index >= 0) << (in ? "input" : "output") << " buffer without an index";
    int64_t& slot = (in ? input_bytes_ : output_bytes_)[b.io_index];
    TESSERA_CHECK(slot < 0) << (in ? "input " : "output ") << b.io_index << " is given twice";
    slot = b.bytes;
  }
  for (int i = 0; i < num_inputs_; ++i) TESSERA_CHECK(input_bytes_[i] >= 0) << "no input " << i;
  for (int i = 0; i < num_outputs_; ++i) TESSERA_CHECK(output_bytes_[i] >= 0) << "no output " << i;

  std::vector<std::pair<int, int>> life(nb, {-1, -1});
  for (size_t s = 0; s < steps_.size(); ++s) {
    const ProgramStep& st = steps_[s];
    TESSERA_CHECK(st.kernel != nullptr) << "step " << s << " has no kernel";
    TESSERA_CHECK(st.buffers.size() == st.kernel->args().size())
        << "step " << s << " (" << st.kernel->name() << ") passes " << st.buffers.size()
        << " buffers for " << st.kernel->args().size() << " arguments";
    std::vector<int64_t> numels = st.kernel->arg_numels(st.sizes);
    for (size_t a = 0; a < st.buffers.size(); ++a) {
      int id = st.buffers[a];
      TESSERA_CHECK(id >= 0 && id < nb) << "step " << s << ": no buffer " << id;
      int64_t need = numels[a] * ir::dtype_bytes(st.kernel->args()[a].dtype);
      TESSERA_CHECK(buffers_[id].bytes >= need)
          << "step " << s << " (" << st.kernel->name() << "): buffer " << id << " has "
          << buffers_[id].bytes << " bytes, argument " << st.kernel->args()[a].name << " needs "
          << need;
      if (life[id].first < 0) life[id].first = static_cast<int>(s);
      life[id].second = static_cast<int>(s);
    }
  }
  // Arena for the intermediates only.
  std::vector<int> temps;
  std::vector<int64_t> sizes;
  std::vector<std::pair<int, int>> lifetimes;
  for (int i = 0; i < nb; ++i) {
    if (buffers_[i].kind != ProgramBuffer::Kind::kTemp) continue;
    temps.push_back(i);
    sizes.push_back(buffers_[i].bytes);
    lifetimes.push_back(life[i].first < 0 ? std::make_pair(0, 0) : life[i]);
  }
  std::vector<int64_t> off = plan_arena(sizes, lifetimes, &arena_bytes_);
  offsets_.assign(nb, -1);
  for (size_t k = 0; k < temps.size(); ++k) offsets_[temps[k]] = off[k];
  if (arena_bytes_ > 0) {
    void* p = std::aligned_alloc(kAlign, static_cast<size_t>(arena_bytes_));
    TESSERA_CHECK(p != nullptr) << "cannot allocate a " << arena_bytes_ << "-byte arena";
    arena_ =
        std::unique_ptr<std::byte[], void (*)(std::byte*)>(static_cast<std::byte*>(p), free_arena);
  }

  // The argument table: temps resolved now, inputs and outputs patched per call.
  input_slots_.resize(num_inputs_);
  output_slots_.resize(num_outputs_);
  for (const ProgramStep& st : steps_) {
    arg_begin_.push_back(args_.size());
    for (int id : st.buffers) {
      const ProgramBuffer& b = buffers_[id];
      if (b.kind == ProgramBuffer::Kind::kInput) input_slots_[b.io_index].push_back(args_.size());
      if (b.kind == ProgramBuffer::Kind::kOutput) {
        output_slots_[b.io_index].push_back(args_.size());
      }
      args_.push_back(b.kind == ProgramBuffer::Kind::kTemp ? arena_.get() + offsets_[id] : nullptr);
    }
  }
}

int64_t Program::temp_bytes() const {
  int64_t t = 0;
  for (const ProgramBuffer& b : buffers_) {
    if (b.kind == ProgramBuffer::Kind::kTemp) t += align_up(b.bytes);
  }
  return t;
}

void Program::run(const std::vector<void*>& inputs, const std::vector<void*>& outputs) {
  TESSERA_CHECK(static_cast<int>(inputs.size()) == num_inputs_)
      << "program takes " << num_inputs_ << " inputs, got " << inputs.size();
  TESSERA_CHECK(static_cast<int>(outputs.size()) == num_outputs_)
      << "program takes " << num_outputs_ << " outputs, got " << outputs.size();
  run_raw(inputs.data(), outputs.data());
}

void Program::run_raw(void* const* inputs, void* const* outputs) {
  // Null is fine only for an empty buffer, which no kernel dereferences.
  for (int i = 0; i < num_inputs_; ++i) {
    TESSERA_CHECK(inputs[i] != nullptr || input_bytes_[i] == 0) << "input " << i << " is null";
  }
  for (int i = 0; i < num_outputs_; ++i) {
    TESSERA_CHECK(outputs[i] != nullptr || output_bytes_[i] == 0) << "output " << i << " is null";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (int i = 0; i < num_inputs_; ++i) {
    for (size_t slot : input_slots_[i]) args_[slot] = inputs[i];
  }
  for (int i = 0; i < num_outputs_; ++i) {
    for (size_t slot : output_slots_[i]) args_[slot] = outputs[i];
  }
  static const int64_t kNoSizes = 0;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const ProgramStep& st = steps_[s];
    st.kernel->run_unchecked(args_.data() + arg_begin_[s],
                             st.sizes.empty() ? &kNoSizes : st.sizes.data());
  }
}

}  // namespace tessera::runtime
