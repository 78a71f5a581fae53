#pragma once
// DietCode's selection of micro-kernels: which few compiled kernels serve a whole range of sizes.
//
// Input: a cost table of predicted times, one row per candidate micro-kernel and one column per
// size point. Each point votes for its k fastest candidates (top-k voting); a greedy weighted set
// cover then keeps candidates until every point has one it voted for, taking at each step the
// candidate with the largest gain
//
//   gain(c) = sum over uncovered points p that voted for c of  w_p * best(p) / time(c, p)
//
// (the paper's Eq. 1 with relative speed in place of its "performance", so a point counts by how
// close c comes to that point's best, whatever the point's size). Every point is then dispatched
// to its fastest selected kernel, and kernels whose removal keeps the loss bounds are dropped,
// least harmful first. Of the covers for k = 1..max_top_k the one with the fewest kernels within
// the bounds wins (ties: the smaller loss); k = 1 keeps each point's own best, so one always is,
// unless max_kernels is smaller than the kernels it needs: the cap then drops the least harmful
// past the bounds, and the cover with the smallest loss wins.
//
// Loss = weighted geometric mean over points of time(dispatched) / best(p), minus 1.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::tune::dynamic {

struct SelectionConstants {
  // Largest geometric-mean slowdown (vs. the best candidate at each point) the selection may add.
  double loss_bound = 0.03;
  // Largest slowdown any one point may take.
  double point_loss_bound = 0.12;
  // Votes per point tried: k = 1 .. max_top_k.
  int max_top_k = 8;
  // Hard cap on kernels: beyond it the least harmful are dropped even past the loss bounds.
  int max_kernels = 12;
};

struct CostTable {
  std::vector<std::vector<double>> ms;  // [candidate][point] predicted time (> 0; inf: unusable)
  std::vector<double> weights;          // per point (> 0; probability or importance); empty: 1
  size_t candidates() const { return ms.size(); }
  size_t points() const { return ms.empty() ? 0 : ms[0].size(); }
  double weight(size_t p) const { return weights.empty() ? 1.0 : weights[p]; }
};

struct Selection {
  std::vector<int> kernels;     // selected candidates (rows of the table), ascending
  std::vector<int> assignment;  // per point: index into `kernels` of its fastest selected one
  int top_k = 1;                // votes per point of the cover chosen
  double loss = 0;              // weighted geomean slowdown vs. each point's best, minus 1
  double worst_point_loss = 0;  // largest slowdown of one point, minus 1
};

// Each point's k fastest candidates (fewer when there are fewer usable ones), fastest first.
std::vector<std::vector<int>> top_k_votes(const CostTable& table, int k);
// Greedy weighted set cover of the points by the candidates they voted for (in pick order).
std::vector<int> greedy_cover(const CostTable& table, const std::vector<std::vector<int>>& votes);
// `kernels` (ascending) with every point dispatched to its fastest one, and the losses.
Selection evaluate_selection(const CostTable& table, std::vector<int> kernels);
// The whole procedure (see above). Throws tessera::Error on an empty or ragged table, or a point
// that no candidate can run.
Selection select_kernels(const CostTable& table, const SelectionConstants& constants = {});

}  // namespace tessera::tune::dynamic
