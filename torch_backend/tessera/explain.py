"""tessera.explain(compiled): what the torch.compile backend did with a model or function.

    fast = torch.compile(model, backend="tessera")
    fast(x)                       # at least once: graphs are planned on their first call
    print(tessera.explain(fast))  # text; in Jupyter the result renders as a table and a chart

Per compiled graph (forward, backward or inference; one entry per input signature planned):
each partition's ATen ops, the implementation chosen (a Tessera kernel, ATen, or split: ATen's
matmul/conv with a Tessera epilogue), where the kernel's schedule came from (rules, construct,
search, records, given), the measured times of the candidates, each partition's share of the
graph's time, and the operators that ran through ATen with the reason.

Finding the graphs: every CompiledGraph records the Python frame dynamo was translating when it
was made (backend/origin.py). A compiled module's graphs are those whose frame belongs to the
module or one of its submodules (or runs its forward's code); a compiled function's are those
whose frame runs its code or a graph-break continuation of it. Only graphs still alive count:
torch._dynamo.reset() frees them, and explain then reports nothing for the object.

Shares: a partition's time is the measured time of its chosen implementation (partitions are
measured only with anchor_measure on, the default). The graph's time is the whole graph's
measured time when the graph guard measured it, else the sum of its partitions; the rest
(operators outside partitions, the runner's own work) is one "other" row, so shares sum to 1.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import inspect
import io
from typing import Any, List, Optional, Set

import torch

from .backend.graph import compiled_graphs
from .backend.origin import codes_of
from .backend.plan import Summary, layouts_text

OTHER = "other (ATen ops outside partitions, runner)"


@dataclasses.dataclass
class Row:
    ops: List[str]
    impl: str
    schedule: str
    times_ms: dict
    time_ms: Optional[float]   # the chosen implementation's measured time
    share: Optional[float]     # of the graph's time; None when nothing was measured
    reason: str = ""


@dataclasses.dataclass
class GraphReport:
    serial: int
    kind: str
    summary: Summary
    rows: List[Row]
    total_ms: Optional[float]

    @property
    def title(self) -> str:
        return f"graph {self.serial} ({self.kind})"


def _short(op: str) -> str:
    return op.replace("aten.", "").rsplit(".", 1)[0] if op.count(".") >= 2 else op


def _ops_text(ops: List[str]) -> str:
    return "+".join(dict.fromkeys(_short(o) for o in ops))


def _rows(summary: Summary):
    """The partition rows of one graph, with shares, and the graph's total time (or None)."""
    rows = []
    for p in summary.partitions:
        t = p["times_ms"].get(p["impl"])
        rows.append(Row(list(p["ops"]), p["impl"], p["schedule"], dict(p["times_ms"]), t,
                        None, p.get("reason", "")))
    known = sum(r.time_ms for r in rows if r.time_ms is not None)
    whole = summary.graph_times_ms.get(summary.graph_choice) if summary.graph_times_ms else None
    total = max(whole or 0.0, known)
    if total <= 0:
        return rows, None
    for r in rows:
        r.share = r.time_ms / total if r.time_ms is not None else 0.0
    if total - known > 1e-12:
        rows.append(Row([OTHER], "aten", "", {}, total - known, (total - known) / total))
    return rows, total


# ---- finding the graphs of a compiled object ---------------------------------------------------

def _code_of(fn: Any):
    fn = inspect.unwrap(getattr(fn, "__func__", fn))
    return getattr(fn, "__code__", None)


def _targets(compiled: Any):
    """(modules, code objects) whose frames belong to `compiled`."""
    mod = getattr(compiled, "_orig_mod", compiled)
    fn = getattr(compiled, "_torchdynamo_orig_callable", compiled)
    modules: Set[int] = set()
    codes: Set[Any] = set()
    if isinstance(mod, torch.nn.Module):
        for m in mod.modules():
            modules.add(id(m))
            code = _code_of(type(m).forward)
            if code is not None:
                codes |= codes_of(code)
    else:
        code = _code_of(fn)
        if code is not None:
            codes |= codes_of(code)
    return modules, codes


def graphs_of(compiled: Any) -> list:
    """The live CompiledGraphs made for `compiled`, oldest first."""
    own = getattr(compiled, "compiled_graph", None)  # an ExportedModel (tessera.export, aot.py)
    if own is not None:
        return [own]
    modules, codes = _targets(compiled)
    out = []
    for g in compiled_graphs():
        origin = getattr(g, "origin", None)
        if origin is None:
            continue
        owner = origin.module_obj()
        if (owner is not None and id(owner) in modules) or origin.code in codes:
            out.append(g)
    return out


# ---- the report ------------------------------------------------------------------------------

