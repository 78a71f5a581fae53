#include "loop/race_check.h"

#include <sstream>

namespace tessera::loop {

namespace {

bool same_thread(const GpuActor& a, const GpuActor& b) {
  return a.block == b.block && a.thread == b.thread;
}

// Whether an earlier access by `other` is unordered with one by `me` (see the header).
bool unordered(const GpuActor& other, const GpuActor& me, bool global) {
  if (other.phase < 0 || same_thread(other, me)) return false;
  return other.phase == me.phase || (global && other.block != me.block);
}

std::string actor_text(const GpuActor& a) {
  return "thread " + std::to_string(a.thread) + " of block " + std::to_string(a.block);
}

}  // namespace

void GpuCheckReport::note(const std::string& message) {
  if (messages.size() < kMaxMessages) messages.push_back(message);
}

void RaceChecker::begin_block() {
  for (auto it = shadows_.begin(); it != shadows_.end();) {
    it = it->first->scope == ir::MemScope::kShared ? shadows_.erase(it) : std::next(it);
  }
}

std::vector<RaceChecker::Shadow>& RaceChecker::shadow_of(const ir::BufferNode& b, int64_t index) {
  std::vector<Shadow>& s = shadows_[&b];
  if (static_cast<int64_t>(s.size()) <= index) s.resize(static_cast<size_t>(index) + 1);
  return s;
}

void RaceChecker::access(const ir::BufferNode& b, int64_t index, bool write, const GpuActor& who) {
  const bool global = b.scope == ir::MemScope::kGlobal;
  if (!global && b.scope != ir::MemScope::kShared) return;
  Shadow& s = shadow_of(b, index)[static_cast<size_t>(index)];
  if (!write && !global && s.writer.phase < 0) {
    ++report_->uninitialized_reads;
    report_->note("uninitialized read of shared " + b.name + "[" + std::to_string(index) + "] by " +
                  actor_text(who));
  }
  if (unordered(s.writer, who, global)) {
    report(b, index, write, who, s.writer, true);
  } else if (write) {
    for (const GpuActor& r : s.readers) {
      if (unordered(r, who, global)) {
        report(b, index, write, who, r, false);
        break;
      }
    }
  }
  if (write) {
    s.writer = who;
  } else if (same_thread(s.readers[0], who)) {
    s.readers[0] = who;
  } else {
    s.readers[1] = s.readers[0];
    s.readers[0] = who;
  }
}

void RaceChecker::report(const ir::BufferNode& b, int64_t index, bool write, const GpuActor& who,
                         const GpuActor& other, bool other_wrote) {
  ++report_->races;
  std::ostringstream os;
  os << "race on " << ir::mem_scope_name(b.scope) << " " << b.name << "[" << index
     << "]: " << actor_text(who) << (write ? " writes" : " reads") << ", " << actor_text(other)
     << (other_wrote ? " wrote" : " read")
     << (other.phase == who.phase ? " in the same phase" : " (another block)");
  report_->note(os.str());
}

}  // namespace tessera::loop
