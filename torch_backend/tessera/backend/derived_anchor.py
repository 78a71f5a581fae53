"""EinNet derivations offered to convolution partitions (options={"derive": True}).

A 2-D convolution anchor (one group, float32, contiguous) is written in EinNet's form
(_C.derive_expr.conv2d: zero padding implicit) and derived (_C.derive: Algorithm 1, choice by
measurement, then the derived program's kernel must beat the convolution's own Tessera kernel).
When a derivation wins there, the partition gets one more candidate, "derived": the derived
program's kernel (bias added in it) for the convolution, then the partition's other operators
as in "split". The planner measures it against the others like any candidate, so derivation
never makes a partition slower than its best alternative.

Derivations are cached per convolution signature in this process (repeated layers derive once).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import torch
import torch.fx as fx

from .. import _C
from .kernel_build import KernelSpec, OutputSpec
from .log import log_once, logger
from .meta import TensorMeta

aten = torch.ops.aten

# Convolution signature -> _C.derive's report (without a found derivation: report["found"] False).
_reports: Dict[tuple, dict] = {}


def _symmetric(v) -> Optional[int]:
    v = list(v)
    return int(v[0]) if v and all(x == v[0] for x in v) else None


def _signature(anchor: fx.Node, metas: Dict[fx.Node, Any]) -> Optional[tuple]:
    """(x shape, w shape, stride, pad, dilation) of a convolution derivation can take, or None."""
    if anchor.target is not aten.convolution.default:
        return None
    x, w, bias, stride, padding, dilation, transposed, _, groups = anchor.args
    mx, mw, mo = metas.get(x), metas.get(w), metas.get(anchor)
    if transposed or groups != 1 or not all(isinstance(m, TensorMeta) for m in (mx, mw, mo)):
        return None
    if mx.ndim != 4 or any(m.dtype != torch.float32 for m in (mx, mw, mo)):
        return None
    if not (mx.is_contiguous() and mw.is_contiguous() and mo.is_contiguous()):
        return None
    s, p, d = _symmetric(stride), _symmetric(padding), _symmetric(dilation)
    if s is None or p is None or d is None:
        return None
    return (tuple(mx.shape), tuple(mw.shape), s, p, d)


def _derive(sig: tuple, tune: str) -> dict:
    report = _reports.get(sig)
    if report is None:
        x_shape, w_shape, s, p, d = sig
        x = _C.placeholder("X", list(x_shape), "float32")
        k = _C.placeholder("K", list(w_shape), "float32")
        out = _C.derive_expr.conv2d(x, k, s, p, d)
        try:
            report = _C.derive([out], [x, k], weights=[1], tune=tune if tune != "search" else
                               "construct")
        except Exception as e:  # a derivation that fails costs the candidate, not the partition
            log_once(f"derive-failure:{sig}", f"tessera: conv {list(x_shape)} x "
                     f"{list(w_shape)}: derivation failed ({type(e).__name__}: {e})", level=30)
            report = {"found": False}
        report["inputs"] = [x, k]
        _reports[sig] = report
        if report["found"]:
            logger.info("tessera: conv %s x %s derived in %d rules (%s): %.3f -> %.3f ms",
                        list(x_shape), list(w_shape), report["depth"], ", ".join(report["rules"]),
                        report["original_ms"], report["derived_ms"])
    return report


def derived_spec(anchor: fx.Node, metas: Dict[fx.Node, Any], tune: str,
                 weights: frozenset) -> Optional[KernelSpec]:
    """The kernel spec computing the convolution `anchor` (bias included) by its derived
    program, or None when the convolution has no derivation that measured faster."""
    sig = _signature(anchor, metas)
    if sig is None:
        return None
    report = _derive(sig, tune)
    if not report["found"]:
        return None
    x, w, bias = anchor.args[0], anchor.args[1], anchor.args[2]
    te_inputs = list(report["inputs"])
    (out,) = report["outputs"]
    if bias is not None:
        channels = int(metas[bias].shape[0])
        b = _C.placeholder("B", [channels], "float32")
        out = _C.ops.add(out, _C.ops.reshape(b, [1, channels, 1, 1]))
        te_inputs.append(b)
    spec = KernelSpec()
    spec.members = [anchor]
    spec.inputs = [x, w] + ([bias] if bias is not None else [])
    spec.outputs = [anchor]
    spec.te_inputs = te_inputs
    spec.te_outputs = [out]
    spec.in_preps = [None] * len(spec.inputs)
    spec.out_specs = [OutputSpec(list(metas[anchor].shape), torch.float32, None, None)]
    spec.metas = metas
    spec.name = "convolution_derived"
    spec.constant_inputs = [i for i, n in enumerate(spec.inputs) if n in weights]
    return spec


def clear() -> None:
    _reports.clear()
