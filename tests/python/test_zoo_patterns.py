"""Patterns from the model zoo (benchmarks/zoo.py) that once left partitions to ATen through an
internal error: each is written out here as the model computes it, compiled, checked against
eager, and must leave nothing to ATen for a defect (Summary.fallbacks()["internal_error"]).
"""

import math

import torch
import torch.nn as nn

import tessera  # noqa: F401
from tessera.backend import last_serial, recent_summaries

# anchor_measure off: every partition is Tessera's kernel, whatever ATen would measure.
OPTIONS = {"tune": "default", "anchor_measure": False, "records_db": False, "fallback": False}


def _compile_and_check(model: nn.Module, x):
    """Compiles `model`, checks it against eager on `x` (a tensor or a tuple of them); returns
    the graphs' summaries."""
    model = model.eval()
    args = x if isinstance(x, tuple) else (x,)
    torch._dynamo.reset()
    since = last_serial()
    compiled = torch.compile(model, backend="tessera", options=OPTIONS)
    with torch.no_grad():
        want = model(*args)
        compiled(*args)  # first call: eager while recording shapes, then compile
        got = compiled(*args)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    summaries = recent_summaries(since)
    assert summaries, "nothing was compiled"
    return summaries


def _fallbacks(summaries, category):
    return [what for s in summaries for what in s.fallbacks()[category]]


