"""Executes a compiled graph: an ordered list of steps turned into straight-line Python.

A step is a C++ Program running a run of Tessera kernels (program_runner.py), a single Tessera
kernel called from Python (KernelCall: where programs are off or one could not be built), or an
ATen call. The runner is generated Python source (one local variable per value, `del` right
after a value's last use so intermediates are freed early), which keeps the per-call overhead to
the calls themselves. A program step is a few lines: inputs made contiguous (or permuted as the
kernels read them), outputs allocated with torch.empty, one call with every data pointer.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.fx as fx

from . import aten_sequence
from .kernel_build import PackedInput, prepare_input
from .partition import flat_nodes

aten = torch.ops.aten
# Views called as Tensor methods: about half the cost of going through the OpOverload, and a
# transformer graph runs hundreds of them per call. Only used without keyword arguments.
_METHODS = {
    aten.view.default: torch.Tensor.view,
    aten.permute.default: torch.Tensor.permute,
    aten.expand.default: torch.Tensor.expand,
    aten.unsqueeze.default: torch.Tensor.unsqueeze,
    aten.squeeze.dim: torch.Tensor.squeeze,
    aten.t.default: torch.Tensor.t,
    aten.transpose.int: torch.Tensor.transpose,
}


@dataclasses.dataclass(eq=False)
class Step:
    kind: str                       # "kernel", "program" or "aten"
    outputs: List[fx.Node]          # values this step defines
    inputs: List[fx.Node]           # values it reads (for kernels, in ABI order)
    call: Any = None                # KernelCall for kernels, program_runner.Segment for programs,
    #                                 for ATen steps a replacement of the operator (or None)
    node: Optional[fx.Node] = None  # the ATen node
    # ATen steps: make the result contiguous after the call. An ATen operator keeps the layout
    # of an input the planner stored NHWC (activation_layout.py), where the plan wants eager's
    # layout for its result (a view of it would fail, a kernel would read it wrongly ordered).
    contiguous_result: bool = False


class _Emitter:
    def __init__(self, constants: Dict[fx.Node, Any]):
        self.constants = constants  # folded scalar values by node
        self.names: Dict[fx.Node, str] = {}
        self.globals: Dict[str, Any] = {"_empty": torch.empty, "_prepare": prepare_input,
                                        "_restride": _restride}
        self.lines: List[str] = []
        self.contiguous: set = set()  # values known to be contiguous (fresh program outputs)
        self.deleted: set = set()     # values whose name was deleted before the end of a step

    def name(self, n: fx.Node) -> str:
        if n not in self.names:
            self.names[n] = f"v{len(self.names)}"
        return self.names[n]

    def const(self, value: Any) -> str:
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        g = f"c{len(self.globals)}"
        self.globals[g] = value
        return g

    def expr(self, a: Any) -> str:
        if isinstance(a, fx.Node):
            if a in self.constants:
                return self.const(self.constants[a])
            return self.name(a)
        if isinstance(a, list):
            return "[" + ", ".join(self.expr(x) for x in a) + "]"
        if isinstance(a, tuple):
            return "(" + "".join(self.expr(x) + ", " for x in a) + ")"
        if isinstance(a, dict):
            return "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in a.items()) + "}"
        return self.const(a)


def generate(placeholders: List[fx.Node], steps: List[Step], output_args: Any,
             constants: Dict[fx.Node, Any], name: str = "compiled_graph",
             kind_of: Optional[Callable[[fx.Node], Optional[str]]] = None,
             sizes: Optional[Dict[str, Any]] = None) -> Callable:
    """Python function run(args) executing `steps` (boxed: it empties a list argument so that
    inputs can be freed as soon as they are dead). `sizes`: where each size variable of
    size-generic kernels is read, name -> (placeholder, dim or None for an int input)."""
    em = _Emitter(constants)
    last_use: Dict[fx.Node, int] = {}
    for i, s in enumerate(steps):
        reads = s.inputs if s.kind != "aten" else _nodes_in((s.node.args, s.node.kwargs))
        for n in reads:
            last_use[n] = i
    keep = set(_nodes_in(output_args))

    body = []
    if placeholders:
        body.append(", ".join(em.name(p) for p in placeholders) + ", = args")
    body.append("if type(args) is list: args.clear()")
    size_vars = _emit_sizes(em, body, steps, sizes or {})
    unused = [p for p in placeholders if p not in last_use and p not in keep]
    if unused:
        body.append("del " + ", ".join(em.name(p) for p in unused))
    kind_of = kind_of or (lambda n: None)
    dies: Dict[int, List[fx.Node]] = {}
    for n, j in last_use.items():
        dies.setdefault(j, []).append(n)
    runs = {r.start: r for r in aten_sequence.split_runs(steps, constants, kind_of)}
    whole = None  # the sequence, where one runs the whole graph
    i = 0
    while i < len(steps):
        end = i + 1
        built = None
        if i in runs:
            built = _emit_sequence(em, body, steps, runs[i], keep, last_use, dies)
        if built is not None:
            end = runs[i].end
            if i == 0 and end == len(steps) and not size_vars:
                whole = _whole_sequence(built, placeholders)
        else:
            _emit_step(em, body, steps[i], size_vars, kind_of)
        dead = [n for j in range(i, end) for n in dies.get(j, ())
                if n not in keep and n in em.names and n not in em.deleted]
        if dead:
            body.append("del " + ", ".join(em.name(n) for n in dead))
        i = end
    if whole is None and not runs and not size_vars:
        whole = _whole_graph_sequence(steps, constants, kind_of, keep, dies, placeholders)
    body.append(f"return {em.expr(output_args)}")
    src = f"def {name}(args):\n" + "\n".join("    " + line for line in body) + "\n"
    scope = dict(em.globals)
    exec(compile(src, f"<tessera {name}>", "exec"), scope)
    fn = scope[name]
    fn._boxed_call = True
    fn.source = src
    fn.whole_sequence = whole
    return fn


@dataclasses.dataclass(frozen=True)
class WholeSequence:
    """A runner that is one AtenSequence call: what a C++ kernel needs to run the graph without
    Python (graph_op.py). `inputs`: the placeholder position of each sequence input;
    `outputs`: the values the sequence returns, in order."""
    sequence: Any
    inputs: List[int]
    outputs: List[fx.Node]
    # Weights read through packed copies: (placeholder position, _C.PackedWeight), whose
    # pointers the sequence takes after the inputs.
    packed: List[tuple] = dataclasses.field(default_factory=list)


def _whole_graph_sequence(steps: List[Step], constants: Dict[fx.Node, Any],
                          kind_of: Callable[[fx.Node], Optional[str]], keep: set,
                          dies: Dict[int, List[fx.Node]],
                          placeholders: List[fx.Node]) -> Optional[WholeSequence]:
    """For a runner that is not one sequence because it calls no ATen operator (a lone
    program, called directly from Python): the same steps as one sequence, for the C++ kernel
    of the graph's operator; None where they cannot be one."""
    runs = aten_sequence.split_runs(steps, constants, kind_of, need_aten=False)
    if len(runs) != 1 or (runs[0].start, runs[0].end) != (0, len(steps)):
        return None
    built = aten_sequence.build(steps, runs[0], set(keep), dies)
    return None if built is None else _whole_sequence(built, placeholders)


