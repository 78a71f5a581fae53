"""Program reuse (ETO) against full search, in one process: BERT-base's matmul set (with the
selection's ablations), ResNet-50's convolutions at a smaller budget, and BERT-large tuned from
BERT-base's records.

    python benchmarks/reuse.py [--json out.json] [--trials 256] [--rounds 5] [--seed 0]
        [--seeds 1] [--sets bert_base ablations resnet50 bert_large] [--resnet-trials 64]

Sets (--sets; all four by default):
  bert_base      BERT-base at sequence 128, batch 1, its five batch-matmul shapes [b, M, N, K]
                 with their occurrences per forward pass: [1,128,768,768] x48,
                 [12,128,128,64] x12, [12,128,64,128] x12, [1,128,3072,768] x12,
                 [1,128,768,3072] x12
  ablations      on bert_base's first seed, against the same full search: ETO's selection
                 without bridges (minimum arborescence) and Selective Tuning's TopK (K=3: the
                 largest operator of each kind searched, the others try its 3 best programs)
  resnet50       ResNet-50's 23 distinct convolutions at batch 1 (53 per forward pass), each
                 searched with --resnet-trials measurements, against ETO
  bert_large     BERT-base tuned with ETO into a fresh records database, then BERT-large's five
                 shapes tuned with reuse from it (programs stored by another model, as a later
                 process finds them), against a full search of BERT-large

  pairs          ETO's directed reuse pairs without and with one-hop bridges (_C.reuse_pairs)
  full search    _C.tune_tasks over the set with --trials per kernel under the gradient task
                 scheduler, reuse off, from an empty cost model
  ETO            the same call with reuse on: the reuse selection (greedy directed Steiner tree
                 with one-hop bridge operators, tuned as tasks of their own) searches its roots,
                 the reuse tuner tunes the rest (bridges' measurements count as ETO's)
  throughput     every kernel of both sets built from its chosen schedule, checked against
                 torch, and timed side by side with the full search's kernel of the same shape
                 (common.paired_with_reference); the set's throughput ratio is
                 sum(w * full_ms) / sum(w * eto_ms), w the occurrences
  edges          per kernel the reuse tuner tuned: full search's time over ETO's (>= 1: ETO as
                 fast), and the selection's estimated trials beside the reuse tuner's actual
                 trials (the estimate ratio is their quotient)
  time to best   ETO's tuning wall time over the time the full search took to reach its final
                 objective (sum of occurrences x best latency, per scheduler round) within 1%

  seeds          --seeds N repeats bert_base's full search and ETO from N seeds. Each search
                 draws its own programs: two searches of one kernel (other seeds, or other tasks
                 beside it) end up to 15% apart either way on this machine, so one seed's set
                 ratio is partly a draw. The record's figures are medians over seeds of each
                 run's (its edge minimum too; "edge_min_all_seeds" is the least edge of any
                 seed); the per-seed records (with both sides' schedules) sit under "seeds"

JSON: {"set": "bert_base", "throughput_ratio", "trials_ratio", "time_to_best_ratio",
"edge_median", "edge_min", "estimate_ratio_mean", "pairs_without_bridges", "pairs_with_bridges",
"seeds": [{"seed", the same ratios, "full": {...}, "eto": {...}, "kernels": [...]}]};
{"set": "bert_base_ablation", "selection": "arborescence" | "topk", the same ratios};
{"set": "resnet50_convs", the same ratios, "kernels"}; and
{"set": "bert_large_from_records", "trials_ratio", "throughput_ratio", "wall_ratio", "kernels"}.
Bar (issue 21): throughput >= 0.97x full search with <= 35% of its trials and >= 2x less time to
reach it; per reuse edge median >= 0.97x, minimum >= 0.85x; estimated/actual trials within
[0.8, 1.25] on average; BERT-large from records: <= 15% of its trials at >= 0.95x throughput.
(The ablations and ResNet-50 are measured against the same figures; the bar is BERT-base's.)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from typing import Dict, List, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from tessera import _C  # noqa: E402
from common import arg_parser, paired_with_reference, print_table, write_json  # noqa: E402
import ops as op_suite  # noqa: E402
from ops import check_close  # noqa: E402

# [b, M, N, K] and occurrences per forward pass.
BERT_BASE = [((1, 128, 768, 768), 48), ((12, 128, 128, 64), 12), ((12, 128, 64, 128), 12),
             ((1, 128, 3072, 768), 12), ((1, 128, 768, 3072), 12)]
# BERT-large: hidden 1024, 16 heads of 64, FFN 4096, 24 layers.
BERT_LARGE = [((1, 128, 1024, 1024), 96), ((16, 128, 128, 64), 24), ((16, 128, 64, 128), 24),
              ((1, 128, 4096, 1024), 24), ((1, 128, 1024, 4096), 24)]
# ResNet-50 (torchvision, stride on the 3x3) at batch 1: (in channels, input size, out channels,
# kernel, stride, padding) and occurrences per forward pass (downsampling 1x1s included).
RESNET50_CONVS = [
    ((3, 224, 64, 7, 2, 3), 1),
    ((64, 56, 64, 1, 1, 0), 1), ((256, 56, 64, 1, 1, 0), 2), ((64, 56, 64, 3, 1, 1), 3),
    ((64, 56, 256, 1, 1, 0), 4),
    ((256, 56, 128, 1, 1, 0), 1), ((128, 56, 128, 3, 2, 1), 1), ((128, 28, 512, 1, 1, 0), 4),
    ((256, 56, 512, 1, 2, 0), 1), ((512, 28, 128, 1, 1, 0), 3), ((128, 28, 128, 3, 1, 1), 3),
    ((512, 28, 256, 1, 1, 0), 1), ((256, 28, 256, 3, 2, 1), 1), ((256, 14, 1024, 1, 1, 0), 6),
    ((512, 28, 1024, 1, 2, 0), 1), ((1024, 14, 256, 1, 1, 0), 5), ((256, 14, 256, 3, 1, 1), 5),
    ((1024, 14, 512, 1, 1, 0), 1), ((512, 14, 512, 3, 2, 1), 1), ((512, 7, 2048, 1, 1, 0), 3),
    ((1024, 14, 2048, 1, 2, 0), 1), ((2048, 7, 512, 1, 1, 0), 2), ((512, 7, 512, 3, 1, 1), 2),
]
# Within this factor of its final objective, the full search counts as having reached its best.
REACHED = 1.01
# The selections of the ablations, by their _C.tune_tasks names (ETO's own is "greedy").
ABLATIONS = ("arborescence", "topk")


class Member(NamedTuple):
    """A kernel of a set: the benchmark op (graph, torch reference, inputs), its occurrences per
    forward pass and its reduction length (for the tolerance of the check against torch)."""
    op: op_suite.Op
    weight: int
    reduce_len: int


def bmm_set(shapes) -> List[Member]:
    return [Member(op_suite.bmm("bmm_" + "x".join(str(d) for d in shape), shape[0], shape[1],
                                shape[3], shape[2], trans_b=False), weight, shape[3])
            for shape, weight in shapes]


def conv_set(convs) -> List[Member]:
    out = []
    for (c, h, o, k, stride, pad), weight in convs:
        name = f"conv_{c}x{h}_{o}_{k}x{k}s{stride}"
        out.append(Member(op_suite.conv(name, c, h, o, k, stride, pad), weight, c * k * k))
    return out


def tasks_of(members: List[Member]) -> list:
    out = []
    for m in members:
        outputs, inputs = m.op.build()
        out.append((outputs, inputs, m.op.name, float(m.weight), []))
    return out


def tune(members: List[Member], trials: int, seed: int, reuse: bool, records=None,
         selection: str = "greedy") -> dict:
    t0 = time.perf_counter()
    r = _C.tune_tasks(tasks_of(members), trials_per_task=trials, seed=seed, fresh_model=True,
                      reuse=reuse, records=records, reuse_selection=selection)
    r["wall_s"] = time.perf_counter() - t0
    r["trials"] = (r["trials_after"][-1] if r["trials_after"] else 0) + r["reuse_trials"]
    return r


def time_to_best_s(r: dict) -> float:
    """Wall seconds until the scheduler's objective first came within REACHED of its final
    value, assuming time proportional to trials."""
    final = r["objective"][-1]
    for obj, trials in zip(r["objective"], r["trials_after"]):
        if obj <= final * REACHED:
            return r["wall_s"] * trials / r["trials_after"][-1]
    return r["wall_s"]


def chosen(task: dict):
    """A tuned task's schedule; None (the rules') for one left untuned ("skipped": too small to
    tune, or its reuse failed, which is printed)."""
    if task["status"] != "skipped":
        return task["schedule"]
    if task["report"].note:
        print(f"{task['name']}: {task['report'].note}", flush=True)
    return None


def time_sets(members: List[Member], full: dict, eto: dict, rounds: int) -> List[dict]:
    """Per kernel: ETO's kernel timed against the full search's (both checked against torch); the
    table printed."""
    rows = []
    for m, f, e in zip(members, full["tasks"], eto["tasks"]):
        outputs, inputs = m.op.build()
        data = m.op.make_inputs()
        want = m.op.torch_fn(*data)
        kf = tessera.Kernel(outputs, inputs, schedule=chosen(f), name="full")
        ke = tessera.Kernel(outputs, inputs, schedule=chosen(e), name="eto")
        for tag, kern in (("full", kf), ("eto", ke)):
            check_close(f"{m.op.name}/{tag}", kern(*data), want, m.reduce_len)
        out_f, out_e = kf(*data), ke(*data)
        r = paired_with_reference({"eto": lambda: ke(*data, out=[out_e])},
                                  lambda: kf(*data, out=[out_f]), rounds=rounds,
                                  min_time_ms=100.0)
        rows.append({"kernel": m.op.name, "weight": m.weight, "status": e["status"],
                     "reused_from": e["reused_from_name"],
                     "full_ms": r["reference"], "eto_ms": r["eto"] * r["reference"],
                     "full_vs_eto": 1.0 / r["eto"], "eto_trials": e["report"].trials,
                     "full_trials": f["report"].trials, "full_schedule": kf.report.schedule.dump(),
                     "eto_schedule": ke.report.schedule.dump()})
    print_table(rows, ["kernel", "weight", "status", "reused_from", "full_ms", "eto_ms",
                       "full_vs_eto", "eto_trials", "full_trials"])
    return rows


def set_throughput(rows: List[dict]) -> float:
    return sum(r["weight"] * r["full_ms"] for r in rows) / sum(r["weight"] * r["eto_ms"] for r in rows)


def selection_of(members: List[Member], trials: int, method: str = "greedy") -> dict:
    described = [(o, i, n) for o, i, n, _, _ in tasks_of(members)]
    return _C.reuse_selection(described, method=method, full_search_trials=trials)


def against_full(members: List[Member], full: dict, eto: dict, selection: dict,
                 rounds: int) -> dict:
    """One reuse run against one full search: kernels timed side by side, the set's ratios, and
    per reuse edge the speed ratio and the selection's estimated trials beside the actual."""
    rows = time_sets(members, full, eto, rounds)
    estimate: Dict[str, float] = {}
    for step in selection["steps"]:
        if step["source"] >= 0 and not step["bridge"]:
            estimate[step["name"]] = step["trials"]
    for r in rows:
        if r["status"] == "reuse" and r["kernel"] in estimate:
            r["estimated_trials"] = estimate[r["kernel"]]
    edges = [r["full_vs_eto"] for r in rows if r["status"] == "reuse"]
    est_ratios = [r["estimated_trials"] / r["eto_trials"] for r in rows
                  if "estimated_trials" in r and r["eto_trials"] > 0]
    return {"throughput_ratio": set_throughput(rows),
            "trials_ratio": eto["trials"] / full["trials"],
            "time_to_best_ratio": eto["wall_s"] / time_to_best_s(full),
            "edges": edges, "estimate_ratios": est_ratios,
            "edge_median": statistics.median(edges) if edges else None,
            "edge_min": min(edges) if edges else None,
            "estimate_ratio_mean": statistics.mean(est_ratios) if est_ratios else None,
            "full": {"trials": full["trials"], "wall_s": full["wall_s"],
                     "time_to_best_s": time_to_best_s(full)},
            "eto": {"trials": eto["trials"], "reuse_trials": eto["reuse_trials"],
                    "wall_s": eto["wall_s"]},
            "kernels": rows}


