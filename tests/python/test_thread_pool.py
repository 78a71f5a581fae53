"""Tessera's parallel loops run on torch's OpenMP team by default (one set of threads in the
process); TESSERA_THREAD_POOL=tessera keeps Tessera's own pool. Both give the same results."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tessera

T = tessera.te_ops

OPENMP_TORCH = "OpenMP" in torch.__config__.parallel_info()


def _run_script(body: str, pool: str) -> str:
    env = dict(os.environ, TESSERA_THREAD_POOL=pool)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


# A parallel Tessera GEMM `k` on x, y and torch's result `want` (which starts torch's OpenMP
# team), both pools with two threads.
_SETUP = """
    import os, numpy as np, torch, tessera
    torch.set_num_threads(2)
    tessera.set_num_threads(2)
    T = tessera.te_ops
    a, b = tessera.placeholder("A", [256, 192]), tessera.placeholder("B", [192, 320])
    k = tessera.Kernel([T.matmul(a, b)], [a, b], threads="parallel")
    x, y = torch.randn(256, 192), torch.randn(192, 320)
    want = torch.mm(x, y)
"""

# Counts the process's threads before and after the kernel runs; prints
# "<pool> <threads added by the kernel> <max error>".
_THREADS_SCRIPT = _SETUP + """
    before = len(os.listdir("/proc/self/task"))
    got = k(x, y)
    after = len(os.listdir("/proc/self/task"))
    print(tessera._C.thread_pool(), after - before, float((got - want).abs().max()))
"""


@pytest.mark.skipif(not OPENMP_TORCH, reason="torch is not built with OpenMP")
def test_default_pool_is_torchs_openmp_team():
    pool, added, err = _run_script(_THREADS_SCRIPT, "openmp").split()
    assert pool == "openmp"
    assert int(added) == 0, "a Tessera kernel started threads of its own next to torch's team"
    assert float(err) < 1e-3


@pytest.mark.skipif(not OPENMP_TORCH, reason="torch is not built with OpenMP")
def test_kernels_follow_torch_set_num_threads_unless_pinned():
    assert tessera._C.thread_pool() == "openmp"
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert tessera.get_num_threads() == 1
        torch.set_num_threads(3)
        assert tessera.get_num_threads() == 3
        tessera.set_num_threads(2)  # pinned
        torch.set_num_threads(1)
        assert tessera.get_num_threads() == 2
    finally:
        tessera.set_num_threads(0)
        torch.set_num_threads(before)
    assert tessera.get_num_threads() == before


def test_own_pool_on_request():
    pool, added, err = _run_script(_THREADS_SCRIPT, "tessera").split()
    assert pool == "tessera"
    assert int(added) == 1  # one worker next to the calling thread
    assert float(err) < 1e-3


@pytest.mark.skipif(not OPENMP_TORCH, reason="torch is not built with OpenMP")
def test_switching_pools_in_process_gives_identical_results():
    a, b = tessera.placeholder("A", [300, 130]), tessera.placeholder("B", [130, 257])
    kernel = tessera.Kernel([T.matmul(a, b)], [a, b])
    x, y = torch.randn(300, 130), torch.randn(130, 257)
    want = torch.mm(x, y)
    try:
        library = os.path.basename(tessera._C.use_openmp_threads(True))
        assert library.startswith(("libgomp", "libiomp")), library
        assert tessera._C.thread_pool() == "openmp"
        on_openmp = kernel(x, y)
        assert tessera._C.use_openmp_threads(False) == ""
        assert tessera._C.thread_pool() == "tessera"
        on_own = kernel(x, y)
    finally:
        tessera._C.use_openmp_threads(os.environ.get("TESSERA_THREAD_POOL", "openmp") != "tessera")
    torch.testing.assert_close(on_openmp, want, rtol=1e-4, atol=1e-3)
    assert torch.equal(on_openmp, on_own)  # same chunks, same summation order


def test_kernel_inside_a_compiled_model_with_aten_ops_matches_eager():
    # ATen's conv and Tessera's kernels alternate on the same threads.
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(16, 16, 1), torch.nn.Hardtanh(0, 6)).eval()
    x = torch.randn(2, 8, 20, 20)
    with torch.no_grad():
        want = model(x)
        got = torch.compile(model, backend="tessera")(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not OPENMP_TORCH, reason="torch is not built with OpenMP")
def test_forked_child_runs_kernels_on_the_own_pool():
    # libgomp's team does not survive fork (a child's parallel region hangs, torch's own ops
    # included); a forked child's Tessera kernels go back to Tessera's pool and complete.
    body = _SETUP + """
    k(x, y)  # the parent's OpenMP team is running
    pid = os.fork()
    if pid == 0:  # no torch op here: those would hang in libgomp
        ok = (tessera._C.thread_pool() == "tessera"
              and np.allclose(k(x, y).numpy(), want.numpy(), atol=1e-3))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    print(tessera._C.thread_pool(), os.WEXITSTATUS(status))
    """
    assert _run_script(body, "openmp").split() == ["openmp", "0"]
