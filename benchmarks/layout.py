"""Layouts (ALT) per operator: fixed layouts vs joint layout + loop tuning at one budget, vs torch.

    python benchmarks/layout.py [--json out.json] [--budget 16] [--per-layout 3] [--rounds 5]
                                [--only conv|depthwise|matmul] [--no-stem]

For every operator, three implementations run side by side in paired rounds:

  fixed   Tessera's kernel in PyTorch's layouts (NCHW, row-major), loops tuned by construct mode
          with --budget measured candidates (_C.layout.tune_loops)
  alt     the joint tuner (_C.layout.tune): each template layout (NCHW{b}c, NCHW->NCHW{b}c, NHWC;
          matmul column panels) gets --per-layout measurements, the best layout the rest of the
          same --budget
  torch   F.conv2d / F.linear on PyTorch's layouts (the reference of the paired timing)

The inputs of each kernel are given in its layouts (converted once, outside the timing: in a
graph the producer writes them so) and the weights in theirs (laid out once at compile time);
each kernel writes its output in its own layout. Every result is converted back and checked
against torch before timing.

Operators: ResNet-18's 11 distinct convolutions (batch 1), MobileNetV2's 10 depthwise
convolutions, BERT-base's three linear layers at 128 tokens. Then the ResNet stem (7x7 s2,
3->64 at 224) as a case study: loops tuned with the whole budget in NCHW, NCHW16c output, NHWC,
and a tiled output N.H/4.W/8.O/16.4.8.16 reading an unfolded input (tiles of 4x8 outputs, the
stride-2 window's rows 2*(4-1)+7 = 13 and columns 2*(8-1)+7 = 21 per tile).

--models resnet18 mobilenet_v2: the whole model compiled by the torch.compile backend with and
without options layouts=True (each convolution's activations NHWC or NCHW by measurement,
propagated through the graph: backend/activation_layout.py), timed side by side; "without"
(the reference) lays weights out once at compile time as Tessera does by default, and "plain"
(NCHW activations, weights packed inside the kernels on every call: options prepack_weights
False) is the state issue 20 started from (without as the reference), and the share of
the ALT compile's CPU time spent in copies (layout conversions) by the profiler. The graph level
applies the NHWC family only; the blocked layouts the per-operator tuner may choose are not
propagated between partitions yet.

JSON: per operator {"op", "kind", "fixed_gflops", "alt_gflops", "torch_gflops", "alt_layout",
"alt_vs_fixed", "alt_vs_torch", "layout_stage_measured", "loop_stage_measured", "tune_s"}; the
stem {"case": "stem", "<layout>_gflops" ...}; per model {"model", "without_alt_ms",
"with_alt_ms", "speedup", "plain_ms", "speedup_vs_plain", "conversion_share"}.
Bar (issue 20): geomean alt_vs_fixed >= 1.2 (depthwise >= 1.3), none below 0.97; geomean
alt_vs_torch >= 1.2.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tessera  # noqa: E402
from tessera import _C, layouts  # noqa: E402
from tessera import te_ops as ops  # noqa: E402
from tessera.kernel import Kernel  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402
from ops import geomean  # noqa: E402

# (name, in channels, out channels, input size, kernel, stride, padding, groups)
RESNET18 = [
    ("conv7x7_s2_3_64", 3, 64, 224, 7, 2, 3, 1),
    ("conv3x3_64", 64, 64, 56, 3, 1, 1, 1),
    ("conv3x3_s2_64_128", 64, 128, 56, 3, 2, 1, 1),
    ("conv1x1_s2_64_128", 64, 128, 56, 1, 2, 0, 1),
    ("conv3x3_128", 128, 128, 28, 3, 1, 1, 1),
    ("conv3x3_s2_128_256", 128, 256, 28, 3, 2, 1, 1),
    ("conv1x1_s2_128_256", 128, 256, 28, 1, 2, 0, 1),
    ("conv3x3_256", 256, 256, 14, 3, 1, 1, 1),
    ("conv3x3_s2_256_512", 256, 512, 14, 3, 2, 1, 1),
    ("conv1x1_s2_256_512", 256, 512, 14, 1, 2, 0, 1),
    ("conv3x3_512", 512, 512, 7, 3, 1, 1, 1),
]
MOBILENET_DW = [(f"dw{c}_{h}" + ("_s2" if s == 2 else ""), c, c, h, 3, s, 1, c)
                for c, h, s in [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2),
                                (192, 28, 1), (192, 28, 2), (384, 14, 1), (576, 14, 1),
                                (576, 14, 2), (960, 7, 1)]]
BERT = [("linear_128x768x768", 128, 768, 768), ("linear_128x768x3072", 128, 768, 3072),
        ("linear_128x3072x768", 128, 3072, 768)]

STEM_LAYOUTS = {
    "NCHW": {},
    "NCHW16c": {"conv2d": "split(1,16) reorder(0,1,3,4,2)", "W": "split(0,16) reorder(0,2,3,4,1)"},
    "NHWC": {"X": "reorder(0,2,3,1)", "X_pad": "reorder(0,2,3,1)", "conv2d": "reorder(0,2,3,1)",
             "W": "reorder(2,3,1,0)"},
    "tiled": {"X_pad": "unfold(2,4,2,7) unfold(4,8,2,7) reorder(0,2,4,1,3,5)",
              "conv2d": "split(1,16) split(3,4) split(5,8) reorder(0,3,5,1,4,6,2)",
              "W": "split(0,16) reorder(0,2,3,4,1)"},
}


def conv_case(c, o, h, k, s, p, groups):
    X = tessera.placeholder("X", [1, c, h, h])
    W = tessera.placeholder("W", [o, c // groups, k, k])
    Y = ops.conv2d(X, W, None, [s, s], [p, p], [1, 1], groups)
    x, w = torch.randn(1, c, h, h), torch.randn(o, c // groups, k, k)
    out = (h + 2 * p - k) // s + 1
    flops = 2.0 * o * out * out * (c // groups) * k * k
    return Y, [X, W], [x, w], (lambda: F.conv2d(x, w, stride=s, padding=p, groups=groups)), flops


def linear_case(m, k, n):
    A, W = tessera.placeholder("A", [m, k]), tessera.placeholder("W", [n, k])
    Y = ops.matmul(A, W, False, True)
    a, w = torch.randn(m, k), torch.randn(n, k)
    return Y, [A, W], [a, w], (lambda: F.linear(a, w)), 2.0 * m * k * n


def runnable(result, out, inputs, values):
    """A zero-argument call of the tuned kernel on inputs in its layouts, and a check of it."""
    lay = result["layouts"]
    kernel = Kernel(result["outputs"], result["inputs"], schedule=result["schedule"], weights=[1])
    args = [layouts.to_physical(v, lay.get(t.name, "")) for t, v in zip(inputs, values)]

    def logical():
        y = kernel(*args)
        return layouts.to_logical(y, out.shape, lay[out.name]) if out.name in lay else y
    return (lambda: kernel(*args)), logical


def measure(name, kind, case, args):
    out, inputs, values, torch_fn, flops = case
    weights = [inputs[1].name]
    t0 = time.perf_counter()
    fixed = _C.layout.tune_loops([out], inputs, budget=args.budget, weights=weights)
    alt = _C.layout.tune([out], inputs, budget=args.budget, per_layout=args.per_layout,
                         weights=weights)
    tune_s = time.perf_counter() - t0
    want = torch_fn()
    fns = {}
    for label, r in (("fixed", fixed), ("alt", alt)):
        call, logical = runnable(r, out, inputs, values)
        torch.testing.assert_close(logical(), want, rtol=1e-3, atol=1e-3)
        fns[label] = call
    ratios = paired_with_reference(fns, torch_fn, rounds=args.rounds)
    ref_ms = ratios["reference"]
    gflops = {k: flops / (ratios[k] * ref_ms) / 1e6 for k in ("fixed", "alt")}
    return {"op": name, "kind": kind, "fixed_gflops": gflops["fixed"],
            "alt_gflops": gflops["alt"], "torch_gflops": flops / ref_ms / 1e6,
            "alt_layout": alt["chosen"], "alt_vs_fixed": ratios["fixed"] / ratios["alt"],
            "alt_vs_torch": 1.0 / ratios["alt"],
            "layout_stage_measured": alt["layout_stage_measured"],
            "loop_stage_measured": alt["loop_stage_measured"], "tune_s": tune_s}


def stem_study(args):
    out, inputs, values, torch_fn, flops = conv_case(3, 64, 224, 7, 2, 3, 1)
    want = torch_fn()
    fns = {}
    for label, texts in STEM_LAYOUTS.items():
        r = _C.layout.tune_loops([out], inputs, name=label, layouts=texts, budget=args.budget,
                                 weights=["W"])
        call, logical = runnable(r, out, inputs, values)
        torch.testing.assert_close(logical(), want, rtol=1e-3, atol=1e-3)
        fns[label] = call
    ratios = paired_with_reference(fns, torch_fn, rounds=args.rounds)
    rec = {"case": "stem", "torch_gflops": flops / ratios["reference"] / 1e6}
    for label in STEM_LAYOUTS:
        rec[f"{label}_gflops"] = flops / (ratios[label] * ratios["reference"]) / 1e6
        rec[f"{label}_vs_NCHW"] = ratios["NCHW"] / ratios[label]
    return rec


def conversion_share(f, calls=5):
    """Share of the CPU time of `f()` (a compiled model's call) spent in copies (layout
    conversions: .contiguous(), permuted copies), by the profiler's self times over `calls`
    calls."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            f()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    copies = sum(e.self_cpu_time_total for e in events
                 if e.key in ("aten::copy_", "aten::contiguous", "aten::clone"))
    return copies / total if total else 0.0


