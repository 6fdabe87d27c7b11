"""Aten ops through torch.compile(backend="luminal") against eager PyTorch."""
import pytest
import torch

import luminal.torch_backend as tb

torch.manual_seed(0)


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


EMPTY_ROW_MASK = torch.ones(3, 5, dtype=torch.bool)
EMPTY_ROW_MASK[1] = False  # a query row with no key to attend: zeros in PyTorch, not 0/0
# (an input of the case, so the CUDA suite moves it to the device with q, k and v)


def pos(*shape):
    return torch.rand(*shape) + 0.1


def ints(*shape, lo=-9, hi=10, dtype=torch.int64):
    return torch.randint(lo, hi, shape, dtype=dtype)


def nonzero_ints(*shape):
    x = ints(*shape)
    return torch.where(x == 0, torch.ones_like(x), x)


F = torch.nn.functional

# (name, function, inputs, tolerance): exact for integer and bool results, 1e-5 relative for
# most float ops; looser where luminal computes the op another way (noted).
CASES = [
    # elementwise arithmetic, Tensor and Scalar forms, broadcasting
    ("add", lambda a, b: a + b, (r(3, 4), r(4)), 1e-5),
    ("add_alpha", lambda a, b: torch.add(a, b, alpha=2.5), (r(3, 4), r(3, 4)), 1e-5),
    ("add_scalar", lambda a: a + 2.5, (r(3, 4),), 1e-5),
    ("sub", lambda a, b: a - b, (r(2, 3, 4), r(3, 1)), 1e-5),
    ("rsub", lambda a: 1.0 - a, (r(5),), 1e-5),
    ("mul", lambda a, b: a * b, (r(3, 4), r(3, 4)), 1e-5),
    ("div", lambda a, b: a / b, (r(3, 4), pos(3, 4)), 1e-5),
    ("div_int", lambda a, b: a / b, (ints(6), nonzero_ints(6)), 1e-5),
    ("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), (ints(8), nonzero_ints(8)), 0),
    ("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), (ints(8), nonzero_ints(8)), 0),
    ("floor_divide", lambda a, b: torch.floor_divide(a, b), (ints(8), nonzero_ints(8)), 0),
    ("remainder", lambda a, b: torch.remainder(a, b), (ints(8), nonzero_ints(8)), 0),
    ("remainder_float", lambda a, b: torch.remainder(a, b), (r(8), pos(8)), 1e-5),
    ("fmod", lambda a, b: torch.fmod(a, b), (r(8), pos(8)), 1e-5),
    ("pow_scalar", lambda a: a**3, (r(6),), 1e-5),
    ("pow_tensor", lambda a, b: torch.pow(a, b), (pos(6), r(6)), 1e-5),
    ("sqrt_pow", lambda a: a**0.5, (pos(6),), 1e-5),
    ("maximum", torch.maximum, (r(4, 4), r(4, 4)), 0),
    ("minimum", torch.minimum, (r(4, 4), r(4)), 0),
    ("int_arith", lambda a, b: a * 3 + b - 1, (ints(5), ints(5)), 0),
    ("int32", lambda a, b: a + b, (ints(5, dtype=torch.int32), ints(5, dtype=torch.int32)), 0),
    # comparisons and logic
    ("eq", lambda a, b: a == b, (ints(10, lo=0, hi=3), ints(10, lo=0, hi=3)), 0),
    ("ne_scalar", lambda a: a != 1, (ints(10, lo=0, hi=3),), 0),
    ("lt", lambda a, b: a < b, (r(4, 4), r(4, 4)), 0),
    ("ge_scalar", lambda a: a >= 0.0, (r(4, 4),), 0),
    ("logical", lambda a, b: (a & b) | ~a, (r(8) > 0, r(8) > 0), 0),
    ("logical_xor", lambda a, b: torch.logical_xor(a > 0, b > 0), (r(8), r(8)), 0),
    ("where", lambda c, a, b: torch.where(c > 0, a, b), (r(3, 4), r(3, 4), r(4)), 0),
    ("where_scalar", lambda c, a: torch.where(c > 0, a, 0.0), (r(3, 4), r(3, 4)), 0),
    ("masked_fill", lambda a, m: a.masked_fill(m > 0, -1e9), (r(3, 4), r(3, 4)), 0),
    ("clamp", lambda a: torch.clamp(a, -0.5, 0.5), (r(10),), 0),
    ("clamp_min", lambda a: torch.clamp(a, min=0.0), (r(10),), 0),
    # unary
    *[(f"unary_{n}", getattr(torch, n), (r(4, 5),), 1e-5) for n in ["neg", "abs", "sign", "exp", "sin", "cos", "tanh", "sigmoid",
                                                                      "floor", "ceil", "round", "trunc", "erf", "relu"]],
    *[(f"unary_{n}", getattr(torch, n), (pos(4, 5),), 1e-5) for n in ["log", "log2", "log1p", "sqrt", "rsqrt", "reciprocal"]],
    ("exp2", torch.exp2, (r(4, 5),), 1e-5),
    ("expm1", torch.expm1, (r(4, 5),), 1e-5),
    ("silu", F.silu, (r(4, 5),), 1e-5),
    ("gelu", F.gelu, (r(4, 5),), 1e-5),
    ("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"), (r(4, 5),), 1e-5),
    ("isnan_isinf", lambda a: torch.isnan(a.log()) | torch.isinf(1 / a), (torch.tensor([-1.0, 0.0, 2.0]),), 0),
    # reductions
    ("sum", lambda a: a.sum(-1), (r(3, 5),), 1e-5),
    ("sum_all", lambda a: a.sum(), (r(3, 5),), 1e-5),
    ("sum_keepdim", lambda a: a.sum((0, 2), keepdim=True), (r(2, 3, 4),), 1e-5),
    ("mean", lambda a: a.mean(1), (r(3, 5, 2),), 1e-5),
    ("amax", lambda a: a.amax(-1), (r(3, 5),), 0),
    ("amin", lambda a: a.amin(0), (r(3, 5),), 0),
    ("max_dim", lambda a: torch.max(a, 1), (r(3, 5),), 0),
    ("min_dim", lambda a: torch.min(a, 0, keepdim=True), (r(3, 5),), 0),
    ("argmax", lambda a: a.argmax(-1), (r(4, 7),), 0),
    ("argmin", lambda a: a.argmin(0), (r(4, 7),), 0),
    ("prod", lambda a: a.prod(-1), (r(3, 4),), 1e-5),
    ("var", lambda a: a.var(-1), (r(3, 6),), 1e-5),
    ("std", lambda a: a.std(0, correction=0), (r(5, 3),), 1e-5),
    ("var_dim_positional", lambda a: torch.ops.aten.var.dim(a, [1], False, True), (r(3, 6),), 1e-5),
    ("any_all", lambda a: (a > 1).any(-1) | (a > -3).all(-1), (r(4, 6),), 0),
    ("cumsum", lambda a: a.cumsum(1), (r(3, 6),), 1e-5),
    ("cumprod", lambda a: a.cumprod(-1), (r(3, 6),), 1e-5),
    ("logsumexp", lambda a: a.logsumexp(-1), (r(3, 6),), 1e-5),
    ("softmax", lambda a: a.softmax(-1), (r(3, 7),), 1e-5),
    ("log_softmax", lambda a: F.log_softmax(a, 1), (r(3, 7),), 1e-5),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (6,), w, b), (r(4, 6), r(6), r(6)), 1e-4),
    ("rms_norm", lambda a, w: F.rms_norm(a, (6,), w, eps=1e-6), (r(4, 6), r(6)), 1e-5),
    # matrix products
    ("mm", torch.mm, (r(3, 4), r(4, 5)), 1e-5),
    ("bmm", torch.bmm, (r(2, 3, 4), r(2, 4, 5)), 1e-5),
    ("matmul_batched", torch.matmul, (r(2, 3, 4), r(4, 5)), 1e-5),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), (r(5), r(3, 4), r(4, 5)), 1e-5),
    ("linear", F.linear, (r(2, 3, 8), r(5, 8), r(5)), 1e-5),
    ("linear_bf16", lambda x, w: F.linear(x, w), (r(3, 8, dtype=torch.bfloat16), r(5, 8, dtype=torch.bfloat16)), 1e-2),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (r(1, 2, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), 1e-5),
    ("sdpa_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0), (r(2, 2, 3, 4), r(2, 2, 6, 4), r(2, 2, 6, 4), r(3, 6)), 1e-5),
    ("sdpa_mask_empty_row", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     (r(1, 2, 3, 4), r(1, 2, 5, 4), r(1, 2, 5, 4), EMPTY_ROW_MASK), 1e-5),
    ("baddbmm", lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2), (r(2, 3, 5), r(2, 3, 4), r(2, 4, 5)), 1e-5),
    ("sdpa_gqa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), (r(1, 4, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), 1e-5),
    ("grouped_mm", lambda a, b, o: torch._grouped_mm(a, b, offs=o), (r(6, 8, dtype=torch.bfloat16), r(3, 8, 8, dtype=torch.bfloat16), torch.tensor([2, 2, 6], dtype=torch.int32)), 1e-2),
    ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), (r(2, 4, 5), r(4), r(4)), 1e-5),
    ("layer_norm_bf16", lambda a: F.layer_norm(a, (8,)), (r(3, 8, dtype=torch.bfloat16),), 1e-2),
    ("softmax_bf16", lambda a: a.softmax(-1), (r(3, 4, dtype=torch.bfloat16),), 0),
    ("var_mean", lambda a: torch.var_mean(a, 0, correction=0), (r(3, 4),), 1e-5),
    ("std_mean", lambda a: torch.std_mean(a, 1), (r(3, 4),), 1e-5),
    ("activations", lambda a: F.hardswish(a) + F.hardsigmoid(a) + F.elu(a) + F.softplus(a) + F.mish(a) + F.leaky_relu(a), (r(8),), 1e-5),
    # convolution and pooling
    ("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1), (r(2, 4, 9), r(6, 4, 3), r(6)), 1e-5),
    ("conv2d_dilated_groups", lambda x, w: F.conv2d(x, w, padding=1, dilation=2, groups=2), (r(1, 4, 7, 6), r(6, 2, 3, 3)), 1e-5),
    ("conv2d_depthwise", lambda x, w: F.conv2d(x, w, groups=4), (r(1, 4, 7, 6), r(4, 1, 3, 3)), 1e-5),
    ("conv3d", lambda x, w: F.conv3d(x, w, stride=(1, 2, 1)), (r(1, 2, 4, 5, 4), r(3, 2, 2, 2, 2)), 1e-5),
    ("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), (r(1, 4, 5, 5), r(4, 3, 3, 3)), 1e-5),
    ("conv_transpose1d_groups", lambda x, w: F.conv_transpose1d(x, w, stride=3, groups=2), (r(1, 4, 5), r(4, 2, 3)), 1e-5),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), (r(1, 2, 6, 6),), 0),
    ("max_pool2d_indices", lambda x: F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True), (r(1, 2, 7, 7),), 0),
    ("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2), (r(2, 3, 9),), 0),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), (r(1, 2, 7, 7),), 1e-5),
    ("avg_pool2d_exclude_pad", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), (r(1, 2, 7, 7),), 1e-5),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 2), (r(1, 2, 8),), 1e-5),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, 1), (r(1, 3, 4, 4),), 1e-5),
    # scatter
    ("scatter_src", lambda x, i, s: x.scatter(1, i, s), (r(3, 5), torch.tensor([[0, 1], [2, 3], [4, 0]]), r(3, 2)), 0),
    ("scatter_value", lambda x, i: x.scatter(1, i, 2.5), (r(3, 5), torch.tensor([[0, 1], [2, 3], [4, 0]])), 0),
    ("scatter_add", lambda x, i, s: x.scatter_add(1, i, s), (r(3, 5), torch.tensor([[0, 0, 1], [2, 3, 2], [4, 0, 4]]), r(3, 3)), 1e-5),
    ("scatter_add_dim0", lambda x, i, s: x.scatter_add(0, i, s), (r(4, 3), torch.tensor([[0, 3, 1], [0, 0, 1]]), r(2, 3)), 1e-5),
    # every reduction, with and without x's own value; row 1's position 1 and row 2's 3 are hit by
    # nobody, position 0 of row 0 twice
    *[(f"scatter_reduce_{how}_{'self' if inc else 'noself'}",
       (lambda how, inc: lambda x, i, s: x.scatter_reduce(1, i, s, how, include_self=inc))(how, inc),
       (r(3, 5), torch.tensor([[0, 0, 1], [2, 3, 2], [4, 0, 4]]), r(3, 3)), 1e-5)
      for how in ("sum", "prod", "mean", "amax", "amin") for inc in (True, False)],
    ("scatter_reduce_int_mean", lambda x, i, s: x.scatter_reduce(0, i, s, "mean"),
     (ints(4, 3), torch.tensor([[0, 3, 1], [0, 0, 1]]), ints(2, 3)), 0),
    ("scatter_reduce_int_amax", lambda x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=False),
     (ints(4, 3), torch.tensor([[0, 3, 1], [0, 0, 1]]), ints(2, 3)), 0),
    ("index_put_accumulate", lambda x, i, v: x.index_put((i,), v, accumulate=True), (r(5, 3), torch.tensor([0, 2, 0]), r(3, 3)), 1e-5),
    ("index_put_mask", lambda x: x.index_put((x > 0,), torch.tensor(0.0)), (r(4, 5),), 0),
    ("index_put_mask_rows", lambda x, m: x.index_put((m,), torch.tensor(1.5)), (r(3, 4), torch.tensor([True, False, True])), 0),
    ("pad_reflect", lambda x: F.pad(x, (2, 1), mode="reflect"), (r(1, 2, 6),), 0),
    ("pad_replicate", lambda x: F.pad(x, (1, 2, 2, 0), mode="replicate"), (r(1, 2, 4, 5),), 0),
    ("unfold", lambda x: x.unfold(1, 3, 2) * 1, (r(2, 9),), 0),
    ("max_all", lambda a: a.max(), (r(3, 4),), 0),
    ("sum_bool", lambda a: (a > 0).sum(-1), (r(3, 4),), 0),
    ("cumsum_int", lambda a: a.cumsum(0), (ints(5),), 0),
    ("linspace", lambda a: a + torch.linspace(0, 1, 5, device=a.device), (r(5),), 1e-6),
    ("new_full", lambda a: a.new_zeros(3) + a.new_ones(3) + a.new_full((3,), 2.0), (r(3),), 0),
    # movement
    ("view_permute", lambda a: a.view(2, 3, 4).permute(2, 0, 1) * 1.0, (r(6, 4),), 0),
    ("reshape_neg1", lambda a: a.reshape(-1, 2) + 0, (r(3, 4),), 0),
    ("transpose", lambda a: a.transpose(0, 1) + 0, (r(3, 4),), 0),
    ("unsqueeze_squeeze", lambda a: a.unsqueeze(1).squeeze() + 1, (r(3, 4),), 0),
    ("expand", lambda a: a.expand(3, 4, 5) + 0, (r(4, 1),), 0),
    ("slice", lambda a: a[1:, ::2] * 2, (r(4, 6),), 0),
    ("slice_negative", lambda a: a[:, -3:-1] + 0, (r(4, 6),), 0),
    ("select", lambda a: a[:, 2] + a[-1], (r(4, 4),), 0),
    ("cat", lambda a, b: torch.cat([a, b], 1), (r(2, 3), r(2, 5)), 0),
    ("stack", lambda a, b: torch.stack([a, b], 0), (r(2, 3), r(2, 3)), 0),
    ("split", lambda a: [t * 2 for t in a.split(2, -1)], (r(3, 5),), 0),
    ("chunk", lambda a: [t + 1 for t in a.chunk(3, 0)], (r(6, 2),), 0),
    ("split_sizes", lambda a: [t + 0 for t in torch.split(a, [1, 4], 1)], (r(3, 5),), 0),
    ("flip", lambda a: a.flip(0, 1) + 0, (r(3, 4),), 0),
    ("roll", lambda a: torch.roll(a, 1, 0) + 0, (r(4, 3),), 0),
    ("repeat", lambda a: a.repeat(2, 3) + 0, (r(2, 3),), 0),
    ("narrow", lambda a: a.narrow(1, 1, 2) + 0, (r(3, 4),), 0),
    ("pad_constant", lambda a: F.pad(a, (1, 2), value=3.0), (r(3, 4),), 0),
    ("tril_triu", lambda a: torch.tril(a) + torch.triu(a, 1), (r(4, 4),), 0),
    ("embedding", lambda w, i: F.embedding(i, w), (r(10, 4), ints(2, 3, lo=0, hi=10)), 0),
    ("index_select", lambda a, i: a.index_select(0, i), (r(5, 3), ints(4, lo=0, hi=5)), 0),
    ("gather", lambda a, i: a.gather(1, i), (r(3, 5), ints(3, 2, lo=0, hi=5)), 0),
    ("casts", lambda a: (a * 10).to(torch.int32).to(torch.float32) + a.to(torch.bfloat16).float(), (r(6),), 0),
    ("clone_contiguous", lambda a: a.t().contiguous().clone() + 0, (r(3, 4),), 0),
    # creation
    ("arange", lambda a: a + torch.arange(4, device=a.device), (r(3, 4),), 0),
    ("arange_step", lambda a: a + torch.arange(1, 9, 2, device=a.device), (r(4),), 0),
    ("full_zeros_ones",
     lambda a: a + torch.full((3,), 2.0, device=a.device) + torch.zeros(3, device=a.device) - torch.ones(3, device=a.device), (r(3),), 0),
    ("full_like", lambda a: torch.full_like(a, 7.0) * a + torch.ones_like(a), (r(2, 3),), 0),
    ("eye", lambda a: a @ torch.eye(3, device=a.device), (r(2, 3),), 0),
    # sort and top-k
    ("sort", lambda a: torch.sort(a, -1, descending=True), (r(3, 6),), 0),
    ("argsort_stable", lambda a: torch.argsort(a, dim=-1, stable=True), (ints(3, 8, lo=0, hi=4),), 0),
    ("topk", lambda a: torch.topk(a, 3), (r(4, 7),), 0),
]


