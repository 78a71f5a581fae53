"""One partition -> one Tessera kernel: tensor-expression graph, layouts at the boundary, cache.

Inputs are read where they lie: an input whose strides are a permutation of a dense layout
(a transposed weight, a channels_last activation) or a broadcast (stride 0) is passed without a
copy, and the permutation / broadcast becomes index arithmetic inside the kernel. Only inputs
with gaps (strided slices) are copied. Outputs take the layout eager would give them when it is
a permutation of a dense layout (free: the kernel writes in that order).

Kernels are compiled by the one compile call (_C.compile) and cached in-process by their
workload key (keys.py: structural hash + canonical text of the tensor-expression DAG), so
repeated blocks of a model, and identical partitions of other models, compile once.

Dynamic shapes (symbolic.py): a partition of a plan made for a range of sizes is built over
Tessera size variables; the runner passes their values on every call (read off the graph's
inputs) and the kernel sizes its outputs from them (cached per sizes), so no size compiles
anything.

Schedules: the compile call's tuning mode (construct by default) tunes kernels with enough
summation work (matmul, conv, large reductions) and stores the result in the records database
(records.py); a later process takes it from there instead of tuning again. Other kernels get the
rules' schedule. The policy for all of that lives in the C++ core (schedule/tuning_policy.h).
"""

from __future__ import annotations

import logging
import math
import threading
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.fx as fx

from .. import _C
from ..search_progress import SearchProgress
from . import keys
from . import records as records_mod
from ..jit_cache import LruCache, default_jit_cache_bytes
from .log import log_once, logger
from .lowering import LowerCtx, identity, is_te, ops, te_dtype
from .meta import TensorMeta, dense_permutation
from .partition import Classifier, _op_name, input_nodes
from .dietcode_kernel import DietCodeKernel, compile_dietcode, dietcode_applies
from .symbolic import NotSizeGeneric, SymbolicMetas


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


def prepare_input(t: torch.Tensor, prep: Optional[InputPrep]) -> torch.Tensor:
    """The buffer a kernel reads for an input with a prep (or None): broadcast dims sliced to
    one element, dims in the buffer's order, then contiguous (a no-op for the dense layouts
    preps describe, so the tensor itself where it already is the buffer)."""
    if prep is not None:
        if prep.index is not None:
            t = t[prep.index]
        if prep.perm is not None:
            t = t.permute(prep.perm)
    return t if t.is_contiguous() else t.contiguous()


