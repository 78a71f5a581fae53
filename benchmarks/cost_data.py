"""A reusable data set for the learned cost model's held-out ranking (issue 15's bar "held-out
Spearman >= 0.7"): measure once, then evaluate features and training offline.

    python benchmarks/cost_data.py collect --out data.json [--ops ...] [--trials 256]
        [--random-trials 128] [--seed 0]
    python benchmarks/cost_data.py heldout data.json [--ops ...] [--sources search_xgboost ...]
        [--equal-shares] [--rounds 60] [--max-depth 10]
        [--eta 0.2] [--objective rank|squared] [--no-normalise] [--features features.npz]
        [--json out.json]

collect: per op, one search (_C.search_task, XGBoost, an empty model of its own) of --trials
measurements, then one search with random model scores of --random-trials (a wider spread of
valid programs, as the first rounds and the eps-greedy picks of search measure). Every measured
program is kept as {"schedule": its JSON, "median_ms" (-1: failed), "source"} per op; the file
holds no features, so a change to the features is evaluated on the same measurements.

heldout: rebuilds each op, lowers its stored schedules (by default those of the XGBoost search
only, the programs search measures, as the bar in benchmarks/search.py takes them; --sources adds
the random-score search's), extracts the current features, and prints
per op the Spearman's rho of an XGBoost model trained on the OTHER ops' programs (labels =
throughput / the op's best) against measured throughput, and their mean (_C.heldout_spearman, as
benchmarks/search.py computes it), and the in-task rho of a model trained on the first half of the
op's programs (measurement order) ranking the second half, and the rho of Gensor's analytic
estimate alone (_C.analytic_estimates: the learned model's prior, with no training). --prior-weight
sets the prior's weight in the model (0: the trees alone). --features also writes every program's
feature rows (stores and the program row) and measured throughput to an .npz (rows_<op> [rows x
features], row_program_<op>, throughput_<op>, feature_names) for analysis outside C++.

Ops: the seven of benchmarks/search.py's held-out bar (gemm1024, bert_qk, bert_av,
resnet_conv1_7x7s2, resnet_res3_3x3, resnet_res5_3x3, depthwise_3x3) plus a skinny GEMM and three
ResNet convolutions of ops.py and two MobileNetV2 depthwise layers, so that one unusual op weighs
less in the mean and no kind of op is alone (the bar's mean is over the seven; the mean over all
is printed beside it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import tessera  # noqa: E402,F401  (loads the extension and its ops)
from tessera import _C  # noqa: E402
from common import uniform_draw  # noqa: E402
from ops import conv, suite  # noqa: E402

BAR_OPS = ["gemm1024", "bert_qk", "bert_av", "resnet_conv1_7x7s2", "resnet_res3_3x3",
           "resnet_res5_3x3", "depthwise_3x3"]
EXTRA_OPS = ["gemm_16384x32x1024", "resnet_res2_1x1", "resnet_res2_3x3", "resnet_res4_3x3",
             "mbv2_dw_96x112s2", "mbv2_dw_384x14"]


def more_ops():
    """MobileNetV2 depthwise layers besides ops.py's: depthwise_3x3 is the one memory-bound op of
    the bar, and without another one no model trained on the others has seen its kind."""
    return [conv("mbv2_dw_96x112s2", 96, 112, 96, 3, 2, 1, groups=96),
            conv("mbv2_dw_384x14", 384, 14, 384, 3, 1, 1, groups=384)]


def ops_named(names: List[str]):
    by_name = {op.name: op for op in suite() + more_ops()}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise SystemExit(f"unknown ops: {missing}")
    return [by_name[n] for n in names]


def measured(result: dict, source: str) -> List[dict]:
    return [{"schedule": t["schedule"].dump(), "median_ms": t["median_ms"] if t["ok"] else -1.0,
             "source": source} for t in result["trials"]]


def collect(args) -> None:
    data: Dict[str, dict] = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            data = json.load(f)  # resume: ops already collected are kept
    for op in ops_named(args.ops):
        if op.name in data:
            print(f"{op.name}: kept from {args.out}", flush=True)
            continue
        outputs, inputs = op.build()
        t0 = time.perf_counter()
        programs = []
        for model, trials in (("xgboost", args.trials), ("random", args.random_trials)):
            if trials > 0:
                r = _C.search_task(outputs, inputs, trials=trials, seed=args.seed, name=op.name,
                                   model=model, fresh_model=True)
                programs += measured(r, f"search_{model}")
        data[op.name] = {"shape": op.shape, "flops": op.flops, "programs": programs}
        ok = sum(p["median_ms"] > 0 for p in programs)
        print(f"{op.name}: {len(programs)} programs ({ok} ok) in {time.perf_counter() - t0:.0f} s",
              flush=True)
        with open(args.out, "w") as f:  # after every op, so that a long run can be resumed
            json.dump(data, f)


def load_tasks(path: str, names: List[str], sources: List[str], equal_shares: bool = False):
    with open(path) as f:
        data = json.load(f)
    names = [n for n in names if n in data]
    tasks = []
    for op in ops_named(names):
        outputs, inputs = op.build()
        by_source = {s: [p for p in data[op.name]["programs"] if p["source"] == s]
                     for s in sources}
        if equal_shares:  # as many of each source as the smallest has (benchmarks/search.py)
            n = min(len(ps) for ps in by_source.values())
            by_source = {s: uniform_draw(ps, n) for s, ps in by_source.items()}
        programs = [p for s in sources for p in by_source[s]]
        tasks.append((outputs, inputs, [_C.KernelSchedule.parse(p["schedule"]) for p in programs],
                      [p["median_ms"] for p in programs]))
    return names, tasks


def write_features(path: str, names: List[str], tasks) -> None:
    arrays = {"feature_names": np.array(_C.feature_names())}
    for name, (outputs, inputs, schedules, times) in zip(names, tasks):
        rows, row_program, tput = [], [], []
        for p, f in enumerate(_C.program_features(outputs, inputs, schedules)):
            if f is None:
                continue  # did not lower
            rows.append(f)
            row_program += [len(tput)] * f.shape[0]
            tput.append(1.0 / times[p] if times[p] > 0 else 0.0)
        arrays[f"rows_{name}"] = np.concatenate(rows)
        arrays[f"row_program_{name}"] = np.array(row_program)
        arrays[f"throughput_{name}"] = np.array(tput)
    np.savez_compressed(path, **arrays)
    print(f"wrote features of {len(names)} ops to {path}")


def mean_over(rho: Dict[str, float], names) -> float | None:
    vals = [rho[n] for n in names if n in rho and rho[n] == rho[n]]
    return statistics.mean(vals) if vals else None


def spearman(a, b) -> float:
    """Rank correlation of two series (continuous values: ties are not averaged)."""
    ra, rb = (np.argsort(np.argsort(np.asarray(x))).astype(float) for x in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(ra) > 1 else float("nan")


def analytic_spearman(task) -> float:
    """rho of Gensor's analytic estimate alone (the learned model's prior, no training) against
    measured throughput, over the programs both time."""
    outputs, inputs, schedules, times = task
    est = _C.analytic_estimates(outputs, inputs, schedules)
    pairs = [(1.0 / e, 1.0 / t) for e, t in zip(est, times) if e > 0 and t > 0]
    return spearman(*zip(*pairs)) if len(pairs) > 1 else float("nan")


def heldout(args) -> None:
    names, tasks = load_tasks(args.data, args.ops, args.sources, args.equal_shares)
    if args.features:
        write_features(args.features, names, tasks)
    options = {"rounds": args.rounds, "max_depth": args.max_depth, "eta": args.eta,
               "normalise": not args.no_normalise, "objective": args.objective,
               "prior_weight": args.prior_weight}
    t0 = time.perf_counter()
    rho = dict(zip(names, _C.heldout_spearman(tasks, **options)))
    own = dict(zip(names, _C.intask_spearman(tasks, 0.5, **options)))
    prior = {n: analytic_spearman(t) for n, t in zip(names, tasks)}
    print(f"  {'op':24s} held-out  in-task  analytic")
    for n in names:
        print(f"  {n:24s} {rho[n]:8.3f} {own[n]:8.3f} {prior[n]:9.3f}"
              f"{'' if n in BAR_OPS else '  (extra)'}")
    summary = {"heldout_spearman": mean_over(rho, BAR_OPS), "heldout_spearman_all":
               mean_over(rho, names), "intask_spearman_all": mean_over(own, names),
               "analytic_spearman": mean_over(prior, BAR_OPS),
               "analytic_spearman_all": mean_over(prior, names),
               "per_op": rho, "intask_per_op": own, "analytic_per_op": prior, "options": options,
               "seconds": time.perf_counter() - t0}
    print(f"held-out mean over the bar's ops: {summary['heldout_spearman']:.3f}; over all "
          f"{len(names)} ops: {summary['heldout_spearman_all']:.3f}; in-task mean (first half "
          f"trains, second half ranked): {summary['intask_spearman_all']:.3f}; the analytic "
          f"estimate alone: {summary['analytic_spearman']:.3f} (bar's ops), "
          f"{summary['analytic_spearman_all']:.3f} (all)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="measure programs per op and store them")
    c.add_argument("--out", required=True, help="JSON file (an existing one is extended)")
    c.add_argument("--ops", nargs="*", default=BAR_OPS + EXTRA_OPS)
    c.add_argument("--trials", type=int, default=256, help="measurements of the XGBoost search")
    c.add_argument("--random-trials", type=int, default=128,
                   help="measurements of the search with random scores")
    c.add_argument("--seed", type=int, default=0)
    h = sub.add_parser("heldout", help="leave-one-op-out Spearman on a collected data set")
    h.add_argument("data")
    h.add_argument("--ops", nargs="*", default=BAR_OPS + EXTRA_OPS)
    h.add_argument("--sources", nargs="*", default=["search_xgboost"],
                   help="which collected programs to use (search_xgboost: what search measures, "
                        "as benchmarks/search.py's bar; search_random: the wider spread)")
    h.add_argument("--equal-shares", action="store_true",
                   help="as many programs of each source as the smallest source has, drawn "
                        "uniformly (benchmarks/search.py's held-out sample)")
    h.add_argument("--rounds", type=int, default=60, help="XGBoost boosting rounds")
    h.add_argument("--max-depth", type=int, default=10)
    h.add_argument("--eta", type=float, default=0.2)
    h.add_argument("--objective", choices=["rank", "squared"], default="rank",
                   help="XGBoost objective (squared: Ansor's pack-sum regression, the baseline)")
    h.add_argument("--prior-weight", type=float, default=-1.0,
                   help="weight of the analytic prior in the model's score (0: trees alone, "
                        "the model before the program row; < 0: search mode's default)")
    h.add_argument("--no-normalise", action="store_true",
                   help="features not divided by the task's work (version 1, the baseline)")
    h.add_argument("--features", metavar="NPZ", help="also write the feature rows here")
    h.add_argument("--json", metavar="PATH", help="write the result here")
    args = p.parse_args()
    os.environ.setdefault("TESSERA_PROGRESS", "0")
    if args.cmd == "collect":
        collect(args)
    else:
        heldout(args)


if __name__ == "__main__":
    main()