def _whole_sequence(built, placeholders: List[fx.Node]) -> Optional[WholeSequence]:
    """The WholeSequence of a sequence that runs every step, or None where it reads a value
    that is not a graph input."""
    seq, inputs, packed, outputs = built
    position = {p: i for i, p in enumerate(placeholders)}
    if any(n not in position for n in inputs) or any(n not in position for _, n in packed):
        return None
    return WholeSequence(seq, [position[n] for n in inputs], list(outputs),
                         [(position[n], prep.shared) for prep, n in packed])


def _emit_step(em: _Emitter, body: List[str], s: Step, size_vars: Dict[str, str],
               kind_of: Callable[[fx.Node], Optional[str]]) -> None:
    if s.kind == "program":
        body += _emit_program(em, s.call)
    elif s.kind == "kernel":
        g = f"k{len(em.globals)}"
        em.globals[g] = s.call
        outs = ", ".join(em.name(o) for o in s.outputs)
        if len(s.outputs) > 1:
            outs += ","
        call_args = [em.expr(n) for n in s.inputs]
        if getattr(s.call, "symbolic", False):
            call_args.append("sizes=(" + "".join(f"{size_vars[v]}, "
                                                 for v in s.call.size_names) + ")")
        body.append(f"{outs} = {g}({', '.join(call_args)})  # {s.call.name}")
    else:
        n = s.node
        g = f"f{len(em.globals)}"
        # An ATen step may call a Tessera kernel in the operator's place (attention.py).
        em.globals[g] = s.call if s.call is not None else _callable(n, kind_of(n))
        args = [em.expr(a) for a in n.args]
        args += [f"{k}={em.expr(v)}" for k, v in n.kwargs.items()]
        after = ".contiguous()" if s.contiguous_result else ""
        body.append(f"{em.name(n)} = {g}({', '.join(args)}){after}")


def _emit_sequence(em: _Emitter, body: List[str], steps: List[Step], run, keep: set,
                   last_use: Dict[fx.Node, int], dies: Dict[int, List[fx.Node]]):
    """One line calling the run's steps (aten_sequence.Run) as a C++ AtenSequence; returns
    what aten_sequence.build made, or None (nothing emitted) where it could not be built."""
    start, end = run.start, run.end
    live_after = set(keep) | {n for n, j in last_use.items() if j >= end}
    built = aten_sequence.build(steps, run, live_after, dies)
    if built is None:
        return None
    seq, inputs, packed, outputs = built
    g = f"s{len(em.globals)}"
    em.globals[g] = seq.boxed
    args = [em.expr(n) for n in inputs]
    for prep, n in packed:  # a weight's packed copy, packed again if it changed
        c = f"c{len(em.globals)}"
        em.globals[c] = prep
        args.append(f"{c}.ptr({em.expr(n)})")
    # The sequence empties its argument list: values that die inside it are freed there, once
    # the runner's own names for them are gone.
    body.append(f"_in = [{', '.join(args)}]")
    dying = [n for j in range(start, end) for n in dies.get(j, ())
             if n not in keep and n in em.names and n not in em.deleted]
    if dying:
        body.append("del " + ", ".join(em.name(n) for n in dying))
        em.deleted.update(dying)
    names = "".join(em.name(n) + ", " for n in outputs)
    ops = ", ".join(aten_sequence.step_name(s) for s in steps[start:end])
    call = f"{g}(_in)"
    body.append(f"{names}= {call}  # {ops}" if outputs else f"{call}  # {ops}")
    return built


