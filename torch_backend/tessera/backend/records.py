"""The tuning-records database as the torch.compile backend uses it.

One SQLite file, shared by every process of the user (csrc/db: concurrency, damaged and locked
files), holds two kinds of records:

  schedules  a tuned kernel's schedule (construct mode today), filed under the kernel's workload
             key: structural hash of its tensor-expression DAG + shapes + target, confirmed by
             the DAG's canonical text. The C++ compile call reads and writes these itself
             (kernel_build.py hands it the open database): a later process compiling the same
             kernel (same model, or another model with the same operator and shapes) builds it
             with the stored schedule and skips tuning.
  decisions  a measured choice (anchor.py: Tessera's fused kernel, ATen's matmul/conv plus a
             Tessera kernel, or ATen only; graph_guard.py: a compiled graph or eager) with the
             times that decided it, filed under a key derived from the workload (keys.py). A
             later process skips the measurement.

Where: options.records_db (a path; False turns the database off), else $TESSERA_RECORDS_DB (the
values off/0/false/no/none turn it off), else ~/.cache/tessera/records.db. Each path is opened
once per process.

Nothing here raises into the compile path: the database degrades to "no record" (a damaged file
is moved aside and started afresh, a locked or read-only one keeps new records in memory), and
every such event is logged once as a warning on the "tessera" logger.

counters() tells what this process did: tuning runs and measurements, and how many of them the
records saved (tests and benchmarks read it; see test_backend_records.py).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from typing import Any, Dict, Optional, Tuple

from .. import _C
from .log import log_once

ENV_PATH = "TESSERA_RECORDS_DB"
_OFF_VALUES = ("off", "0", "false", "no", "none")
DECISION_TUNER = "anchor"

# ---- counters ----------------------------------------------------------------------------------

_COUNTER_NAMES = (
    "schedule_lookups",   # tuned kernels looked up in the database
    "schedule_hits",      # ... and found: their tuning was skipped
    "tuned",              # tuning runs (construct mode calls)
    "tune_s",             # seconds spent in them
    "schedules_stored",   # tuned schedules written (or held in memory for this process)
    "decision_lookups",   # partition choices looked up
    "decision_hits",      # ... and found: their measurement was skipped
    "measured",           # choices measured (anchor.measure calls, whole-graph checks)
    "decisions_stored",
)
_counters: Dict[str, float] = {k: 0 for k in _COUNTER_NAMES}
_counter_lock = threading.Lock()


def count(name: str, amount: float = 1) -> None:
    with _counter_lock:
        _counters[name] += amount


def counters() -> Dict[str, float]:
    """A snapshot of this process's tuning / measurement / records counters."""
    with _counter_lock:
        return dict(_counters)


def reset_counters() -> None:
    with _counter_lock:
        for k in _counters:
            _counters[k] = 0


# ---- opening -----------------------------------------------------------------------------------

class Records:
    """One open database file (shared by every compile of this process that names it)."""

    def __init__(self, path: str):
        self.path = path
        # Warnings come back through take_warnings() and go to the "tessera" logger instead of
        # straight to stderr, so programs can route or silence them like the backend's others.
        self.db = _C.RecordsDB(path, warn_to_stderr=False)
        self.log_warnings()

    @property
    def mode(self) -> str:
        return self.db.mode  # disk | read-only | memory

    def log_warnings(self) -> None:
        """Logs what the database said since the last call (the compile call uses the database
        directly; its warnings come out here)."""
        for w in self.db.take_warnings():
            log_once(f"records-warning:{w}", f"tessera: warning: {w}", level=logging.WARNING)

    def _call(self, what: str, fn):
        """fn(), logging what the database said. RecordsDB handles every database
        problem itself; this catches the unexpected rest (a _C built from other sources, a
        bug), which costs the records, never the compile: None."""
        try:
            return fn()
        except Exception as e:
            log_once(f"records-error:{what}:{type(e).__name__}",
                     f"tessera: warning: records database {self.path}: cannot {what} "
                     f"({type(e).__name__}: {e}); going on without", level=logging.WARNING)
            return None
        finally:
            try:
                self.log_warnings()
            except Exception:
                pass

    # -- decisions (keys.decision_key / keys.graph_key)

    def decision(self, key) -> Optional[Tuple[str, Dict[str, float]]]:
        """The stored (choice, times) of the decision filed under `key`, or None."""
        count("decision_lookups")
        rec = self._call("look up a decision", lambda: self.db.best_by_key(key))
        if rec is None or rec["tuner"] != DECISION_TUNER:
            return None
        try:
            value = json.loads(rec["schedule_json"])
            choice, times = value["choice"], {k: float(v) for k, v in value["times_ms"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return None  # not written by this code: measure again
        count("decision_hits")
        return choice, times

    def store_decision(self, key, choice: str, times: Dict[str, float],
                       chosen_ms: Optional[float]) -> bool:
        value = json.dumps({"choice": choice, "times_ms": times}, sort_keys=True)
        written = self._call("store a decision", lambda: self.db.put_by_key(
            key, value, DECISION_TUNER, chosen_ms, None, len(times)))
        count("decisions_stored")
        return bool(written)

    def flush(self) -> None:
        self._call("write held records", lambda: self.db.flush())


_open: Dict[str, Records] = {}
_open_lock = threading.Lock()


def resolve_path(option: Any = None) -> Optional[str]:
    """The database file for an options.records_db value; None when the database is off."""
    if option is False:
        return None
    if isinstance(option, str):
        return option
    env = os.environ.get(ENV_PATH, "")
    if env.strip().lower() in _OFF_VALUES:
        return None
    if env:
        return env
    path = _C.records_default_path()
    if not path:
        log_once("records-no-location", "tessera: no records database location (neither "
                 f"${ENV_PATH} nor $HOME is set): tuning results are not kept",
                 level=logging.WARNING)
        return None
    return path


def open_records(option: Any = None) -> Optional[Records]:
    """The Records for an options.records_db value (opened on first use), or None when off."""
    path = resolve_path(option)
    if path is None:
        return None
    with _open_lock:
        rec = _open.get(path)
        if rec is None:
            try:
                rec = Records(path)
            except Exception as e:  # see Records._call: never the compile's problem
                log_once(f"records-open:{path}", f"tessera: warning: records database {path}: "
                         f"cannot open it ({type(e).__name__}: {e}); tuning results are not "
                         "kept", level=logging.WARNING)
                return None
            _open[path] = rec
    return rec


def records_for(options: Any) -> Optional[Records]:
    """The Records of backend Options (None: the defaults)."""
    return open_records(getattr(options, "records_db", None))


def close_all() -> None:
    """Writes what locks held back and forgets the open files (tests; also run at exit)."""
    with _open_lock:
        opened = list(_open.values())
        _open.clear()
    for rec in opened:
        try:
            rec.flush()
        except Exception:  # exit path: never raise
            pass


atexit.register(close_all)

__all__ = ["Records", "open_records", "records_for", "resolve_path", "counters",
           "reset_counters", "close_all"]
