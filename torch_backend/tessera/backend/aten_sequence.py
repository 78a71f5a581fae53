"""Runs of ATen steps called from C++: one `_C.AtenSequence` call per run (issue 19, item 7).

Between Tessera kernels a graph keeps ATen operators (views, operators Tessera leaves to ATen,
attention where ATen measured faster). Called one by one from the generated runner, each costs
a Python call and a schema match on top of the operator itself. The runner hands every maximal
run of consecutive ATen steps that can be described to the C++ dispatcher instead: values in
numbered slots, operands as slots or constants converted once, dead slots cleared right after
their last reader (see csrc/python/aten_sequence.h).

A step can be described when its target is an ATen operator (OpOverload) whose arguments are
graph values, lists of graph values for tensor-list parameters, or constants; a getitem of a
tuple made inside the run; or a clone nobody can observe (kept as the value itself). Anything
else (a Tessera replacement of the operator, a Python callable, a list mixing values and
constants where the schema wants numbers) ends the run and is called from Python as before.
"""

from __future__ import annotations

import dataclasses
import operator
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
import torch.fx as fx

from .. import _C
from .kernel_build import PackedInput, prepare_input
from .log import log_once
from .partition import flat_nodes

# TESSERA_ATEN_SEQUENCE=0: every ATen step is its own Python call, as before sequences existed
# (benchmarks/overhead.py compares the two).
ENABLED = os.environ.get("TESSERA_ATEN_SEQUENCE", "1") != "0"

# What a run takes from outside (by the value's example in node.meta["val"]).
_INPUT_TYPES = (torch.Tensor, bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool)


def _tensor_list_param(arg: torch.Argument) -> Optional[bool]:
    """For a Tensor[] parameter False, for a Tensor?[] one True, else None."""
    t = arg.type
    if not isinstance(t, torch.ListType):
        return None
    elem = t.getElementType()
    optional = isinstance(elem, torch.OptionalType)
    if optional:
        elem = elem.getElementType()
    return optional if isinstance(elem, torch.TensorType) else None


def _value_fits(n: fx.Node, param: torch.Argument) -> bool:
    """Does n's value (by its example) have the type param declares? The dispatcher takes
    values as they are: a size passed for a Tensor parameter (which a Python call would wrap
    into a tensor) or an int for a float parameter is refused there, so such steps stay in
    Python."""
    val = n.meta.get("val")
    t = param.type
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    if isinstance(t, torch.TensorType):
        return isinstance(val, torch.Tensor)
    if isinstance(val, (torch.SymBool, bool)):
        return isinstance(t, (torch.BoolType, torch.NumberType))
    if isinstance(val, (torch.SymInt, int)):
        return isinstance(t, (torch.IntType, torch.SymIntType, torch.NumberType))
    if isinstance(val, (torch.SymFloat, float)):
        return isinstance(t, (torch.FloatType, torch.NumberType))
    return False


