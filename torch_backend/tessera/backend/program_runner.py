"""Runs of consecutive Tessera kernels become one C++ call: a `_C.Program` (runtime/program.h).

The planner orders a graph's steps (kernels and ATen operators). Every maximal run of kernel
steps turns into one Program step: the runner prepares the run's inputs (contiguous, or
permuted/sliced as each kernel reads them, see kernel_build.InputPrep), allocates the values
that leave the run with torch.empty, and makes one call with all data pointers. Values produced
and consumed inside the run never become torch tensors: they live in the Program's arena, laid
out once by liveness so that dead intermediates share memory.

A value produced inside a run is read in place only where the consumer reads the buffer the
producer writes (the same physical dim order, no broadcast slicing); otherwise the run is split
there and the consumer's input is prepared in Python like any other input. Views between
kernels (reshapes of a GEMM's output, transposes) would cut runs short: a view of a run's value
that reads the same bytes is absorbed (computed only if something outside needs it), and ATen
steps that read nothing of the run (weight transposes) are hoisted before the run's call.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import torch
import torch.fx as fx

from .. import _C
from .kernel_build import InputPrep, OutputSpec, PackedInput, kernel_call_parts
from .log import log_once
from .meta import TensorMeta, dense_permutation
from .runner import Step, _nodes_in


# TESSERA_PROGRAM=0: every kernel is its own Python call (KernelCall), as before programs
# existed; for comparisons (benchmarks/overhead.py) and for isolating a suspected executor bug.
ENABLED = os.environ.get("TESSERA_PROGRAM", "1") != "0"


@dataclasses.dataclass(eq=False)
class Segment:
    """One Program call: its inputs (value, prep) and outputs (value, spec) in pointer order."""
    program: Any
    inputs: List[Tuple[fx.Node, Optional[InputPrep]]]
    outputs: List[Tuple[fx.Node, OutputSpec]]
    kernels: List[str]
    temps: int                      # intermediates kept in the arena

    @property
    def name(self) -> str:
        return "+".join(self.kernels)

    @property
    def arena_bytes(self) -> int:
        return self.program.arena_bytes

    @property
    def temp_bytes(self) -> int:
        return self.program.temp_bytes


def _buffer_order(spec: OutputSpec) -> Optional[Tuple[int, ...]]:
    """Dim order of the buffer a kernel writes (None: the logical order). A restrided output
    still fills its buffer in the logical order; only the tensor handed to Python is copied."""
    if spec.inv_perm is None:
        return None
    perm = [0] * len(spec.inv_perm)
    for d, j in enumerate(spec.inv_perm):
        perm[j] = d
    return tuple(perm)


def _reads_in_place(spec: OutputSpec, prep: Optional[InputPrep]) -> bool:
    """Does a consumer with this input prep read exactly the buffer the producer writes?"""
    if prep is None:
        return spec.inv_perm is None
    if prep.index is not None:
        return False
    want = tuple(prep.perm) if prep.perm is not None else None
    return want == _buffer_order(spec)


def _prep_bytes(meta: TensorMeta, prep: Optional[InputPrep]) -> int:
    """Bytes of the buffer a kernel reads for an input: broadcast dims are sliced to one."""
    numel = 1
    for d, s in enumerate(meta.shape):
        sliced = prep is not None and prep.index is not None and prep.index[d] != slice(None)
        numel *= 1 if sliced else s
    return numel * meta.dtype.itemsize


def _prep_key(prep: Optional[InputPrep]):
    if prep is None:
        return None
    return (repr(prep.index), tuple(prep.perm) if prep.perm is not None else None)


# Views that keep their input's storage offset (0 for a value a kernel made). A view through
# any chain of these of a dense value is dense itself only if its elements are exactly the
# first numel of the value's memory, in the dim order its own strides say: a kernel can then
# read the producer's buffer for it. aten.clone is among them only where the planner made it a
# view (runner._clone_as_view); an expand that broadcasts leaves a stride 0, so is not dense.
_BUFFER_VIEWS = {
    torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
    torch.ops.aten.permute.default, torch.ops.aten.t.default, torch.ops.aten.transpose.int,
    torch.ops.aten.unsqueeze.default, torch.ops.aten.squeeze.dim, torch.ops.aten.squeeze.dims,
    torch.ops.aten.squeeze.default, torch.ops.aten.alias.default, torch.ops.aten.clone.default,
    torch.ops.aten.expand.default,
}


def _dense(meta: Any) -> bool:
    """Dense in some dim order, with no broadcast (stride-0) dims."""
    return isinstance(meta, TensorMeta) and dense_permutation(meta.shape, meta.stride) is not None


def _view_in_place(n: fx.Node, prep: Optional[InputPrep], metas: Dict[fx.Node, Any]) -> bool:
    """Can a kernel read the buffer of an absorbed view's root for the view itself? (The root is
    dense: checked when the view was absorbed.)"""
    return (prep is None or prep.index is None) and _dense(metas.get(n))


@dataclasses.dataclass(eq=False)
class _Run:
    """Kernel steps that become one Program, with the ATen steps moved around them."""
    items: List[Step]                # kernels and absorbed views, in order
    before: List[Step]               # ATen steps reading nothing of the run: hoisted before it
    made: Dict[fx.Node, OutputSpec]  # values its kernels produce
    alias: Dict[fx.Node, fx.Node]    # absorbed view -> the made value whose buffer it is

    def kernels(self) -> List[Step]:
        return [s for s in self.items if s.kind == "kernel"]

    def views(self) -> List[Step]:
        return [s for s in self.items if s.kind != "kernel"]

    def internal(self, n: fx.Node) -> bool:
        return n in self.made or n in self.alias


def _reads(s: Step) -> List[fx.Node]:
    return s.inputs if s.kind != "aten" else _nodes_in((s.node.args, s.node.kwargs))


def _mutates(n: fx.Node) -> bool:
    schema = getattr(n.target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def _runs(steps: List[Step], kind_of: Callable[[fx.Node], Optional[str]],
          metas: Dict[fx.Node, Any]) -> List[Any]:
    """Steps with runs of kernel steps grouped into _Runs. Inside a run, views of the run's
    values that kernels can read in place are absorbed (they cost nothing unless something
    outside needs them), and ATen steps independent of the run are hoisted before it, so views
    and weight transposes between kernels do not cut runs short. A run ends at an ATen step
    that reads one of its values, at a mutation, and where a kernel cannot read its producer's
    buffer in place."""
    out: List[Any] = []
    run: Optional[_Run] = None
    for s in steps:
        if s.kind == "kernel":
            _, preps, specs = kernel_call_parts(s.call)
            if run is not None:
                for n, p in zip(s.inputs, preps):
                    if n in run.made:
                        ok = _reads_in_place(run.made[n], p)
                    elif n in run.alias:
                        ok = _view_in_place(n, p, metas)
                    else:
                        continue
                    if not ok:
                        out.append(run)
                        run = None
                        break
            if run is None:
                run = _Run([], [], {}, {})
            run.items.append(s)
            run.made.update(zip(s.outputs, specs))
            continue
        if run is not None and s.kind == "aten" and not _mutates(s.node):
            reads = _reads(s)
            if not any(run.internal(n) for n in reads):
                run.before.append(s)
                continue
            src = s.node.args[0] if s.node.args else None
            if (s.node.target in _BUFFER_VIEWS and kind_of(s.node) == "view"
                    and isinstance(src, fx.Node) and run.internal(src)
                    and all(n is src or not run.internal(n) for n in reads)):
                root = run.alias.get(src, src)
                spec = run.made[root]
                if _dense(metas.get(root)) and spec.restride is None:
                    run.items.append(s)
                    run.alias[s.node] = root
                    continue
        if run is not None:
            out.append(run)
            run = None
        out.append(s)
    if run is not None:
        out.append(run)
    return out


def _buffer_source(n: fx.Node, prep: Optional[InputPrep], run: _Run,
                   kind_of: Callable[[fx.Node], Optional[str]],
                   metas: Dict[fx.Node, Any]) -> Optional[fx.Node]:
    """For a kernel input that is a chain of _BUFFER_VIEWS of a value x recorded contiguous:
    x, whose contiguous buffer holds exactly the bytes the kernel reads for n. (n is dense, so
    its elements are the first of x's memory in n's own storage order, which is x's row-major
    order; x.contiguous() gives that order whatever x's strides at run time.) The runner then
    passes x and the view steps, often a weight's transpose, need not run at all."""
    if (prep is not None and prep.index is not None) or not _dense(metas.get(n)):
        return None
    x = n
    while (x.op == "call_function" and x.target in _BUFFER_VIEWS and kind_of(x) == "view"
           and x.args and isinstance(x.args[0], fx.Node)):
        x = x.args[0]
    m = metas.get(x)
    if x is n or run.internal(x) or not isinstance(m, TensorMeta) or not m.is_contiguous():
        return None
    return x if m.dtype == metas[n].dtype else None


def build_segment(run: _Run, needed_outside: Set[fx.Node], metas: Dict[fx.Node, Any],
                  kind_of: Callable[[fx.Node], Optional[str]] = lambda n: None
                  ) -> Tuple[Step, Segment]:
    """The Program of a run and the Step that calls it. `needed_outside`: the values something
    outside the run's Program (or the graph's output) reads."""
    buffers: List[Tuple[str, int, int]] = []
    inputs: List[Tuple[fx.Node, Optional[InputPrep]]] = []
    outputs: List[Tuple[fx.Node, OutputSpec]] = []
    buffer_of: Dict[Any, int] = {}  # made node, or (input node, prep key) -> buffer id
    steps = []
    temps = 0
    for s in run.kernels():
        kernel, preps, specs = kernel_call_parts(s.call)
        ids = []
        for n, prep in zip(s.inputs, preps):
            if run.internal(n):  # readable in place: see _runs
                ids.append(buffer_of[run.alias.get(n, n)])
                continue
            if isinstance(prep, PackedInput):  # its packed copy: the runner passes that
                key = (n, ("packed", id(prep)))
                nbytes = prep.numel * prep.dtype.itemsize
            else:
                src = _buffer_source(n, prep, run, kind_of, metas)
                if src is not None:
                    n, prep = src, None
                key = (n, _prep_key(prep))
                nbytes = _prep_bytes(metas[n], prep)
            if key not in buffer_of:
                buffer_of[key] = len(buffers)
                buffers.append(("input", len(inputs), nbytes))
                inputs.append((n, prep))
            ids.append(buffer_of[key])
        for o, spec in zip(s.outputs, specs):
            nbytes = spec.numel * spec.dtype.itemsize
            buffer_of[o] = len(buffers)
            if o in needed_outside:
                buffers.append(("output", len(outputs), nbytes))
                outputs.append((o, spec))
            else:
                buffers.append(("temp", -1, nbytes))
                temps += 1
            ids.append(buffer_of[o])
        steps.append((kernel, ids, []))
    program = _C.Program(buffers, steps)
    seg = Segment(program, inputs, outputs, [s.call.name for s in run.kernels()], temps)
    step = Step("program", [o for o, _ in outputs], list(dict.fromkeys(n for n, _ in inputs)),
                call=seg)
    return step, seg


def segment_steps(steps: List[Step], output_args: Any, metas: Dict[fx.Node, Any],
                  kind_of: Callable[[fx.Node], Optional[str]]
                  ) -> Tuple[List[Step], List[Segment]]:
    """Replaces every run of kernel steps by its hoisted ATen steps, one Program step, and the
    absorbed views something outside still reads (a run whose Program cannot be built keeps
    its steps, kernels called one by one from Python, logged)."""
    grouped = _runs(steps, kind_of, metas)
    readers: Dict[fx.Node, Set[int]] = {}  # value -> positions (in `grouped`) reading it
    for i, item in enumerate(grouped):
        if isinstance(item, _Run):
            reads = [n for s in item.before for n in _reads(s)]
            reads += [n for s in item.kernels() for n in s.inputs if not item.internal(n)]
        else:
            reads = _reads(item)
        for n in reads:
            readers.setdefault(n, set()).add(i)
    graph_outputs = set(_nodes_in(output_args))
    out: List[Step] = []
    segments: List[Segment] = []
    for i, item in enumerate(grouped):
        if isinstance(item, Step):
            out.append(item)
            continue
        outside = {n for n in list(item.made) + list(item.alias)
                   if n in graph_outputs or readers.get(n, set()) - {i}}
        kept = []  # absorbed views that must exist as tensors (read outside, or by kept views)
        for v in reversed(item.views()):
            if v.node in outside:
                kept.append(v)
                outside.add(v.node.args[0])
        kept.reverse()
        out.extend(item.before)
        try:
            step, seg = build_segment(item, outside, metas, kind_of)
        except Exception as e:  # the kernels still run, one Python call each
            msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            log_once("program-failure:" + msg,
                     f"tessera: kernels run one by one (no C++ program: {msg})", level=30)
            out.extend(item.items)
            continue
        out.append(step)
        out.extend(kept)
        segments.append(seg)
    return _drop_unread_views(out, graph_outputs, kind_of), segments


def _drop_unread_views(steps: List[Step], graph_outputs: Set[fx.Node],
                       kind_of: Callable[[fx.Node], Optional[str]]) -> List[Step]:
    """Without the view steps nothing reads any more (programs read their sources instead)."""
    needed = set(graph_outputs)
    keep = []
    for s in reversed(steps):
        if s.kind == "aten" and kind_of(s.node) == "view" and s.node not in needed:
            continue
        keep.append(s)
        needed.update(_reads(s))
    keep.reverse()
    return keep
