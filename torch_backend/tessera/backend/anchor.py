"""Choosing each partition's implementation by measurement.

Candidates for a partition:
  aten     every operator through ATen, as eager would run it (the incumbent)
  split    (anchor partitions) ATen's matmul/conv kernel, then one Tessera kernel for the rest
  tessera  one fused Tessera kernel for the whole partition
They are timed by Tessera's one noise rule (tessera.timing: paired rounds against the ATen
candidate) on inputs with the partition's real shapes, strides and dtypes, each call followed by a
small ATen operator as in a model (see _AtenContext). A Tessera candidate replaces ATen only when
its score is below the tuning policy's win margin, so a compiled model is not slower than eager
because of a kernel choice. Decisions are cached per partition workload (keys.decision_key), in
this process and in the records database (records.py), so a later process compiling the same
model takes them from there instead of measuring again.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from .. import timing
from . import keys
from . import records as records_mod
from .timing_context import without_dispatch_modes

# Timing of one decision (tessera.timing.compare): 3 to 8 rounds of about a millisecond within
# BUDGET_MS; a candidate over DROP_RATIO times ATen after its first round is not timed further.
ROUNDS, MIN_ROUNDS, ROUND_MS, BUDGET_MS = 8, 3, 1.0, 15.0
DROP_RATIO = 1.5

_decisions: Dict[Tuple, Tuple[str, Dict[str, float]]] = {}
_lock = threading.Lock()


class _AtenContext:
    """A small ATen operator that ATen runs on its OpenMP threads. Candidates are timed followed
    by one of these, as they run in a model: Tessera kernels sit between ATen operators (the
    matmuls and convolutions), and handing the cores over between Tessera's kernels and ATen's
    costs time that a kernel timed back-to-back with itself never shows."""

    def __init__(self):
        self.a = torch.randn(1 << 18)  # above ATen's grain size: runs in parallel
        self.out = torch.empty_like(self.a)

    def __call__(self):
        torch.add(self.a, 1.0, out=self.out)


_context = None


def _in_context(fn: Callable[[], object]) -> Callable[[], None]:
    global _context
    if _context is None:
        _context = _AtenContext()
    ctx = _context

    def call():
        fn()
        ctx()
    return call


def measure(candidates: Dict[str, Callable[[], object]]) -> Dict[str, float]:
    """Median ms per candidate, "aten" (the reference) included; a candidate that raised or was
    dropped as hopeless is missing or over DROP_RATIO times ATen's time."""
    others = {k: _in_context(fn) for k, fn in candidates.items() if k != "aten"}
    with without_dispatch_modes():  # see timing_context.py
        result = timing.compare(_in_context(candidates["aten"]), others, rounds=ROUNDS,
                                min_rounds=MIN_ROUNDS, round_ms=ROUND_MS, min_calls=1,
                                budget_ms=BUDGET_MS, drop_ratio=DROP_RATIO)
    times = {"aten": result.reference_ms}
    times.update(result.ms)
    return times


def choose(times: Dict[str, float]) -> str:
    """The implementation to use: the fastest Tessera candidate whose time ratio to ATen is
    below the win margin, else "aten"."""
    best = "aten"
    for k, t in times.items():
        if k != "aten" and timing.wins(t / times["aten"]) and t < times[best]:
            best = k
    return best


def known_choice(key, candidates, options: Any = None, prepacked: bool = False
                 ) -> Optional[Tuple[str, Dict[str, float]]]:
    """The (choice, times) decide() would return without measuring -- decided before in this
    process or found in the records database -- or None. `key`: the partition's workload key;
    `candidates`: the candidate names decide() would get. A planner can ask this before building
    the candidates' kernels and build only the chosen one."""
    # Debugging aid: tessera | split | aten, or with a layout (tessera:nchw; plan.py). A name
    # without one takes the first layout candidates list.
    forced = os.environ.get("TESSERA_FORCE_CHOICE")
    if forced:
        matching = [c for c in candidates if c == forced or c.startswith(forced + ":")]
        if matching:
            return matching[0], {}
    dkey = keys.decision_key(key, keys.context(options, candidates, prepacked))
    local = keys.cache_key(dkey)
    with _lock:
        hit = _decisions.get(local)
    if hit is not None:
        return hit
    records = records_mod.open_records(getattr(options, "records_db", None))
    if records is None or _remeasure[0]:
        return None
    stored = records.decision(dkey)
    if stored is None or stored[0] not in candidates:
        return None
    with _lock:
        _decisions[local] = stored
    return stored


def decide(key, candidates: Dict[str, Callable[[], object]], options: Any = None,
           looked_up: bool = False, prepacked: bool = False) -> Tuple[str, Dict[str, float]]:
    """(choice, times in ms) for a partition, cached by its workload key (keys.kernel_key of
    its fused kernel).

    candidates: "aten" (every operator through ATen) and "tessera" (the fused kernel) and/or
    "split" (ATen's anchor + a Tessera kernel for the rest). The choice is one of them.
    prepacked: the fused kernel reads weights prepacked (the choice is filed apart).

    options: the backend Options (tuning mode, records database); None means the defaults. A
    choice found in the records database is not measured again; looked_up: the caller asked
    known_choice already (and found nothing, so TESSERA_FORCE_CHOICE was not set to one of the
    candidates either), so it is not asked again."""
    if len(candidates) == 1:
        return next(iter(candidates)), {}
    hit = None if looked_up else known_choice(key, candidates, options, prepacked)
    if hit is not None:
        return hit
    dkey = keys.decision_key(key, keys.context(options, candidates, prepacked))
    records = records_mod.open_records(getattr(options, "records_db", None))
    times = measure(candidates)
    records_mod.count("measured")
    result = (choose(times), times)
    with _lock:
        _decisions[keys.cache_key(dkey)] = result
    if records is not None:
        records.store_decision(dkey, result[0], times, times.get(result[0]))
    return result


# Set by clear_decisions: this process measures every choice again instead of reading the
# records database (and stores what it measures).
_remeasure = [False]


def remeasuring() -> bool:
    """True after clear_decisions(): stored decisions are not read in this process."""
    return _remeasure[0]


def clear_decisions() -> None:
    """Forgets this process's decisions; later ones are measured again, not read from the
    records database (tests and benchmarks that want fresh measurements call it)."""
    with _lock:
        _decisions.clear()
        _remeasure[0] = True