class _Describer:
    """Slot numbers and step descriptions for one run. Slots hold the run's inputs, the values
    its steps define, and temporaries (a program's prepared inputs and output buffers)."""

    def __init__(self, constants: Dict[fx.Node, Any]):
        self.constants = constants
        self.count = 0
        # Only ever added to, so that a step that cannot be described is undone by dropping
        # the entries made after a mark (dicts keep insertion order: `defined` and `contiguous`
        # are ordered sets).
        self.slots: Dict[fx.Node, int] = {}
        self.inputs: List[fx.Node] = []      # values from outside the run, in slot order
        self.defined: Dict[fx.Node, None] = {}  # values the run's steps define
        self.contiguous: Dict[fx.Node, None] = {}  # fresh dense outputs of the run's programs
        # Packed weights: (PackedInput, value) whose pointer the runner passes as an input
        # after the values (PackedInput.ptr packs again where the weight changed).
        self.packed: List[Tuple[PackedInput, fx.Node]] = []
        self.packed_slots: List[int] = []

    def temp(self) -> int:
        self.count += 1
        return self.count - 1

    def slot(self, n: fx.Node) -> Optional[int]:
        """n's slot; None for a value from outside the run that is not a tensor or a scalar
        (the types a sequence takes as inputs)."""
        if n not in self.slots:
            if n not in self.defined:
                if not isinstance(n.meta.get("val"), _INPUT_TYPES):
                    return None
                self.inputs.append(n)
            self.slots[n] = self.temp()
        return self.slots[n]

    def define(self, n: fx.Node) -> int:
        """The slot of n, a value the run's step defines."""
        self.defined[n] = None
        return self.slot(n)

    def _mark(self) -> tuple:
        return (self.count, len(self.slots), len(self.inputs), len(self.defined),
                len(self.contiguous), len(self.packed), len(self.packed_slots))

    def _undo(self, mark: tuple) -> None:
        """Drops everything added after `mark` (see the invariant on the attributes)."""
        self.count, slots, inputs, defined, contiguous, packed, packed_slots = mark
        for d, n in ((self.slots, slots), (self.defined, defined), (self.contiguous, contiguous)):
            while len(d) > n:
                d.popitem()
        del self.inputs[inputs:], self.packed[packed:], self.packed_slots[packed_slots:]

    def operand(self, a: Any, param: torch.Argument) -> Optional[tuple]:
        """The description of argument a for param, or None where it cannot be described."""
        if isinstance(a, fx.Node):
            if a in self.constants:
                return ("const", self.constants[a])
            s = self.slot(a) if _value_fits(a, param) else None
            return None if s is None else ("slot", s)
        if next(flat_nodes(a), None) is None:
            return ("const", a)
        optional = _tensor_list_param(param)
        if optional is None or not isinstance(a, (list, tuple)):
            return None
        if any(isinstance(x, fx.Node) and x in self.constants for x in a):
            return None
        if not all((isinstance(x, fx.Node) and isinstance(x.meta.get("val"), torch.Tensor))
                   or (optional and x is None) for x in a):
            return None
        slots = [-1 if x is None else self.slot(x) for x in a]
        return None if None in slots else ("slots", slots)

    def step(self, s: Any, kind_of: Callable[[fx.Node], Optional[str]]) -> Optional[List[tuple]]:
        """Full descriptions (out slot and dead temporaries included) of step s, or None where
        it cannot be described; then nothing of it is kept."""
        mark = self._mark()
        if s.kind == "program":
            descs = self._program(s.call)
        elif s.kind == "aten" and s.call is None:
            d = self._aten(s.node, kind_of(s.node))
            if d is None:
                descs = None
            elif s.contiguous_result:  # the operator's result, then its contiguous copy
                t = self.temp()
                descs = [d + (t, []), self._op("aten::contiguous", "", [("slot", t)],
                                               self.define(s.node), dead=[t])]
            else:
                descs = [d + (self.define(s.node), [])]
        else:
            descs = None
        if descs is None:
            self._undo(mark)
        return descs

    def _aten(self, n: fx.Node, kind: Optional[str]) -> Optional[tuple]:
        if n.target is operator.getitem:
            src, index = n.args
            if src in self.defined and isinstance(index, int) and not n.kwargs:
                return ("getitem", self.slots[src], index)
            return None
        if n.target is torch.ops.aten.clone.default and kind == "view":
            # A clone nobody can observe is the value itself (runner._clone_as_view), unless
            # it asks for a layout change.
            if n.kwargs.get("memory_format") not in (None, torch.preserve_format) or \
                    not isinstance(n.args[0], fx.Node) or n.args[0] in self.constants:
                return None
            s = self.slot(n.args[0])
            return None if s is None else ("alias", s)
        if not isinstance(n.target, torch._ops.OpOverload):
            return None
        schema = n.target._schema
        params = schema.arguments
        by_name = {p.name: p for p in params}
        if len(n.args) > len(params) or any(k not in by_name for k in n.kwargs):
            return None
        args = []
        for a, p in zip(n.args, params):
            d = self.operand(a, p)
            if d is None:
                return None
            args.append(d)
        kwargs = {}
        for k, a in n.kwargs.items():
            d = self.operand(a, by_name[k])
            if d is None:
                return None
            kwargs[k] = d
        return ("op", schema.name, schema.overload_name, args, kwargs)

    def _op(self, name: str, overload: str, args: list, out: int, kwargs=None,
            dead=()) -> tuple:
        return ("op", name, overload, args, kwargs or {}, out, list(dead))

    def _program(self, seg) -> Optional[List[tuple]]:
        """A program_runner.Segment as ATen steps around one program step, as runner.py's
        _emit_program does it in Python: inputs prepared (sliced, permuted, contiguous),
        outputs allocated, the call, then outputs given their logical layout."""
        descs, buffers, temps, after = [], [], [], []
        for n, prep in seg.inputs:
            if isinstance(prep, PackedInput):
                if n in self.defined:
                    return None  # its pointer is taken in Python, before the call
                t = self.temp()
                self.packed.append((prep, n))
                self.packed_slots.append(t)
                buffers.append(("slot", t))
                continue
            if n in self.constants:
                c = self.constants[n]
                if not isinstance(c, torch.Tensor):
                    return None
                if prepare_input(c, prep).data_ptr() == c.data_ptr():
                    buffers.append(("const", c))  # read in place, kept alive by the sequence
                    continue
                src = ("const", c)
            else:
                s = self.slot(n)
                if s is None:
                    return None
                if prep is None and n in self.contiguous:
                    buffers.append(("slot", s))
                    continue
                src = ("slot", s)
            if prep is not None and prep.index is not None:
                for dim, sl in enumerate(prep.index):
                    if sl != slice(None):
                        t = self.temp()
                        descs.append(self._op("aten::slice", "Tensor",
                                              [src, ("const", dim), ("const", sl.start),
                                               ("const", sl.stop)], t))
                        temps.append(t)
                        src = ("slot", t)
            if prep is not None and prep.perm is not None:
                t = self.temp()
                descs.append(self._op("aten::permute", "", [src, ("const", list(prep.perm))], t))
                temps.append(t)
                src = ("slot", t)
            t = self.temp()
            descs.append(self._op("aten::contiguous", "", [src], t))
            temps.append(t)
            buffers.append(("slot", t))
        for n, spec in seg.outputs:
            if spec.symbolic:
                return None
            shape = [] if spec.shape == ((),) else list(spec.shape)
            plain = spec.inv_perm is None and spec.restride is None
            buf = self.define(n) if plain else self.temp()
            descs.append(self._op("aten::empty", "memory_format", [("const", shape)], buf,
                                  {"dtype": ("const", spec.dtype)}))
            buffers.append(("slot", buf))
            if plain:
                self.contiguous[n] = None
            elif spec.inv_perm is not None:
                after.append(self._op("aten::permute", "",
                                      [("slot", buf), ("const", list(spec.inv_perm))],
                                      self.define(n), dead=[buf]))
            else:
                shape, stride = spec.restride
                out = self.define(n)
                after.append(self._op("aten::empty_strided", "",
                                      [("const", list(shape)), ("const", list(stride))], out,
                                      {"dtype": ("const", spec.dtype)}))
                after.append(self._op("aten::copy_", "", [("slot", out), ("slot", buf)], out,
                                      dead=[buf]))
        descs.append(("program", seg.program, buffers, temps))
        return descs + after


