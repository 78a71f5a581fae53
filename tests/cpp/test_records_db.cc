// Tuning-records database: workload keys, canonical text, schedule name translation, and the
// SQLite file under concurrent processes, damage, locks and unwritable locations.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <thread>

#include "db/canonical_text.h"
#include "db/records.h"
#include "db/schedule_names.h"
#include "db/workload_key.h"
#include "e2e_harness.h"
#include "ir/structural_hash.h"
#include "ops/ops.h"
#include "temp_dir.h"
#include "util/json.h"

#ifdef TESSERA_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace tessera {
namespace {

namespace fs = std::filesystem;
using db::Record;
using db::RecordsDB;
using db::WorkloadKey;

struct Workload {
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor> inputs;
};

// relu(A @ B) with every tensor name prefixed, so that two calls differ only by names.
Workload matmul_relu(const std::string& prefix, int64_t m, int64_t n, int64_t k) {
  ir::Tensor a = ir::placeholder(prefix + "A", {m, k});
  ir::Tensor b = ir::placeholder(prefix + "B", {k, n});
  ir::Tensor c = ops::relu(ops::matmul(a, b, false, false, prefix + "mm"), prefix + "relu");
  return {{c}, {a, b}};
}

// out[i] = sum over (p, q) of X[i, p, q] * W[p, q]; `swap` lists the summation iterators in the
// other order (same computation, different reduce_axes order).
Workload two_axis_reduce(const std::string& prefix, bool swap) {
  ir::Tensor x = ir::placeholder(prefix + "X", {8, 3, 5});
  ir::Tensor w = ir::placeholder(prefix + "W", {3, 5});
  ir::Tensor out;
  if (!swap) {
    out = ir::reduce(prefix + "out", {8}, {3, 5}, ir::ReduceKind::kSum,
                     [&](const std::vector<ir::Var>& i, const std::vector<ir::Var>& r) {
                       return ir::access(x, {i[0], r[0], r[1]}) * ir::access(w, {r[0], r[1]});
                     });
  } else {
    out = ir::reduce(prefix + "out", {8}, {5, 3}, ir::ReduceKind::kSum,
                     [&](const std::vector<ir::Var>& i, const std::vector<ir::Var>& r) {
                       return ir::access(x, {i[0], r[1], r[0]}) * ir::access(w, {r[1], r[0]});
                     });
  }
  return {{out}, {x, w}};
}

WorkloadKey key_of(const Workload& w, const std::string& target = "cpu:test:threads=1") {
  return db::make_workload_key(w.outputs, w.inputs, target);
}

const char* kSchedule = R"({"stages":[],"tuner":"test"})";

Record record_for(const WorkloadKey& key, std::optional<double> ms,
                  const std::string& tuner = "t") {
  return db::make_record(key, kSchedule, tuner, ms,
                         ms ? std::optional<double>(1.0 / *ms) : std::nullopt, 7);
}

db::RecordsDBOptions fast_options() {
  db::RecordsDBOptions o;
  o.busy_timeout_ms = 100;
  o.retry_after_ms = 50;
  return o;
}

// Runs `body` in a child process; the child's exit status is 0 when it returned true.
pid_t spawn(const std::function<bool()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body() ? 0 : 1;
    } catch (...) {
      rc = 2;
    }
    ::_exit(rc);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> files_matching(const std::string& dir, const std::string& pattern) {
  std::vector<std::string> out;
  const std::regex re(pattern);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (std::regex_match(e.path().filename().string(), re)) out.push_back(e.path().string());
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// ---- keys and canonical text ------------------------------------------------------------------

TEST(WorkloadKey, RenamedWorkloadHasTheSameKey) {
  WorkloadKey a = key_of(matmul_relu("x_", 64, 32, 16));
  WorkloadKey b = key_of(matmul_relu("other_", 64, 32, 16));
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.shapes, b.shapes);
  EXPECT_EQ(a.canonical, b.canonical);
  EXPECT_TRUE(a.same_workload(b));
  EXPECT_EQ(a.shapes, "float32[64,16];float32[16,32]->float32[64,32]");
  // The names of the workload are kept for schedule translation, not in the key.
  EXPECT_EQ(a.canonical.find("x_"), std::string::npos);
  EXPECT_NE(std::find(a.tensor_names.begin(), a.tensor_names.end(), "x_mm"), a.tensor_names.end());
}

TEST(WorkloadKey, SummationOrderDoesNotMatter) {
  Workload w1 = two_axis_reduce("a", false), w2 = two_axis_reduce("b", true);
  ASSERT_TRUE(ir::structural_equal(w1.outputs, w2.outputs));
  WorkloadKey a = key_of(w1), b = key_of(w2);
  EXPECT_TRUE(a.same_workload(b)) << a.canonical << "\nvs\n" << b.canonical;
}

TEST(WorkloadKey, DifferentShapesOrTargetsDiffer) {
  WorkloadKey base = key_of(matmul_relu("", 64, 32, 16));
  WorkloadKey other_k = key_of(matmul_relu("", 64, 32, 32));
  EXPECT_NE(base.shapes, other_k.shapes);
  EXPECT_NE(base.canonical, other_k.canonical);
  EXPECT_FALSE(base.same_workload(other_k));
  WorkloadKey other_target = key_of(matmul_relu("", 64, 32, 16), "cpu:test:threads=4");
  EXPECT_FALSE(base.same_workload(other_target));
  EXPECT_EQ(base.canonical, other_target.canonical);
}

TEST(WorkloadKey, CanonicalTextAgreesWithStructuralEquality) {
  // Same shapes and names, different index patterns, constants, input order or size ranges: the
  // reference is ir::structural_equal, computed independently of the canonical printer.
  auto mm = [](bool trans_b) {
    ir::Tensor a = ir::placeholder("A", {16, 16}), b = ir::placeholder("B", {16, 16});
    return Workload{{ops::matmul(a, b, false, trans_b)}, {a, b}};
  };
  auto scaled = [](double s) {
    ir::Tensor a = ir::placeholder("A", {16});
    ir::Tensor o = ir::compute("o", {16}, [&](const std::vector<ir::Var>& i) {
      return ir::access(a, {i[0]}) * ir::Expr(s);
    });
    return Workload{{o}, {a}};
  };
  auto dynamic = [](int64_t hi) {
    ir::Var m = ir::size_var("M", 1, hi);
    ir::Tensor a = ir::placeholder("A", {m, 8});
    return Workload{{ops::relu(a)}, {a}};
  };
  // The same tree with and without shared nodes (x * x from one access node, or from two).
  auto square = [](bool share) {
    ir::Tensor a = ir::placeholder("A", {16});
    ir::Tensor o = ir::compute("o", {16}, [&](const std::vector<ir::Var>& i) {
      ir::Expr x = ir::access(a, {i[0]});
      return share ? ir::exp(x * x) + x
                   : ir::exp(ir::access(a, {i[0]}) * ir::access(a, {i[0]})) + ir::access(a, {i[0]});
    });
    return Workload{{o}, {a}};
  };
  std::vector<std::pair<Workload, Workload>> pairs = {
      {square(true), square(false)}, {mm(false), mm(true)},
      {mm(false), mm(false)},        {scaled(2.0), scaled(3.0)},
      {scaled(2.0), scaled(2.0)},    {dynamic(100), dynamic(1000)},
      {dynamic(64), dynamic(64)},    {two_axis_reduce("p", false), two_axis_reduce("q", true)}};
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [w1, w2] = pairs[i];
    const bool equal = ir::structural_equal(w1.outputs, w2.outputs);
    EXPECT_EQ(key_of(w1).canonical == key_of(w2).canonical, equal) << "pair " << i;
  }
  // Symbolic sizes appear with their range in the shapes.
  EXPECT_EQ(key_of(dynamic(100)).shapes, "float32[n0,8]->float32[n0,8]|n0=int64[1,100]");
}

