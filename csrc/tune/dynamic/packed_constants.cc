#include "tune/dynamic/packed_constants.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include "ir/dtype.h"
#include "schedule/prepack.h"
#include "util/check.h"

namespace tessera::tune::dynamic {

namespace {

constexpr int64_t kSegmentAlignment = 64;  // bytes: one cache line, one AVX-512 vector

int64_t aligned(int64_t bytes) {
  return (bytes + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
}

// What identifies a packed layout: panel width, split dimension and packed shape (a plain read
// is panel 0). Two kernels with the same key read byte-identical copies.
using LayoutKey = std::tuple<int64_t, int, std::vector<int64_t>>;

const compiler::Prepack* prepack_of(const compiler::BuiltKernel& k, int input) {
  for (const compiler::Prepack& p : k.prepacks()) {
    if (p.input == input) return &p;
  }
  return nullptr;
}

LayoutKey layout_key(const compiler::BuiltKernel& k, int input) {
  const ir::Tensor& t = k.plan().inputs.at(static_cast<size_t>(input));
  const std::optional<schedule::PrepackSite> site =
      schedule::prepack_site(k.plan(), k.schedule(), t);
  TESSERA_CHECK(site) << "kernel " << k.func().name << " reads '" << t->name
                      << "' prepacked, but the schedule has no pack site for it";
  std::vector<int64_t> shape;
  for (const ir::Expr& d : site->layout.buffer->shape) shape.push_back(d->int_value);
  return {site->layout.panel, site->layout.dim, shape};
}

int64_t plain_bytes(const compiler::BuiltKernel& k, int input) {
  const ir::Tensor& t = k.plan().inputs.at(static_cast<size_t>(input));
  int64_t n = 1;
  for (const ir::Expr& d : t->shape) {
    TESSERA_CHECK(d->is_const_int()) << "constant input '" << t->name << "' has symbolic sizes";
    n *= d->int_value;
  }
  return n * ir::dtype_bytes(t->dtype);
}

}  // namespace

PackedConstants PackedConstants::plan(const std::vector<const compiler::BuiltKernel*>& kernels,
                                      const std::vector<int>& constant_inputs) {
  PackedConstants pc;
  pc.offsets_.assign(kernels.size(), {});
  for (int input : constant_inputs) {
    const bool packed_somewhere = std::any_of(kernels.begin(), kernels.end(), [&](const auto* k) {
      return prepack_of(*k, input) != nullptr;
    });
    if (!packed_somewhere) continue;  // every kernel reads it as it is: not an argument
    PackedArgument arg;
    arg.input = input;
    std::map<LayoutKey, size_t> segment_of;  // layout -> index in arg.segments
    std::vector<size_t> kernel_segment;
    for (const compiler::BuiltKernel* k : kernels) {
      const compiler::Prepack* p = prepack_of(*k, input);
      const LayoutKey key = p ? layout_key(*k, input) : LayoutKey{0, 0, {}};
      auto it = segment_of.find(key);
      if (it == segment_of.end()) {
        PackSegment seg;
        seg.pack = p ? p->kernel : nullptr;
        seg.bytes = p ? p->kernel->arg_numels({})[1] *
                            ir::dtype_bytes(k->plan().inputs[static_cast<size_t>(input)]->dtype)
                      : plain_bytes(*k, input);
        seg.offset_bytes = arg.bytes;
        arg.bytes = aligned(arg.bytes + seg.bytes);
        it = segment_of.emplace(key, arg.segments.size()).first;
        arg.segments.push_back(std::move(seg));
      }
      kernel_segment.push_back(it->second);
    }
    const int elem =
        ir::dtype_bytes(kernels.front()->plan().inputs[static_cast<size_t>(input)]->dtype);
    arg.numel = (arg.bytes + elem - 1) / elem;
    for (size_t k = 0; k < kernels.size(); ++k) {
      pc.offsets_[k].push_back(arg.segments[kernel_segment[k]].offset_bytes);
    }
    pc.arguments_.push_back(std::move(arg));
  }
  return pc;
}

void PackedConstants::pack(int input, const void* src, void* dst) const {
  for (const PackedArgument& arg : arguments_) {
    if (arg.input != input) continue;
    for (const PackSegment& seg : arg.segments) {
      void* at = static_cast<char*>(dst) + seg.offset_bytes;
      if (seg.pack) {
        seg.pack->run({const_cast<void*>(src), at}, {});
      } else {
        std::memcpy(at, src, static_cast<size_t>(seg.bytes));
      }
    }
    return;
  }
  TESSERA_FAIL() << "input " << input << " is not read prepacked";
}

}  // namespace tessera::tune::dynamic
