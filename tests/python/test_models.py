"""Whole models under torch.compile(backend="tessera") against eager PyTorch.

Random weights, no downloads, small sizes (compile time is what these tests pay for): an MLP,
ResNet-18 (defined here; torchvision is not a dependency), MobileNetV2 inverted-residual blocks
(depthwise convolutions), and a BERT encoder and a GPT-2 decoder built from transformers configs.
Inference at batch 1 and 8; a training step (loss.backward, gradients compared) for the MLP,
ResNet-18 and BERT.

Most models run with anchor_measure off, which forces Tessera's own fused kernels everywhere
(the strictest check of Tessera's code); ResNet-18 and BERT at batch 1 also run the default
path, where partitions are chosen by measurement.
"""

import copy

import pytest
import torch
import torch.nn as nn

from tessera.models import HiddenStates, InvertedResidual, ResNet18

KERNELS = {"anchor_measure": False, "fallback": False}
DEFAULT = {"fallback": False}


def assert_close_scaled(got, want, rel=1e-4):
    """|got - want| <= rel * max|want| (+ a floor): fp32 results of reordered reductions."""
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = want.abs().max().item() if want.numel() else 0.0
    err = (got - want).abs().max().item() if want.numel() else 0.0
    assert err <= rel * scale + 1e-5, f"max abs error {err:.3g} vs scale {scale:.3g}"


def assert_grads_close(model_ref, model, rel=2e-3):
    """Per parameter: error within rel of that gradient's scale, where the scale is floored at
    1% of the largest gradient (a gradient that is zero in exact arithmetic is fp32 noise in
    every implementation)."""
    pairs = [(n, p.grad, q.grad) for (n, p), q in
             zip(model_ref.named_parameters(), model.parameters()) if p.grad is not None]
    top = max(g.abs().max().item() for _, g, _ in pairs)
    for name, want, got in pairs:
        assert got is not None, f"{name} has no gradient"
        scale = max(want.abs().max().item(), 0.01 * top)
        err = (got - want).abs().max().item()
        assert err <= rel * scale, f"{name}: gradient error {err:.3g} vs scale {scale:.3g}"


def run_inference(model, x, options):
    model.eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tessera", options=options)
    with torch.no_grad():
        want = model(x)
        compiled(x)  # first call: records shapes and compiles
        got = compiled(x)
    return got, want


def run_training_step(model, inputs, loss_fn, options):
    """Gradients of one step in eager and compiled (the compiled step runs twice: the second
    one executes the kernels)."""
    model.train()
    ref = copy.deepcopy(model)
    loss_fn(ref, *inputs).backward()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tessera", options=options)
    for _ in range(2):
        model.zero_grad(set_to_none=True)
        loss = loss_fn(compiled, *inputs)
        loss.backward()
    return ref, model


def weighted_loss(model, x, w):
    """A loss whose gradient differs per output element (a plain sum hides many bugs)."""
    return (model(x) * w).sum()


# ---- models -------------------------------------------------------------------------------

def randomize_bn(model):
    """Non-trivial running statistics and affine parameters, so eval-mode batch norm is not
    the identity."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(),
                         nn.LayerNorm(64), nn.Linear(64, 10))


def mobilenet_blocks():
    torch.manual_seed(0)
    return randomize_bn(nn.Sequential(
        nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU6(),
        InvertedResidual(16, 24, 2, 6), InvertedResidual(24, 24, 1, 6)))


def bert():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    config = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, vocab_size=100, max_position_embeddings=64,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return HiddenStates(BertModel(config))


def gpt2():
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    config = GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0)
    return HiddenStates(GPT2Model(config))


def ids(batch, seq=16):
    return torch.randint(0, 100, (batch, seq), generator=torch.Generator().manual_seed(batch))


# ---- inference ------------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 8])
def test_mlp_inference(batch):
    got, want = run_inference(mlp(), torch.randn(batch, 32), KERNELS)
    assert_close_scaled(got, want)


@pytest.mark.parametrize("batch,options", [(1, DEFAULT), (1, KERNELS), (8, KERNELS)])
def test_resnet18_inference(batch, options):
    torch.manual_seed(0)
    model = randomize_bn(ResNet18(num_classes=10))
    got, want = run_inference(model, torch.randn(batch, 3, 32, 32), options)
    assert_close_scaled(got, want, rel=1e-3)


@pytest.mark.parametrize("batch", [1, 8])
def test_mobilenet_v2_blocks_inference(batch):
    got, want = run_inference(mobilenet_blocks(), torch.randn(batch, 3, 32, 32), KERNELS)
    assert_close_scaled(got, want, rel=1e-3)


@pytest.mark.parametrize("batch,options", [(1, DEFAULT), (1, KERNELS), (8, KERNELS)])
def test_bert_encoder_inference(batch, options):
    got, want = run_inference(bert(), ids(batch), options)
    assert_close_scaled(got, want, rel=1e-4)


@pytest.mark.parametrize("batch", [1, 8])
def test_gpt2_decoder_inference(batch):
    got, want = run_inference(gpt2(), ids(batch), KERNELS)
    assert_close_scaled(got, want, rel=1e-4)


# ---- training -------------------------------------------------------------------------------

def test_mlp_training_step():
    model = mlp()
    x = torch.randn(8, 32)
    w = torch.randn(8, 10, generator=torch.Generator().manual_seed(3))
    ref, model = run_training_step(model, (x, w), weighted_loss, KERNELS)
    assert_grads_close(ref, model)


def test_resnet18_training_step():
    torch.manual_seed(0)
    model = ResNet18(num_classes=10)
    x = torch.randn(4, 3, 32, 32)
    w = torch.randn(4, 10, generator=torch.Generator().manual_seed(3))
    # Default options: large convolutions go to ATen without building Tessera's (slower) fused
    # kernels, which keeps this test's compile time down; the batch-norm, ReLU and pooling
    # backward partitions are still Tessera kernels.
    ref, model = run_training_step(model, (x, w), weighted_loss, DEFAULT)
    assert_grads_close(ref, model)
    # Batch-norm running statistics were updated by the compiled steps as well.
    bn_ref, bn = ref.stem[1], model.stem[1]
    assert not torch.equal(bn.running_mean, torch.zeros_like(bn.running_mean))
    assert bn.num_batches_tracked.item() == 2 and bn_ref.num_batches_tracked.item() == 1


def test_bert_training_step():
    model = bert()
    x = ids(2)
    w = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(3))
    ref, model = run_training_step(model, (x, w), weighted_loss, KERNELS)
    assert_grads_close(ref, model)