class PackedInput:
    """A weight input the kernel reads packed (Kernel.prepacks) or in another dim order (a
    layout; kernel None): its packed copy is made once by the kernel's pack kernel (or the
    prep's reorder) and kept here, per call site, with the version counter and address
    of the tensor it was made from. A call whose tensor has another address or version (changed
    in place: load_state_dict, an optimizer step) packs again first. The tensor's storage is
    held, so its address cannot be reused by another tensor while the copy is kept."""
    __slots__ = ("prep", "kernel", "input", "numel", "dtype", "shape", "_packed", "_ptr", "_src",
                 "_version", "_src_ptr", "_lock", "shared")

    def __init__(self, prep: Optional[InputPrep], kernel, input: int, numel: int, dtype,
                 shape=()):
        self.prep = prep        # how the kernel's plain input is made from the value (or None)
        self.kernel = kernel
        self.input = input      # position among the kernel's inputs
        self.numel = numel      # elements of the packed copy
        self.dtype = dtype
        self.shape = tuple(shape)  # the plain input's shape (as the kernel declares it)
        self._packed = None
        self._ptr = 0
        self._src = None        # storage of the tensor the copy was made from
        self._version = -1
        self._src_ptr = -1
        self._lock = threading.Lock()
        # The same copy for C++ callers (a graph operator's kernel, graph_op.py), which check
        # the weight's version there and call back into Python to pack it again. ptr() keeps
        # its own copy of the version and address: two tensor attribute reads cost less than
        # a call into shared.current(x), and this runs per weight and call.
        self.shared = _C.PackedWeight()

    def ptr(self, x: torch.Tensor) -> int:
        """Data pointer of the packed copy of x (packed again first if x is not what it was
        made from)."""
        try:
            version = x._version
        except RuntimeError:  # an inference tensor keeps no version counter: pack every call
            version = None
            log_once("inference-weights",
                     "tessera: a weight is an inference tensor (made or copied under "
                     "torch.inference_mode), which has no version counter: its packed copy is "
                     "made again on every call. Create or load the model outside inference mode "
                     "to pack weights once.", level=logging.WARNING)
        if version is None or version != self._version or x.data_ptr() != self._src_ptr:
            self._repack(x, version)
        return self._ptr

    def packed(self, x: torch.Tensor) -> torch.Tensor:
        self.ptr(x)
        return self._packed

    def _repack(self, x: torch.Tensor, version: Optional[int]) -> None:
        with self._lock:
            src_ptr = x.data_ptr()
            plain = KernelCall._prepare(x, self.prep)
            if self._packed is None:
                self._packed = torch.empty(self.numel, dtype=self.dtype)
            if self.kernel is None:  # a weight read in another dim order: the reordered copy
                self._packed.copy_(plain.reshape(-1))
            else:
                self.kernel.prepack(self.input, plain.data_ptr(), self._packed.data_ptr())
            stats["weight_packs"] += 1
            self._src = x.untyped_storage()
            self._ptr = self._packed.data_ptr()
            self._version = -1 if version is None else version
            self._src_ptr = src_ptr
            self.shared.set(self._packed, x, version)


class OutputSpec:
    __slots__ = ("shape", "numel", "dtype", "inv_perm", "restride", "symbolic")

    def __init__(self, shape, dtype, inv_perm, restride):
        self.shape = tuple(shape) if shape else ((),)  # physical (buffer) shape, as *args
        # Entries are size expressions (_C.Expr) where the shape depends on the sizes; the
        # kernel then gives the concrete shape per call.
        self.symbolic = any(isinstance(d, _C.Expr) for d in shape)
        self.numel = 1
        for d in shape:
            self.numel *= d
        self.dtype = dtype
        self.inv_perm = inv_perm  # view the buffer as the logical tensor, or None
        self.restride = restride  # (shape, stride) eager gives and that must be reproduced


# ---- the runtime object -------------------------------------------------------------------

# Size tuples a size-generic KernelCall keeps its output shapes for.
SIZES_PER_KERNEL = 1024


