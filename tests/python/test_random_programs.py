"""Random small programs (elementwise chains, casts, comparisons, broadcasts, transposed inputs,
reductions) in every dtype Tessera computes, compiled and compared with eager: a seeded,
differential check of the lowerings and the code generator together. Each program runs twice,
since the first call of a graph runs eagerly while recording shapes. Integer results must be
equal; floating-point ones within a tolerance per dtype (kernels contract multiply-adds and use
their own vector math)."""

import random

import pytest
import torch

import tessera  # noqa: F401  (registers the backend)

KERNELS = {"anchor_measure": False, "records_db": False}
CASES = 60

_FLOAT_UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": lambda x: torch.exp(x.clamp(max=10)),
    "log1p_abs": lambda x: torch.log1p(x.abs()), "sin": torch.sin, "tanh": torch.tanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "sqrt_abs": lambda x: x.abs().sqrt(),
    "floor": torch.floor, "round": torch.round, "erf": torch.erf, "sign": torch.sign,
    "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
    "clamp": lambda x: x.clamp(-0.5, 2.5),
    "to_int_and_back": lambda x: x.clamp(-1000, 1000).to(torch.int32).to(x.dtype),
    "compare_and_cast": lambda x: ((x > 0) & (x < 3)).to(x.dtype) + (x >= 1).to(x.dtype),
}
_INT_UNARY = {
    "abs": torch.abs, "neg": torch.neg, "bitwise_not": torch.bitwise_not, "sign": torch.sign,
    "square": lambda x: x * x, "clamp": lambda x: x.clamp(-7, 20),
    "compare_and_cast": lambda x: ((x > 0) & (x < 3)).to(x.dtype) + (x >= 1).to(x.dtype),
    "through_float": lambda x: (x.to(torch.float32) * 0.37).to(x.dtype),
}
_FLOAT_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
    "remainder": lambda a, b: torch.remainder(a, b.abs() + 0.5),
    "where": lambda a, b: torch.where(a > b, a, b * 2),
}
_INT_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
    "minimum": torch.minimum, "and": torch.bitwise_and, "xor": torch.bitwise_xor,
    "floor_divide": lambda a, b: torch.floor_divide(a, torch.where(b == 0, 1, b)),
    "remainder": lambda a, b: torch.remainder(a, torch.where(b == 0, 1, b)),
    "where": lambda a, b: torch.where(a > b, a, b * 2),
}
_FLOAT_REDUCE = {
    "sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin,
    "logsumexp": torch.logsumexp, "softmax": torch.softmax,
    "max_values": lambda x, d: torch.max(x, d).values,
    "sum_keepdim_times": lambda x, d: x.sum(d, keepdim=True) * x,
}
_INT_REDUCE = {
    "sum": torch.sum, "amax": torch.amax, "amin": torch.amin,
    "max_values": lambda x, d: torch.max(x, d).values,
    "sum_keepdim_times": lambda x, d: x.sum(d, keepdim=True) * x,
}
_TOLERANCE = {torch.float16: 2e-2, torch.bfloat16: 1e-1, torch.float32: 1e-4,
              torch.float64: 1e-9}


def _program(seed: int):
    """(function, inputs, description) of random program number `seed`."""
    rng = random.Random(seed)
    dtype = rng.choice([torch.float32, torch.float32, torch.int32, torch.int64, torch.float16,
                        torch.bfloat16, torch.float64])
    is_float = dtype.is_floating_point
    unary = _FLOAT_UNARY if is_float else _INT_UNARY
    binary = _FLOAT_BINARY if is_float else _INT_BINARY
    reduce = _FLOAT_REDUCE if is_float else _INT_REDUCE
    ndim = rng.randint(1, 3)
    shape = [rng.choice([1, 2, 3, 5, 16, 17, 33]) for _ in range(ndim)]
    transpose = ndim >= 2 and rng.random() < 0.3
    steps = []
    for _ in range(rng.randint(1, 6)):
        k = rng.random()
        if k < 0.4:
            steps.append(("unary", rng.choice(sorted(unary))))
        elif k < 0.8:
            steps.append(("binary", rng.choice(sorted(binary)), rng.random() < 0.3))
        else:
            steps.append(("reduce", rng.choice(sorted(reduce)), rng.randrange(-ndim, ndim)))
            break

    def fn(x, y):
        if transpose:
            x, y = x.transpose(0, 1), y.transpose(0, 1)
        v = x
        for step in steps:
            if step[0] == "unary":
                v = unary[step[1]](v)
            elif step[0] == "binary":
                other = y.sum(0, keepdim=True).to(y.dtype) if step[2] else y  # broadcast
                v = binary[step[1]](v, other)
            else:
                v = reduce[step[1]](v, step[2])
        return v

    g = torch.Generator().manual_seed(seed)
    if is_float:
        inputs = [(torch.randn(shape, generator=g) * 3).to(dtype) for _ in range(2)]
    else:
        inputs = [torch.randint(-50, 50, shape, generator=g, dtype=dtype) for _ in range(2)]
    return fn, inputs, f"{dtype} {shape} transposed={transpose} {steps}"


@pytest.mark.parametrize("seed", range(CASES))
def test_random_program_matches_eager(seed):
    fn, inputs, description = _program(seed)
    want = fn(*inputs)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="tessera", options=KERNELS)
    compiled(*inputs)  # records shapes (eager)
    got = compiled(*inputs)  # Tessera's kernels
    assert got.dtype == want.dtype and got.shape == want.shape, description
    if want.is_floating_point():
        tol = _TOLERANCE[want.dtype]
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True,
                                   msg=lambda m: f"{description}: {m}")
    else:
        assert torch.equal(got, want), f"{description}: {got} != {want}"
