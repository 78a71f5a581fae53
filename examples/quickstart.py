"""Quickstart: compile PyTorch models with Tessera.

    python examples/quickstart.py

torch.compile(model, backend="tessera") traces the model, fuses what Tessera supports into
kernels it compiles for this CPU (keeping ATen wherever ATen measures faster) and runs the
rest through ATen. Results match eager PyTorch.

tessera.export(model, args) compiles the same way ahead of time, from torch.export's graph, and
returns a model called without torch.compile's per-call frame evaluation and guards: for
inference at fixed (or declared dynamic) shapes, where a small graph's microseconds matter.
"""

import time

import torch
import torch.nn as nn

import tessera  # noqa: F401  (optional: the backend is also found without this import)


def median_ms(fn, x, repeats=50):
    times = []
    with torch.no_grad():
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def compare(name, model, x):
    model.eval()
    fast = torch.compile(model, backend="tessera")
    with torch.no_grad():
        fast(x)  # the first call traces, compiles and measures
        torch.testing.assert_close(fast(x), model(x), rtol=1e-3, atol=1e-3)
    eager, tessera_ms = median_ms(model, x), median_ms(fast, x)
    print(f"{name:12s} eager {eager:7.3f} ms   tessera {tessera_ms:7.3f} ms   "
          f"speedup {eager / tessera_ms:4.2f}x")


class ResNetBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


if __name__ == "__main__":
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.LayerNorm(512), nn.Linear(512, 10))
    compare("MLP", mlp, torch.randn(32, 256))
    compare("ResNet block", ResNetBlock(32), torch.randn(1, 32, 28, 28))

    # Ahead of time, at a dynamic batch size of 1 to 64:
    x = torch.randn(32, 256)
    exported = tessera.export(mlp, (x,), dynamic_shapes=({0: torch.export.Dim("batch", max=64)},))
    with torch.no_grad():
        for batch in (32, 1, 64):
            xb = torch.randn(batch, 256)
            torch.testing.assert_close(exported(xb), mlp(xb), rtol=1e-3, atol=1e-3)
    print(f"{'MLP':12s} exported {median_ms(exported, x):7.3f} ms (batch 1..64, no torch.compile)")