class KernelCall:
    """A compiled kernel called with torch tensors; returns a tensor or a tuple of tensors.
    A kernel over size variables (`symbolic`) takes their values, in the order of
    `size_names`, as `sizes=`; without them it reads them from `size_env` (name -> value:
    the sizes of the call a plan was made on)."""

    def __init__(self, kernel, in_preps: List[Optional[InputPrep]], out_specs: List[OutputSpec],
                 name: str, symbolic: bool = False):
        self.kernel = kernel
        self.name = name
        self._run = kernel.run
        self._in_preps = in_preps
        self._out_specs = out_specs
        self._plain_inputs = all(p is None for p in in_preps)
        self._plain_outputs = all(s.inv_perm is None and s.restride is None for s in out_specs)
        self._single = len(out_specs) == 1
        self.symbolic = symbolic
        self.size_names: List[str] = list(kernel.size_names) if symbolic else []
        self.size_env: Dict[str, int] = {}
        self._shapes: Dict[tuple, list] = {}  # sizes -> output shapes
        # A range plan's kernels are called from Python one by one: their call runs in C++.
        self._fast = _fast_call(kernel, in_preps, out_specs) \
            if symbolic and self._plain_outputs else None

    def __call__(self, *inputs, sizes=None):
        if self.symbolic and sizes is None:
            sizes = [self.size_env[n] for n in self.size_names]
        if self._fast is not None:
            out = self._fast(sizes, inputs)
            if out is not None:  # None: a weight changed, packed again below
                return out
        if self._plain_inputs:
            keep = [t if t.is_contiguous() else t.contiguous() for t in inputs]
        else:
            keep = [self._prepare(t, p) for t, p in zip(inputs, self._in_preps)]
        if self.symbolic:
            shapes = self._output_shapes(sizes)
            outs = [torch.empty(sh, dtype=s.dtype) for sh, s in zip(shapes, self._out_specs)]
        else:
            # empty(*sizes) parses about twice as fast as empty(list) (~1.7 vs ~2.9 us).
            sizes = []
            outs = [torch.empty(*s.shape, dtype=s.dtype) for s in self._out_specs]
        self._run([t.data_ptr() for t in keep] + [o.data_ptr() for o in outs], sizes)
        if not self._plain_outputs:
            outs = [self._finish(o, s) for o, s in zip(outs, self._out_specs)]
        return outs[0] if self._single else tuple(outs)

    def _output_shapes(self, sizes) -> list:
        key = tuple(sizes)
        got = self._shapes.get(key)
        if got is None:
            got = [tuple(s) for s in self.kernel.output_shapes(list(key))]
            if len(self._shapes) >= SIZES_PER_KERNEL:
                self._shapes.clear()
            self._shapes[key] = got
        return got

    @staticmethod
    def _prepare(t: torch.Tensor, prep: Optional[InputPrep]) -> torch.Tensor:
        if isinstance(prep, PackedInput):
            return prep.packed(t)
        return prepare_input(t, prep)

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


def _fast_call(kernel, in_preps, out_specs) -> Optional[Any]:
    """The C++ call of a kernel (_C.KernelCall: contiguity, packed weights' versions, outputs and
    the run in one step), or None where an input needs a prep only Python makes (a slice or a
    permutation of a tensor that is not a packed weight) or the kernel has no runner."""
    if any(p is not None and not isinstance(p, PackedInput) for p in in_preps):
        return None
    runner = getattr(kernel, "runner", None)
    if runner is None:
        return None
    packed = [p.shared if isinstance(p, PackedInput) else None for p in in_preps]
    return _C.KernelCall(runner(), packed, [s.dtype for s in out_specs])


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
        # Positions of inputs that are weights (the same tensor every call, see graph.py): the
        # kernel may read them prepacked.
        self.constant_inputs: List[int] = []
        # Positions of weights the kernel reads in another dim order than theirs (a layout its
        # propagation chose, e.g. HWIO for a convolution stored NHWC): reordered once per
        # weight version, not per call.
        self.reordered_weights: List[int] = []
        self._workload = None
        self.name: str = "kernel"
        self.metas: Dict[fx.Node, Any] = {}
        self.symbolic = False  # built over size variables (a plan for a range of sizes)
        self.size_ranges: tuple = ()  # (name, lo, hi) of every size variable of the plan
        self.anchor = False  # has a matmul/conv member (summation work worth tuning)

    def size_signature(self) -> tuple:
        """The boundary shapes as printed (size variables by name) and the ranges of the size
        variables: with the workload, what makes two symbolic kernels interchangeable."""
        shapes = tuple(tuple(repr(d) for d in t.shape) for t in self.te_inputs + self.te_outputs)
        return shapes, self.size_ranges

    def workload(self) -> "_C.WorkloadKey":
        """The kernel's workload key (keys.kernel_key), made on first use."""
        if self._workload is None:
            self._workload = keys.kernel_key(self.te_outputs, self.te_inputs)
        return self._workload


