// RecordsDB: the policy layer over SqliteStore. It decides what happens when the file is locked,
// damaged, unwritable or of another version, and keeps records in memory whenever they cannot go
// to the file, so the compile path always gets an answer and never an exception.
#include "db/records.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>

#include "cost/peak_probe.h"
#include "db/db_files.h"
#include "db/schedule_names.h"
#include "db/sqlite_store.h"

namespace tessera::db {

using Clock = std::chrono::steady_clock;

const char* mode_name(RecordsDB::Mode mode) {
  switch (mode) {
    case RecordsDB::Mode::kDisk:
      return "disk";
    case RecordsDB::Mode::kReadOnly:
      return "read-only";
    case RecordsDB::Mode::kMemory:
      return "memory";
  }
  return "?";
}

struct RecordsDB::Impl {
  enum class Access { kRead, kWrite };

  // Something kept in memory: because the file cannot take it now (pending), or at all.
  template <typename T>
  struct Held {
    T item;
    bool pending;  // to be written to the file once it is free
  };

  std::string path;
  RecordsDBOptions opts;
  mutable std::mutex mu;
  Mode mode = Mode::kMemory;
  std::unique_ptr<SqliteStore> store;
  bool ready = false;      // store checked and schema prepared
  bool repaired = false;   // at most one repair per object: damage after it is something else
  bool immutable = false;  // read-only store opened without locks (last read-only resort)
  // After a lock timeout the file is skipped until these times: writes only, when a writer held
  // it (WAL readers still get through); reads as well, when even reading timed out.
  Clock::time_point write_retry_at{};
  Clock::time_point read_retry_at{};
  bool lock_warned = false;  // one warning per lock episode
  pid_t pid = 0;
  std::vector<Held<Record>> memory;
  std::vector<Held<Measurement>> measurements;
  std::vector<Held<ModelBlob>> models;  // at most one per (name, target, feature version)
  RecordsDBStats stats;
  std::deque<std::string> warnings;  // not yet taken by take_warnings()

  ~Impl() {
    std::lock_guard<std::mutex> guard(mu);
    if (pid != getpid()) return;  // a forked child leaves its parent's records to the parent
    const size_t pending = count_pending();
    if (pending == 0) return;
    write_retry_at = read_retry_at = Clock::time_point{};  // a last try, even in a cool-down
    if (!write_pending()) {
      warn(std::to_string(pending) +
           " new tuning record(s), measurement(s) or cost model(s) could not be written (the file "
           "stayed locked); they are lost");
    }
  }

  void warn(const std::string& msg) {
    const std::string text = "records database " + path + ": " + msg;
    if (opts.warn_to_stderr) {
      const std::string line = "tessera: warning: " + text + "\n";
      std::fputs(line.c_str(), stderr);  // one call: lines of concurrent processes do not mix
    }
    constexpr size_t kKeptWarnings = 32;
    if (warnings.size() == kKeptWarnings) warnings.pop_front();
    warnings.push_back(text);
  }

  void to_memory(const std::string& reason) {
    if (store) store.reset();
    ready = false;
    mode = Mode::kMemory;
    keep_in_memory();
    warn(reason + "; tuning records are kept in memory for this process");
  }

  void connect() {
    pid = getpid();
    if (path == ":memory:") {
      mode = Mode::kMemory;
      return;
    }
    if (path.empty()) {
      to_memory("no location (neither $TESSERA_RECORDS_DB nor a cache directory is set)");
      return;
    }
    open_file();
    if (store) prepare();
  }

  void open_file() {
    std::string dir_error;
    make_parent_dir(path, &dir_error);  // a failure shows up as CANTOPEN just below
    try {
      store = std::make_unique<SqliteStore>(path, SqliteStore::Access::kReadWrite,
                                            opts.busy_timeout_ms);
      mode = Mode::kDisk;
      return;
    } catch (const SqliteError& e) {
      if (e.is_unwritable() && file_exists(path) && open_read_only(e.what())) return;
      to_memory(std::string("cannot open it (") + e.what() +
                (dir_error.empty() ? "" : "; " + dir_error) + ")");
    }
  }

