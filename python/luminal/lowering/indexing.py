"""Gathers and scatters: advanced indexing, index_put, index_select, gather, embedding, scatter and scatter_add."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


@lower(aten.embedding.default)
def _embedding(cx, w, ids, *_):
    return L.embedding(w, to_dtype(ids, "i32"))


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
        self.rows = L.reshape(xp, [prod_of(sizes)] + self.rest_shape)
        index_nodes = [a for a in cx.node.args[1] if a is not None]
        self.bshape = [cx._exprs(v) for v in torch.broadcast_shapes(*[n.meta["val"].shape for n in index_nodes])]
        flat = None
        for k, d in enumerate(self.dims):
            t = wrap_negative(cx, indices[d], sizes[k])
            stride = prod_of(sizes[k + 1:])
            if not (isinstance(stride, int) and stride == 1):
                t = L.mul(t, size_tensor(cx, stride))
            flat = t if flat is None else L.add(flat, t)
        if [repr(v) for v in flat.shape] != [repr(v) for v in self.bshape]:
            flat = L.contiguous(L.expand(flat, self.bshape))
        self.flat = L.reshape(flat, [prod_of(self.bshape)])
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
    full = ix.bshape + ix.rest_shape
    target = [full[o] for o in order]  # the indexed result's shape, which values broadcast to
    values = L.expand(to_dtype(as_tensor(cx, values, x.dtype), x.dtype), target)
    inverse = [order.index(i) for i in range(len(order))]
    values = L.reshape(L.contiguous(L.permute(values, inverse)), [prod_of(ix.bshape)] + ix.rest_shape)
    if accumulate:  # repeats add up: a one-hot [rows, K] matrix times the values [K, rest]
        count = prod_of(ix.bshape)
        hit = L.cast(L.eq(L.unsqueeze(cx.graph.arange(0, ix.rows.shape[0], 1, "i32"), 1), L.unsqueeze(ix.flat, 0)), x.dtype)
        added = L.matmul(hit, L.reshape(values, [count, prod_of(ix.rest_shape)]))
        rows = L.add(ix.rows, L.reshape(added, list(ix.rows.shape)))
    else:
        where = L.reshape(ix.flat, [prod_of(ix.bshape)] + [1] * len(ix.rest))
        where = L.expand(where, [prod_of(ix.bshape)] + ix.rest_shape)
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
    index = wrap_negative(cx, index, x.shape[dim])
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


def _scatter_rows(cx, x, dim, index, src, reduce="sum"):
    """Along `dim`, each position of x reduces the src elements whose index names it (a
    comparison over the index's extent). Returns (reduced, hits), both laid out like x: the
    reduction of the hitting elements (sum, prod, amax or amin; the reduction's identity where
    none hit) and how many hit."""
    dim = dim % x.ndim
    n = x.shape[dim]
    idx = to_dtype(index, "i32")
    src = to_dtype(src, x.dtype)
    # src may be larger than index: only index's extent takes part.
    src = _crop(src, idx.shape)
    last = x.ndim
    hit = L.eq(L.unsqueeze(idx, last), L.reshape(cx.graph.arange(0, n, 1, "i32"), [1] * last + [n]))  # [*index, n]
    values = L.unsqueeze(src, last)
    if reduce == "sum":
        reduced = L.sum(L.mul(L.cast(hit, x.dtype), values), [dim])
    else:
        identity = {"prod": 1.0, "amax": -float("inf"), "amin": float("inf")}[reduce]
        if x.dtype in ("i32", "bool") and reduce != "prod":
            identity = -2 ** 31 if reduce == "amax" else 2 ** 31 - 1
        fill = L.expand(scalar(cx, identity, x.dtype), [1] * (last + 1))
        reduced = {"prod": L.prod, "amax": L.amax, "amin": L.amin}[reduce](L.where(hit, values, fill), [dim])
    hits = L.sum(L.cast(hit, "i32"), [dim])

    def like_x(t):  # [*index without dim, n] back to x's layout, padded past index's extent
        t = L.squeeze(L.transpose(L.unsqueeze(t, dim), dim, last), last)
        pads = [(0, 0) if d == dim else (0, x.shape[d] - idx.shape[d]) for d in range(x.ndim)]
        if any(not (isinstance(b, int) and b == 0) for _, b in pads):
            t = L.pad(t, pads, 0.0)
        return t

    return like_x(reduced), like_x(hits)


def _scatter_add_rows(cx, x, dim, index, src):
    """What scatter_add adds to x: src's values summed at their index positions."""
    return _scatter_rows(cx, x, dim, index, src)[0]


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
    return L.add(x, _scatter_add_rows(cx, x, dim, index, src))


@lower(aten.scatter_reduce.two)
def _scatter_reduce(cx, x, dim, index, src, reduce, include_self=True):
    """Positions no index names keep x; the others reduce the src elements that name them,
    with x's own value too when include_self."""
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise NotImplementedError(f"scatter_reduce with reduce={reduce!r}")
    reduced, hits = _scatter_rows(cx, x, dim, index, src, "sum" if reduce == "mean" else reduce)
    if reduce == "mean":
        count = to_dtype(L.add(hits, 1) if include_self else hits, x.dtype)
        total = L.add(x, reduced) if include_self else reduced
        value = L.floor_divide(total, count) if x.dtype == "i32" else L.div(total, count)
    elif not include_self:
        value = reduced
    else:
        value = {"sum": L.add, "prod": L.mul, "amax": L.maximum, "amin": L.minimum}[reduce](x, reduced)
    return L.where(L.gt(hits, 0), value, x)
