// Search mode's tables in the records database: measurements round-trip (file and memory, names
// translated to the reading workload's), an older file gains the tables when opened, a locked
// file holds measurements until it is free, and a saved cost model predicts exactly as before.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "compiler/search_records.h"
#include "cost/features.h"
#include "cost/xgb_model.h"
#include "db/records.h"
#include "ops/ops.h"
#include "temp_dir.h"
#include "util/json.h"

#ifdef TESSERA_HAVE_SQLITE
#include <sqlite3.h>
#endif

namespace tessera {
namespace {

namespace fs = std::filesystem;
using db::Measurement;
using db::RecordsDB;
using db::WorkloadKey;

// relu(A @ B) with every tensor name prefixed: two prefixes give one workload under two names.
WorkloadKey matmul_relu_key(const std::string& prefix, int64_t m = 16) {
  ir::Tensor a = ir::placeholder(prefix + "A", {m, 8});
  ir::Tensor b = ir::placeholder(prefix + "B", {8, 12});
  ir::Tensor c = ops::relu(ops::matmul(a, b, false, false, prefix + "mm"), prefix + "relu");
  return db::make_workload_key({c}, {a, b}, "cpu:test:threads=1");
}

std::string schedule_naming(const std::string& prefix, int tile) {
  return R"({"tuner":"search","stages":[{"op":")" + prefix + R"(mm","pack":[")" + prefix +
         R"(B"],"tile_reduce":[)" + std::to_string(tile) + "]}]}";
}

// Three measurements of workload "a_": two ok, one failed; the seed uses all 64 bits.
std::vector<Measurement> three_measurements(const WorkloadKey& a) {
  const uint64_t seed = 0xfedcba9876543210ull;
  return {db::make_measurement(a, schedule_naming("a_", 2), "search", true, "", 1.5, seed, 0, 0),
          db::make_measurement(a, schedule_naming("a_", 4), "search", false, "mismatch", 9.0, seed,
                               0, 1),
          db::make_measurement(a, schedule_naming("a_", 8), "search", true, "", 0.75, seed, 1, 2)};
}

void expect_read_back(RecordsDB& db, const WorkloadKey& b) {
  const std::vector<Measurement> got = db.measurements(b, "search");
  ASSERT_EQ(got.size(), 3u);
  const int tiles[] = {2, 4, 8};
  for (int i = 0; i < 3; ++i) {
    // Stored canonical, read in the reading workload's names.
    EXPECT_EQ(util::Json::parse(got[i].schedule_json),
              util::Json::parse(schedule_naming("b_", tiles[i])));
    EXPECT_EQ(got[i].seed, 0xfedcba9876543210ull);
    EXPECT_EQ(got[i].trial, i);
    EXPECT_EQ(got[i].tuner, "search");
    EXPECT_EQ(got[i].target, b.target);
    EXPECT_EQ(got[i].version, db::tessera_version());
    EXPECT_NEAR(got[i].created, static_cast<double>(std::time(nullptr)), 60.0);
  }
  EXPECT_TRUE(got[0].ok);
  EXPECT_EQ(got[0].median_ms, 1.5);
  EXPECT_FALSE(got[1].ok);
  EXPECT_EQ(got[1].error, "mismatch");
  EXPECT_FALSE(got[1].median_ms.has_value()) << "a failed candidate has no time";
  EXPECT_EQ(got[2].round, 1);
  EXPECT_EQ(got[2].median_ms, 0.75);
  EXPECT_TRUE(db.measurements(b, "construct").empty());
  EXPECT_EQ(db.measurements(b).size(), 3u);
  EXPECT_TRUE(db.measurements(matmul_relu_key("b_", 17)).empty()) << "another workload";
}

