"""The model zoo of benchmarks/zoo.py: architectures built from transformers configs with random
weights (nothing is downloaded), each small enough to compile in seconds and run in tens of
milliseconds on two cores, each keeping what makes its family different from the others.

ZOO maps a name to (family, builder); a builder returns (module, example input) with the module
returning one tensor. Families: cnn (incl. depthwise-separable and squeeze-excitation), vit
(plain, windowed, hierarchical, relative position bias), segmentation, encoder, enc-dec, decoder
(grouped-query attention, rotary), speech (1-D convolution front ends, group norm).
"""

from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn

IMAGE = 224   # vision models' input side
TOKENS = 128  # language models' sequence length
SAMPLES = 16000  # speech models' input: one second at 16 kHz
VOCAB = 1000


class Output(nn.Module):
    """A transformers model as a module of one tensor in, one tensor out: its `field`
    (last_hidden_state, logits, ...); encoder-decoders get the input ids as decoder ids too,
    and a speech encoder-decoder a fixed 16-token decoder prompt."""

    def __init__(self, model: nn.Module, field: str = "last_hidden_state",
                 decoder: str = ""):
        super().__init__()
        self.model, self.field, self.decoder = model, field, decoder

    def forward(self, x):
        if self.decoder == "same":
            out = self.model(x, decoder_input_ids=x)
        elif self.decoder == "prompt":
            prompt = torch.zeros(x.shape[0], 16, dtype=torch.long, device=x.device)
            out = self.model(x, decoder_input_ids=prompt)
        else:
            out = self.model(x)
        return getattr(out, self.field)


def calibrate(model: nn.Module, x: torch.Tensor) -> nn.Module:
    """Weights and statistics that keep activations of order one, as in a trained network.
    With transformers' initialisers (normal, std 0.02) and fresh batch-norm statistics (mean 0,
    variance 1), a deep CNN shrinks its activations by a constant factor per layer and ends in
    values of 1e-30 and below: denormals, which time differently and make every error look
    small. So convolutions get PyTorch's fan-in scaled initialisation, batch norms scale 1 and
    the statistics of the model's own activations on random inputs."""
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d)):
            m.reset_parameters()
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return model
    for m in norms:
        m.reset_parameters()  # scale 1, shift 0, fresh statistics
        m.momentum = None  # a cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(2, *x.shape[1:]))
    return model.eval()


def _image(batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, 3, IMAGE, IMAGE)


def _tokens(batch: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, TOKENS))


def _audio(batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, SAMPLES)


# Shared small transformer shapes: hidden 256, 4 layers, 4 heads (decoders: 8 query heads over
# 2 key/value heads).
_ENCODER = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                intermediate_size=1024, vocab_size=VOCAB)
_VIT = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
            image_size=IMAGE, patch_size=16)
_DECODER = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                num_key_value_heads=2, intermediate_size=768, vocab_size=VOCAB)
_SEQ2SEQ = dict(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024,
                vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                decoder_start_token_id=0)
_SPEECH = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
               intermediate_size=1024, conv_dim=(256,) * 7)


def _t():
    import transformers
    return transformers


def _cnns() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        "resnet": lambda: (Output(t.ResNetModel(t.ResNetConfig(depths=[1, 1, 1, 1]))), _image()),
        "mobilenet_v1": lambda: (Output(t.MobileNetV1Model(t.MobileNetV1Config())), _image()),
        "mobilenet_v2": lambda: (Output(t.MobileNetV2Model(t.MobileNetV2Config())), _image()),
        # EfficientNet-B0: depthwise-separable blocks with squeeze-excitation and SiLU.
        "efficientnet": lambda: (Output(t.EfficientNetModel(t.EfficientNetConfig(
            width_coefficient=1.0, depth_coefficient=1.0, hidden_dim=1280,
            image_size=IMAGE))), _image()),
        # RegNetY: grouped convolutions with squeeze-excitation.
        "regnet": lambda: (Output(t.RegNetModel(t.RegNetConfig(
            layer_type="y", depths=[1, 1, 2, 1], hidden_sizes=[24, 56, 152, 368],
            groups_width=8))), _image()),
        "convnext": lambda: (Output(t.ConvNextModel(t.ConvNextConfig(
            depths=[1, 1, 2, 1], hidden_sizes=[48, 96, 192, 384]))), _image()),
        # Big Transfer: weight-standardised convolutions with group norm.
        "bit": lambda: (Output(t.BitModel(t.BitConfig(
            depths=[1, 1, 1, 1], embedding_size=64, hidden_sizes=[128, 256, 512, 1024]))),
            _image()),
        # MobileViT: depthwise CNN stages with transformer blocks over unfolded patches.
        "mobilevit": lambda: (Output(t.MobileViTModel(t.MobileViTConfig(image_size=IMAGE))),
                              _image()),
    }