def model_study(name, args):
    import copy

    from models import build
    model, x = build(name, 1)
    model.eval()
    torch._dynamo.reset()
    # A fresh records database: choices and schedules measured now, not by an earlier process.
    db = os.path.join(tempfile.mkdtemp(prefix="tessera-layout-"), "records.db")
    fns = {}
    configs = {"without": {"layouts": False},  # the reference: weights laid out once
               "alt": {"layouts": True},
               "plain": {"layouts": False, "prepack_weights": False}}
    with torch.no_grad():
        want = model(x)
        for label, options in configs.items():
            f = torch.compile(copy.deepcopy(model), backend="tessera",
                              options=dict(options, records_db=db))
            torch.testing.assert_close(f(x), want, rtol=1e-3, atol=1e-3)
            fns[label] = (lambda f=f: f(x))
        r = paired_with_reference({k: fns[k] for k in ("alt", "plain")}, fns["without"],
                                  rounds=args.rounds, min_time_ms=200.0)
        share = conversion_share(fns["alt"])
    return {"model": name, "without_alt_ms": r["reference"],
            "with_alt_ms": r["alt"] * r["reference"], "speedup": 1.0 / r["alt"],
            "plain_ms": r["plain"] * r["reference"], "speedup_vs_plain": r["plain"] / r["alt"],
            "conversion_share": share}


