"""benchmarks/search.py's per-seed entries, and its scheduler comparison: the best program so far
of every kernel after each scheduler round, read back from the kernels' reports, and the trials
share computed from it."""

import os
import sys
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import search as bench  # noqa: E402


def cand(name, ms, ok=True):
    return SimpleNamespace(ok=ok, median_ms=ms, schedule=SimpleNamespace(stages_text=lambda: name))


def task(cands, status="search"):
    return {"status": status, "report": SimpleNamespace(candidates=cands)}


def test_best_so_far_follows_each_round_and_ignores_failed_candidates():
    # Task 0 measures 2 then 1 candidates, task 1 measures 2 (the first failed); task 2 is skipped.
    result = {"tasks": [task([cand("a", 3.0), cand("b", 2.0), cand("c", 2.5)]),
                        task([cand("x", -1, ok=False), cand("y", 4.0)]),
                        task([], status="skipped")],
              "order": [0, 1, 0], "trials_after": [2, 4, 5]}
    curves = bench.best_so_far_curves(result)
    assert curves == [[1, -1, -1], [1, 1, -1], [1, 1, -1]]
    specs = [(None, 2.0), (None, 1.0), (None, 5.0)]
    run = {"result": result, "curves": curves}
    # The skipped kernel does not count; the objective is infinite until every scheduled one ran.
    assert bench.objective_of(specs, run, lambda i, c: c.median_ms) == [float("inf"), 8.0, 8.0]
    retimed = {"b": 1.0, "y": 5.0}
    assert bench.objective_of(specs, run, lambda i, c: retimed[c.schedule.stages_text()]) == [
        float("inf"), 7.0, 7.0]


def test_trials_share_is_the_first_round_at_or_below_the_target():
    gradient = {"trials_after": [10, 20, 30, 40]}
    assert bench.trials_to_reach(gradient, [9.0, 8.0, 7.0, 7.5], 7.0, 40) == 0.75
    assert bench.trials_to_reach(gradient, [9.0, 8.0, 7.6, 7.5], 7.0, 40) is None
    assert bench.trials_to_reach(gradient, [9.0, 8.0, 7.0, 7.5], float("inf"), 40) is None


def test_of_seed_keeps_one_seeds_entries_by_kernel():
    gflops = {"default": 1.0, "search_64_s1": 2.0, "construct_s1": 3.0, "search_64_s11": 4.0,
              "full_s0": 5.0, "torch": 6.0}
    assert bench.of_seed(gflops, 1) == {"search_64": 2.0, "construct": 3.0}
    assert bench.of_seed(gflops, 11) == {"search_64": 4.0}
    assert bench.of_seed(gflops, 0) == {"full": 5.0}