TEST(WorkloadKey, InputOrderIsPartOfTheWorkload) {
  Workload w = matmul_relu("", 8, 8, 8);
  Workload swapped{w.outputs, {w.inputs[1], w.inputs[0]}};
  WorkloadKey a = key_of(w), b = key_of(swapped);
  EXPECT_EQ(a.hash, b.hash);  // the structural hash sees only the outputs
  EXPECT_NE(a.canonical, b.canonical);
}

TEST(WorkloadKey, HostTargetNamesIsaAndThreads) {
  const std::string t = db::host_target();
  EXPECT_TRUE(std::regex_match(t, std::regex("cpu:(avx512|avx2|sse):threads=[0-9]+"))) << t;
  EXPECT_EQ(key_of(matmul_relu("", 4, 4, 4), "").target, t);
  WorkloadKey k;
  k.hash = 0x00ab00cd12345678ULL;
  EXPECT_EQ(k.hash_hex(), "00ab00cd12345678");
  EXPECT_EQ(db::parse_hash_hex(k.hash_hex()), k.hash);
}

TEST(ScheduleNames, TranslateNamesAndReduceOrder) {
  WorkloadKey a = key_of(two_axis_reduce("a_", false));
  WorkloadKey b = key_of(two_axis_reduce("b_", true));
  // Workload a: reduce axes (extent 3, extent 5); give each a tile equal to its extent.
  util::Json sched = util::Json::parse(
      R"({"tuner":"t","stages":[{"op":"a_out","pack":["a_W"],"tile_reduce":[3,5]}]})");
  const std::string canonical = db::schedule_to_canonical(a, sched.dump());
  EXPECT_EQ(canonical.find("a_"), std::string::npos) << canonical;
  util::Json for_b = util::Json::parse(db::schedule_from_canonical(b, canonical));
  const util::Json& stage = for_b.at("stages").at(0);
  EXPECT_EQ(stage.at("op").as_string(), "b_out");
  EXPECT_EQ(stage.at("pack").at(0).as_string(), "b_W");
  // Workload b lists its reduce axes as (extent 5, extent 3): the tiles follow the axes.
  EXPECT_EQ(stage.at("tile_reduce").at(0).as_int(), 5);
  EXPECT_EQ(stage.at("tile_reduce").at(1).as_int(), 3);
  // Back to a's names gives the original.
  EXPECT_EQ(util::Json::parse(db::schedule_from_canonical(a, canonical)), sched);
  // Not a schedule: unchanged.
  EXPECT_EQ(db::schedule_to_canonical(a, "not json"), "not json");
}

