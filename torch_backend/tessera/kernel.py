"""Compiled Tessera kernels called with torch tensors.

The C++ kernel takes raw data pointers; this wrapper is where tensors are checked (CPU, dtype,
contiguity, shapes) so that a mismatch is a clear Python error instead of a bad memory access.
"""

from __future__ import annotations

from typing import Sequence, Union

import torch

from . import _C
from .backend.kernel_build import PackedInput
from .search_progress import SearchProgress

_DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
}


class Kernel:
    """A kernel compiled from tensor-expression outputs; call it with torch tensors.

    Compiled by the one compile call (_C.compile): `schedule` (a KernelSchedule, or its JSON)
    builds exactly that schedule; otherwise `tune` ("default": the rules' schedule, "construct":
    Gensor's construct mode, "search": search mode with `trials` measurements, 0 for the
    policy's default; asked for, tuning reaches the kernel whatever its size) decides, and
    `records` (a _C.RecordsDB) keeps tuned schedules for later processes. `threads`: "parallel"
    (parallel loops where the schedule has them), "serial", or "auto" (the backend's choice:
    kernels moving little data and doing little work run on the calling thread alone, the tuning
    policy's serial_bytes and serial_points).
    `progress` (search mode): True shows a progress bar and logs each trial (search_progress.py), a callable
gets each _C.TrialEvent, None/False neither. `runner` (search mode): where candidates are
    measured: "workers" (the default: forked processes), "in-process", "ray", "auto",
    "ray://host:port" or a runner object (tessera.runners). `weights`: positions of inputs
    whose values stay the same from call to call (a layer's weights); those the schedule packs
    into panels are packed once and the packed copy reused, packed again when the tensor passed
    is another one or was changed in place. `report` says how the kernel was made."""

    def __init__(self, outputs: Sequence["_C.Tensor"], inputs: Sequence["_C.Tensor"],
                 schedule: Union[None, str, "_C.KernelSchedule"] = None, name: str = "kernel",
                 keep_source: bool = False, tune: str = "default", records=None,
                 threads: str = "parallel", trials: int = 0, progress=True, runner=None,
                 weights: Sequence[int] = ()):
        self._inputs = list(inputs)
        if isinstance(schedule, str):
            schedule = _C.KernelSchedule.parse(schedule)
        request = _C.CompileRequest(name=name, tune=tune, threads=threads, schedule=schedule,
                                    records=records, keep_source=keep_source, trials=trials,
                                    runner=runner)
        request.constant_inputs = [int(i) for i in weights]
        if tune == "search" and progress:
            tracker = SearchProgress() if progress is True else progress
            request.on_trial = tracker
        else:
            tracker = None
        try:
            self._kernel = _C.compile(list(outputs), self._inputs, request)
        finally:
            if isinstance(tracker, SearchProgress):
                tracker.close()
        self._out_dtypes = [_DTYPES[d] for d in self._kernel.output_dtypes]
        self._in_dtypes = [_DTYPES[t.dtype] for t in self._inputs]
        self._plans: dict = {}  # input shapes -> (sizes, output shapes)
        # Input position -> its packed copy (PackedInput) for the weights read prepacked.
        self._packed = {i: PackedInput(None, self._kernel, i, numel, self._in_dtypes[i])
                        for i, numel in self._kernel.prepacks}

    @property
    def jit_ms(self) -> float:
        return self._kernel.jit_ms

    @property
    def schedule(self) -> "_C.KernelSchedule":
        return self._kernel.schedule

    @property
    def report(self) -> "_C.CompileReport":
        """How the kernel was made: schedule source, tuning candidates and their times."""
        return self._kernel.report

    @property
    def loop_ir(self) -> str:
        return self._kernel.loop_ir

    @property
    def llvm_ir(self) -> str:
        """Optimised LLVM IR; needs keep_source=True (else empty)."""
        return self._kernel.llvm_ir

    @property
    def assembly(self) -> str:
        """Host assembly of the kernel; needs keep_source=True (else empty)."""
        return self._kernel.assembly

    def _shapes_for(self, args) -> tuple:
        """(sizes, output shapes) for inputs of these shapes, after checking the inputs; cached
        per shapes, so that a call costs about 5 us instead of 7 (a 100 us kernel felt it)."""
        if len(args) != len(self._inputs):
            raise TypeError(f"kernel takes {len(self._inputs)} inputs, got {len(args)}")
        for spec, t, want in zip(self._inputs, args, self._in_dtypes):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"input {spec.name} must be a torch.Tensor")
            if not t.is_cpu:
                raise ValueError(f"input {spec.name} is on {t.device}; CPU kernels take CPU tensors")
            if t.dtype != want:
                raise TypeError(f"input {spec.name} has dtype {t.dtype}, expected {want}")
        key = tuple([t.shape for t in args])
        found = self._plans.get(key)
        if found is None:
            sizes = self._kernel.infer_sizes([list(s) for s in key])
            found = (sizes, [torch.Size(s) for s in self._kernel.output_shapes(sizes)])
            self._plans[key] = found
        return found

    def _prepare(self, args, out):
        sizes, shapes = self._shapes_for(args)
        tensors = [t.contiguous() for t in args]
        if out is None:
            out = [torch.empty(s, dtype=d) for s, d in zip(shapes, self._out_dtypes)]
        else:
            out = list(out)
            for o, s, d in zip(out, shapes, self._out_dtypes):
                if o.shape != s or o.dtype != d or not o.is_contiguous() or not o.is_cpu:
                    raise ValueError(f"out tensor must be contiguous CPU {d} of shape {list(s)}")
        ptrs = [t.data_ptr() for t in tensors] + [o.data_ptr() for o in out]
        for i, packed in self._packed.items():
            ptrs[i] = packed.ptr(tensors[i])
        return tensors, out, ptrs, sizes

    def __call__(self, *args: torch.Tensor, out=None):
        tensors, outs, ptrs, sizes = self._prepare(args, out)
        self._kernel.run(ptrs, sizes)
        del tensors  # kept alive until the kernel returned
        return outs[0] if len(outs) == 1 else tuple(outs)

    def measure(self, *args: torch.Tensor, min_time_ms: float = 200.0) -> dict:
        """Median time of the kernel on these inputs (C++ timer, warm-up first)."""
        tensors, outs, ptrs, sizes = self._prepare(args, None)
        result = self._kernel.measure(ptrs, sizes, min_time_ms)
        del tensors, outs
        return result
