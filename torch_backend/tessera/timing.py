"""Timing from Python: Tessera's one noise rule (runtime/paired_timing.h in the C++ core).

Every comparison by measurement goes through compare(): tuning candidates (in C++), a
partition's Tessera kernel against ATen (backend/anchor.py), a compiled graph against eager
(backend/graph_guard.py), and the benchmarks. The rule: implementations are timed in rounds,
each candidate's round between two rounds of the reference; its ratio for a round is its median
over the mean of the two reference medians; its score is the median of its round ratios. A
challenger replaces the incumbent only when its score is below the tuning policy's win margin
(wins()).

    result = tessera.timing.compare(lambda: torch.mm(a, b), {"tessera": lambda: kernel(a, b)})
    result.ratio["tessera"], result.ms["tessera"], result.reference_ms
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional

from . import _C


@dataclasses.dataclass
class Comparison:
    reference_ms: float               # the reference's median round time
    ratio: Dict[str, float]           # per candidate: median round ratio to the reference
    ms: Dict[str, float]              # per candidate: ratio x reference_ms
    rounds: Dict[str, int]
    errors: Dict[str, str]            # candidates that raised (not in ratio/ms)
    dropped: Dict[str, bool]          # stopped after one hopeless round (drop_ratio)

    def best(self) -> Optional[str]:
        """The candidate that replaces the reference under the win margin, or None."""
        ranked = sorted((r, n) for n, r in self.ratio.items()
                        if not self.dropped.get(n) and wins(r))
        return ranked[0][1] if ranked else None


def win_margin() -> float:
    return _C.tuning_policy().win_margin


def wins(ratio: float) -> bool:
    """Does a challenger with this score (time ratio to the incumbent) replace it?"""
    return ratio < win_margin()


def compare(reference: Callable[[], object], candidates: Dict[str, Callable[[], object]], *,
            rounds: int = 3, min_rounds: int = 1, round_ms: float = 5.0, min_calls: int = 2,
            budget_ms: float = 2500.0, finalists: int = 0, final_rounds: int = 4,
            final_budget_ms: float = 1500.0, drop_ratio: float = 0.0) -> Comparison:
    """Times each candidate against the reference by the one rule (see the module docstring and
    runtime/paired_timing.h for the options). Raises RuntimeError when the reference fails; a
    candidate that raises is reported in `errors`."""
    names = list(candidates)
    t = _C.time_paired(reference, [candidates[n] for n in names], rounds=rounds,
                       min_rounds=min_rounds, round_ms=round_ms, min_calls=min_calls,
                       budget_ms=budget_ms, finalists=finalists, final_rounds=final_rounds,
                       final_budget_ms=final_budget_ms, drop_ratio=drop_ratio)
    if not t.reference_ok:
        raise RuntimeError(f"the reference failed while timing: {t.reference_error}")
    out = Comparison(t.reference_ms, {}, {}, {}, {}, {})
    for i, n in enumerate(names):
        if not t.ok[i]:
            out.errors[n] = t.error[i]
            continue
        out.ratio[n], out.ms[n] = t.ratio[i], t.median_ms[i]
        out.rounds[n], out.dropped[n] = t.rounds[i], t.dropped[i]
    return out


__all__ = ["Comparison", "compare", "wins", "win_margin"]
