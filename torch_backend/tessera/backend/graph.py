"""A compiled FX graph: specialised per input signature on first use, then a generated runner.

aot_autograd hands the backend forward and backward ATen graphs with fake example inputs. The
real work happens on the first call with real tensors: the graph runs eagerly once (recording
every value's shape, strides and dtype; its results are that call's results), then partitions
are compiled and the runner replaces the graph. Graphs traced with dynamic shapes get one runner
for the whole range of their sizes (symbolic.py: kernels over size variables, nothing compiled
per size); a call outside that range, or a graph whose sizes cannot be made symbolic, gets one
runner per distinct input signature (kernels are cached by structure and shape across graphs,
so a shape seen before costs only planning).

A runner is generated Python (runner.py): ATen operators are Python calls, and every run of
consecutive Tessera kernels is one call into a C++ Program (program_runner.py) that keeps the
run's intermediates in a liveness-planned arena. Each graph is also a torch.library custom
operator (`op`, graph_op.py) for torch.export, an enclosing torch.compile and opcheck; the
backend itself calls the runner directly (CALL_VIA_OP below says why).
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Dict, List

import torch
import torch.fx as fx

from . import graph_guard
from . import symbolic
from .constant_fold import Folding, fold_constants
from .gc_pause import gc_paused
from ..jit_cache import SHAPES_PER_GRAPH, LruCache
from .log import log_once, logger
from .meta import record
from .options import Options
from .plan import Summary, build_plan, failure_category

_registry: "weakref.WeakSet[CompiledGraph]" = weakref.WeakSet()
_serial = itertools.count()
# (graph serial, graph kind, Summary) of recent compilations, kept after their graphs are freed
# (torch._dynamo.reset() drops graphs; benchmarks and tests still want to know what happened).
_recent: "collections.deque" = collections.deque(maxlen=64)
_last_serial = [-1]
# plans: runners built (one per input signature, or one per range of sizes); range_plans: those
# serving a range of sizes; range_fallbacks: dynamic graphs planned per signature instead.
stats = {"plans": 0, "range_plans": 0, "range_fallbacks": 0}


def _is_dynamic(gm: fx.GraphModule) -> bool:
    """Does the graph take symbolic sizes or scalar inputs? Plans are specialised on their
    values, so such graphs key their runners by the input signature."""
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("val")
        if not isinstance(v, torch.Tensor):
            return True  # SymInt / SymFloat / SymBool or a plain Python scalar
        if isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in v.shape):
            return True
    return False


def _has_symbolic_shape(placeholder: fx.Node) -> bool:
    v = placeholder.meta.get("val")
    return isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in v.shape)


def _refreshing(runner: Callable, folding) -> Callable:
    """runner, after bringing the values folded from weights up to date with the call's weights
    (constant_fold.DerivedConstant). The runner empties a boxed argument list: refreshed first."""
    def run(args):
        folding.refresh(args)
        return runner(args)
    return run


def _signature(args) -> tuple:
    return tuple((tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                 for a in args)


# TESSERA_GRAPH_OP=1: the backend's callable runs every compiled graph through its custom
# operator (graph_op.py) instead of calling the runner directly. Off by default: the operator
# copies outputs that alias inputs, which aot_autograd's forward graphs return on every training
# step, and adds output reassembly in Python (about 1 us a call in benchmarks/overhead.py, now
# that its kernel is C++). Either way `CompiledGraph.op` is there for export.
CALL_VIA_OP = os.environ.get("TESSERA_GRAPH_OP", "0") == "1"


class CompiledGraph:
    """Callable with aot_autograd's boxed convention (takes the list of graph inputs).

    Two ways in: __call__ (the backend's path: dynamo's guards already fixed the input
    signature of a static graph, so its one runner is used without checks) and run_checked /
    the custom operator `op` (any caller: the runner is chosen by the full input signature)."""

    _boxed_call = True

    def __init__(self, gm: fx.GraphModule, options: Options, kind: str,
                 weight_inputs: frozenset = frozenset()):
        self.gm = gm
        self.options = options
        self.kind = kind  # "forward" | "backward" | "inference"
        # The values folded into constants on the first call (constant_fold.Folding): those
        # read from no input, and in inference graphs those computed from weights.
        self.folded = None
        self.dynamic = _is_dynamic(gm)
        # The size symbols of a dynamic graph, when one plan can serve a range of sizes.
        self.sym = self._symbols() if self.dynamic and options.symbolic else None
        self._range_runner = None  # the runner for the symbols' ranges, once planned
        # Placeholders holding weights whose packed copies kernels may keep (entry.py); not
        # those with symbolic sizes (a packed copy's size would depend on them).
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.weights = frozenset(
            placeholders[i] for i in weight_inputs if i < len(placeholders)
            and not (self.dynamic and _has_symbolic_shape(placeholders[i])))
        # Per input signature (one entry for a static graph), the most recently used kept.
        self._runners = LruCache(SHAPES_PER_GRAPH)
        self.summaries = LruCache(SHAPES_PER_GRAPH)
        self.compile_s = 0.0
        self._lock = threading.Lock()
        self.serial = next(_serial)  # creation order
        self._static_signature = None  # input signature the static graph's runner was made for
        # Set where the caller checks the whole graph against the model's own eager run
        # (native_guard.py): graph_guard's check of the ATen graph is then skipped.
        self.native_guard = False
        self._op = None
        _last_serial[0] = self.serial
        _registry.add(self)

    def __call__(self, *args: Any) -> Any:
        # Boxed (one list of inputs, which the runner empties) or, where a wrapper dropped the
        # _boxed_call marker (aot_autograd's backward), the inputs as positional arguments.
        # Graph inputs are tensors and scalars, never lists, so the two cannot be confused.
        if len(args) == 1 and type(args[0]) is list:
            args = args[0]
        if CALL_VIA_OP and self.op_supported():
            return self._call_op(args)
        if self._range_runner is not None and self.sym.in_range(args):
            return self._range_runner(args)
        key = _signature(args) if self.dynamic else None
        runner = self._runners.get(key)
        if runner is not None:
            return runner(args)
        return self._first_call(args, key)

    def run_checked(self, args: List[Any]) -> Any:
        """Runs on any inputs: a static graph's runner is reused only for the signature it was
        specialised on, other signatures get their own (the custom operator's path, where no
        dynamo guard stands in front)."""
        if self._range_runner is not None and self.sym.in_range(args):
            return self._range_runner(args)
        sig = _signature(args)
        key = sig if self.dynamic or (self._static_signature is not None
                                      and sig != self._static_signature) else None
        runner = self._runners.get(key)
        if runner is not None:
            return runner(args)
        return self._first_call(args, key)

    def static_runner(self):
        """A static graph's runner, for the input signature of its first call (None before
        that call, and for graphs with dynamic shapes)."""
        return None if self.dynamic else self._runners.get(None)

    # ---- the custom operator (graph_op.py) ----------------------------------------------------

    @property
    def op(self):
        """This graph as the custom operator torch.ops.tessera.graph_<serial>_<kind>.default:
        takes the graph's inputs, returns its fresh tensor outputs (one tensor or a tuple; see
        graph_op). Registered on first use; raises GraphOpUnsupported for graphs it cannot
        express."""
        return self._graph_op().op

    def op_supported(self) -> bool:
        """Can this graph be called through its custom operator?"""
        if self._op is None:
            try:
                self._graph_op()
            except Exception:
                pass
        return not isinstance(self._op, Exception)

    def call_op(self, args: List[Any]) -> Any:
        """The graph's outputs (as __call__ gives them) computed through the operator."""
        return self._graph_op().call(list(args))

    def as_module(self) -> fx.GraphModule:
        """A GraphModule calling the operator once: what torch.export sees of this graph."""
        return self._graph_op().as_module()

    def _graph_op(self):
        if self._op is None:
            from .graph_op import make_graph_op
            with self._lock:
                if self._op is None:
                    try:
                        self._op = make_graph_op(self)
                    except Exception as e:  # remembered: the graph runs without an operator
                        self._op = e
                    else:
                        for key, runner in self._runners.items():
                            self._offer(key, runner)
        if isinstance(self._op, Exception):
            raise self._op
        return self._op

    def _offer(self, key, runner) -> None:
        """Gives the operator's C++ kernel a new runner (graph_op.GraphOp.add_runner)."""
        op = self._op
        signature = self._static_signature if key is None else key
        if op is not None and not isinstance(op, Exception) and signature is not None:
            op.add_runner(signature, runner)

    def _call_op(self, args) -> Any:
        a = list(args)
        if type(args) is list:
            args.clear()
        return self._graph_op().call(a)

    # ---- specialisation -----------------------------------------------------------------------

    def _first_call(self, args: List[Any], key) -> Any:
        args = list(args)
        if self.folded is None:  # with real tensors: aot_autograd compiles under fake ones
            self.folded = self._fold(args)
            # Folded values are weights too: the same on every call, or (computed from weights)
            # refreshed in place, which moves their version counters as a weight's would.
            self.weights = self.weights | frozenset(self.folded.attrs)
        if key is None:
            self._static_signature = _signature(args)
        with gc_paused():
            return self._specialise(args, key)

    def _fold(self, args: List[Any]) -> Folding:
        """Folds the graph's constant values (constant_fold.py); a failure folds nothing
        (logged; fold_constants computes everything before it changes the graph): the graph
        then computes them on every call, as eager does."""
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        try:
            return fold_constants(self.gm, {n: args[i] for i, n in enumerate(placeholders)
                                            if n in self.weights})
        except Exception as e:
            if not self.options.fallback:
                raise
            log_once(f"fold-failure:{type(e).__name__}:{e}", f"tessera: constant folding failed, "
                     f"the {self.kind} graph computes its constants on every call "
                     f"({type(e).__name__}: {e})", level=logging.WARNING)
            return Folding()

    def _symbols(self):
        try:
            return symbolic.analyse(self.gm, dict(self.options.dynamic_ranges))
        except symbolic.NotSizeGeneric as e:
            self._note_per_signature(str(e))
            return None

    def _note_per_signature(self, reason: str) -> None:
        stats["range_fallbacks"] += 1
        log_once(f"range-fallback:{reason}", f"tessera: a {self.kind} graph with dynamic shapes "
                 f"is planned per input signature ({reason})", level=logging.INFO)

    def _plan_range(self, args: List[Any], metas) -> Any:
        """The runner and summary of a plan for the symbols' whole ranges; None when the graph
        cannot have one (logged: it is then planned per input signature)."""
        probe = symbolic.Probe(self.gm, self.sym, args)
        try:
            planned = build_plan(self.gm, metas, self.options, self.weights, self.sym, probe)
        except Exception as e:
            self._note_per_signature(f"{type(e).__name__}: {e}")
            self.sym = None
            return None
        stats["range_plans"] += 1
        if self.options.verbose:
            logger.info("tessera: one plan for %s", self.sym.describe())
        return planned

    def _specialise(self, args: List[Any], key) -> Any:
        outs, metas = record(self.gm, args)
        t0 = time.perf_counter()
        for_range = self.sym is not None and self.sym.in_range(args)
        try:
            planned = self._plan_range(args, metas) if for_range else None
            for_range = planned is not None
            runner, summary = planned or build_plan(self.gm, metas, self.options, self.weights)
        except Exception as e:
            if not self.options.fallback:
                raise
            log_once(f"graph-fallback:{type(e).__name__}:{e}",
                     f"tessera: compiling a {self.kind} graph failed, it runs eagerly "
                     f"({type(e).__name__}: {e})", level=logging.WARNING)
            runner, summary = self._eager_runner(), Summary(failures=[f"graph: {e}"])
            summary.note_fallback(failure_category(e), f"graph: {type(e).__name__}: {e}")
        if self.folded.derived:  # values computed from weights follow the weights
            runner = _refreshing(runner, self.folded)
        if self.options.anchor_measure and self.kind == "inference" and summary.kernels > 0 \
                and not self.native_guard and not graph_guard.has_side_effects(self.gm):
            runner = self._guard(runner, summary, args)
        self.compile_s += time.perf_counter() - t0
        stats["plans"] += 1
        with self._lock:
            if for_range:
                self._range_runner = runner
                self.summaries.put("range", summary)
            else:
                self._runners.put(key, runner)
                self.summaries.put(key, summary)
                self._offer(key, runner)
        _recent.append((self.serial, self.kind, summary.without_code()))
        return outs

    def _guard(self, runner: Callable, summary: Summary, args: List[Any]) -> Callable:
        """The compiled runner, unless the whole graph measures slower than eager (see
        graph_guard); then the eager runner, logged."""
        try:
            compiled_ms, eager_ms, stored = graph_guard.decide(
                runner, self.gm, args, _signature(args), summary.kernels, self.options)
        except Exception as e:  # a failed measurement changes nothing
            log_once(f"graph-guard:{type(e).__name__}", f"tessera: could not time the compiled "
                     f"graph against eager ({type(e).__name__}: {e})", level=logging.INFO)
            return runner
        if self.options.verbose:
            logging.getLogger("tessera").info(
                "tessera: whole %s graph: compiled %.3f ms, eager %.3f ms%s", self.kind,
                compiled_ms, eager_ms, " (records database)" if stored else "")
        keeps = graph_guard.keeps_compiled(compiled_ms, eager_ms)
        _note_whole_graph(self, summary, compiled_ms, eager_ms, keeps, "eager")
        return runner if keeps else self._eager_runner()

    def note_whole_graph(self, compiled_ms: float, eager_ms: float, keeps: bool,
                         against: str) -> None:
        """Records the check of the static graph's runner against eager made outside it
        (native_guard.py): its summary's graph times and choice, here and in
        recent_summaries()."""
        summary = self.summaries.get(None)
        _note_whole_graph(self, summary, compiled_ms, eager_ms, keeps, against)
        for i, (serial, kind, _) in enumerate(_recent):
            if serial == self.serial and kind == self.kind:
                _recent[i] = (serial, kind, summary.without_code())

    def _eager_runner(self) -> Callable:
        gm = self.gm

        def run(args):
            a = list(args)
            if type(args) is list:
                args.clear()
            return gm(*a)
        run._boxed_call = True
        return run


