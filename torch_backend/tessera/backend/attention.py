"""Attention: ATen's CPU flash attention or Tessera's fused attention kernel, by measurement.

Core ATen keeps scaled-dot-product attention as one operator,
aten._scaled_dot_product_flash_attention_for_cpu (decompositions.py keeps it). For each such node
of a graph with fixed shapes, `plan` builds Tessera's kernel (_C.attention_kernel,
csrc/schedule/attention.h: an online-softmax loop nest, nothing of size rows x keys written) for
the recorded shapes and strides, and times it against the ATen operator by the one noise rule
(anchor.decide, whose decisions the records database keeps). Where Tessera's kernel wins, the
node's step calls an AttentionCall instead of the operator; otherwise the operator stays, with
the measured times in tessera.explain.

The kernel reads Q, K and V at the strides they arrive with (the heads of a projection's
output, split by views) and writes both outputs at the strides ATen gives them, so nothing is
copied around it.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, Optional, Tuple

import torch
import torch.fx as fx

from .. import _C
from . import anchor as anchor_choice
from . import keys
from .meta import TensorMeta

SDPA = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default


def is_attention(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is SDPA


def _arguments(node: fx.Node) -> Dict[str, Any]:
    """The operator's arguments by name, defaults filled in."""
    names = ["query", "key", "value", "dropout_p", "is_causal"]
    got = dict(zip(names, node.args))
    got.update(node.kwargs)
    got.setdefault("dropout_p", 0.0)
    got.setdefault("is_causal", False)
    got.setdefault("attn_mask", None)
    got.setdefault("scale", None)
    return got


def _broadcast_strides(meta: TensorMeta) -> Tuple[int, ...]:
    return tuple(0 if size == 1 else stride for size, stride in zip(meta.shape, meta.stride))


def spec_of(node: fx.Node, metas: Dict[fx.Node, Any]) -> Tuple[Optional[dict], str]:
    """(the kernel's spec, "") for an attention node the kernel computes, else (None, why not)."""
    a = _arguments(node)
    q, k, v = (metas.get(a[n]) for n in ("query", "key", "value"))
    outs = metas.get(node)
    if not all(isinstance(m, TensorMeta) for m in (q, k, v)) or not isinstance(outs, tuple):
        return None, "attention on values of unknown shape"
    out, lse = outs[0], outs[1]
    if any(m.dtype != torch.float32 for m in (q, k, v, out)):
        return None, "attention in another dtype than float32"
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        return None, f"{q.ndim}-d attention"
    if a["dropout_p"] != 0.0:
        return None, "attention with dropout"
    batch, heads, q_len, head_dim = q.shape
    spec = {"batch": batch, "q_heads": heads, "kv_heads": k.shape[1], "q_len": q_len,
            "kv_len": k.shape[2], "head_dim": head_dim, "value_dim": v.shape[3],
            "causal": bool(a["is_causal"]),
            "scale": float(a["scale"]) if a["scale"] is not None else 1.0 / math.sqrt(head_dim),
            "q_strides": list(q.stride), "k_strides": list(k.stride),
            "v_strides": list(v.stride), "out_strides": list(out.stride),
            "lse_strides": list(lse.stride)}
    if k.shape[0] != batch or v.shape[:3] != k.shape[:3] or k.shape[3] != head_dim:
        return None, "attention operands of mismatched shapes"
    mask = a["attn_mask"]
    if mask is not None:
        m = metas.get(mask)
        if not isinstance(m, TensorMeta) or m.dtype != torch.float32:
            return None, "attention mask that is not a float32 tensor"
        if m.ndim != 4 or any(s not in (1, want) for s, want in
                              zip(m.shape, (batch, heads, q_len, k.shape[2]))):
            return None, f"attention mask of shape {list(m.shape)}"
        spec["mask_strides"] = list(_broadcast_strides(m))
    return spec, ""


def _message(e: Exception) -> str:
    """The reason a core check gives, without its source location and condition."""
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    marker = "check failed: "
    if marker in text:
        text = text.split(marker, 1)[1].split(": ", 1)[-1]
    return text


