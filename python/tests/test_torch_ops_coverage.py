"""Aten ops through torch.compile(backend="luminal") against eager PyTorch: what test_torch_ops.py
leaves out (lowered ops it never calls, broadcasting, non-contiguous inputs, half precision,
integer and bool data, and the text of two errors)."""
import inspect
import re

import pytest
import torch

import luminal.torch_backend as tb

torch.manual_seed(1)
F = torch.nn.functional


def r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def pos(*shape):
    return torch.rand(*shape) + 0.1


def ints(*shape, lo=-9, hi=10, dtype=torch.int64):
    return torch.randint(lo, hi, shape, dtype=dtype)


def nonzero_ints(*shape, dtype=torch.int64):
    x = ints(*shape, dtype=dtype)
    return torch.where(x == 0, torch.ones_like(x), x)


def distinct(*shape, dtype=torch.float32):
    """Values with no ties along the last dim (sort and top-k indices are then defined), exact in
    every dtype used here: multiples of 1/4 below 8 in magnitude."""
    n = shape[-1]
    rows = torch.stack([torch.randperm(n) for _ in range(int(torch.tensor(shape[:-1]).prod()))])
    return ((rows.float() - n // 2) / 4).reshape(shape).to(dtype)


def distinct_ints(*shape, dtype=torch.int64):
    n = shape[-1]
    rows = torch.stack([torch.randperm(n) for _ in range(int(torch.tensor(shape[:-1]).prod()))])
    return (rows - n // 2).reshape(shape).to(dtype)


def row_perm(rows, n, k):
    """[rows, k] indices, distinct within each row (scatter's writes then do not collide)."""
    return torch.stack([torch.randperm(n)[:k] for _ in range(rows)])


def sparse(*shape):
    """Floats where about half are exactly zero (for the logical ops)."""
    return r(*shape) * torch.randint(0, 2, shape)


def flatten(x):
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in flatten(v)]
    return [x]


def compare(got, want, tol, what=""):
    got, want = flatten(got), flatten(want)
    assert len(got) == len(want), what
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: {g.dtype}{list(g.shape)} vs {w.dtype}{list(w.shape)}"
        if tol == 0 or not w.is_floating_point():
            torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{what}: {m}")
        else:
            torch.testing.assert_close(g.float(), w.float(), rtol=tol, atol=tol, equal_nan=True, msg=lambda m: f"{what}: {m}")


def run(fn, inputs, tol, what=""):
    torch._dynamo.reset()
    with torch.no_grad():
        want = fn(*inputs)
        got = torch.compile(fn, backend="luminal", dynamic=False)(*inputs)
    compare(got, want, tol, what)


def params(cases):
    """(name, *rest[, reason]) rows as pytest params; a row whose last item is a str is an xfail
    (a luminal bug: the reason says what is wrong)."""
    out = []
    for c in cases:
        name, rest = c[0], c[1:]
        marks = ()
        if isinstance(rest[-1], str):
            marks = pytest.mark.xfail(strict=True, reason=rest[-1])
            rest = rest[:-1]
        out.append(pytest.param(name, *rest, marks=marks, id=name))
    return out


# 1. Ops with a lowering that test_torch_ops.py never calls.
LOWERED_CASES = [
    ("le", lambda a, b: a <= b, (r(4, 4), r(4, 4)), 0),
    ("le_scalar", lambda a: a <= 0.25, (r(4, 4),), 0),
    ("le_int_equal", lambda a, b: a <= b, (ints(10, lo=0, hi=3), ints(10, lo=0, hi=3)), 0),
    ("gt", lambda a, b: a > b, (r(4, 4), r(4, 4)), 0),
    ("logical_fns_float", lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_not(a)),
     (sparse(12), sparse(12)), 0),
    ("logical_fns_int", lambda a, b: (torch.logical_and(a, b), torch.logical_or(a, b), torch.logical_not(a)),
     (ints(12, lo=-1, hi=2), ints(12, lo=-1, hi=2)), 0),
    ("masked_fill_tensor_value", lambda a, m, v: a.masked_fill(m > 0, v), (r(3, 4), r(3, 4), torch.tensor(2.5)), 0),
    ("clamp_tensor", lambda a, lo, hi: torch.clamp(a, lo, hi), (r(3, 5), -pos(5), pos(3, 1)), 0),
    ("clamp_tensor_min_only", lambda a, lo: torch.clamp(a, min=lo), (r(3, 5), r(3, 5)), 0),
    ("clamp_max", lambda a: torch.clamp_max(a, 0.3), (r(10),), 0),
    ("clamp_min_fn", lambda a: torch.clamp_min(a, -0.2), (r(10),), 0),
    ("pow_scalar_base", lambda a: 2**a, (r(8),), 1e-5),
    ("pow_scalar_base_fraction", lambda a: torch.pow(0.5, a), (r(8),), 1e-5),
    ("pow_scalar_base_int", lambda a: 3**a, (torch.arange(-2, 8),), 0),
    ("empty_like_fill", lambda a: torch.empty_like(a).fill_(3) * a, (r(3, 4),), 0),
    ("empty_like_zero", lambda a: torch.empty_like(a).zero_() + a, (r(3, 4),), 0),
    ("empty_fill", lambda a: torch.empty(3, 4, device=a.device).fill_(1.5) + a, (r(3, 4),), 0),
    ("empty_copy", lambda a: torch.empty(3, 4, device=a.device).copy_(a) * 2, (r(3, 4),), 0),
    ("empty_copy_broadcast", lambda a: torch.empty(3, 4, dtype=torch.int32, device=a.device).copy_(a), (r(4) * 5,), 0),
    ("zeros_like", lambda a: torch.zeros_like(a) + a * 2, (r(3, 4),), 0),
    ("scalar_tensor", lambda a: a * torch.scalar_tensor(2.5, device=a.device), (r(3, 4),), 0),
    ("alias", lambda a: torch.ops.aten.alias(a) * 2, (r(3, 4),), 0),
    ("min_all", lambda a: a.min(), (r(3, 4),), 0),
    ("argmax_all", lambda a: a.argmax(), (r(3, 4),), 0),
    ("argmin_all", lambda a: a.argmin(), (r(3, 4),), 0),
    ("max_pool3d", lambda x: F.max_pool3d(x, 2), (r(1, 2, 4, 4, 6),), 0),
    ("max_pool3d_padded", lambda x: F.max_pool3d(x, 3, stride=2, padding=1), (r(1, 2, 5, 5, 5),), 0),
    ("avg_pool3d", lambda x: F.avg_pool3d(x, 2), (r(1, 2, 4, 4, 6),), 1e-5),
    ("avg_pool3d_padded", lambda x: F.avg_pool3d(x, 3, stride=2, padding=1), (r(1, 2, 5, 5, 5),), 1e-5),
    ("conv_transpose3d", lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2, padding=1),
     (r(1, 2, 3, 3, 3), r(2, 3, 3, 3, 3), r(3)), 1e-5),
    ("arange_float_step", lambda a: a + torch.arange(0, 1, 0.25, device=a.device), (r(4),), 0),
    ("arange_float_bounds", lambda a: a * torch.arange(-1.5, 1.0, 0.5, device=a.device), (r(5),), 0),
    ("sdpa_float_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
     (r(2, 2, 3, 4), r(2, 2, 6, 4), r(2, 2, 6, 4), r(3, 6)), 1e-5),
    ("sdpa_scale", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), (r(1, 2, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), 1e-5),
    ("sdpa_causal_scale", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.7),
     (r(1, 2, 5, 8), r(1, 2, 5, 8), r(1, 2, 5, 8)), 1e-5),
    ("matmul_vec_mat", torch.matmul, (r(4), r(4, 5)), 1e-5),
    ("matmul_mat_vec", torch.matmul, (r(3, 4), r(4)), 1e-5),
    ("matmul_batched_vec", torch.matmul, (r(2, 3, 4), r(4)), 1e-5),
    ("matmul_vec_batched", torch.matmul, (r(4), r(2, 4, 5)), 1e-5),
    ("topk_smallest", lambda a: torch.topk(a, 3, largest=False), (distinct(4, 7),), 0),
    ("sort_ascending", lambda a: torch.sort(a, -1), (distinct(3, 6),), 0),
    ("sort_dim0", lambda a: torch.sort(a.t(), 0, descending=True), (distinct(3, 6),), 0),
    ("sort_int", lambda a: torch.sort(a, -1), (distinct_ints(3, 8),), 0),
    ("sort_int_descending", lambda a: torch.sort(a, -1, descending=True), (distinct_ints(3, 8, dtype=torch.int32),), 0),
    ("topk_int", lambda a: torch.topk(a, 3), (distinct_ints(4, 7),), 0),
    ("topk_int_smallest", lambda a: torch.topk(a, 2, largest=False), (distinct_ints(4, 7, dtype=torch.int32),), 0),
]

