"""Tuning-records database (tessera._C.RecordsDB): keys, reuse across names, several processes,
damaged and locked files. Every test uses its own temporary directory, never ~/.cache."""

import glob
import os
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

pytestmark = pytest.mark.skipif(not hasattr(_C, "RecordsDB"),
                                reason="bind_db is not registered in csrc/python/module.cc yet")

SCHEDULE = '{"stages":[],"tuner":"test"}'


def matmul_relu(prefix, m, n, k):
    a = tessera.placeholder(prefix + "A", [m, k])
    b = tessera.placeholder(prefix + "B", [k, n])
    return [ops.relu(ops.matmul(a, b))], [a, b]


def run_python(code, *args, wait=True):
    """Runs `code` in a fresh interpreter that imports the same tessera package."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"child failed:\n{out}\n{err}"
    return out


def test_round_trip_and_reopen(tmp_path):
    path = str(tmp_path / "sub" / "records.db")
    outs, ins = matmul_relu("", 32, 24, 16)
    db = _C.RecordsDB(path)
    assert db.path == path and db.mode == "disk"
    assert db.best(outs, ins) is None
    assert db.put(outs, ins, SCHEDULE, "search", 1.25, 40.0, 123) is True
    del db
    again = _C.RecordsDB(path)
    rec = again.best(outs, ins)
    assert rec is not None
    assert rec["tuner"] == "search"
    assert rec["median_ms"] == 1.25 and rec["gflops"] == 40.0 and rec["trials"] == 123
    assert rec["target"] == _C.host_target()
    assert rec["version"] == tessera.__version__
    assert rec["shapes"] == "float32[32,16];float32[16,24]->float32[32,24]"
    assert again.count() == 1 and len(again.all()) == 1


def test_best_picks_the_fastest(tmp_path):
    db = _C.RecordsDB(str(tmp_path / "r.db"))
    outs, ins = matmul_relu("", 16, 16, 16)
    db.put(outs, ins, SCHEDULE, "unmeasured")
    for ms, name in [(3.0, "slow"), (1.0, "fast"), (2.0, "middle")]:
        db.put(outs, ins, SCHEDULE, name, ms)
    db.put(outs, ins, SCHEDULE, "other-target", 0.1, target="cpu:elsewhere:threads=64")
    assert db.best(outs, ins)["tuner"] == "fast"
    assert db.best(outs, ins, target="cpu:elsewhere:threads=64")["tuner"] == "other-target"
    other_outs, other_ins = matmul_relu("", 16, 16, 8)  # another shape: no record
    assert db.best(other_outs, other_ins) is None


def test_keys_of_renamed_and_reshaped_workloads():
    k1 = _C.workload_key(*matmul_relu("x_", 64, 32, 16))
    k2 = _C.workload_key(*matmul_relu("y_", 64, 32, 16))
    k3 = _C.workload_key(*matmul_relu("x_", 64, 32, 17))
    assert k1.same_workload(k2) and k1.hash == k2.hash and k1.canonical == k2.canonical
    assert not k1.same_workload(k3) and k1.shapes != k3.shapes
    assert "x_" not in k1.canonical


def test_renamed_workload_reuses_a_record_under_its_own_names(tmp_path):
    db = _C.RecordsDB(str(tmp_path / "r.db"))
    first = matmul_relu("first_", 40, 48, 24)
    kernel = tessera.Kernel(*first)
    assert db.put(*first, kernel.schedule.dump(), "default", 0.05)
    second_outs, second_ins = matmul_relu("second_", 40, 48, 24)
    rec = db.best(second_outs, second_ins)
    assert rec is not None and "first_" not in rec["schedule_json"]
    reused = tessera.Kernel(second_outs, second_ins, schedule=rec["schedule_json"])
    a, b = torch.randn(40, 24), torch.randn(24, 48)
    torch.testing.assert_close(reused(a, b), torch.relu(a @ b), rtol=1e-4, atol=1e-4)


def test_forced_hash_collision_is_a_miss(tmp_path):
    db = _C.RecordsDB(str(tmp_path / "r.db"))
    key = _C.workload_key(*matmul_relu("", 8, 8, 8))
    impostor = _C.workload_key(*matmul_relu("", 8, 8, 8))
    impostor.canonical = impostor.canonical + "# something else\n"
    assert impostor.hash == key.hash and impostor.shapes == key.shapes
    assert db.put_by_key(key, SCHEDULE, "real", 1.0)
    assert db.best_by_key(impostor) is None
    assert db.stats["collisions"] == 1
    assert db.best_by_key(key)["tuner"] == "real"


WRITER = """
import os, sys, time
import tessera
from tessera import _C, te_ops as ops
path, proc, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.005)
db = _C.RecordsDB(path, busy_timeout_ms=30000)
ok = db.mode == "disk"
for i in range(count):
    n = 8 + i if i < 5 else 100 + proc * count + i   # the first five are shared workloads
    a, b = tessera.placeholder("A%d" % proc, [8, 4]), tessera.placeholder("B", [4, n])
    outs = [ops.relu(ops.matmul(a, b))]
    ok &= db.put(outs, [a, b], '{"stages":[]}', "proc%d" % proc, 1.0 + proc + 0.01 * i)
    ok &= db.best(outs, [a, b]) is not None
