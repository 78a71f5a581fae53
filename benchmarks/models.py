"""Whole models: torch.compile(backend="tessera") vs eager vs Inductor, in one process.

    python benchmarks/models.py [--models resnet18 mobilenet_v2 bert gpt2 vit llama]
                                [--batch 1] [--json out.json]

Random weights, no downloads: ResNet-18 and MobileNetV2 come from tessera.models (torchvision is
not a dependency); BERT-base, GPT-2 small, ViT-B/16 and a small Llama-style decoder (8 layers,
hidden 768, grouped-query attention) are built from transformers configs. Eval mode, fp32,
batch 1 by default; ResNet/MobileNet/ViT at 224x224, the language models at sequence length 128.

Per model a record {"model", "batch", "eager_ms", "inductor_ms", "tessera_ms",
"speedup_vs_eager", "speedup_vs_inductor", "compile_s", "warm_compile_s", "inductor_compile_s",
"kernels", "aten_fallback_ops", "fallbacks", "fallback_reasons", "max_abs_err", "counters"}:
  compile_s           the first call of the Tessera-compiled model (tracing, kernel builds,
                      tuning, measured choices) on a fresh records database of its own
  warm_compile_s      the same after torch._dynamo.reset() in this process (Tessera's kernels
                      and choices are then cached in memory)
  inductor_compile_s  the first call of torch.compile's default backend, with a fresh Inductor
                      cache directory of its own (cold, as Tessera's)
  counters            what Tessera's compile pipeline did for compile_s (_C.compile_counters():
                      JIT compiles, stage plans, tuned kernels, ...)
With --openvino, also "openvino_ms", "vs_openvino" (OpenVINO's time over Tessera's: above 1,
Tessera is faster), "openvino_compile_s" and "openvino_note" (why the column is empty where it
is): OpenVINO's native runtime, run as benchmarks/peer_runtimes.py says, in the same rounds.
With --export, also "exported_ms" and "exported_vs_compiled": the model through tessera.export
(torch.export's graph compiled ahead of time, called without dynamo), timed in the same rounds.
kernels is the number of Tessera kernels the compiled graphs run, aten_fallback_ops the
unsupported ATen operators left in them, fallbacks the partitions left to ATen by category
(unsupported, slower, internal_error; fallback_reasons says why), max_abs_err Tessera's largest
difference from eager (the benchmark fails beyond 1e-3). Latencies: Tessera's one noise rule
with eager as the reference (common.interleaved).
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tessera  # noqa: E402
from tessera.backend import FALLBACK_CATEGORIES  # noqa: E402
from tessera.models import HiddenStates, MobileNetV2, ResNet18  # noqa: E402
from common import arg_parser, interleaved, print_table, write_json  # noqa: E402
from peer_runtimes import PeerRun, openvino_run  # noqa: E402


# ---- models ---------------------------------------------------------------------------------

def build(name: str, batch: int):
    torch.manual_seed(0)
    if name == "resnet18":
        return ResNet18(), torch.randn(batch, 3, 224, 224)
    if name == "mobilenet_v2":
        return MobileNetV2(), torch.randn(batch, 3, 224, 224)
    if name == "bert":
        from transformers import BertConfig, BertModel
        model = BertModel(BertConfig())  # BERT-base: 12 layers, hidden 768, 12 heads
        return HiddenStates(model), torch.randint(0, 30522, (batch, 128))
    if name == "gpt2":
        from transformers import GPT2Config, GPT2Model
        model = GPT2Model(GPT2Config())  # GPT-2 small: 12 layers, hidden 768, 12 heads
        return HiddenStates(model), torch.randint(0, 50257, (batch, 128))
    if name == "vit":
        from transformers import ViTConfig, ViTModel
        model = ViTModel(ViTConfig())  # ViT-B/16: 12 layers, hidden 768, 197 tokens at 224x224
        return HiddenStates(model), torch.randn(batch, 3, 224, 224)
    if name == "llama":
        from transformers import LlamaConfig, LlamaModel
        # A small Llama-style decoder: RMSNorm, rotary embeddings, SiLU-gated MLP, grouped-query
        # attention (12 query heads over 4 key/value heads), causal.
        model = LlamaModel(LlamaConfig(hidden_size=768, intermediate_size=2048,
                                       num_hidden_layers=8, num_attention_heads=12,
                                       num_key_value_heads=4, vocab_size=32000))
        return HiddenStates(model), torch.randint(0, 32000, (batch, 128))
    raise ValueError(f"unknown model {name!r}")


MODELS = ["resnet18", "mobilenet_v2", "bert", "gpt2", "vit", "llama"]


# ---- measurement ----------------------------------------------------------------------------

def first_call_s(fn, x) -> float:
    t0 = time.perf_counter()
    with torch.no_grad():
        fn(x)
    return time.perf_counter() - t0


def tessera_stats(since: int) -> dict:
    """What the graphs compiled after serial `since` left to ATen: "kernels" (Tessera kernels
    the compiled graphs run), "aten_fallback_ops" (unsupported operators), "fallbacks"
    (partitions by category, Summary.fallback_counts) and "fallback_reasons"."""
    kernels, ops = 0, set()
    counts = {c: 0 for c in FALLBACK_CATEGORIES}
    reasons = {c: [] for c in FALLBACK_CATEGORIES}
    for s in tessera.backend.recent_summaries(since):
        # A graph that measured slower than eager as a whole runs eagerly (graph_guard.py).
        kernels += s.kernels if s.graph_choice == "compiled" else 0
        ops |= set(s.aten_ops)
        for category, found in s.fallbacks().items():
            counts[category] += len(found)
            for r in found:  # each reason once, however many partitions share it
                if r not in reasons[category]:
                    reasons[category].append(r)
    return {"kernels": kernels, "aten_fallback_ops": sorted(ops), "fallbacks": counts,
            "fallback_reasons": reasons}


def bench_module(model, x, rounds: int, tessera_options: dict, exported: bool = False,
                 tolerance: float = 1e-3, openvino: bool = False) -> dict:
    """Compiles `model` with Tessera and with Inductor (cold: first calls timed), checks
    Tessera's output against eager (max_abs_err; correct: within `tolerance`, relative and
    absolute) and times eager, Inductor and Tessera in interleaved rounds (with `openvino`,
    OpenVINO's native runtime too: peer_runtimes.py)."""
    model.eval()
    with torch.no_grad():
        ref = model(x)
    # Each backend gets its own copy of the model, so no compiled code or cache entry is shared.
    t_model, i_model = copy.deepcopy(model), copy.deepcopy(model)
    peer = openvino_run(copy.deepcopy(model), x, ref, tolerance) if openvino else None

    torch._dynamo.reset()
    before = tessera.backend.last_serial()
    counters = tessera._C.compile_counters()
    fast = torch.compile(t_model, backend="tessera", options=tessera_options)
    compile_s = first_call_s(fast, x)
    after = tessera._C.compile_counters()
    with torch.no_grad():
        out = fast(x)  # the first call ran eagerly while recording; this one runs the kernels
    max_abs_err = (out - ref).abs().max().item() if out.numel() else 0.0
    correct = out.shape == ref.shape and torch.allclose(out, ref, rtol=tolerance, atol=tolerance)
    stats = tessera_stats(before)

    # Same model compiled again in this process: Tessera's kernels and choices are cached.
    torch._dynamo.reset()
    tessera_fn = torch.compile(t_model, backend="tessera", options=tessera_options)
    warm_compile_s = first_call_s(tessera_fn, x)

    torch._dynamo.reset()
    inductor = torch.compile(i_model)
    inductor_compile_s = first_call_s(inductor, x)

    with torch.no_grad():
        # The reset before Inductor's compile dropped Tessera's graphs: this call traces them
        # again (warm: kernels and choices cached), so no timed round pays for it.
        tessera_fn(x)
        fns = {"eager": lambda: model(x), "inductor": lambda: inductor(x),
               "tessera": lambda: tessera_fn(x)}
        if exported:
            e = tessera.export(copy.deepcopy(model), (x,), options=tessera_options)
            torch.testing.assert_close(e(x), ref, rtol=tolerance, atol=tolerance)
            fns["exported"] = lambda: e(x)
        if peer is not None and peer.run is not None:
            fns["openvino"] = peer.run
        times = interleaved(fns, rounds=rounds, min_time_ms=200.0)
    extra = {"exported_ms": times["exported"],
             "exported_vs_compiled": times["tessera"] / times["exported"]} if exported else {}
    if peer is not None:
        extra.update(openvino_record(peer, times))
    return {
        "correct": bool(correct), "max_abs_err": max_abs_err,
        "eager_ms": times["eager"], "inductor_ms": times["inductor"],
        "tessera_ms": times["tessera"],
        "speedup_vs_eager": times["eager"] / times["tessera"],
        "speedup_vs_inductor": times["inductor"] / times["tessera"],
        "compile_s": compile_s, "warm_compile_s": warm_compile_s,
        "inductor_compile_s": inductor_compile_s,
        **stats,
        "counters": {k: after[k] - counters[k] for k in after},
        **extra,
    }


def openvino_record(peer: PeerRun, times: dict) -> dict:
    """The OpenVINO fields of a record: its time, Tessera's speed relative to it, its compile
    seconds, and why it is missing where it is."""
    ms = times.get("openvino")
    return {"openvino_ms": ms, "vs_openvino": ms / times["tessera"] if ms else None,
            "openvino_compile_s": peer.compile_s, "openvino_note": peer.note}


def bench_model(name: str, batch: int, rounds: int, tessera_options: dict,
                exported: bool = False, openvino: bool = False) -> dict:
    model, x = build(name, batch)
    r = bench_module(model, x, rounds, tessera_options, exported, openvino=openvino)
    if not r["correct"]:
        raise AssertionError(f"{name}: Tessera's output differs from eager's by "
                             f"{r['max_abs_err']:.3g}")
    return {"model": name, "batch": batch, **r}


def main() -> None:
    p = arg_parser(__doc__)
    p.add_argument("--models", nargs="+", default=MODELS, choices=MODELS)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="log Tessera's partitions and choices")
    p.add_argument("--export", action="store_true",
                   help="also time the model through tessera.export (exported_ms)")
    p.add_argument("--openvino", action="store_true",
                   help="also time OpenVINO's native runtime (openvino_ms, vs_openvino)")
    args = p.parse_args()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    records = []
    for name in args.models:
        # Cold compiles for both compilers: per model, a records database and an Inductor cache
        # directory of their own, so nothing an earlier model compiled is found on disk.
        scratch = tempfile.mkdtemp(prefix=f"tessera-models-{name}-")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
        options = {"verbose": args.verbose, "records_db": os.path.join(scratch, "records.db")}
        r = bench_model(name, args.batch, args.rounds, options, exported=args.export,
                        openvino=args.openvino)
        print_table([r], ["model", "eager_ms", "inductor_ms", "tessera_ms", "speedup_vs_eager",
                          "speedup_vs_inductor", "compile_s", "warm_compile_s",
                          "inductor_compile_s", "kernels"])
        records.append(r)
    print()
    print_table(records, ["model", "batch", "eager_ms", "inductor_ms", "tessera_ms",
                          "speedup_vs_eager", "speedup_vs_inductor", "compile_s",
                          "warm_compile_s", "inductor_compile_s", "kernels"]
                + (["exported_ms", "exported_vs_compiled"] if args.export else [])
                + (["openvino_ms", "vs_openvino"] if args.openvino else []))
    for r in records:
        if r.get("openvino_note"):
            print(f"{r['model']}: OpenVINO {r['openvino_note']}")
        if r["aten_fallback_ops"]:
            print(f"{r['model']}: ATen fallbacks {', '.join(r['aten_fallback_ops'])}")
    write_json(args.json, records)


if __name__ == "__main__":
    main()
