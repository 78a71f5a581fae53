#include "cost/xgb_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "util/check.h"

#ifdef TESSERA_HAVE_XGBOOST
#include <xgboost/c_api.h>
#endif

namespace tessera::cost {

std::vector<double> pack_sum_weights(const std::vector<double>& labels, const XGBOptions& o) {
  std::vector<double> w;
  w.reserve(labels.size());
  for (double y : labels) w.push_back(o.weight_by_label ? std::max(y, o.min_weight) : 1.0);
  return w;
}

namespace {

// yhat_p: the sum of the rows of each program.
std::vector<double> program_sums(const std::vector<float>& row_pred,
                                 const std::vector<int>& row_program, size_t programs) {
  std::vector<double> sums(programs, 0.0);
  for (size_t r = 0; r < row_pred.size(); ++r) sums[row_program[r]] += row_pred[r];
  return sums;
}

// Per-row gradients from per-program ones: every row of program p gets g[p], and its Hessian
// h[p] times the program's row count (a program's prediction is the sum of its rows).
void spread_to_rows(const std::vector<int>& row_program, const std::vector<double>& g,
                    const std::vector<double>& h, std::vector<float>* grad,
                    std::vector<float>* hess) {
  std::vector<int> rows(g.size(), 0);
  for (int p : row_program) ++rows[p];
  grad->resize(row_program.size());
  hess->resize(row_program.size());
  for (size_t r = 0; r < row_program.size(); ++r) {
    const int p = row_program[r];
    (*grad)[r] = static_cast<float>(g[p]);
    (*hess)[r] = static_cast<float>(h[p] * rows[p]);
  }
}

}  // namespace

double pack_sum_loss(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                     const std::vector<double>& labels, const std::vector<double>& weights) {
  const std::vector<double> sums = program_sums(row_pred, row_program, labels.size());
  double loss = 0;
  for (size_t p = 0; p < labels.size(); ++p) {
    const double e = sums[p] - labels[p];
    loss += 0.5 * weights[p] * e * e;
  }
  return loss;
}

void pack_sum_gradient(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                       const std::vector<double>& labels, const std::vector<double>& weights,
                       std::vector<float>* grad, std::vector<float>* hess) {
  const std::vector<double> sums = program_sums(row_pred, row_program, labels.size());
  std::vector<double> g(labels.size());
  for (size_t p = 0; p < labels.size(); ++p) g[p] = weights[p] * (sums[p] - labels[p]);
  spread_to_rows(row_program, g, weights, grad, hess);
}

namespace {

// One term of the rank loss: a pair (hi, lo) of one group with y_hi > y_lo, its weight w_pq and
// its logistic s = sigmoid(yhat_hi - yhat_lo).
struct RankPair {
  size_t hi, lo;
  double w, s;
};

// Every ordered pair of each group (see the header), given the program sums.
std::vector<RankPair> rank_pairs(const std::vector<double>& sums, const std::vector<double>& labels,
                                 const std::vector<int>& groups) {
  std::vector<std::vector<size_t>> members;
  for (size_t p = 0; p < labels.size(); ++p) {
    const size_t g = groups.empty() ? 0 : static_cast<size_t>(groups[p]);
    if (g >= members.size()) members.resize(g + 1);
    members[g].push_back(p);
  }
  std::vector<RankPair> pairs;
  for (const std::vector<size_t>& m : members) {
    const double scale = kRankPairScale / static_cast<double>(std::max<size_t>(1, m.size()));
    for (size_t i = 0; i < m.size(); ++i) {
      for (size_t j = i + 1; j < m.size(); ++j) {
        if (labels[m[i]] == labels[m[j]]) continue;
        const size_t hi = labels[m[i]] > labels[m[j]] ? m[i] : m[j];
        const size_t lo = hi == m[i] ? m[j] : m[i];
        const double s = 1 / (1 + std::exp(-(sums[hi] - sums[lo])));
        pairs.push_back({hi, lo, (labels[hi] - labels[lo]) * scale, s});
      }
    }
  }
  return pairs;
}

}  // namespace

double pack_sum_rank_loss(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                          const std::vector<double>& labels, const std::vector<int>& groups) {
  const std::vector<double> sums = program_sums(row_pred, row_program, labels.size());
  double loss = 0;
  for (const RankPair& q : rank_pairs(sums, labels, groups)) {
    const double x = sums[q.lo] - sums[q.hi];  // log(1 + e^x), stable for large |x|
    loss += q.w * (x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)));
  }
  return loss;
}

