"""tessera._C.cuda without a GPU: GPU schedules checked by the interpreter, CUDA C compiled where
a compiler exists, and benchmarks/cuda_check.py's summary."""

import json
import os
import subprocess
import sys

import pytest

import tessera
from tessera import _C

T = tessera.te_ops
P = tessera.placeholder
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_check_schedule_matmul_and_softmax():
    a, b = P("A", [19, 23]), P("B", [23, 21])
    r = _C.cuda.check_schedule([T.matmul(a, b)], [a, b], "mm")
    assert r["schedule"] == "tiled"
    assert r["passed"], r["message"]
    assert r["races"] == 0 and r["out_of_bounds"] == 0
    x = P("x", [5, 70])
    r = _C.cuda.check_schedule([T.softmax(x)], [x], "softmax")
    assert r["schedule"] == "row" and r["passed"], r["message"]


def test_device_queries_never_raise_without_a_driver():
    assert _C.cuda.device_count() >= 0
    assert _C.cuda.compiler() in ("nvrtc", "nvcc", "none")


@pytest.mark.skipif(_C.cuda.compiler() == "none", reason="neither NVRTC nor nvcc")
def test_compile_kernel_reports_ptxas():
    a, b = P("A", [64, 64]), P("B", [64, 64])
    k = _C.cuda.compile_kernel([T.matmul(a, b)], [a, b], "mm64")
    assert "__global__ void mm64(" in k["source"]
    assert k["cubin_bytes"] > 0
    if k["ptxas_found"]:
        assert k["registers"] > 0 and k["spill_bytes"] == 0
    c = _C.cuda.compile_kernel([T.matmul(a, b)], [a, b], "mm64c", construct=True)
    assert c["config"].startswith("vthread=") and c["predicted_ms"] > 0


def run_cuda_check(tmp_path, *args) -> dict:
    """benchmarks/cuda_check.py run with `args`: its JSON (the run must exit 0)."""
    out = tmp_path / "check.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "torch_backend"))
    subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "cuda_check.py"), "--json",
                    str(out), *args], check=True, env=env, capture_output=True)
    return json.loads(out.read_text())


@pytest.mark.skipif(_C.cuda.compiler() == "none", reason="neither NVRTC nor nvcc")
def test_cuda_check_script(tmp_path):
    s = run_cuda_check(tmp_path, "--ops", "gemm1024", "matmul_37x29x53", "softmax_7x100")
    assert (s["sources_compiled"], s["sources_failed"]) == (2, 0)  # default and construct
    assert (s["interpreter_cases"], s["interpreter_failures"]) == (2, 0)
    assert s["races"] == 0 and s["out_of_bounds"] == 0 and s["uninitialized_reads"] == 0
    assert s["device"] is None or isinstance(s["device"], str)


@pytest.mark.skipif(_C.cuda.compiler() == "none", reason="neither NVRTC nor nvcc")
def test_cuda_check_compiles_a_models_kernels(tmp_path):
    """ResNet-18's kernels as the backend builds them, each compiled for the GPU: every one
    compiles, and the stem (conv + batch norm + relu + max pool) is two launches."""
    s = run_cuda_check(tmp_path, "--ops", "none", "--models", "resnet18")
    assert s["models"] == ["resnet18"]
    assert s["model_kernels_failed"] == 0
    assert s["model_kernels_compiled"] >= 10
    kernels = s["model_kernels"]
    # (Kernel names are cut at 60 characters: the stem's ends in "max_po".)
    stem = [k for k in kernels if "max_po" in k["op"]]
    assert len(stem) == 1 and stem[0]["schedule"] == "tiled+tiled" and stem[0]["launches"] == 2
    # Every conv with its batch norm (scale inlined on the GPU) is one tiled launch, followed by
    # a launch of its own only for a pool or the global mean.
    convs = [k for k in kernels if k["op"].startswith("convolution")]
    assert len(convs) >= 10
    assert all(k["schedule"].split("+")[0] == "tiled" and k["launches"] <= 2 for k in convs)
    assert sum(k["launches"] == 1 for k in convs) >= 10
