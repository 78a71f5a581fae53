"""Where OpenVINO's time and Tessera's go, side by side, on zoo models: the gap per kind of layer.

    python benchmarks/peer_profile.py --models resnet mobilenet_v2 [--calls 50] [--top 12]
                                      [--json out.json]

OpenVINO (run as benchmarks/peer_runtimes.py runs it, with PERF_COUNT on) reports each
executed node's time; Tessera's are the measured times of each partition's chosen
implementation (tessera.explain). Both are grouped into the same kinds of layer: convolution
(dense, grouped, depthwise, 1-D), matmul, attention, normalization, layout conversion
(OpenVINO's Reorder and Transpose nodes; Tessera's layout changes are inside its kernels) and
the rest (elementwise, pooling, reshapes). Tessera's partitions are named by their first
matching operator, so a convolution partition includes its fused epilogue, as OpenVINO's
fused nodes do. Per model a record {"model", "openvino_ms", "tessera_ms", "by_kind": {kind:
{"openvino_ms", "tessera_ms"}}, "openvino_top": [[node type, exec type, ms], ...]}; per-node
times are sums over nodes per call (OpenVINO's are taken from one call after --calls warm ones),
so they add up to roughly the whole call, not exactly.
"""

from __future__ import annotations

import collections
import os
import sys
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import arg_parser, print_table, write_json  # noqa: E402
from peer_runtimes import openvino_available  # noqa: E402
from zoo_models import build, zoo  # noqa: E402

KINDS = ("conv", "matmul", "attention", "norm", "layout", "other")

# OpenVINO node types by kind (the rest are "other"). Its grouped and depthwise convolutions
# (GroupConvolution) count as convolutions, as Tessera's do; the top list tells them apart.
_OV_KINDS = {"Convolution": "conv", "GroupConvolution": "conv", "MatMul": "matmul",
             "FullyConnected": "matmul", "ScaledDotProductAttention": "attention",
             "MVN": "norm", "NormalizeL2": "norm", "RMS": "norm", "Reorder": "layout",
             "Transpose": "layout"}


def tessera_kind(ops: List[str]) -> str:
    """The kind of a Tessera partition from its ATen operators."""
    names = " ".join(ops)
    if "convolution" in names:
        return "conv"
    if "scaled_dot_product" in names:
        return "attention"
    if any(op in names for op in ("aten.mm", "aten.addmm", "aten.bmm")):
        return "matmul"
    if any(op in names for op in ("layer_norm", "batch_norm", "group_norm", "rsqrt")):
        return "norm"
    return "other"


def openvino_profile(model: torch.nn.Module, x: torch.Tensor, calls: int) -> tuple:
    """(per-call ms by kind, total, the costliest [node type, exec type, ms] rows)."""
    import openvino as ov
    with torch.no_grad():
        converted = ov.convert_model(model, example_input=x)
    compiled = ov.Core().compile_model(converted, "CPU", {
        "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": torch.get_num_threads(), "PERF_COUNT": True})
    request = compiled.create_infer_request()
    inputs = [x.numpy()]
    for _ in range(calls):
        request.infer(inputs, share_inputs=True)
    by_kind: Dict[str, float] = collections.defaultdict(float)
    by_type: Dict[tuple, float] = collections.defaultdict(float)
    for info in request.get_profiling_info():
        ms = info.real_time.total_seconds() * 1e3
        by_kind[_OV_KINDS.get(info.node_type, "other")] += ms
        by_type[(info.node_type, info.exec_type)] += ms
    top = sorted(([t, e, ms] for (t, e), ms in by_type.items()), key=lambda r: -r[2])
    return dict(by_kind), sum(by_kind.values()), top


def tessera_profile(model: torch.nn.Module, x: torch.Tensor) -> tuple:
    """(measured ms by kind over the compiled graphs' partitions, their total)."""
    fast = torch.compile(model, backend="tessera")
    with torch.no_grad():
        fast(x)
        fast(x)
    by_kind: Dict[str, float] = collections.defaultdict(float)
    for graph in tessera.explain(fast).graphs:
        for row in graph.rows:
            if row.time_ms is not None:
                by_kind[tessera_kind(row.ops)] += row.time_ms
    return dict(by_kind), sum(by_kind.values())


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--models", nargs="+", choices=list(zoo()), default=["resnet", "mobilenet_v2"])
    p.add_argument("--calls", type=int, default=50, help="OpenVINO calls before the profiled one")
    p.add_argument("--top", type=int, default=12, help="OpenVINO's costliest node types shown")
    args = p.parse_args()
    if not openvino_available():
        sys.exit("openvino is not installed: make peers")
    records = []
    for name in args.models:
        model, x = build(name)
        model.eval()
        ov_kinds, ov_ms, top = openvino_profile(model, x, args.calls)
        torch._dynamo.reset()
        t_kinds, t_ms = tessera_profile(model, x)
        rows = [{"kind": k, "openvino_ms": ov_kinds.get(k, 0.0), "tessera_ms": t_kinds.get(k, 0.0)}
                for k in KINDS if k in ov_kinds or k in t_kinds]
        print(f"\n{name}: OpenVINO {ov_ms:.2f} ms, Tessera {t_ms:.2f} ms (sums over nodes)")
        print_table(rows, ["kind", "openvino_ms", "tessera_ms"])
        print_table([{"node_type": t, "exec_type": e, "ms": ms} for t, e, ms in top[:args.top]],
                    ["node_type", "exec_type", "ms"])
        records.append({"model": name, "openvino_ms": ov_ms, "tessera_ms": t_ms,
                        "by_kind": {r["kind"]: {"openvino_ms": r["openvino_ms"],
                                                "tessera_ms": r["tessera_ms"]} for r in rows},
                        "openvino_top": top[:args.top]})
    write_json(args.json, records)


if __name__ == "__main__":
    main()
