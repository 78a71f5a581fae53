"""Choosing between Tessera's fused kernel and ATen for anchor partitions, by measurement.

For a partition around a matmul or convolution there are two candidates:
  tessera  one fused kernel (the anchor with its epilogue and the rest of the partition)
  aten     the ATen kernel for the anchor, then one Tessera kernel for the rest
Both run on inputs of the partition's real shapes and strides, interleaved, a few times; the
fused kernel is kept only if its median is faster by a margin (noise must not flip a choice
towards the riskier candidate). Decisions are cached per partition structure and shapes.
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Callable, Dict, Tuple

MARGIN = 0.97          # tessera must take < 97% of aten's time
TARGET_MS = 40.0       # measurement budget per candidate
MIN_ROUNDS, MAX_ROUNDS = 3, 15

_decisions: Dict[str, Tuple[str, float, float]] = {}
_lock = threading.Lock()


def _once_ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def measure_pair(run_tessera: Callable[[], object],
                 run_aten: Callable[[], object]) -> Tuple[float, float]:
    """Median ms of each candidate, interleaved round by round after one warm-up each."""
    first_t = _once_ms(run_tessera)
    first_a = _once_ms(run_aten)
    per_round = max(min(first_t, first_a), 1e-3)
    rounds = int(min(max(TARGET_MS / per_round, MIN_ROUNDS), MAX_ROUNDS))
    ts, as_ = [], []
    for _ in range(rounds):
        ts.append(_once_ms(run_tessera))
        as_.append(_once_ms(run_aten))
    return statistics.median(ts), statistics.median(as_)


def decide(key: str, run_tessera: Callable[[], object],
           run_aten: Callable[[], object]) -> Tuple[str, float, float]:
    """('tessera' | 'aten', tessera_ms, aten_ms) for a partition, cached by its key."""
    with _lock:
        hit = _decisions.get(key)
    if hit is not None:
        return hit
    t_ms, a_ms = measure_pair(run_tessera, run_aten)
    choice = ("tessera" if t_ms < a_ms * MARGIN else "aten", t_ms, a_ms)
    with _lock:
        _decisions[key] = choice
    return choice


def clear_decisions() -> None:
    with _lock:
        _decisions.clear()
