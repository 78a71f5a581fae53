"""A short end-to-end run for `make sanitize`: the package imported from the sanitized build,
a model compiled through torch.compile, tessera.op kernels, and the hostile inputs that once
crashed or overflowed a stack. Every result is checked against eager PyTorch; any sanitizer
report aborts the process (ASAN_OPTIONS=abort_on_error=1, UBSAN_OPTIONS=halt_on_error=1).

Run it through the Makefile, which stages the package next to the sanitized _C and preloads
the ASan runtime (see the `sanitize` target).
"""

import os
import sys

import torch

import tessera

HERE = os.path.dirname(os.path.abspath(__file__))


def check(name, ok):
    print(f"  {'ok  ' if ok else 'FAIL'} {name}", flush=True)
    if not ok:
        sys.exit(f"sanitize smoke run: {name} failed")


def main():
    staged = os.environ.get("PYTHONPATH", "")
    check(f"tessera imported from the sanitized build ({tessera.__file__})",
          bool(staged) and os.path.abspath(tessera.__file__).startswith(os.path.abspath(staged)))
    torch.manual_seed(0)

    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 8)).eval()
    x = torch.randn(16, 32)
    compiled = torch.compile(model, backend="tessera", options={"anchor_measure": False})
    with torch.no_grad():
        check("MLP with layer norm", torch.allclose(compiled(x), model(x), atol=1e-4))
        for n in (1, 5, 16, 33):
            xn = torch.randn(n, 32)
            check(f"MLP at batch {n}", torch.allclose(compiled(xn), model(xn), atol=1e-4))

    f = torch.compile(lambda x: (torch.softmax(x, -1), x.sum(), torch.tanh(-x)),
                      backend="tessera", options={"anchor_measure": False})
    y = torch.randn(64, 300)
    got, want = f(y), (torch.softmax(y, -1), y.sum(), torch.tanh(-y))
    check("softmax, full sum, tanh", all(torch.allclose(g, w, atol=1e-4)
                                         for g, w in zip(got, want)))
    long_sum = torch.compile(lambda x: (x * 2).sum(), backend="tessera",
                             options={"anchor_measure": False})
    check("sum of 2^22 twos", long_sum(torch.ones(1 << 22)).item() == float(1 << 23))

    gemm = tessera.op("C[i, j] = relu(sum(k) A[i, k] * B[k, j])")
    a, b = torch.randn(37, 29), torch.randn(29, 41)
    check("tessera.op GEMM + relu", torch.allclose(gemm(a, b), torch.relu(a @ b), atol=1e-4))

    div = tessera.op("C[i] = A[i] // B[i]")
    ia = torch.arange(10, dtype=torch.int32)
    ib = torch.ones(10, dtype=torch.int32)
    ib[4] = 0
    try:
        div(ia, ib)
        check("integer division by zero raises", False)
    except RuntimeError as e:
        check("integer division by zero raises", "ZeroDivisionError" in str(e))

    for source in ("C[i] = " + "(" * 10000 + "A[i]" + ")" * 10000,
                   "C[i] = " + "-" * 20000 + "A[i]", "C[i] = A[i]" + " + A[i]" * 10000):
        try:
            tessera.op(source)
            check("deep expression refused", False)
        except tessera.expr_op.ExpressionError as e:
            check("deep expression refused", "nests deeper" in str(e))

    def chain(x):
        for _ in range(300):
            x = x * 1.001 + 0.001
        return x
    z = torch.randn(50)
    deep = torch.compile(chain, backend="tessera", options={"anchor_measure": False})
    check("300-op elementwise chain", torch.allclose(deep(z), chain(z), rtol=1e-5, atol=1e-6))
    print("sanitize smoke run: all checks passed")


if __name__ == "__main__":
    main()