void pack_sum_rank_gradient(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                            const std::vector<double>& labels, const std::vector<int>& groups,
                            std::vector<float>* grad, std::vector<float>* hess) {
  const std::vector<double> sums = program_sums(row_pred, row_program, labels.size());
  std::vector<double> g(labels.size(), 0.0), h(labels.size(), 0.0);
  for (const RankPair& q : rank_pairs(sums, labels, groups)) {
    g[q.hi] -= q.w * (1 - q.s);
    g[q.lo] += q.w * (1 - q.s);
    h[q.hi] += q.w * q.s * (1 - q.s);
    h[q.lo] += q.w * q.s * (1 - q.s);
  }
  spread_to_rows(row_program, g, h, grad, hess);
}

#ifdef TESSERA_HAVE_XGBOOST

namespace {

void check_xgb(int rc, const char* what) {
  TESSERA_CHECK(rc == 0) << "XGBoost " << what << ": " << XGBGetLastError();
}

// All rows of `programs` as one dense matrix; row_program[r] says whose row r is.
struct Rows {
  std::vector<float> data;
  std::vector<int> program;
};

Rows stack_rows(const std::vector<ProgramFeatures>& programs) {
  Rows rows;
  for (size_t p = 0; p < programs.size(); ++p) {
    const ProgramFeatures& f = programs[p];
    TESSERA_CHECK(f.values.size() == static_cast<size_t>(f.num_rows) * kNumFeatures)
        << "program " << p << " has " << f.values.size() << " feature values for " << f.num_rows
        << " rows";
    rows.data.insert(rows.data.end(), f.values.begin(), f.values.end());
    rows.program.insert(rows.program.end(), f.num_rows, static_cast<int>(p));
  }
  return rows;
}

// Adds the analytic prior (prior_weight x column 144) to the outputs of program rows.
void add_prior(const Rows& rows, double weight, std::vector<float>* pred) {
  if (weight == 0) return;
  for (size_t r = 0; r < rows.program.size(); ++r) {
    const float* row = rows.data.data() + r * kNumFeatures;
    const float speedup = row[kFeatureAnalyticSpeedup];
    if (row[kFeatureProgramRow] == 1.0f && std::isfinite(speedup)) {
      (*pred)[r] += static_cast<float>(weight * speedup);
    }
  }
}

// Owns a DMatrix.
class Matrix {
 public:
  explicit Matrix(const Rows& rows) {
    check_xgb(XGDMatrixCreateFromMat(rows.data.data(), rows.program.size(), kNumFeatures,
                                     std::numeric_limits<float>::quiet_NaN(), &handle_),
              "DMatrix");
  }
  ~Matrix() { XGDMatrixFree(handle_); }
  Matrix(const Matrix&) = delete;
  Matrix& operator=(const Matrix&) = delete;
  DMatrixHandle get() const { return handle_; }

 private:
  DMatrixHandle handle_ = nullptr;
};

// Raw (margin) outputs of every row; `training` as XGBoost means it (dropout boosters).
std::vector<float> predict_rows(BoosterHandle b, const Matrix& m, size_t rows, bool training) {
  const std::string config = std::string("{\"type\": 1, \"training\": ") +
                             (training ? "true" : "false") +
                             ", \"iteration_begin\": 0, \"iteration_end\": 0, "
                             "\"strict_shape\": false}";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* out = nullptr;
  check_xgb(XGBoosterPredictFromDMatrix(b, m.get(), config.c_str(), &shape, &dim, &out), "predict");
  return std::vector<float>(out, out + rows);
}

void set_param(BoosterHandle b, const char* key, const std::string& value) {
  check_xgb(XGBoosterSetParam(b, key, value.c_str()), key);
}

}  // namespace

bool XGBModel::compiled_in() { return true; }

XGBModel::XGBModel(XGBOptions options) : options_(options) {}

XGBModel::~XGBModel() { reset(); }

void XGBModel::reset() {
  if (booster_) XGBoosterFree(static_cast<BoosterHandle>(booster_));
  booster_ = nullptr;
}