// ---- the database -----------------------------------------------------------------------------

TEST(RecordsDB, RoundTripThroughTheFile) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("sub/records.db");  // the directory is created
  WorkloadKey key = key_of(matmul_relu("", 32, 32, 32));
  {
    RecordsDB db = RecordsDB::open(path);
    EXPECT_EQ(db.mode(), RecordsDB::Mode::kDisk);
    EXPECT_FALSE(db.best(key).has_value());
    Record r = db::make_record(key, kSchedule, "search", 1.25, 42.5, 300);
    EXPECT_TRUE(db.put(r));
  }
  RecordsDB db = RecordsDB::open(path);
  std::optional<Record> got = db.best(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_GT(got->id, 0);
  EXPECT_EQ(got->workload_hash, key.hash_hex());
  EXPECT_EQ(got->shapes, key.shapes);
  EXPECT_EQ(got->target, key.target);
  EXPECT_EQ(got->canonical, key.canonical);
  EXPECT_EQ(util::Json::parse(got->schedule_json), util::Json::parse(kSchedule));
  EXPECT_EQ(got->tuner, "search");
  EXPECT_EQ(got->median_ms, 1.25);
  EXPECT_EQ(got->gflops, 42.5);
  EXPECT_EQ(got->trials, 300);
  EXPECT_EQ(got->version, db::tessera_version());
  EXPECT_NEAR(static_cast<double>(got->created), static_cast<double>(std::time(nullptr)), 60.0);
  EXPECT_EQ(db.count(), 1);
  EXPECT_EQ(db.all().size(), 1u);
  EXPECT_EQ(db.all({std::nullopt, std::nullopt, std::nullopt, std::string("other")}).size(), 0u);
}

