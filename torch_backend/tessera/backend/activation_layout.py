"""Graph-level layout propagation (ALT, options layouts): convolution activations in NHWC.

Kernels write their outputs in the strides the planner's metas give them and read inputs in
whatever dense order they come (kernel_build: a permuted input is index arithmetic, not a copy).
So storing an activation NHWC is a change of its meta's strides: the producing kernel then
writes channel vectors contiguously and every consumer kernel reads that order. This pass picks
the values that may be stored NHWC: a convolution's output and, propagated forward, every 4-D
value computed from one by a non-view op of the same rank (batch norm, activations, residual
adds, pooling). A tensor of a multi-output op (batch norm's result, taken by getitem) counts as
computed by that op from its inputs. Graph inputs and outputs keep eager's strides (the planner
writes outputs back in them), and values that a view reads keep theirs (a view of an NHWC value
would not read the same bytes), so the only conversions left are at the graph's edges and
before views.

With options layouts=True the planner then decides per convolution (plan.py, _plan_layouts):
its partition's kernels are built and measured with the partition's values NHWC and NCHW, the
faster layout is stored, and values of later partitions follow their inputs
(computed_from_nhwc). So a network can keep NHWC where channels are few and NCHW where they
are many, with the conversion folded into the kernel that reads across the change. With
options layouts=None (the default) every candidate is stored NHWC on graphs with a depthwise
convolution (has_depthwise_convolution).

Correct whatever the actual strides are: a kernel input that does not come in the planned order
is made contiguous in that order first (kernel_build._prepare), and ATen steps take any strides.
"""

from __future__ import annotations

import operator
from typing import Any, Dict, Optional, Set, Tuple

import torch
import torch.fx as fx

from .meta import TensorMeta, contiguous_strides
from .partition import Classifier
from .runner import _nodes_in

_CONVOLUTION = {torch.ops.aten.convolution.default}


def _channels_last_strides(shape) -> tuple:
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def _tuple_source(n: fx.Node, metas: Dict[fx.Node, Any]) -> Optional[fx.Node]:
    """The multi-output op whose tensor n takes (getitem of its tuple), else None."""
    if n.op != "call_function" or n.target is not operator.getitem:
        return None
    src = n.args[0]
    ok = isinstance(src, fx.Node) and isinstance(metas.get(src), (tuple, list))
    return src if ok and src.op == "call_function" else None


def _candidate(n: fx.Node, meta: Any, cls: Classifier, outputs: Set[fx.Node],
               item_of_op: bool) -> bool:
    """A 4-D float value in NCHW order with channels and a spatial extent, computed by a
    non-view op (or one tensor of a multi-output op's result), read by no view and not a graph
    output."""
    if n.op != "call_function" or not isinstance(meta, TensorMeta) or meta.ndim != 4:
        return False
    if not meta.dtype.is_floating_point or n in outputs:
        return False
    if cls.kind(n) == "view" and not item_of_op:
        return False
    _, c, h, w = meta.shape
    if c <= 1 or h * w <= 1 or meta.stride != contiguous_strides(meta.shape):
        return False
    return all(u.op == "call_function" and cls.kind(u) != "view" for u in n.users)


def has_depthwise_convolution(gm: fx.GraphModule, metas: Dict[fx.Node, Any]) -> bool:
    """Does the graph convolve with groups == input channels > 1 (a depthwise convolution)?
    What options layouts=None decides by."""
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target not in _CONVOLUTION or len(n.args) < 9:
            continue
        x = metas.get(n.args[0])
        groups = n.args[8]
        if isinstance(x, TensorMeta) and x.ndim == 4 and isinstance(groups, int) and \
                groups > 1 and groups == x.shape[1]:
            return True
    return False


def channels_last_activations(gm: fx.GraphModule, metas: Dict[fx.Node, Any],
                              cls: Classifier) -> Tuple[Dict[fx.Node, Any], Set[fx.Node]]:
    """(`metas` with the chosen activations' strides changed to NHWC, the chosen nodes)."""
    out_node = [n for n in gm.graph.nodes if n.op == "output"][0]
    outputs = set(_nodes_in(out_node.args[0]))
    chosen: Set[fx.Node] = set()
    for n in gm.graph.nodes:
        meta = metas.get(n)
        src = _tuple_source(n, metas)
        if not _candidate(n, meta, cls, outputs, src is not None):
            continue
        computed_from = (src or n).all_input_nodes
        from_conv = n.target in _CONVOLUTION or any(
            a in chosen and metas[a].shape[1] == meta.shape[1] for a in computed_from)
        if from_conv:
            chosen.add(n)
    new = dict(metas)
    for n in chosen:
        store_nhwc(new, n, True)
    return new, chosen


def store_nhwc(metas: Dict[fx.Node, Any], n: fx.Node, nhwc: bool) -> None:
    """Gives value n (one of channels_last_activations' candidates) NHWC or NCHW strides in
    `metas`, in place, and the same to its item in its multi-output op's tuple."""
    m = metas[n]
    stride = _channels_last_strides(m.shape) if nhwc else contiguous_strides(m.shape)
    metas[n] = TensorMeta(m.shape, stride, m.dtype, m.device)
    src = _tuple_source(n, metas)
    if src is not None:
        items = list(metas[src])
        items[n.args[1]] = metas[n]
        metas[src] = type(metas[src])(items)


def is_convolution(n: fx.Node) -> bool:
    return n.op == "call_function" and n.target in _CONVOLUTION


def is_nhwc(meta: Any) -> bool:
    return isinstance(meta, TensorMeta) and meta.ndim == 4 and \
        meta.stride == _channels_last_strides(meta.shape) and \
        meta.stride != contiguous_strides(meta.shape)


def computed_from_nhwc(n: fx.Node, metas: Dict[fx.Node, Any]) -> bool:
    """Forward propagation's rule for a value no convolution computes: stored NHWC when one of
    its inputs with the same channels is (under the layouts `metas` hold now)."""
    src = _tuple_source(n, metas)
    channels = metas[n].shape[1]
    return any(is_nhwc(metas.get(a)) and metas[a].shape[1] == channels
               for a in (src or n).all_input_nodes)