# 2. Broadcasting in the binary ops.
BROADCAST_CASES = [
    ("mul", lambda a, b: a * b, (r(2, 3, 1), r(1, 4)), 1e-5),
    ("div", lambda a, b: a / b, (r(2, 3, 1), pos(4)), 1e-5),
    ("pow_tensor", torch.pow, (pos(3, 1), r(4)), 1e-5),
    ("fmod", torch.fmod, (r(3, 4), pos(4)), 1e-5),
    ("fmod_int", torch.fmod, (ints(3, 1), nonzero_ints(4)), 0),
    ("remainder_int", torch.remainder, (ints(3, 4), nonzero_ints(3, 1)), 0),
    ("floor_divide_int", torch.floor_divide, (ints(3, 1), nonzero_ints(4)), 0),
    ("eq", lambda a, b: a == b, (ints(3, 1, lo=0, hi=3), ints(4, lo=0, hi=3)), 0),
    ("ne", lambda a, b: a != b, (ints(4, lo=0, hi=3), ints(3, 1, lo=0, hi=3)), 0),
    ("lt", lambda a, b: a < b, (r(3, 1), r(4)), 0),
    ("le", lambda a, b: a <= b, (ints(2, 1, 4, lo=0, hi=3), ints(3, 1, lo=0, hi=3)), 0),
    ("gt", lambda a, b: a > b, (r(4), r(3, 1)), 0),
    ("ge", lambda a, b: a >= b, (ints(3, 1, lo=0, hi=3), ints(1, 4, lo=0, hi=3)), 0),
    ("logical_and", lambda a, b: torch.logical_and(a > 0, b > 0), (r(3, 1), r(4)), 0),
    ("logical_or", lambda a, b: torch.logical_or(a > 0, b > 0), (r(4), r(3, 1)), 0),
    ("logical_xor", lambda a, b: torch.logical_xor(a > 0, b > 0), (r(3, 1), r(1, 4)), 0),
    ("bitwise_and", lambda a, b: a & b, (ints(3, 1, lo=-50, hi=50), ints(4, lo=-50, hi=50)), 0),
    ("bitwise_or", lambda a, b: a | b, (ints(4, lo=-50, hi=50, dtype=torch.int32), ints(3, 1, lo=-50, hi=50, dtype=torch.int32)), 0),
    ("bitwise_xor", lambda a, b: a ^ b, (ints(3, 1, lo=-50, hi=50), ints(1, 4, lo=-50, hi=50)), 0),
    ("masked_fill", lambda a, m: a.masked_fill(m > 0, -1.5), (r(3, 4), r(1, 4)), 0),
    ("masked_fill_col", lambda a, m: a.masked_fill(m > 0, 7.0), (r(3, 4), r(3, 1)), 0),
    ("where_all_three", lambda c, a, b: torch.where(c > 0, a, b), (r(3, 1, 1), r(1, 4, 1), r(5)), 0),
    ("maximum_one", torch.maximum, (r(3, 4), r(1)), 0),
    ("minimum_one", torch.minimum, (r(1), r(3, 4)), 0),
]