def flatten(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in flatten(v)]
    return [x]


@pytest.mark.parametrize("name,fn,inputs,tol", CASES, ids=[c[0] for c in CASES])
def test_op_matches_eager(name, fn, inputs, tol):
    torch._dynamo.reset()
    with torch.no_grad():
        want = flatten(fn(*inputs))
        got = flatten(torch.compile(fn, backend="luminal", dynamic=False)(*inputs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{name}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}"
        if tol == 0 or not w.is_floating_point():
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(g.float(), w.float(), rtol=tol, atol=tol, equal_nan=True)


def test_non_contiguous_inputs():
    torch._dynamo.reset()
    a = r(6, 4).t()  # a transposed view
    b = r(8, 6)[::2]  # a strided slice
    fn = lambda a, b: a @ b.t() + 1  # noqa: E731
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="luminal")(a, b), fn(a, b), rtol=1e-5, atol=1e-5)


def test_dynamic_lengths_compile_once():
    torch._dynamo.reset()
    before = tb.compile_count
    w = r(8, 8)
    fn = torch.compile(lambda x: torch.softmax(x @ w, -1).sum(0), backend="luminal", dynamic=True)
    with torch.no_grad():
        for n in (3, 5, 9, 17, 2):
            x = r(n, 8)
            torch.testing.assert_close(fn(x), torch.softmax(x @ w, -1).sum(0), rtol=1e-5, atol=1e-5)
    assert tb.compile_count - before == 1