class RelativePositionBias(nn.Module):
    """T5's relative position buckets (abs, log, where, minimum, casts between int64 and
    float) gathered from a learned table, added to attention-shaped scores."""

    def __init__(self, heads: int = 4, buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.table = nn.Embedding(buckets, heads)
        self.buckets, self.max_distance = buckets, max_distance

    def bucket(self, relative):
        half = self.buckets // 2
        out = (relative > 0).to(torch.long) * half
        relative = torch.abs(relative)
        exact = half // 2
        large = exact + (torch.log(relative.float() / exact)
                         / math.log(self.max_distance / exact) * (half - exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, half - 1))
        return out + torch.where(relative < exact, relative, large)

    def forward(self, hidden):  # hidden: [batch, positions, positions]
        q = hidden.shape[-1]
        relative = torch.arange(q)[None, :] - torch.arange(q)[:, None]
        bias = self.table(self.bucket(relative)).permute(2, 0, 1).unsqueeze(0)
        return hidden.unsqueeze(1) + bias


def test_t5_relative_position_buckets_compile_to_kernels():
    summaries = _compile_and_check(RelativePositionBias(), torch.randn(1, 64, 64))
    assert not _fallbacks(summaries, "internal_error")
    assert sum(s.kernels for s in summaries) >= 1


class ShiftedWindowBias(nn.Module):
    """Swin's shifted windows: pad to whole windows, roll, partition into windows, and add a
    relative position bias gathered from a table by a precomputed index."""

    def __init__(self, window: int = 4, heads: int = 2):
        super().__init__()
        self.window, self.heads = window, heads
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window),
                                            indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", rel[..., 0] * (2 * window - 1) + rel[..., 1])

    def forward(self, x):  # x: [batch, height, width, channels]
        b, h, w, c = x.shape
        win = self.window
        x = nn.functional.pad(x, (0, 0, 0, (-w) % win, 0, (-h) % win))
        x = torch.roll(x, shifts=(-(win // 2), -(win // 2)), dims=(1, 2))
        hp, wp = x.shape[1], x.shape[2]
        windows = x.view(b, hp // win, win, wp // win, win, c).permute(0, 1, 3, 2, 4, 5)
        windows = windows.reshape(-1, win * win, c)
        scores = windows @ windows.transpose(1, 2)
        bias = self.table[self.index.view(-1)].view(win * win, win * win, -1)
        return scores.unsqueeze(1) + bias.permute(2, 0, 1).unsqueeze(0)


def test_swin_window_bias_compiles_to_kernels():
    summaries = _compile_and_check(ShiftedWindowBias(), torch.randn(1, 10, 10, 8))
    assert not _fallbacks(summaries, "internal_error")
    assert sum(s.kernels for s in summaries) >= 1


class DepthwiseSqueezeExcite(nn.Module):
    """EfficientNet's stride-2 block: explicit zero padding, then a depthwise convolution with
    padding="valid" (aten.convolution gets padding [0], one value for both dims), batch norm,
    SiLU, and squeeze-excitation (1x1 convolutions with padding="same")."""

    def __init__(self, c: int = 16, reduced: int = 4):
        super().__init__()
        self.pad = nn.ZeroPad2d((0, 1, 0, 1))
        self.depthwise = nn.Conv2d(c, c, 3, stride=2, padding="valid", groups=c, bias=False)
        self.norm = nn.BatchNorm2d(c)
        self.reduce = nn.Conv2d(c, reduced, 1, padding="same")
        self.expand = nn.Conv2d(reduced, c, 1, padding="same")

    def forward(self, x):
        y = nn.functional.silu(self.norm(self.depthwise(self.pad(x))))
        s = torch.sigmoid(self.expand(nn.functional.silu(self.reduce(y.mean((2, 3),
                                                                            keepdim=True)))))
        return y * s


def test_valid_padding_convolutions_compile_to_kernels():
    model = DepthwiseSqueezeExcite()
    with torch.no_grad():
        model.norm.running_var.uniform_(0.5, 2.0)
    summaries = _compile_and_check(model, torch.randn(1, 16, 15, 15))
    assert not [s for s in summaries for s in s.failures]
    convs = [p for s in summaries for p in s.partitions if "aten.convolution.default" in p["ops"]]
    assert len(convs) == 3 and all(p["impl"] == "tessera" for p in convs), convs


class SpeechFrontEnd(nn.Module):
    """wav2vec 2.0's feature encoder and positional convolution: a strided 1-D convolution,
    group norm with one group per channel, GELU, a group norm over several channels per group
    (with its affine), and a grouped, padded 1-D convolution whose weight is weight-normed
    (aten.linalg_vector_norm over two of its dims, on every call)."""

    def __init__(self, c: int = 16):
        super().__init__()
        self.conv = nn.Conv1d(1, c, 10, stride=5, bias=False)
        self.per_channel = nn.GroupNorm(c, c)
        self.grouped = nn.GroupNorm(4, c)
        self.positional = nn.utils.parametrizations.weight_norm(
            nn.Conv1d(c, c, 7, padding=3, groups=4), dim=2)

    def forward(self, wave):
        y = nn.functional.gelu(self.per_channel(self.conv(wave.unsqueeze(1))))
        y = self.grouped(y)
        return y + nn.functional.gelu(self.positional(y))


def test_speech_front_end_compiles_to_kernels():
    model = SpeechFrontEnd()
    with torch.no_grad():
        for norm in (model.per_channel, model.grouped):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-1, 1)
    summaries = _compile_and_check(model, torch.randn(2, 400))
    assert not [op for s in summaries for op in s.aten_ops]  # 1-D convolutions included
    assert not _fallbacks(summaries, "internal_error")


class WeightStandardizedConv(nn.Conv2d):
    """Big Transfer's convolution: weights standardised per output channel by a functional batch
    norm without running statistics (aten._native_batch_norm_legit.no_stats)."""

    def forward(self, x):
        w = nn.functional.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                                     training=True, momentum=0.0, eps=1e-8)
        return self._conv_forward(x, w.reshape_as(self.weight), self.bias)


def test_batch_norm_without_running_statistics_compiles_to_kernels():
    summaries = _compile_and_check(WeightStandardizedConv(8, 16, 3, padding=1),
                                   torch.randn(1, 8, 12, 12))
    assert not [op for s in summaries for op in s.aten_ops if "batch_norm" in op]
    assert not _fallbacks(summaries, "internal_error")


class DepthwiseThenAtenThenView(nn.Module):
    """MobileViT's pattern: activations a depthwise convolution makes are stored NHWC (options
    layouts), an operator ATen runs reads one (here sort, which Tessera does not lower; in
    MobileViT an ATen convolution), and its result is viewed as eager's layout allows. ATen
    keeps its input's NHWC layout (sort does), so the plan must make that result contiguous
    first."""

    def __init__(self, c: int = 8):
        super().__init__()
        self.depthwise = nn.Conv2d(c, c, 3, padding=1, groups=c)

    def forward(self, x):
        y = torch.sort(torch.relu(self.depthwise(x)), dim=1).values
        return y.view(y.shape[0], -1)


def test_aten_result_read_by_a_view_keeps_eager_layout():
    summaries = _compile_and_check(DepthwiseThenAtenThenView(), torch.randn(2, 8, 6, 6))
    assert any(s.layouts.get("nhwc") for s in summaries), "the activations are stored NHWC"
    assert [op for s in summaries for op in s.aten_ops] == ["aten.sort.default"]


class UpsampleAndConcatenate(nn.Module):
    """SegFormer's decode head: per stage a linear layer, its tokens viewed as a channels-last
    image (a permute), bilinear upsampling (two index tensors per gather; its result cloned to
    channels_last, the input's layout), and the stages concatenated. The clone changes the
    layout of a value a kernel makes, so it is a copy: a kernel reading it in the same program
    must not read the upsampling's buffer in its place."""

    def __init__(self, c: int = 16):
        super().__init__()
        self.proj = nn.ModuleList([nn.Linear(c, c), nn.Linear(2 * c, c)])

    def forward(self, fine, coarse):  # [batch, channels, h, w] at two resolutions
        size = fine.shape[2:]
        outs = []
        for proj, x in zip(self.proj, (fine, coarse)):
            b, _, h, w = x.shape
            y = proj(x.flatten(2).transpose(1, 2)).permute(0, 2, 1).reshape(b, -1, h, w)
            outs.append(nn.functional.interpolate(y, size=size, mode="bilinear",
                                                  align_corners=False))
        return torch.cat(outs[::-1], dim=1)


def test_layout_changing_clone_between_kernels_is_a_copy():
    summaries = _compile_and_check(UpsampleAndConcatenate(),
                                   (torch.randn(1, 16, 12, 12), torch.randn(1, 32, 6, 6)))
    assert not [op for s in summaries for op in s.aten_ops]
    assert not _fallbacks(summaries, "internal_error")