@pytest.mark.parametrize("name,fn,inputs,tol", params(LOWERED_CASES + [("broadcast_" + c[0], *c[1:]) for c in BROADCAST_CASES]))
def test_op_matches_eager(name, fn, inputs, tol):
    run(fn, inputs, tol, name)


# 3. Non-contiguous inputs. Each input is remade with the same shape and layout (a) transposed
# (last two dims; 1-D inputs stay as they are), (b) a strided slice x[::2] of a buffer whose other
# rows hold NaN (or 0 for integers, so that a wrong read is no out-of-range index), (c) expanded
# from its first row (stride 0), (d) at a storage offset, x[1:]. One compiled function takes all
# four sets (one compile per op); each set's results are compared with eager's on that set.
def transposed(x):
    return x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x


def filler(x):
    return float("nan") if x.is_floating_point() else 0


def strided(x):
    buf = torch.full((2 * x.shape[0], *x.shape[1:]), filler(x), dtype=x.dtype)
    buf[::2] = x
    return buf[::2]


def expanded(x):
    return x[:1].expand(x.shape)


def offset(x):
    buf = torch.full((x.shape[0] + 1, *x.shape[1:]), filler(x), dtype=x.dtype)
    buf[1:] = x
    return buf[1:]


LAYOUTS = {"transposed": transposed, "strided": strided, "expanded": expanded, "offset": offset}

