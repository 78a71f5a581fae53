#pragma once
// A dynamic workload (DietCode): one compute DAG whose shapes mention size variables, each with
// the range of values it takes at run time. One tuning serves every size in the ranges: the
// selected micro-kernels are compiled once over the symbolic sizes, and a dispatcher picks one
// per call (tune/dynamic/dynamic_kernel.h).
//
// A size point is one value per size variable, in the order of `size_vars` (the order in which
// collect_dag finds them, which is also the order of every kernel's run-time size arguments).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/functor.h"
#include "ir/tensor.h"

namespace tessera::tune::dynamic {

using SizePoint = std::vector<int64_t>;

struct SizeRange {
  int64_t lo = 0;  // inclusive
  int64_t hi = 0;  // inclusive
  int64_t count() const { return hi - lo + 1; }
  bool contains(int64_t v) const { return v >= lo && v <= hi; }
};

// A concrete instance of a workload, or a copy with other size variables: a DAG of its own.
struct DagCopy {
  std::vector<ir::Tensor> outputs;
  std::vector<ir::Tensor> inputs;
};

class DynamicWorkload {
 public:
  // Every free size variable of the DAG must have a finite range (its var's [lo, hi], lo >= 0):
  // the range is what the tuning covers. `constant_inputs`: positions of inputs whose values stay
  // the same between calls (weights); every kernel reads those it packs prepacked
  // (tune/dynamic/packed_constants.h). Throws tessera::Error otherwise.
  static DynamicWorkload create(std::vector<ir::Tensor> outputs, std::vector<ir::Tensor> inputs,
                                std::string name = "dynamic",
                                std::vector<int> constant_inputs = {});

  const std::string& name() const { return name_; }
  const std::vector<ir::Tensor>& outputs() const { return outputs_; }
  const std::vector<ir::Tensor>& inputs() const { return inputs_; }
  const std::vector<ir::Var>& size_vars() const { return size_vars_; }
  const std::vector<SizeRange>& ranges() const { return ranges_; }
  size_t num_axes() const { return size_vars_.size(); }
  const std::vector<int>& constant_inputs() const { return constant_inputs_; }
  std::vector<std::string> constant_input_names() const;

  bool in_range(const SizePoint& p) const;
  // The variables' values keyed by node (what ops::run_reference and tune::Task::sizes take).
  std::map<const ir::ExprNode*, int64_t> size_map(const SizePoint& p) const;
  // Each range's upper end: the largest instance (buffers sized for it fit every instance).
  SizePoint largest() const;

  // The DAG with every size variable replaced by its value at `p` (a static workload that the
  // static tuners can tune). Tensor and op names are kept, so a schedule of the instance names
  // the stages of the symbolic DAG too.
  DagCopy instantiate(const SizePoint& p) const;
  // The DAG over new size variables without upper bounds (lower bound 0), in the same order:
  // what the fallback kernel for sizes outside the tuned ranges is compiled over.
  DagCopy widened() const;

 private:
  std::string name_;
  std::vector<ir::Tensor> outputs_, inputs_;
  std::vector<ir::Var> size_vars_;
  std::vector<SizeRange> ranges_;
  std::vector<int> constant_inputs_;  // ascending, distinct
};

// Rebuilds the DAG of `outputs` with the variables of `vmap` replaced (in shapes, extents and
// bodies); every compute op gets fresh iterators whose bounds follow the new extents. Returns the
// new outputs and the new tensors of `inputs`, in order. Names, dtypes, tags, attrs are kept.
DagCopy rebuild_dag(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                    const ir::VarMap& vmap);

// Size points covering the workload's ranges: every point when the box has at most `max_points`
// points, else a grid with up to max_points^(1/axes) values per axis, evenly spread and always
// including both ends of each range. Row-major (the last axis varies fastest).
std::vector<SizePoint> sample_points(const DynamicWorkload& w, int64_t max_points);

}  // namespace tessera::tune::dynamic
