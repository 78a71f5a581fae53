"""The last check on a compiled graph: is it faster than the graph run eagerly?

Each partition's implementation is chosen by measurement in isolation (anchor.py), but a model
can still lose as a whole: per-call overheads add up over dozens of partitions, and an ATen
operator between two Tessera kernels runs differently than between two ATen ones (OpenMP
threads spinning or asleep). So an inference graph, once planned, is timed against its own
eager execution on the real inputs (interleaved rounds, medians); if the compiled runner is
more than MARGIN slower, the graph runs eagerly instead, and the log says so.

Only graphs without side effects are timed this way: running them a few extra times must not
change anything (training graphs update batch-norm statistics and are left alone).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, List, Tuple

import torch
import torch.fx as fx

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
    with torch.no_grad():
        for r in range(ROUNDS):
            if r >= 3 and time.perf_counter() - start > BUDGET_S:
                break
            times["compiled"].append(_round_ms(compiled))
            times["eager"].append(_round_ms(eager))
    return statistics.median(times["compiled"]), statistics.median(times["eager"])