def test_unsupported_op_fails_at_compile_time_with_its_name():
    torch._dynamo.reset()
    fn = lambda a: torch.fft.fft(a).real  # noqa: E731
    with pytest.raises(Exception, match=r"no lowering for aten\..*fft"), torch.no_grad():
        torch.compile(fn, backend="luminal")(r(8))


def test_integer_bitwise_ops():
    torch._dynamo.reset()
    a = torch.tensor([3, 5, 6, -1, -8, 2**31 - 1, -(2**31), 12345], dtype=torch.int32)
    b = torch.tensor([1, 4, 7, -5, 3, -(2**31), -1, -999], dtype=torch.int32)
    fn = lambda a, b: (a & b, a | b, a ^ b, ~a, a & 6)  # noqa: E731
    with torch.no_grad():
        for g, w in zip(torch.compile(fn, backend="luminal")(a, b), fn(a, b)):
            torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_integer_shifts():
    torch._dynamo.reset()
    a = torch.tensor([3, 5, -6, -1, -8, 2**30 + 1, -(2**31), 12345, 7, -7, 1, -3], dtype=torch.int32)
    s = torch.tensor([1, 4, 2, 5, 3, 1, 1, 0, 31, 31, 32, -1], dtype=torch.int32)  # the last four: PyTorch's edges
    fn = lambda a, s: (a << s, a >> s, a << 3, a >> 2, torch.bitwise_left_shift(a, s), torch.bitwise_right_shift(a, 1))  # noqa: E731
    with torch.no_grad():
        for g, w in zip(torch.compile(fn, backend="luminal")(a, s), fn(a, s)):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
    # int64 (held as i32): shifts that stay within 32 bits
    a64, s64 = torch.tensor([3, -5, 1000, -1]), torch.tensor([2, 1, 10, 3])
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="luminal")(a64, s64)[0], a64 << s64, rtol=0, atol=0)


