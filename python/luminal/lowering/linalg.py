"""Matrix products: mm, bmm, addmm, linear, grouped_mm (MoE experts), histc."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


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
    x = L.reshape(to_dtype(x, "f32"), [prod_of(x.shape)])
    at = L.cast(L.floor(L.mul(L.sub(x, float(min)), float(bins) / (float(max) - float(min)))), "i32")
    at = L.where(L.eq(x, float(max)), scalar(cx, bins - 1, "i32"), at)  # the top edge belongs to the last bin
    inside = L.logical_and(L.ge(x, float(min)), L.le(x, float(max)))
    hits = L.logical_and(L.eq(L.unsqueeze(at, 1), L.unsqueeze(cx.graph.arange(0, bins, 1, "i32"), 0)), L.unsqueeze(inside, 1))
    return to_dtype(L.sum(L.cast(hits, "f32"), [0]), cx.out_dtype())