TEST(RecordsDB, BestPicksTheFastestMeasuredRecord) {
  testing::TempDir dir("tessera-db-test");
  RecordsDB db = RecordsDB::open(dir.file("records.db"));
  WorkloadKey key = key_of(matmul_relu("", 16, 16, 16));
  WorkloadKey other = key_of(matmul_relu("", 16, 16, 8));
  db.put(record_for(key, std::nullopt, "unmeasured"));
  EXPECT_EQ(db.best(key)->tuner, "unmeasured");  // better than nothing
  db.put(record_for(key, 3.0, "slow"));
  db.put(record_for(key, 1.0, "fast"));
  db.put(record_for(key, 2.0, "middle"));
  db.put(record_for(other, 0.5, "other-workload"));
  db.put(record_for(key_of(matmul_relu("", 16, 16, 16), "cpu:elsewhere"), 0.1, "other-target"));
  std::optional<Record> best = db.best(key);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->tuner, "fast");
  EXPECT_EQ(best->median_ms, 1.0);
  EXPECT_EQ(db.best(other)->tuner, "other-workload");
  EXPECT_EQ(db.count(), 6);
}

TEST(RecordsDB, HashCollisionIsResolvedByTheCanonicalText) {
  testing::TempDir dir("tessera-db-test");
  RecordsDB db = RecordsDB::open(dir.file("records.db"));
  WorkloadKey real = key_of(matmul_relu("", 16, 16, 16));
  WorkloadKey impostor = real;  // same hash, shapes and target: only the text differs
  impostor.canonical += "# another workload\n";
  ASSERT_TRUE(db.put(record_for(real, 1.0, "real")));
  EXPECT_FALSE(db.best(impostor).has_value());
  EXPECT_EQ(db.stats().collisions, 1);
  ASSERT_TRUE(db.put(record_for(impostor, 0.5, "impostor")));
  EXPECT_EQ(db.best(real)->tuner, "real");
  EXPECT_EQ(db.best(impostor)->tuner, "impostor");
}

TEST(RecordsDB, RenamedWorkloadReusesTheRecordUnderItsOwnNames) {
  testing::TempDir dir("tessera-db-test");
  RecordsDB db = RecordsDB::open(dir.file("records.db"));
  Workload first = matmul_relu("first_", 48, 40, 24);
  Workload second = matmul_relu("second_", 48, 40, 24);
  compiler::BuiltKernel built = compiler::build_cpu(first.outputs, first.inputs);
  WorkloadKey k1 = key_of(first, ""), k2 = key_of(second, "");
  ASSERT_TRUE(db.put(db::make_record(k1, built.schedule().dump(), "default", 0.01)));
  std::optional<Record> r = db.best(k2);
  ASSERT_TRUE(r.has_value());
  schedule::KernelSchedule sched = schedule::KernelSchedule::parse(r->schedule_json);
  ASSERT_FALSE(sched.stages.empty());
  EXPECT_EQ(sched.stages[0].op.rfind("second_", 0), 0u) << r->schedule_json;
  // The translated schedule compiles the second workload and computes the right values.
  testing::check_graph(testing::Graph(second.outputs, second.inputs), sched, /*use_jit=*/true);
}