def _note_whole_graph(graph: CompiledGraph, summary: Summary, compiled_ms: float,
                      eager_ms: float, keeps: bool, against: str) -> None:
    summary.graph_times_ms = {"compiled": compiled_ms, "eager": eager_ms}
    if keeps:
        return
    summary.graph_choice = "eager"
    summary.note_fallback("slower", f"whole {graph.kind} graph ({summary.kernels} kernels): "
                          f"compiled {compiled_ms:.3f} ms, {against} {eager_ms:.3f} ms")
    log_once(f"graph-guard-eager:{graph.serial}",
             f"tessera: a compiled {graph.kind} graph ({summary.kernels} kernels) measured "
             f"{compiled_ms:.3f} ms against {eager_ms:.3f} ms for {against}; it runs eagerly",
             level=logging.INFO)


def recent_summaries(since_serial: int = -1) -> List[Summary]:
    """Summaries of graphs compiled (specialised) in this process, oldest first; only those of
    graphs created after `since_serial` (see next_serial())."""
    return [s for serial, _, s in list(_recent) if serial > since_serial]


def last_serial() -> int:
    """Serial of the most recently created compiled graph (-1 if none): pass it to
    recent_summaries() later to get what was compiled since."""
    return _last_serial[0]


def compiled_graphs() -> List[CompiledGraph]:
    """Graphs compiled in this process that are still alive, oldest first (explain, tests)."""
    return sorted(_registry, key=lambda g: g.serial)
