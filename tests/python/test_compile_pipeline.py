"""The compile pipeline as a model sees it: every Tessera kernel goes through the one compile
call (_C.compile), each is planned once and JIT-compiled once (a tuned winner is the kernel that
was measured), and a second compile of the same model in this process compiles nothing."""

import torch
import torch.nn as nn

import tessera
from tessera import _C
from tessera.backend import anchor as anchor_choice
from tessera.backend import kernel_build


def _delta(before, after):
    return {k: after[k] - before[k] for k in after}


def _jit_compiles_of(kernel) -> int:
    """JIT compiles the kernel's report accounts for: one per candidate built plus the reference
    (the rules' schedule, reused as a candidate) when tuned, else the kernel itself; each with
    one more per weight it reads prepacked (its pack kernel)."""
    report = kernel.report
    if not report.tuner:
        return 1 + len(kernel.prepacks)
    reference = [c for c in report.candidates if c.build_ms == 0]
    return (1 + (reference[0].prepacked if reference else 0)
            + sum(1 + c.prepacked for c in report.candidates if c.build_ms > 0))


def test_each_kernel_of_a_model_is_jit_compiled_exactly_once(tmp_path):
    torch.manual_seed(0)
    # 128x256x256: enough work for construct mode to find a faster schedule.
    model = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 96),
                          nn.LayerNorm(96)).eval()
    x = torch.randn(128, 256)
    kernel_build.clear_cache()
    anchor_choice.clear_decisions()
    options = {"records_db": str(tmp_path / "records.db")}
    before = _C.compile_counters()
    torch._dynamo.reset()
    f = torch.compile(model, backend="tessera", options=options)
    with torch.no_grad():
        f(x)
        torch.testing.assert_close(f(x), model(x), rtol=1e-4, atol=1e-4)
    d = _delta(before, _C.compile_counters())
    kernels = kernel_build.cached_kernels()
    reports = [k.report for k in kernels]
    assert reports and d["compile_calls"] == len(reports)
    assert any(r.tuner for r in reports), "the model was meant to tune a kernel"
    assert any(k.prepacks for k in kernels), "the model was meant to prepack a weight"
    assert d["stage_plans"] == d["compile_calls"]  # one stage plan per kernel
    assert d["jit_compiles"] == d["lowerings"] == sum(_jit_compiles_of(k) for k in kernels)
    for r in reports:
        assert sum(c.chosen for c in r.candidates) == (1 if r.tuner else 0)

    # The same model compiled again in this process: kernels and choices come from the caches.
    before = _C.compile_counters()
    torch._dynamo.reset()
    g = torch.compile(model, backend="tessera", options=options)
    with torch.no_grad():
        g(x)
        torch.testing.assert_close(g(x), model(x), rtol=1e-4, atol=1e-4)
    d = _delta(before, _C.compile_counters())
    assert d["compile_calls"] == d["jit_compiles"] == d["stage_plans"] == 0


def test_reports_say_where_each_schedule_came_from(tmp_path):
    a, b = tessera.placeholder("A", [128, 256]), tessera.placeholder("B", [256, 256])
    out = tessera.te_ops.matmul(a, b)
    db = _C.RecordsDB(str(tmp_path / "r.db"))
    tuned = tessera.Kernel([out], [a, b], tune="construct", records=db)
    assert tuned.report.source in ("construct:gensor", "rules") and tuned.report.trials >= 2
    again = tessera.Kernel([out], [a, b], tune="construct", records=db)
    assert again.report.source == "records" and again.report.trials == 0
    assert again.schedule == tuned.schedule
    x, w = torch.randn(128, 256), torch.randn(256, 256)
    torch.testing.assert_close(again(x, w), x @ w, rtol=1e-4, atol=1e-4)
    plain = tessera.Kernel([out], [a, b])
    assert plain.report.source == "rules" and not plain.report.candidates
    # Asked for, tuning reaches a kernel of any size (graphs tune small ones only where they
    # are a large share of the graph's work: tune_scope).
    a, b = tessera.placeholder("A", [16, 24]), tessera.placeholder("B", [24, 8])
    small = tessera.Kernel([tessera.te_ops.matmul(a, b)], [a, b], tune="construct")
    assert small.report.candidates and "too little" not in small.report.note
    x, w = torch.randn(16, 24), torch.randn(24, 8)
    torch.testing.assert_close(small(x, w), x @ w, rtol=1e-4, atol=1e-4)


def test_search_mode_through_the_compile_call():
    """tune="search": evolutionary search seeded with construct's picks and the rules' schedule,
    every candidate verified; the kernel returned is the best one measured (or the rules' when
    nothing beat it by the win margin) and matches eager."""
    a, b = tessera.placeholder("A", [128, 256]), tessera.placeholder("B", [256, 256])
    out = tessera.te_ops.relu(tessera.te_ops.matmul(a, b))
    before = _C.compile_counters()
    k = tessera.Kernel([out], [a, b], tune="search", trials=12)
    r = k.report
    d = _delta(before, _C.compile_counters())
    assert r.tuner == "search" and r.source in ("search", "rules")
    assert r.trials == len(r.candidates) == 12
    assert sum(c.chosen for c in r.candidates) == 1
    chosen = next(c for c in r.candidates if c.chosen)
    assert chosen.ok and chosen.schedule.stages_text() == r.schedule.stages_text()
    # The choice is made in the final race: the best few and the rules' schedule timed again in
    # one paired batch; the report's times are the race's.
    assert "final race" in r.note and r.default_ms > 0
    if r.source == "search":
        assert r.median_ms < _C.tuning_policy().win_margin * r.default_ms
    else:  # nothing beat the rules' schedule by the margin
        assert r.median_ms == r.default_ms
    # Candidates and the verification reference, the race's finalists (at most 4; the rules'
    # schedule is the reference, not built again) and, with worker processes (the default
    # runner, which hands back no kernels), the winner built once more.
    built = 1 + sum(1 for c in r.candidates if c.build_ms > 0)
    rebuilt = 1 if _C.tuning_policy().search_runner == "workers" else 0
    assert built + rebuilt <= d["jit_compiles"] <= built + 4 + rebuilt
    x, w = torch.randn(128, 256), torch.randn(256, 256)
    torch.testing.assert_close(k(x, w), torch.relu(x @ w), rtol=1e-4, atol=1e-4)
