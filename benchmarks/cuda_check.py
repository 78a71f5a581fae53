"""CUDA path checks that run without a GPU (issue 18's bar for CI).

    python benchmarks/cuda_check.py [--json PATH] [--arch sm_90] [--ops NAME ...] [--list]
                                    [--models NAME ...]

1. Sources: every kernel of the operator suite of benchmarks/ops.py is lowered with its default
   GPU schedule, and the tiled ones (matmul, conv) also with construct's choice (Gensor on GPU,
   predict-only with the shipped H100 description), emitted as CUDA C and compiled to a cubin
   for --arch (NVRTC where it loads, else `nvcc -cubin`), with ptxas's register and spill
   counts. "gemm2048_spills" is construct's GEMM 2048 choice's.
   A kernel whose stages no single GPU schedule covers (a conv followed by a pool, a matmul by a
   layer norm) is several launches (schedule "tiled+row", ...): all of them are compiled.
2. Models (--models, any of benchmarks/models.py's: resnet18 mobilenet_v2 bert gpt2 vit llama):
   each model is compiled by torch.compile(backend="tessera") for the CPU as usual (fused
   partitions: anchor_measure off, default schedules, no records database), and every distinct
   kernel the backend builds is compiled for the GPU as well, with its default GPU schedule.
3. Interpreter cases: small operators with odd sizes, each GPU schedule run by the GPU-semantics
   interpreter (threads phase by phase between barriers) on random inputs against the reference,
   counting data races, out-of-bounds accesses and reads of shared memory never written.

JSON: {"sources_compiled", "sources_failed", "model_kernels_compiled", "model_kernels_failed",
"models", "interpreter_cases", "interpreter_failures",
"races", "out_of_bounds", "uninitialized_reads", "gemm2048_spills", "device", "compiler",
"kernels": [...],
"cases": [...]}; "device" is null without a CUDA device, else its name (no GPU timings are taken
yet). The exit status is 1 when a source or model kernel fails, a case fails, or GEMM 2048
spills.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tessera  # noqa: E402
from tessera import _C  # noqa: E402

import ops as ops_suite  # noqa: E402  (benchmarks/ops.py: the operator suite)

T = tessera.te_ops
P = tessera.placeholder
Case = Tuple[str, Callable[[], tuple]]


def interpreter_cases() -> List[Case]:
    """Small operators for every GPU schedule: tiled (matmul, batch matmul, dense, conv), row
    (softmax, norms, sums) and injective (elementwise)."""
    def mm(m, k, n, ta=False, tb=False):
        a = P("A", [k, m] if ta else [m, k])
        b = P("B", [n, k] if tb else [k, n])
        return [T.matmul(a, b, ta, tb)], [a, b]

    def bmm(bt, m, k, n, tb):
        a, b = P("A", [bt, m, k]), P("B", [bt, n, k] if tb else [bt, k, n])
        return [T.batch_matmul(a, b, False, tb)], [a, b]

    def dense_relu():
        x, w, bias = P("x", [13, 40]), P("w", [24, 40]), P("bias", [24])
        return [T.relu(T.dense(x, w, bias))], [x, w, bias]

    def conv(c, h, w, o, k, stride, pad, groups=1, bias=False):
        x, wt = P("X", [2, c, h, w]), P("W", [o, c // groups, k, k])
        ins = [x, wt] + ([P("bias", [o])] if bias else [])
        y = T.conv2d(x, wt, ins[2] if bias else None, (stride, stride), (pad, pad), (1, 1), groups)
        return [y], ins

    def softmax(shape, axis, log=False):
        x = P("x", shape)
        return [(T.log_softmax if log else T.softmax)(x, axis)], [x]

    def layer_norm():
        x, g, b = P("x", [6, 3, 20]), P("gamma", [3, 20]), P("beta", [3, 20])
        return [T.layer_norm(x, 2, g, b)], [x, g, b]

    def reduce(fn, axes):
        x = P("x", [7, 45])
        return [fn(x, axes)], [x]

    def elementwise():
        x, b = P("x", [5, 77]), P("bias", [77])
        return [T.gelu(T.add(x, b)), T.tanh(x)], [x, b]

    def avgpool():
        x = P("X", [2, 3, 9, 9])
        return [T.avg_pool2d(x, (2, 2), (2, 2))], [x]

    def maxpool():
        x = P("X", [2, 3, 9, 9])
        return [T.max_pool2d(x, (3, 3), (2, 2), (1, 1))], [x]

    def conv_transpose():
        x, w = P("X", [1, 4, 5, 5]), P("W", [4, 3, 3, 3])
        return [T.conv_transpose2d(x, w, None, (2, 2), (1, 1))], [x, w]

    def concat():
        x, y = P("x", [4, 6]), P("y", [4, 3])
        return [T.concat([x, y], 1)], [x, y]

    def reshape_matmul_gelu():
        x, w = P("x", [2, 8, 30]), P("w", [30, 12])
        return [T.gelu(T.matmul(T.reshape(x, [16, 30]), w))], [x, w]

    def min_keepdim():
        x = P("x", [3, 5, 7])
        return [T.reduce_min(x, [1], True)], [x]

    def conv_bn_relu_maxpool():
        # ResNet's stem in small: the pool's window reads the conv's output across threads, so
        # it is a launch of its own (GPU programs: schedule/gpu/gpu_program.h).
        x, wt = P("X", [1, 3, 12, 12]), P("W", [4, 3, 3, 3])
        scale, shift = P("scale", [4, 1, 1]), P("shift", [4, 1, 1])
        y = T.relu(T.add(T.mul(T.conv2d(x, wt, None, (1, 1), (1, 1)), scale), shift))
        return [T.max_pool2d(y, (3, 3), (2, 2), (1, 1))], [x, wt, scale, shift]

    def linear_residual_layer_norm():
        # GPT-2's block seam: matmul + bias + residual (an output) normalised in the same kernel.
        x, w, r = P("x", [9, 24]), P("w", [40, 24]), P("res", [9, 40])
        g, b = P("gamma", [40]), P("beta", [40])
        h = T.add(T.dense(x, w, None), r)
        return [h, T.layer_norm(h, 1, g, b)], [x, w, r, g, b]

    def conv_global_mean():
        x, wt = P("X", [2, 5, 7, 7]), P("W", [6, 5, 3, 3])
        y = T.relu(T.conv2d(x, wt, None, (1, 1), (1, 1)))
        return [T.reduce_mean(y, [2, 3], True)], [x, wt]

    # Every elementwise, index and shape operator of te_ops (integer indices are computed from
    # arange, so they stay in range on random inputs; outputs are float32 for the comparison).
    def unary_math():
        x = P("x", [5, 33])
        ax = T.abs(x)
        return [T.add(T.mul(T.exp(x), T.sigmoid(x)), T.tanh(x)),
                T.add(T.add(T.log(T.add(ax, 1.0)), T.sqrt(ax)), T.rsqrt(T.add(ax, 1.0))),
                T.add(T.erf(x), T.pow(T.add(ax, 1.0), 1.5)),
                T.sub(T.add(T.floor(T.mul(x, 3.0)), T.ceil(T.mul(x, 3.0))), T.neg(x)),
                T.clamp(x, -0.5, 0.5)], [x]

    def compare_select():
        x, y = P("x", [6, 17]), P("y", [6, 17])
        cond = T.logical_and(T.compare(x, y, "lt"), T.logical_not(T.compare(x, 0.0, "gt")))
        either = T.logical_or(T.compare(x, y, "ge"), T.compare(y, 0.25, "le"))
        return [T.where(cond, T.maximum(x, y), T.minimum(x, y)),
                T.sub(T.div(x, T.add(T.abs(y), 1.0)), T.mul(x, y)),
                T.cast(either, "float32")], [x, y]

    def integer_division():
        x, y = P("x", [4, 19]), P("y", [4, 19])
        a = T.cast(T.floor(T.mul(x, 50.0)), "int64")
        b = T.add(T.cast(T.floor(T.mul(T.abs(y), 7.0)), "int64"), T.cast(T.full([4, 19], 1), "int64"))
        return [T.cast(T.floordiv(a, b), "float32"), T.cast(T.floormod(a, b), "float32")], [x, y]

    def embedding_gather():
        table, x = P("table", [10, 12]), P("x", [4, 9])
        ids = T.floormod(T.mul(T.arange(7), T.full([7], 3, "int64")), T.full([7], 10, "int64"))
        cols = T.floormod(T.mul(T.broadcast_to(T.arange(5), [4, 5]), T.full([4, 5], 2, "int64")),
                          T.full([4, 5], 9, "int64"))
        return [T.index_select(table, 0, ids), T.gather(x, 1, cols)], [table, x]

    def shape_ops():
        x, bias = P("x", [2, 3, 8]), P("bias", [8])
        return [T.permute(x, [2, 0, 1]), T.slice(x, 2, 1, 7, 2),
                T.pad(x, [(0, 0), (1, 1), (2, 0)], 0.5),
                T.add(T.broadcast_to(bias, [2, 3, 8]), T.transpose(T.transpose(x, [1, 0, 2]), [1, 0, 2])),
                T.cast(T.arange(6, 0.5, 2.0, "float32"), "float32")], [x, bias]

    return [
        ("unary_math", unary_math),
        ("compare_select", compare_select),
        ("integer_division", integer_division),
        ("embedding_gather", embedding_gather),
        ("shape_ops", shape_ops),
        ("conv_bn_relu_maxpool", conv_bn_relu_maxpool),
        ("linear_residual_layer_norm", linear_residual_layer_norm),
        ("conv_global_mean", conv_global_mean),
        ("matmul_37x29x53", lambda: mm(37, 29, 53)),
        ("matmul_64x64x64", lambda: mm(64, 64, 64)),
        ("matmul_tt_21x18x33", lambda: mm(18, 21, 33, True, True)),
        ("dense_bias_relu", dense_relu),
        ("batch_matmul_3x17x19x23", lambda: bmm(3, 17, 19, 23, False)),
        ("batch_matmul_qk", lambda: bmm(2, 16, 8, 16, True)),
        ("conv2d_3x3_pad1_bias", lambda: conv(3, 9, 11, 5, 3, 1, 1, bias=True)),
        ("conv2d_3x3_stride2", lambda: conv(4, 13, 10, 6, 3, 2, 1)),
        ("conv2d_1x1", lambda: conv(8, 7, 7, 5, 1, 1, 0)),
        ("conv2d_grouped", lambda: conv(4, 8, 8, 6, 3, 1, 1, groups=2)),
        ("conv2d_depthwise", lambda: conv(6, 8, 8, 6, 3, 1, 1, groups=6)),
        ("softmax_7x100", lambda: softmax([7, 100], -1)),
        ("softmax_axis0_33x5", lambda: softmax([33, 5], 0)),
        ("log_softmax_4x3x50", lambda: softmax([4, 3, 50], -1, log=True)),
        ("layer_norm_6x3x20", layer_norm),
        ("reduce_sum_rows", lambda: reduce(T.reduce_sum, [1])),
        ("reduce_max_all", lambda: reduce(T.reduce_max, [])),
        ("reduce_mean_cols", lambda: reduce(T.reduce_mean, [0])),
        ("elementwise_gelu_tanh", elementwise),
        ("avgpool_2x2", avgpool),
        ("maxpool_3x3_stride2_pad1", maxpool),
        ("conv_transpose2d_stride2", conv_transpose),
        ("concat", concat),
        ("reshape_matmul_gelu", reshape_matmul_gelu),
        ("reduce_min_keepdim", min_keepdim),
    ]


def compile_one(outs, ins, name: str, arch: str, construct: bool) -> dict:
    rec = {"op": name, "construct": construct}
    try:
        k = _C.cuda.compile_kernel(outs, ins, name, arch, construct)
        rec.update(ok=True, schedule=k["schedule"], compiler=k["compiler"],
                   registers=k["registers"], spill_bytes=k["spill_bytes"],
                   shared_bytes=k["shared_bytes"], cubin_bytes=k["cubin_bytes"],
                   config=k.get("config"), predicted_ms=k.get("predicted_ms"),
                   launches=len(k["launches"]))
    except Exception as e:  # a failed compile is a result, not the end of the run
        rec.update(ok=False, error=str(e)[:2000])
    label = f"{name} ({'construct' if construct else 'default'})"
    print(f"  {label:40s} " + (f"{rec['schedule']:9s} regs={rec['registers']:3d} "
                                f"spills={rec['spill_bytes']}B smem={rec['shared_bytes']}B"
                                + (f" {rec['config']}" if rec["config"] else "")
                                if rec["ok"] else "FAILED: " + rec["error"].splitlines()[0]))
    return rec


def compile_suite(names: List[str] | None, arch: str) -> List[dict]:
    """Every suite op with its default GPU schedule, and tiled ops also with construct's choice
    (Gensor on GPU, predict-only with the shipped H100 description)."""
    records = []
    for op in ops_suite.suite():
        if names and op.name not in names:
            continue
        outs, ins = op.build()
        records.append(compile_one(outs, ins, op.name, arch, False))
        if records[-1].get("schedule") == "tiled":
            records.append(compile_one(outs, ins, op.name, arch, True))
    return records


def compile_models(names: List[str], arch: str) -> List[dict]:
    """Every distinct kernel the backend builds for these models, compiled for the GPU."""
    import torch

    import models as model_suite  # benchmarks/models.py
    from tessera.backend import kernel_build

    specs = {}

    def observe(spec):
        specs.setdefault(spec.workload().hash, spec)
    kernel_build.spec_observers.append(observe)
    records = []
    try:
        for name in names:
            specs.clear()
            model, x = model_suite.build(name, 1)
            model.eval()
            torch._dynamo.reset()
            options = {"anchor_measure": False, "tune": "default", "records_db": False}
            compiled = torch.compile(model, backend="tessera", options=options)
            with torch.no_grad():
                compiled(x)
            print(f"{name}: {len(specs)} distinct kernels")
            for spec in list(specs.values()):
                rec = compile_one(spec.te_outputs, spec.te_inputs, spec.name, arch, False)
                records.append(dict(rec, model=name))
    finally:
        kernel_build.spec_observers.remove(observe)
    return records


def run_cases(names: List[str] | None) -> List[dict]:
    records = []
    for name, build in interpreter_cases():
        if names and name not in names:
            continue
        outs, ins = build()
        r = dict(_C.cuda.check_schedule(outs, ins, name))
        status = "ok" if r["passed"] else "FAILED " + r["message"].splitlines()[0]
        print(f"  {name:28s} {r['schedule']:9s} races={r['races']} oob={r['out_of_bounds']} "
              f"{status}")
        records.append(r)
    return records


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", metavar="PATH", help="write the summary, kernels and cases to PATH")
    p.add_argument("--arch", default="sm_90", help="GPU architecture of the cubins")
    p.add_argument("--ops", nargs="*", help="only these suite ops / interpreter cases")
    p.add_argument("--list", action="store_true", help="list the ops and cases, then exit")
    p.add_argument("--models", nargs="*", default=[],
                   help="also compile these models' kernels (benchmarks/models.py names)")
    args = p.parse_args()
    if args.list:
        print("\n".join([op.name for op in ops_suite.suite()] +
                        [name for name, _ in interpreter_cases()]))
        return

    device = _C.cuda.device_name(0) if _C.cuda.device_count() > 0 else None
    compiler = _C.cuda.compiler()
    print(f"compiler: {compiler}, device: {device}")
    kernels = compile_suite(args.ops, args.arch) if compiler != "none" else []
    model_kernels = compile_models(args.models, args.arch) if compiler != "none" else []
    cases = run_cases(args.ops)
    gemm2048 = [k for k in kernels if k["op"] == "gemm2048" and k["ok"] and k["construct"]]
    summary = {
        "sources_compiled": sum(k["ok"] for k in kernels),
        "sources_failed": sum(not k["ok"] for k in kernels),
        "model_kernels_compiled": sum(k["ok"] for k in model_kernels),
        "model_kernels_failed": sum(not k["ok"] for k in model_kernels),
        "models": args.models,
        "interpreter_cases": len(cases),
        "interpreter_failures": sum(not c["passed"] for c in cases),
        "races": sum(c["races"] for c in cases),
        "out_of_bounds": sum(c["out_of_bounds"] for c in cases),
        "uninitialized_reads": sum(c["uninitialized_reads"] for c in cases),
        "gemm2048_spills": gemm2048[0]["spill_bytes"] if gemm2048 else None,
        "device": device,
        "compiler": compiler,
        "arch": args.arch,
    }
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(summary, kernels=kernels, model_kernels=model_kernels, cases=cases),
                      f, indent=2)
        print(f"wrote {args.json}")
    bad = (summary["sources_failed"] or summary["model_kernels_failed"] or
           summary["interpreter_failures"] or
           summary["races"] or summary["out_of_bounds"] or (summary["gemm2048_spills"] or 0) > 0)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