def compare_once(members: List[Member], trials: int, seed: int, selection: dict,
                 rounds: int) -> tuple:
    """Full search and ETO from one seed, their kernels timed side by side. Returns the record
    and the full search's result (for the ablations)."""
    full = tune(members, trials, seed, reuse=False)
    print(f"seed {seed}: full search: {full['trials']} trials, {full['wall_s']:.0f} s", flush=True)
    eto = tune(members, trials, seed, reuse=True)
    print(f"seed {seed}: ETO: {eto['trials']} trials ({eto['reuse_trials']} by the reuse tuner), "
          f"{eto['wall_s']:.0f} s", flush=True)
    record = {"seed": seed, **against_full(members, full, eto, selection, rounds)}
    print(f"seed {seed}: set throughput {record['throughput_ratio']:.3f}, edges "
          f"{', '.join(f'{e:.3f}' for e in record['edges'])}", flush=True)
    return record, full


def over_seeds(per_seed: List[dict]) -> dict:
    """The bert_base record: each per-run figure (set throughput, trials, time to best, the
    run's edge median and edge minimum) as its median over seeds, since each seed's searches draw
    different programs and one run's ratio of two searches is partly a draw; the minimum over
    every seed's edges beside it; the per-seed records kept under "seeds"."""
    med = lambda key: statistics.median(s[key] for s in per_seed)  # noqa: E731
    edges = [e for s in per_seed for e in s["edges"]]
    est = [e for s in per_seed for e in s["estimate_ratios"]]
    return {"set": "bert_base", "seeds": per_seed, "throughput_ratio": med("throughput_ratio"),
            "trials_ratio": med("trials_ratio"), "time_to_best_ratio": med("time_to_best_ratio"),
            "edge_median": med("edge_median") if edges else None,
            "edge_min": med("edge_min") if edges else None,
            "edge_min_all_seeds": min(edges) if edges else None,
            "estimate_ratio_mean": statistics.mean(est) if est else None}