NC_CASES = [
    ("add", lambda a, b: a + b, (r(4, 6), r(4, 6)), 1e-5),
    ("mul", lambda a, b: a * b, (r(4, 6), r(4, 6)), 1e-5),
    ("exp", torch.exp, (r(4, 6),), 1e-5),
    ("where", lambda c, a, b: torch.where(c > 0, a, b), (r(4, 6), r(4, 6), r(4, 6)), 0),
    ("sum", lambda a: a.sum(-1), (r(4, 6),), 1e-5),
    ("amax", lambda a: a.amax(-1), (r(4, 6),), 0),
    ("mean", lambda a: a.mean(-1), (r(4, 6),), 1e-5),
    ("softmax", lambda a: a.softmax(-1), (r(4, 6),), 1e-5),
    ("log_softmax", lambda a: F.log_softmax(a, -1), (r(4, 6),), 1e-5),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (6,), w, b), (r(4, 6), r(6), r(6)), 1e-4),  # as test_torch_ops' layer_norm
    ("rms_norm", lambda a, w: F.rms_norm(a, (6,), w, eps=1e-6), (r(4, 6), r(6)), 1e-5),
    ("cumsum", lambda a: a.cumsum(-1), (r(4, 6),), 1e-5),
    ("argmax", lambda a: a.argmax(-1), (distinct(4, 6),), 0),
    ("mm", torch.mm, (r(4, 6), r(6, 5)), 1e-5),
    ("bmm", torch.bmm, (r(3, 4, 6), r(3, 6, 5)), 1e-5),
    ("linear", F.linear, (r(4, 6), r(5, 6), r(5)), 1e-5),
    ("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (r(2, 2, 5, 8), r(2, 2, 5, 8), r(2, 2, 5, 8)), 1e-5),
    ("gather", lambda a, i: a.gather(1, i), (r(4, 6), ints(4, 3, lo=0, hi=6)), 0),
    ("index_select", lambda a, i: a.index_select(0, i), (r(6, 4), ints(5, lo=0, hi=6)), 0),
    ("embedding", lambda w, i: F.embedding(i, w), (r(10, 4), ints(3, 5, lo=0, hi=10)), 0),
    ("scatter", lambda x, i, s: x.scatter(1, i, s), (r(4, 6), row_perm(4, 6, 3), r(4, 3)), 0),
    ("cat", lambda a, b: torch.cat([a, b], -1), (r(4, 6), r(4, 3)), 0),
    ("flip", lambda a: a.flip(0, 1), (r(4, 6),), 0),
    ("roll", lambda a: torch.roll(a, (1, -2), (0, 1)), (r(4, 6),), 0),
    ("permute", lambda a: a.permute(2, 0, 1) * 1, (r(2, 4, 6),), 0),
    ("reshape", lambda a: a.reshape(-1) * 1, (r(4, 6),), 0),
    ("bf16_roundtrip", lambda a: a.to(torch.bfloat16).float(), (r(4, 6),), 0),
    ("sort", lambda a: torch.sort(a, -1), (distinct(4, 6),), 0),
    ("topk", lambda a: torch.topk(a, 3), (distinct(4, 6),), 0),
]


