"""Concrete facts about every value of an FX graph, recorded by running it once.

The backend specialises a graph on the shapes it is called with. Running the graph eagerly on
the first call of each shape gives, for every node, the exact shape, strides and dtype eager
PyTorch produces (and the values of symbolic sizes), without re-deriving torch's shape and
stride rules here; that first call's results are returned to the caller, so nothing runs twice.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.fx as fx


@dataclasses.dataclass(frozen=True)
class TensorMeta:
    shape: Tuple[int, ...]
    stride: Tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    # The value is an inference tensor (made under torch.inference_mode): it has no version
    # counter, so a weight stored that way is packed again on every call. Not part of equality.
    inference: bool = dataclasses.field(default=False, compare=False)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def is_contiguous(self) -> bool:
        return self.stride == contiguous_strides(self.shape) or _same_ignoring_unit_dims(
            self.shape, self.stride, contiguous_strides(self.shape))

    def example(self) -> torch.Tensor:
        """A tensor with this shape, strides and dtype, filled with harmless values: normal
        floats, zeros for integers (always valid indices), random bools. It is an inference
        tensor exactly when the recorded value was one: a weight without a version counter is
        packed again on every call (kernel_build.PackedInput), and a candidate must be timed
        paying that cost exactly when the compiled model will."""
        size = 1 + sum((s - 1) * st for s, st in zip(self.shape, self.stride))
        if self.numel == 0:
            size = 0
        with torch.inference_mode(self.inference):
            base = torch.empty(size, dtype=self.dtype, device=self.device)
            if self.dtype.is_floating_point:
                base.normal_()
            elif self.dtype == torch.bool:
                base.copy_(torch.rand(size) > 0.5)
            else:
                base.zero_()
            return base.as_strided(self.shape, self.stride)


def contiguous_strides(shape) -> Tuple[int, ...]:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def dense_permutation(shape, stride) -> Optional[List[int]]:
    """The dim order (outermost first) in which a tensor with these strides is dense, or None
    when it has gaps or overlaps. Size-1 dims carry no offset and go first: a kernel stored in
    this order gets its loop nest from it (ALT's reorder), and a size-1 innermost dim would leave
    it nothing to vectorize (NHWC at batch 1 is [0, 2, 3, 1], not [2, 3, 1, 0])."""
    big = [d for d in range(len(shape)) if shape[d] != 1]
    order = sorted(big, key=lambda d: (-stride[d], d))
    expect = 1
    for d in reversed(order):
        if stride[d] != expect:
            return None
        expect *= shape[d]
    return [d for d in range(len(shape)) if shape[d] == 1] + order


def _same_ignoring_unit_dims(shape, a, b) -> bool:
    return all(s == 1 or x == y for s, x, y in zip(shape, a, b))


def describe(value: Any) -> Any:
    """TensorMeta for tensors (recursively inside lists/tuples); other values as they are."""
    if isinstance(value, torch.Tensor):
        return TensorMeta(tuple(value.shape), tuple(value.stride()), value.dtype, value.device,
                          value.is_inference())
    if isinstance(value, (list, tuple)):
        return type(value)(describe(v) for v in value)
    if isinstance(value, torch.SymInt):  # never symbolic at run time, but be safe
        return int(value)
    return value


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm, garbage_collect_values=True)
        self.metas: Dict[fx.Node, Any] = {}

    def run_node(self, n: fx.Node) -> Any:
        out = super().run_node(n)
        self.metas[n] = describe(out)
        return out


def record(gm: fx.GraphModule, args: List[Any]) -> Tuple[Any, Dict[fx.Node, Any]]:
    """Runs `gm` eagerly on `args`; returns its outputs and the meta of every node."""
    rec = _Recorder(gm)
    with torch.no_grad():
        out = rec.run(*args)
    return out, rec.metas


def is_tensor_meta(m: Any) -> bool:
    return isinstance(m, TensorMeta)
