"""Aten ops as luminal graph ops: one function per aten overload, each taking luminal Tensors
(where the FX graph has tensors), luminal Exprs (symbolic sizes) and Python values.

``LOWERINGS`` maps an aten OpOverload (or an OpOverloadPacket, covering all its overloads) to
its function. torch_backend.py walks the FX graph and calls them; an op missing here fails at
compile time with its name and the line of the model that made it.
"""
import operator

import torch

from . import _luminal as L

aten = torch.ops.aten

# torch dtypes luminal computes in; int64 runs as int32 and float64 as float32 (luminal has no
# 64-bit types), which the caller's tensors are converted to and back from.
DTYPES = {
    torch.float32: "f32",
    torch.float64: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int32: "i32",
    torch.int64: "i32",
    torch.int16: "i32",
    torch.int8: "i32",
    torch.uint8: "i32",
    torch.bool: "bool",
}


def luminal_dtype(dt):
    if dt not in DTYPES:
        raise NotImplementedError(f"dtype {dt} is not supported by luminal (f32, f16, bf16, int and bool are)")
    return DTYPES[dt]


class Lowering:
    """What a lowering function may need besides its arguments: the graph (for creation ops)
    and the FX node's output metadata (dtype and shape of what torch computes)."""

    def __init__(self, graph, node, exprs):
        self.graph = graph
        self.node = node
        self._exprs = exprs

    def out_dtype(self, i=None):
        val = self.node.meta.get("val")
        if i is not None:
            val = val[i]
        return luminal_dtype(val.dtype)

    def out_shape(self, i=None):
        val = self.node.meta.get("val")
        if i is not None:
            val = val[i]
        return [self._exprs(s) for s in val.shape]


LOWERINGS = {}


def lower(*ops):
    def register(fn):
        for op in ops:
            LOWERINGS[op] = fn
        return fn

    return register


def is_tensor(x):
    return isinstance(x, L.Tensor)


def to_dtype(x, dtype):
    return x if not is_tensor(x) or x.dtype == dtype else L.cast(x, dtype)


def f32(x):
    """f16/bf16 tensors as f32: PyTorch computes softmax, norms and products in f32 for them and
    rounds once at the end."""
    return to_dtype(x, "f32") if is_tensor(x) and x.dtype in ("f16", "bf16") else x


def scalar(cx, value, dtype):
    return cx.graph.constant(float(value), dtype)


def as_tensor(cx, x, dtype):
    """A Python number (or bool, or symbolic size) as a scalar tensor of `dtype`; tensors pass through."""
    if is_tensor(x):
        return x
    if isinstance(x, L.Expr):
        return to_dtype(_size_tensor(cx, x), dtype)
    return scalar(cx, x, dtype)


def promote(cx, a, b):
    """Both operands (tensors or Python numbers) in the dtype torch's type promotion gives."""
    common = _common(cx)
    return to_dtype(as_tensor(cx, a, common), common), to_dtype(as_tensor(cx, b, common), common)


def _common(cx):
    ta = cx.node.args[0].meta["val"] if isinstance(cx.node.args[0], torch.fx.Node) else cx.node.args[0]
    tb = cx.node.args[1].meta["val"] if isinstance(cx.node.args[1], torch.fx.Node) else cx.node.args[1]
    return luminal_dtype(torch.result_type(ta, tb))


def arith(fn):
    def lowered(cx, a, b, alpha=None, **_):
        a, b = promote(cx, a, b)
        if alpha is not None and alpha != 1:
            b = L.mul(b, as_tensor(cx, alpha, b.dtype))
        return to_dtype(fn(a, b), cx.out_dtype())

    return lowered


lower(aten.add.Tensor, aten.add.Scalar)(arith(L.add))
lower(aten.sub.Tensor, aten.sub.Scalar)(arith(L.sub))
lower(aten.mul.Tensor, aten.mul.Scalar)(arith(L.mul))
lower(aten.maximum.default)(arith(L.maximum))
lower(aten.minimum.default)(arith(L.minimum))
lower(aten.remainder.Tensor, aten.remainder.Scalar)(arith(L.remainder))
lower(aten.fmod.Tensor, aten.fmod.Scalar)(arith(L.fmod))
lower(aten.floor_divide.default)(arith(L.floor_divide))


@lower(aten.rsub.Scalar, aten.rsub.Tensor)
def _rsub(cx, a, b, alpha=1):
    a, b = promote(cx, a, b)
    if alpha != 1:
        a = L.mul(a, as_tensor(cx, alpha, a.dtype))
    return L.sub(b, a)


@lower(aten.div.Tensor, aten.div.Scalar)
def _div(cx, a, b):
    a, b = promote(cx, a, b)
    out = cx.out_dtype()
    return L.div(to_dtype(a, out), to_dtype(b, out))


