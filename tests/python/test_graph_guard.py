"""The whole-graph check (backend/graph_guard.py): a compiled inference graph that measures
slower than its eager execution runs eagerly, logged; graphs with side effects are never timed."""

import torch
import torch.fx as fx

from tessera.backend import graph_guard
from tessera.backend.graph import compiled_graphs

aten = torch.ops.aten


def _graph(op):
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(op, (x, 1.0))
    g.output(y)
    return fx.GraphModule(torch.nn.Module(), g)


def test_side_effects_are_detected_from_the_schema():
    assert graph_guard.has_side_effects(_graph(aten.add_.Scalar))
    assert not graph_guard.has_side_effects(_graph(aten.add.Scalar))


def test_compare_times_both_implementations():
    gm = _graph(aten.mul.Scalar)
    calls = []

    def runner(args):
        calls.append(len(args))
        return gm(*args)
    compiled_ms, eager_ms = graph_guard.compare(runner, gm, [torch.randn(64, 64)])
    assert compiled_ms > 0 and eager_ms > 0
    assert calls and all(n == 1 for n in calls)  # every call got its own copy of the inputs


def _compile_mlp(monkeypatch, times, timed_against=None):
    """(graph, its summary, the compiled model, the model, an input) of an MLP compiled with
    graph_guard.compare faked to return `times` (a list: one per call); the graphs the compiled
    one was timed against go to `timed_against`."""
    seq = list(times) if isinstance(times, list) else None

    def fake_compare(runner, gm, args, **kw):
        if timed_against is not None:
            timed_against.append(gm)
        return seq.pop(0) if seq else times
    monkeypatch.setattr(graph_guard, "compare", fake_compare)
    # Tessera kernels whatever the partitions measure: the guard only looks at graphs with some.
    monkeypatch.setenv("TESSERA_FORCE_CHOICE", "tessera")
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    fast = torch.compile(model, backend="tessera", options={"records_db": False,
                                                             "tune": "default"})
    x = torch.randn(16, 32)
    with torch.no_grad():
        fast(x)
        out = fast(x)
        torch.testing.assert_close(out, model(x))
    graph = compiled_graphs()[-1]
    return graph, next(iter(graph.summaries.values())), fast, model, x


def test_a_graph_slower_than_eager_runs_eagerly(monkeypatch):
    graph, summary, *_ = _compile_mlp(monkeypatch, (2.0, 1.0))
    assert summary.kernels > 0
    assert summary.graph_choice == "eager"
    assert summary.graph_times_ms == {"compiled": 2.0, "eager": 1.0}
    assert "-> eager" in summary.describe()


def test_a_graph_faster_than_eager_keeps_its_kernels(monkeypatch):
    graph, summary, *_ = _compile_mlp(monkeypatch, (1.0, 2.0))
    assert summary.graph_choice == "compiled"


def test_eager_must_win_a_second_measurement_too(monkeypatch):
    # The first measurement says eager, the confirmation says compiled: compiled stays, with
    # the confirmation's times.
    graph, summary, *_ = _compile_mlp(monkeypatch, [(2.0, 1.0), (1.0, 1.1)])
    assert summary.graph_choice == "compiled"
    assert summary.graph_times_ms == {"compiled": 1.0, "eager": 1.1}


def test_the_times_are_kept_in_the_records_database(monkeypatch, tmp_path):
    # A second compile of the same graph (a new process in real use: here the in-process caches
    # are cleared) reads the guard's times from the database instead of timing again.
    from tessera.backend import anchor
    db = str(tmp_path / "records.db")
    calls = []

    def fake_compare(runner, gm, args, **kw):
        calls.append(1)
        return 3.0, 1.0
    monkeypatch.setattr(graph_guard, "compare", fake_compare)
    monkeypatch.setenv("TESSERA_FORCE_CHOICE", "tessera")
    model = torch.nn.Sequential(torch.nn.Linear(24, 40), torch.nn.GELU(), torch.nn.Linear(40, 8))
    x = torch.randn(8, 24)
    summaries = []
    for _ in range(2):
        torch._dynamo.reset()
        anchor.clear_decisions()
        monkeypatch.setattr(anchor, "_remeasure", [False])  # a fresh process reads the records
        fast = torch.compile(model, backend="tessera", options={"records_db": db,
                                                                 "tune": "default"})
        with torch.no_grad():
            torch.testing.assert_close(fast(x), model(x))
        summaries.append(next(iter(compiled_graphs()[-1].summaries.values())))
    assert len(calls) == 2  # the first compile's measurement and its confirmation
    for s in summaries:
        assert s.graph_choice == "eager"
        assert s.graph_times_ms == {"compiled": 3.0, "eager": 1.0}


def test_torch_compile_checks_against_the_models_own_eager_run(monkeypatch):
    # Through torch.compile the compiled graph is timed against Dynamo's graph of the model's
    # torch calls (native_guard.py), not against aot_autograd's decomposed ATen graph, which
    # can be slower than the model itself; where the model wins, its own graph runs.
    from tessera.backend.graph import CompiledGraph
    timed_against = []
    graph, summary, fast, model, x = _compile_mlp(monkeypatch, (2.0, 1.0), timed_against)
    assert len(timed_against) == 2  # the measurement and its confirmation
    assert all(gm is not graph.gm for gm in timed_against)
    assert not any(n.target is aten.addmm.default for gm in timed_against
                   for n in gm.graph.nodes), "timed against the decomposed ATen graph"

    def compiled_runs(*args):
        raise AssertionError("the compiled graph ran after the model measured faster")
    monkeypatch.setattr(CompiledGraph, "__call__", compiled_runs)
    with torch.no_grad():
        torch.testing.assert_close(fast(x), model(x))
    assert summary.graph_choice == "eager"
    assert summary.fallbacks()["slower"] and "the model's own eager run" in \
        summary.fallbacks()["slower"][-1]
