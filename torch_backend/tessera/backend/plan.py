"""Planning one specialised graph: partitions -> kernels or ATen steps -> ordered runner.

Input: an ATen FX graph and the recorded meta of every node (shapes of this call). Output: the
generated runner (runner.py) plus a summary of what was done (kernels, ATen ops, choices).

A plan for a range of sizes (`sym`, symbolic.py) builds its kernels over size variables and
keeps size-dependent scalars as run-time values (ATen steps) instead of folding them; each
kernel must also match eager at a second size (symbolic.Probe), and a partition that cannot be
made size-generic runs through ATen, logged with its reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import math
import operator
from typing import Any, Callable, Dict, List, Optional, Set

import torch
import torch.fx as fx

from .. import _C
from . import anchor as anchor_choice
from . import attention
from .activation_layout import (channels_last_activations, computed_from_nhwc,
                                has_depthwise_convolution, is_convolution, is_nhwc,
                                store_nhwc)
from . import derived_anchor
from . import program_runner
from . import search_graph
from .kernel_build import KernelSpec, build_spec, compile_spec
from .log import log_once, logger
from .meta import TensorMeta
from .options import Options
from .partition import (Classifier, _op_name, foldable_scalars, input_nodes, partition,
                        touches_zero_size)
from .runner import Step, _nodes_in, generate
from .symbolic import NotSizeGeneric


# Why a partition runs through ATen (Summary.fallbacks): no lowering or no plan for what it
# asks (unsupported), ATen's implementation measured faster (slower), or compiling it failed
# where it should not have: a defect to fix (internal_error).
FALLBACK_CATEGORIES = ("unsupported", "slower", "internal_error")

# ATen operators whose result depends on their inputs' exact strides.
_STRIDE_SENSITIVE = {torch.ops.aten.as_strided.default}


@dataclasses.dataclass
class Summary:
    """What the compiler did with one graph (for verbose logs, explain and benchmarks)."""
    kernels: int = 0
    aten_ops: Dict[str, int] = dataclasses.field(default_factory=dict)  # unsupported op -> count
    aten_reasons: Dict[str, str] = dataclasses.field(default_factory=dict)  # op -> why ATen
    anchors: List[dict] = dataclasses.field(default_factory=list)       # anchor partitions
    choices: List[dict] = dataclasses.field(default_factory=list)       # every measured one
    failures: List[str] = dataclasses.field(default_factory=list)       # partitions left to ATen
    # One entry per partition, in planning order (tessera.explain): "ops" (ATen op names),
    # "impl" ("tessera", "aten", "split", "constant" or "failed"), "times_ms" (measured
    # candidates, empty when nothing was measured), "schedule" (where the kernel's schedule
    # came from: rules, construct, search, records, given; "" without a kernel), "reason"
    # (why a failed partition runs through ATen).
    partitions: List[dict] = dataclasses.field(default_factory=list)
    source: str = ""
    steps: List[Step] = dataclasses.field(default_factory=list, repr=False)
    # Runs of kernels executed by one C++ Program each (program_runner.Segment).
    segments: List[Any] = dataclasses.field(default_factory=list, repr=False)
    # The whole graph timed against eager on its first inputs (graph_guard.py): "compiled" or
    # "eager" (the compiled runner lost and the graph runs eagerly).
    # options layouts: {"nhwc": names of the activations stored NHWC, "read_by_aten": ATen
    # operators reading one of them}; empty when no layout was changed.
    layouts: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    graph_choice: str = "compiled"
    graph_times_ms: Dict[str, float] = dataclasses.field(default_factory=dict)
    # (category, what and why) per partition or operator left to ATen, category one of
    # FALLBACK_CATEGORIES (fallbacks() groups them).
    fallback_log: List[tuple] = dataclasses.field(default_factory=list)

    def fallbacks(self) -> Dict[str, List[str]]:
        """What runs through ATen instead of Tessera's kernels, by category (one entry per
        partition or unsupported operator, with its reason)."""
        out: Dict[str, List[str]] = {c: [] for c in FALLBACK_CATEGORIES}
        for category, what in self.fallback_log:
            out[category].append(what)
        return out

    def note_fallback(self, category: str, what: str) -> None:
        assert category in FALLBACK_CATEGORIES, category
        self.fallback_log.append((category, what))

    def without_code(self) -> "Summary":
        """A copy that holds no compiled kernels (no steps, no programs): for reports kept
        after the graph's own runners are gone, which must not keep its code alive."""
        return dataclasses.replace(self, steps=[], segments=[])

    def describe(self) -> str:
        lines = [f"{self.kernels} Tessera kernels"]
        if self.segments:
            arena = sum(g.arena_bytes for g in self.segments)
            temps = sum(g.temp_bytes for g in self.segments)
            lines.append(f"{len(self.segments)} C++ programs, {arena} arena bytes for "
                         f"{temps} bytes of intermediates")
        if self.graph_times_ms:
            t = self.graph_times_ms
            lines.append(f"whole graph: compiled {t['compiled']:.3f} ms, eager {t['eager']:.3f} ms"
                         f" -> {self.graph_choice}")
        if self.layouts:
            lines.append(layouts_text(self.layouts))
        if self.aten_ops:
            lines.append("ATen: " + ", ".join(f"{k} x{v}"
                                              for k, v in sorted(self.aten_ops.items())))
        for c in self.choices:
            times = ", ".join(f"{k} {v:.3f} ms" for k, v in c["times_ms"].items())
            ops = "+".join(dict.fromkeys(o.replace("aten.", "").split(".")[0] for o in c["ops"]))
            lines.append(f"{ops}: {c['choice']} ({times})")
        lines += [f"left to ATen: {f}" for f in self.failures]
        return "\n".join(lines)


