"""The last check on a compiled graph: is it faster than the graph run eagerly?

Each partition's implementation is chosen by measurement in isolation (anchor.py), but a model
can still lose as a whole: per-call overheads add up over dozens of partitions, and an ATen
operator between two Tessera kernels runs differently than between two ATen ones (OpenMP
threads spinning or asleep). So an inference graph, once planned, is timed against its own
eager execution on the real inputs (tessera.timing's paired rounds); if eager beats the compiled
runner by the tuning policy's win margin, in that measurement and in a second, longer one, the
graph runs eagerly instead, and the log says so.

Only graphs without side effects are timed this way: running them a few extra times must not
change anything (training graphs update batch-norm statistics and are left alone).

The two times are kept in the records database next to the partition decisions (anchor.py),
under keys.graph_key: the graph's code, its input signature, the number of kernels its plan runs
and the context keys.context adds (thread counts, tuning mode, version): a later process
compiling the same graph decides without timing it again.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

import torch
import torch.fx as fx

from .. import timing
from . import anchor, keys
from . import records as records_mod
from .timing_context import without_dispatch_modes

# Timing of one graph (tessera.timing.compare): 3 to 5 rounds of about ROUND_MS, rounds past the
# third only within BUDGET_MS.
ROUNDS, MIN_ROUNDS, ROUND_MS, BUDGET_MS = 5, 3, 4.0, 1500.0
# A graph goes eager only when a second, longer measurement agrees: a model of hundreds of
# milliseconds gets three paired rounds in the first, and one disturbed round can lose it.
CONFIRM_ROUNDS, CONFIRM_BUDGET_MS = 9, 5000.0


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


def compare(runner: Callable, gm: fx.GraphModule, args: List[Any], rounds: int = ROUNDS,
            budget_ms: float = BUDGET_MS) -> Tuple[float, float]:
    """(compiled ms, eager ms) on `args`, by the one noise rule (eager timed against the
    compiled runner, the incumbent)."""
    compiled = lambda: runner(list(args))  # noqa: E731 (the runner empties its boxed list)
    eager = lambda: gm(*args)  # noqa: E731
    with torch.no_grad(), without_dispatch_modes():  # see timing_context.py
        result = timing.compare(compiled, {"eager": eager}, rounds=rounds, min_rounds=MIN_ROUNDS,
                                round_ms=ROUND_MS, budget_ms=budget_ms)
    if "eager" not in result.ms:
        raise RuntimeError(result.errors.get("eager", "eager run failed"))
    return result.reference_ms, result.ms["eager"]


def keeps_compiled(compiled_ms: float, eager_ms: float) -> bool:
    """The compiled graph stays unless eager beats it by the win margin."""
    return not timing.wins(eager_ms / compiled_ms)


def _key(gm: fx.GraphModule, signature: tuple, kernels: int, options: Any):
    return keys.graph_key(gm.code, signature, kernels,
                          keys.context(options, ("compiled", "eager")))


def decide(runner: Callable, gm: fx.GraphModule, args: List[Any], signature: tuple,
           kernels: int, options: Any) -> Tuple[float, float, bool]:
    """(compiled ms, eager ms, read from the records database): the times an earlier process
    stored for this graph, else a fresh measurement (compare), which is stored. Where eager wins
    it, the graph is measured again, longer, and that second measurement decides."""
    records = records_mod.open_records(getattr(options, "records_db", None))
    key = _key(gm, signature, kernels, options) if records is not None else None
    if records is not None and not anchor.remeasuring():
        hit = records.decision(key)
        if hit is not None and {"compiled", "eager"} <= hit[1].keys():
            return hit[1]["compiled"], hit[1]["eager"], True
    compiled_ms, eager_ms = compare(runner, gm, args)
    if not keeps_compiled(compiled_ms, eager_ms):
        compiled_ms, eager_ms = compare(runner, gm, args, rounds=CONFIRM_ROUNDS,
                                        budget_ms=CONFIRM_BUDGET_MS)
    records_mod.count("measured")
    if records is not None:
        choice = "compiled" if keeps_compiled(compiled_ms, eager_ms) else "eager"
        records.store_decision(key, choice, {"compiled": compiled_ms, "eager": eager_ms},
                               min(compiled_ms, eager_ms))
    return compiled_ms, eager_ms, False
