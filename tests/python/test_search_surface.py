"""Search mode as users meet it: tessera.op(tune="search", trials=N), torch.compile with
options={"tune": "search", "trials": N}, the per-trial callback and log, the progress bar."""

import logging

import pytest
import torch
import torch.nn as nn

import tessera
from tessera import _C
from tessera.backend import anchor as anchor_choice
from tessera.backend import kernel_build
from tessera.search_progress import SearchProgress


def _search_compiled_matches_eager(model, x, tmp_path, **options):
    """Compiles `model` in search mode with fresh in-process caches and a fresh records database
    (no progress bars), and checks its output against eager on `x`."""
    kernel_build.clear_cache()
    anchor_choice.clear_decisions()
    torch._dynamo.reset()
    f = torch.compile(model, backend="tessera",
                      options={"tune": "search", "progress": False,
                               "records_db": str(tmp_path / "r.db"), **options})
    with torch.no_grad():
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)


def test_expression_op_tunes_by_search_and_stays_correct():
    events = []
    mm = tessera.op("C[i, j] = sum(k) A[i, k] * B[k, j]", name="mm_search_surface",
                    tune="search", trials=8, records=False, progress=events.append)
    a, b = torch.randn(128, 256), torch.randn(256, 128)
    torch.testing.assert_close(mm(a, b), a @ b, rtol=1e-4, atol=1e-4)
    report = mm.kernel(a, b).report
    assert report.tuner == "search" and report.trials == 8
    # One event per measurement, in order, and the best so far never gets worse.
    assert [e.trial for e in events] == list(range(1, 9))
    assert all(e.trials == 8 and e.task == "mm_search_surface" for e in events)
    bests = [e.best_ms for e in events if e.best_ms > 0]
    assert bests and all(x >= y for x, y in zip(bests, bests[1:]))
    assert events[-1].best_gflops == pytest.approx(2 * 128 * 256 * 128 / events[-1].best_ms / 1e6)


def test_expression_op_rejects_bad_tuning_arguments():
    with pytest.raises(ValueError, match="tune must be"):
        tessera.op("C[i] = A[i] + 1", name="bad_tune_op", tune="fast")
    with pytest.raises(ValueError, match="trials"):
        tessera.op("C[i] = A[i] + 1", name="bad_trials_op", tune="search", trials=-1)


def test_progress_logs_every_trial_and_keeps_the_history(caplog):
    progress = SearchProgress(bar=True)
    a = tessera.placeholder("A", [128, 256])
    b = tessera.placeholder("B", [256, 128])
    out = tessera.te_ops.matmul(a, b)
    with caplog.at_level(logging.INFO, logger="tessera.search"):
        k = tessera.Kernel([out], [a, b], tune="search", trials=6, progress=progress,
                           name="mm_logged")
    progress.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "tessera.search"]
    assert len(lines) == 6 and lines[-1].startswith("search mm_logged: trial 6/6")
    assert [h["trial"] for h in progress.history] == list(range(1, 7))
    x, y = torch.randn(128, 256), torch.randn(256, 128)
    torch.testing.assert_close(k(x, y), x @ y, rtol=1e-4, atol=1e-4)


def test_a_failing_progress_callback_does_not_stop_the_search():
    def broken(event):
        raise RuntimeError("boom")
    a = tessera.placeholder("A", [128, 256])
    b = tessera.placeholder("B", [256, 128])
    out = tessera.te_ops.matmul(a, b)
    with pytest.warns(RuntimeWarning, match="on_trial callback failed"):
        k = tessera.Kernel([out], [a, b], tune="search", trials=4, progress=broken)
    assert k.report.trials == 4


def test_torch_compile_search_options_reach_the_compile_call(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU()).eval()
    x = torch.randn(128, 256)
    _search_compiled_matches_eager(model, x, tmp_path, trials=6)
    tasks = [t for t in kernel_build.search_history[-1]["tasks"] if t["status"] == "search"]
    assert len(tasks) == 1 and tasks[0]["report"].trials == 6
    # The kernel is built with the searched choice (the rules' schedule when it was not beaten).
    chosen = tasks[0]["schedule"].stages_text()
    assert chosen in [k.report.schedule.stages_text() for k in kernel_build.cached_kernels()]
    with pytest.raises(ValueError, match="progress"):
        tessera.backend.parse_options(None, {"progress": "yes"})
    with pytest.raises(ValueError, match="runner"):
        tessera.backend.parse_options(None, {"runner": "cluster9"})
    assert tessera.backend.parse_options(None, {"runner": "ray://head:10001"}).runner == \
        "ray://head:10001"


@pytest.mark.parametrize("scheduler", ["gradient", "round-robin"])
def test_a_graph_searches_its_kernels_together_under_the_task_scheduler(tmp_path, scheduler):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 128)).eval()
    x = torch.randn(128, 256)
    before = len(kernel_build.search_history)
    _search_compiled_matches_eager(model, x, tmp_path, trials=8, scheduler=scheduler)
    assert len(kernel_build.search_history) == before + 1
    result = kernel_build.search_history[-1]
    searched = [t for t in result["tasks"] if t["status"] == "search"]
    assert len(searched) == 2  # the two linear layers (their epilogues fused)
    # Every round went to one searched task, and the budget (8 per kernel) was spent in rounds.
    assert len(result["order"]) == len(result["trials_after"]) == len(result["objective"])
    assert result["trials_after"][-1] == sum(t["report"].trials for t in searched) == 16
    searched_ids = [i for i, t in enumerate(result["tasks"]) if t["status"] == "search"]
    assert set(result["order"]) == set(searched_ids)
    if scheduler == "round-robin":
        assert result["order"] == [searched_ids[i % 2] for i in range(len(result["order"]))]
    # Each searched kernel's choice was stored for later processes.
    assert _C.RecordsDB(str(tmp_path / "r.db")).count() >= 2