TEST(SearchLog, MeasurementsRoundTripThroughTheFileUnderAnotherWorkloadsNames) {
  testing::TempDir dir("tessera-search-log");
  const std::string path = dir.file("records.db");
  const WorkloadKey a = matmul_relu_key("a_"), b = matmul_relu_key("b_");
  {
    RecordsDB db = RecordsDB::open(path);
    ASSERT_EQ(db.mode(), RecordsDB::Mode::kDisk);
    EXPECT_TRUE(db.put_measurements(three_measurements(a)));
    EXPECT_EQ(db.count_measurements(), 3);
  }
  RecordsDB db = RecordsDB::open(path);
  expect_read_back(db, b);
  EXPECT_GT(db.measurements(b)[0].id, 0);
  EXPECT_EQ(db.count(), 0) << "measurements are not records";
}

TEST(SearchLog, MeasurementsRoundTripInMemory) {
  RecordsDB db = RecordsDB::open(":memory:");
  const WorkloadKey a = matmul_relu_key("a_"), b = matmul_relu_key("b_");
  EXPECT_FALSE(db.put_measurements(three_measurements(a))) << "not in a file";
  expect_read_back(db, b);
  EXPECT_EQ(db.count_measurements(), 3);
}

#ifdef TESSERA_HAVE_SQLITE
int raw_count(const std::string& path, const std::string& sql) {
  sqlite3* h = nullptr;
  sqlite3_open(path.c_str(), &h);
  sqlite3_stmt* s = nullptr;
  int n = -1;
  if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
      sqlite3_step(s) == SQLITE_ROW) {
    n = sqlite3_column_int(s, 0);
  }
  sqlite3_finalize(s);
  sqlite3_close(h);
  return n;
}

int raw_exec(sqlite3* h, const std::string& sql) {
  return sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr);
}

TEST(SearchLog, OpeningAnOlderFileAddsTheSearchTablesAndKeepsItsRecords) {
  testing::TempDir dir("tessera-search-log");
  const std::string path = dir.file("records.db");
  const WorkloadKey a = matmul_relu_key("a_");
  ASSERT_TRUE(RecordsDB::open(path).put(db::make_record(a, schedule_naming("a_", 2), "search")));
  {  // what a file of the first schema looked like: no search tables
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(raw_exec(h, "DROP TABLE measurements; DROP TABLE cost_models;"), SQLITE_OK);
    sqlite3_close(h);
  }
  const char* tables =
      "SELECT count(*) FROM sqlite_master WHERE name IN ('measurements', 'cost_models')";
  ASSERT_EQ(raw_count(path, tables), 0);
  RecordsDB db = RecordsDB::open(path);
  EXPECT_EQ(db.mode(), RecordsDB::Mode::kDisk);
  EXPECT_EQ(raw_count(path, tables), 2);
  EXPECT_TRUE(db.best(a).has_value());
  EXPECT_TRUE(db.put_measurements(three_measurements(a)));
  EXPECT_EQ(raw_count(path, "SELECT count(*) FROM measurements"), 3);
}

TEST(SearchLog, LockedFileHoldsMeasurementsUntilItIsFree) {
  testing::TempDir dir("tessera-search-log");
  const std::string path = dir.file("records.db");
  db::RecordsDBOptions o;
  o.busy_timeout_ms = 100;
  o.retry_after_ms = 50;
  o.warn_to_stderr = false;
  RecordsDB db = RecordsDB::open(path, o);
  const WorkloadKey a = matmul_relu_key("a_");
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(raw_exec(other, "BEGIN EXCLUSIVE"), SQLITE_OK);
  EXPECT_FALSE(db.put_measurements(three_measurements(a)));
  EXPECT_EQ(db.stats().lock_timeouts, 1);
  ASSERT_EQ(raw_exec(other, "COMMIT"), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_EQ(db.measurements(a).size(), 3u) << "held in memory meanwhile";
  std::this_thread::sleep_for(std::chrono::milliseconds(80));  // past retry_after_ms
  EXPECT_TRUE(db.flush());
  EXPECT_EQ(db.measurements(a).size(), 3u) << "written once, not held twice";
  EXPECT_EQ(raw_count(path, "SELECT count(*) FROM measurements"), 3);
}
#endif  // TESSERA_HAVE_SQLITE

// Programs of 1-4 stores with random features and a label that depends on a few of them.
void synthetic(int count, uint64_t seed, std::vector<cost::ProgramFeatures>* programs,
               std::vector<double>* labels) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0, 10);
  for (int p = 0; p < count; ++p) {
    cost::ProgramFeatures f;
    f.num_rows = 1 + p % 4;
    double label = 0;
    for (int r = 0; r < f.num_rows; ++r) {
      std::vector<float> row(cost::kNumFeatures);
      for (float& x : row) x = u(rng);
      label += 0.05 * row[3] + (row[20] > 5 ? 0.2 : 0.0);
      f.values.insert(f.values.end(), row.begin(), row.end());
    }
    programs->push_back(std::move(f));
    labels->push_back(label);
  }
}

