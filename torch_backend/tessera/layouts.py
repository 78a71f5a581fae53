"""Tensor layouts (ALT) on torch tensors: a layout's text applied to a tensor and undone.

A layout (csrc/layout/layout.h) is a sequence of primitives over a tensor's logical dims:
split(d,f), reorder(p0,...), fuse(d), unfold(d,t,V,K), pad(d,lo,hi), store_at(d,o,n). Here each
primitive is a torch view or copy, so a tensor can be handed to a kernel compiled for the layout
(`to_physical`) and its result read back (`to_logical`); the C++ maps are the definition and the
tests check these conversions against kernels built from them.
"""

from __future__ import annotations

import re
from typing import List, Sequence, Tuple

import torch
import torch.nn.functional as F

from . import _C

_PRIMITIVE = re.compile(r"(\w+)\(([-\d,\s]*)\)")


def parse(text: str) -> List[Tuple[str, List[int]]]:
    """[(name, [numbers])] of a layout's text ('identity' or '': none)."""
    text = text.strip()
    if text in ("", "identity"):
        return []
    out = []
    for name, args in _PRIMITIVE.findall(text):
        out.append((name, [int(a) for a in args.split(",") if a.strip()]))
    return out


def _pad_dim(t: torch.Tensor, dim: int, lo: int, hi: int) -> torch.Tensor:
    if lo == 0 and hi == 0:
        return t
    pads = [0, 0] * (t.dim() - 1 - dim) + [lo, hi]
    return F.pad(t, pads)


def physical_shape(shape: Sequence[int], text: str) -> List[int]:
    return list(_C.layout.Layout(list(shape), text).physical_shape)


def to_physical(t: torch.Tensor, text: str) -> torch.Tensor:
    """`t` stored in the layout `text`: a contiguous tensor of the physical shape (positions that
    hold no element are 0)."""
    for name, a in parse(text):
        if name == "split":
            d, f = a
            e = t.shape[d]
            t = _pad_dim(t, d, 0, -e % f)
            t = t.reshape(*t.shape[:d], t.shape[d] // f, f, *t.shape[d + 1:])
        elif name == "reorder":
            t = t.permute(*a)
        elif name == "fuse":
            (d,) = a
            t = t.reshape(*t.shape[:d], t.shape[d] * t.shape[d + 1], *t.shape[d + 2:])
        elif name == "unfold":
            d, tile, stride, window = a
            e = t.shape[d]
            outputs = -(-(e - window) // stride) + 1
            tiles = -(-outputs // tile)
            length, step = stride * (tile - 1) + window, stride * tile
            t = _pad_dim(t, d, 0, max(0, (tiles - 1) * step + length - e))
            t = t.unfold(d, length, step)  # [..., tiles, ..., length] with length last
            t = t.movedim(-1, d + 1)
        elif name in ("pad", "store_at"):
            d, lo, hi = (a[0], a[1], a[2]) if name == "pad" else (a[0], a[1], a[2] - a[1] - t.shape[a[0]])
            t = _pad_dim(t, d, lo, hi)
        else:
            raise ValueError(f"unknown layout primitive {name!r} in {text!r}")
    return t.contiguous()


def to_logical(p: torch.Tensor, shape: Sequence[int], text: str) -> torch.Tensor:
    """The logical tensor of `shape` that `p` (stored in layout `text`) holds."""
    # Replay the dims step by step, then undo the primitives last to first.
    dims = [list(shape)]
    for name, a in parse(text):
        dims.append(physical_shape(dims[-1], f"{name}({','.join(map(str, a))})"))
    t = p
    for (name, a), before in reversed(list(zip(parse(text), dims[:-1]))):
        if name == "split":
            d, f = a
            t = t.reshape(*t.shape[:d], t.shape[d] * f, *t.shape[d + 2:]).narrow(d, 0, before[d])
        elif name == "reorder":
            inverse = [0] * len(a)
            for k, src in enumerate(a):
                inverse[src] = k
            t = t.permute(*inverse)
        elif name == "fuse":
            (d,) = a
            t = t.reshape(*t.shape[:d], before[d], before[d + 1], *t.shape[d + 1:])
        elif name == "unfold":
            d, tile, stride, window = a
            step = stride * tile
            last = t.shape[d] - 1
            rows = [t.select(d, k).narrow(d, 0, step if k < last else t.shape[d + 1])
                    for k in range(last + 1)]
            t = torch.cat(rows, dim=d).narrow(d, 0, before[d])
        elif name in ("pad", "store_at"):
            t = t.narrow(a[0], a[1], before[a[0]])
    return t.contiguous()
