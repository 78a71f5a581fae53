#pragma once
// XGBoost cost model with Ansor's pack-sum scores, through XGBoost's C API.
//
// A program's score is the sum of its stores' scores: every feature row gets a tree-ensemble
// output, and the rows of one program add up. Two objectives train it.
//
// kRank (the default): a pairwise logistic loss over programs of one task (group),
//     L = sum_{p, q in one group, y_p > y_q} w_pq log(1 + exp(-(yhat_p - yhat_q))),
//     w_pq = (y_p - y_q) kRankPairScale / n_g      (n_g = programs of the group)
// Only orderings within a task are learned, so tasks whose label scales differ (a slow kernel's
// best is another's median) do not fight over absolute scores: a model trained on some tasks
// ranks an unseen one far better than the squared loss does (benchmarks/cost_data.py). w_pq
// weighs a pair by how far apart its throughputs are (so the fast programs' order matters most,
// as the search needs), and 1 / n_g keeps a program's summed gradient independent of its task's
// size. Every row r of p gets grad_r = dL/dyhat_p and hess_r = n_p sum_pairs w s (1 - s)
// (s the pair's logistic), the diagonal bound described below. Cost: O(n_g^2) per group and
// boosting round.
//
// kSquared (Ansor's): over programs p,
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
// The analytic prior: a program's score also has prior_weight x its program row's analytic
// speedup (cost/features.h, column 144; Gensor's estimate over the task's rules schedule) added,
// as a fixed offset the trees are fitted around. An unseen task is then ranked by the analytic
// model, corrected where the trees learned better from other tasks, instead of by trees alone.
//
// Built without XGBoost (xgb_model.cc compiled without TESSERA_HAVE_XGBOOST), available() is false
// and fit/predict/save/load throw tessera::Error saying so.
#include <cstdint>
#include <string>
#include <vector>

#include "cost/cost_model.h"

namespace tessera::cost {

enum class XGBObjective { kRank, kSquared };

struct XGBOptions {
  XGBObjective objective = XGBObjective::kRank;
  int rounds = 60;              // boosting iterations per fit (the model is retrained per round)
  int max_depth = 10;           // Ansor's setting
  double eta = 0.2;             // learning rate (Ansor's setting)
  double gamma = 0.001;         // minimum loss reduction of a split (Ansor's setting)
  double min_child_weight = 0;  // the pack-sum Hessians are small weights; no floor
  bool weight_by_label = true;  // kSquared: w_p = max(label, min_weight), else 1
  double min_weight = 0.1;      // weight of failed and slow programs, so they still pull down
  int threads = 0;              // XGBoost's nthread (0: its default)
  std::string tree_method = "hist";  // histogram splits: far cheaper than exact on 10^4 rows
  double prior_weight = 2.0;         // score offset per doubling of the analytic estimate
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
  void fit(const std::vector<ProgramFeatures>& programs, const std::vector<double>& labels,
           const std::vector<int>& groups = {}) override;
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

// ---- the pack-sum objectives (exposed for tests) -----------------------------------------------
// row_program[r]: the program of feature row r; row_pred[r]: the model's current output for it.
std::vector<double> pack_sum_weights(const std::vector<double>& labels, const XGBOptions& o);
double pack_sum_loss(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                     const std::vector<double>& labels, const std::vector<double>& weights);
void pack_sum_gradient(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                       const std::vector<double>& labels, const std::vector<double>& weights,
                       std::vector<float>* grad, std::vector<float>* hess);

// The rank objective: a pair's weight scale (w_pq above), so that a program's gradient, summed
// over the ~n_g pairs of its task, is about as large as a squared-loss residual of labels in
// [0, 1] times this; with XGBoost's L2 leaf penalty of 1 it sets how far one round moves.
inline constexpr double kRankPairScale = 16;
// groups[p]: the task of program p (empty: one task).
double pack_sum_rank_loss(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                          const std::vector<double>& labels, const std::vector<int>& groups);
void pack_sum_rank_gradient(const std::vector<float>& row_pred, const std::vector<int>& row_program,
                            const std::vector<double>& labels, const std::vector<int>& groups,
                            std::vector<float>* grad, std::vector<float>* hess);

}  // namespace tessera::cost
