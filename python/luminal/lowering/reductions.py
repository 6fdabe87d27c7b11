"""Reductions, softmax and the norms (f16/bf16 computed in f32, as PyTorch does)."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


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


def correction_of(unbiased, correction):
    """The divisor's correction (n - c) of var/std: 1 unless unbiased=False or given."""
    return 0 if unbiased is False else (1 if correction is None else int(correction))


def spread(fn):
    """var or std in both of aten's forms: .correction (keyword correction) and .dim (unbiased)."""

    def with_correction(cx, x, dim=None, correction=None, keepdim=False):
        return fn(to_dtype(x, cx.out_dtype()), dims_of(x, dim), correction_of(None, correction), keepdim)

    def with_unbiased(cx, x, dim=None, unbiased=True, keepdim=False):
        return fn(to_dtype(x, cx.out_dtype()), dims_of(x, dim), correction_of(unbiased, None), keepdim)

    return with_correction, with_unbiased


LOWERINGS[aten.var.correction], LOWERINGS[aten.var.dim] = spread(L.var)
LOWERINGS[aten.std.correction], LOWERINGS[aten.std.dim] = spread(L.std)


@lower(aten.max.dim)
def _max_dim(cx, x, dim, keepdim=False):
    return L.amax(x, [dim], keepdim), L.argmax(x, dim, keepdim)


@lower(aten.min.dim)
def _min_dim(cx, x, dim, keepdim=False):
    return L.amin(x, [dim], keepdim), L.argmin(x, dim, keepdim)


@lower(aten.argmax.default)
def _argmax(cx, x, dim=None, keepdim=False):
    if dim is None:
        return L.argmax(L.reshape(x, [prod_of(x.shape)]), 0, False)
    return L.argmax(x, dim, keepdim)


@lower(aten.argmin.default)
def _argmin(cx, x, dim=None, keepdim=False):
    if dim is None:
        return L.argmin(L.reshape(x, [prod_of(x.shape)]), 0, False)
    return L.argmin(x, dim, keepdim)


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


@lower(aten.native_group_norm.default)
def _group_norm(cx, x, weight, bias, n, c, hw, groups, eps):
    """[N, C, *] normalised over each group of C // groups channels and the spatial dims."""
    dtype = x.dtype
    xf = to_dtype(x, "f32")
    grouped = L.reshape(xf, [x.shape[0], groups, prod_of(x.shape[1:]) // groups])
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


@lower(aten.var_mean.correction)
def _var_mean(cx, x, dim=None, correction=None, keepdim=False):
    axes = dims_of(x, dim)
    x = to_dtype(x, cx.out_dtype(0))
    return L.var(x, axes, correction_of(None, correction), keepdim), L.mean(x, axes, keepdim)


@lower(aten.var_mean.dim)
def _var_mean_dim(cx, x, dim=None, unbiased=True, keepdim=False):
    return _var_mean(cx, x, dim, correction_of(unbiased, None), keepdim)