class _Builder:
    def __init__(self, members: List[fx.Node], metas: Dict[fx.Node, Any], cls: Classifier,
                 outputs: List[fx.Node], keep_layout: set, sym=None, weights=frozenset()):
        self.weights = weights  # nodes holding weights: their layout may be the kernel's choice
        self.member_set = set(members)
        self.members = members
        self.metas = metas  # the recorded call's: layouts are decided on them
        self.cls = cls
        # Shapes the kernel is built over: symbolic in a plan for a range of sizes.
        self.shapes = SymbolicMetas(metas, sym) if sym is not None else metas
        self.ctx = LowerCtx(self.shapes, cls.kind, concrete=metas)
        self.spec = KernelSpec()
        self.spec.metas = metas
        self.spec.members = members
        self.spec.outputs = outputs
        self.keep_layout = keep_layout

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

    def add_input(self, n: fx.Node) -> None:
        m: TensorMeta = self.metas[n]
        shape = self.shapes[n].shape
        i = len(self.spec.inputs)
        bdims = [d for d in range(m.ndim) if m.stride[d] == 0 and m.shape[d] > 1]
        base_shape = [1 if d in bdims else s for d, s in enumerate(m.shape)]
        base_stride = list(m.stride)
        perm = dense_permutation(base_shape, base_stride)
        if perm is not None and _is_identity_order(perm, base_shape):
            perm = None
        base_sym = [1 if d in bdims else s for d, s in enumerate(shape)]
        phys_shape = [base_sym[d] for d in perm] if perm else base_sym
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
            t = ops.broadcast_to(t, list(shape))
        index = tuple(slice(0, 1) if d in bdims else slice(None) for d in range(m.ndim)) \
            if bdims else None
        self.spec.inputs.append(n)
        self.spec.te_inputs.append(p)
        self.spec.in_preps.append(InputPrep(index, perm) if (index or perm) else None)
        self.ctx.env[n] = t

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
            return
        self.add_input(n)

    def build(self) -> KernelSpec:
        for n in self.members:
            self.ensure(n)
        permuted: Dict[int, List[int]] = {}  # output position -> the dim order it is stored in
        for o in self.spec.outputs:
            self.ensure(o)
            t = self.ctx.env[o]
            if not is_te(t):
                raise RuntimeError(f"internal: output {o.name} has no tensor value")
            m: TensorMeta = self.metas[o]
            shape = self.shapes[o].shape
            if any(t is p for p in self.spec.te_inputs):
                t = identity(t)  # an output must be computed, even when it equals an input
            perm = dense_permutation(m.shape, m.stride)
            restride = None
            inv = None
            if perm is not None and not _is_identity_order(perm, m.shape):
                permuted[len(self.spec.te_outputs)] = perm
                inv = [0] * len(perm)
                for j, d in enumerate(perm):
                    inv[d] = j
                phys = [shape[d] for d in perm]
            else:
                phys = list(shape)
                if perm is None and o in self.keep_layout:
                    if shape != m.shape:
                        raise NotSizeGeneric(f"output {o.name} has a non-dense layout that "
                                             "depends on the sizes")
                    restride = (tuple(m.shape), tuple(m.stride))
            self.spec.te_outputs.append(t)
            self.spec.out_specs.append(OutputSpec(phys, m.dtype, inv, restride))
        if permuted or any(getattr(p, "perm", None) is not None for p in self.spec.in_preps):
            self._store_in_order(permuted)
        names = [_op_name(n.target).replace("aten.", "").split(".")[0] for n in self.members]
        self.spec.name = "_".join(dict.fromkeys(names))[:60] or "kernel"
        self.spec.symbolic = any(isinstance(d, _C.Expr) for p in self.spec.te_inputs
                                 for d in p.shape) or any(s.symbolic for s in self.spec.out_specs)
        if self.spec.symbolic:
            self.spec.size_ranges = self.shapes.shapes.ranges()
        self.spec.anchor = any(self.cls.kind(n) == "anchor" for n in self.members)
        return self.spec


    def _store_in_order(self, permuted: Dict[int, List[int]]) -> None:
        """Stores the outputs in `permuted` in their dim order (_stored_in_order); weights the
        kernel then reads in another order (a convolution stored NHWC reads its weight HWIO)
        become inputs in that order, converted once per weight version (PackedInput)."""
        spec = self.spec
        relayable = {spec.te_inputs[i].name: i for i, n in enumerate(spec.inputs)
                     if self.root(n) in self.weights and spec.in_preps[i] is None}
        spec.te_outputs, inputs, input_perms = _stored_in_order(
            spec.te_outputs, spec.te_inputs, permuted, set(relayable))
        for name, perm in input_perms.items():
            i = relayable[name]
            spec.te_inputs[i] = inputs[i]
            spec.in_preps[i] = InputPrep(None, perm)
            spec.reordered_weights.append(i)


