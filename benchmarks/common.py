"""Shared helpers of the benchmarks: timing, JSON records, tables.

Timings on these machines are noisy: every comparison goes through Tessera's one noise rule
(tessera.timing: paired rounds against a reference, medians of ratios), implementations are
measured side by side in the same process, and reports are ratios.
"""

from __future__ import annotations

import argparse
import json
import random
from typing import Callable, Dict, List

from tessera import timing


def interleaved(fns: Dict[str, Callable[[], object]], rounds: int = 5,
                min_time_ms: float = 100.0) -> Dict[str, float]:
    """Median ms per implementation by Tessera's one noise rule (tessera.timing.compare): the
    first implementation is the reference, every other one is timed between two rounds of it,
    and its time is its median round ratio times the reference's median."""
    names = list(fns)
    result = paired(fns[names[0]], {k: fns[k] for k in names[1:]}, rounds, min_time_ms)
    out = {names[0]: result.reference_ms}
    out.update(result.ms)
    return out


def paired_with_reference(fns: Dict[str, Callable[[], object]], reference: Callable[[], object],
                          rounds: int = 5, min_time_ms: float = 100.0) -> Dict[str, float]:
    """Median time ratio of each implementation to `reference` (tessera.timing.compare), and
    under the key "reference" the reference's median time in ms; time = ratio x that median."""
    result = paired(reference, fns, rounds, min_time_ms)
    out = dict(result.ratio)
    out["reference"] = result.reference_ms
    return out


def paired(reference: Callable[[], object], fns: Dict[str, Callable[[], object]], rounds: int,
           min_time_ms: float) -> "timing.Comparison":
    """tessera.timing.compare with benchmark settings: every round runs (no budget), each about
    min_time_ms long; an implementation that raises fails the benchmark."""
    result = timing.compare(reference, fns, rounds=rounds, min_rounds=rounds,
                            round_ms=min_time_ms, min_calls=3, budget_ms=float("inf"))
    if result.errors:
        raise RuntimeError(f"benchmark implementations failed: {result.errors}")
    return result


def uniform_draw(items: list, n: int, seed: int = 0) -> list:
    """n of items (all when there are fewer) drawn uniformly without replacement, in their order."""
    picked = sorted(random.Random(seed).sample(range(len(items)), min(n, len(items))))
    return [items[i] for i in picked]


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
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)
