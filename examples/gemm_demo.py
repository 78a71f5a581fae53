"""Tessera demo: compile fp32 GEMMs (and a fused dense+bias+ReLU) with Tessera's default
schedule and compare against eager PyTorch on all cores.

Run with `make demo`. Until the torch.compile backend lands this shows the compiler core:
tensor expressions -> schedule -> loop IR -> LLVM JIT kernel.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))

import torch  # noqa: E402

import tessera  # noqa: E402
from common import interleaved  # noqa: E402


def main() -> None:
    print(f"tessera {tessera.__version__}, torch {torch.__version__}, "
          f"{tessera.get_num_threads()} threads")
    for n in (512, 1024):
        A, B = tessera.placeholder("A", [n, n]), tessera.placeholder("B", [n, n])
        k = tessera.Kernel([tessera.te_ops.matmul(A, B)], [A, B])
        a, b = torch.randn(n, n), torch.randn(n, n)
        out = torch.empty(n, n)
        torch.testing.assert_close(k(a, b), a @ b, rtol=1e-4, atol=1e-3)
        t = interleaved({"tessera": lambda: k(a, b, out=[out]),
                         "eager": lambda: torch.mm(a, b, out=out)}, rounds=3)
        print(f"gemm {n}x{n}x{n}: tessera {t['tessera']:.2f} ms, eager {t['eager']:.2f} ms, "
              f"speedup vs eager {t['eager'] / t['tessera']:.2f}x (jit {k.jit_ms:.0f} ms)")
    # A fused layer: relu(x @ w.T + b) in one kernel (bias and ReLU ride in the GEMM's epilogue).
    m, kdim, n = 256, 1024, 1024
    X = tessera.placeholder("X", [m, kdim])
    W = tessera.placeholder("W", [n, kdim])
    Bias = tessera.placeholder("bias", [n])
    layer = tessera.Kernel([tessera.te_ops.relu(tessera.te_ops.dense(X, W, Bias))], [X, W, Bias])
    x, w, bias = torch.randn(m, kdim), torch.randn(n, kdim), torch.randn(n)
    out = torch.empty(m, n)
    torch.testing.assert_close(layer(x, w, bias), torch.relu(x @ w.T + bias), rtol=1e-4,
                               atol=1e-3)
    t = interleaved({"tessera": lambda: layer(x, w, bias, out=[out]),
                     "eager": lambda: torch.relu(torch.nn.functional.linear(x, w, bias))},
                    rounds=3)
    print(f"linear+relu {m}x{kdim}->{n}: tessera {t['tessera']:.2f} ms, eager {t['eager']:.2f} ms, "
          f"speedup vs eager {t['eager'] / t['tessera']:.2f}x")


if __name__ == "__main__":
    main()