TEST(RecordsDB, MemoryDatabaseAndDefaultPath) {
  RecordsDB db = RecordsDB::open(":memory:");
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kMemory);
  WorkloadKey key = key_of(matmul_relu("", 4, 4, 4));
  EXPECT_FALSE(db.put(record_for(key, 1.0)));  // kept in memory
  EXPECT_EQ(db.best(key)->median_ms, 1.0);
  EXPECT_EQ(db.count(), 1);

  const char* saved_db = std::getenv("TESSERA_RECORDS_DB");
  const char* saved_cache = std::getenv("TESSERA_CACHE_DIR");
  const std::string keep_db = saved_db ? saved_db : "", keep_cache = saved_cache ? saved_cache : "";
  ::setenv("TESSERA_RECORDS_DB", "/tmp/somewhere/r.db", 1);
  EXPECT_EQ(RecordsDB::default_path(), "/tmp/somewhere/r.db");
  ::unsetenv("TESSERA_RECORDS_DB");
  ::setenv("TESSERA_CACHE_DIR", "/tmp/tessera-cache-dir", 1);
  EXPECT_EQ(RecordsDB::default_path(), "/tmp/tessera-cache-dir/records.db");
  if (saved_db) ::setenv("TESSERA_RECORDS_DB", keep_db.c_str(), 1);
  if (saved_cache) {
    ::setenv("TESSERA_CACHE_DIR", keep_cache.c_str(), 1);
  } else {
    ::unsetenv("TESSERA_CACHE_DIR");
  }
}

// ---- several processes ------------------------------------------------------------------------

TEST(RecordsDB, SecondProcessReadsWhatTheFirstWrote) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  // The writer is a child process; this process only opens the file afterwards.
  pid_t writer = spawn([&] {
    RecordsDB db = RecordsDB::open(path);
    return db.put(record_for(key_of(matmul_relu("w", 20, 30, 40)), 0.75, "from-child"));
  });
  ASSERT_EQ(wait_for(writer), 0);
  RecordsDB db = RecordsDB::open(path);
  std::optional<Record> r = db.best(key_of(matmul_relu("r", 20, 30, 40)));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->tuner, "from-child");
  EXPECT_EQ(r->median_ms, 0.75);
  // And the other way round, with this process's object still open.
  ASSERT_TRUE(db.put(record_for(key_of(matmul_relu("w", 7, 7, 7)), 0.5, "from-parent")));
  pid_t reader = spawn([&] {
    RecordsDB other = RecordsDB::open(path);
    std::optional<Record> got = other.best(key_of(matmul_relu("x", 7, 7, 7)));
    return got && got->tuner == "from-parent";
  });
  EXPECT_EQ(wait_for(reader), 0);
}

TEST(RecordsDB, ConcurrentWritersFromFourProcesses) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");  // created by the racing processes
  constexpr int kProcs = 4, kPuts = 40, kShared = 5;
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(spawn([&, p] {
      ::close(start[1]);
      char go;
      if (::read(start[0], &go, 1) != 1) return false;  // all start together
      db::RecordsDBOptions opts;
      opts.busy_timeout_ms = 30000;
      RecordsDB db = RecordsDB::open(path, opts);
      if (db.mode() != RecordsDB::Mode::kDisk) return false;
      bool ok = true;
      for (int i = 0; i < kPuts; ++i) {
        // Some workloads are shared between the processes, some are private.
        const int64_t n = i < kShared ? 8 + i : 100 + p * kPuts + i;
        WorkloadKey key = key_of(matmul_relu("p" + std::to_string(p), 8, n, 4));
        ok &= db.put(record_for(key, 1.0 + p + 0.01 * i, "proc" + std::to_string(p)));
        ok &= db.best(key).has_value();
      }
      return ok && db.stats().put_deferred == 0;
    }));
  }
  ::close(start[0]);
  ASSERT_EQ(::write(start[1], "gggg", kProcs), kProcs);
  ::close(start[1]);
  for (pid_t k : kids) EXPECT_EQ(wait_for(k), 0);

  RecordsDB db = RecordsDB::open(path);
  EXPECT_EQ(db.count(), kProcs * kPuts);
  for (int p = 0; p < kProcs; ++p) {
    db::RecordFilter f;
    f.tuner = "proc" + std::to_string(p);
    EXPECT_EQ(db.all(f).size(), static_cast<size_t>(kPuts));
  }
  // Shared workloads: the best record comes from process 0 (the smallest medians).
  for (int i = 0; i < kShared; ++i) {
    std::optional<Record> r = db.best(key_of(matmul_relu("q", 8, 8 + i, 4)));
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->tuner, "proc0");
    EXPECT_DOUBLE_EQ(*r->median_ms, 1.0 + 0.01 * i);
  }
}