@pytest.mark.parametrize("name,fn,inputs,tol", params(NC_CASES))
def test_non_contiguous_inputs(name, fn, inputs, tol):
    n = len(inputs)
    sets = {layout: [make(x) for x in inputs] for layout, make in LAYOUTS.items()}
    for layout, xs in sets.items():
        assert all(torch.equal(x, y) for x, y in zip(xs, inputs)) or layout == "expanded"
    every = [x for xs in sets.values() for x in xs]
    assert not all(x.is_contiguous() and x.storage_offset() == 0 for x in every)
    fn_all = lambda *xs: [fn(*xs[k * n:(k + 1) * n]) for k in range(len(xs) // n)]  # noqa: E731
    torch._dynamo.reset()
    with torch.no_grad():
        want = [fn(*xs) for xs in sets.values()]
        got = torch.compile(fn_all, backend="luminal", dynamic=False)(*every)
    for layout, g, w in zip(sets, got, want):
        compare(g, w, tol, f"{name} ({layout})")


CHANNELS_LAST_CASES = [
    ("conv2d", lambda x, w, b: F.conv2d(x, w, b, padding=1), (r(2, 4, 7, 6), r(6, 4, 3, 3), r(6)), 1e-5),
    ("conv2d_strided", lambda x, w: F.conv2d(x, w, stride=2), (r(1, 3, 8, 8), r(4, 3, 3, 3)), 1e-5),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), (r(2, 3, 6, 6),), 0),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1), (r(2, 3, 7, 7),), 1e-5),
]


@pytest.mark.parametrize("name,fn,inputs,tol", params(CHANNELS_LAST_CASES))
def test_channels_last_inputs(name, fn, inputs, tol):
    inputs = tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in inputs)
    assert not inputs[0].is_contiguous()
    run(fn, inputs, tol, name)


