#pragma once
// XGBoost cost model with Ansor's pack-sum objective, through XGBoost's C API.
//
// A program's score is the sum of its stores' scores: every feature row gets a tree-ensemble
// output, and the rows of one program add up. Training minimises, over programs p,
//     L = sum_p w_p (yhat_p - y_p)^2 / 2,   yhat_p = sum_{rows r of p} f(x_r)
// with a custom gradient passed to XGBoosterBoostOneIter: every row r of p gets
//     grad_r = w_p (yhat_p - y_p),   hess_r = w_p n_p      (n_p = rows of p)
// grad_r is the exact derivative of L in f(x_r). The Hessian of L in p's rows is w_p 1 1^T, which
// couples them; boosting uses a diagonal, and w_p (its diagonal) lets a tree holding all n_p rows
// move yhat_p n_p times a Newton step: with ~20 stores per lowered program and eta 0.2 the fit
// oscillates and diverges. w_p n_p I bounds w_p 1 1^T from above, so each step stays within the
// Newton step of the program sum. w_p = max(y_p, min_weight) when weight_by_label (Ansor: the
// fast programs, the ones the search must rank right, count most), else 1. base_score is 0 so
// that a program's sum does not grow with its number of stores.
//
// Built without XGBoost (xgb_model.cc compiled without TESSERA_HAVE_XGBOOST), available() is false
// and fit/predict/save/load throw tessera::Error saying so.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.h"

namespace tessera::cost {

struct XGBOptions {
  int rounds = 60;              // boosting iterations per fit (the model is retrained per round)
  int max_depth = 10;           // Ansor's setting
  double eta = 0.2;             // learning rate (Ansor's setting)
  double gamma = 0.001;         // minimum loss reduction of a split (Ansor's setting)
  double min_child_weight = 0;  // the pack-sum Hessians are small weights; no floor
  bool weight_by_label = true;  // w_p = max(label, min_weight), else 1
  double min_weight = 0.1;      // weight of failed and slow programs, so they still pull down
  int threads = 0;              // XGBoost's nthread (0: its default)
  std::string tree_method = "hist";  // histogram splits: far cheaper than exact on 10^4 rows
  uint64_t seed = 0;
};

class XGBModel : public CostModel {
 public:
  explicit XGBModel(XGBOptions options = {});
  ~XGBModel() override;
  XGBModel(const XGBModel&) = delete;
  XGBModel& operator=(const XGBModel&) = delete;

  // Was the library compiled in?
  static bool compiled_in();

  std::string name() const override { return "xgboost"; }
  bool available() const override { return compiled_in(); }
  bool trained() const override { return booster_ != nullptr; }
  void fit(const std::vector<ProgramFeatures>& programs,
           const std::vector<double>& labels) override;
  // Untrained: all zeros.
  std::vector<double> predict(const std::vector<ProgramFeatures>& programs) const override;

  // The trained booster as bytes (XGBoost's UBJSON model format) and back; load() replaces
  // this model's booster. Predictions after a round trip are identical.
  std::vector<uint8_t> save() const;
  void load(const std::vector<uint8_t>& bytes);
  void save_file(const std::string& path) const;
  void load_file(const std::string& path);

  const XGBOptions& options() const { return options_; }

 private:
  void reset();
  XGBOptions options_;
  void* booster_ = nullptr;  // BoosterHandle
};

// ---- the pack-sum objective (exposed for tests) ------------------------------------------------
// row_program[r]: the program of feature row r; row_pred[r]: the model's current output for it.
std::vector<double> pack_sum_weights(const std::vector<double>& labels, const XGBOptions& o);
double pack_sum_loss(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                     const std::vector<double>& labels, const std::vector<double>& weights);
void pack_sum_gradient(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                       const std::vector<double>& labels, const std::vector<double>& weights,
                       std::vector<float>* grad, std::vector<float>* hess);

}  // namespace tessera::cost
