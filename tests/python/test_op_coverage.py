"""Operator coverage on common models: which core ATen operators still run through ATen.

Small random-weight models (ResNet-18 and MobileNetV2 from tessera.models; BERT, GPT-2, a
Llama-style decoder with rotary embeddings and ViT from transformers configs) are compiled for
inference at batch 1; every operator their graphs ran through ATen must be in ALLOWED_FALLBACKS
with the reason it is not lowered. A new fallback (a model change, a broken lowering, a new
decomposition) fails the test until it is lowered or documented here.
"""

import pytest
import torch

import tessera  # noqa: F401
from tessera.backend import last_serial, recent_summaries
from tessera.models import HiddenStates, MobileNetV2, ResNet18

transformers = pytest.importorskip("transformers")

# Operator -> why it runs through ATen. Empty: with anchor_measure off every operator these
# models run is Tessera's, attention included (backend/attention.py).
ALLOWED_FALLBACKS: dict = {}

OPTIONS = {"tune": "default", "anchor_measure": False, "records_db": False, "fallback": False}


def _bert():
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=64,
                                  max_position_embeddings=16)
    return HiddenStates(transformers.BertModel(cfg))


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2,
                                  n_positions=16, bos_token_id=0, eos_token_id=0)
    return HiddenStates(transformers.GPT2Model(cfg))


def _llama():
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=16)
    return HiddenStates(transformers.LlamaModel(cfg))


def _vit():
    cfg = transformers.ViTConfig(image_size=16, patch_size=8, hidden_size=32,
                                 num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64)
    return HiddenStates(transformers.ViTModel(cfg, add_pooling_layer=False))


def _ids():
    return torch.randint(0, 100, (1, 8), generator=torch.Generator().manual_seed(0))


MODELS = {
    "resnet18": (lambda: ResNet18(10), lambda: torch.randn(1, 3, 32, 32)),
    "mobilenetv2": (lambda: MobileNetV2(10), lambda: torch.randn(1, 3, 32, 32)),
    "bert": (_bert, _ids),
    "gpt2": (_gpt2, _ids),
    "llama": (_llama, _ids),
    "vit": (_vit, lambda: torch.randn(1, 3, 16, 16)),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_model_falls_back_only_to_documented_operators(name):
    torch.manual_seed(0)
    make_model, make_input = MODELS[name]
    model, x = make_model().eval(), make_input()
    torch._dynamo.reset()
    since = last_serial()
    compiled = torch.compile(model, backend="tessera", options=OPTIONS)
    with torch.no_grad():
        want = model(x)
        compiled(x)  # first call: eager while recording shapes, then compile
        got = compiled(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    summaries = recent_summaries(since)
    assert summaries, "nothing was compiled"
    aten, failures = {}, []
    for s in summaries:
        aten.update(s.aten_ops)
        failures += s.failures
    assert not failures, f"partitions left to ATen: {failures}"
    undocumented = sorted(set(aten) - set(ALLOWED_FALLBACKS))
    assert not undocumented, f"{name}: undocumented ATen fallbacks {undocumented}"
