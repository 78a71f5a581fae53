"""Search mode's progress: a tqdm bar per searched kernel and a per-trial log.

The C++ search calls `SearchProgress` after each measured candidate (CompileRequest.on_trial)
with a `_C.TrialEvent`. The bar shows trials done, the best GFLOP/s so far and tqdm's ETA;
``tqdm.auto`` renders it as a widget in Jupyter and as text in a terminal. Every trial is also a
line on the ``tessera.search`` logger (INFO): task, trial, wall time, best so far; and it is kept
in ``history`` for programs that want the curve.
"""

from __future__ import annotations

import logging
import os
from typing import List, Optional

logger = logging.getLogger("tessera.search")


def progress_enabled() -> bool:
    """Bars are on unless TESSERA_PROGRESS=0 (logs and history are always kept)."""
    return os.environ.get("TESSERA_PROGRESS", "1") != "0"


class SearchProgress:
    """One bar per task (a new one when the task changes or its trials start again), or with
    with `whole_model` one bar for a whole model's search (tasks interleaved by the task
    scheduler; each event's `trials` is then the budget of the whole search)."""

    def __init__(self, bar: Optional[bool] = None, whole_model: bool = False):
        self.bar_enabled = progress_enabled() if bar is None else bar
        self.history: List[dict] = []
        self._bar = None
        self._task: Optional[str] = None
        self._whole_model = whole_model

    def __call__(self, event) -> None:
        row = {"task": event.task, "trial": event.trial, "trials": event.trials,
               "elapsed_s": event.elapsed_s, "ok": event.ok, "median_ms": event.median_ms,
               "best_ms": event.best_ms, "best_gflops": event.best_gflops}
        self.history.append(row)
        best = (f"best {event.best_ms:.4f} ms" if event.best_ms > 0 else "no valid candidate yet")
        if event.best_gflops > 0:
            best += f" ({event.best_gflops:.1f} GFLOP/s)"
        logger.info("search %s: trial %d/%d, %.1f s, %s%s", event.task, event.trial, event.trials,
                    event.elapsed_s, best, "" if event.ok else " [candidate failed]")
        if self.bar_enabled:
            self._update_bar(event)

    def _update_bar(self, event) -> None:
        if self._whole_model:
            self._update_model_bar(event)
            return
        if self._bar is None or self._task != event.task or event.trial <= self._bar.n:
            self.close()
            from tqdm.auto import tqdm
            self._bar = tqdm(total=event.trials, desc=f"search {event.task}", unit="trial",
                             leave=False, dynamic_ncols=True)
            self._task = event.task
        self._bar.update(event.trial - self._bar.n)
        if event.best_gflops > 0:
            self._bar.set_postfix_str(f"{event.best_gflops:.1f} GFLOP/s", refresh=False)
        if event.trial >= event.trials:
            self.close()

    def _update_model_bar(self, event) -> None:
        if self._bar is None:
            from tqdm.auto import tqdm
            self._bar = tqdm(total=event.trials, desc="search model", unit="trial", leave=False,
                             dynamic_ncols=True)
        self._bar.update(1)
        if event.best_gflops > 0:
            self._bar.set_postfix_str(f"{event.task}: {event.best_gflops:.1f} GFLOP/s",
                                      refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._task = None


__all__ = ["SearchProgress", "progress_enabled"]