RATIO_COLUMNS = ["set", "throughput_ratio", "trials_ratio", "time_to_best_ratio", "edge_median",
                 "edge_min", "estimate_ratio_mean"]


def bars_of(record: dict) -> dict:
    return {
        "throughput_ge_0.97": record["throughput_ratio"] >= 0.97,
        "trials_le_0.35": record["trials_ratio"] <= 0.35,
        "time_to_best_le_0.5": record["time_to_best_ratio"] <= 0.5,
        "edge_median_ge_0.97": (record["edge_median"] or 0) >= 0.97,
        "edge_min_ge_0.85": (record["edge_min"] or 0) >= 0.85,
        "estimate_ratio_in_0.8_1.25": record["estimate_ratio_mean"] is not None
        and 0.8 <= record["estimate_ratio_mean"] <= 1.25,
    }


def ablation_records(members: List[Member], trials: int, seed: int, full: dict,
                     rounds: int) -> List[dict]:
    """ETO's selection replaced by each of ABLATIONS, against the same full search."""
    out = []
    for method in ABLATIONS:
        selection = selection_of(members, trials, method)
        print(f"ablation {method}:\n{selection['text']}", flush=True)
        run = tune(members, trials, seed, reuse=True, selection=method)
        print(f"ablation {method}: {run['trials']} trials ({run['reuse_trials']} outside the "
              f"searches), {run['wall_s']:.0f} s", flush=True)
        record = {"set": "bert_base_ablation", "selection": method, "seed": seed,
                  **against_full(members, full, run, selection, rounds)}
        record["bars"] = bars_of(record)
        out.append(record)
    print_table(out, ["selection"] + RATIO_COLUMNS[1:])
    return out


