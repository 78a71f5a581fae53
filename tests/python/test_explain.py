"""tessera.explain on a small compiled model: partitions, implementations, shares, fallbacks."""

from html.parser import HTMLParser

import pytest
import torch

import tessera


class _Tables(HTMLParser):
    """Counts table rows and checks that tags nest properly."""

    def __init__(self):
        super().__init__()
        self.stack, self.rows = [], 0

    def handle_starttag(self, tag, attrs):
        if tag not in ("br", "img"):
            self.stack.append(tag)
        self.rows += tag == "tr"

    def handle_startendtag(self, tag, attrs):  # <img .../>: a void element, nothing to close
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        # torch.cumsum has no lowering: one ATen fallback with a reason.
        return torch.cumsum(self.fc2(h), dim=-1).sin()


@pytest.fixture(scope="module")
def explained():
    torch.manual_seed(0)
    model = Net().eval()
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="tessera", options={"records_db": False})
    with torch.no_grad():
        compiled(torch.randn(4, 32))
    other = torch.compile(lambda x: x * 3 + 1, backend="tessera", options={"records_db": False})
    other(torch.randn(5))  # another compiled object: must not show up in the model's report
    return tessera.explain(compiled), tessera.explain(other)


def test_text_lists_every_partition_and_fallback(explained):
    exp, _ = explained
    assert len(exp.graphs) == 1
    g = exp.graphs[0]
    text = str(exp)
    parts = g.summary.partitions
    assert parts, "the model has partitions"
    for p in parts:
        assert p["impl"] in ("tessera", "aten", "split", "constant", "failed")
        if p["impl"] in ("tessera", "split"):
            assert p["schedule"] in ("rules", "construct", "search", "records", "given")
    for r in g.rows:
        if r.ops != ["other (ATen ops outside partitions, runner)"]:
            assert "+".join(dict.fromkeys(o.replace("aten.", "").rsplit(".", 1)[0]
                                          for o in r.ops)) in text
    assert "aten.cumsum.default" in text and "no Tessera lowering" in text
    fallbacks = g.summary.fallbacks()
    assert fallbacks["unsupported"] == ["aten.cumsum.default: no Tessera lowering"]
    assert not fallbacks["internal_error"]
    slower = len(fallbacks["slower"])
    assert "left to ATen: 1 unsupported" + (f", {slower} slower" if slower else "") in text


def test_shares_sum_to_one(explained):
    exp, _ = explained
    g = exp.graphs[0]
    shares = [r.share for r in g.rows]
    assert all(s is not None and 0 <= s <= 1 for s in shares)
    assert sum(shares) == pytest.approx(1.0, abs=1e-9)
    measured = [r for r in g.rows if r.times_ms]
    assert measured, "partitions are measured against ATen with anchor_measure on"
    assert all("aten" in r.times_ms for r in measured)


def test_html_parses_into_a_table(explained):
    exp, _ = explained
    parser = _Tables()
    parser.feed(exp._repr_html_())
    parser.close()
    assert not parser.stack
    assert parser.rows == 1 + len(exp.graphs[0].rows)


def test_reports_only_the_graphs_of_the_object(explained):
    exp, other = explained
    assert [g.serial for g in other.graphs] != [g.serial for g in exp.graphs]
    assert len(other.graphs) == 1
    assert other.graphs[0].summary.partitions[0]["ops"] == ["aten.mul.Tensor", "aten.add.Tensor"]


def test_nothing_compiled_yet_says_so():
    fresh = torch.compile(lambda x: x - 1, backend="tessera")
    assert "no compiled graphs" in str(tessera.explain(fresh))