def test_a_failing_graph_search_costs_the_tuning_not_the_graph(tmp_path, monkeypatch, caplog):
    from tessera.backend import search_graph

    def broken(*args, **kwargs):
        raise RuntimeError("cluster unreachable")
    monkeypatch.setattr(search_graph, "search_specs", broken)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU()).eval()
    x = torch.randn(128, 256)
    with caplog.at_level(logging.WARNING, logger="tessera"):
        _search_compiled_matches_eager(model, x, tmp_path, trials=4)
    assert any("cluster unreachable" in r.getMessage() for r in caplog.records)
    # The kernel was still compiled by Tessera (searched on its own), not left to eager.
    assert any(k.report.tuner == "search" for k in kernel_build.cached_kernels())


def test_repeated_kernels_of_a_graph_are_one_weighted_task(tmp_path):
    # Two identical Linear+ReLU layers: one workload, searched once with weight 2.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU()).eval()
    x = torch.randn(128, 256)
    _search_compiled_matches_eager(model, x, tmp_path, trials=4)
    weights = sorted(t["weight"] for t in kernel_build.search_history[-1]["tasks"])
    assert 2.0 in weights, weights


def test_tune_tasks_reports_reuse_and_the_reuse_option_is_validated():
    import tessera
    from tessera import _C
    from tessera.backend.options import parse_options
    assert parse_options(None, {"reuse": False}).reuse is False
    with pytest.raises(ValueError):
        parse_options(None, {"reuse": "yes"})
    a = tessera.placeholder("A", [8, 8])
    b = tessera.placeholder("B", [8, 8])
    out = tessera.te_ops.matmul(a, b)
    r = _C.tune_tasks([([out], [a, b], "tiny", 1.0, [1])], trials_per_task=8, reuse=True)
    assert r["reuse_trials"] == 0
    (task,) = r["tasks"]
    assert task["status"] == "skipped" and task["reused_from"] == -1


def test_tune_tasks_names_the_reuse_selection_and_rejects_unknown_ones():
    import tessera
    from tessera import _C
    a = tessera.placeholder("A", [8, 8])
    b = tessera.placeholder("B", [8, 8])
    out = tessera.te_ops.matmul(a, b)
    task = ([out], [a, b], "tiny", 1.0, [])
    for method in ("greedy", "exact", "arborescence", "topk"):
        r = _C.tune_tasks([task], trials_per_task=8, reuse=True, reuse_selection=method)
        assert r["tasks"][0]["status"] == "skipped"
    with pytest.raises(Exception, match="reuse selection must be"):
        _C.tune_tasks([task], trials_per_task=8, reuse=True, reuse_selection="steiner")


def test_search_checkpoints_choose_among_their_first_measurements():
    """_C.search_task's checkpoint n is the schedule chosen from the first n measurements (or the
    rules'); at or past the budget it is the search's own choice. Every one computes right."""
    a = tessera.placeholder("A", [96, 128])
    b = tessera.placeholder("B", [128, 64])
    out = tessera.te_ops.matmul(a, b)
    r = _C.search_task([out], [a, b], trials=12, seed=3, name="mm_checkpoints",
                       checkpoints=[0, 5, 12, 50])
    trials = r["trials"]
    assert len(trials) == 12
    rules = tessera.Kernel([out], [a, b], name="mm_checkpoints_rules").schedule.stages_text()
    assert r["checkpoints"][0].stages_text() == rules and r["checkpoints"][0].tuner == "default"
    first5 = {t["schedule"].stages_text() for t in trials[:5] if t["ok"]}
    assert r["checkpoints"][5].stages_text() in first5 | {rules}
    final = r["schedule"].stages_text()
    assert r["checkpoints"][12].stages_text() == final
    assert r["checkpoints"][50].stages_text() == final
    x, y = torch.randn(96, 128), torch.randn(128, 64)
    for n, s in r["checkpoints"].items():
        k = tessera.Kernel([out], [a, b], schedule=s, name=f"mm_checkpoint_{n}")
        torch.testing.assert_close(k(x, y), x @ y, rtol=1e-4, atol=1e-4)


def test_search_task_measures_weights_prepacked_where_told():
    """_C.search_task(constant_inputs=...) measures candidates reading those inputs prepacked
    where they pack them, as a compiled graph's search does with its weights; a position out of
    range is an error, not a silent search without them."""
    a = tessera.placeholder("A", [96, 128])
    b = tessera.placeholder("B", [128, 64])
    out = tessera.te_ops.matmul(a, b)
    weights = _C.search_task([out], [a, b], trials=16, seed=1, name="mm_weights",
                             constant_inputs=[1])
    plain = _C.search_task([out], [a, b], trials=16, seed=1, name="mm_plain")
    assert any(c.ok and c.prepacked > 0 for c in weights["report"].candidates)
    assert all(c.prepacked == 0 for c in plain["report"].candidates)
    with pytest.raises(Exception, match="out of range"):
        _C.search_task([out], [a, b], trials=4, name="mm_bad", constant_inputs=[2])