# 4. float16 and bfloat16. PyTorch's CPU kernels compute these in f32 (the reductions, norms,
# products and convolutions accumulate in f32) and round the result once, as luminal does, so the
# results agree to one unit in the last place of the output: tolerance ULP * k with k = 1 unless
# the row says otherwise (and why).
ULP = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
HALF_OPS = [
    ("mean", lambda a: a.mean(-1), lambda d: (r(4, 16, dtype=d),), 1),
    ("var", lambda a: a.var(-1), lambda d: (r(4, 16, dtype=d),), 1),
    ("std", lambda a: a.std(0), lambda d: (r(16, 4, dtype=d),), 1),
    ("log_softmax", lambda a: F.log_softmax(a, -1), lambda d: (r(4, 16, dtype=d),), 1),
    ("rms_norm", lambda a, w: F.rms_norm(a, (16,), w, eps=1e-6), lambda d: (r(4, 16, dtype=d), r(16, dtype=d)), 1),
    ("layer_norm", lambda a, w, b: F.layer_norm(a, (16,), w, b), lambda d: (r(4, 16, dtype=d), r(16, dtype=d), r(16, dtype=d)), 1),
    ("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), lambda d: (r(2, 4, 6, dtype=d), r(4, dtype=d), r(4, dtype=d)), 1),
    ("mm", torch.mm, lambda d: (r(8, 16, dtype=d), r(16, 8, dtype=d)), 1),
    ("bmm", torch.bmm, lambda d: (r(2, 8, 16, dtype=d), r(2, 16, 8, dtype=d)), 1),
    ("addmm", lambda c, a, b: torch.addmm(c, a, b), lambda d: (r(8, dtype=d), r(8, 16, dtype=d), r(16, 8, dtype=d)), 1),
    ("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     lambda d: (r(1, 2, 6, 8, dtype=d), r(1, 2, 6, 8, dtype=d), r(1, 2, 6, 8, dtype=d)), 1),
    ("conv1d", lambda x, w, b: F.conv1d(x, w, b, padding=1),
     lambda d: (r(2, 4, 9, dtype=d), r(6, 4, 3, dtype=d), r(6, dtype=d)), 1),
    ("conv2d", lambda x, w: F.conv2d(x, w, padding=1), lambda d: (r(1, 4, 6, 6, dtype=d), r(6, 4, 3, 3, dtype=d)), 1),
    ("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda d: (r(1, 2, 6, 6, dtype=d),), 0),
    ("avg_pool2d", lambda x: F.avg_pool2d(x, 2), lambda d: (r(1, 2, 6, 6, dtype=d),), 1),
    ("cumsum", lambda a: a.cumsum(-1), lambda d: (r(3, 16, dtype=d),), 1),
    ("sort", lambda a: torch.sort(a, -1, descending=True), lambda d: (distinct(3, 16, dtype=d),), 0),
    ("topk", lambda a: torch.topk(a, 4), lambda d: (distinct(3, 16, dtype=d),), 0),
    ("gelu", F.gelu, lambda d: (r(4, 16, dtype=d),), 1),
    ("log", torch.log, lambda d: (pos(4, 16).to(d),), 1),
    ("erf", torch.erf, lambda d: (r(4, 16, dtype=d),), 1),
    ("sin", torch.sin, lambda d: (r(4, 16, dtype=d),), 1),
    ("cos", torch.cos, lambda d: (r(4, 16, dtype=d),), 1),
]
HALF_CASES = [(f"{name}_{'f16' if d == torch.float16 else 'bf16'}", fn, make(d), k * ULP[d], *why)
              for name, fn, make, k, *why in HALF_OPS for d in (torch.float16, torch.bfloat16)]


@pytest.mark.parametrize("name,fn,inputs,tol", params(HALF_CASES))
def test_half_precision(name, fn, inputs, tol):
    run(fn, inputs, tol, name)


# 5. int32 and int64 data (luminal holds int64 as 32-bit; every value here fits), and bool data.
INT_OPS = [
    ("prod", lambda a: a.prod(-1), lambda d: (ints(3, 5, lo=-4, hi=5, dtype=d),)),
    ("prod_all", lambda a: a.prod(), lambda d: (ints(7, lo=-3, hi=4, dtype=d),)),
    ("amin", lambda a: a.amin(-1), lambda d: (ints(4, 6, dtype=d),)),
    ("argmax", lambda a: a.argmax(-1), lambda d: (distinct_ints(4, 6, dtype=d),)),
    ("argmin", lambda a: a.argmin(0), lambda d: (distinct_ints(6, 4, dtype=d).t().contiguous(),)),
    ("argmax_ties", lambda a: a.argmax(-1), lambda d: (ints(4, 8, lo=0, hi=3, dtype=d),)),  # first of the maxima, as documented
    ("argmin_ties", lambda a: a.argmin(-1), lambda d: (ints(4, 8, lo=0, hi=3, dtype=d),)),
    ("clamp", lambda a: torch.clamp(a, -3, 4), lambda d: (ints(12, dtype=d),)),
    ("sign", torch.sign, lambda d: (ints(12, dtype=d),)),
    ("relu", torch.relu, lambda d: (ints(12, dtype=d),)),
    ("pow", lambda a, e: a**e, lambda d: (torch.arange(-5, 6, dtype=d), torch.tensor([3, 2, 1, 0, 3, 2, 3, 2, 3, 3, 2], dtype=d))),
    # negative exponents (0 but for the bases ±1), exponents past 63 (parity for 0 and ±1)
    ("pow_edges", lambda a, e: a**e, lambda d: (torch.tensor([2, -2, 1, -1, 0, 0, 1, -1, 0, 7], dtype=d),
                                                torch.tensor([-1, -3, -5, -5, -1, 0, 100, 101, 100, 9], dtype=d))),
    ("pow_scalar_exponent", lambda a: a**5, lambda d: (torch.arange(-7, 8, dtype=d),)),
    ("cat", lambda a, b: torch.cat([a, b], 0), lambda d: (ints(2, 3, dtype=d), ints(4, 3, dtype=d))),
    ("flip", lambda a: a.flip(-1), lambda d: (ints(3, 5, dtype=d),)),
    ("gather", lambda a, i: a.gather(1, i), lambda d: (ints(3, 5, dtype=d), ints(3, 4, lo=0, hi=5))),
    ("index_select", lambda a, i: a.index_select(1, i), lambda d: (ints(3, 5, dtype=d), ints(4, lo=0, hi=5))),
    ("scatter", lambda x, i, s: x.scatter(1, i, s), lambda d: (ints(3, 5, dtype=d), row_perm(3, 5, 2), ints(3, 2, dtype=d))),
    ("roll", lambda a: torch.roll(a, 2, -1), lambda d: (ints(3, 5, dtype=d),)),
    ("repeat", lambda a: a.repeat(2, 1, 3), lambda d: (ints(2, 3, dtype=d),)),
]
INT_CASES = [(f"{name}_{'i32' if d == torch.int32 else 'i64'}", fn, make(d), 0, *why)
             for name, fn, make, *why in INT_OPS for d in (torch.int32, torch.int64)]
BOOL_CASES = [
    ("cat_bool", lambda a, b: torch.cat([a, b], -1), (r(3, 2) > 0, r(3, 4) > 0), 0),
    ("flip_bool", lambda a: a.flip(0), (r(4, 3) > 0,), 0),
    ("where_bool", lambda c, a, b: torch.where(c, a, b), (r(3, 4) > 0, r(3, 4) > 0, r(4) > 0), 0),
]


@pytest.mark.parametrize("name,fn,inputs,tol", params(INT_CASES + BOOL_CASES))
def test_int_and_bool_data(name, fn, inputs, tol):
    run(fn, inputs, tol, name)


# 6. Errors.
def test_cuda_inputs_when_the_cuda_backend_cannot_run(monkeypatch):
    """A CUDA tensor with a build (or a machine) whose cuda backend cannot run: an error naming why,
    not a fallback. The inputs are fake CUDA tensors (no GPU needed); luminal is told its cuda
    backend cannot run, whatever this machine has."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    reason = "luminal was built without CUDA (test)"
    monkeypatch.setattr(tb.L, "cuda_unavailable_reason", lambda: reason)
    with FakeTensorMode():
        x = torch.empty(3, device="cuda")
    assert x.device.type == "cuda" and x.is_cuda
    with pytest.raises(RuntimeError, match="inputs are on cuda but luminal's cuda backend cannot run here: " + re.escape(reason)):
        tb.backend_for([x, 2], None)
    with pytest.raises(RuntimeError, match="cuda backend cannot run here"):
        tb.backend_for([x], "cuda")
    with pytest.raises(RuntimeError, match="inputs are on cuda but options ask for backend 'cpu'"):
        tb.backend_for([x], "cpu")


class UsesFFT(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real * 2


def _fft_error():
    torch._dynamo.reset()
    with pytest.raises(Exception) as err, torch.no_grad():
        torch.compile(UsesFFT(), backend="luminal")(r(8))
    return str(err.value)


def test_unsupported_op_error_names_the_op_and_the_model_line():
    msg = _fft_error()
    assert "no lowering for aten._fft_r2c" in msg, msg
    assert "return torch.fft.fft(x).real * 2" in msg, msg  # where_from: the model's source line


def test_unsupported_op_error_names_the_model_file_and_line():
    msg = _fft_error()
    line = inspect.getsourcelines(UsesFFT.forward)[1] + 1  # the return
    assert "test_torch_ops_coverage.py" in msg and f"line {line}" in msg and "in forward" in msg, msg