def test_bad_option_is_a_clear_error():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown option"), torch.no_grad():
        torch.compile(lambda a: a + 1, backend="luminal", options={"serach": 3})(r(3))
    with pytest.raises(Exception, match="backend 'tpu'"), torch.no_grad():
        torch.compile(lambda a: a + 1, backend="luminal", options={"backend": "tpu"})(r(3))


def test_int64_inputs_past_32_bits_are_an_error_not_a_wrap():
    # luminal computes integers in 32 bits: int64 inputs are converted, and values that would
    # wrap stop the call with the input's name instead of giving a wrong answer.
    torch._dynamo.reset()
    fn = torch.compile(lambda a: a + 1, backend="luminal", dynamic=False)
    small = torch.tensor([1, -2, 2**31 - 2], dtype=torch.int64)
    with torch.no_grad():
        assert torch.equal(fn(small), small + 1)
        with pytest.raises(Exception, match=r"outside the 32-bit range"):
            fn(torch.tensor([1, 2**31 + 5, 3], dtype=torch.int64))
        with pytest.raises(Exception, match=r"outside the 32-bit range"):
            fn(torch.tensor([-(2**31) - 1, 0, 0], dtype=torch.int64))


def test_a_cuda_request_with_cpu_inputs_is_an_error_not_a_fallback():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="no silent fallback"), torch.no_grad():
        torch.compile(lambda a: a + 1, backend="luminal", options={"backend": "cuda"})(r(3))


