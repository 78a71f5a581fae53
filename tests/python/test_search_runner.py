"""Search mode measures candidates in worker processes (tune/worker_runner.h): a candidate that
crashes or aborts fails as a candidate, with its error in the report, and this process - the
user's Python session - survives with a correct kernel. TESSERA_FAULT_INJECT is read by the
worker, so setting it here reaches it."""

import os

import pytest
import torch

import tessera
from tessera import _C

M, K, N = 128, 256, 128  # a kernel search mode tunes (every kernel asked for is tuned)


def _search_gemm(name, trials=16, runner=None):
    a = tessera.placeholder("A", [M, K])
    b = tessera.placeholder("B", [K, N])
    out = tessera.te_ops.matmul(a, b)
    request = _C.CompileRequest(name=name, tune="search", threads="parallel", trials=trials,
                                runner=runner)
    return _C.compile([out], [a, b], request)


def _assert_matches_torch(kernel):
    torch.manual_seed(0)
    x, y = torch.randn(M, K), torch.randn(K, N)
    got = torch.empty(M, N)
    kernel.run([x.data_ptr(), y.data_ptr(), got.data_ptr()], [])
    torch.testing.assert_close(got, x @ y, rtol=1e-4, atol=1e-4)


@pytest.fixture
def fault(monkeypatch):
    def inject(spec):
        monkeypatch.setenv("TESSERA_FAULT_INJECT", spec)
    return inject


@pytest.mark.parametrize("kind, signal", [("segfault", "SIGSEGV"), ("abort", "SIGABRT")])
def test_a_crashing_candidate_fails_alone_and_the_session_survives(fault, kind, signal):
    fault(f"{kind}:3")  # the candidate at index 3 of every measured batch
    kernel = _search_gemm(f"mm_{kind}")
    report = kernel.report
    assert report.tuner == "search" and report.trials == 16
    crashed = [c for c in report.candidates if not c.ok]
    assert crashed, "the injected fault should have failed a candidate"
    for c in crashed:
        assert f"worker crashed with {signal} while running candidate" in c.error, c.error
    assert sum(c.ok for c in report.candidates) >= len(report.candidates) - len(crashed)
    assert any(c.ok for c in report.candidates)
    _assert_matches_torch(kernel)


def test_the_runner_keyword_chooses_where_candidates_run():
    assert _C.tuning_policy().search_runner == "workers"
    assert _C.CompileRequest().runner is None
    assert _C.CompileRequest(runner="in-process").runner == "in-process"
    assert _C.CompileRequest(runner="workers").runner == "workers"
    with pytest.raises(ValueError, match="runner must be"):
        _C.CompileRequest(runner="cluster9")
    kernel = _search_gemm("mm_in_process", trials=8, runner="in-process")
    assert kernel.report.trials == 8 and any(c.ok for c in kernel.report.candidates)
    _assert_matches_torch(kernel)


def test_a_malformed_fault_spec_is_a_clear_candidate_error(fault):
    fault("melt:1")
    kernel = _search_gemm("mm_bad_fault", trials=4)
    assert kernel.report.source == "rules" and kernel.report.trials == 4
    assert all("unknown fault 'melt'" in c.error for c in kernel.report.candidates)
    _assert_matches_torch(kernel)
    assert os.environ["TESSERA_FAULT_INJECT"] == "melt:1"  # read in the worker, not consumed
