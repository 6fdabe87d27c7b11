"""luminal.compile(model, example_inputs) through torch.export, against eager."""
import gc

import pytest
import torch

import luminal as lm


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, scale):
        self.calls.add_(1)  # a buffer mutation, copied back after each run
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x)))) * scale, x.mean()


def test_exported_module_matches_eager_and_updates_its_buffer():
    torch.manual_seed(0)
    model = Block().eval()
    x, scale = torch.randn(3, 16), torch.tensor(0.5)
    compiled = lm.compile(model, (x, scale))
    with torch.no_grad():
        want = model(x, scale)
        for _ in range(2):
            got = compiled(x, scale)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # The program's buffer is the model's: one eager call and two compiled ones counted there.
    assert model.calls.item() == 3


def test_dynamic_batch_and_survives_garbage_collection():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()
    batch = torch.export.Dim("batch", min=2, max=64)
    compiled = lm.compile(model, (torch.randn(3, 8),), dynamic_shapes=({0: batch},))
    want = {n: model(torch.ones(n, 8)).detach() for n in (2, 5, 17)}
    del model
    gc.collect()
    for n, w in want.items():
        torch.testing.assert_close(compiled(torch.ones(n, 8)), w, rtol=1e-5, atol=1e-5)


def test_a_graph_still_compiles_through_lm_compile():
    g = lm.Graph()
    lm.exp(g.input("x", "f32", [2])).output("y")
    assert lm.compile(g, backend="reference").plan_nodes > 0
    with pytest.raises(ValueError, match="unknown option"):
        lm.compile(torch.nn.Linear(2, 2), (torch.ones(1, 2),), serach=1)