def test_reference_backend_and_search_options():
    torch._dynamo.reset()
    fn = lambda a, b: torch.relu(a @ b).sum(-1)  # noqa: E731
    a, b = r(4, 6), r(6, 5)
    with torch.no_grad():
        for opts in ({"backend": "reference"}, {"backend": "cpu", "search": 3}):
            torch._dynamo.reset()
            got = torch.compile(fn, backend="luminal", options=opts)(a, b)
            torch.testing.assert_close(got, fn(a, b), rtol=1e-5, atol=1e-5)


INDEX_CASES = [
    ("rows", lambda a, i: a[i], (r(5, 3), ints(4, lo=-5, hi=5))),
    ("two_dims", lambda a, i, j: a[i, j], (r(5, 6), ints(2, 3, lo=0, hi=5), ints(3, lo=0, hi=6))),
    ("middle", lambda a, i: a[:, i], (r(2, 5, 3), ints(4, lo=0, hi=5))),
    ("adjacent_pair", lambda a, i, j: a[:, i, j], (r(2, 4, 5, 3), ints(3, lo=0, hi=4), ints(3, lo=0, hi=5))),
    ("split_dims", lambda a, i, j: a[i, :, j], (r(4, 2, 5), ints(3, lo=0, hi=4), ints(3, lo=0, hi=5))),
]