class Explanation:
    """What the backend did with one compiled object: str() is plain text, _repr_html_ a table
    and (with matplotlib) a bar chart of time shares for Jupyter."""

    def __init__(self, graphs: List[GraphReport]):
        self.graphs = graphs

    # ---- text ----
    def __str__(self) -> str:
        if not self.graphs:
            return "tessera.explain: no compiled graphs (call the compiled object once first)"
        return "\n\n".join(_graph_text(g) for g in self.graphs)

    __repr__ = __str__

    # ---- Jupyter ----
    def _repr_html_(self) -> str:
        if not self.graphs:
            return f"<p>{html.escape(str(self))}</p>"
        return "\n".join(_graph_html(g) for g in self.graphs)


def _times_text(r: Row) -> str:
    return ", ".join(f"{k} {v:.3f} ms" for k, v in r.times_ms.items()) or "not measured"


def _share_text(r: Row) -> str:
    return "" if r.share is None else f"{100 * r.share:5.1f}%"


def _graph_text(g: GraphReport) -> str:
    s = g.summary
    head = f"{g.title}: {s.kernels} Tessera kernels"
    if s.graph_times_ms:
        t = s.graph_times_ms
        head += (f"; whole graph compiled {t['compiled']:.3f} ms vs eager {t['eager']:.3f} ms"
                 f" -> runs {s.graph_choice}")
    lines = [head]
    for i, r in enumerate(g.rows):
        where = r.impl + (f" [{r.schedule}]" if r.schedule else "")
        lines.append(f"  {i:>3} {_share_text(r):>6} {where:<22} {_ops_text(r.ops)}"
                     + ("" if r.ops == [OTHER] else f"  ({_times_text(r)})"))
        if r.reason:
            lines.append(f"        left to ATen: {r.reason}")
    for op, n in sorted(s.aten_ops.items()):
        lines.append(f"  ATen: {op} x{n} ({s.aten_reasons.get(op, 'unsupported')})")
    counts = _fallback_counts(s)
    if counts:
        lines.append(f"  left to ATen: {counts}")
    if s.layouts:
        lines.append("  " + layouts_text(s.layouts))
    return "\n".join(lines)


def _fallback_counts(s) -> str:
    """"2 unsupported, 1 slower": partitions and operators left to ATen by category."""
    return ", ".join(f"{len(found)} {category.replace('_', ' ')}"
                     for category, found in s.fallbacks().items() if found)


def _graph_html(g: GraphReport) -> str:
    s = g.summary
    esc = html.escape
    cells = ["<tr><th>#</th><th>ops</th><th>implementation</th><th>schedule</th>"
             "<th>times (ms)</th><th>share</th></tr>"]
    for i, r in enumerate(g.rows):
        impl = esc(r.impl) + (f"<br><small>{esc(r.reason)}</small>" if r.reason else "")
        cells.append(f"<tr><td>{i}</td><td>{esc(_ops_text(r.ops))}</td><td>{impl}</td>"
                     f"<td>{esc(r.schedule)}</td><td>{esc(_times_text(r))}</td>"
                     f"<td>{esc(_share_text(r))}</td></tr>")
    fallbacks = "".join(f"<li><code>{esc(op)}</code> x{n}: "
                        f"{esc(s.aten_reasons.get(op, 'unsupported'))}</li>"
                        for op, n in sorted(s.aten_ops.items()))
    out = [f"<h4>{esc(g.title)}: {s.kernels} Tessera kernels</h4>",
           "<table>" + "".join(cells) + "</table>"]
    if fallbacks:
        out.append(f"<p>Ran through ATen:</p><ul>{fallbacks}</ul>")
    counts = _fallback_counts(s)
    if counts:
        out.append(f"<p>Left to ATen: {esc(counts)}</p>")
    chart = _share_chart(g)
    if chart:
        out.append(f'<img src="data:image/png;base64,{chart}" alt="time shares"/>')
    return "\n".join(out)


def _share_chart(g: GraphReport) -> str:
    """A horizontal bar chart of the rows' time shares as base64 PNG ("" without matplotlib
    or without measured times)."""
    rows = [r for r in g.rows if r.share]
    if not rows:
        return ""
    try:
        import matplotlib
        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except Exception:
        return ""
    labels = [f"{i}: {_ops_text(r.ops)[:40]}" for i, r in enumerate(rows)]
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(rows) + 0.8))
    ax.barh(labels, [100 * r.share for r in rows],
            color=["tab:blue" if r.impl in ("tessera", "split") else "tab:gray" for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"% of {g.title} time")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def explain(compiled: Any) -> Explanation:
    """What the tessera backend did with `compiled` (the result of torch.compile(..., backend=
    "tessera"), or the module / function it wraps): see the module docstring."""
    reports = []
    for g in graphs_of(compiled):
        for summary in g.summaries.values():
            rows, total = _rows(summary)
            reports.append(GraphReport(g.serial, g.kind, summary, rows, total))
    return Explanation(reports)


__all__ = ["explain", "Explanation", "GraphReport", "Row", "graphs_of"]
