"""The last check of torch.compile's path: is the compiled graph faster than the model itself?

graph_guard.py times a compiled ATen graph against the same ATen graph run eagerly. But that
graph is the model after aot_autograd's core-ATen decompositions, and decomposed operators can
be much slower than eager's native kernels: an upsampling that eager runs as one kernel becomes
dozens of gathers and lerps, a relative position table built each call becomes many small ops.
Then the compiled graph beats the decomposed one and still loses to the model (BEiT: compiled
38 ms, decomposed 49 ms, the module 28 ms).

So for a Dynamo graph whose one aot graph is an inference graph without side effects, the
backend returns a NativeGuard: the first call compiles (and returns eager's result, as
always), then the compiled graph is timed against Dynamo's own graph module, which calls the
torch functions the model calls, by graph_guard's rule (paired rounds; eager must win twice,
the second time in a longer measurement; the times kept in the records database). Where the
model itself wins, every later call runs Dynamo's graph module. The inference graph then skips
graph_guard's own check, which this one subsumes.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, List

import torch.fx as fx

from . import graph_guard
from .graph import CompiledGraph, _signature
from .log import log_once


class NativeGuard:
    """Dynamo's calling convention (positional arguments, or one list where the compiled
    callable is boxed), deciding between `compiled` and `native` on its first call."""

    def __init__(self, compiled: Callable, native: fx.GraphModule, graph: CompiledGraph):
        self.compiled = compiled
        self.native = native
        self.graph = graph  # the aot inference graph that `compiled` runs
        self._boxed_call = getattr(compiled, "_boxed_call", False)
        self.chosen = None  # compiled or native, once decided
        graph.native_guard = True

    def __call__(self, *args: Any) -> Any:
        if self.chosen is not None:
            return self.chosen(*args)
        given = list(args[0]) if self._boxed_call else list(args)
        out = self.compiled(*args)  # the first call records and plans: eager's result
        self.chosen = self._decide(given)
        return out

    def _call_compiled(self, args: List[Any]) -> Any:
        return self.compiled(list(args)) if self._boxed_call else self.compiled(*args)

    def _call_native(self, *args: Any) -> Any:
        if self._boxed_call:  # one list, which a boxed callee may empty
            a = list(args[0])
            args[0].clear()
            return self.native(*a)
        return self.native(*args)

    def _decide(self, args: List[Any]) -> Callable:
        g = self.graph
        runner = g.static_runner()
        summary = g.summaries.get(None)
        if runner is None or summary is None or summary.kernels == 0 or \
                summary.graph_choice != "compiled":
            return self.compiled  # nothing compiled to check, or sizes vary
        try:
            compiled_ms, eager_ms, stored = graph_guard.decide(
                self._call_compiled, self.native, args, _signature(args), summary.kernels,
                g.options)
        except Exception as e:  # a failed measurement changes nothing
            log_once(f"native-guard:{type(e).__name__}", f"tessera: could not time the compiled "
                     f"graph against the model ({type(e).__name__}: {e})", level=logging.INFO)
            return self.compiled
        keeps = graph_guard.keeps_compiled(compiled_ms, eager_ms)
        g.note_whole_graph(compiled_ms, eager_ms, keeps, "the model's own eager run")
        if g.options.verbose:
            logging.getLogger("tessera").info(
                "tessera: whole graph: compiled %.3f ms, the model eagerly %.3f ms%s", compiled_ms,
                eager_ms, " (records database)" if stored else "")
        return self.compiled if keeps else self._call_native


def guard(compiled: Callable, native: fx.GraphModule, graphs: List[CompiledGraph]) -> Callable:
    """`compiled`, or a NativeGuard around it where its graphs allow the check (see the module
    docstring)."""
    if len(graphs) != 1 or graphs[0].kind != "inference" or graphs[0].dynamic:
        return compiled
    g = graphs[0]
    if not g.options.anchor_measure or graph_guard.has_side_effects(g.gm):
        return compiled
    return NativeGuard(compiled, native, g)
