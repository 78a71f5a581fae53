"""Search measurements on Ray: RayRunner measures a workload sent as canonical text on an actor,
the C++ Runner wrapping a Python runner drives a whole search through it, and failures (an
invalid schedule, a runner that raises, a worker that dies) fail candidates, never the search.

Needs Ray (skipped without it); starts a local Ray instance of 2 CPUs for the module."""

import json
import os
import sys

import pytest
import torch

import tessera
from tessera import _C
from tessera.runners import is_runner_spec, make_runner, native_runner

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))


@pytest.fixture(scope="module")
def ray_runner():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": PKG_ROOT}})
    try:
        yield make_runner("ray")
    finally:
        ray.shutdown()


def gemm(m=128, k=256, n=128):
    a = tessera.placeholder("A", [m, k])
    b = tessera.placeholder("B", [k, n])
    return tessera.te_ops.matmul(a, b), a, b


def test_make_runner_maps_specs():
    assert all(is_runner_spec(s) for s in ("ray", "auto", "ray://head:10001"))
    assert not is_runner_spec("workers") and not is_runner_spec(None)
    with pytest.raises(ValueError, match="runner must be"):
        make_runner("rya")

    class Own:
        def measure(self, dag_text, schedules, parallel):
            return []
    own = Own()
    assert make_runner(own) is own


def test_missing_ray_is_a_clear_error(monkeypatch):
    from tessera.runners import ray_runner
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ImportError, match="pip install ray"):
        ray_runner.RayRunner()


def test_a_raising_runner_fails_the_candidates_not_the_search():
    class Broken:
        name = "broken"

        def measure(self, dag_text, schedules, parallel):
            assert dag_text.startswith("tessera-workload-v1\n") and schedules
            raise RuntimeError("cluster on fire")

    class WrongCount:
        def measure(self, dag_text, schedules, parallel):
            return [{"ok": True, "median_ms": 1.0}]  # one result, whatever the batch
    out, a, b = gemm()
    runner = _C.python_runner(Broken())
    assert runner.name == "broken"
    req = _C.CompileRequest(name="mm_broken_runner", tune="search", trials=4,
                            runner=runner)
    k = _C.compile([out], [a, b], req)
    r = k.report
    assert r.trials == 4 and not any(c.ok for c in r.candidates)
    assert all("cluster on fire" in c.error for c in r.candidates)
    assert r.source == "rules"  # no candidate verified: the rules' schedule, still a kernel
    req = _C.CompileRequest(name="mm_count_runner", tune="search", trials=4,
                            runner=_C.python_runner(WrongCount()))
    r = _C.compile([out], [a, b], req).report
    assert r.trials == 4 and not any(c.ok for c in r.candidates)
    assert all("returned 1 results" in c.error for c in r.candidates)


def test_ray_runner_measures_canonical_text(ray_runner):
    out, a, b = gemm()
    dag_text, schedules = _C.task_text([out], [a, b], random=2, seed=1)
    bad = json.loads(schedules[0])
    bad["stages"][0]["op"] = "$99"  # names no tensor of the workload: does not build
    batch = schedules + [json.dumps(bad)]
    results = ray_runner.measure(dag_text, batch, True)
    assert len(results) == len(batch)
    for r in results[:-1]:
        assert r["ok"], r["error"]
        assert r["median_ms"] > 0 and r["build_ms"] >= 0
    assert not results[-1]["ok"] and "$99" in results[-1]["error"]
    assert ray_runner.num_workers == max(1, 2 // ray_runner.threads_per_worker)
    # Text that is not a workload fails the batch with the parser's message.
    garbage = ray_runner.measure("not a workload", schedules[:1], True)
    assert not garbage[0]["ok"] and "canonical text, line 1" in garbage[0]["error"]
    # The same workload measured here gives the same verdicts (the worker is no different).
    here = _C.measure_canonical(dag_text, batch, True)
    assert [r["ok"] for r in here] == [r["ok"] for r in results]


def test_search_end_to_end_through_ray(ray_runner):
    out, a, b = gemm()
    req = _C.CompileRequest(name="mm_ray_search", tune="search", trials=6, seed=2,
                            runner=ray_runner)  # a runner object: through native_runner
    k = _C.compile([out], [a, b], req)
    r = k.report
    assert r.tuner == "search" and r.trials == 6
    assert sum(c.ok for c in r.candidates) >= 2, [c.error for c in r.candidates]
    assert all(c.median_ms > 0 for c in r.candidates if c.ok)
    # The schedule chosen from the workers' times builds here and computes the product.
    kernel = tessera.Kernel([out], [a, b], schedule=r.schedule)
    x, y = torch.randn(128, 256), torch.randn(256, 128)
    torch.testing.assert_close(kernel(x, y), x @ y, rtol=1e-4, atol=1e-4)


def test_a_dead_worker_fails_its_batch_and_is_replaced(ray_runner):
    import ray
    out, a, b = gemm(64, 64, 64)
    dag_text, schedules = _C.task_text([out], [a, b])
    restarts = ray_runner.restarts
    ray.kill(ray_runner._actors[0])  # the idle worker the next batch goes to
    dead = ray_runner.measure(dag_text, schedules, True)
    assert not dead[0]["ok"] and "died" in dead[0]["error"]
    assert ray_runner.restarts == restarts + 1
    again = ray_runner.measure(dag_text, schedules, True)
    assert again[0]["ok"], again[0]["error"]
