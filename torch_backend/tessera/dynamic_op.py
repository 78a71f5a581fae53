"""tessera.op(..., dynamic={name: (lo, hi)}): one kernel serves every size in the ranges.

Each dynamic name stands for input dims (an iterator: every input dim it indexes by itself; or
"A.size(d)"); they become one size variable with the declared range. DietCode
(backend/dietcode_kernel.compile_dynamic: micro-kernels compiled once, a dispatcher; the rules'
kernel over the same symbolic definition where the ranges are too wide to tune) builds the
kernel once per signature of the other dims and the dtypes, and every call reads its sizes off
the inputs' shapes: no compile per size. Calls with a size outside its range are not this
kernel's: the op compiles a kernel for their shapes as it does without dynamic= (logged once).
"""

from __future__ import annotations

import operator
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import torch

from . import _C
from .backend.dietcode_kernel import DietCodeKernel, compile_dynamic
from .kernel import _DTYPES

Ranges = Dict[str, Tuple[int, int]]


def normalize_dynamic(dynamic: Optional[Mapping[str, Sequence[int]]]) -> Ranges:
    """{name: (lo, hi)} with int ends, 0 <= lo <= hi; TypeError/ValueError otherwise."""
    out: Ranges = {}
    for name, rng in (dynamic or {}).items():
        if not isinstance(name, str):
            raise TypeError(f"dynamic= keys are iterator names or 'A.size(d)', got {name!r}")
        try:
            lo, hi = (operator.index(v) for v in rng)
        except (TypeError, ValueError):
            raise TypeError(f"dynamic[{name!r}] must be a (lo, hi) pair of ints, "
                            f"got {rng!r}") from None
        if not 0 <= lo <= hi:
            raise ValueError(f"dynamic[{name!r}] = ({lo}, {hi}) is not a range 0 <= lo <= hi")
        out[name] = (lo, hi)
    return out


class DynamicSizes:
    """Where each dynamic size of an op sits in its inputs, and its range."""

    def __init__(self, source: str, ranges: Ranges, shapes_hints: Mapping[str, object]):
        self.ranges = ranges
        self.dims: Dict[str, List[Tuple[int, int]]] = {}
        owner: Dict[Tuple[int, int], str] = {}
        for name in ranges:
            if name in shapes_hints:
                raise ValueError(f"dynamic= and shapes= both give the extent of {name!r}")
            self.dims[name] = [tuple(d) for d in _C.expression_dynamic_dims(source, name)]
            for d in self.dims[name]:
                if d in owner:
                    raise ValueError(f"dynamic= names {owner[d]!r} and {name!r} for the same "
                                     f"input dim (input {d[0]}, dim {d[1]})")
                owner[d] = name

    def sizes(self, tensors: Sequence[torch.Tensor], inputs: Sequence[str]) -> Dict[str, int]:
        """Each dynamic size in a call; ValueError when its dims disagree."""
        out = {}
        for name, dims in self.dims.items():
            seen = {(inputs[i], d): int(tensors[i].shape[d]) for i, d in dims}
            if len(set(seen.values())) > 1:
                listed = ", ".join(f"{t}.size({d}) = {v}" for (t, d), v in seen.items())
                raise ValueError(f"dynamic size {name!r} has different values: {listed}")
            out[name] = next(iter(seen.values()))
        return out

    def in_range(self, sizes: Mapping[str, int]) -> bool:
        return all(lo <= sizes[n] <= self.ranges[n][1] for n, (lo, _) in self.ranges.items())

    def signature(self, tensors: Sequence[torch.Tensor]) -> tuple:
        """The shapes with the dynamic dims left out, and the dtypes: one kernel per signature."""
        dynamic = {d for dims in self.dims.values() for d in dims}
        return tuple((tuple(None if (i, d) in dynamic else s for d, s in enumerate(t.shape)),
                      t.dtype) for i, t in enumerate(tensors))


class DynamicCall:
    """The kernel of one signature, called with torch tensors (sizes from their shapes)."""

    def __init__(self, name: str, outputs, inputs, sizes: DynamicSizes, records):
        # The size variables' names, as _C.expression_to_te_dynamic makes them.
        ranges = [(re.sub(r"\W", "_", n), lo, hi) for n, (lo, hi) in sizes.ranges.items()]
        self.kernel = compile_dynamic(name, outputs, inputs, ranges, records,
                                      hint="tessera.op(..., dynamic=)")
        self.rules = self.kernel.rules if isinstance(self.kernel, DietCodeKernel) else self.kernel
        self.dietcode = isinstance(self.kernel, DietCodeKernel)
        self._out_dtypes = [_DTYPES[d] for d in self.rules.output_dtypes]

    def __call__(self, *tensors: torch.Tensor) -> torch.Tensor:
        tensors = [t.contiguous() for t in tensors]
        sizes = self.rules.infer_sizes([list(t.shape) for t in tensors])
        outs = [torch.empty(s, dtype=d)
                for s, d in zip(self.rules.output_shapes(sizes), self._out_dtypes)]
        self.kernel.run([t.data_ptr() for t in tensors] + [o.data_ptr() for o in outs], sizes)
        return outs[0]