def bert_base_records(trials: int, first_seed: int, seeds: int, rounds: int,
                      ablations: bool) -> List[dict]:
    """The BERT-base set: reuse pairs, the selection, and full search against ETO per seed; the
    ablations on the first seed's full search."""
    members = bmm_set(BERT_BASE)
    described = [(o, i, n) for o, i, n, _, _ in tasks_of(members)]
    without = _C.reuse_pairs(described, bridges=False)
    with_bridges = _C.reuse_pairs(described, bridges=True)
    print(f"reuse pairs: {len(without['pairs'])} without bridges, "
          f"{len(with_bridges['pairs'])} with {len(with_bridges['bridges'])} bridges", flush=True)
    selection = selection_of(members, trials)
    print(selection["text"], flush=True)

    per_seed, fulls = [], []
    for seed in range(first_seed, first_seed + seeds):
        record, full = compare_once(members, trials, seed, selection, rounds)
        per_seed.append(record)
        fulls.append(full)
    record = over_seeds(per_seed)
    record.update({"trials_per_kernel": trials, "pairs_without_bridges": len(without["pairs"]),
                   "pairs_with_bridges": len(with_bridges["pairs"]),
                   "threads": torch.get_num_threads()})
    record["bars"] = bars_of(record)
    print_table([record], RATIO_COLUMNS + ["pairs_without_bridges", "pairs_with_bridges"])
    print("bars:", record["bars"])
    out = [record]
    if ablations:
        out += ablation_records(members, trials, first_seed, fulls[0], rounds)
    return out


