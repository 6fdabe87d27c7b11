"""torch.compile(backend="luminal") on CUDA tensors: the op cases and tiny models of the CPU
suites, run on the GPU by pointer (skipped without a usable GPU; run on the device machine)."""
import pytest
import torch

import luminal as lm
import luminal.torch_backend as tb

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or lm.cuda_unavailable_reason() != "",
                                reason="no usable GPU here")

from test_torch_ops import CASES, flatten  # noqa: E402
from test_torch_ops_coverage import BOOL_CASES, BROADCAST_CASES, HALF_CASES, INT_CASES, LOWERED_CASES  # noqa: E402

# The coverage suite's tables too (rows that carry an xfail reason are left out here).
MORE_CASES = [c[:4] for c in LOWERED_CASES + BROADCAST_CASES + HALF_CASES + INT_CASES + BOOL_CASES if not isinstance(c[-1], str)]
from test_torch_models import FAMILIES, tiny  # noqa: E402


def cuda(x):
    return x.cuda() if isinstance(x, torch.Tensor) else x


# Where eager CUDA is the less exact side, the truth is eager on the CPU: PyTorch's CUDA cumsum
# keeps half-precision partial sums in half (pytorch/pytorch#180150), where luminal and the CPU
# sum in f32 and round once.
CPU_TRUTH = {"cumsum_f16", "cumsum_bf16"}


@pytest.mark.parametrize("name,fn,inputs,tol", CASES + MORE_CASES, ids=[c[0] for c in CASES] + ["more_" + c[0] for c in MORE_CASES])
def test_op_matches_eager_on_cuda(name, fn, inputs, tol):
    torch._dynamo.reset()
    cpu_inputs, inputs = inputs, tuple(cuda(x) for x in inputs)
    # cuDNN convolutions take TF32 by default (10-bit mantissas); luminal computes in f32.
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        want = [w.cuda() for w in flatten(fn(*cpu_inputs))] if name in CPU_TRUTH else flatten(fn(*inputs))
        got = flatten(torch.compile(fn, backend="luminal", dynamic=False)(*inputs))
    for g, w in zip(got, want):
        assert g.device.type == "cuda" and g.dtype == w.dtype and g.shape == w.shape
        if not w.is_floating_point():
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        else:  # GPU kernels sum in other orders than eager's (and TF32 is off in luminal)
            torch.testing.assert_close(g.float(), w.float(), rtol=max(tol, 1e-4), atol=max(tol, 1e-4), equal_nan=True)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_models_on_cuda(family):
    torch._dynamo.reset()
    model = tiny(family).cuda()
    ids = torch.tensor([[1, 5, 9, 33, 2, 17, 60, 4, 8]], device="cuda")
    with torch.no_grad():
        want = model(ids, use_cache=False).logits
        got = torch.compile(model, backend="luminal")(ids, use_cache=False).logits
    assert tb.last_graph.cuda
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_static_cache_decode_on_cuda_updates_the_cache_in_place():
    torch._dynamo.reset()
    model = tiny("llama").cuda()
    from transformers import StaticCache

    def decode(forward, steps=6):
        cache = StaticCache(config=model.config, max_cache_len=32)
        ids = torch.tensor([[1, 2, 3, 4, 5]], device="cuda")
        logits = model(ids, past_key_values=cache, cache_position=torch.arange(5, device="cuda"), use_cache=True).logits[:, -1]
        out = [logits]
        for pos in range(5, 5 + steps):
            tok = logits.argmax(-1, keepdim=True)
            logits = forward(tok, past_key_values=cache, cache_position=torch.tensor([pos], device="cuda"), use_cache=True).logits[:, -1]
            out.append(logits)
        return torch.stack(out), cache

    with torch.no_grad():
        want, want_cache = decode(model)
        got, got_cache = decode(torch.compile(model, backend="luminal"))
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    assert sum(m[3] for m in tb.last_graph.mutations) == 2 * model.config.num_hidden_layers
    # The token and position move every step; copied into luminal's buffers, they leave the
    # recorded CUDA graph in place: from the third step on, steps replay it.
    stats = tb.last_graph.compiled.cuda_graph_stats()
    assert stats["replayed"] >= 3 and stats["dropped"] == 0, stats
    for g, w in zip(got_cache.layers, want_cache.layers):
        torch.testing.assert_close(g.keys, w.keys, rtol=1e-4, atol=1e-4)


def test_int64_inputs_past_32_bits_are_an_error_on_cuda_too():
    # On CUDA the range checks of a call's int64 inputs are read back together after its one
    # synchronisation; a refused call leaves nothing half-set, so the next good one runs.
    torch._dynamo.reset()
    fn = torch.compile(lambda a, b: a + b, backend="luminal", dynamic=False)
    a = torch.tensor([1, -2, 2**31 - 3], dtype=torch.int64, device="cuda")
    b = torch.tensor([1, 1, 1], dtype=torch.int64, device="cuda")
    with torch.no_grad():
        assert torch.equal(fn(a, b), a + b)
        with pytest.raises(Exception, match=r"input \S+ \(int64\) holds values outside the 32-bit range"):
            fn(a, torch.tensor([1, 2**33, 1], dtype=torch.int64, device="cuda"))
        assert torch.equal(fn(a, b * 2), a + b * 2)


def test_counters_on_cuda_take_the_host_path_and_notice_writes():
    # Counters read by the graph are handed over from the host once their value is known; a
    # caller's write between calls is noticed (the counter is read again).
    from test_torch_ops import Counters
    torch._dynamo.reset()
    eager, compiled_model = Counters().cuda(), Counters().cuda()
    fn = torch.compile(compiled_model, backend="luminal")
    with torch.no_grad():
        for step in range(8):
            if step == 5:
                for m in (eager, compiled_model):
                    m.pos.fill_(40)
            x = torch.randn(3, device="cuda")
            torch.testing.assert_close(fn(x), eager(x))
    torch.testing.assert_close(compiled_model.pos, eager.pos)
    assert tb.last_graph.cuda and tb.last_graph._counter_bumps is not None
