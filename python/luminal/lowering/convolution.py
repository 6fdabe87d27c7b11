"""Convolution (1d/2d/3d, groups, transposed) and pooling, as im2col views and a matmul."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


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
    kernel = [const_value(k) for k in w.shape[2:]]
    win = _windows(x, kernel, stride, padding, dilation)  # [N, C, *out, *k]
    out = list(win.shape[2:2 + s])
    cg, o = const_value(c) // groups, const_value(w.shape[0])
    og, kk = o // groups, cg * prod_of(kernel)
    # [N, G, Cg, *out, *k] -> [N, G, *out, Cg, *k] -> [N, G, P, Cg*K]
    win = L.reshape(win, [n, groups, cg] + out + kernel)
    win = L.permute(win, [0, 1] + list(range(3, 3 + s)) + [2] + list(range(3 + s, 3 + 2 * s)))
    win = L.reshape(win, [n, groups, prod_of(out), kk])
    wg = L.transpose(L.reshape(to_dtype(w, x.dtype), [groups, og, kk]), 1, 2)  # [G, Cg*K, Og]
    # Half-precision inputs: f32 products, sums and bias, one rounding at the end, as PyTorch's
    # CPU convolutions do (a half matmul would round every product).
    y = L.matmul(f32(win), f32(wg))  # [N, G, P, Og]
    y = L.reshape(L.permute(y, [0, 1, 3, 2]), [n, o] + out)
    if bias is not None:
        y = L.add(y, L.reshape(f32(bias), [o] + [1] * s))
    return to_dtype(y, x.dtype)


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
    kernel = [const_value(k) for k in w.shape[2:]]
    xd = _dilate(x, stride)
    pads = [(dilation[i] * (kernel[i] - 1) - padding[i], dilation[i] * (kernel[i] - 1) - padding[i] + output_padding[i]) for i in range(s)]
    if any(a < 0 or b < 0 for a, b in pads):
        raise NotImplementedError("transposed convolution with padding larger than dilation * (kernel - 1)")
    xd = L.pad(xd, [(0, 0), (0, 0)] + pads, 0.0)
    cin, og = const_value(w.shape[0]), const_value(w.shape[1])
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
    flat = L.reshape(win, list(win.shape[:2 + s]) + [prod_of(kernel)])
    values = L.amax(flat, [-1])
    # Indices: the flat position in the input's spatial dims of each window's first maximum.
    arg = L.argmax(flat, -1)  # position inside the window, [N, C, *out]
    spatial = [x.shape[2 + i] for i in range(s)]
    index = None
    rem = arg
    for i in range(s):
        inner = prod_of(kernel[i + 1:])
        ki = L.floor_divide(rem, scalar(cx, inner, "i32")) if inner != 1 else rem
        rem = L.remainder(rem, scalar(cx, inner, "i32")) if inner != 1 else rem
        shape = [1] * (2 + s)
        shape[2 + i] = out[i]
        start = L.reshape(L.sub(L.mul(cx.graph.arange(0, out[i], 1, "i32"), scalar(cx, stride[i], "i32")),
                                scalar(cx, padding[i], "i32")), shape)
        pos = L.add(start, L.mul(ki, scalar(cx, dilation[i], "i32")))
        index = pos if index is None else L.add(L.mul(index, size_tensor(cx, spatial[i])), pos)
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
        return L.div(total, float(prod_of(kernel)))
    ones = cx.graph.full([1, 1] + [x.shape[2 + i] for i in range(s)], 1.0, x.dtype)
    counts = L.sum(_windows(ones, kernel, stride, padding, [1] * s), list(range(2 + s, 2 + 2 * s)))
    return L.div(total, counts)