def layouts_text(layouts: Dict[str, List[str]]) -> str:
    text = f"layouts: {len(layouts['nhwc'])} activations stored NHWC"
    if layouts["read_by_aten"]:
        text += " (read by ATen: " + ", ".join(layouts["read_by_aten"]) + ")"
    return text


# The two layouts a convolution's partition is measured in (options layouts), as suffixes of
# its candidates' names: tessera:nhwc, split:nchw, ...
_LAYOUT_SUFFIXES = (":nhwc", ":nchw")


@dataclasses.dataclass
class _Candidate:
    """One way to run a partition: `run` times it, `kernels` (spec, KernelCall) are what
    planning it adds, `call` is the kernel reported for the partition (None for ATen)."""
    run: Callable[[], object]
    kernels: List[Any]
    call: Any


class _Unit:
    """A kernel or one ATen node, as scheduled."""

    def __init__(self, step: Step, order: int):
        self.step = step
        self.order = order


class Planner:
    def __init__(self, gm: fx.GraphModule, metas: Dict[fx.Node, Any], options: Options,
                 weights: frozenset = frozenset(), sym=None, probe=None):
        self.gm = gm
        self.sym = sym      # symbolic.SymbolicShapes: a plan for a range of sizes
        self.probe = probe  # symbolic.Probe checking its kernels at other sizes
        # The recorded call's sizes by name: what size-generic kernels run with while planning.
        self.size_env = sym.recorded(metas) if sym is not None else {}
        self.weights = weights  # placeholders holding weights (graph.py)
        self.graph = gm.graph
        self.metas = metas
        self.options = options
        self.nodes = list(self.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.folded = foldable_scalars(self.graph, metas)
        if sym is not None:  # size-dependent scalars are run-time values
            self.folded = {n for n in self.folded if not sym.is_symbolic(n)}
        self.cls = Classifier(metas, self.folded, sym)
        self.nhwc: Set[fx.Node] = set()  # activations stored NHWC (options layouts)
        # The activations that may be stored NHWC (options layouts): each convolution's
        # partition chooses NHWC or NCHW by measurement, and the values computed from its
        # outputs follow (_plan_layouts).
        self.layout_values: Set[fx.Node] = set()
        # Whether convolutions measure both layouts (options layouts=True). layouts=None turns
        # NHWC on for graphs with a depthwise convolution without measuring NCHW too, which
        # would double those graphs' kernel tuning for a choice that nearly always comes out
        # NHWC there (MobileNetV2: 49 of 51 partitions).
        self.layout_choice = options.layouts is True
        # Layouts need constant shapes: plans for a range of sizes keep eager's strides.
        layouts = options.layouts
        if layouts is None:
            layouts = has_depthwise_convolution(gm, metas)
        if layouts and sym is None:
            self.metas, self.nhwc = channels_last_activations(gm, metas, self.cls)
            self.layout_values = set(self.nhwc)
            self.cls = Classifier(self.metas, self.folded, sym)
        out = [n for n in self.nodes if n.op == "output"][0]
        self.output_args = out.args[0]
        self.graph_outputs: Set[fx.Node] = set(_nodes_in(self.output_args))
        self.summary = Summary()
        # The graph's matmul and convolution multiply-adds: the automatic tuning scope tunes a
        # kernel doing a large share of them whatever its size (compile_spec; 0: unknown, for
        # plans over a range of sizes).
        self.graph_reduce_points = sum(anchor_flops(n, self.metas)[0] / 2 for n in self.nodes
                                       ) if sym is None else 0.0
        self.kernel_steps: List[_Unit] = []
        self.member_of: Dict[fx.Node, Step] = {}   # member node -> its kernel step
        self.produced: Dict[fx.Node, Step] = {}    # value node -> defining step
        self.constants: Dict[fx.Node, Any] = {}    # values computed at compile time
        # ATen nodes whose step calls a Tessera kernel instead of the operator (attention.py).
        self.replaced: Dict[fx.Node, Callable] = {}

    # ---- partition analysis ------------------------------------------------------------------

    def root(self, n: fx.Node) -> fx.Node:
        while self.cls.kind(n) == "view":
            n = n.args[0]
        return n

    def _needed(self, x: fx.Node, members: Set[fx.Node]) -> bool:
        """Is the value of x (a member's value or a view of one) used outside the kernel?"""
        if x in self.graph_outputs:
            return True
        for u in x.users:
            if u in members:
                continue
            if self.cls.kind(u) == "view" and self.root(u) in members:
                if self._needed(u, members):
                    return True
                continue
            return True
        return False

    def _value_nodes(self, m: fx.Node) -> Optional[List[fx.Node]]:
        meta = self.metas[m]
        if isinstance(meta, TensorMeta):
            return [m]
        out = []
        for u in m.users:
            if u.op == "call_function" and u.target is operator.getitem:
                if isinstance(self.metas.get(u), TensorMeta):
                    out.append(u)
            else:
                return None  # the tuple itself escapes: not expressible as kernel outputs
        return out

    def _spec_for(self, members: List[fx.Node]) -> KernelSpec:
        mset = set(members)
        outputs = []
        for m in members:
            values = self._value_nodes(m)
            if values is None:
                raise RuntimeError(f"{m.name} returns a tuple used as a whole")
            outputs += [v for v in values if self._needed(v, mset)]
        if not outputs:
            raise RuntimeError("partition has no used output")
        keep_layout = set(self.graph_outputs)
        for o in outputs:
            if any(u.target in _STRIDE_SENSITIVE for u in o.users if u.op == "call_function"):
                keep_layout.add(o)
        spec = build_spec(members, self.metas, self.cls, outputs, keep_layout, self.sym,
                          weights=self.weights)
        spec.constant_inputs = [i for i, n in enumerate(spec.inputs)
                                if self.root(n) in self.weights]
        for n in list(spec.inputs) + list(spec.outputs):
            if self.metas[n].numel == 0:
                raise _ZeroSize()
        for m in members:
            meta = self.metas[m]
            if isinstance(meta, TensorMeta) and meta.numel == 0:
                raise _ZeroSize()
        return spec

    # ---- decisions --------------------------------------------------------------------------

    def _add_kernel(self, spec: KernelSpec, call) -> None:
        if not spec.inputs and not (set(spec.outputs) & self.graph_outputs):
            if spec.symbolic:
                raise NotSizeGeneric("reads no input, and its shape depends on the sizes")
            # Reads nothing (masks from arange/full): computed once, here, as constants.
            values = call()
            values = values if isinstance(values, tuple) else (values,)
            for o, v in zip(spec.outputs, values):
                self.constants[o] = v
                self.produced[o] = None
            for m in spec.members:
                self.member_of[m] = None
            return
        step = Step("kernel", list(spec.outputs), list(spec.inputs), call=call)
        unit = _Unit(step, min(self.index[m] for m in spec.members))
        self.kernel_steps.append(unit)
        for m in spec.members:
            self.member_of[m] = step
        for o in spec.outputs:
            self.produced[o] = step
        self.summary.kernels += 1

    def _note_partition(self, members: List[fx.Node], impl: str, times=None, call=None,
                        reason: str = "") -> None:
        report = getattr(getattr(call, "kernel", None), "report", None)
        self.summary.partitions.append({
            "ops": [_op_name(m.target) for m in members], "impl": impl,
            "times_ms": dict(times or {}), "schedule": getattr(report, "source", "") or "",
            "kernel": getattr(call, "name", "") if call is not None else "", "reason": reason})

    # ---- layouts (options layouts) ----------------------------------------------------------

    def _layout_values_of(self, members: List[fx.Node]) -> List[fx.Node]:
        """The partition's values that may be stored NHWC, in graph order."""
        out = []
        for m in members:
            out += [v for v in (self._value_nodes(m) or []) if v in self.layout_values]
        return out

    def _store_layout(self, values: List[fx.Node], nhwc: bool) -> None:
        for v in values:
            store_nhwc(self.metas, v, nhwc)
            if nhwc:
                self.nhwc.add(v)
            else:
                self.nhwc.discard(v)

    @contextlib.contextmanager
    def _layout_tried(self, values: List[fx.Node], nhwc: bool):
        """Plans within the block see `values` stored NHWC (or NCHW); restored afterwards."""
        saved, was = dict(self.metas), set(self.nhwc)
        self._store_layout(values, nhwc)
        try:
            yield
        finally:  # in place: the classifier holds the same dict
            self.metas.clear()
            self.metas.update(saved)
            self.nhwc = was

    def _plan_layouts(self, anchor: Optional[fx.Node], members: List[fx.Node]
                      ) -> List[fx.Node]:
        """The values whose layout this partition's measurement chooses: a convolution's
        partition stores its values NHWC and, with layout_choice, tries them both ways (the
        candidates tessera:nhwc, tessera:nchw, split:nhwc, split:nchw; _choose). Any other
        partition's values follow their inputs (computed_from_nhwc), stored now. Returns []
        when there is no choice to make."""
        values = self._layout_values_of(members)
        if not values:
            return []
        if anchor is not None and is_convolution(anchor):
            self._store_layout(values, True)
            return values if self.layout_choice else []
        for v in values:
            self._store_layout([v], computed_from_nhwc(v, self.metas))
        return []

    def _plan_group(self, members: List[fx.Node]) -> None:
        anchor = next((m for m in members if self.cls.kind(m) == "anchor"), None)
        try:
            layout_values = self._plan_layouts(anchor, members)
            spec = self._spec_for(members)
            if not self.options.anchor_measure:
                call = self._compile(spec)
                self._add_kernel(spec, call)
                constant = spec.outputs[0] in self.constants  # computed once, here
                self._note_partition(members, "constant" if constant else "tessera", call=call)
                return
            skip_fused = anchor is not None and self._big_dense_anchor(anchor)
            self._choose(anchor, members, spec, not skip_fused, layout_values)
        except _ZeroSize:
            pass  # zero-size tensors: ATen handles every corner case; nothing to gain
        except Exception as e:  # a partition that fails to compile runs through ATen
            names = ", ".join(dict.fromkeys(_op_name(m.target) for m in members))
            msg = f"{names}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            self.summary.failures.append(msg)
            self.summary.note_fallback(failure_category(e, self.sym is not None), msg)
            self._note_partition(members, "failed", reason=msg)
            log_once("compile-failure:" + msg, f"tessera: partition left to ATen ({msg})",
                     level=30)

    def _compile(self, spec: KernelSpec):
        call = compile_spec(spec, self.options, self.graph_reduce_points)
        call.size_env = self.size_env
        if self.probe is not None:
            self.probe.check(spec, call)
        return call

    def _choose(self, anchor: Optional[fx.Node], members: List[fx.Node], spec: KernelSpec,
                build_fused: bool, layout_values: List[fx.Node]) -> None:
        """Plans the partition's best candidate (see anchor.py): known from an earlier decision
        (this process or the records database), then only the chosen kernel is built; else every
        candidate is built and measured. With `layout_values` (a convolution's partition under
        options layouts) the fused and split candidates come in both layouts of those values,
        measured in the same batch, and the chosen one's layout is stored (_plan_layouts)."""
        rest = [m for m in members if m is not anchor]
        derived = derived_anchor.derived_spec(anchor, self.metas, self.options.tune,
                                              self.weights) \
            if self.options.derive and anchor is not None else None
        kinds = (["tessera"] if build_fused else []) + \
            (["split"] if anchor is not None and rest else [])
        suffixes = list(_LAYOUT_SUFFIXES) if layout_values else [""]
        names = ["aten"] + [k + sfx for sfx in suffixes for k in kinds] + \
            (["derived"] if derived is not None else [])
        known = anchor_choice.known_choice(spec.workload(), names, self.options,
                                           bool(spec.constant_inputs)) \
            if len(names) > 1 else None
        if known is not None:
            choice, times = known
            kind, _, layout = choice.partition(":")
            candidates = {}
            if kind in ("tessera", "split"):
                with self._layout_tried(layout_values, layout != "nchw"):
                    spec = self._spec_for(members)
                    candidates = self._candidates_for(anchor, rest, spec, None, [kind],
                                                      choice[len(kind):])
            elif kind == "derived":
                candidates = self._derived_candidate(anchor, rest, derived, None)
        else:
            choice, times, candidates = self._measure_choice(anchor, rest, spec, kinds,
                                                             suffixes, layout_values, derived)
        call = self._plan_candidate(anchor, choice, candidates, layout_values)
        self._note_partition(members, choice, times, call)
        if choice == "aten":
            self.summary.note_fallback("slower", _measured(members, times))
        record = {"ops": [_op_name(m.target) for m in members], "choice": choice,
                  "times_ms": times}
        if anchor is not None:
            record["anchor"] = _op_name(anchor.target)
            self.summary.anchors.append(record)
        self.summary.choices.append(record)

    def _plan_candidate(self, anchor: Optional[fx.Node], choice: str,
                        candidates: Dict[str, "_Candidate"], layout_values: List[fx.Node]):
        """Adds the chosen candidate's kernels and stores the layout its outputs were built in
        (ATen's convolution keeps its input's layout). Returns the partition's KernelCall."""
        if layout_values:
            nhwc = not choice.endswith(":nchw")
            if choice == "aten":
                nhwc = is_nhwc(self.metas.get(anchor.args[0]))
            self._store_layout(layout_values, nhwc)
        chosen = candidates.get(choice)
        if chosen is None:
            return None
        for s, c in chosen.kernels:
            self._add_kernel(s, c)
        return chosen.call

    def _candidates_for(self, anchor: Optional[fx.Node], rest: List[fx.Node], spec: KernelSpec,
                        env: Optional[Dict[fx.Node, Any]], kinds: List[str], suffix: str
                        ) -> Dict[str, "_Candidate"]:
        """The fused ("tessera") and/or "split" candidates named kind + suffix, built for the
        layouts self.metas holds now. env: example inputs to run them on (None: built only to
        be planned, never run)."""
        out: Dict[str, _Candidate] = {}
        if "tessera" in kinds:
            fused = self._compile(spec)
            t_inputs = [env[n] for n in spec.inputs] if env is not None else []
            out["tessera" + suffix] = _Candidate(lambda: fused(*t_inputs), [(spec, fused)],
                                                 fused)
        if "split" in kinds:
            rest_spec = self._spec_for(rest)
            rest_call = self._compile(rest_spec)

            def run_split():  # the anchor through ATen, then the rest kernel (views via ATen)
                local = dict(env)
                self._eval(anchor, local)
                return rest_call(*[self._eval(n, local) for n in rest_spec.inputs])
            out["split" + suffix] = _Candidate(run_split, [(rest_spec, rest_call)], rest_call)
        return out

    def _derived_candidate(self, anchor: fx.Node, rest: List[fx.Node], derived: KernelSpec,
                           env: Optional[Dict[fx.Node, Any]],
                           split: Optional["_Candidate"] = None) -> Dict[str, "_Candidate"]:
        """The anchor by its derived program (EinNet), then a kernel for the rest: the split
        candidate's of the same layouts when there is one."""
        derived_call = self._compile(derived)
        kernels = [(derived, derived_call)]
        rest_spec = rest_call = None
        if split is not None:
            rest_spec, rest_call = split.kernels[0]
        elif rest:
            rest_spec = self._spec_for(rest)
            rest_call = self._compile(rest_spec)
        if rest_call is not None:
            kernels.append((rest_spec, rest_call))

        def run_derived():
            local = dict(env)
            local[anchor] = derived_call(*[self._eval(n, local) for n in derived.inputs])
            if rest_call is None:
                return local[anchor]
            return rest_call(*[self._eval(n, local) for n in rest_spec.inputs])
        return {"derived": _Candidate(run_derived, kernels, derived_call)}

    def _measure_choice(self, anchor: Optional[fx.Node], rest: List[fx.Node], spec: KernelSpec,
                        kinds: List[str], suffixes: List[str], layout_values: List[fx.Node],
                        derived: Optional[KernelSpec] = None):
        """Builds the candidates, measures them in one batch (anchor.decide); returns (choice,
        times in ms, the candidates)."""
        env: Dict[fx.Node, Any] = {n: self.metas[n].example() for n in spec.inputs}

        def run_aten():
            local = dict(env)
            return [self._eval(o, local) for o in spec.outputs]
        candidates: Dict[str, _Candidate] = {"aten": _Candidate(run_aten, [], None)}
        for sfx in suffixes:
            with self._layout_tried(layout_values, sfx != ":nchw"):
                # spec was built with the values NHWC (_plan_layouts)
                layout_spec = self._spec_for(spec.members) if sfx == ":nchw" else spec
                candidates.update(self._candidates_for(anchor, rest, layout_spec, env, kinds,
                                                       sfx))
        if derived is not None:  # in the layouts spec was built with (suffixes[0])
            candidates.update(self._derived_candidate(anchor, rest, derived, env,
                                                      candidates.get("split" + suffixes[0])))
        choice, times = anchor_choice.decide(spec.workload(),
                                             {k: c.run for k, c in candidates.items()},
                                             self.options, looked_up=True,
                                             prepacked=bool(spec.constant_inputs))
        return choice, times, candidates

    def _eval(self, n: fx.Node, env: Dict[fx.Node, Any]) -> Any:
        """Runs node n through ATen on values in env (evaluating missing inputs first)."""
        if n in env:
            return env[n]
        if n in self.folded:
            return self.metas[n]
        if n.op == "get_attr":
            env[n] = get_attr_value(self.gm, n.target)
            return env[n]
        if n.op == "placeholder":  # read only for its shape (full_like's argument)
            m = self.metas[n]
            env[n] = m.example() if isinstance(m, TensorMeta) else m
            return env[n]
        for a in input_nodes(n):
            if a not in env and a not in self.folded:
                env[a] = self._eval(a, env)
        env[n] = n.target(*_resolve(n.args, env, self.metas), **_resolve(n.kwargs, env, self.metas))
        if self._contiguous_result(n):
            env[n] = env[n].contiguous()
        return env[n]

    def _contiguous_result(self, n: fx.Node) -> bool:
        """Must n's result, computed by ATen, be made contiguous? Where n reads a value stored
        NHWC and its own value is planned in eager's contiguous layout: ATen's operators keep
        their input's layout (see runner.Step.contiguous_result)."""
        m = self.metas.get(n)
        if not self.nhwc or not isinstance(m, TensorMeta) or not m.is_contiguous():
            return False
        op = n.args[0] if n.target is operator.getitem else n  # a multi-output operator's item
        return any(is_nhwc(self.metas.get(a)) for a in input_nodes(op))

    def _plan_attention(self) -> None:
        """Attention operators: Tessera's fused kernel where it measures faster than ATen's
        (attention.py); its step then calls the kernel in the operator's place."""
        for n in self.nodes:
            if not attention.is_attention(n):
                continue
            if self.sym is not None:
                call, choice, times, reason = None, "aten", {}, "attention over a range of sizes"
            else:
                call, choice, times, reason = attention.plan(n, self.metas, self.options)
            if call is not None:
                self.replaced[n] = call
                self.summary.kernels += 1
            elif reason:
                self.cls.reasons[n] = reason
                self.summary.note_fallback("unsupported", f"{_op_name(n.target)}: {reason}")
                log_once(f"attention:{reason}", f"tessera: attention runs through ATen ({reason})")
            else:
                self.cls.reasons[n] = "ATen's kernel measured faster"
                self.summary.note_fallback("slower", _measured([n], times))
            self._note_partition([n], choice, times, call=call, reason=reason)
            if times:
                self.summary.choices.append({"ops": [_op_name(n.target)], "choice": choice,
                                             "times_ms": times})

    def _big_dense_anchor(self, anchor: fx.Node) -> bool:
        """Is this a large dense matmul/convolution? With the default (untuned) schedules,
        Tessera's kernel for those has always measured several times slower than ATen's BLAS /
        oneDNN kernels, so the fused candidate is not even built (it would cost a JIT compile
        and a measurement to lose). Depthwise convolutions, small products and tuned schedules
        are always measured."""
        if self.options.tune != "default":
            return False
        flops, depthwise = anchor_flops(anchor, self.metas)
        return not depthwise and flops > _C.tuning_policy().big_anchor_flops

    # ---- ATen steps and order -----------------------------------------------------------------

    def _aten_needed(self) -> Set[fx.Node]:
        """Non-member call nodes that must run through ATen."""
        kernel_inputs: Dict[Step, Set[fx.Node]] = {}
        for u in self.kernel_steps:
            kernel_inputs[u.step] = set(u.step.inputs)
        needed: Set[fx.Node] = set()
        for n in reversed(self.nodes):
            if n.op != "call_function" or n in self.member_of or n in self.produced:
                continue
            if n in self.folded:
                continue
            kind = self.cls.kind(n)
            if kind not in ("view", "source"):
                needed.add(n)  # unsupported, or its partition was left to ATen
                continue
            if n in self.graph_outputs:
                needed.add(n)
                continue
            for u in n.users:
                if u.op == "output" or u in needed:
                    needed.add(n)
                    break
                step = self.member_of.get(u)
                if step is not None and n in kernel_inputs.get(step, ()):
                    needed.add(n)
                    break
        return needed

    def _count_aten(self, needed: Set[fx.Node]) -> None:
        for n in needed:
            kind = self.cls.kind(n)
            if kind is None and n.target is not operator.getitem and n not in self.replaced \
                    and not touches_zero_size(n, self.metas):
                name = _op_name(n.target)
                self.summary.aten_ops[name] = self.summary.aten_ops.get(name, 0) + 1
                reason = self.cls.reasons.get(n)
                if reason:
                    self.summary.aten_reasons.setdefault(name, reason)
                if not attention.is_attention(n):  # _plan_attention noted those
                    self.summary.note_fallback("unsupported",
                                               f"{name}: {reason or 'no lowering'}")

    def _order(self, units: List[_Unit]) -> List[Step]:
        """Topological order of the steps, following the graph's order where free to."""
        producer: Dict[fx.Node, _Unit] = {}
        for u in units:
            for o in u.step.outputs:
                producer[o] = u
        deps: Dict[int, Set[int]] = {}
        users: Dict[int, List[int]] = {i: [] for i in range(len(units))}
        uid = {id(u): i for i, u in enumerate(units)}
        for i, u in enumerate(units):
            reads = u.step.inputs
            d = set()
            for n in reads:
                p = producer.get(n)
                if p is not None and p is not u:
                    d.add(uid[id(p)])
            if u.step.kind == "aten" and _mutates(u.step.node):
                # A mutation runs after every step that precedes it in the graph.
                d |= {j for j, v in enumerate(units) if v.order < u.order}
            deps[i] = d
            for j in d:
                users[j].append(i)
        ready = [(u.order, i) for i, u in enumerate(units) if not deps[i]]
        heapq.heapify(ready)
        remaining = {i: len(d) for i, d in deps.items()}
        out: List[Step] = []
        while ready:
            _, i = heapq.heappop(ready)
            out.append(units[i].step)
            for j in users[i]:
                remaining[j] -= 1
                if remaining[j] == 0:
                    heapq.heappush(ready, (units[j].order, j))
        if len(out) != len(units):
            raise RuntimeError("internal: the partitioned graph has a cycle")
        return out

    def _note_layouts(self, aten_nodes) -> None:
        """Summary.layouts: the activations stored NHWC (options layouts) and the ATen
        operators reading one (they take it as it is, or copy it if they need NCHW)."""
        nhwc = [n for n in self.nodes if n in self.nhwc]
        if not nhwc:
            return
        aten = set(aten_nodes)
        readers = sorted({_op_name(u.target) for n in nhwc for u in n.users if u in aten})
        self.summary.layouts = {"nhwc": [n.name for n in nhwc], "read_by_aten": readers}

    def build(self) -> Callable:
        groups = list(partition(self.graph, self.cls))
        if self.options.tune == "search" and self.sym is None:
            search_graph.tune_graph(self, groups)
        for members in groups:
            self._plan_group(members)
        self._plan_attention()
        needed = self._aten_needed()
        self._count_aten(needed)
        self._note_layouts(needed)
        units = list(self.kernel_steps)
        for n in needed:
            reads = [a for a in input_nodes(n) if a not in self.folded]
            step = Step("aten", [n], reads, call=self.replaced.get(n), node=n,
                        contiguous_result=self._contiguous_result(n))
            units.append(_Unit(step, self.index[n]))
        steps = self._order(units)
        if program_runner.ENABLED and self.sym is None:  # programs have fixed sizes
            steps, self.summary.segments = program_runner.segment_steps(
                steps, self.output_args, self.metas, self.cls.kind)
        placeholders = [n for n in self.nodes if n.op == "placeholder"]
        constants = {n: self.metas[n] for n in self.folded}
        constants.update(self.constants)
        for n in self.nodes:
            if n.op == "get_attr":
                constants[n] = get_attr_value(self.gm, n.target)
        fn = generate(placeholders, steps, self.output_args, constants, kind_of=self.cls.kind,
                      sizes=self.sym.sources() if self.sym is not None else None)
        self.summary.source = fn.source
        self.summary.steps = steps
        return fn


class _ZeroSize(Exception):
    pass


def failure_category(e: Exception, symbolic: bool = False) -> str:
    """A failed partition's fallback category: a plan over a range of sizes that the partition
    cannot have (NotSizeGeneric, or a lowering that needs a concrete size and took int() of a
    size expression; lowering.py) is a limit of what Tessera supports; any other failure is a
    defect."""
    size_bound = symbolic and isinstance(e, TypeError) and "tessera._C.Expr" in str(e)
    return "unsupported" if isinstance(e, NotSizeGeneric) or size_bound else "internal_error"


def _measured(members: List[fx.Node], times: Dict[str, float]) -> str:
    ops = "+".join(dict.fromkeys(_op_name(m.target).replace("aten.", "").split(".")[0]
                                 for m in members))
    return ops + ": " + ", ".join(f"{k} {v:.3f} ms" for k, v in (times or {}).items())


def anchor_flops(anchor: fx.Node, metas: Dict[fx.Node, Any]):
    """(multiply-add flops, is a depthwise/grouped-per-channel convolution) of an anchor; (0,
    False) for any other node."""
    aten = torch.ops.aten
    if anchor.target not in (aten.mm.default, aten.addmm.default, aten.bmm.default,
                             aten.convolution.default):
        return 0.0, False
    numel = metas[anchor].numel
    if anchor.target in (aten.mm.default, aten.addmm.default, aten.bmm.default):
        a = metas[anchor.args[1] if anchor.target is aten.addmm.default else anchor.args[0]]
        return 2.0 * numel * a.shape[-1], False
    w = metas[anchor.args[1]]  # a convolution
    groups = anchor.args[8]
    per_output = math.prod(w.shape[1:])  # (C / groups) * KH * KW (1-D: * K)
    if anchor.args[6]:  # transposed: every input element meets O/groups * KH * KW taps
        x = metas[anchor.args[0]]
        return 2.0 * x.numel * per_output, False
    return 2.0 * numel * per_output, w.shape[1] == 1 and groups > 1


def _resolve(a: Any, env: Dict[fx.Node, Any], metas: Dict[fx.Node, Any]) -> Any:
    """An FX argument with its nodes replaced by their values in env (else their metas: folded
    scalars). A module-level function on purpose: a recursive closure over env would form a
    reference cycle holding env's tensors, and planning runs with the cyclic collector paused
    (gc_pause.py), so every timed ATen candidate would leak its outputs and fault fresh pages on
    each call (a relu measured at 20x its real time)."""
    if isinstance(a, fx.Node):
        return env[a] if a in env else metas[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_resolve(x, env, metas) for x in a)
    if isinstance(a, dict):
        return {k: _resolve(v, env, metas) for k, v in a.items()}
    return a


def get_attr_value(gm: fx.GraphModule, target: str) -> Any:
    """The value a get_attr node of gm reads (a dotted attribute path)."""
    obj = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _mutates(n: fx.Node) -> bool:
    schema = getattr(n.target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def build_plan(gm: fx.GraphModule, metas: Dict[fx.Node, Any], options: Options,
               weights: frozenset = frozenset(), sym=None, probe=None):
    """The runner for gm specialised on the recorded metas, and its Summary. `weights`: the
    placeholders whose values kernels may keep packed copies of. With `sym` (and its `probe`),
    the runner serves every size in the symbols' ranges."""
    planner = Planner(gm, metas, options, weights, sym, probe)
    fn = planner.build()
    if options.verbose:
        logger.info("tessera: compiled graph (%d nodes)\n%s", len(planner.nodes),
                    planner.summary.describe())
    return fn, planner.summary