void check_model_round_trip(RecordsDB& db) {
  cost::XGBOptions o;
  o.rounds = 10;
  o.max_depth = 4;
  o.threads = 1;
  std::vector<cost::ProgramFeatures> train, test;
  std::vector<double> labels, unused;
  synthetic(60, 1, &train, &labels);
  synthetic(20, 2, &test, &unused);
  cost::XGBModel trained(o);
  trained.fit(train, labels);
  const std::vector<double> want = trained.predict(test);
  compiler::save_cost_model(db, trained, "cpu:test:threads=1", 60);

  cost::XGBModel loaded(o);
  ASSERT_TRUE(compiler::load_cost_model(db, loaded, "cpu:test:threads=1"));
  EXPECT_TRUE(loaded.trained());
  EXPECT_EQ(loaded.predict(test), want);
  cost::XGBModel elsewhere(o);
  EXPECT_FALSE(compiler::load_cost_model(db, elsewhere, "cpu:other:threads=1"));
  EXPECT_FALSE(elsewhere.trained());
  EXPECT_FALSE(db.model("xgboost", "cpu:test:threads=1", cost::kFeatureVersion + 1).has_value())
      << "features of another version";
  const std::optional<db::ModelBlob> blob =
      db.model("xgboost", "cpu:test:threads=1", cost::kFeatureVersion);
  ASSERT_TRUE(blob.has_value());
  EXPECT_EQ(blob->samples, 60);

  // Saving again replaces it.
  cost::XGBModel retrained(o);
  retrained.fit(test, unused);
  compiler::save_cost_model(db, retrained, "cpu:test:threads=1", 20);
  cost::XGBModel reloaded(o);
  ASSERT_TRUE(compiler::load_cost_model(db, reloaded, "cpu:test:threads=1"));
  EXPECT_EQ(reloaded.predict(train), retrained.predict(train));
  EXPECT_EQ(db.model("xgboost", "cpu:test:threads=1", cost::kFeatureVersion)->samples, 20);
}

TEST(SearchLog, SavedCostModelPredictsExactlyAsBeforeFromTheFile) {
  if (!cost::XGBModel::compiled_in()) GTEST_SKIP() << "built without XGBoost";
  testing::TempDir dir("tessera-search-log");
  {
    RecordsDB db = RecordsDB::open(dir.file("records.db"));
    check_model_round_trip(db);
  }
  RecordsDB again = RecordsDB::open(dir.file("records.db"));  // another process's view
  cost::XGBModel loaded;
  EXPECT_TRUE(compiler::load_cost_model(again, loaded, "cpu:test:threads=1"));
}

TEST(SearchLog, SavedCostModelPredictsExactlyAsBeforeInMemory) {
  if (!cost::XGBModel::compiled_in()) GTEST_SKIP() << "built without XGBoost";
  RecordsDB db = RecordsDB::open(":memory:");
  check_model_round_trip(db);
}

}  // namespace
}  // namespace tessera
