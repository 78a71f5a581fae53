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
    kernel_build.clear_cache()
    anchor_choice.clear_decisions()
    torch._dynamo.reset()
    f = torch.compile(model, backend="tessera",
                      options={"tune": "search", "trials": 6, "progress": False,
                               "records_db": str(tmp_path / "r.db")})
    with torch.no_grad():
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
    searched = [k.report for k in kernel_build.cached_kernels() if k.report.tuner == "search"]
    assert searched and all(r.trials == 6 for r in searched)
    with pytest.raises(ValueError, match="progress"):
        tessera.backend.parse_options(None, {"progress": "yes"})
