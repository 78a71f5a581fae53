"""Choosing each partition's implementation by measurement.

Candidates for a partition:
  tessera  one fused Tessera kernel for the whole partition
  split    (anchor partitions) ATen's matmul/conv kernel, then one Tessera kernel for the rest
  aten     every operator through ATen, as eager would run it
They are timed in parts (see decide) on inputs with the partition's real shapes, strides and
dtypes, interleaved round by round, each call between two ATen operators as in a model (see
_AtenContext); medians decide. A Tessera candidate must beat its ATen alternative by a margin
(timing noise must not flip a choice towards the riskier candidate), so a compiled model is
not slower than eager because of a kernel choice. Decisions are cached per partition structure
and shapes, in this process and in the records database (records.py), so a later process
compiling the same model takes them from there instead of measuring again.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from .. import _C
from . import records as records_mod
from .timing_context import without_dispatch_modes

MARGIN = 0.97          # a Tessera candidate must take < 97% of the ATen candidate's time
TARGET_MS = 15.0       # measurement budget per candidate
MIN_ROUNDS, MAX_ROUNDS = 3, 8
HOPELESS = 1.5         # a candidate this many times slower than the best after one round is out

_decisions: Dict[str, Tuple[str, Dict[str, float]]] = {}
_lock = threading.Lock()


class _AtenContext:
    """A small ATen operator that ATen runs on its OpenMP threads. Candidates are timed between
    two of these, as they run in a model: Tessera kernels sit between ATen operators (the
    matmuls and convolutions), and handing the cores over between Tessera's thread pool and
    ATen's costs time that a kernel timed back-to-back with itself never shows."""

    def __init__(self):
        self.a = torch.randn(1 << 18)  # above ATen's grain size: runs in parallel
        self.out = torch.empty_like(self.a)

    def __call__(self):
        torch.add(self.a, 1.0, out=self.out)


_context = None


def _once_ms(fn: Callable[[], object]) -> float:
    global _context
    if _context is None:
        _context = _AtenContext()
    _context()
    t0 = time.perf_counter()
    fn()
    _context()
    return (time.perf_counter() - t0) * 1e3


def measure(parts: Dict[str, Callable[[], object]]) -> Dict[str, float]:
    """Median ms per part: one warm-up each, then interleaved rounds. A fused candidate that is
    hopeless after the first round (HOPELESS times the best alternative) stops being timed."""
    with without_dispatch_modes():  # see timing_context.py
        return _measure(parts)


def _measure(parts: Dict[str, Callable[[], object]]) -> Dict[str, float]:
    for fn in parts.values():
        fn()
    samples = {k: [_once_ms(fn)] for k, fn in parts.items()}
    first = {k: v[0] for k, v in samples.items()}
    alive = list(parts)
    if "tessera" in first and len(first) > 1:
        others = _totals({k: v for k, v in first.items() if k != "tessera"})
        if others and first["tessera"] > HOPELESS * min(others.values()):
            alive.remove("tessera")
    per_round = sum(first[k] for k in alive) / max(len(_totals(first)), 1)
    rounds = int(min(max(TARGET_MS / max(per_round, 1e-3), MIN_ROUNDS), MAX_ROUNDS))
    for _ in range(rounds - 1):
        for k in alive:
            samples[k].append(_once_ms(parts[k]))
    return {k: statistics.median(v) for k, v in samples.items()}


def _totals(t: Dict[str, float]) -> Dict[str, float]:
    """Whole-partition times of the candidates a set of part times describes."""
    out = {}
    if "tessera" in t:
        out["tessera"] = t["tessera"]
    if "aten" in t:
        out["aten"] = t["aten"]
    if "anchor" in t:
        if "rest_tessera" in t:
            out["split"] = t["anchor"] + t["rest_tessera"]
        if "rest_aten" in t:
            out["aten"] = t["anchor"] + t["rest_aten"]
        elif "rest_tessera" not in t:
            out["aten"] = t["anchor"]
    return out


def choose(times: Dict[str, float]) -> str:
    """The implementation to use, from part times (see decide). A Tessera candidate must beat
    its ATen alternative by MARGIN: the rest kernel of an anchor partition is compared with the
    rest's ATen operators alone (the anchor's ATen call is common to both, and timing it twice
    would only add its noise), the fused kernel with the best of the others."""
    totals = _totals(times)
    if "rest_tessera" in times and "rest_aten" in times:
        if times["rest_tessera"] >= times["rest_aten"] * MARGIN:
            totals.pop("split")
    best_other = min((v, k) for k, v in totals.items() if k != "tessera")
    if "tessera" in totals and totals["tessera"] < best_other[0] * MARGIN:
        return "tessera"
    return best_other[1]


def decision_text(key: str, parts, options: Any = None) -> str:
    """Everything a measured choice depends on besides the machine (the records key adds the
    target): the partition's structural key, which candidates were built, how the fused kernel
    was tuned, the thread counts and the Tessera version (a newer compiler may build faster
    kernels)."""
    tune = getattr(options, "tune", None) or "construct"
    return "\n".join([f"version={_C.version()}", f"tune={tune}",
                      f"threads={torch.get_num_threads()},{_C.get_num_threads()}",
                      f"candidates={','.join(sorted(parts))}", key])


def known_choice(key: str, candidates, options: Any = None
                 ) -> Optional[Tuple[str, Dict[str, float]]]:
    """The (choice, part times) decide() would return without measuring -- decided before in
    this process or found in the records database -- or None. `candidates`: the part names
    decide() would get. A planner can ask this before building the candidates' kernels and build
    only the chosen one."""
    totals = _totals({k: 0.0 for k in candidates})
    text = decision_text(key, candidates, options)
    with _lock:
        hit = _decisions.get(text)
    if hit is not None:
        return hit
    records = records_mod.open_records(getattr(options, "records_db", None))
    if records is None or _remeasure[0]:
        return None
    stored = records.decision(text)
    if stored is None or stored[0] not in totals:
        return None
    with _lock:
        _decisions[text] = stored
    return stored


def decide(key: str, parts: Dict[str, Callable[[], object]],
           options: Any = None) -> Tuple[str, Dict[str, float]]:
    """(choice, part times in ms) for a partition, cached by its structural key.

    parts: "tessera" (the fused kernel) and either "aten" (all operators through ATen) or, for
    anchor partitions, "anchor" (ATen's matmul/conv alone), "rest_tessera" (the kernel for the
    rest of the partition) and "rest_aten" (the rest's operators through ATen). The choice is
    "tessera", "split" (ATen anchor + rest kernel) or "aten".

    options: the backend Options (tuning mode, records database); None means the defaults. A
    choice found in the records database is not measured again."""
    totals = _totals({k: 0.0 for k in parts})
    if len(totals) == 1:
        return next(iter(totals)), {}
    forced = os.environ.get("TESSERA_FORCE_CHOICE")  # debugging aid: tessera | split | aten
    if forced in totals:
        return forced, {}
    hit = known_choice(key, parts, options)
    if hit is not None:
        return hit
    text = decision_text(key, parts, options)
    records = records_mod.open_records(getattr(options, "records_db", None))
    times = measure(parts)
    records_mod.count("measured")
    result = (choose(times), times)
    with _lock:
        _decisions[text] = result
    if records is not None:
        records.store_decision(text, result[0], times, _totals(times).get(result[0]))
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