  // Read-only access to a file this process cannot write. First with locks shared with writers;
  // when that cannot work either (WAL needs its index file next to the database, which a
  // read-only directory does not allow), as an immutable file.
  bool open_read_only(const std::string& reason) {
    store.reset();
    ready = false;
    const SqliteStore::Access access =
        mode == Mode::kReadOnly ? SqliteStore::Access::kImmutable : SqliteStore::Access::kReadOnly;
    try {
      store = std::make_unique<SqliteStore>(path, access, opts.busy_timeout_ms);
    } catch (const SqliteError&) {
      return false;
    }
    if (mode != Mode::kReadOnly) {
      warn("not writable (" + reason +
           "); reading it, new records are kept in memory for this process");
    }
    mode = Mode::kReadOnly;
    immutable = access == SqliteStore::Access::kImmutable;
    keep_in_memory();
    return true;
  }

  // Integrity check and schema; any failure goes through handle().
  void prepare() {
    try {
      if (opts.quick_check) store->check_integrity();
      switch (store->prepare_schema()) {
        case SqliteStore::Schema::kReady:
          ready = true;
          return;
        case SqliteStore::Schema::kNewer:
          to_memory("written by a newer Tessera (schema version above " +
                    std::to_string(kSchemaVersion) + "), left untouched");
          return;
        case SqliteStore::Schema::kForeign:
          to_memory("not a Tessera records database, left untouched");
          return;
        case SqliteStore::Schema::kMissing:
          to_memory("read-only and empty");
          return;
      }
    } catch (const SqliteError& e) {
      handle(e, "open it", Access::kRead);
    } catch (const std::exception& e) {
      to_memory(std::string("unexpected error while opening it (") + e.what() + ")");
    }
  }

  // Reacts to a failed operation. True when the operation should be tried again right away
  // (the file was repaired).
  bool handle(const SqliteError& e, const char* what, Access access) {
    if (e.is_busy()) {
      ++stats.lock_timeouts;
      const Clock::time_point until = Clock::now() + std::chrono::milliseconds(opts.retry_after_ms);
      write_retry_at = until;
      if (access == Access::kRead) read_retry_at = until;
      if (!lock_warned) {
        warn(std::string("locked by another process (waited ") +
             std::to_string(opts.busy_timeout_ms) + " ms to " + what +
             "); lookups miss and new records are kept in memory until it is free");
        lock_warned = true;
      }
      return false;
    }
    if (e.is_corrupt()) {
      if (repaired) {
        to_memory(std::string("still damaged after a repair (") + e.what() + ")");
        return false;
      }
      repair(e.what());
      return ready;
    }
    if (e.is_unwritable() && (mode == Mode::kDisk || (mode == Mode::kReadOnly && !immutable))) {
      if (open_read_only(e.what())) {
        prepare();
        return ready && access == Access::kRead;  // a read can go on read-only
      }
      to_memory(std::string("cannot write it (") + e.what() + ")");
      return false;
    }
    to_memory(std::string("error while trying to ") + what + " (" + e.what() + ")");
    return false;
  }

  bool still_damaged() const {
    try {
      SqliteStore probe(path, SqliteStore::Access::kReadWrite, opts.busy_timeout_ms);
      probe.check_integrity();
      return false;
    } catch (const SqliteError& e) {
      return e.is_corrupt();
    }
  }

  void repair(const std::string& reason) {
    store.reset();
    ready = false;
    repaired = true;
    RepairLock lock(path, opts.busy_timeout_ms);
    if (!lock.held()) {
      to_memory("damaged (" + reason + ") and the repair lock " + path + ".lock is unavailable");
      return;
    }
    // Another process may have repaired it while this one waited for the lock.
    if (still_damaged()) {
      std::string error;
      const std::string moved = move_aside(path, &error);
      if (moved.empty()) {
        to_memory("damaged (" + reason + ") and cannot be moved aside (" + error + ")");
        return;
      }
      ++stats.repairs;
      warn("damaged (" + reason + "); moved it to " + moved +
           " and started a fresh database (tuning records will be collected again)");
    }
    open_file();
    if (store) prepare();
  }

