#include "tune/reuse/reuse_features.h"

#include <cmath>
#include <functional>

#include "tune/search/space.h"
#include "util/check.h"

namespace tessera::tune::reuse {

namespace {

// The transfer granularity between DRAM/L3 and a core's caches.
constexpr int kCacheLineBytes = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::vector<int64_t> spatial_extents(const gensor::StageSpace& sp) {
  return {sp.extents.begin(), sp.extents.begin() + sp.num_spatial};
}

// A tile over every iterator: `spatial` for the spatial axes, `reduce` for the reduce axes.
std::vector<int64_t> full_tile(const std::vector<int64_t>& spatial,
                               const std::vector<int64_t>& reduce) {
  std::vector<int64_t> tile = spatial;
  tile.insert(tile.end(), reduce.begin(), reduce.end());
  return tile;
}

bool is_input(const cost::TensorAccesses& t) { return !t.is_output && !t.epilogue; }

// Input bytes one task touches with spatial tile `spatial` and reduce tile `reduce`.
double input_bytes(const gensor::StageSpace& sp, const std::vector<int64_t>& spatial,
                   const std::vector<int64_t>& reduce, int line_bytes = 0) {
  const std::vector<int64_t> tile = full_tile(spatial, reduce);
  double bytes = 0;
  for (size_t t = 0; t < sp.regions->tensors().size(); ++t) {
    if (is_input(sp.regions->tensors()[t])) bytes += sp.regions->region_bytes(t, tile, line_bytes);
  }
  return bytes;
}

double tile_count(const std::vector<int64_t>& extents, const std::vector<int64_t>& tile) {
  double n = 1;
  for (size_t a = 0; a < extents.size(); ++a)
    n *= static_cast<double>(ceil_div(extents[a], tile[a]));
  return n;
}

// Calls f(counts) for every way of writing `total` as a product of one count per axis with
// count[a] <= limit[a].
void for_each_factorization(int64_t total, const std::vector<int64_t>& limit,
                            const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> counts(limit.size(), 1);
  std::function<void(size_t, int64_t)> rec = [&](size_t a, int64_t left) {
    if (a + 1 == limit.size()) {
      if (left <= limit[a]) {
        counts[a] = left;
        f(counts);
      }
      return;
    }
    for (int64_t c = 1; c <= std::min(left, limit[a]); ++c) {
      if (left % c != 0) continue;
      counts[a] = c;
      rec(a + 1, left / c);
    }
  };
  if (limit.empty()) {
    if (total == 1) f(counts);
    return;
  }
  rec(0, total);
}

}  // namespace

ReuseFeatures reuse_features(const gensor::StageSpace& sp, const schedule::StageAnnotation& ann) {
  TESSERA_CHECK(ann.sketch == schedule::Sketch::kMultiLevelTiling)
      << "reuse features: stage " << sp.op_name << " is not a multi-level tiling";
  const size_t ns = static_cast<size_t>(sp.num_spatial);
  TESSERA_CHECK(ann.tile_outer.size() == ns && ann.tile_reg.size() == ns &&
                ann.tile_reduce.size() == static_cast<size_t>(sp.num_reduce))
      << "reuse features: annotation of " << ann.op << " does not match the axes of " << sp.op_name;
  const std::vector<int64_t> extents = spatial_extents(sp);
  ReuseFeatures f;
  for (size_t a = 0; a < ns; ++a) f.bshape.push_back(std::min(ann.tile_outer[a], extents[a]));
  f.tshape = ann.tile_reg;
  for (int r = 0; r < sp.num_reduce; ++r)
    f.lshape.push_back(ceil_div(sp.extents[ns + r], ann.tile_reduce[r]));
  f.tasks = tile_count(extents, ann.tile_outer);
  double per_task = 1;
  for (size_t a = 0; a < ns; ++a)
    per_task *= static_cast<double>(ann.tile_outer[a] / ann.tile_reg[a]);
  f.register_tiles = f.tasks * per_task;
  f.panel_bytes = f.tasks * panel_bytes_per_task(sp, f.bshape, f.lshape);
  return f;
}

double panel_bytes_per_task(const gensor::StageSpace& sp, const std::vector<int64_t>& bshape,
                            const std::vector<int64_t>& lshape) {
  std::vector<int64_t> reduce;
  for (int r = 0; r < sp.num_reduce; ++r)
    reduce.push_back(ceil_div(sp.extents[sp.num_spatial + r], lshape[r]));
  return input_bytes(sp, bshape, reduce);
}

double bshape_cost(const gensor::StageSpace& sp, const std::vector<int64_t>& bshape) {
  const std::vector<int64_t> whole_reduction(sp.extents.begin() + sp.num_spatial, sp.extents.end());
  const double lines_per_task =
      input_bytes(sp, bshape, whole_reduction, kCacheLineBytes) / kCacheLineBytes;
  return tile_count(spatial_extents(sp), bshape) * lines_per_task;
}

std::optional<double> tshape_cost(const gensor::StageSpace& sp,
                                  const std::vector<int64_t>& tshape) {
  double points = 1;
  for (int64_t t : tshape) points *= static_cast<double>(t);
  const int width =
      sp.vector_axis >= 0 ? gensor::vector_width_for(tshape[sp.vector_axis], sp.lanes) : 1;
  const double accumulators = points / width;
  if (accumulators > search::SpaceLimits{}.accumulator_register_share * sp.num_vector_registers)
    return std::nullopt;
  // One inner reduce step: every reduce iterator at a single value.
  const std::vector<int64_t> tile = full_tile(tshape, std::vector<int64_t>(sp.num_reduce, 1));
  double loads = 0;
  for (size_t t = 0; t < sp.regions->tensors().size(); ++t) {
    if (!is_input(sp.regions->tensors()[t])) continue;
    double elements = 1;
    for (int64_t d : sp.regions->region_shape(t, tile)) elements *= static_cast<double>(d);
    loads += sp.vector_dependent[t] ? std::ceil(elements / width) : elements;
  }
  return loads / points;
}

std::optional<std::vector<int64_t>> get_bshape(const gensor::StageSpace& sp, int64_t tasks) {
  const std::vector<int64_t> extents = spatial_extents(sp);
  std::optional<std::vector<int64_t>> best;
  double best_cost = 0;
  for_each_factorization(tasks, extents, [&](const std::vector<int64_t>& counts) {
    std::vector<int64_t> bshape;
    for (size_t a = 0; a < extents.size(); ++a) {
      const int64_t tile = ceil_div(extents[a], counts[a]);
      if (ceil_div(extents[a], tile) != counts[a]) return;  // no tile gives this count
      bshape.push_back(tile);
    }
    const double cost = bshape_cost(sp, bshape);
    if (!best || cost < best_cost) {
      best = bshape;
      best_cost = cost;
    }
  });
  return best;
}

std::optional<std::vector<int64_t>> get_tshape(const gensor::StageSpace& sp,
                                               const std::vector<int64_t>& bshape,
                                               int64_t tiles_per_task) {
  std::optional<std::vector<int64_t>> best;
  double best_cost = 0;
  for_each_factorization(tiles_per_task, bshape, [&](const std::vector<int64_t>& counts) {
    std::vector<int64_t> tshape;
    for (size_t a = 0; a < bshape.size(); ++a) {
      if (bshape[a] % counts[a] != 0) return;  // register tiles partition the cache tile
      tshape.push_back(bshape[a] / counts[a]);
    }
    const std::optional<double> cost = tshape_cost(sp, tshape);
    if (cost && (!best || *cost < best_cost)) {
      best = tshape;
      best_cost = *cost;
    }
  });
  return best;
}

std::vector<int64_t> get_lshape(const gensor::StageSpace& sp, const std::vector<int64_t>& bshape,
                                double panel_bytes_per_task_wanted) {
  TESSERA_CHECK(panel_bytes_per_task_wanted > 0) << "reuse: GetLShape needs a positive target";
  std::vector<int64_t> best(sp.num_reduce, 1);
  double best_gap =
      std::abs(std::log(panel_bytes_per_task(sp, bshape, best) / panel_bytes_per_task_wanted));
  for (int r = 0; r < sp.num_reduce; ++r) {
    const int64_t extent = sp.extents[sp.num_spatial + r];
    for (int64_t trips = 2; trips <= extent; ++trips) {
      if (extent % trips != 0) continue;
      std::vector<int64_t> lshape(sp.num_reduce, 1);
      lshape[r] = trips;
      const double gap = std::abs(
          std::log(panel_bytes_per_task(sp, bshape, lshape) / panel_bytes_per_task_wanted));
      if (gap < best_gap) {
        best = lshape;
        best_gap = gap;
      }
    }
  }
  return best;
}

}  // namespace tessera::tune::reuse
