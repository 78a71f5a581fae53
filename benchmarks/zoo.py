"""The model zoo: two dozen architectures through torch.compile(backend="tessera"), against eager
and Inductor, in one process.

    python benchmarks/zoo.py [--models resnet bert ...] [--families cnn decoder ...]
                             [--rounds 5] [--openvino] [--json out.json]

The models (benchmarks/zoo_models.py) come from transformers configs with random weights, small
enough to compile in seconds: CNNs (incl. depthwise-separable and squeeze-excitation), vision
transformers (plain, windowed, hierarchical, relative position bias), segmentation heads,
encoders, encoder-decoders, decoders (grouped-query attention, rotary) and speech models (1-D
convolution front ends, group norm). timm is not among them: it needs torchvision, whose PyPI
build does not import beside the CPU torch this project pins.

Per model one record {"model", "family", "correct", "max_abs_err", "eager_ms", "inductor_ms",
"tessera_ms", "vs_eager", "vs_inductor", "compile_s", "inductor_compile_s", "kernels",
"fallbacks": {"unsupported", "slower", "internal_error"}, "fallback_reasons"} (fallbacks:
partitions and operators left to ATen, by category; benchmarks/models.py says how each field is
measured). A model that fails to build or compile gets a record with "error" and correct false.
With --openvino, OpenVINO's native runtime is timed in the same rounds (benchmarks/
peer_runtimes.py; `make peers` installs it): "openvino_ms", "vs_openvino" (above 1, Tessera is
faster), "openvino_compile_s", "openvino_note" (why the column is empty where it is).
Each model is measured in a process of its own, so both compilers start cold on every model.
The summary line: correct models, internal errors, models below eager, geomean vs Inductor and
vs eager, the share of models compiled no slower than Inductor, and with --openvino the geomean
and minimum vs OpenVINO over the models it converts.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from common import arg_parser, print_table, write_json  # noqa: E402
from models import bench_module  # noqa: E402
from zoo_models import build, zoo  # noqa: E402

COLUMNS = ["model", "family", "correct", "max_abs_err", "eager_ms", "inductor_ms", "tessera_ms",
           "vs_eager", "vs_inductor", "compile_s", "inductor_compile_s", "kernels", "unsupported",
           "slower", "internal_error"]


def warm_up_compilers() -> None:
    """Compiles a two-operator function with both compilers once, so that no model's compile
    time includes what the first compile in a process pays (imports, hardware probes, Inductor's
    C++ toolchain checks)."""
    x = torch.randn(64, 64)
    for backend in ("tessera", "inductor"):
        torch._dynamo.reset()
        torch.compile(lambda a: torch.relu(a @ a + 1), backend=backend)(x)
    torch._dynamo.reset()


def bench_zoo_model(name: str, family: str, rounds: int, scratch: str, openvino: bool) -> dict:
    """The zoo's record of one model (benchmarks/models.py's bench_module measures it)."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    options = {"records_db": os.path.join(scratch, "records.db")}
    model, x = build(name)
    r = bench_module(model, x, rounds, options, openvino=openvino)
    return {"model": name, "family": family, "correct": r["correct"],
            "max_abs_err": r["max_abs_err"], "eager_ms": r["eager_ms"],
            "inductor_ms": r["inductor_ms"], "tessera_ms": r["tessera_ms"],
            "vs_eager": r["speedup_vs_eager"], "vs_inductor": r["speedup_vs_inductor"],
            "compile_s": r["compile_s"], "inductor_compile_s": r["inductor_compile_s"],
            "kernels": r["kernels"], "fallbacks": r["fallbacks"],
            "fallback_reasons": r["fallback_reasons"],
            **{k: r[k] for k in OPENVINO_FIELDS if k in r}}


OPENVINO_FIELDS = ["openvino_ms", "vs_openvino", "openvino_compile_s", "openvino_note"]


def failed_record(name: str, family: str, error: str) -> dict:
    return {"model": name, "family": family, "correct": False, "error": error,
            "fallbacks": {"unsupported": 0, "slower": 0, "internal_error": 0}}