  // Whether the file can be used now (reconnecting after fork() or after a cool-down).
  bool usable(Access access) {
    if (pid != getpid()) after_fork();
    if (mode == Mode::kMemory) return false;
    const Clock::time_point now = Clock::now();
    if (now < read_retry_at || (access == Access::kWrite && now < write_retry_at)) return false;
    if (!store) open_file();
    if (store && !ready) prepare();
    return store && ready;
  }

  // SQLite connections must not cross fork(): the child opens its own, and leaves the parent's
  // pending records to the parent.
  void after_fork() {
    if (store) store->abandon();
    store.reset();
    ready = false;
    pid = getpid();
    drop_pending(&memory);
    drop_pending(&measurements);
    drop_pending(&models);
  }

  template <typename T>
  static size_t pending_in(const std::vector<Held<T>>& held) {
    size_t n = 0;
    for (const Held<T>& h : held) n += h.pending;
    return n;
  }
  size_t count_pending() const {
    return pending_in(memory) + pending_in(measurements) + pending_in(models);
  }

  // Nothing held goes to the file any more (the file is read-only or given up).
  void keep_in_memory() {
    for (auto& h : memory) h.pending = false;
    for (auto& h : measurements) h.pending = false;
    for (auto& h : models) h.pending = false;
  }

  template <typename T>
  static void drop_pending(std::vector<Held<T>>* held) {
    std::vector<Held<T>> kept;
    for (Held<T>& h : *held) {
      if (!h.pending) kept.push_back(std::move(h));
    }
    *held = std::move(kept);
  }

  template <typename F>
  bool run(const char* what, Access access, const F& f) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!usable(access)) return false;
      try {
        f();
        lock_warned = false;
        return true;
      } catch (const SqliteError& e) {
        if (!handle(e, what, access)) return false;
      } catch (const std::exception& e) {
        to_memory(std::string("unexpected error while trying to ") + what + " (" + e.what() + ")");
        return false;
      }
    }
    return false;
  }

  // Writes the pending items of `held` with `write` (one transaction per call), then forgets
  // them. False when they stay pending.
  template <typename T, typename Write>
  bool write_held(std::vector<Held<T>>* held, const char* what, const Write& write) {
    std::vector<T> batch;
    for (const Held<T>& h : *held) {
      if (h.pending) batch.push_back(h.item);
    }
    if (batch.empty()) return true;
    if (!run(what, Access::kWrite, [&] { write(&batch); })) return false;
    drop_pending(held);
    return true;
  }

  // Writes every pending record, measurement and model; true when nothing is left pending.
  bool write_pending() {
    if (mode != Mode::kDisk) return false;
    bool all =
        write_held(&memory, "save records", [&](std::vector<Record>* b) { store->insert(b); });
    all = write_held(&measurements, "save measurements",
                     [&](std::vector<Measurement>* b) { store->insert_measurements(b); }) &&
          all;
    all = write_held(&models, "save a cost model",
                     [&](std::vector<ModelBlob>* b) {
                       for (const ModelBlob& m : *b) store->put_model(m);
                     }) &&
          all;
    return all && mode == Mode::kDisk;
  }
};

RecordsDB::RecordsDB(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RecordsDB::RecordsDB(RecordsDB&&) noexcept = default;
RecordsDB& RecordsDB::operator=(RecordsDB&&) noexcept = default;
RecordsDB::~RecordsDB() = default;

std::string RecordsDB::default_path() {
  if (const char* p = std::getenv("TESSERA_RECORDS_DB"); p && *p) return p;
  const std::string dir = cost::tessera_cache_dir();
  return dir.empty() ? "" : dir + "/records.db";
}

RecordsDB RecordsDB::open(const std::string& path, const RecordsDBOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path.empty() ? default_path() : path;
  impl->opts = options;
  {
    std::lock_guard<std::mutex> guard(impl->mu);
    try {
      impl->connect();
    } catch (const std::exception& e) {
      impl->to_memory(std::string("unexpected error while opening it (") + e.what() + ")");
    }
  }
  return RecordsDB(std::move(impl));
}

std::optional<Record> RecordsDB::best(const WorkloadKey& key) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  ++d.stats.lookups;
  std::optional<Record> found;
  bool collision = false;
  d.run("look up a record", Impl::Access::kRead, [&] { found = d.store->best(key, &collision); });
  if (collision) ++d.stats.collisions;
  for (const auto& h : d.memory) {
    if (record_matches(h.item, key) && (!found || record_better(h.item, *found))) {
      found = h.item;
    }
  }
  if (!found) return std::nullopt;
  ++d.stats.hits;
  found->schedule_json = schedule_from_canonical(key, found->schedule_json);
  return found;
}

