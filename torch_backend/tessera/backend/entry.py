"""The torch.compile entry point: backend="tessera".

Dynamo calls tessera_backend(gm, example_inputs, mode=..., options=...). The options are read
here, before aot_autograd (which would drop them), and bound into the forward/backward
compilers it calls.
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional

import torch
import torch.fx as fx

from . import native_guard, records
from .decompositions import decomposition_table
from .gc_pause import gc_paused
from .graph import CompiledGraph
from .log import log_once, logger
from .options import Options, parse_options
from .origin import Origin, current_origin


def _weight_inputs(gm: fx.GraphModule) -> frozenset:
    """Positions of the graph's inputs that are module parameters or buffers (Dynamo marks them
    static: same tensor on every call) and that the graph does not mutate. Their values can
    still change in place between calls: whoever caches something made from them guards on
    their version counters."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    n_inputs = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
    if meta is None or len(meta.input_info) != n_inputs:
        return frozenset()
    try:
        return frozenset(i for i in meta.static_input_indices
                         if not (meta.input_info[i].mutates_data
                                 or meta.input_info[i].mutates_metadata))
    except (AttributeError, IndexError, TypeError):  # another torch's metadata: no weights
        log_once("weights-unknown", "tessera: weights not identified (aot_autograd metadata "
                 "changed); kernels pack their operands on every call", level=logging.WARNING)
        return frozenset()


def _compiler(kind: str, options: Options, origin: Origin, made: List[CompiledGraph]):
    def compile_graph(gm: fx.GraphModule, example_inputs: List[Any]):
        weights = _weight_inputs(gm) if kind == "inference" and options.prepack_weights \
            else frozenset()
        graph = CompiledGraph(gm, options, kind, weight_inputs=weights)
        graph.origin = origin  # the user code it came from (tessera.explain)
        made.append(graph)
        return graph
    compile_graph.__name__ = f"tessera_{kind}_compiler"
    return compile_graph


def _backward_compiler(options: Options, origin: Origin):
    """Dynamo's aot_autograd wrapper hides a backward compiler's result behind
    torch._dynamo.disable, which drops the boxed-call marker; this compiler does that wrapping
    itself and keeps the marker (so aot_autograd passes the inputs as one list it may free)."""
    def compile_graph(gm: fx.GraphModule, example_inputs: List[Any]):
        graph = CompiledGraph(gm, options, "backward")
        graph.origin = origin
        fn = torch._dynamo.disable(graph, reason="do not trace the compiled backward pass")
        fn._boxed_call = True
        fn.compiled_graph = graph
        return fn
    compile_graph._is_wrapped_bw_compiler = True
    return compile_graph


def _note_search(options: Options) -> None:
    if options.tune == "search":
        log_once("tune:search", "tessera: tune='search' (mode='max-autotune'): search mode tunes "
                 "kernels with enough summation work (minutes each, once: the records database "
                 "keeps them)")


def _describe_records(options: Options) -> None:
    """verbose: which records database this compile reads and writes (opening it now also
    reports a damaged or unusable file before any kernel is compiled)."""
    rec = records.records_for(options)
    if rec is None:
        log_once("records_db:off", "tessera: records_db off: tuning results are not kept")
    else:
        log_once(f"records_db:{rec.path}", f"tessera: records_db {rec.path} ({rec.mode})")


def _make_verbose_visible() -> None:
    """verbose=True must print something even where the program configured no logging."""
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)


def tessera_backend(gm: fx.GraphModule, example_inputs: List[Any], mode: Optional[str] = None,
                    options: Optional[dict] = None):
    """torch.compile backend: aot_autograd + core ATen decompositions + Tessera kernels."""
    opts = parse_options(mode, options)
    if opts.verbose:
        _make_verbose_visible()
        _describe_records(opts)
    _note_search(opts)
    from functorch.compile import min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    origin = current_origin()
    made: List[CompiledGraph] = []  # the graphs aot_autograd hands the compilers
    backend = aot_autograd(
        fw_compiler=_compiler("forward", opts, origin, made),
        bw_compiler=_backward_compiler(opts, origin),
        inference_compiler=_compiler("inference", opts, origin, made),
        decompositions=decomposition_table(),
        partition_fn=min_cut_rematerialization_partition,
    )
    with gc_paused():  # tracing and decomposing allocate in bursts (see gc_pause.py)
        compiled = backend(gm, example_inputs)
    return native_guard.guard(compiled, gm, made)


def _has_entry_point() -> bool:
    from importlib.metadata import entry_points
    try:
        return any(ep.name == "tessera" for ep in entry_points(group="torch_dynamo_backends"))
    except Exception:
        return False


def register() -> None:
    """Registers backend="tessera" with dynamo, unless the installed entry point does it.

    With the torch_dynamo_backends entry point installed, dynamo imports this module while it
    registers the backend itself, and a registration from here would collide with it."""
    from torch._dynamo.backends import registry
    if "tessera" in registry._COMPILER_FNS or _has_entry_point():
        return
    registry.register_backend(compiler_fn=tessera_backend, name="tessera")


__all__ = ["tessera_backend", "register"]