def main():
    p = arg_parser(__doc__.splitlines()[0])
    p.add_argument("--budget", type=int, default=16, help="measured candidates per operator")
    p.add_argument("--per-layout", type=int, default=3, help="layout stage measurements each")
    p.add_argument("--only", choices=["conv", "depthwise", "matmul", "none"])
    p.add_argument("--no-stem", action="store_true", help="skip the stem case study")
    p.add_argument("--models", nargs="*", default=[],
                   help="whole models (resnet18, mobilenet_v2) with and without options layouts")
    p.add_argument("--models-only", action="store_true", help="only the --models study")
    args = p.parse_args()
    if args.models_only:
        args.only, args.no_stem = "none", True
    torch.manual_seed(0)
    cases = []
    if args.only in (None, "conv"):
        cases += [(n, "conv", (c, o, h, k, s, pd, g)) for n, c, o, h, k, s, pd, g in RESNET18]
    if args.only in (None, "depthwise"):
        cases += [(n, "depthwise", (c, o, h, k, s, pd, g)) for n, c, o, h, k, s, pd, g
                  in MOBILENET_DW]
    if args.only in (None, "matmul"):
        cases += [(n, "matmul", dims) for n, *dims in BERT]
    records = []
    for name, kind, dims in cases:
        case = linear_case(*dims) if kind == "matmul" else conv_case(*dims)
        records.append(measure(name, kind, case, args))
        print_table(records[-1:], ["op", "alt_layout", "fixed_gflops", "alt_gflops",
                                   "torch_gflops", "alt_vs_fixed", "alt_vs_torch"])
    if records:
        print()
        print_table(records, ["op", "kind", "alt_layout", "fixed_gflops", "alt_gflops",
                              "torch_gflops", "alt_vs_fixed", "alt_vs_torch", "tune_s"])
    for kind in ("conv", "depthwise", "matmul"):
        sel = [r for r in records if r["kind"] == kind]
        if sel:
            print(f"{kind}: geomean alt/fixed {geomean([r['alt_vs_fixed'] for r in sel]):.3f}, "
                  f"alt/torch {geomean([r['alt_vs_torch'] for r in sel]):.3f}, "
                  f"min alt/fixed {min(r['alt_vs_fixed'] for r in sel):.3f}")
    if records:
        print(f"all: geomean alt/fixed {geomean([r['alt_vs_fixed'] for r in records]):.3f}, "
              f"alt/torch {geomean([r['alt_vs_torch'] for r in records]):.3f}")
    if not args.no_stem:
        stem = stem_study(args)
        print_table([stem], [k for k in stem if k != "case"])
        records.append(stem)
    models = [model_study(name, args) for name in args.models]
    if models:
        print_table(models, ["model", "without_alt_ms", "with_alt_ms", "speedup", "plain_ms",
                             "speedup_vs_plain", "conversion_share"])
    write_json(args.json, records + models)


if __name__ == "__main__":
    main()