TEST(RecordsDB, ObjectInheritedThroughForkReconnects) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  RecordsDB db = RecordsDB::open(path);
  ASSERT_TRUE(db.put(record_for(key_of(matmul_relu("", 3, 3, 3)), 1.0, "parent")));
  pid_t kid = spawn([&] {
    // The same object in the child: it must open its own connection.
    return db.put(record_for(key_of(matmul_relu("", 5, 5, 5)), 1.0, "child")) &&
           db.best(key_of(matmul_relu("", 3, 3, 3))).has_value();
  });
  EXPECT_EQ(wait_for(kid), 0);
  EXPECT_EQ(db.count(), 2);
  EXPECT_EQ(db.best(key_of(matmul_relu("", 5, 5, 5)))->tuner, "child");
}

// ---- damaged files ----------------------------------------------------------------------------

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

TEST(RecordsDB, GarbageFileIsMovedAsideAndReplaced) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  std::string garbage;
  for (int i = 0; i < 500; ++i) garbage += "this is not a database " + std::to_string(i) + "\n";
  write_bytes(path, garbage);
  ::testing::internal::CaptureStderr();
  RecordsDB db = RecordsDB::open(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("damaged"), std::string::npos) << err;
  EXPECT_NE(err.find("moved it to " + path + ".corrupt-"), std::string::npos) << err;
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kDisk);
  EXPECT_EQ(db.stats().repairs, 1);
  std::vector<std::string> moved = files_matching(dir.path(), R"(records\.db\.corrupt-[0-9-]+)");
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_TRUE(read_file(moved[0]) == garbage);  // kept for inspection, byte for byte
  WorkloadKey key = key_of(matmul_relu("", 6, 6, 6));
  EXPECT_TRUE(db.put(record_for(key, 2.0)));
  EXPECT_TRUE(db.best(key).has_value());
  // The fresh file opens cleanly next time.
  ::testing::internal::CaptureStderr();
  RecordsDB again = RecordsDB::open(path);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(again.count(), 1);
}

// A real records file with enough rows to span many pages, closed (checkpointed).
void fill_database(const std::string& path, int n) {
  RecordsDB db = RecordsDB::open(path);
  const std::string big(600, 'x');
  for (int i = 0; i < n; ++i) {
    db.put(db::make_record(key_of(matmul_relu("", 4, 4 + i, 4)), big, "fill", 1.0));
  }
}

TEST(RecordsDB, TruncatedFileIsMovedAsideAndReplaced) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  fill_database(path, 300);
  ASSERT_FALSE(fs::exists(path + "-wal"));  // the last connection checkpointed it
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 64u * 1024u);
  fs::resize_file(path, size / 2);
  ::testing::internal::CaptureStderr();
  RecordsDB db = RecordsDB::open(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("damaged"), std::string::npos) << err;
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kDisk);
  EXPECT_EQ(db.count(), 0);
  EXPECT_EQ(files_matching(dir.path(), R"(records\.db\.corrupt-.*)").size(), 1u);
}

TEST(RecordsDB, OverwrittenPageIsDetected) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  fill_database(path, 300);
  const auto size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string junk(4096, '\xA5');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  ::testing::internal::CaptureStderr();
  RecordsDB db = RecordsDB::open(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("damaged"), std::string::npos) << err;
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kDisk);
  EXPECT_TRUE(db.put(record_for(key_of(matmul_relu("", 2, 2, 2)), 1.0)));
}

