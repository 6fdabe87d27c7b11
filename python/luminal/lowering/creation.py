"""Creation ops: full, zeros, ones, empty and their like/new forms, arange, eye, scalar_tensor."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


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
