"""Constant folding (backend/constant_fold.py): values read from no input, and in inference
graphs values computed from weights, are computed once; a value computed from weights follows
them when they change in place or are replaced."""

import torch
import torch.nn as nn

from tessera.backend import graph as graph_mod

OPTIONS = {"tune": "default", "anchor_measure": False, "records_db": False, "fallback": False}


class InterpolatedBias(nn.Module):
    """BEiT's relative position bias: a learned table, resized by bilinear interpolation and
    gathered by a fixed index on every call, added to the scores."""

    def __init__(self, side: int = 5, heads: int = 3):
        super().__init__()
        self.side, self.heads = side, heads
        self.table = nn.Parameter(torch.randn(side * side, heads))
        self.register_buffer("index", torch.randint(0, side * side, (16, 16)))

    def forward(self, scores):  # scores: [batch, heads, 16, 16]
        grid = self.table.reshape(1, self.side, self.side, self.heads).permute(0, 3, 1, 2)
        grid = nn.functional.interpolate(grid, size=(self.side, self.side), mode="bilinear")
        table = grid.permute(0, 2, 3, 1).reshape(self.side * self.side, self.heads)
        bias = table[self.index.view(-1)].view(16, 16, self.heads).permute(2, 0, 1)
        return scores + bias.unsqueeze(0)


def _compiled(model: nn.Module):
    """(the Tessera-compiled model, the serial its graphs will come after)."""
    torch._dynamo.reset()
    return torch.compile(model, backend="tessera", options=OPTIONS), graph_mod.last_serial()


def _graphs_since(serial):
    return [g for g in graph_mod.compiled_graphs() if g.serial > serial]


def test_values_computed_from_weights_are_folded_and_follow_the_weights():
    model = InterpolatedBias().eval()
    x = torch.randn(2, 3, 16, 16)
    compiled, since = _compiled(model)
    with torch.no_grad():
        compiled(x)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    (graph,) = _graphs_since(since)
    assert graph.folded.derived, "the bias computed from the table was not folded"
    # The folded graph no longer interpolates or gathers: only the addition is left.
    targets = {str(n.target) for n in graph.gm.graph.nodes if n.op == "call_function"}
    assert not any("upsample" in t or "index" in t for t in targets), targets

    with torch.no_grad():
        model.table.mul_(2.0)  # in place: the version counter moves
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
        model.load_state_dict({"table": torch.randn_like(model.table), "index": model.index})
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


class ChainedTables(nn.Module):
    """A value computed from a weight that another folded value is computed from (Whisper's
    pattern that once failed): both are folded, and both follow the weight."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(8, 4))

    def forward(self, x):
        scaled = self.table * 2.0
        norm = scaled.square().sum(0, keepdim=True).sqrt()
        return x + scaled + norm


def test_a_folded_value_computed_from_another_follows_the_weights():
    model = ChainedTables().eval()
    x = torch.randn(8, 4)
    compiled, since = _compiled(model)
    with torch.no_grad():
        compiled(x)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
        (graph,) = _graphs_since(since)
        assert len(graph.folded.derived) == 2
        model.table.add_(1.0)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


def test_weights_are_not_folded_where_they_take_gradients():
    model = InterpolatedBias().train()
    x = torch.randn(2, 3, 16, 16)
    compiled, since = _compiled(model)
    compiled(x).sum().backward()
    got = model.table.grad.clone()
    model.table.grad = None
    model(x).sum().backward()
    torch.testing.assert_close(got, model.table.grad, rtol=1e-5, atol=1e-5)
    assert all(not g.folded.derived for g in _graphs_since(since) if g.folded is not None)
    torch._dynamo.reset()
