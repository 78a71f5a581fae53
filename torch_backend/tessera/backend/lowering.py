"""ATen operator -> Tessera tensor-expression lowering: the registry and the lowering context.

Each supported ATen overload has a Lowering: a kind that drives partitioning and a function
that builds tensor-expression definitions from the operator library (tessera._C.ops). Kinds:

  anchor       matmul / conv: starts its own partition; elementwise consumers fuse into it
  reduce       reductions and the norms/softmax built from them
  elementwise  pointwise ops (and injective ops that copy: cat, pad, embedding, clone)
  view         zero-copy views in eager (view, permute, expand, slice, getitem, ...): they are
               computed inside a partition when both ends are in it, by ATen (free) otherwise
  source       tensors that read no input data (full, arange, zeros_like): recomputed inside
               every partition that reads them

The lowering functions (lower_*.py) receive resolved arguments: tensor arguments as Tessera
tensors, everything else as concrete Python values (the graph is specialised on its shapes).
In a plan for a range of sizes (symbolic.py) the metas a lowering reads through ctx.meta carry
symbolic shapes (Tessera size expressions, _C.Expr, where a dimension depends on a size): a
lowering that needs a concrete size raises on them (int() of an Expr), and its partition is
left to ATen; ctx.concrete holds the metas recorded for the first call.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Callable, Dict, Optional

import torch
import torch.fx as fx

from .. import _C
from .meta import TensorMeta

ops = _C.ops
aten = torch.ops.aten

KINDS = ("anchor", "reduce", "elementwise", "view", "source")

# Tensor dtypes a Tessera kernel may read or produce. Floating point is float32 only for now;
# other float dtypes run through ATen (logged).
_TE_DTYPES = {
    torch.float32: "float32",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.bool: "bool",
}


def te_dtype(dtype: torch.dtype) -> str:
    return _TE_DTYPES[dtype]


@dataclasses.dataclass
class Lowering:
    kind: str
    fn: Callable[..., Any]
    # Extra support check on the node (shapes, arguments, users); returns why it is
    # unsupported, or None.
    check: Optional[Callable[["fx.Node", Dict[fx.Node, Any]], Optional[str]]] = None


LOWERINGS: Dict[Any, Lowering] = {}


def register(targets, kind: str, check=None):
    """Decorator: registers fn as the lowering of one or more ATen overloads."""
    assert kind in KINDS, kind
    if not isinstance(targets, (list, tuple)):
        targets = [targets]

    def deco(fn):
        for t in targets:
            LOWERINGS[t] = Lowering(kind, fn, check)
        return fn
    return deco


class LowerCtx:
    """State of lowering one partition: the Tessera value of every FX node lowered so far."""

    def __init__(self, metas: Dict[fx.Node, Any], kind_of: Callable[[fx.Node], Any] = None,
                 concrete: Optional[Dict[fx.Node, Any]] = None):
        self.metas = metas
        self.concrete = metas if concrete is None else concrete  # the recorded call's metas
        self.kind_of = kind_of or (lambda n: LOWERINGS[n.target].kind)
        self.env: Dict[fx.Node, Any] = {}
        # Values several lowerings of the partition share, by a key of their own: sin and cos
        # of one input share its argument reduction (lower_math.py).
        self.shared: Dict[Any, Any] = {}
        # External inputs read in a permuted physical layout: node -> (placeholder, perm)
        # where the placeholder is input.permute(perm) made contiguous.
        self.physical: Dict[fx.Node, Any] = {}

    def meta(self, node: fx.Node) -> Any:
        return self.metas[node]

    def resolve(self, a: Any) -> Any:
        if isinstance(a, fx.Node):
            if a in self.env:
                return self.env[a]
            m = self.metas[a]
            if isinstance(m, TensorMeta) or (isinstance(m, (list, tuple)) and any(
                    isinstance(x, TensorMeta) for x in m)):
                raise KeyError(f"tessera: internal: {a.name} was not lowered before its use")
            return m  # a concrete scalar (symbolic sizes are concrete at run time)
        if isinstance(a, (list, tuple)):
            return type(a)(self.resolve(x) for x in a)
        if isinstance(a, dict):
            return {k: self.resolve(v) for k, v in a.items()}
        return a

    def _resolve_meta(self, a: Any) -> Any:
        if isinstance(a, fx.Node):
            return self.metas[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._resolve_meta(x) for x in a)
        if isinstance(a, dict):
            return {k: self._resolve_meta(v) for k, v in a.items()}
        return a

    def lower(self, node: fx.Node) -> Any:
        low = LOWERINGS[node.target]
        if low.kind == "source":
            # Sources read no data: a tensor argument (full_like's) stands for its meta.
            args, kwargs = self._resolve_meta(node.args), self._resolve_meta(node.kwargs)
        else:
            args, kwargs = self.resolve(node.args), self.resolve(node.kwargs)
        out = low.fn(self, node, *args, **kwargs)
        self.env[node] = out
        return out


# ---- helpers shared by the lowering files ------------------------------------------------------

def is_te(x: Any) -> bool:
    return isinstance(x, _C.Tensor)


def cast(x: Any, dtype: torch.dtype) -> Any:
    """Casts a Tessera tensor to dtype (no-op when equal); Python scalars pass through."""
    if not is_te(x):
        return x
    want = te_dtype(dtype)
    return x if x.dtype == want else ops.cast(x, want)


def _dim(d: Any) -> Any:
    return d if isinstance(d, _C.Expr) else int(d)


def same_shape(a, b) -> bool:
    """Equal shapes, symbolic entries compared by their printed (simplified) form."""
    return len(a) == len(b) and all(repr(x) == repr(y) for x, y in zip(a, b))


def reshape(x, shape) -> Any:
    shape = [_dim(d) for d in shape]
    return x if same_shape(x.shape, shape) else ops.reshape(x, shape)


def identity(x) -> Any:
    """A compute copy of x (a kernel output must be a computed tensor, not an input)."""
    return ops.permute(x, list(range(len(x.shape))))


def out_dtype(ctx: LowerCtx, node: fx.Node) -> torch.dtype:
    m = ctx.meta(node)
    if isinstance(m, (list, tuple)):
        m = m[0]
    return m.dtype


def norm_dims(dims, ndim: int):
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % ndim if ndim else 0 for d in dims})


def users_of_index(node: fx.Node):
    """The getitem indices of a tuple-returning node that are used."""
    used = set()
    for u in node.users:
        if u.op == "call_function" and u.target is operator.getitem:
            if u.users:
                used.add(u.args[1])
        else:
            used.add(None)  # the tuple itself escapes
    return used


def _load_lowerings() -> None:
    # Imported for their registrations.
    from . import (lower_anchor, lower_elementwise, lower_division, lower_math,  # noqa: F401
                   lower_reduce, lower_shape)


_load_lowerings()