bool RecordsDB::put(const Record& record) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  ++d.stats.puts;
  d.memory.push_back({record, d.mode == Mode::kDisk});
  if (d.write_pending()) return true;
  ++d.stats.put_deferred;
  return false;
}

bool RecordsDB::flush() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  return d.write_pending();
}

std::vector<Record> RecordsDB::all(const RecordFilter& filter) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  std::vector<Record> out;
  d.run("list records", Impl::Access::kRead, [&] { out = d.store->select(filter); });
  for (const auto& h : d.memory) {
    if (filter.limit > 0 && static_cast<int64_t>(out.size()) >= filter.limit) break;
    if (record_matches(h.item, filter)) out.push_back(h.item);
  }
  return out;
}

int64_t RecordsDB::count() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  int64_t n = 0;
  d.run("count records", Impl::Access::kRead, [&] { n = d.store->count(); });
  return n + static_cast<int64_t>(d.memory.size());
}

bool RecordsDB::put_measurements(const std::vector<Measurement>& measurements) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  for (const Measurement& m : measurements) {
    d.measurements.push_back({m, d.mode == Mode::kDisk});
  }
  return d.write_pending();
}

std::vector<Measurement> RecordsDB::measurements(const WorkloadKey& key, const std::string& tuner) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  std::vector<Measurement> out;
  d.run("read measurements", Impl::Access::kRead,
        [&] { out = d.store->select_measurements(key, tuner); });
  for (const auto& h : d.measurements) {
    if (measurement_matches(h.item, key, tuner)) out.push_back(h.item);
  }
  for (Measurement& m : out) m.schedule_json = schedule_from_canonical(key, m.schedule_json);
  return out;
}

int64_t RecordsDB::count_measurements() {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  int64_t n = 0;
  d.run("count measurements", Impl::Access::kRead, [&] { n = d.store->count_measurements(); });
  return n + static_cast<int64_t>(d.measurements.size());
}

bool RecordsDB::put_model(const ModelBlob& model) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  auto same = [&](const auto& h) {
    return h.item.name == model.name && h.item.target == model.target &&
           h.item.feature_version == model.feature_version;
  };
  d.models.erase(std::remove_if(d.models.begin(), d.models.end(), same), d.models.end());
  d.models.push_back({model, d.mode == Mode::kDisk});
  return d.write_pending();
}

std::optional<ModelBlob> RecordsDB::model(const std::string& name, const std::string& target,
                                          int feature_version) {
  Impl& d = *impl_;
  std::lock_guard<std::mutex> guard(d.mu);
  for (const auto& h : d.models) {  // this process's is the newest
    if (h.item.name == name && h.item.target == target &&
        h.item.feature_version == feature_version) {
      return h.item;
    }
  }
  std::optional<ModelBlob> found;
  d.run("read a cost model", Impl::Access::kRead,
        [&] { found = d.store->get_model(name, target, feature_version); });
  return found;
}

const std::string& RecordsDB::path() const { return impl_->path; }

RecordsDB::Mode RecordsDB::mode() const {
  std::lock_guard<std::mutex> guard(impl_->mu);
  return impl_->mode;
}

RecordsDBStats RecordsDB::stats() const {
  std::lock_guard<std::mutex> guard(impl_->mu);
  return impl_->stats;
}

std::vector<std::string> RecordsDB::take_warnings() {
  std::lock_guard<std::mutex> guard(impl_->mu);
  std::vector<std::string> out(impl_->warnings.begin(), impl_->warnings.end());
  impl_->warnings.clear();
  return out;
}

}  // namespace tessera::db
