"""Choosing each partition's implementation by measurement.

Candidates for a partition:
  tessera  one fused Tessera kernel for the whole partition
  split    (anchor partitions) ATen's matmul/conv kernel, then one Tessera kernel for the rest
  aten     every operator through ATen, as eager would run it
All run on inputs with the partition's real shapes, strides and dtypes, interleaved round by
round; the median wins. A Tessera candidate must beat the ATen one by a margin (timing noise
must not flip a choice towards the riskier candidate), so a compiled model is not slower than
eager because of a kernel choice. Decisions are cached per partition structure and shapes.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Callable, Dict, Tuple

MARGIN = 0.97          # a Tessera candidate must take < 97% of the ATen candidate's time
TARGET_MS = 15.0       # measurement budget per candidate
MIN_ROUNDS, MAX_ROUNDS = 3, 8
HOPELESS = 1.5         # a candidate this many times slower than the best after one round is out

_decisions: Dict[str, Tuple[str, Dict[str, float]]] = {}
_lock = threading.Lock()


def _once_ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def measure(candidates: Dict[str, Callable[[], object]]) -> Dict[str, float]:
    """Median ms per candidate: one warm-up each, then interleaved rounds; candidates that are
    hopeless after the first round stop being timed (their first time is reported)."""
    for fn in candidates.values():
        fn()
    samples = {k: [_once_ms(fn)] for k, fn in candidates.items()}
    best = min(s[0] for s in samples.values())
    alive = [k for k in candidates if samples[k][0] <= best * HOPELESS]
    rounds = int(min(max(TARGET_MS / max(best, 1e-3), MIN_ROUNDS), MAX_ROUNDS))
    for _ in range(rounds - 1):
        for k in alive:
            samples[k].append(_once_ms(candidates[k]))
    return {k: statistics.median(v) for k, v in samples.items()}


def choose(times: Dict[str, float]) -> str:
    """The fastest candidate; Tessera candidates must beat 'aten' by MARGIN."""
    best = min(times, key=times.get)
    if best != "aten" and "aten" in times and times[best] >= times["aten"] * MARGIN:
        return "aten"
    return best


def decide(key: str, candidates: Dict[str, Callable[[], object]]) -> Tuple[str, Dict[str, float]]:
    """(choice, times in ms) for a partition, cached by its structural key."""
    if len(candidates) == 1:
        return next(iter(candidates)), {}
    forced = os.environ.get("TESSERA_FORCE_CHOICE")  # debugging aid: tessera | split | aten
    if forced in candidates:
        return forced, {}
    with _lock:
        hit = _decisions.get(key)
    if hit is not None:
        return hit
    times = measure(candidates)
    result = (choose(times), times)
    with _lock:
        _decisions[key] = result
    return result


def clear_decisions() -> None:
    with _lock:
        _decisions.clear()