TEST(RecordsDB, ProcessesRacingToRepairMoveTheFileAsideOnce) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  write_bytes(path, std::string(20000, 'Z'));
  constexpr int kProcs = 3;
  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    kids.push_back(spawn([&, p] {
      ::close(start[1]);
      char go;
      if (::read(start[0], &go, 1) != 1) return false;
      db::RecordsDBOptions opts;
      opts.busy_timeout_ms = 30000;
      RecordsDB db = RecordsDB::open(path, opts);
      bool ok = db.mode() == RecordsDB::Mode::kDisk;
      for (int i = 0; i < 10; ++i) {
        ok &= db.put(record_for(key_of(matmul_relu("", 4, 4, 4 + p * 10 + i)), 1.0));
      }
      return ok;
    }));
  }
  ::close(start[0]);
  ASSERT_EQ(::write(start[1], "ggg", kProcs), kProcs);
  ::close(start[1]);
  for (pid_t k : kids) EXPECT_EQ(wait_for(k), 0);
  EXPECT_EQ(files_matching(dir.path(), R"(records\.db\.corrupt-[^-]*-[0-9]+)").size(), 1u);
  EXPECT_EQ(RecordsDB::open(path).count(), kProcs * 10);
}

// ---- locks, versions, unwritable places ------------------------------------------------------

#ifdef TESSERA_HAVE_SQLITE
// A plain SQLite connection standing for another process that holds the file.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) { sqlite3_open(path.c_str(), &db_); }
  ~RawConnection() { sqlite3_close(db_); }
  int exec(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST(RecordsDB, WriteLockedFileDefersPutsAndNeverThrows) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  RecordsDB db = RecordsDB::open(path, fast_options());
  WorkloadKey k1 = key_of(matmul_relu("", 9, 9, 9)), k2 = key_of(matmul_relu("", 9, 9, 10));
  ASSERT_TRUE(db.put(record_for(k1, 1.0)));

  auto other = std::make_unique<RawConnection>(path);
  ASSERT_EQ(other->exec("BEGIN EXCLUSIVE"), SQLITE_OK);
  ::testing::internal::CaptureStderr();
  const bool written = db.put(record_for(k2, 2.0));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(written);
  EXPECT_NE(err.find("locked by another process"), std::string::npos) << err;
  EXPECT_EQ(db.stats().put_deferred, 1);
  EXPECT_TRUE(db.best(k1).has_value());  // WAL: reading is not blocked by a writer
  EXPECT_TRUE(db.best(k2).has_value());  // held in memory
  ASSERT_EQ(other->exec("COMMIT"), SQLITE_OK);
  other.reset();

  std::this_thread::sleep_for(std::chrono::milliseconds(80));  // past retry_after_ms
  EXPECT_TRUE(db.flush());
  EXPECT_EQ(RecordsDB::open(path).count(), 2);
}

TEST(RecordsDB, FullyLockedFileMissesAndRecovers) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  WorkloadKey key = key_of(matmul_relu("", 11, 11, 11));
  ASSERT_TRUE(RecordsDB::open(path).put(record_for(key, 1.0)));

  // Exclusive locking mode: the other connection keeps readers out as well.
  auto other = std::make_unique<RawConnection>(path);
  ASSERT_EQ(other->exec("PRAGMA locking_mode=EXCLUSIVE"), SQLITE_OK);
  ASSERT_EQ(other->exec("BEGIN EXCLUSIVE"), SQLITE_OK);
  ASSERT_EQ(other->exec("INSERT INTO meta(key, value) VALUES('holder', 'x')"), SQLITE_OK);

  ::testing::internal::CaptureStderr();
  RecordsDB db = RecordsDB::open(path, fast_options());
  std::optional<Record> during = db.best(key);
  const bool put_during = db.put(record_for(key_of(matmul_relu("", 12, 12, 12)), 1.0));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(during.has_value());
  EXPECT_FALSE(put_during);
  EXPECT_NE(err.find("locked by another process"), std::string::npos) << err;
  EXPECT_GE(db.stats().lock_timeouts, 1);

  ASSERT_EQ(other->exec("COMMIT"), SQLITE_OK);
  other.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_TRUE(db.best(key).has_value());
  EXPECT_TRUE(db.flush());
  EXPECT_EQ(db.count(), 2);
}

