"""The last check on a compiled graph: is it faster than the graph run eagerly?

Each partition's implementation is chosen by measurement in isolation (anchor.py), but a model
can still lose as a whole: per-call overheads add up over dozens of partitions, and an ATen
operator between two Tessera kernels runs differently than between two ATen ones (OpenMP
threads spinning or asleep). So an inference graph, once planned, is timed against its own
eager execution on the real inputs (interleaved rounds, medians); if the compiled runner is
more than MARGIN slower, the graph runs eagerly instead, and the log says so.

Only graphs without side effects are timed this way: running them a few extra times must not
change anything (training graphs update batch-norm statistics and are left alone).

The two times are kept in the records database next to the partition decisions (anchor.py),
keyed by the graph's code, its input signature, the number of kernels its plan runs and
everything anchor.decision_text adds (thread counts, tuning mode, version): a later process
compiling the same graph decides without timing it again.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from typing import Any, Callable, List, Tuple

import torch
import torch.fx as fx

from . import anchor
from . import records as records_mod
from .timing_context import without_dispatch_modes

MARGIN = 1.02      # compiled may be at most 2% slower than eager before eager takes over
ROUNDS = 5
ROUND_MS = 4.0     # each round calls an implementation until this much time has passed
BUDGET_S = 1.5     # stop early on slow graphs: at least 3 rounds, then until this is spent


def has_side_effects(gm: fx.GraphModule) -> bool:
    """Does the graph write to any of its inputs (in-place ops, copy_ back into a placeholder)?"""
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        schema = getattr(n.target, "_schema", None)
        if schema is not None and any(a.alias_info is not None and a.alias_info.is_write
                                      for a in schema.arguments):
            return True
    return False


def _round_ms(fn: Callable[[], Any]) -> float:
    samples, total = [], 0.0
    fn()  # the other implementation ran last: one untimed call to warm up
    while total < ROUND_MS or len(samples) < 2:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        total += samples[-1]
    return statistics.median(samples)


def compare(runner: Callable, gm: fx.GraphModule, args: List[Any]) -> Tuple[float, float]:
    """(compiled ms, eager ms): medians of interleaved rounds on `args`."""
    compiled = lambda: runner(list(args))  # noqa: E731 (the runner empties its boxed list)
    eager = lambda: gm(*args)  # noqa: E731
    times = {"compiled": [], "eager": []}
    start = time.perf_counter()
    with torch.no_grad(), without_dispatch_modes():  # see timing_context.py
        for r in range(ROUNDS):
            if r >= 3 and time.perf_counter() - start > BUDGET_S:
                break
            times["compiled"].append(_round_ms(compiled))
            times["eager"].append(_round_ms(eager))
    return statistics.median(times["compiled"]), statistics.median(times["eager"])


def keeps_compiled(compiled_ms: float, eager_ms: float) -> bool:
    return compiled_ms <= MARGIN * eager_ms


def _decision_text(gm: fx.GraphModule, signature: tuple, kernels: int, options: Any) -> str:
    code = hashlib.sha256(gm.code.encode()).hexdigest()
    return anchor.decision_text(f"graph-guard code={code} kernels={kernels} args={signature!r}",
                                ("compiled", "eager"), options)


def decide(runner: Callable, gm: fx.GraphModule, args: List[Any], signature: tuple,
           kernels: int, options: Any) -> Tuple[float, float, bool]:
    """(compiled ms, eager ms, read from the records database): the times an earlier process
    stored for this graph, else a fresh measurement (compare), which is stored."""
    records = records_mod.open_records(getattr(options, "records_db", None))
    text = _decision_text(gm, signature, kernels, options) if records is not None else ""
    if records is not None and not anchor.remeasuring():
        hit = records.decision(text)
        if hit is not None and {"compiled", "eager"} <= hit[1].keys():
            return hit[1]["compiled"], hit[1]["eager"], True
    compiled_ms, eager_ms = compare(runner, gm, args)
    records_mod.count("measured")
    if records is not None:
        choice = "compiled" if keeps_compiled(compiled_ms, eager_ms) else "eager"
        records.store_decision(text, choice, {"compiled": compiled_ms, "eager": eager_ms},
                               min(compiled_ms, eager_ms))
    return compiled_ms, eager_ms, False