def summary_line(records: list) -> str:
    ok = [r for r in records if "error" not in r]
    correct = sum(r["correct"] for r in records)
    internal = sum(r["fallbacks"]["internal_error"] for r in records)
    below = [r["model"] for r in ok if r["vs_eager"] < 1.0]
    geo = (lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan"))
    compile_ok = sum(r["compile_s"] <= r["inductor_compile_s"] for r in ok)
    peer = [r["vs_openvino"] for r in ok if r.get("vs_openvino")]
    peer_text = (f", geomean {geo(peer):.2f}x OpenVINO on the {len(peer)} it converts "
                 f"(min {min(peer):.2f})" if peer else "")
    return (f"zoo: {correct}/{len(records)} correct, {internal} internal-error fallbacks, "
            f"{len(below)} below eager{' (' + ', '.join(below) + ')' if below else ''}, "
            f"geomean {geo([r['vs_inductor'] for r in ok]):.2f}x Inductor, "
            f"{geo([r['vs_eager'] for r in ok]):.2f}x eager, compile <= Inductor's on "
            f"{compile_ok}/{len(ok)}{peer_text}")


def run_one(name: str, rounds: int, openvino: bool) -> dict:
    """One model's record, measured in this process (a fresh one: see main)."""
    family = zoo()[name][0]
    # Cold compiles for both compilers: a records database and an Inductor cache directory of
    # the model's own.
    scratch = tempfile.mkdtemp(prefix=f"tessera-zoo-{name}-")
    warm_up_compilers()
    try:
        return bench_zoo_model(name, family, rounds, scratch, openvino)
    except Exception as e:  # one model's failure is reported, not the end of the zoo
        traceback.print_exc()
        return failed_record(name, family, f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_in_subprocess(name: str, rounds: int, verbose: bool, openvino: bool,
                      timeout_s: float) -> dict:
    """One model's record from a process of its own: every compile is cold (no kernel, decision
    or JIT cache of an earlier model in memory) and a crash costs that model alone."""
    with tempfile.TemporaryDirectory(prefix="tessera-zoo-") as tmp:
        out = os.path.join(tmp, "record.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--rounds", str(rounds),
               "--json", out] + (["--verbose"] if verbose else []) + (
                   ["--openvino"] if openvino else [])
        try:
            rc = subprocess.run(cmd, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            return failed_record(name, zoo()[name][0], f"timed out after {timeout_s:.0f} s")
        if rc != 0 or not os.path.exists(out):
            return failed_record(name, zoo()[name][0], f"the model's process exited with {rc}")
        with open(out) as f:
            return json.load(f)[0]


def main() -> None:
    p = arg_parser(__doc__)
    models = zoo()
    p.add_argument("--models", nargs="+", choices=list(models), default=list(models))
    p.add_argument("--families", nargs="+", choices=sorted({f for f, _ in models.values()}),
                   help="only the models of these families")
    p.add_argument("--verbose", action="store_true", help="log Tessera's partitions and choices")
    p.add_argument("--openvino", action="store_true",
                   help="also time OpenVINO's native runtime (benchmarks/peer_runtimes.py)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per model")
    p.add_argument("--one", metavar="MODEL", choices=list(models), help=argparse.SUPPRESS)
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(message)s")
    if args.one:  # the child process of run_in_subprocess
        write_json(args.json, [run_one(args.one, args.rounds, args.openvino)])
        return
    columns = COLUMNS + (["openvino_ms", "vs_openvino"] if args.openvino else [])
    names = [n for n in args.models if not args.families or models[n][0] in args.families]
    records = []
    for name in names:
        r = run_in_subprocess(name, args.rounds, args.verbose, args.openvino, args.timeout)
        print_table([_row(r)], columns)
        for category, reasons in r.get("fallback_reasons", {}).items():
            if category != "slower":
                for reason in reasons:
                    print(f"  {category}: {reason}")
        if "error" in r:
            print(f"  error: {r['error']}")
        if r.get("openvino_note"):
            print(f"  OpenVINO {r['openvino_note']}")
        records.append(r)
        sys.stdout.flush()
    print()
    print_table([_row(r) for r in records], columns)
    print(summary_line(records))
    write_json(args.json, records)


def _row(r: dict) -> dict:
    """The record with its fallback counts as columns of their own."""
    return {**r, **r["fallbacks"]}


if __name__ == "__main__":
    main()