def resnet50_record(trials: int, seed: int, rounds: int) -> dict:
    """ResNet-50's convolutions: full search against ETO at `trials` per kernel."""
    members = conv_set(RESNET50_CONVS)
    selection = selection_of(members, trials)
    print(selection["text"], flush=True)
    record, _ = compare_once(members, trials, seed, selection, rounds)
    record = {"set": "resnet50_convs", "trials_per_kernel": trials, **record}
    record["bars"] = bars_of(record)
    print_table([record], RATIO_COLUMNS)
    return record


def bert_large_from_records(trials: int, seed: int, rounds: int) -> dict:
    """BERT-base tuned with ETO into a fresh records database, then BERT-large tuned from it
    (another model, as a later process would), against a full search of BERT-large."""
    path = os.path.join(tempfile.mkdtemp(prefix="tessera-reuse-"), "records.db")
    records = _C.RecordsDB(path)
    large_set = bmm_set(BERT_LARGE)
    tune(bmm_set(BERT_BASE), trials, seed, reuse=True, records=records)
    large = tune(large_set, trials, seed, reuse=True, records=records)
    full = tune(large_set, trials, seed, reuse=False)
    print(f"BERT-large from records: {large['trials']} trials, {large['wall_s']:.0f} s; full "
          f"search {full['trials']} trials, {full['wall_s']:.0f} s", flush=True)
    rows = time_sets(large_set, full, large, rounds)
    return {"set": "bert_large_from_records", "trials_ratio": large["trials"] / full["trials"],
            "throughput_ratio": set_throughput(rows), "wall_ratio": large["wall_s"] / full["wall_s"],
            "kernels": rows,
            "bars": {"trials_le_0.15": large["trials"] / full["trials"] <= 0.15,
                     "throughput_ge_0.95": set_throughput(rows) >= 0.95}}


SETS = ("bert_base", "ablations", "resnet50", "bert_large")


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--trials", type=int, default=0,
                   help="full search's measurements per kernel (0: the tuning policy's)")
    p.add_argument("--resnet-trials", type=int, default=0,
                   help="per ResNet-50 convolution (0: a quarter of --trials)")
    p.add_argument("--seed", type=int, default=0, help="first seed")
    p.add_argument("--seeds", type=int, default=1,
                   help="BERT-base compared from this many seeds (seed, seed+1, ...); the record "
                        "holds the medians over seeds")
    p.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS),
                   help="what to run (ablations run with bert_base)")
    args = p.parse_args()
    trials = args.trials or _C.tuning_policy().search_trials
    records = []
    if "bert_base" in args.sets:
        records += bert_base_records(trials, args.seed, args.seeds, args.rounds,
                                     "ablations" in args.sets)
    if "resnet50" in args.sets:
        records.append(resnet50_record(args.resnet_trials or max(8, trials // 4), args.seed,
                                       args.rounds))
    if "bert_large" in args.sets:
        large = bert_large_from_records(trials, args.seed, args.rounds)
        print_table([large], ["set", "trials_ratio", "throughput_ratio", "wall_ratio"])
        print("bars:", large["bars"])
        records.append(large)
    write_json(args.json, records)


if __name__ == "__main__":
    main()