@pytest.mark.parametrize("name,fn,inputs", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_advanced_indexing(name, fn, inputs):
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="luminal", dynamic=False)(*inputs), fn(*inputs), rtol=0, atol=0)


PUT_CASES = [
    ("rows", lambda a, i, v: a.index_put((i,), v), (r(5, 3), ints(2, lo=0, hi=5), r(2, 3))),
    ("rows_broadcast", lambda a, i: a.index_put((i,), torch.tensor(7.0)), (r(5, 3), ints(3, lo=-5, hi=5))),
    ("middle", lambda a, i, v: torch.ops.aten.index_put(a, [None, i], v), (r(2, 5, 3), ints(2, lo=0, hi=5), r(2, 2, 3))),
    ("setitem", lambda a, i, v: _setitem(a, i, v), (r(4, 6), ints(3, lo=0, hi=4), r(3, 6))),
]


def _setitem(a, i, v):
    a = a.clone()
    a[i] = v
    return a


@pytest.mark.parametrize("name,fn,inputs", PUT_CASES, ids=[c[0] for c in PUT_CASES])
def test_index_put(name, fn, inputs):
    # distinct indices: with repeats, which write wins is unspecified (in PyTorch too)
    for x in inputs[1:2]:
        if x.dtype == torch.int64:
            x.copy_(torch.randperm(inputs[0].shape[1 if name == "middle" else 0])[: x.numel()].view_as(x))
    torch._dynamo.reset()
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(fn, backend="luminal", dynamic=False)(*inputs), fn(*inputs), rtol=0, atol=0)


