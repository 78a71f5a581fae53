"""Shared helpers of the benchmarks: timing, JSON records, tables.

Timings on these machines are noisy: every number is a median over repeats, candidates are
measured side by side in the same process, interleaved round by round, and reports are ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Callable, Dict, List


def time_ms(fn: Callable[[], object], min_time_ms: float = 100.0, warmup: int = 2) -> float:
    """Median wall time of fn() in ms over repeats lasting at least min_time_ms."""
    for _ in range(warmup):
        fn()
    samples: List[float] = []
    start = time.perf_counter()
    while len(samples) < 3 or (time.perf_counter() - start) * 1e3 < min_time_ms:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        if len(samples) >= 10000:
            break
    return statistics.median(samples)


def interleaved(fns: Dict[str, Callable[[], object]], rounds: int = 5,
                min_time_ms: float = 100.0) -> Dict[str, float]:
    """Times several implementations round-robin; returns the median of per-round medians."""
    per: Dict[str, List[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            per[name].append(time_ms(fn, min_time_ms=min_time_ms))
    return {k: statistics.median(v) for k, v in per.items()}


def paired_with_reference(fns: Dict[str, Callable[[], object]], reference: Callable[[], object],
                          rounds: int = 5, min_time_ms: float = 100.0) -> Dict[str, float]:
    """Times each implementation between two timings of a reference, round-robin.

    A round runs reference, fns[0], reference, fns[1], ..., reference. Each implementation's
    ratio in a round is its time over the mean of its two neighbouring reference timings, so a
    load burst that slows one stretch of the round slows both sides of the ratio; plain
    interleaving (above) times the reference once per round, and a burst over some variants but
    not the reference then shows up as a ratio (seen on GEMM 2048: identical kernels timed 150
    and 300 GFLOP/s in one round). Returns the median ratio per implementation, and under the
    key "reference" the reference's median time in ms; time = ratio x that median.
    """
    ratios: Dict[str, List[float]] = {k: [] for k in fns}
    ref_ms: List[float] = []
    for _ in range(rounds):
        before = time_ms(reference, min_time_ms=min_time_ms)
        ref_ms.append(before)
        for name, fn in fns.items():
            t = time_ms(fn, min_time_ms=min_time_ms)
            after = time_ms(reference, min_time_ms=min_time_ms)
            ratios[name].append(t / ((before + after) / 2))
            ref_ms.append(after)
            before = after
    out = {k: statistics.median(v) for k, v in ratios.items()}
    out["reference"] = statistics.median(ref_ms)
    return out


def arg_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", metavar="PATH", help="write the records to PATH as a JSON list")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (median)")
    return p


def write_json(path: str | None, records: list) -> None:
    if path:
        with open(path, "w") as f:
            json.dump(records, f, indent=2)
        print(f"wrote {len(records)} records to {path}")


def print_table(records: list, columns: List[str]) -> None:
    rows = [[_fmt(r.get(c)) for c in columns] for r in records]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)
