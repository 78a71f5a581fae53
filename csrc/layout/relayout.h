#pragma once
// Applying layouts to a compute DAG (ALT's access rewriting and loop-nest reconstruction).
//
// Given a layout for some tensors of a DAG (by name), the DAG is rebuilt so that:
//   - a relaid placeholder is a placeholder of its physical shape (the caller passes its data in
//     that layout);
//   - a relaid compute tensor is computed over its physical dims: its traversal iterators are the
//     physical dims and its body is the old body at the logical index S^-1(p), so the loop nest
//     the schedule tiles is the one of the output layout (physical positions that hold no
//     element compute the reduction identity or 0);
//   - every read X[L'] of a relaid tensor becomes X_phys[S_X(L')], simplified in context;
//   - a summation iterator that a rewritten read now indexes as r / f and r % f (a split layout
//     along a summed dim) is itself split into r_o * f + r_i when f divides its extent, so the
//     inner loops index the physical dims directly instead of dividing.
// Names, dtypes, tags and attributes are kept (a relaid op gets attrs["layout"] = its layout's
// text), so stage annotations and constant-input names refer to the same tensors as before.
// The values computed are the same; only where they are stored changes.
#include <map>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "layout/layout.h"

namespace tessera::layout {

using LayoutMap = std::map<std::string, Layout>;

struct Relaid {
  std::vector<ir::Tensor> outputs;  // in the given order; a relaid output is its physical tensor
  std::vector<ir::Tensor> inputs;   // in the given order; a relaid input has its physical shape
};

// Throws tessera::Error when a name is not exactly one tensor of the DAG or a layout's logical
// shape is not the tensor's (constant) shape.
Relaid apply_layouts(const std::vector<ir::Tensor>& outputs, const std::vector<ir::Tensor>& inputs,
                     const LayoutMap& layouts);

// The same DAG with every compute tensor named once: where computes share a name (the lowering
// names a tensor by its op, so a partition easily has two "add"s), the later ones in
// topological order become name_1, name_2, ... (a name the DAG already uses is skipped).
// Layouts are given by name, so a DAG must be uniquely named before they apply to it.
// Placeholders keep their names.
Relaid uniquely_named(const std::vector<ir::Tensor>& outputs,
                      const std::vector<ir::Tensor>& inputs);

// Conversions as compute ops (a layout conversion left between two operators, or the write-back
// of a relaid graph output): to_physical(t) stores t in `layout` (positions holding no element
// get 0); to_logical(p) reads the physical tensor `p` back into the logical shape.
ir::Tensor to_physical(const ir::Tensor& t, const Layout& layout, const std::string& name);
ir::Tensor to_logical(const ir::Tensor& physical, const Layout& layout, const std::string& name);

// Layouts given as text by tensor name (KernelSchedule::layouts, Python), parsed against the
// shapes of the DAG's tensors (tessera::Error for a name that is not one of them).
LayoutMap parse_layouts(const std::vector<ir::Tensor>& outputs,
                        const std::vector<ir::Tensor>& inputs,
                        const std::map<std::string, std::string>& texts);

// The constant shape of `t` (tessera::Error when a dim is symbolic: layouts need constant shapes).
std::vector<int64_t> constant_shape(const ir::Tensor& t);

}  // namespace tessera::layout