def _vits() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        "vit": lambda: (Output(t.ViTModel(t.ViTConfig(**_VIT))), _image()),
        "deit": lambda: (Output(t.DeiTModel(t.DeiTConfig(**_VIT))), _image()),
        # BEiT: a learned relative position bias per head, gathered by a position index.
        "beit": lambda: (Output(t.BeitModel(t.BeitConfig(
            **_VIT, use_relative_position_bias=True))), _image()),
        "dinov2": lambda: (Output(t.Dinov2Model(t.Dinov2Config(**_VIT))), _image()),
        # Swin: shifted windows (roll, window partition and merge) in a 4-stage hierarchy.
        "swin": lambda: (Output(t.SwinModel(t.SwinConfig(
            embed_dim=48, depths=[2, 2, 2, 2], num_heads=[2, 4, 8, 16]))), _image()),
        # PVTv2: hierarchical, spatial-reduction attention, depthwise convolutions in the MLP.
        "pvt_v2": lambda: (Output(t.PvtV2Model(t.PvtV2Config())), _image()),
    }


def _segmentation() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        "segformer": lambda: (Output(t.SegformerForSemanticSegmentation(t.SegformerConfig()),
                                     "logits"), _image()),
        "mobilevit_deeplab": lambda: (Output(t.MobileViTForSemanticSegmentation(
            t.MobileViTConfig(image_size=IMAGE)), "logits"), _image()),
    }


def _encoders() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        "bert": lambda: (Output(t.BertModel(t.BertConfig(**_ENCODER))), _tokens()),
        "roberta": lambda: (Output(t.RobertaModel(t.RobertaConfig(**_ENCODER))), _tokens()),
        "albert": lambda: (Output(t.AlbertModel(t.AlbertConfig(**_ENCODER,
                                                               embedding_size=128))), _tokens()),
        # DeBERTa-v2: disentangled attention over relative positions (log buckets).
        "deberta_v2": lambda: (Output(t.DebertaV2Model(t.DebertaV2Config(**_ENCODER))),
                               _tokens()),
        "distilbert": lambda: (Output(t.DistilBertModel(t.DistilBertConfig(
            dim=256, n_layers=4, n_heads=4, hidden_dim=1024, vocab_size=VOCAB))), _tokens()),
        # MPNet: a relative position bias from log-spaced buckets.
        "mpnet": lambda: (Output(t.MPNetModel(t.MPNetConfig(**_ENCODER))), _tokens()),
    }


def _seq2seq() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        # T5: relative position buckets (abs, log, where, minimum, int64 <-> float casts).
        "t5": lambda: (Output(t.T5Model(t.T5Config(
            d_model=256, d_kv=64, d_ff=1024, num_layers=2, num_heads=4, vocab_size=VOCAB)),
            decoder="same"), _tokens()),
        "bart": lambda: (Output(t.BartModel(t.BartConfig(**_SEQ2SEQ)), decoder="same"),
                         _tokens()),
    }


def _decoders() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        "llama": lambda: (Output(t.LlamaModel(t.LlamaConfig(**_DECODER))), _tokens()),
        "qwen2": lambda: (Output(t.Qwen2Model(t.Qwen2Config(**_DECODER))), _tokens()),
        "gemma": lambda: (Output(t.GemmaModel(t.GemmaConfig(**_DECODER, head_dim=32))),
                          _tokens()),
        "gpt2": lambda: (Output(t.GPT2Model(t.GPT2Config(
            n_embd=256, n_layer=4, n_head=4, vocab_size=VOCAB, bos_token_id=0,
            eos_token_id=0))), _tokens()),
        "gpt_neox": lambda: (Output(t.GPTNeoXModel(t.GPTNeoXConfig(**_ENCODER))), _tokens()),
        "phi": lambda: (Output(t.PhiModel(t.PhiConfig(**_ENCODER))), _tokens()),
    }


def _speech() -> Dict[str, Tuple[str, Callable]]:
    t = _t()
    return {
        # wav2vec 2.0: a 7-layer 1-D convolution front end with group norm, then an encoder
        # with a grouped positional convolution.
        "wav2vec2": lambda: (Output(t.Wav2Vec2Model(t.Wav2Vec2Config(**_SPEECH))), _audio()),
        "hubert": lambda: (Output(t.HubertModel(t.HubertConfig(**_SPEECH))), _audio()),
        # Whisper: two 1-D convolutions over 80 mel bins, then an encoder-decoder.
        "whisper": lambda: (Output(t.WhisperModel(t.WhisperConfig(
            **_SEQ2SEQ, max_source_positions=250)), decoder="prompt"),
            torch.randn(1, 80, 500)),
    }


def zoo() -> Dict[str, Tuple[str, Callable]]:
    """name -> (family, builder), in family order."""
    out = {}
    for family, models in (("cnn", _cnns()), ("vit", _vits()), ("segmentation", _segmentation()),
                           ("encoder", _encoders()), ("enc-dec", _seq2seq()),
                           ("decoder", _decoders()), ("speech", _speech())):
        out.update({name: (family, build) for name, build in models.items()})
    return out


def build(name: str) -> Tuple[nn.Module, torch.Tensor]:
    """The model `name` in eval mode (seeded: the same weights in every process) and its input."""
    family, builder = zoo()[name]
    torch.manual_seed(0)
    model, x = builder()
    return calibrate(model, x).eval(), x