TEST(RecordsDB, NewerSchemaIsLeftUntouched) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("records.db");
  RecordsDB::open(path).put(record_for(key_of(matmul_relu("", 3, 3, 3)), 1.0));
  RawConnection(path).exec("UPDATE meta SET value = '99' WHERE key = 'schema_version'");
  const std::string before = read_file(path);
  ::testing::internal::CaptureStderr();
  {
    RecordsDB db = RecordsDB::open(path);
    EXPECT_EQ(db.mode(), RecordsDB::Mode::kMemory);
    EXPECT_FALSE(db.put(record_for(key_of(matmul_relu("", 4, 3, 3)), 1.0)));
    EXPECT_EQ(db.count(), 1);  // only the one in memory
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("newer Tessera"), std::string::npos) << err;
  EXPECT_TRUE(read_file(path) == before);  // byte for byte (no diff dump of binary data)
}

TEST(RecordsDB, ForeignDatabaseIsLeftUntouched) {
  testing::TempDir dir("tessera-db-test");
  const std::string path = dir.file("other.db");
  RawConnection(path).exec("CREATE TABLE records(x INTEGER); INSERT INTO records VALUES(1)");
  const std::string before = read_file(path);
  ::testing::internal::CaptureStderr();
  RecordsDB db = RecordsDB::open(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kMemory);
  EXPECT_NE(err.find("not a Tessera records database"), std::string::npos) << err;
  EXPECT_TRUE(read_file(path) == before);  // byte for byte (no diff dump of binary data)
}
#endif  // TESSERA_HAVE_SQLITE

TEST(RecordsDB, UncreatableLocationFallsBackToMemory) {
  testing::TempDir dir("tessera-db-test");
  write_bytes(dir.file("plainfile"), "x");
  // The parent "directory" is a regular file: neither it nor the database can be created.
  const std::string path = dir.file("plainfile/records.db");
  ::testing::internal::CaptureStderr();
  RecordsDB db = RecordsDB::open(path);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kMemory);
  EXPECT_NE(err.find("kept in memory"), std::string::npos) << err;
  WorkloadKey key = key_of(matmul_relu("", 5, 5, 5));
  EXPECT_FALSE(db.put(record_for(key, 1.0)));
  EXPECT_TRUE(db.best(key).has_value());
}

TEST(RecordsDB, ReadOnlyDirectoryReadsTheFileAndKeepsNewRecordsInMemory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  testing::TempDir dir("tessera-db-test");
  const std::string sub = dir.file("ro");
  fs::create_directory(sub);
  const std::string path = sub + "/records.db";
  WorkloadKey old_key = key_of(matmul_relu("", 5, 5, 5)),
              new_key = key_of(matmul_relu("", 6, 5, 5));
  ASSERT_TRUE(RecordsDB::open(path).put(record_for(old_key, 1.0)));
  fs::permissions(sub, fs::perms::owner_read | fs::perms::owner_exec);
  fs::permissions(path, fs::perms::owner_read);
  ::testing::internal::CaptureStderr();
  {
    RecordsDB db = RecordsDB::open(path);
    EXPECT_EQ(db.mode(), RecordsDB::Mode::kReadOnly);
    EXPECT_TRUE(db.best(old_key).has_value());  // the file is still read
    EXPECT_FALSE(db.put(record_for(new_key, 1.0)));
    EXPECT_TRUE(db.best(new_key).has_value());  // held in memory
    EXPECT_EQ(db.count(), 2);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("kept in memory"), std::string::npos) << err;
  fs::permissions(sub, fs::perms::owner_all);
}

}  // namespace
}  // namespace tessera
