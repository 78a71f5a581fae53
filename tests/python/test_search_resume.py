"""Search mode survives being killed: every measurement goes to the records database as it
happens, and a search started again on the same workload and database resumes from them,
measuring nothing twice and stopping at the same budget. Runs in subprocesses (the first one is
killed with SIGKILL); its own temporary directory, never ~/.cache."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import tessera
from tessera import _C
from tessera import te_ops as ops

TRIALS = 48
PER_ROUND = 16

# One search of a 128x256x128 GEMM (enough summation work for the policy to tune it), measured
# in rounds of PER_ROUND so that the log grows while the search runs.
SEARCH = textwrap.dedent(f"""
    import sys
    import tessera
    from tessera import _C
    from tessera import te_ops as ops
    a = tessera.placeholder("A", [128, 256])
    b = tessera.placeholder("B", [256, 128])
    db = _C.RecordsDB(sys.argv[1])
    req = _C.CompileRequest(name="gemm", tune="search", threads="parallel", records=db,
                            trials={TRIALS})
    req.search_per_round = {PER_ROUND}
    k = _C.compile([ops.matmul(a, b)], [a, b], req)
    print("REPORT", k.report.source, k.report.trials, k.report.note, flush=True)
""")


def start_search(db_path):
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", SEARCH, str(db_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def query(db_path, sql):
    """One value from the database file, 0 while the table does not exist yet."""
    if not os.path.exists(db_path):
        return 0
    con = sqlite3.connect(db_path, timeout=5)
    try:
        return con.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # no such table yet
        return 0
    finally:
        con.close()


def test_killed_search_resumes_without_measuring_again(tmp_path):
    db_path = tmp_path / "records.db"
    first = start_search(db_path)
    deadline = time.monotonic() + 50
    while query(db_path, "SELECT count(*) FROM measurements") < PER_ROUND:
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first round never reached the database"
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    logged_before = query(db_path, "SELECT count(*) FROM measurements")
    assert PER_ROUND <= logged_before < TRIALS, "killed mid-search"
    assert query(db_path, "SELECT count(*) FROM records") == 0, "no record of an unfinished search"

    second = start_search(db_path)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    report = next(line for line in out.splitlines() if line.startswith("REPORT"))
    assert f"resumed from {logged_before}" in report, report
    assert f" {TRIALS} " in report, report  # the report counts the restored trials

    total = query(db_path, "SELECT count(*) FROM measurements")
    distinct = query(db_path, "SELECT count(DISTINCT schedule) FROM measurements")
    assert total == TRIALS, "the budget counts the earlier process's measurements"
    assert distinct == total, "no schedule was measured twice"
    assert query(db_path, "SELECT count(*) FROM records WHERE tuner IN ('search', 'default')") == 1

    # The final record serves a later compile; its kernel matches torch.
    a = tessera.placeholder("A", [128, 256])
    b = tessera.placeholder("B", [256, 128])
    out_t = ops.matmul(a, b)
    db = _C.RecordsDB(str(db_path))
    log = db.measurements([out_t], [a, b], tuner="search")
    assert len(log) == TRIALS and [m["trial"] for m in log] == list(range(TRIALS))
    k = tessera.Kernel([out_t], [a, b], tune="search", records=db, trials=TRIALS)
    assert k.report.source == "records", k.report.note
    x, w = torch.randn(128, 256), torch.randn(256, 128)
    torch.testing.assert_close(k(x, w), x @ w, rtol=1e-4, atol=1e-4)
