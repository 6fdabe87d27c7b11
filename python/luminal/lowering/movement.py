"""Views and copies: reshape, permute, slice, select, cat, split, repeat, flip, unfold, pad, casts."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


def resolve_shape(x, shape):
    """A view's target shape with at most one -1, the rest kept."""
    shape = list(shape)
    free = [i for i, s in enumerate(shape) if isinstance(s, int) and s == -1]
    if free:
        shape[free[0]] = prod_of(x.shape) // prod_of(s for i, s in enumerate(shape) if i != free[0])
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
        start = size + start if not is_const(size) else max(0, const_value(size) + start)
    if is_const(size) and isinstance(start, int):
        start = min(start, const_value(size))
    length = cx.out_shape()[dim]
    return L.slice(x, dim, start, start + (length - 1) * step + 1 if step != 1 else start + length, step)


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
    xs = [to_dtype(x, out) for x in xs if not (x.ndim == 1 and is_const(x.shape[0]) and x.shape[0].value() == 0)]
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


@lower(aten.copy.default)
def _copy(cx, dst, src, non_blocking=False):
    """copy(dst, src): src broadcast to dst's shape, in dst's dtype (functionalization's form of
    copy_ into a tensor the graph made itself, such as torch.empty(...).copy_(x))."""
    src = to_dtype(src, cx.out_dtype())
    return src if list(src.shape) == list(dst.shape) else L.expand(src, list(dst.shape))


@lower(aten._to_copy.default)
def _to_copy(cx, x, dtype=None, **_):
    return to_dtype(x, cx.out_dtype())


@lower(torch.ops.prims.convert_element_type.default)
def _convert_element_type(cx, x, dtype):
    return to_dtype(x, luminal_dtype(dtype))


@lower(aten.to.dtype)
def _to_dtype(cx, x, dtype, *args, **kw):
    return to_dtype(x, luminal_dtype(dtype))


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


@lower(operator.getitem)
def _getitem(cx, xs, i):
    return xs[i]