def _reorder_perm(text: str) -> Optional[List[int]]:
    """The dim order of a layout that is one reorder ("reorder(2,3,1,0)"), else None."""
    if not (text.startswith("reorder(") and text.endswith(")")) or " " in text:
        return None
    return [int(d) for d in text[len("reorder("):-1].split(",")]


def _stored_in_order(outputs: List[Any], inputs: List[Any], permuted: Dict[int, List[int]],
                     relayable: set = frozenset()):
    """The outputs, those in `permuted` stored in their dim order. Each is relaid with ALT's
    reorder primitive, propagated back through the elementwise ops that produce it
    (csrc/layout/propagate.h), so the op computing it -- a convolution with its fused epilogue --
    writes that order directly; permuting its result afterwards would be a separate transposing
    copy and would cut the epilogue off. A convolution's padded copy of a permuted input is
    stored in the input's order by the same propagation. The permute op is the fallback where a
    layout does not apply (symbolic shapes, or tensor names the layout cannot tell apart).

    Inputs named in `relayable` (weights) may be given a layout by the propagation. Returns
    (outputs, inputs, {input name: the dim order it is read in}) for those that got one."""
    named, named_inputs = _C.layout.uniquely_named(outputs, inputs)
    layouts = {t.name: "identity" for t in named}  # the others keep their order
    for i, perm in permuted.items():
        layouts[named[i].name] = "reorder(" + ",".join(map(str, perm)) + ")"
    if len(layouts) == len(named):
        try:
            relaid, relaid_inputs, applied = _C.layout.apply(named, named_inputs, layouts, True,
                                                             relayable)
            perms = {name: _reorder_perm(applied[name]) for name in relayable if name in applied}
            if all(p is not None for p in perms.values()):
                return relaid, relaid_inputs, perms
        except RuntimeError as e:
            logger.debug("layout: relaying the outputs in their stored order failed (%s); "
                         "they are permuted after the kernel instead", e)
    return ([ops.permute(t, permuted[i]) if i in permuted else t for i, t in enumerate(outputs)],
            inputs, {})


def build_spec(members: List[fx.Node], metas: Dict[fx.Node, Any], cls: Classifier,
               outputs: List[fx.Node], keep_layout: set, sym=None,
               weights=frozenset()) -> KernelSpec:
    """The kernel spec of a partition; over the size variables of `sym` (symbolic.py) when
    given, else for the recorded shapes. `weights`: the nodes holding weights (their layout in
    the kernel may be its own, converted once)."""
    return _Builder(members, metas, cls, outputs, keep_layout, sym, weights).build()


# Compiled kernels by structural key, bounded by the machine code they hold (jit_cache.py).
_cache = LruCache(default_jit_cache_bytes(), cost=lambda kernel: kernel.code_bytes)
# weight_packs: packed copies of weights made (PackedInput), at first use and after changes;
# dietcode: kernels of range plans tuned (or taken from records) by DietCode.
stats = {"compiled": 0, "cache_hits": 0, "jit_ms": 0.0, "weight_packs": 0, "dietcode": 0}


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


def _tune_and_records(tune: Any):
    """(tuning mode, records_db option, trials, progress bars, runner, tuning scope) from
    compile_spec's second argument: the backend Options, or a tuning mode alone (then the
    records database is the default one and the scope automatic)."""
    if isinstance(tune, str):
        return tune, None, 0, True, None, "automatic"
    return tune.tune, tune.records_db, tune.trials, tune.progress, tune.runner, tune.tune_scope