void XGBModel::fit(const std::vector<ProgramFeatures>& programs, const std::vector<double>& labels,
                   const std::vector<int>& groups) {
  TESSERA_CHECK(programs.size() == labels.size())
      << programs.size() << " programs with " << labels.size() << " labels";
  TESSERA_CHECK(groups.empty() || groups.size() == labels.size())
      << groups.size() << " groups for " << labels.size() << " programs";
  const Rows rows = stack_rows(programs);
  TESSERA_CHECK(!rows.program.empty()) << "XGBoost fit: no feature rows";
  Matrix train(rows);
  reset();
  BoosterHandle b = nullptr;
  DMatrixHandle cache[] = {train.get()};
  check_xgb(XGBoosterCreate(cache, 1, &b), "create");
  booster_ = b;
  set_param(b, "base_score", "0");
  set_param(b, "max_depth", std::to_string(options_.max_depth));
  set_param(b, "eta", std::to_string(options_.eta));
  set_param(b, "gamma", std::to_string(options_.gamma));
  set_param(b, "min_child_weight", std::to_string(options_.min_child_weight));
  set_param(b, "seed", std::to_string(options_.seed));
  set_param(b, "tree_method", options_.tree_method);
  set_param(b, "verbosity", "0");
  set_param(b, "disable_default_eval_metric", "1");
  if (options_.threads > 0) set_param(b, "nthread", std::to_string(options_.threads));

  const std::vector<double> weights = pack_sum_weights(labels, options_);
  std::vector<float> pred(rows.program.size(), 0.0f), grad, hess;
  for (int it = 0; it < options_.rounds; ++it) {
    if (it > 0) pred = predict_rows(b, train, rows.program.size(), /*training=*/true);
    add_prior(rows, options_.prior_weight, &pred);
    if (options_.objective == XGBObjective::kRank) {
      pack_sum_rank_gradient(pred, rows.program, labels, groups, &grad, &hess);
    } else {
      pack_sum_gradient(pred, rows.program, labels, weights, &grad, &hess);
    }
    check_xgb(XGBoosterBoostOneIter(b, train.get(), grad.data(), hess.data(), grad.size()),
              "boost");
  }
}

std::vector<double> XGBModel::predict(const std::vector<ProgramFeatures>& programs) const {
  std::vector<double> out(programs.size(), 0.0);
  if (!booster_) return out;
  const Rows rows = stack_rows(programs);
  if (rows.program.empty()) return out;
  Matrix m(rows);
  std::vector<float> pred =
      predict_rows(static_cast<BoosterHandle>(booster_), m, rows.program.size(), false);
  add_prior(rows, options_.prior_weight, &pred);
  for (size_t r = 0; r < pred.size(); ++r) out[rows.program[r]] += pred[r];
  return out;
}

std::vector<uint8_t> XGBModel::save() const {
  TESSERA_CHECK(booster_) << "XGBoost save: the model is not trained";
  bst_ulong len = 0;
  const char* data = nullptr;
  check_xgb(XGBoosterSaveModelToBuffer(static_cast<BoosterHandle>(booster_),
                                       "{\"format\": \"ubj\"}", &len, &data),
            "save");
  return std::vector<uint8_t>(data, data + len);
}

void XGBModel::load(const std::vector<uint8_t>& bytes) {
  BoosterHandle b = nullptr;
  check_xgb(XGBoosterCreate(nullptr, 0, &b), "create");
  if (XGBoosterLoadModelFromBuffer(b, bytes.data(), bytes.size()) != 0) {
    const std::string why = XGBGetLastError();
    XGBoosterFree(b);
    TESSERA_FAIL() << "XGBoost load: " << why;
  }
  reset();
  booster_ = b;
  if (options_.threads > 0) set_param(b, "nthread", std::to_string(options_.threads));
}

#else  // !TESSERA_HAVE_XGBOOST

namespace {
[[noreturn]] void unavailable() {
  TESSERA_FAIL() << "XGBoost cost model unavailable: Tessera was built without libxgboost";
}
}  // namespace

bool XGBModel::compiled_in() { return false; }
XGBModel::XGBModel(XGBOptions options) : options_(options) {}
XGBModel::~XGBModel() = default;
void XGBModel::reset() {}
void XGBModel::fit(const std::vector<ProgramFeatures>&, const std::vector<double>&,
                   const std::vector<int>&) {
  unavailable();
}
std::vector<double> XGBModel::predict(const std::vector<ProgramFeatures>&) const { unavailable(); }
std::vector<uint8_t> XGBModel::save() const { unavailable(); }
void XGBModel::load(const std::vector<uint8_t>&) { unavailable(); }

#endif  // TESSERA_HAVE_XGBOOST

void XGBModel::save_file(const std::string& path) const {
  const std::vector<uint8_t> bytes = save();
  std::ofstream f(path, std::ios::binary);
  TESSERA_CHECK(f.good()) << "cannot write " << path;
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  TESSERA_CHECK(f.good()) << "writing " << path << " failed";
}

void XGBModel::load_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TESSERA_CHECK(f.good()) << "cannot read " << path;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  load(bytes);
}

}  // namespace tessera::cost
