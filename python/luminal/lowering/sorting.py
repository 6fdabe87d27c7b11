"""sort, argsort and topk."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


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