def _report(spec: KernelSpec, report, records: Optional["records_mod.Records"]) -> None:
    """Counters and logs of one compile: what tuning and the records database did, and a
    warning when the schedule is not what was asked for (a failed tuner, a spent budget)."""
    if records is not None and report.workload:
        records_mod.count("schedule_lookups")
        if report.source == "records":
            records_mod.count("schedule_hits")
    if report.tuner:
        records_mod.count("tuned")
        records_mod.count("tune_s", report.tune_s)
        if records is not None:
            records_mod.count("schedules_stored")
    if records is not None:
        records.log_warnings()
    note = report.note
    if note and report.source != "records" and "too little" not in note:
        log_once(f"compile-note:{note}", f"tessera: {spec.name}: {note}", level=logging.WARNING)


# Called with every spec compile_spec is given, before it compiles: benchmarks/cuda_check.py
# collects the kernels of whole models this way and compiles each for the GPU as well.
spec_observers: List[Callable[[KernelSpec], None]] = []


def compile_spec(spec: KernelSpec, tune: Any = "default",
                 graph_reduce_points: float = 0.0) -> KernelCall:
    """Compiles (or reuses) the kernel of a spec through the one compile call (_C.compile), with
    the tuning mode, scope and records database of `tune`: the backend Options or a tuning mode
    name. graph_reduce_points: the summation work of the spec's whole graph (the automatic
    scope tunes a kernel doing a large share of it). Tuning policy (what is tuned, serial small
    kernels, margins, budget) is the C++ core's."""
    for observe in spec_observers:
        observe(spec)
    mode, records_option, trials, bars, runner, scope = _tune_and_records(tune)
    # A kernel the automatic scope left untuned must not serve a request to tune every kernel.
    key = keys.cache_key(spec.workload(), mode, trials) + (scope,)
    # Kernels reading weights prepacked take other arguments: cached apart.
    kernel_key = key + (tuple(spec.constant_inputs),) if spec.constant_inputs else key
    if spec.symbolic:  # the same sizes by name, with the same ranges (run() checks them)
        kernel_key += (spec.size_signature(),)
    kernel = _cache.get(kernel_key)
    if kernel is None and dietcode_applies(spec, mode):
        records = records_mod.open_records(records_option)
        kernel = compile_dietcode(spec, records, mode, trials)
        stats["dietcode"] += isinstance(kernel, DietCodeKernel)
        stats["compiled"] += 1
        stats["jit_ms"] += kernel.jit_ms + kernel.lower_ms
        _cache.put(kernel_key, kernel)
    if kernel is None:
        records = records_mod.open_records(records_option) if mode != "default" else None
        request = _C.CompileRequest(name=spec.name, tune=mode, trials=trials,
                                    records=records.db if records is not None else None,
                                    runner=runner if mode == "search" else None,
                                    scope=scope, graph_reduce_points=graph_reduce_points)
        request.constant_inputs = list(spec.constant_inputs)
        searched = _searched.get(key) if mode == "search" else None
        if searched is not None:  # tuned with its graph's other kernels (search_specs)
            request.schedule = searched
        progress = SearchProgress(bar=None if bars else False) if mode == "search" else None
        request.on_trial = progress
        try:
            kernel = _C.compile(spec.te_outputs, spec.te_inputs, request)
        finally:
            if progress is not None:
                progress.close()
        _report(spec, kernel.report, records)
        stats["compiled"] += 1
        stats["jit_ms"] += kernel.jit_ms + kernel.lower_ms
        _cache.put(kernel_key, kernel)
    else:
        stats["cache_hits"] += 1
    preps = list(spec.in_preps)
    for i, numel in kernel.prepacks:  # fresh per call site: each keeps its own packed copy
        preps[i] = PackedInput(spec.in_preps[i], kernel, i, numel, spec.metas[spec.inputs[i]].dtype,
                               spec.te_inputs[i].shape)
    for i in spec.reordered_weights:  # reordered once per weight version, kept
        if isinstance(preps[i], InputPrep):
            shape = [int(d) for d in spec.te_inputs[i].shape]
            preps[i] = PackedInput(preps[i], None, i, math.prod(shape),
                                   spec.metas[spec.inputs[i]].dtype, shape)
    return KernelCall(kernel, preps, spec.out_specs, spec.name, symbolic=spec.symbolic)


