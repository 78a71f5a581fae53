"""Weights prepacked once (options prepack_weights) against packing on every call, in one process.

    python benchmarks/prepack.py [--json out.json] [--models resnet18 mobilenet_v2] [--rounds 5]

Per model (batch 1, eval, no grad) two compiles that differ only in prepack_weights. Every
partition takes Tessera's fused kernel (TESSERA_FORCE_CHOICE=tessera), so both compiles run the
same kernels with the same schedules and only the packing of the weights differs; the tuned
schedules come from one records database (the first compile tunes, the second reads them).
Both are checked against eager, then timed side by side (common.paired_with_reference, the
per-call-packing compile as the reference).

JSON: one record per model {"model", "per_call_ms", "prepacked_ms", "speedup",
"prepacked_kernels", "weight_packs_per_call"} (weight_packs_per_call counts packed copies made
during the timed calls: 0 when nothing is packed again).
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from tessera.backend import kernel_build  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402
from models import build  # noqa: E402


def bench(name: str, rounds: int) -> dict:
    model, x = build(name, 1)
    model.eval()
    db = os.path.join(tempfile.mkdtemp(prefix="tessera-prepack-"), "records.db")
    compiled = {}
    torch._dynamo.reset()  # once: a reset between the two would drop the first one's graphs
    with torch.no_grad():
        want = model(x)
        for prepack in (True, False):
            f = torch.compile(copy.deepcopy(model), backend="tessera",
                              options={"records_db": db, "prepack_weights": prepack})
            f(x)
            torch.testing.assert_close(f(x), want, rtol=1e-3, atol=1e-3)
            compiled[prepack] = f
        prepacked_kernels = sum(1 for k in kernel_build.cached_kernels() if k.prepacks)
        before = kernel_build.stats["weight_packs"]
        r = paired_with_reference({"prepacked": lambda: compiled[True](x)},
                                  lambda: compiled[False](x), rounds=rounds, min_time_ms=200.0)
        packs = kernel_build.stats["weight_packs"] - before
    return {"model": name, "per_call_ms": r["reference"],
            "prepacked_ms": r["prepacked"] * r["reference"], "speedup": 1.0 / r["prepacked"],
            "prepacked_kernels": prepacked_kernels, "weight_packs_per_call": packs}


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--models", nargs="+", default=["resnet18", "mobilenet_v2"])
    args = p.parse_args()
    os.environ["TESSERA_FORCE_CHOICE"] = "tessera"
    records = [bench(name, args.rounds) for name in args.models]
    print_table(records, ["model", "per_call_ms", "prepacked_ms", "speedup", "prepacked_kernels",
                          "weight_packs_per_call"])
    write_json(args.json, records)


if __name__ == "__main__":
    main()