@dataclasses.dataclass(eq=False)
class Run:
    """Steps [start, end) described as one sequence: the describer's slots and, per step, its
    descriptions (split_runs makes them; build adds the dead slots and makes the sequence)."""
    start: int
    end: int
    describer: _Describer
    descs: List[List[tuple]]


def split_runs(steps: Sequence[Any], constants: Dict[fx.Node, Any],
               kind_of: Callable[[fx.Node], Optional[str]], need_aten: bool = True) -> List[Run]:
    """The maximal runs of describable steps (ATen operators and programs) that call at least
    one ATen operator (the runner calls a lone program directly), or any with need_aten=False."""
    if not ENABLED:
        return []
    runs, start, d, descs, aten = [], None, None, [], False
    for i, s in enumerate(list(steps) + [None]):
        if s is not None and start is None:
            d, descs, aten = _Describer(constants), [], False
        sub = d.step(s, kind_of) if s is not None else None
        if sub is not None:
            start = i if start is None else start
            descs.append(sub)
            aten = aten or s.kind == "aten"
            continue
        if start is not None and (aten or not need_aten):
            runs.append(Run(start, i, d, descs))
        start = None
    return runs


def build(steps: Sequence[Any], run: Run, live_after: Set[fx.Node],
          dies: Dict[int, List[fx.Node]]):
    """(sequence, input values, packed weights, output values) for a run of `steps` (from
    split_runs), or None with a logged reason where the C++ side refuses it. The sequence takes
    the input values, then the pointers of the packed weights' copies (PackedInput, value).
    `live_after`: values read after the run or returned; `dies[j]`: the values whose last
    reader is step j. Consumes the run's descriptions (build it once)."""
    d = run.describer
    descs, outputs = [], []
    for i in range(run.start, run.end):
        s, sub = steps[i], run.descs[i - run.start]
        made = s.outputs if s.kind == "program" else [s.node]
        dead = sub[-1][-1]  # the last sub-step's dead list
        dead += [d.slots[n] for n in dies.get(i, ()) if n in d.slots and n not in live_after]
        dead += [d.slots[n] for n in made if not n.users and n not in live_after]
        outputs += [n for n in made if n in live_after]
        descs += sub
    try:
        seq = _C.AtenSequence(d.count, [d.slots[n] for n in d.inputs] + d.packed_slots, descs,
                              [d.slots[n] for n in outputs])
    except Exception as e:  # a constant or signature the C++ side cannot convert
        names = ", ".join(step_name(steps[i]) for i in range(run.start, run.end))
        log_once(f"aten-sequence:{type(e).__name__}:{e}",
                 f"steps {names} stay Python calls: {e}")
        return None
    return seq, list(d.inputs), d.packed, outputs


def step_name(s: Any) -> str:
    return s.call.name if s.kind == "program" else str(s.node.target)