# Schedules chosen by a whole graph's search (search_specs), by cache key: the compile of each
# kernel builds them instead of searching again (the records database keeps them for later
# processes).
_searched: Dict[tuple, Any] = {}
# The last whole-graph searches' results (_C.tune_tasks), newest last (benchmarks, explain).
search_history: List[dict] = []


def search_specs(weighted: List[tuple], options: Any) -> Optional[dict]:
    """Search mode over a graph's kernels together: `weighted` = [(KernelSpec, occurrences)],
    tuned under the task scheduler (compiler/tune_tasks.h) with `options.trials` measurements
    per kernel on average. Kernels tuned already (in this process or the records database) and
    those not worth tuning cost nothing. Returns the _C.tune_tasks result (None: nothing to do)."""
    keyed = [(keys.cache_key(s.workload(), "search", options.trials) + (options.tune_scope,), s,
              w) for s, w in weighted]
    todo = [(k, s, w) for k, s, w in keyed if k not in _searched and k not in _cache]
    if not todo:
        return None
    records = records_mod.open_records(options.records_db)
    progress = SearchProgress(bar=None if options.progress else False, whole_model=True)
    try:
        tasks = [(s.te_outputs, s.te_inputs, s.name, float(w), list(s.constant_inputs))
                 for _, s, w in todo]
        result = _C.tune_tasks(tasks, trials_per_task=options.trials, scheduler=options.scheduler,
                               records=records.db if records is not None else None,
                               on_trial=progress, runner=options.runner,
                               reuse=getattr(options, "reuse", True),
                               scope=options.tune_scope)
    finally:
        progress.close()
    for (key, _, _), task in zip(todo, result["tasks"]):
        if task["status"] in ("search", "reuse", "records"):
            _searched[key] = task["schedule"]
    _log_reuse(result)
    search_history.append(result)
    del search_history[:-8]
    if records is not None:
        records.log_warnings()
    return result


def _log_reuse(result: dict) -> None:
    """One line per kernel tuned from another's program (ETO: another kernel of the graph, a
    bridge operator, or a program stored by an earlier compile, "records:<hash>")."""
    tasks = result["tasks"]
    reused = [t for t in tasks if t["status"] == "reuse"]
    if not reused:
        return
    searched = sum(1 for t in tasks if t["status"] == "search")
    lines = [f"tessera: search reused tuned programs for {len(reused)} of "
             f"{len(reused) + searched} kernels ({result['reuse_trials']} reuse measurements, "
             f"{result['trials_after'][-1] if result['trials_after'] else 0} search "
             f"measurements)"]
    for t in reused:
        lines.append(f"  {t['name']} <- {t['reused_from_name']} ({t['report'].trials} trials, "
                     f"{t['report'].median_ms:.3f} ms)")
    logger.info("\n".join(lines))


def clear_cache() -> None:
    _cache.clear()
    _searched.clear()


def cached_kernels() -> List[Any]:
    """The compiled kernels (_C.Kernel, each with its .report) in the cache, oldest first."""
    return _cache.values()


__all__ = ["KernelCall", "KernelSpec", "build_spec", "compile_spec"]


def kernel_call_parts(call: KernelCall):
    """(compiled _C kernel, input preps, output specs) of a KernelCall: what the C++ graph
    executor (program_runner.py) needs to run the kernel without this Python wrapper."""
    return call.kernel, call._in_preps, call._out_specs