sys.exit(0 if ok and db.stats["put_deferred"] == 0 else 1)
"""


def test_four_processes_write_at_once(tmp_path):
    path, go = str(tmp_path / "records.db"), str(tmp_path / "go")
    procs = [run_python(WRITER, path, p, 25, go, wait=False) for p in range(4)]
    time.sleep(0.5)
    open(go, "w").close()  # all writers start together (after their imports)
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    db = _C.RecordsDB(path)
    assert db.count() == 100
    for p in range(4):
        assert len(db.all(tuner="proc%d" % p)) == 25
    for i in range(5):  # shared workloads: process 0 measured fastest
        a, b = tessera.placeholder("A", [8, 4]), tessera.placeholder("B", [4, 8 + i])
        rec = db.best([ops.relu(ops.matmul(a, b))], [a, b])
        assert rec["tuner"] == "proc0" and rec["median_ms"] == pytest.approx(1.0 + 0.01 * i)


def test_a_second_process_reads_what_the_first_wrote(tmp_path):
    path = str(tmp_path / "records.db")
    run_python("""
        import sys, tessera
        from tessera import _C, te_ops as ops
        a, b = tessera.placeholder("W", [20, 40]), tessera.placeholder("V", [40, 30])
        assert _C.RecordsDB(sys.argv[1]).put([ops.relu(ops.matmul(a, b))], [a, b],
                                             '{"stages":[]}', "child", 0.75)
        """, path)
    rec = _C.RecordsDB(path).best(*matmul_relu("", 20, 30, 40))
    assert rec is not None and rec["tuner"] == "child" and rec["median_ms"] == 0.75


def test_garbage_file_is_moved_aside(tmp_path, capfd):
    path = tmp_path / "records.db"
    garbage = b"definitely not sqlite\n" * 1000
    path.write_bytes(garbage)
    db = _C.RecordsDB(str(path))
    err = capfd.readouterr().err
    assert "damaged" in err and "moved it to" in err, err
    assert db.mode == "disk" and db.stats["repairs"] == 1
    moved = glob.glob(str(path) + ".corrupt-*")
    assert len(moved) == 1 and open(moved[0], "rb").read() == garbage
    outs, ins = matmul_relu("", 4, 4, 4)
    assert db.put(outs, ins, SCHEDULE, "after", 1.0)
    assert db.best(outs, ins)["tuner"] == "after"


def test_truncated_file_is_moved_aside(tmp_path, capfd):
    path = str(tmp_path / "records.db")
    db = _C.RecordsDB(path)
    for n in range(200):
        db.put(*matmul_relu("", 4, 4 + n, 4), "x" * 600, "fill", 1.0)
    del db  # the last connection checkpoints the WAL into the file
    size = os.path.getsize(path)
    os.truncate(path, size // 2)
    db = _C.RecordsDB(path)
    assert "damaged" in capfd.readouterr().err
    assert db.mode == "disk" and db.count() == 0


def test_locked_file_never_raises(tmp_path, capfd):
    path = str(tmp_path / "records.db")
    db = _C.RecordsDB(path, busy_timeout_ms=100, retry_after_ms=50)
    first, second = matmul_relu("", 9, 9, 9), matmul_relu("", 9, 9, 10)
    assert db.put(*first, SCHEDULE, "first", 1.0)

    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another writer holds the file
    assert db.put(*second, SCHEDULE, "second", 2.0) is False
    assert "locked by another process" in capfd.readouterr().err
    assert db.best(*first)["tuner"] == "first"    # WAL readers are not blocked
    assert db.best(*second)["tuner"] == "second"  # held in memory meanwhile
    other.execute("COMMIT")
    other.close()
    time.sleep(0.1)
    assert db.flush() is True
    assert _C.RecordsDB(path).count() == 2


def test_fully_locked_file_misses_then_recovers(tmp_path, capfd):
    path = str(tmp_path / "records.db")
    outs, ins = matmul_relu("", 11, 11, 11)
    assert _C.RecordsDB(path).put(outs, ins, SCHEDULE, "stored", 1.0)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("INSERT INTO meta(key, value) VALUES('holder', 'x')")
    db = _C.RecordsDB(path, busy_timeout_ms=100, retry_after_ms=50)
    assert db.best(outs, ins) is None  # a miss, not an exception
    assert "locked by another process" in capfd.readouterr().err
    other.execute("COMMIT")
    other.close()
    time.sleep(0.1)
    assert db.best(outs, ins)["tuner"] == "stored"


def test_unusable_location_falls_back_to_memory(tmp_path, capfd):
    (tmp_path / "plainfile").write_text("x")
    db = _C.RecordsDB(str(tmp_path / "plainfile" / "records.db"))
    assert db.mode == "memory"
    assert "kept in memory" in capfd.readouterr().err
    outs, ins = matmul_relu("", 5, 5, 5)
    assert db.put(outs, ins, SCHEDULE, "mem", 1.0) is False
    assert db.best(outs, ins)["tuner"] == "mem"


def test_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_RECORDS_DB", str(tmp_path / "env.db"))
    assert _C.records_default_path() == str(tmp_path / "env.db")
    assert _C.RecordsDB().path == str(tmp_path / "env.db")
    monkeypatch.delenv("TESSERA_RECORDS_DB")
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "cache"))
    assert _C.records_default_path() == str(tmp_path / "cache" / "records.db")