# Each float dtype luminal computes in, for the elementwise and reduction ops: PyTorch's CPU
# kernels compute f16/bf16 elementwise ops in f32 and round once, as luminal's do, so results
# agree to the dtype's rounding (one unit in the last place).
ULP = {torch.float32: 1e-5, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
DTYPE_OPS = [
    ("add", lambda a, b: a + b),
    ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (b.abs() + 0.5)),
    ("exp", lambda a, b: torch.exp(a)),
    ("tanh", lambda a, b: torch.tanh(a)),
    ("sigmoid", lambda a, b: torch.sigmoid(a)),
    ("silu", lambda a, b: F.silu(a)),
    ("rsqrt", lambda a, b: torch.rsqrt(a.abs() + 0.5)),
    ("where", lambda a, b: torch.where(a > b, a, b)),
    ("maximum", lambda a, b: torch.maximum(a, b)),
    ("sum", lambda a, b: a.sum(-1)),
    ("amax", lambda a, b: a.amax(-1)),
    ("softmax", lambda a, b: a.softmax(-1)),
    ("cast_up", lambda a, b: a.float() * 2),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("name,fn", DTYPE_OPS, ids=[c[0] for c in DTYPE_OPS])
def test_float_dtypes(name, fn, dtype):
    torch._dynamo.reset()
    a, b = r(4, 16).to(dtype), r(4, 16).to(dtype)
    with torch.no_grad():
        want = fn(a, b)
        got = torch.compile(fn, backend="luminal", dynamic=False)(a, b)
    assert got.dtype == want.dtype
    tol = ULP[dtype] * (16 if name == "sum" else 1)  # a sum of 16 rounds in another order
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


INT_OPS = [
    ("add", lambda a, b: a + b),
    ("mul", lambda a, b: a * b),
    ("floor_divide", lambda a, b: a // b),
    ("remainder", lambda a, b: a % b),
    ("maximum", lambda a, b: torch.maximum(a, b)),
    ("sum", lambda a, b: a.sum(-1)),
    ("amax", lambda a, b: a.amax(-1)),
    ("cumsum", lambda a, b: a.cumsum(-1)),
    ("where", lambda a, b: torch.where(a > b, a, b)),
    ("neg_abs", lambda a, b: (-a).abs()),
]


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("name,fn", INT_OPS, ids=[c[0] for c in INT_OPS])
def test_int_dtypes(name, fn, dtype):
    torch._dynamo.reset()
    a, b = ints(4, 8, dtype=dtype), nonzero_ints(4, 8).to(dtype)
    with torch.no_grad():
        want = fn(a, b)
        got = torch.compile(fn, backend="luminal", dynamic=False)(a, b)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_call_while_another_runs_is_refused():
    torch._dynamo.reset()
    fn = torch.compile(lambda a: a * 2, backend="luminal")
    with torch.no_grad():
        fn(r(3))
        graph = tb.last_graph
        graph._lock.acquire()  # as if another thread were inside a call
        try:
            with pytest.raises(RuntimeError, match="two threads at once"):
                fn(r(3))
        finally:
            graph._lock.release()
        torch.testing.assert_close(fn(torch.ones(3)), torch.full((3,), 2.0))


def test_compiled_function_survives_garbage_collection_of_temporaries():
    import gc

    torch._dynamo.reset()
    weight = r(4, 4)
    fn = torch.compile(lambda x: x @ weight.t() + 1, backend="luminal")
    want = torch.ones(2, 4) @ weight.t() + 1
    with torch.no_grad():
        fn(r(2, 4))
        gc.collect()
        for _ in range(3):
            torch.testing.assert_close(fn(torch.ones(2, 4)), want, rtol=1e-5, atol=1e-5)
            gc.collect()


class Counters(torch.nn.Module):
    """Two counters as transformers' static cache keeps them: one read before its increment,
    one read by nothing else; and a buffer updated by a value that is not a counter."""

    def __init__(self):
        super().__init__()
        self.register_buffer("pos", torch.zeros((), dtype=torch.int64))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x):
        y = x * (self.pos + 1)  # the value before this call's increment
        self.pos.add_(1)
        self.calls.add_(2)
        self.total.add_(x)
        return y


def test_counters_are_incremented_by_torch_after_the_run():
    torch._dynamo.reset()
    eager, compiled_model = Counters(), Counters()
    fn = torch.compile(compiled_model, backend="luminal")
    with torch.no_grad():
        for step in range(4):
            x = r(3) + step
            torch.testing.assert_close(fn(x), eager(x))
    for name in ("pos", "calls", "total"):
        torch.testing.assert_close(getattr(compiled_model, name), getattr(eager, name))
    graph = tb.last_graph
    assert sorted((c[2], c[3]) for c in graph.counters) == [(1, True), (2, False)]  # (increment, read by the graph)
    assert len(graph.mutations) == 1  # total: x is no constant, so the runtime computes it


def test_a_counter_changed_between_calls_is_read_again():
    # A counter the graph reads is handed over from the host once its value is known (torch's
    # increment of the value the last run saw); a write by the caller between calls moves its
    # version past what a call makes, so the next call reads it again.
    torch._dynamo.reset()
    eager, compiled_model = Counters(), Counters()
    fn = torch.compile(compiled_model, backend="luminal")
    with torch.no_grad():
        for step in range(9):
            if step in (4, 7):
                for m in (eager, compiled_model):
                    m.pos.fill_(10 * step)
            x = r(3) + step
            torch.testing.assert_close(fn(x), eager(x))
    torch.testing.assert_close(compiled_model.pos, eager.pos)
    graph = tb.last_graph
    assert graph._counter_bumps is not None  # the host-side path was taken
