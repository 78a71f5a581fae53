#pragma once
// Reads that leave their tensor's shape.
//
// Code generation reads memory at an index as it is: a read outside its tensor's shape gives the
// tensor's pad_value only where a pass made that explicit (a select guarding the read, as
// derive::explicit_padding and the layout passes write). EinNet-form expressions
// (derive/expressions.h) rely on implicit zero padding, so compiling one as it stands would read
// other memory. The compile call therefore rejects any read whose index is affine in the
// iterators and provably leaves the shape somewhere in the iteration box, outside every select
// that could guard it. Affine indices over a box attain their interval's ends, so the check has
// no false alarms; reads it cannot decide (data-dependent or symbolic) are left alone.
#include <vector>

#include "ir/tensor.h"

namespace tessera::ir {

// Throws tessera::Error naming the first such read: its tensor, dimension, index range and size.
void check_reads_within_shapes(const std::vector<Tensor>& outputs);

}  // namespace tessera::ir