def _emit_sizes(em: _Emitter, body: List[str], steps: List[Step],
                sizes: Dict[str, Any]) -> Dict[str, str]:
    """Lines reading the values of the size variables the kernels take off the graph's inputs
    (before any input is freed); returns the local variable of each."""
    used = dict.fromkeys(v for s in steps if s.kind == "kernel" and getattr(s.call, "symbolic",
                                                                             False)
                         for v in s.call.size_names)
    out = {}
    for v in used:
        node, dim = sizes[v]
        out[v] = f"z{len(out)}_"
        read = em.name(node) if dim is None else f"{em.name(node)}.shape[{dim}]"
        body.append(f"{out[v]} = {read}")
    return out


def _emit_program(em: _Emitter, seg) -> List[str]:
    """Lines running one program_runner.Segment: prepare inputs, allocate outputs, one call
    with every data pointer, then give outputs their logical layout."""
    lines, ptrs, temps, after = [], [], [], []
    for n, prep in seg.inputs:
        if isinstance(prep, PackedInput):  # a weight's packed copy, packed again if it changed
            g = f"c{len(em.globals)}"
            em.globals[g] = prep
            ptrs.append(f"{g}.ptr({em.expr(n)})")
            continue
        if n in em.constants:
            c = em.constants[n]
            if prepare_input(c, prep).data_ptr() == c.data_ptr():
                # Read in place: its address is fixed for the runner's life (the runner's
                # globals keep the tensor alive). A constant that needs a copy is prepared on
                # every call, like any value, in case something updates it in place.
                em.const(c)
                ptrs.append(f"{c.data_ptr()}")
                continue
        v = em.expr(n)
        if prep is None and n in em.contiguous:
            ptrs.append(f"{v}.data_ptr()")
            continue
        t = f"t{len(em.names) + len(temps)}_"
        temps.append(t)
        if prep is None:
            lines.append(f"{t} = {v} if {v}.is_contiguous() else {v}.contiguous()")
        else:
            g = f"c{len(em.globals)}"
            em.globals[g] = prep
            lines.append(f"{t} = _prepare({v}, {g})")
        ptrs.append(f"{t}.data_ptr()")
    for n, spec in seg.outputs:
        v = em.name(n)
        shape = "()" if spec.shape == ((),) else ", ".join(str(d) for d in spec.shape)
        alloc = f"_empty({shape}, dtype={em.const(spec.dtype)})"
        if spec.inv_perm is None and spec.restride is None:
            lines.append(f"{v} = {alloc}")
            ptrs.append(f"{v}.data_ptr()")
            em.contiguous.add(n)
            continue
        b = f"b{len(em.names) + len(temps)}_"
        temps.append(b)
        lines.append(f"{b} = {alloc}")
        ptrs.append(f"{b}.data_ptr()")
        if spec.inv_perm is not None:
            after.append(f"{v} = {b}.permute({list(spec.inv_perm)!r})")
        else:
            shape, stride = spec.restride
            after.append(f"{v} = _restride({b}, {tuple(shape)!r}, {tuple(stride)!r})")
    g = f"p{len(em.globals)}"
    em.globals[g] = seg.program
    lines.append(f"{g}({', '.join(ptrs)})  # {seg.name}")
    lines += after
    if temps:
        lines.append("del " + ", ".join(temps))
    return lines


def _restride(buf: torch.Tensor, shape, stride) -> torch.Tensor:
    """A copy of a kernel's output in the non-dense layout eager gives it (graph outputs)."""
    r = torch.empty_strided(shape, stride, dtype=buf.dtype)
    r.copy_(buf)
    return r


def _clone_as_view(x: torch.Tensor, memory_format=None) -> torch.Tensor:
    """A clone nobody can observe (see partition.Classifier): the value itself, made contiguous
    when that layout was asked for (a no-op when it already is)."""
    if memory_format == torch.contiguous_format:
        return x.contiguous()
    return x


def _callable(n: fx.Node, kind: Optional[str] = None) -> Callable:
    """The fastest equivalent of n.target: a Tensor method for views, the C++ operator handle
    behind an OpOverload (whose Python __call__ only forwards to it)."""
    if n.target is aten.clone.default and kind == "view":
        return _clone_as_view
    if not n.kwargs and n.target in _METHODS:
        return _METHODS[n.target]
    if isinstance(n.target, torch._ops.OpOverload):
        return getattr(n.target, "_op", n.target)
    return n.target


def _nodes_in(a: Any) -> List[fx.Node]:
    return list(flat_nodes(a))