class AttentionCall:
    """The operator's replacement: same arguments, same (output, logsumexp) results, computed
    by the kernel when the call is the one it was built for (the strides of query, key, value
    and mask, causality and scale); any other call goes to ATen."""

    def __init__(self, kernel, in_strides: Tuple, out: TensorMeta, lse: TensorMeta,
                 mask_strides: Optional[Tuple] = None, is_causal: bool = False,
                 scale: Optional[float] = None):
        self.kernel = kernel
        self.name = "attention"
        self._run = kernel.run
        self._strides = tuple(tuple(s) for s in in_strides)  # of query, key and value
        self._mask = tuple(mask_strides) if mask_strides is not None else None
        self._flags = (bool(is_causal), scale)
        self._out = (tuple(out.shape), tuple(out.stride))
        self._lse = (tuple(lse.shape), tuple(lse.stride))

    def __call__(self, query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None,
                 scale=None):
        mask = attn_mask.stride() if attn_mask is not None else None
        if (query.stride(), key.stride(), value.stride()) != self._strides or \
                mask != self._mask or (bool(is_causal), scale) != self._flags or dropout_p:
            return SDPA(query, key, value, dropout_p, is_causal, attn_mask=attn_mask,
                        scale=scale)
        out = torch.empty_strided(*self._out)
        lse = torch.empty_strided(*self._lse)
        ptrs = [query.data_ptr(), key.data_ptr(), value.data_ptr()]
        if attn_mask is not None:
            ptrs.append(attn_mask.data_ptr())
        self._run(ptrs + [out.data_ptr(), lse.data_ptr()])
        return out, lse


def _candidate_name(index: int, tiles: dict) -> str:
    """"tessera" for the rules' tiles (the first candidate), "tessera:kb..-rt..-rpt.." else."""
    if index == 0:
        return "tessera"
    return f"tessera:kb{tiles['key_block']}-rt{tiles['row_tile']}-rpt{tiles['rows_per_task']}"


def _collapsed(times: Dict[str, float]) -> Dict[str, float]:
    """ATen's time and the best Tessera candidate's, as explain shows a partition's."""
    out = {k: v for k, v in times.items() if k == "aten"}
    tessera = [v for k, v in times.items() if k.startswith("tessera")]
    if tessera:
        out["tessera"] = min(tessera)
    return out


def plan(node: fx.Node, metas: Dict[fx.Node, Any], options: Any
         ) -> Tuple[Optional[AttentionCall], str, Dict[str, float], str]:
    """(the call to run instead of the operator or None, the choice, measured times in ms, why
    ATen when it is not measured) for one attention node of a fixed-shape graph. The kernel's
    tiles are chosen by timing a few candidates (_C.attention_tile_candidates) against each
    other and ATen, in one measurement; the records database keeps the winner."""
    spec, reason = spec_of(node, metas)
    if spec is None:
        return None, "aten", {}, reason
    a = _arguments(node)
    mask = metas[a["attn_mask"]] if a["attn_mask"] is not None else None

    def make_call(tiles: dict) -> AttentionCall:
        return AttentionCall(_C.attention_kernel(spec, tiles),
                             (spec["q_strides"], spec["k_strides"], spec["v_strides"]),
                             metas[node][0], metas[node][1],
                             mask.stride if mask is not None else None, a["is_causal"],
                             a["scale"])
    try:
        tiles = _C.attention_tile_candidates(spec)
        rules_call = None if getattr(options, "anchor_measure", True) else make_call(tiles[0])
    except Exception as e:  # a spec the kernel cannot compute (value dim, head groups)
        return None, "aten", {}, _message(e)
    if rules_call is not None:
        return rules_call, "tessera", {}, ""
    named = {_candidate_name(i, t): t for i, t in enumerate(tiles)}
    key = keys.derived_key("attention-kernel", json.dumps(spec, sort_keys=True), "")
    hit = anchor_choice.known_choice(key, ["aten", *named], options)
    if hit is not None:
        choice, times = hit
        try:
            call = None if choice == "aten" else make_call(named[choice])
        except Exception as e:
            return None, "aten", {}, _message(e)
        return call, "aten" if call is None else "tessera", _collapsed(times), ""
    calls = {}
    for name, t in named.items():
        try:
            calls[name] = make_call(t)
        except Exception as e:  # the rules' tiles must build; another candidate may not
            if name == "tessera":
                return None, "aten", {}, _message(e)
    values = {n: metas[a[n]].example() for n in ("query", "key", "value")}
    mask_value = mask.example() if mask is not None else None
    extra = (a["dropout_p"], a["is_causal"])

    def run(fn):
        return lambda: fn(values["query"], values["key"], values["value"], *extra,
                          attn_mask=mask_value, scale=a["scale"])
    candidates = {"aten": run(SDPA)}
    candidates.update({name: run(call) for name, call in calls.items()})
    choice, times = anchor_choice.decide(key, candidates, options, looked_up=True)
    call = calls.get(choice)
    return call, "aten" if call is None else "tessera", _collapsed(times), ""
