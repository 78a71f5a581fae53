"""StageAnnotation.tile_mid from Python: a four-level GEMM schedule builds and matches torch."""

import torch

import tessera
from tessera import te_ops as ops


def test_four_level_schedule_from_python_matches_torch():
    A, B = tessera.placeholder("A", [100, 130]), tessera.placeholder("B", [130, 257])
    rules = tessera.Kernel([ops.matmul(A, B)], [A, B])
    schedule = rules.schedule.copy()
    stage = schedule.stages[0]
    assert stage.tile_mid == []  # the rules build three levels
    stage.sketch = "multi_level_tiling"
    stage.tile_mid = [t for t in stage.tile_reg]  # one register tile per mid tile
    stage.tile_reduce = [32]
    assert '"tile_mid"' in stage.dump()
    kernel = tessera.Kernel([ops.matmul(A, B)], [A, B], schedule=schedule)
    assert "_mt in" in kernel.loop_ir
    a, b = torch.randn(100, 130), torch.randn(130, 257)
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # Mid tiles equal to the cache tiles are no mid level: not written, same kernel as the rules.
    stage.tile_mid = list(stage.tile_outer)
    assert '"tile_mid"' not in stage.dump()
