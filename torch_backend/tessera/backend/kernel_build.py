"""One partition -> one Tessera kernel: tensor-expression graph, layouts at the boundary, cache.

Inputs are read where they lie: an input whose strides are a permutation of a dense layout
(a transposed weight, a channels_last activation) or a broadcast (stride 0) is passed without a
copy, and the permutation / broadcast becomes index arithmetic inside the kernel. Only inputs
with gaps (strided slices) are copied. Outputs take the layout eager would give them when it is
a permutation of a dense layout (free: the kernel writes in that order).

Kernels are cached in-process by a structural key (the lowered operators with their arguments
and shapes, independent of node names), so repeated blocks of a model compile once.

Schedules: construct mode (the default tuning mode) tunes kernels with enough summation work
(matmul, conv, large reductions) and stores the result in the records database (records.py);
a later process takes it from there instead of tuning again. Other kernels get the default
heuristics.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Dict, List, Optional

import torch
import torch.fx as fx

from .. import _C
from . import records as records_mod
from ..jit_cache import LruCache, default_jit_cache_bytes
from .log import log_once
from .lowering import LowerCtx, identity, is_te, ops, te_dtype
from .meta import TensorMeta, dense_permutation
from .partition import Classifier, _op_name, input_nodes


# ---- layouts ------------------------------------------------------------------------------

def _is_identity_order(perm, shape) -> bool:
    """True when the order only moves size-1 dims: the same memory order as contiguous."""
    big = [d for d in perm if shape[d] != 1]
    return big == sorted(big)


class InputPrep:
    """How a kernel input is turned into the contiguous buffer the kernel reads."""
    __slots__ = ("index", "perm")

    def __init__(self, index, perm):
        self.index = index  # tuple of slices selecting one element along broadcast dims, or None
        self.perm = perm    # dims order of the physical buffer, or None


class OutputSpec:
    __slots__ = ("shape", "numel", "dtype", "inv_perm", "restride")

    def __init__(self, shape, dtype, inv_perm, restride):
        self.shape = tuple(shape) if shape else ((),)  # physical (buffer) shape, as *args
        self.numel = 1
        for d in shape:
            self.numel *= d
        self.dtype = dtype
        self.inv_perm = inv_perm  # view the buffer as the logical tensor, or None
        self.restride = restride  # (shape, stride) eager gives and that must be reproduced


# ---- the runtime object -------------------------------------------------------------------

class KernelCall:
    """A compiled kernel called with torch tensors; returns a tensor or a tuple of tensors."""

    def __init__(self, kernel, in_preps: List[Optional[InputPrep]], out_specs: List[OutputSpec],
                 name: str):
        self.kernel = kernel
        self.name = name
        self._run = kernel.run
        self._in_preps = in_preps
        self._out_specs = out_specs
        self._plain_inputs = all(p is None for p in in_preps)
        self._plain_outputs = all(s.inv_perm is None and s.restride is None for s in out_specs)
        self._single = len(out_specs) == 1

    def __call__(self, *inputs):
        if self._plain_inputs:
            keep = [t if t.is_contiguous() else t.contiguous() for t in inputs]
        else:
            keep = [self._prepare(t, p) for t, p in zip(inputs, self._in_preps)]
        # empty(*sizes) parses about twice as fast as empty(list) (~1.7 vs ~2.9 us).
        outs = [torch.empty(*s.shape, dtype=s.dtype) for s in self._out_specs]
        self._run([t.data_ptr() for t in keep] + [o.data_ptr() for o in outs], [])
        if not self._plain_outputs:
            outs = [self._finish(o, s) for o, s in zip(outs, self._out_specs)]
        return outs[0] if self._single else tuple(outs)

    @staticmethod
    def _prepare(t: torch.Tensor, prep: Optional[InputPrep]) -> torch.Tensor:
        if prep is not None:
            if prep.index is not None:
                t = t[prep.index]
            if prep.perm is not None:
                t = t.permute(prep.perm)
        return t if t.is_contiguous() else t.contiguous()

    @staticmethod
    def _finish(o: torch.Tensor, spec: OutputSpec) -> torch.Tensor:
        if spec.inv_perm is not None:
            o = o.permute(spec.inv_perm)
        if spec.restride is not None:
            shape, stride = spec.restride
            r = torch.empty_strided(shape, stride, dtype=o.dtype)
            r.copy_(o)
            o = r
        return o


# ---- building -----------------------------------------------------------------------------

class KernelSpec:
    """The tensor-expression graph of one partition and how to call it."""

    def __init__(self):
        self.members: List[fx.Node] = []
        self.inputs: List[fx.Node] = []     # FX values read (kernel inputs, in ABI order)
        self.outputs: List[fx.Node] = []    # FX values produced (members or getitems of them)
        self.te_inputs: List[Any] = []
        self.te_outputs: List[Any] = []
        self.in_preps: List[Optional[InputPrep]] = []
        self.out_specs: List[OutputSpec] = []
        self.key: str = ""
        self.name: str = "kernel"
        self.metas: Dict[fx.Node, Any] = {}
        self.reduce_points: Optional[float] = None  # summing work (see _worth_tuning), lazily


class _Builder:
    def __init__(self, members: List[fx.Node], metas: Dict[fx.Node, Any], cls: Classifier,
                 outputs: List[fx.Node], keep_layout: set):
        self.member_set = set(members)
        self.members = members
        self.metas = metas
        self.cls = cls
        self.ctx = LowerCtx(metas, cls.kind)
        self.spec = KernelSpec()
        self.spec.metas = metas
        self.spec.members = members
        self.spec.outputs = outputs
        self.keep_layout = keep_layout
        self.local: Dict[fx.Node, str] = {}
        self.key_parts: List[str] = []

    def root(self, n: fx.Node) -> fx.Node:
        while self.cls.kind(n) == "view":
            n = n.args[0]
        return n

    def pulled(self, n: fx.Node) -> bool:
        """Computed inside this kernel although not a member: views of members, sources."""
        kind = self.cls.kind(n)
        if kind == "source":
            return True
        if kind != "view":
            return False
        r = self.root(n)
        return r in self.member_set or self.cls.kind(r) == "source"

    def _arg_repr(self, a: Any) -> str:
        if isinstance(a, fx.Node):
            if a in self.local:
                return self.local[a]
            return "c" + repr(self.metas.get(a))
        if isinstance(a, (list, tuple)):
            return "[" + ",".join(self._arg_repr(x) for x in a) + "]"
        if isinstance(a, dict):
            return "{" + ",".join(f"{k}={self._arg_repr(v)}" for k, v in sorted(a.items())) + "}"
        return repr(a)

    def _meta_repr(self, m: Any) -> str:
        if isinstance(m, TensorMeta):
            return f"{m.dtype}{list(m.shape)}"
        if isinstance(m, (list, tuple)):
            return "(" + ",".join(self._meta_repr(x) for x in m) + ")"
        return repr(m)

    def add_input(self, n: fx.Node) -> None:
        m: TensorMeta = self.metas[n]
        i = len(self.spec.inputs)
        bdims = [d for d in range(m.ndim) if m.stride[d] == 0 and m.shape[d] > 1]
        base_shape = [1 if d in bdims else s for d, s in enumerate(m.shape)]
        base_stride = list(m.stride)
        perm = dense_permutation(base_shape, base_stride)
        if perm is not None and _is_identity_order(perm, base_shape):
            perm = None
        phys_shape = [base_shape[d] for d in perm] if perm else base_shape
        p = _C.placeholder(f"in{i}", phys_shape, te_dtype(m.dtype))
        t = p
        if perm:
            inv = [0] * len(perm)
            for j, d in enumerate(perm):
                inv[d] = j
            t = ops.permute(p, inv)
            if not bdims:
                self.ctx.physical[n] = (p, perm)
        if bdims:
            t = ops.broadcast_to(t, list(m.shape))
        index = tuple(slice(0, 1) if d in bdims else slice(None) for d in range(m.ndim)) \
            if bdims else None
        self.spec.inputs.append(n)
        self.spec.te_inputs.append(p)
        self.spec.in_preps.append(InputPrep(index, perm) if (index or perm) else None)
        self.ctx.env[n] = t
        self.local[n] = f"in{i}"
        self.key_parts.append(f"in{i}:{m.dtype}{list(m.shape)}b{bdims}p{perm}")

    def ensure(self, n: fx.Node) -> None:
        """Makes the Tessera value of FX node n available (input, pulled view, or member)."""
        if n in self.ctx.env:
            return
        m = self.metas.get(n)
        if not isinstance(m, TensorMeta) and n not in self.member_set and not self.pulled(n):
            return  # a folded scalar: the lowering reads its recorded value
        if n in self.member_set or self.pulled(n):
            if self.cls.kind(n) != "source":
                for a in input_nodes(n):
                    self.ensure(a)
            self.ctx.lower(n)
            self.local[n] = f"x{len(self.local)}"
            self.key_parts.append(f"{self.local[n]}={_op_name(n.target)}"
                                  f"({self._arg_repr(n.args)};{self._arg_repr(n.kwargs)})"
                                  f"->{self._meta_repr(m)}")
            return
        self.add_input(n)

    def build(self) -> KernelSpec:
        for n in self.members:
            self.ensure(n)
        for o in self.spec.outputs:
            self.ensure(o)
            t = self.ctx.env[o]
            if not is_te(t):
                raise RuntimeError(f"internal: output {o.name} has no tensor value")
            m: TensorMeta = self.metas[o]
            if any(t is p for p in self.spec.te_inputs):
                t = identity(t)  # an output must be computed, even when it equals an input
            perm = dense_permutation(m.shape, m.stride)
            restride = None
            inv = None
            if perm is not None and not _is_identity_order(perm, m.shape):
                t = ops.permute(t, perm)
                inv = [0] * len(perm)
                for j, d in enumerate(perm):
                    inv[d] = j
                phys = [m.shape[d] for d in perm]
            else:
                phys = list(m.shape)
                if perm is None and o in self.keep_layout:
                    restride = (tuple(m.shape), tuple(m.stride))
            self.spec.te_outputs.append(t)
            self.spec.out_specs.append(OutputSpec(phys, m.dtype, inv, restride))
            self.key_parts.append(f"out:{self.local[o]}:{inv}:{restride}")
        self.spec.key = "|".join(self.key_parts)
        names = [_op_name(n.target).replace("aten.", "").split(".")[0] for n in self.members]
        self.spec.name = "_".join(dict.fromkeys(names))[:60] or "kernel"
        return self.spec


def build_spec(members: List[fx.Node], metas: Dict[fx.Node, Any], cls: Classifier,
               outputs: List[fx.Node], keep_layout: set) -> KernelSpec:
    return _Builder(members, metas, cls, outputs, keep_layout).build()


# Compiled kernels by structural key, bounded by the machine code they hold (jit_cache.py).
_cache = LruCache(default_jit_cache_bytes(), cost=lambda kernel: kernel.code_bytes)
stats = {"compiled": 0, "cache_hits": 0, "jit_ms": 0.0}


def set_jit_cache_limit(limit_bytes: int) -> None:
    """Bounds the in-process kernel cache to this many bytes of machine code (least recently
    used kernels are forgotten first; kernels still in use stay alive where they are used)."""
    if int(limit_bytes) <= 0:
        raise ValueError(f"the JIT cache limit must be positive, got {limit_bytes}")
    _cache.set_budget(int(limit_bytes))


def jit_cache_info() -> Dict[str, int]:
    """Kernels kept, their bytes of machine code, the limit and how many were evicted."""
    return {"kernels": len(_cache), "code_bytes": _cache.total, "limit_bytes": _cache.budget,
            "evictions": _cache.evictions}


# Kernels moving fewer bytes than this run on the calling thread alone. Waking a second thread
# costs more than it saves for them, and far more when ATen's OpenMP workers are still spinning
# on the other core after the ATen operator that ran just before (on the 2-core dev machine a
# parallel LayerNorm kernel between two GEMMs cost ~200 us more than a serial one).
SERIAL_BYTES = 2 << 20


def spec_bytes(spec: KernelSpec) -> int:
    """Bytes the kernel reads and writes at its boundary."""
    total = 0
    for n in spec.inputs:
        m = spec.metas[n]
        total += m.numel * m.dtype.itemsize
    for s in spec.out_specs:
        total += s.numel * s.dtype.itemsize
    return total


# Construct mode in the backend. A kernel is tuned when its summing stages have at least
# TUNE_MIN_POINTS iteration points (a 128x128x256 matmul): below that the default schedule's
# kernel takes a fraction of a millisecond, and tuning it (about a second) adds more to
# torch.compile's first call than it could save in most programs. Streaming kernels (no
# summation) are bound by memory traffic whatever their schedule.
TUNE_MIN_POINTS = 1 << 22
# Smaller than construct's own defaults (top-8, 32 chains): building and measuring candidates is
# most of the time, and every tuned kernel adds to torch.compile's first call.
CONSTRUCT_ARGS = {"top_k": 4, "chains": 16, "iterations": 60}
# The tuned schedule is kept only when it beats the default schedule, measured side by side, by
# this factor: construct mode ranks by a model and measures its top-k only, and on some kernels
# all of them are slower than the default heuristics.
KEEP_MARGIN = 0.97
# Seconds of construct mode per process. Past it kernels get the default schedule (logged once);
# their records are missing, so the next process tunes them, starting where this one stopped.
TUNE_BUDGET_S = 180.0


def _worth_tuning(spec: KernelSpec) -> bool:
    if spec.reduce_points is None:
        try:
            spec.reduce_points = _C.task_info(spec.te_outputs, spec.te_inputs)["reduce_points"]
        except Exception:  # an older _C without task_info, or a kernel it cannot plan
            spec.reduce_points = 0.0
    return spec.reduce_points >= TUNE_MIN_POINTS


def _tune(spec: KernelSpec, serial: bool):
    """Construct mode, then the result against the default schedule (both verified against the
    reference and timed interleaved, as the kernel will run: serial when it will be).
    Returns (schedule, tuner, median_ms, trials)."""
    result = _C.construct(spec.te_outputs, spec.te_inputs, **CONSTRUCT_ARGS)
    trials = len(result["measured"])
    default = ops.default_schedule(spec.te_outputs, spec.te_inputs)
    if result["fell_back_to_default"]:  # no construct candidate passed verification
        return default, "default", None, trials
    tuned = result["schedule"]
    candidates = [default, tuned]
    if serial:
        candidates = [_serial(spec, c) for c in candidates]
    base, mine = _C.measure_schedules(spec.te_outputs, spec.te_inputs, candidates)
    trials += 2
    if not mine["ok"]:
        log_once(f"construct-reject:{spec.key}", f"tessera: construct mode's schedule for "
                 f"{spec.name} was rejected ({mine['error']}); using the default schedule",
                 level=logging.WARNING)
    elif not base["ok"] or mine["median_ms"] < KEEP_MARGIN * base["median_ms"]:
        tuner = json.loads(tuned).get("tuner") or "construct"
        return tuned, tuner, mine["median_ms"], trials
    return default, "default", base["median_ms"] if base["ok"] else None, trials


def _construct(spec: KernelSpec, serial: bool, records_option: Any) -> Optional[str]:
    """The tuned schedule of the kernel: from the records when tuned before, else tuned now and
    stored (candidates are verified against the default schedule's output before their time
    counts). None: the default schedule."""
    records = records_mod.open_records(records_option)
    if records is not None:
        rec = records.schedule(spec.te_outputs, spec.te_inputs)
        if rec is not None:
            return rec["schedule_json"]
    if records_mod.counters()["tune_s"] >= TUNE_BUDGET_S:
        log_once("construct-budget", f"tessera: construct mode used its {TUNE_BUDGET_S:.0f} s "
                 "budget in this process; further kernels use default schedules",
                 level=logging.WARNING)
        return None
    t0 = time.perf_counter()
    try:
        schedule, tuner, median_ms, trials = _tune(spec, serial)
    except Exception as e:  # a tuner failure costs tuning, not the model
        log_once(f"construct-failure:{type(e).__name__}",
                 f"tessera: construct mode failed on {spec.name} ({type(e).__name__}: {e}); "
                 "using the default schedule", level=logging.WARNING)
        return None
    finally:
        records_mod.count("tuned")
        records_mod.count("tune_s", time.perf_counter() - t0)
    if records is not None:
        records.store_schedule(spec.te_outputs, spec.te_inputs, schedule, tuner, median_ms,
                               trials)
    return schedule


def _schedule_for(spec: KernelSpec, tune: str, serial: bool,
                  records_option: Any) -> Optional[str]:
    """The schedule a tuning mode gives the kernel (None: the default heuristics), made serial
    when asked."""
    schedule = None
    if tune == "construct" and hasattr(_C, "construct"):
        schedule = _construct(spec, serial, records_option)
    elif tune not in ("default", "construct"):
        log_once(f"tune-unwired:{tune}", f"tessera: tune={tune!r} is not wired into the backend "
                 "yet; kernels use the default schedules")
    return _serial(spec, schedule) if serial else schedule


def _serial(spec: KernelSpec, schedule: Optional[str]) -> str:
    plan = json.loads(schedule or ops.default_schedule(spec.te_outputs, spec.te_inputs))
    for stage in plan["stages"]:
        stage["parallel"] = False
    return json.dumps(plan)


def _tune_and_records(tune: Any):
    """(tuning mode, records_db option) from compile_spec's second argument: the backend
    Options, or a tuning mode alone (then the records database is the default one)."""
    mode, records_option = (tune, None) if isinstance(tune, str) else (tune.tune, tune.records_db)
    # Search mode is not built yet: the most tuning there is, construct mode, stands in for it
    # (entry.py logs it), so asking for more tuning never gives less.
    return ("construct" if mode == "search" else mode), records_option


def compile_spec(spec: KernelSpec, tune: Any = "default") -> KernelCall:
    """Compiles (or reuses) the kernel of a spec, with the schedule the tuning mode gives it;
    small kernels get a serial schedule (SERIAL_BYTES). `tune`: the backend Options (tuning mode
    and records database) or a tuning mode name."""
    tune, records_option = _tune_and_records(tune)
    if tune == "construct" and not _worth_tuning(spec):
        tune = "default"  # the same kernel as with the default schedule: one cache entry
    serial = torch.get_num_threads() > 1 and spec_bytes(spec) < SERIAL_BYTES
    key = spec.key + ("" if tune == "default" else f"|tune={tune}") + ("|serial" if serial else "")
    kernel = _cache.get(key)
    if kernel is None:
        schedule = _schedule_for(spec, tune, serial, records_option)
        try:
            kernel = _C.build(spec.te_outputs, spec.te_inputs, schedule, spec.name)
        except Exception as e:
            if schedule is None:
                raise
            # A stored or tuned schedule that does not build (a record from another Tessera
            # version): the default schedule still gives a working kernel.
            log_once(f"schedule-failure:{spec.key}", f"tessera: the tuned schedule of {spec.name} "
                     f"does not build ({type(e).__name__}: {e}); using the default schedule",
                     level=logging.WARNING)
            kernel = _C.build(spec.te_outputs, spec.te_inputs,
                              _serial(spec, None) if serial else None, spec.name)
        stats["compiled"] += 1
        stats["jit_ms"] += kernel.jit_ms + kernel.lower_ms
        _cache.put(key, kernel)
    else:
        stats["cache_hits"] += 1
    return KernelCall(kernel, spec.in_preps, spec.out_specs, spec.name)


def clear_cache() -> None:
    _cache.clear()


__all__ = ["KernelCall", "KernelSpec", "build_spec", "compile_spec"]


def kernel_call_parts(call: KernelCall):
    """(compiled _C kernel, input preps, output specs) of a KernelCall: what the C++ graph
    executor (program_runner.py) needs to run the kernel without this Python wrapper."""
    return call.kernel, call._in_preps, call._out_specs