@lower(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(cx, a, b, rounding_mode=None):
    a, b = promote(cx, a, b)
    if rounding_mode is None:
        return _div(cx, a, b)
    if rounding_mode == "floor":
        return to_dtype(L.floor_divide(a, b), cx.out_dtype())
    if rounding_mode == "trunc":
        if a.dtype == "i32":  # C division truncates
            q = L.floor_divide(a, b)
            r = L.remainder(a, b)
            fix = L.logical_and(L.ne(r, scalar(cx, 0, "i32")), L.lt(L.mul(a, b), scalar(cx, 0, "i32")))
            return L.add(q, L.cast(fix, "i32"))
        return to_dtype(L.trunc(L.div(a, b)), cx.out_dtype())
    raise NotImplementedError(f"div rounding_mode={rounding_mode!r}")


def compare(fn):
    def lowered(cx, a, b):
        a, b = promote(cx, a, b)
        return fn(a, b)

    return lowered


for _name, _fn in [("eq", L.eq), ("ne", L.ne), ("lt", L.lt), ("le", L.le), ("gt", L.gt), ("ge", L.ge)]:
    _op = getattr(aten, _name)
    LOWERINGS[_op.Tensor] = compare(_fn)
    LOWERINGS[_op.Scalar] = compare(_fn)


def logical(fn):
    def lowered(cx, a, b):
        return fn(to_dtype(as_tensor(cx, a, "bool"), "bool"), to_dtype(as_tensor(cx, b, "bool"), "bool"))

    return lowered


lower(aten.logical_and.default)(logical(L.logical_and))
lower(aten.logical_or.default)(logical(L.logical_or))
lower(aten.logical_xor.default)(logical(L.logical_xor))


@lower(aten.logical_not.default)
def _logical_not(cx, x):
    return L.logical_not(to_dtype(x, "bool"))


def _int_and(cx, a, b):
    """a & b on i32 (two's complement) from arithmetic: bit k of x is floor(x / 2^k) mod 2 for
    k < 31 and x < 0 for the sign bit; the bits that are set in both add up again."""
    out = None
    for k in range(31):
        p = scalar(cx, 2**k, "i32")
        both = L.mul(L.remainder(L.floor_divide(a, p), scalar(cx, 2, "i32")), L.remainder(L.floor_divide(b, p), scalar(cx, 2, "i32")))
        term = L.mul(both, p)
        out = term if out is None else L.add(out, term)
    sign = L.logical_and(L.lt(a, scalar(cx, 0, "i32")), L.lt(b, scalar(cx, 0, "i32")))
    return L.add(out, L.mul(L.cast(sign, "i32"), scalar(cx, -(2**31), "i32")))


def bitwise(logical_fn, int_fn):
    def lowered(cx, a, b):
        if cx.out_dtype() == "bool":
            return logical(logical_fn)(cx, a, b)
        a, b = promote(cx, a, b)
        return int_fn(cx, a, b)

    return lowered


# With and = a & b: a | b = a + b - and, a ^ b = a + b - 2 * and (no carries where bits differ).
lower(aten.bitwise_and.Tensor, aten.bitwise_and.Scalar)(bitwise(L.logical_and, _int_and))
lower(aten.bitwise_or.Tensor, aten.bitwise_or.Scalar)(bitwise(L.logical_or, lambda cx, a, b: L.sub(L.add(a, b), _int_and(cx, a, b))))
lower(aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar)(
    bitwise(L.logical_xor, lambda cx, a, b: L.sub(L.add(a, b), L.mul(_int_and(cx, a, b), scalar(cx, 2, "i32")))))


@lower(aten.bitwise_not.default)
def _bitwise_not(cx, x):
    if x.dtype == "bool":
        return L.logical_not(x)
    return L.sub(L.neg(x), scalar(cx, 1, "i32"))  # ~x = -x - 1 in two's complement


@lower(aten.pow.Tensor_Scalar)
def _pow_ts(cx, a, e):
    out = cx.out_dtype()
    a = to_dtype(a, out)
    if e == 2:
        return L.mul(a, a)
    if e == 0.5:
        return L.sqrt(a)
    if e == 1:
        return a
    return to_dtype(L.pow(to_dtype(a, "f32") if out == "i32" else a, float(e)), out)


@lower(aten.pow.Tensor_Tensor)
def _pow_tt(cx, a, b):
    a, b = promote(cx, a, b)
    return L.pow(a, b)


@lower(aten.pow.Scalar)
def _pow_st(cx, a, b):
    out = cx.out_dtype()
    return L.pow(as_tensor(cx, a, out), to_dtype(b, out))


def unary(fn, float_only=True):
    def lowered(cx, x, *args, **kwargs):
        out = cx.out_dtype()
        if float_only:
            x = to_dtype(x, out)
        return to_dtype(fn(x), out)

    return lowered


for _name in ["exp", "exp2", "log", "log2", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sigmoid", "sqrt", "rsqrt",
              "reciprocal", "erf", "floor", "ceil", "trunc", "round"]:
    LOWERINGS[getattr(aten, _name).default] = unary(getattr(L, _name))
for _name in ["neg", "abs", "sign", "relu"]:
    LOWERINGS[getattr(aten, _name).default] = unary(getattr(L, _name), float_only=False)
LOWERINGS[aten.silu.default] = unary(L.silu)
LOWERINGS[aten.isnan.default] = lambda cx, x: L.isnan(x)
LOWERINGS[aten.isinf.default] = lambda cx, x: L.isinf(x)


@lower(aten.gelu.default)
def _gelu(cx, x, approximate="none"):
    return L.gelu_tanh(x) if approximate == "tanh" else L.gelu(x)


@lower(aten.leaky_relu.default)
def _leaky_relu(cx, x, slope=0.01):
    return L.leaky_relu(x, slope)


@lower(aten.hardtanh.default)
def _hardtanh(cx, x, lo=-1.0, hi=1.0):
    return L.clamp(x, lo, hi)


@lower(aten.where.self)
def _where(cx, c, a, b):
    out = cx.out_dtype()
    return L.where(to_dtype(c, "bool"), to_dtype(as_tensor(cx, a, out), out), to_dtype(as_tensor(cx, b, out), out))


@lower(aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where_scalar(cx, c, a, b):
    return _where(cx, c, a, b)


@lower(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(cx, x, mask, value):
    return L.where(to_dtype(mask, "bool"), to_dtype(as_tensor(cx, value, x.dtype), x.dtype), x)


@lower(aten.clamp.default)
def _clamp(cx, x, lo=None, hi=None):
    out = cx.out_dtype()
    return L.clamp(to_dtype(x, out), lo, hi)


@lower(aten.clamp.Tensor)
def _clamp_t(cx, x, lo=None, hi=None):
    out = cx.out_dtype()
    x = to_dtype(x, out)
    if lo is not None:
        x = L.maximum(x, to_dtype(lo, out))
    if hi is not None:
        x = L.minimum(x, to_dtype(hi, out))
    return x


@lower(aten.clamp_min.default)
def _clamp_min(cx, x, lo):
    return L.clamp(to_dtype(x, cx.out_dtype()), lo, None)


@lower(aten.clamp_max.default)
def _clamp_max(cx, x, hi):
    return L.clamp(to_dtype(x, cx.out_dtype()), None, hi)


# ---- reductions -------------------------------------------------------------------------------


def dims_of(x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.ndim))
    return [dim] if isinstance(dim, int) else list(dim)


def reduction(fn, cast_to_out=True):
    def lowered(cx, x, dim=None, keepdim=False, dtype=None, **_):
        out = cx.out_dtype()
        if x.ndim == 0:
            return to_dtype(x, out)
        if cast_to_out:
            x = to_dtype(x, out)
        return to_dtype(fn(x, dims_of(x, dim), keepdim), out)

    return lowered


lower(aten.sum.dim_IntList, aten.sum.default)(reduction(L.sum))
lower(aten.mean.dim, aten.mean.default)(reduction(L.mean))
lower(aten.amax.default)(reduction(L.amax))
lower(aten.amin.default)(reduction(L.amin))
lower(aten.max.default)(reduction(L.amax))
lower(aten.min.default)(reduction(L.amin))
lower(aten.prod.dim_int, aten.prod.default)(reduction(L.prod))
lower(aten.logsumexp.default)(reduction(L.logsumexp))
lower(aten.any.dim, aten.any.dims, aten.any.default)(reduction(lambda x, d, k: L.any(to_dtype(x, "bool"), d, k), cast_to_out=False))
lower(aten.all.dim, aten.all.dims, aten.all.default)(reduction(lambda x, d, k: L.all(to_dtype(x, "bool"), d, k), cast_to_out=False))


@lower(aten.var.correction, aten.var.dim)
def _var(cx, x, dim=None, unbiased=None, correction=None, keepdim=False, **kw):
    c = 1 if correction is None else correction
    if unbiased is not None and correction is None and not isinstance(unbiased, bool):
        keepdim, unbiased = unbiased, True
    if unbiased is False:
        c = 0
    return L.var(to_dtype(x, cx.out_dtype()), dims_of(x, dim), int(c), keepdim)


@lower(aten.std.correction, aten.std.dim)
def _std(cx, x, dim=None, unbiased=None, correction=None, keepdim=False, **kw):
    c = 1 if correction is None else correction
    if unbiased is False:
        c = 0
    return L.std(to_dtype(x, cx.out_dtype()), dims_of(x, dim), int(c), keepdim)


@lower(aten.max.dim)
def _max_dim(cx, x, dim, keepdim=False):
    return L.amax(x, [dim], keepdim), L.argmax(x, dim, keepdim)


@lower(aten.min.dim)
def _min_dim(cx, x, dim, keepdim=False):
    return L.amin(x, [dim], keepdim), L.argmin(x, dim, keepdim)


@lower(aten.argmax.default)
def _argmax(cx, x, dim=None, keepdim=False):
    if dim is None:
        return L.argmax(L.reshape(x, [_numel(x)]), 0, False)
    return L.argmax(x, dim, keepdim)


@lower(aten.argmin.default)
def _argmin(cx, x, dim=None, keepdim=False):
    if dim is None:
        return L.argmin(L.reshape(x, [_numel(x)]), 0, False)
    return L.argmin(x, dim, keepdim)


def _numel(x):
    n = 1
    for s in x.shape:
        n = s * n
    return n


@lower(aten.cumsum.default)
def _cumsum(cx, x, dim, dtype=None):
    return L.cumsum(to_dtype(x, cx.out_dtype()), dim)


@lower(aten.cumprod.default)
def _cumprod(cx, x, dim, dtype=None):
    return L.cumprod(to_dtype(x, cx.out_dtype()), dim)


@lower(aten._softmax.default, aten.softmax.int)
def _softmax(cx, x, dim, half_to_float=False, dtype=None):
    return to_dtype(L.softmax(f32(x), dim), cx.out_dtype())


@lower(aten._log_softmax.default, aten.log_softmax.int)
def _log_softmax(cx, x, dim, half_to_float=False, dtype=None):
    return to_dtype(L.log_softmax(f32(x), dim), cx.out_dtype())


@lower(aten.native_layer_norm.default)
def _native_layer_norm(cx, x, normalized_shape, weight, bias, eps):
    k = len(normalized_shape)
    xf = f32(x)
    y = L.layer_norm(xf, k, f32(weight), f32(bias), eps)
    axes = list(range(x.ndim - k, x.ndim))
    mean = L.mean(xf, axes, True)
    rstd = L.rsqrt(L.add(L.var(xf, axes, 0, True), float(eps)))
    return to_dtype(y, x.dtype), mean, rstd


@lower(aten.layer_norm.default)
def _layer_norm(cx, x, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return to_dtype(L.layer_norm(f32(x), len(normalized_shape), f32(weight), f32(bias), eps), x.dtype)


@lower(aten.rms_norm.default)
def _rms_norm(cx, x, normalized_shape, weight=None, eps=None):
    if len(normalized_shape) != 1:
        raise NotImplementedError("rms_norm over more than the last dim")
    if eps is None:
        eps = torch.finfo(torch.float32).eps
    return to_dtype(L.rms_norm(f32(x), f32(weight), eps), cx.out_dtype())


# ---- matrix products --------------------------------------------------------------------------


# Half-precision products run as PyTorch runs them: f32 products and sums, one rounding at the
# end. (A cast weight costs nothing extra: the compiler's rules read bf16/f16 weights natively.)
@lower(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _mm(cx, a, b):
    a, b = promote(cx, a, b)
    return to_dtype(L.matmul(f32(a), f32(b)), cx.out_dtype())


@lower(aten.addmm.default)
def _addmm(cx, bias, a, b, beta=1, alpha=1):
    p = L.matmul(f32(a), f32(b))
    if alpha != 1:
        p = L.mul(p, float(alpha))
    if beta != 0:
        bias = f32(bias)
        p = L.add(p, bias if beta == 1 else L.mul(bias, float(beta)))
    return to_dtype(p, cx.out_dtype())


LOWERINGS[aten.baddbmm.default] = _addmm


@lower(aten.linear.default)
def _linear(cx, x, w, b=None):
    return to_dtype(L.linear(f32(x), f32(w), None if b is None else f32(b)), cx.out_dtype())


def grouped_mm(cx, a, b, offs):
    """Rows of a [T, k] in groups (offs: each group's end row) times b [G, k, n], group g's rows by
    b[g]: every group's product over every row, each row keeping its own group's (G times the
    work of a grouped kernel; right for any routing)."""
    if a.ndim != 2 or b.ndim != 3 or offs is None:
        raise NotImplementedError("grouped_mm other than rows [T, k] by groups [G, k, n] with offsets")
    t, g = a.shape[0], b.shape[0]
    a, b = f32(a), f32(b)
    rows = cx.graph.arange(0, t, 1, "i32")
    group = L.sum(L.cast(L.ge(L.unsqueeze(rows, 1), L.unsqueeze(to_dtype(offs, "i32"), 0)), "i32"), [1])  # ends at or before the row
    every = L.matmul(L.unsqueeze(a, 0), b)  # [G, T, n]
    mine = L.cast(L.eq(L.unsqueeze(group, 1), L.unsqueeze(cx.graph.arange(0, g, 1, "i32"), 0)), every.dtype)  # [T, G]
    return to_dtype(L.sum(L.mul(L.permute(every, [1, 0, 2]), L.unsqueeze(mine, 2)), [1]), cx.out_dtype())


@lower(aten._grouped_mm.default)
def _grouped_mm(cx, a, b, offs=None, bias=None, out_dtype=None):
    out = grouped_mm(cx, a, b, offs)
    return out if bias is None else L.add(out, to_dtype(bias, out.dtype))


# Ops of other libraries' namespaces, by name (they exist only once those libraries load).
NAMED_LOWERINGS = {
    "transformers.grouped_mm_fallback.default": lambda cx, a, b, offs: grouped_mm(cx, a, b, offs),
}


@lower(aten.histc.default)
def _histc(cx, x, bins=100, min=0, max=0):
    if min == max:
        raise NotImplementedError("histc with min == max (a range taken from the data)")
    x = L.reshape(to_dtype(x, "f32"), [_numel(x)])
    at = L.cast(L.floor(L.mul(L.sub(x, float(min)), float(bins) / (float(max) - float(min)))), "i32")
    at = L.where(L.eq(x, float(max)), scalar(cx, bins - 1, "i32"), at)  # the top edge belongs to the last bin
    inside = L.logical_and(L.ge(x, float(min)), L.le(x, float(max)))
    hits = L.logical_and(L.eq(L.unsqueeze(at, 1), L.unsqueeze(cx.graph.arange(0, bins, 1, "i32"), 0)), L.unsqueeze(inside, 1))
    return to_dtype(L.sum(L.cast(hits, "f32"), [0]), cx.out_dtype())


# ---- movement ---------------------------------------------------------------------------------


def resolve_shape(x, shape):
    """A view's target shape with at most one -1, the rest kept."""
    shape = list(shape)
    if any(isinstance(s, int) and s == -1 for s in shape):
        known = 1
        for s in shape:
            if not (isinstance(s, int) and s == -1):
                known = s * known
        i = next(i for i, s in enumerate(shape) if isinstance(s, int) and s == -1)
        shape[i] = _numel(x) // known
    return shape


@lower(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default)
def _view(cx, x, shape):
    return L.reshape(x, resolve_shape(x, shape))


@lower(aten.permute.default)
def _permute(cx, x, dims):
    return L.permute(x, [d % x.ndim for d in dims])


@lower(aten.transpose.int)
def _transpose(cx, x, a, b):
    return L.transpose(x, a, b)


@lower(aten.t.default)
def _t(cx, x):
    return x if x.ndim < 2 else L.transpose(x, 0, 1)


@lower(aten.unsqueeze.default)
def _unsqueeze(cx, x, d):
    return L.unsqueeze(x, d)


@lower(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(cx, x, dims=None):
    if dims is None:
        return L.reshape(x, cx.out_shape())
    dims = [dims] if isinstance(dims, int) else list(dims)
    for d in sorted((d % x.ndim for d in dims), reverse=True):
        if x.shape[d] == 1:
            x = L.squeeze(x, d)
    return x


@lower(aten.expand.default)
def _expand(cx, x, shape):
    return L.expand(x, list(shape))


@lower(aten.slice.Tensor)
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    """The slice's length comes from torch's result shape: its shape environment knows how the
    symbolic sizes relate (an end past the size clamps), which a min() here could not show."""
    dim = dim % x.ndim
    size = x.shape[dim]
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        start = size + start if not _is_const(size) else max(0, _const(size) + start)
    if _is_const(size) and isinstance(start, int):
        start = min(start, _const(size))
    length = cx.out_shape()[dim]
    return L.slice(x, dim, start, start + (length - 1) * step + 1 if step != 1 else start + length, step)


def _const(e):
    return e if isinstance(e, int) else e.value()


def _is_const(e):
    return isinstance(e, int) or (isinstance(e, L.Expr) and e.is_const())


@lower(aten.select.int)
def _select(cx, x, dim, index):
    if isinstance(index, int) and index < 0:
        index = x.shape[dim] + index
    return L.select(x, dim, index)


@lower(aten.narrow.default)
def _narrow(cx, x, dim, start, length):
    return L.slice(x, dim, start, start + length, 1)


@lower(aten.cat.default)
def _cat(cx, xs, dim=0):
    out = cx.out_dtype()
    xs = [to_dtype(x, out) for x in xs if not (x.ndim == 1 and _is_const(x.shape[0]) and x.shape[0].value() == 0)]
    return xs[0] if len(xs) == 1 else L.cat(xs, dim)


@lower(aten.stack.default)
def _stack(cx, xs, dim=0):
    return L.stack(list(xs), dim)


@lower(aten.split.Tensor, aten.split_with_sizes.default)
def _split(cx, x, sizes, dim=0):
    if isinstance(sizes, int):  # equal parts of `sizes`, the last shorter: read off torch's result
        sizes = [cx.out_shape(i)[dim] for i in range(len(cx.node.meta["val"]))]
    return L.split(x, list(sizes), dim)


@lower(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default, aten.contiguous.default)
def _identity(cx, x, **_):
    return x


@lower(aten._to_copy.default)
def _to_copy(cx, x, dtype=None, **_):
    return to_dtype(x, cx.out_dtype())


@lower(torch.ops.prims.convert_element_type.default)
def _convert_element_type(cx, x, dtype):
    return to_dtype(x, luminal_dtype(dtype))


@lower(aten.to.dtype)
def _to_dtype(cx, x, dtype, *args, **kw):
    return to_dtype(x, luminal_dtype(dtype))


@lower(aten.embedding.default)
def _embedding(cx, w, ids, *_):
    return L.embedding(w, to_dtype(ids, "i32"))


def _prod(xs):
    out = 1
    for v in xs:
        out = v * out
    return out


def _size_tensor(cx, size):
    """A scalar i32 tensor holding a (possibly symbolic) size."""
    if isinstance(size, int) or size.is_const():
        return cx.graph.constant(float(size if isinstance(size, int) else size.value()), "i32")
    return L.reshape(cx.graph.arange(size, size + 1, 1, "i32"), [])


class IndexedRows:
    """x viewed as rows over its indexed dims (merged into one, first) and the broadcast index
    tensors as one flat row index: what aten.index and aten.index_put have in common."""

    def __init__(self, cx, x, indices):
        self.dims = [d for d, i in enumerate(indices) if i is not None]
        for d in self.dims:
            if indices[d].dtype == "bool":
                raise NotImplementedError("indexing with a boolean mask (its result's shape depends on the data)")
        self.rest = [d for d in range(x.ndim) if d not in self.dims]
        self.order = self.dims + self.rest
        sizes = [x.shape[d] for d in self.dims]
        self.rest_shape = [x.shape[d] for d in self.rest]
        xp = L.permute(x, self.order) if self.order != list(range(x.ndim)) else x
        self.rows = L.reshape(xp, [_prod(sizes)] + self.rest_shape)
        index_nodes = [a for a in cx.node.args[1] if a is not None]
        self.bshape = [cx._exprs(v) for v in torch.broadcast_shapes(*[n.meta["val"].shape for n in index_nodes])]
        flat = None
        for k, d in enumerate(self.dims):
            t = to_dtype(indices[d], "i32")
            t = L.where(L.lt(t, 0), L.add(t, _size_tensor(cx, sizes[k])), t)  # negative indices count from the end
            stride = _prod(sizes[k + 1:])
            if not (isinstance(stride, int) and stride == 1):
                t = L.mul(t, _size_tensor(cx, stride))
            flat = t if flat is None else L.add(flat, t)
        if [repr(v) for v in flat.shape] != [repr(v) for v in self.bshape]:
            flat = L.contiguous(L.expand(flat, self.bshape))
        self.flat = L.reshape(flat, [_prod(self.bshape)])
        # Adjacent indexed dims keep their place in the result (numpy's rule); others go first.
        self.adjacent_at = self.dims[0] if self.dims == list(range(self.dims[0], self.dims[-1] + 1)) else 0

    def result_order(self):
        """The permutation from [broadcast dims, rest] to the result's dims."""
        nb, before = len(self.bshape), self.adjacent_at
        return list(range(nb, nb + before)) + list(range(nb)) + list(range(nb + before, nb + len(self.rest)))


@lower(aten.index.Tensor)
def _index(cx, x, indices):
    """Advanced indexing: one gather of rows over the indexed dims merged."""
    ix = IndexedRows(cx, x, indices)
    out = L.reshape(L.index_select(ix.rows, 0, ix.flat), ix.bshape + ix.rest_shape)
    order = ix.result_order()
    return out if order == list(range(len(order))) else L.permute(out, order)


@lower(aten.index_put.default, aten._unsafe_index_put.default)
def _index_put(cx, x, indices, values, accumulate=False):
    """x with rows over the indexed dims replaced by `values` (broadcast to the indexed result)."""
    if any(i is not None and i.dtype == "bool" for i in indices):
        return _masked_put(cx, x, indices, values, accumulate)
    given = [(d, i) for d, i in enumerate(indices) if i is not None]
    if not accumulate and len(given) == 1 and given[0][1].ndim == 1:
        return _put_along(cx, x, given[0][0], given[0][1], values)
    ix = IndexedRows(cx, x, list(indices))
    order = ix.result_order()
    target = [None] * len(order)
    full = ix.bshape + ix.rest_shape
    for i, o in enumerate(order):
        target[i] = full[o]
    values = L.expand(to_dtype(as_tensor(cx, values, x.dtype), x.dtype), target)
    inverse = [order.index(i) for i in range(len(order))]
    values = L.reshape(L.contiguous(L.permute(values, inverse)), [_prod(ix.bshape)] + ix.rest_shape)
    if accumulate:  # repeats add up: a one-hot [rows, K] matrix times the values [K, rest]
        count = _prod(ix.bshape)
        hit = L.cast(L.eq(L.unsqueeze(cx.graph.arange(0, ix.rows.shape[0], 1, "i32"), 1), L.unsqueeze(ix.flat, 0)), x.dtype)
        added = L.matmul(hit, L.reshape(values, [count, _prod(ix.rest_shape)]))
        rows = L.add(ix.rows, L.reshape(added, list(ix.rows.shape)))
    else:
        where = L.reshape(ix.flat, [_prod(ix.bshape)] + [1] * len(ix.rest))
        where = L.expand(where, [_prod(ix.bshape)] + ix.rest_shape)
        rows = L.scatter(ix.rows, 0, L.contiguous(where), values)
    shaped = L.reshape(rows, [x.shape[d] for d in ix.order])
    back = [ix.order.index(d) for d in range(x.ndim)]
    return shaped if back == list(range(x.ndim)) else L.permute(shaped, back)


def _put_along(cx, x, dim, index, values):
    """x with the slices at `index` along `dim` replaced: one scatter into x's own layout, so a
    KV cache given as an input is updated in place."""
    k = index.shape[0]
    target = list(x.shape)
    target[dim] = k
    values = L.contiguous(L.expand(to_dtype(as_tensor(cx, values, x.dtype), x.dtype), target))
    index = to_dtype(index, "i32")
    index = L.where(L.lt(index, 0), L.add(index, _size_tensor(cx, x.shape[dim])), index)
    shape = [1] * x.ndim
    shape[dim] = k
    index = L.contiguous(L.expand(L.reshape(index, shape), target))
    return L.scatter(x, dim, index, values)


def _masked_put(cx, x, indices, values, accumulate):
    """x[mask] = value with one value for every selected element (a where); a value per
    selected element has a shape that depends on the data."""
    if len([i for i in indices if i is not None]) != 1 or indices[0] is None:
        raise NotImplementedError("index_put with a boolean mask beside other indices")
    val = cx.node.args[2].meta["val"] if isinstance(cx.node.args[2], torch.fx.Node) else None
    if val is not None and val.numel() != 1:
        raise NotImplementedError("index_put of a boolean mask with one value per selected element (a data-dependent shape)")
    mask = indices[0]
    mask = L.reshape(mask, list(mask.shape) + [1] * (x.ndim - mask.ndim))
    v = to_dtype(L.reshape(values, []) if is_tensor(values) else as_tensor(cx, values, x.dtype), x.dtype)
    return L.where(mask, L.add(x, v) if accumulate else v, x)


@lower(aten.index_select.default)
def _index_select(cx, x, dim, index):
    return L.index_select(x, dim, to_dtype(index, "i32"))


@lower(aten.gather.default)
def _gather(cx, x, dim, index, sparse_grad=False):
    return L.gather(x, dim, to_dtype(index, "i32"))


@lower(aten.repeat.default)
def _repeat(cx, x, reps):
    return L.repeat(x, list(reps))


@lower(aten.flip.default)
def _flip(cx, x, dims):
    return L.flip(x, list(dims))


@lower(aten.unfold.default)
def _unfold(cx, x, dim, size, step):
    return L.unfold(x, dim, size, step)


@lower(aten.constant_pad_nd.default)
def _pad(cx, x, pad, value=0.0):
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return L.pad(x, pairs, float(value))


@lower(aten.tril.default)
def _tril(cx, x, k=0):
    return L.tril(x, k)


@lower(aten.triu.default)
def _triu(cx, x, k=0):
    return L.triu(x, k)


# ---- creation ---------------------------------------------------------------------------------


@lower(aten.full.default, aten.new_full.default)
def _full(cx, *args, **kw):
    if cx.node.target == aten.new_full.default:
        args = args[1:]
    shape, value = args[0], args[1]
    return cx.graph.full(list(shape), float(value), cx.out_dtype())


@lower(aten.zeros.default, aten.new_zeros.default, aten.empty.memory_format, aten.new_empty.default, aten.empty_strided.default,
       aten.empty_permuted.default)
def _zeros(cx, *args, **kw):
    return cx.graph.full(cx.out_shape(), 0.0, cx.out_dtype())


@lower(aten.ones.default, aten.new_ones.default)
def _ones(cx, *args, **kw):
    return cx.graph.full(cx.out_shape(), 1.0, cx.out_dtype())


@lower(aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default)
def _full_like(cx, x, value=None, **kw):
    target = cx.node.target
    v = 0.0 if target in (aten.zeros_like.default, aten.empty_like.default) else 1.0 if target == aten.ones_like.default else value
    return cx.graph.full(cx.out_shape(), float(v), cx.out_dtype())


@lower(aten.scalar_tensor.default)
def _scalar_tensor(cx, value, **kw):
    return cx.graph.constant(float(value), cx.out_dtype())


@lower(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(cx, *args, **kw):
    if len(args) == 1:
        start, end, step = 0, args[0], 1
    else:
        start, end = args[0], args[1]
        step = args[2] if len(args) > 2 else 1
    out = cx.out_dtype()
    if all(isinstance(v, int) or isinstance(v, L.Expr) for v in (start, end)) and isinstance(step, int):
        return to_dtype(cx.graph.arange(start, end, step, "i32"), out)
    # Float steps: i * step + start over the count torch computes.
    n = cx.out_shape()[0]
    i = cx.graph.arange(0, n, 1, "i32")
    return L.add(L.mul(L.cast(i, "f32"), float(step)), float(start)) if out != "i32" else i


@lower(aten.eye.default, aten.eye.m)
def _eye(cx, n, m=None, **kw):
    m = n if m is None else m
    rows = L.unsqueeze(cx.graph.arange(0, n, 1, "i32"), 1)
    cols = L.unsqueeze(cx.graph.arange(0, m, 1, "i32"), 0)
    return L.cast(L.eq(rows, cols), cx.out_dtype())


# ---- sort ----------------------------------------------------------------------------------------


@lower(aten.sort.default, aten.sort.stable)
def _sort(cx, x, *args, **kw):
    dim = kw.get("dim", -1)
    descending = kw.get("descending", False)
    if cx.node.target == aten.sort.default:
        if len(args) > 0:
            dim = args[0]
        if len(args) > 1:
            descending = args[1]
    else:
        if len(args) > 1:
            dim = args[1]
        if len(args) > 2:
            descending = args[2]
    return L.sort(x, dim, descending)


@lower(aten.argsort.default, aten.argsort.stable)
def _argsort(cx, x, *args, **kw):
    dim = kw.get("dim", -1)
    descending = kw.get("descending", False)
    if cx.node.target == aten.argsort.default and args:
        dim = args[0]
        if len(args) > 1:
            descending = args[1]
    return L.argsort(x, dim, descending)


@lower(aten.topk.default)
def _topk(cx, x, k, dim=-1, largest=True, sorted=True):
    return L.topk(x, k, dim, largest)


# ---- Python-level ops in the graph ------------------------------------------------------------


@lower(operator.getitem)
def _getitem(cx, xs, i):
    return xs[i]


# ---- normalisation in f32 -----------------------------------------------------------------------


@lower(aten.native_group_norm.default)
def _group_norm(cx, x, weight, bias, n, c, hw, groups, eps):
    """[N, C, *] normalised over each group of C // groups channels and the spatial dims."""
    dtype = x.dtype
    xf = to_dtype(x, "f32")
    grouped = L.reshape(xf, [x.shape[0], groups, _prod(x.shape[1:]) // groups])
    mean = L.mean(grouped, [2], True)
    var = L.var(grouped, [2], 0, True)
    rstd = L.rsqrt(L.add(var, float(eps)))
    y = L.reshape(L.mul(L.sub(grouped, mean), rstd), list(x.shape))
    affine = [x.shape[1]] + [1] * (x.ndim - 2)
    if weight is not None:
        y = L.mul(y, L.reshape(to_dtype(weight, "f32"), affine))
    if bias is not None:
        y = L.add(y, L.reshape(to_dtype(bias, "f32"), affine))
    return to_dtype(y, dtype), L.reshape(mean, [x.shape[0], groups]), L.reshape(rstd, [x.shape[0], groups])


@lower(aten.var_mean.correction, aten.var_mean.dim)
def _var_mean(cx, x, dim=None, unbiased=None, correction=None, keepdim=False, **kw):
    c = 0 if unbiased is False else (1 if correction is None else correction)
    axes = dims_of(x, dim)
    x = to_dtype(x, cx.out_dtype(0))
    return L.var(x, axes, int(c), keepdim), L.mean(x, axes, keepdim)


@lower(aten.elu.default)
def _elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = L.mul(L.expm1(L.mul(x, float(input_scale))), float(alpha * scale))
    return L.where(L.gt(x, 0.0), L.mul(x, float(scale)), neg)


# ---- convolution and pooling ----------------------------------------------------------------------


def _windows(x, kernel, stride, padding, dilation, pad_value=0.0):
    """x [N, C, *spatial] -> [N, C, *out, *kernel]: every window of every spatial dim (im2col as
    views: pad, unfold each dim, then keep every dilation-th element of each window)."""
    s = len(kernel)
    if any(p != 0 for p in padding):
        x = L.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding], pad_value)
    for i in range(s):
        x = L.unfold(x, 2 + i, (kernel[i] - 1) * dilation[i] + 1, stride[i])
    for i in range(s):
        if dilation[i] != 1:
            axis = 2 + s + i
            x = L.slice(x, axis, 0, (kernel[i] - 1) * dilation[i] + 1, dilation[i])
    return x


def _conv(cx, x, w, bias, stride, padding, dilation, groups):
    n, c = x.shape[0], x.shape[1]
    s = x.ndim - 2
    kernel = [_const(k) for k in w.shape[2:]]
    win = _windows(x, kernel, stride, padding, dilation)  # [N, C, *out, *k]
    out = list(win.shape[2:2 + s])
    cg, o = _const(c) // groups, _const(w.shape[0])
    og, kk = o // groups, cg * _prod(kernel)
    # [N, G, Cg, *out, *k] -> [N, G, *out, Cg, *k] -> [N, G, P, Cg*K]
    win = L.reshape(win, [n, groups, cg] + out + kernel)
    win = L.permute(win, [0, 1] + list(range(3, 3 + s)) + [2] + list(range(3 + s, 3 + 2 * s)))
    win = L.reshape(win, [n, groups, _prod(out), kk])
    wg = L.transpose(L.reshape(to_dtype(w, x.dtype), [groups, og, kk]), 1, 2)  # [G, Cg*K, Og]
    y = L.matmul(win, wg)  # [N, G, P, Og]
    y = L.reshape(L.permute(y, [0, 1, 3, 2]), [n, o] + out)
    if bias is not None:
        y = L.add(y, L.reshape(to_dtype(bias, y.dtype), [o] + [1] * s))
    return y


def _dilate(x, stride):
    """Zeros between the spatial elements of x [N, C, *spatial] (a transposed conv's input)."""
    for i, st in enumerate(stride):
        if st == 1:
            continue
        axis = 2 + i
        length = x.shape[axis]
        x = L.unsqueeze(x, axis + 1)
        x = L.pad(x, [(0, 0)] * (axis + 1) + [(0, st - 1)] + [(0, 0)] * (x.ndim - axis - 2))
        shape = list(x.shape)
        x = L.reshape(x, shape[:axis] + [length * st] + shape[axis + 2:])
        x = L.slice(x, axis, 0, (length - 1) * st + 1, 1)
    return x


@lower(aten.convolution.default)
def _convolution(cx, x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    s = x.ndim - 2
    stride, padding, dilation = list(stride), list(padding), list(dilation)
    if not transposed:
        return _conv(cx, x, w, bias, stride, padding, dilation, groups)
    # A transposed conv is a conv over the input with zeros between its elements, padded by
    # dilation * (k - 1) - padding (plus output_padding at the end), with the kernel flipped and
    # its in/out channels swapped per group.
    kernel = [_const(k) for k in w.shape[2:]]
    xd = _dilate(x, stride)
    pads = [(dilation[i] * (kernel[i] - 1) - padding[i], dilation[i] * (kernel[i] - 1) - padding[i] + output_padding[i]) for i in range(s)]
    if any(a < 0 or b < 0 for a, b in pads):
        raise NotImplementedError("transposed convolution with padding larger than dilation * (kernel - 1)")
    xd = L.pad(xd, [(0, 0), (0, 0)] + pads, 0.0)
    cin, og = _const(w.shape[0]), _const(w.shape[1])
    wt = L.reshape(w, [groups, cin // groups, og] + kernel)
    wt = L.permute(wt, [0, 2, 1] + list(range(3, 3 + s)))  # [G, Og, Cg, *k]
    wt = L.flip(L.reshape(wt, [groups * og, cin // groups] + kernel), list(range(2, 2 + s)))
    return _conv(cx, xd, wt, bias, [1] * s, [0] * s, dilation, groups)


def _pool_args(x, kernel, stride, padding, dilation=None):
    s = x.ndim - 2
    def full(v, default):
        v = default if v is None or (isinstance(v, (list, tuple)) and len(v) == 0) else v
        v = list(v) if isinstance(v, (list, tuple)) else [v]
        return v * s if len(v) == 1 else v
    kernel = full(kernel, None)
    return kernel, full(stride, kernel), full(padding, [0]), full(dilation, [1])


@lower(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool(cx, x, kernel, stride=None, padding=0, dilation=1, ceil_mode=False):
    if ceil_mode:
        raise NotImplementedError("max pooling with ceil_mode=True")
    kernel, stride, padding, dilation = _pool_args(x, kernel, stride, padding, dilation)
    s = len(kernel)
    win = _windows(x, kernel, stride, padding, dilation, float("-inf"))  # [N, C, *out, *k]
    out = list(win.shape[2:2 + s])
    flat = L.reshape(win, list(win.shape[:2 + s]) + [_prod(kernel)])
    values = L.amax(flat, [-1])
    # Indices: the flat position in the input's spatial dims of each window's first maximum.
    arg = L.argmax(flat, -1)  # position inside the window, [N, C, *out]
    spatial = [x.shape[2 + i] for i in range(s)]
    index = None
    rem = arg
    for i in range(s):
        inner = _prod(kernel[i + 1:])
        ki = L.floor_divide(rem, scalar(cx, inner, "i32")) if inner != 1 else rem
        rem = L.remainder(rem, scalar(cx, inner, "i32")) if inner != 1 else rem
        shape = [1] * (2 + s)
        shape[2 + i] = out[i]
        start = L.reshape(L.sub(L.mul(cx.graph.arange(0, out[i], 1, "i32"), scalar(cx, stride[i], "i32")),
                                scalar(cx, padding[i], "i32")), shape)
        pos = L.add(start, L.mul(ki, scalar(cx, dilation[i], "i32")))
        index = pos if index is None else L.add(L.mul(index, _size_tensor(cx, spatial[i])), pos)
    return values, to_dtype(index, cx.out_dtype(1))


@lower(aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(cx, x, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
    if ceil_mode:
        raise NotImplementedError("average pooling with ceil_mode=True")
    kernel, stride, padding, _ = _pool_args(x, kernel, stride, padding)
    s = len(kernel)
    win = _windows(x, kernel, stride, padding, [1] * s)
    total = L.sum(win, list(range(2 + s, 2 + 2 * s)))
    if divisor_override:
        return L.div(total, float(divisor_override))
    if count_include_pad or not any(padding):
        return L.div(total, float(_prod(kernel)))
    ones = cx.graph.full([1, 1] + [x.shape[2 + i] for i in range(s)], 1.0, x.dtype)
    counts = L.sum(_windows(ones, kernel, stride, padding, [1] * s), list(range(2 + s, 2 + 2 * s)))
    return L.div(total, counts)


# ---- scatter ------------------------------------------------------------------------------------


def _scatter_add_rows(cx, x, dim, index, src):
    """x plus, along `dim`, src's values at their index positions (repeats add up): each target
    position sums the src elements whose index names it (a comparison over the index's extent)."""
    dim = dim % x.ndim
    n = x.shape[dim]
    idx = to_dtype(index, "i32")
    src = to_dtype(src, x.dtype)
    # src may be larger than index: only index's extent takes part.
    src = _crop(src, idx.shape)
    last = x.ndim
    hit = L.eq(L.unsqueeze(idx, last), L.reshape(cx.graph.arange(0, n, 1, "i32"), [1] * last + [n]))  # [*index, n]
    contrib = L.sum(L.mul(L.cast(hit, x.dtype), L.unsqueeze(src, last)), [dim])  # [*index without dim, n]
    contrib = L.unsqueeze(contrib, dim)
    contrib = L.transpose(contrib, dim, last)  # n back at dim, a 1 at the end
    contrib = L.squeeze(contrib, last)
    pads = [(0, 0) if d == dim else (0, x.shape[d] - idx.shape[d]) for d in range(x.ndim)]
    if any(not (isinstance(b, int) and b == 0) for _, b in pads):
        contrib = L.pad(contrib, pads, 0.0)
    return contrib, hit


def _crop(t, shape):
    for d, size in enumerate(shape):
        if repr(t.shape[d]) != repr(size):
            t = L.slice(t, d, 0, size, 1)
    return t


@lower(aten.scatter.src, aten.scatter.value)
def _scatter(cx, x, dim, index, src):
    src = L.expand(as_tensor(cx, src, x.dtype), list(index.shape)) if not is_tensor(src) else _crop(src, index.shape)
    return L.scatter(x, dim % x.ndim, to_dtype(index, "i32"), L.contiguous(to_dtype(src, x.dtype)))


@lower(aten.scatter_add.default)
def _scatter_add(cx, x, dim, index, src):
    contrib, _ = _scatter_add_rows(cx, x, dim, index, src)
    return L.add(x, contrib)


@lower(aten.scatter_reduce.two)
def _scatter_reduce(cx, x, dim, index, src, reduce, include_self=True):
    if reduce != "sum":
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r} (sum is supported)")
    contrib, _ = _scatter_add_rows(cx, x, dim, index, src)
    if include_self:
        return L.add(x, contrib)
    raise NotImplementedError("scatter_reduce with include_self=False")
