"""What every lowering shares: the registry (LOWERINGS, lower), the dtype map, the context a
lowering gets (Lowering), torch's type promotion, and helpers for scalars and symbolic sizes."""
import operator

import torch

from .. import _luminal as L

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
        return to_dtype(size_tensor(cx, x), dtype)
    return scalar(cx, x, dtype)


def promote(cx, a, b):
    """Both operands (tensors or Python numbers) in the dtype torch's type promotion gives."""
    common = _common(cx)
    return to_dtype(as_tensor(cx, a, common), common), to_dtype(as_tensor(cx, b, common), common)


def _common(cx):
    ta = cx.node.args[0].meta["val"] if isinstance(cx.node.args[0], torch.fx.Node) else cx.node.args[0]
    tb = cx.node.args[1].meta["val"] if isinstance(cx.node.args[1], torch.fx.Node) else cx.node.args[1]
    return luminal_dtype(torch.result_type(ta, tb))


def dims_of(x, dim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.ndim))
    return [dim] if isinstance(dim, int) else list(dim)


def const_value(e):
    return e if isinstance(e, int) else e.value()


def is_const(e):
    return isinstance(e, int) or (isinstance(e, L.Expr) and e.is_const())


def prod_of(xs):
    out = 1
    for v in xs:
        out = v * out
    return out


def size_tensor(cx, size):
    """A scalar i32 tensor holding a (possibly symbolic) size."""
    if is_const(size):
        return cx.graph.constant(float(const_value(size)), "i32")
    return L.reshape(cx.graph.arange(size, size + 1, 1, "i32"), [])


def wrap_negative(cx, index, size):
    """Integer indices with negative ones counted from the end of a dim of `size`."""
    index = to_dtype(index, "i32")
    return L.where(L.lt(index, 0), L.add(index, size_tensor(cx, size)), index)
