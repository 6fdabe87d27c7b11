"""Elementwise aten ops: arithmetic with torch's type promotion, comparisons, logic, bitwise ops, unary functions, where, clamp."""
from .common import *  # noqa: F401,F403  the registry, dtypes and helpers every lowering uses


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


def _shift_amounts(cx, b):
    """2^b for the shifts PyTorch defines (0 <= b < 31 here: integers are held as i32), and where
    b is out of that range."""
    within = L.logical_and(L.ge(b, scalar(cx, 0, "i32")), L.lt(b, scalar(cx, 31, "i32")))
    b = L.minimum(L.maximum(b, scalar(cx, 0, "i32")), scalar(cx, 30, "i32"))
    return L.cast(L.exp2(L.cast(b, "f32")), "i32"), within  # exact: a power of two below 2^31


def _shift_left(cx, a, b):
    """a << b as a * 2^b (wrapping as i32); 0 for a shift of 31 bits or more, or a negative one,
    except that 31 bits keep the lowest bit as the sign bit."""
    a, b = promote(cx, a, b)
    p, within = _shift_amounts(cx, b)
    top = L.where(L.ne(L.remainder(a, scalar(cx, 2, "i32")), scalar(cx, 0, "i32")), scalar(cx, -(2**31), "i32"), scalar(cx, 0, "i32"))
    outside = L.where(L.eq(b, scalar(cx, 31, "i32")), top, scalar(cx, 0, "i32"))
    return L.where(within, L.mul(a, p), outside)


def _shift_right(cx, a, b):
    """a >> b (arithmetic) as floor(a / 2^b); the sign fill (0 or -1) for 31 bits or more, or a
    negative shift, as PyTorch gives."""
    a, b = promote(cx, a, b)
    p, within = _shift_amounts(cx, b)
    fill = L.where(L.lt(a, scalar(cx, 0, "i32")), scalar(cx, -1, "i32"), scalar(cx, 0, "i32"))
    return L.where(within, L.floor_divide(a, p), fill)


lower(aten.__lshift__.Tensor, aten.__lshift__.Scalar, aten.bitwise_left_shift.Tensor,
      aten.bitwise_left_shift.Tensor_Scalar, aten.bitwise_left_shift.Scalar_Tensor)(_shift_left)
lower(aten.__rshift__.Tensor, aten.__rshift__.Scalar, aten.bitwise_right_shift.Tensor,
      aten.bitwise_right_shift.Tensor_Scalar, aten.bitwise_right_shift.Scalar_Tensor)(_shift_right)


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
    if out == "i32":
        return _int_pow(cx, a, scalar(cx, e, "i32"))
    return to_dtype(L.pow(a, float(e)), out)


@lower(aten.pow.Tensor_Tensor)
def _pow_tt(cx, a, b):
    a, b = promote(cx, a, b)
    return _int_pow(cx, a, b) if a.dtype == "i32" else L.pow(a, b)


@lower(aten.pow.Scalar)
def _pow_st(cx, a, b):
    out = cx.out_dtype()
    a, b = as_tensor(cx, a, out), to_dtype(b, out)
    return _int_pow(cx, a, b) if out == "i32" else L.pow(a, b)


def _int_pow(cx, a, e):
    """Integer powers, exact as PyTorch's (a float pow truncated gave 3**5 = 242): square and
    multiply over the exponent's bits. Past 63 every base but 0 and ±1 overflows, and theirs
    depend only on the parity, so such exponents become 62 or 63. A negative exponent gives 0,
    except for the bases 1 and -1, as PyTorch's integer kernel does."""
    i = lambda v: scalar(cx, v, "i32")  # noqa: E731
    k = L.abs(e)
    k = L.where(L.gt(k, i(63)), L.add(L.remainder(k, i(2)), i(62)), k)
    result, power = L.full_like(a, 1), a
    for bit in range(6):
        on = L.eq(L.remainder(L.floor_divide(k, i(2**bit)), i(2)), i(1))
        result = L.where(on, L.mul(result, power), result)
        if bit < 5:
            power = L.mul(power, power)
    unit = L.eq(L.abs(a), i(1))
    return L.where(L.logical_and(L.lt(e, i(0)), L.logical_not(unit)), i(0), result)


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


@lower(aten.elu.default)
def _elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    neg = L.mul(L.expm1(L.mul(x, float(input_scale))), float(alpha * scale))
    return L.where(L.gt(x, 0.0), L.mul(x, float(scale)), neg)
