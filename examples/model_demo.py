"""Tessera demo: compile a real model and compare its latency with eager PyTorch and Inductor.

    python examples/model_demo.py [--model bert|resnet18] [--rounds 5] [--quick] [--threads N]

    make demo     (runs this with the defaults)

The default model is a small BERT encoder (4 layers, hidden size 256, 4 heads, sequence length
128) built from a transformers config with random weights: nothing is downloaded. --model
resnet18 takes ResNet-18 at 224x224 (batch 1) instead; --quick a 2-layer BERT and shorter
timings (the test suite runs that).

What happens on the first call of torch.compile(model, backend="tessera"): the graph is traced
and decomposed to core ATen, partitions of supported operators become fused Tessera kernels,
kernels with enough summation work are tuned by construct mode (verified against the default
schedule's output, kept only where faster), and every matmul partition is timed against ATen to
choose the faster implementation. Tuned schedules and those choices go to the records database
(~/.cache/tessera/records.db, or $TESSERA_RECORDS_DB), so running the demo a second time skips
the tuning and the measurements: compare the two "Tessera compile" lines.

Latencies are medians of interleaved rounds (each implementation timed in turn, round after
round), so a burst of background load does not land on one of them only. On a machine where
other processes keep the cores busy, operators that run on several threads wait for each other
and every implementation's latency suffers differently: --threads 1 compares them without that.
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

import tessera
from tessera.models import HiddenStates, ResNet18
from tessera.backend import records


# ---- models ---------------------------------------------------------------------------------

def small_bert(layers: int, seq: int):
    from transformers import BertConfig, BertModel
    config = BertConfig(hidden_size=256, num_hidden_layers=layers, num_attention_heads=4,
                        intermediate_size=1024, max_position_embeddings=seq)
    model = HiddenStates(BertModel(config))
    return model, torch.randint(0, config.vocab_size, (1, seq))


def build(name: str, quick: bool):
    torch.manual_seed(0)
    if name == "bert":
        if quick:
            return "BERT (2 layers, hidden 256, seq 64)", *small_bert(2, 64)
        return "BERT (4 layers, hidden 256, seq 128)", *small_bert(4, 128)
    if name == "resnet18":
        return "ResNet-18 (224x224, batch 1)", ResNet18(), torch.randn(1, 3, 224, 224)
    raise ValueError(name)


# ---- timing ---------------------------------------------------------------------------------

def interleaved(fns, rounds: int, min_ms: float):
    """Median ms of each implementation by Tessera's one noise rule (tessera.timing): the first
    is the reference, every other is timed between two rounds of it."""
    names = list(fns)
    r = tessera.timing.compare(fns[names[0]], {k: fns[k] for k in names[1:]}, rounds=rounds,
                               min_rounds=rounds, round_ms=min_ms, min_calls=3,
                               budget_ms=float("inf"))
    if r.errors:
        raise RuntimeError(f"timing failed: {r.errors}")
    return {names[0]: r.reference_ms, **r.ms}


def first_call_s(fn, x) -> float:
    t0 = time.perf_counter()
    fn(x)
    return time.perf_counter() - t0


# ---- demo -----------------------------------------------------------------------------------

def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=["bert", "resnet18"], default="bert")
    p.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    p.add_argument("--quick", action="store_true", help="smaller model, shorter timings")
    p.add_argument("--threads", type=int, default=0,
                   help="threads for ATen and Tessera (default: torch's default)")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
        tessera.set_num_threads(args.threads)
    rounds, min_ms = (3, 30.0) if args.quick else (args.rounds, 150.0)

    title, model, x = build(args.model, args.quick)
    model.eval()
    print(f"tessera {tessera.__version__}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; records: {records.resolve_path(None) or 'off'}")
    print(f"model: {title}")

    # Each compiler gets its own copy of the model: nothing compiled is shared. The copies are
    # made outside inference mode, as a model is loaded: weights made under it have no version
    # counter, and Tessera then packs them again on every call (it logs a warning).
    t_model, i_model = copy.deepcopy(model), copy.deepcopy(model)
    with torch.inference_mode():
        want = model(x)

        before = records.counters()
        fast = torch.compile(t_model, backend="tessera")
        tessera_compile = first_call_s(fast, x)  # traces, records shapes, compiles, tunes
        got = fast(x)
        done = records.counters()
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)

        inductor = torch.compile(i_model)
        inductor_compile = first_call_s(inductor, x)
        torch.testing.assert_close(inductor(x), want, rtol=1e-3, atol=1e-3)

        summaries = tessera.backend.recent_summaries()
        kernels = sum(s.kernels for s in summaries)
        choices = [c["choice"] for s in summaries for c in s.choices]

        tuned = done["tuned"] - before["tuned"]
        reused = done["schedule_hits"] - before["schedule_hits"]
        measured = done["measured"] - before["measured"]
        known = done["decision_hits"] - before["decision_hits"]
        print(f"Tessera compile: {tessera_compile:6.1f} s  ({kernels} kernels; schedules: "
              f"{tuned} tuned in {done['tune_s'] - before['tune_s']:.1f} s, {reused} from "
              f"records; partition choices: {measured} measured, {known} from records)")
        if choices:
            print("  choices: " + ", ".join(f"{c} x{choices.count(c)}"
                                            for c in ("tessera", "split", "aten")
                                            if c in choices))
        print(f"Inductor compile: {inductor_compile:5.1f} s")

        times = interleaved({"eager": lambda: model(x), "inductor": lambda: inductor(x),
                             "tessera": lambda: fast(x)}, rounds, min_ms)
    print()
    print(f"{'':10s}{'latency':>12s}{'vs eager':>11s}")
    for name in ("eager", "inductor", "tessera"):
        print(f"{name:10s}{times[name]:9.3f} ms{times['eager'] / times[name]:10.2f}x")
    print(f"\nTessera speedup: {times['eager'] / times['tessera']:.2f}x vs eager, "
          f"{times['inductor'] / times['tessera']:.2f}x vs Inductor")


if __name__ == "__main__":
    main()
