"""Scalar functions with numpy's exact semantics, used by the generated kernels.

They are plain Python: a generated kernel module imports the ones it uses by name, and the
backend replaces them with compiled versions before compiling the kernel, so a generated
file also runs (slowly) without numba.  Each function mirrors numpy's C loop for the same
operation, including its answers for division by zero, NaN and out-of-range shifts, so a
fused kernel returns what the numpy ufunc would.
"""

from __future__ import annotations

import math

import numpy as np

# ------------------------------------------------------------------ integer division


def floor_divide_int(a, b):  # type: ignore[no-untyped-def]
    """``a // b`` rounding toward -inf; numpy returns 0 for a zero divisor and wraps
    ``MIN // -1`` to ``MIN``."""
    if b == 0:
        return a - a
    if b == -1:
        return -a
    return a // b


def remainder_int(a, b):  # type: ignore[no-untyped-def]
    """Python-style modulo (sign of the divisor); 0 for a zero divisor."""
    if b == 0 or b == -1:
        return a - a
    return a % b


def fmod_int(a, b):  # type: ignore[no-untyped-def]
    """C-style remainder (sign of the dividend); 0 for a zero divisor."""
    if b == 0 or b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r = r - b
    return r


def power_int(a, b):  # type: ignore[no-untyped-def]
    """Integer power by squaring, wrapping on overflow like numpy.

    numpy raises for negative exponents; a kernel cannot, so it returns 0 there.
    """
    if b < 0:
        return a - a
    result = a - a + 1
    base = a
    exponent = b
    while exponent > 0:
        if exponent & 1:
            result = result * base
        base = base * base
        exponent = exponent >> 1
    return result


def reciprocal_int(a, min_value):  # type: ignore[no-untyped-def]
    """``1 / a`` with C truncation; numpy yields ``min_value`` for 0."""
    if a == 0:
        return a - a + min_value
    if a == 1 or a == -1:
        return a
    return a - a


def gcd_int(a, b):  # type: ignore[no-untyped-def]
    a = abs(a)
    b = abs(b)
    while b != 0:
        a, b = b, a % b
    return a


def lcm_int(a, b):  # type: ignore[no-untyped-def]
    g = gcd_int(a, b)
    if g == 0:
        return g
    return abs(a // g * b)


def left_shift(a, b, bits):  # type: ignore[no-untyped-def]
    """numpy's ``a << b``: 0 once the shift reaches the bit width (or is negative)."""
    if b < 0 or b >= bits:
        return a - a
    return a << b


def right_shift(a, b, bits):  # type: ignore[no-untyped-def]
    """numpy's ``a >> b``: the sign fill once the shift reaches the bit width."""
    if b < 0 or b >= bits:
        if a < 0:
            return a - a - 1
        return a - a
    return a >> b


# ------------------------------------------------------------------ float division


def divmod_float(a, b):  # type: ignore[no-untyped-def]
    """numpy's ``npy_divmod``: floor quotient and Python-style remainder of floats."""
    mod = np.fmod(a, b)
    if b == 0:
        return a / b, mod
    div = (a - mod) / b
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod = mod + b
            div = div - 1
    else:
        mod = math.copysign(0.0, b)
    if div != 0:
        floordiv = np.floor(div)
        if div - floordiv > 0.5:
            floordiv = floordiv + 1
    else:
        floordiv = math.copysign(0.0, a / b)
    return floordiv, mod


def floor_divide_float(a, b):  # type: ignore[no-untyped-def]
    if b == 0:
        return a / b
    return divmod_float(a, b)[0]


def remainder_float(a, b):  # type: ignore[no-untyped-def]
    if b == 0:
        return np.fmod(a, b)
    return divmod_float(a, b)[1]


# ------------------------------------------------------------------ float helpers


def maximum_float(a, b):  # type: ignore[no-untyped-def]
    """NaN-propagating maximum; on a tie numpy returns the second operand."""
    if a > b or a != a:
        return a
    return b


def minimum_float(a, b):  # type: ignore[no-untyped-def]
    if a < b or a != a:
        return a
    return b


def fmax_float(a, b):  # type: ignore[no-untyped-def]
    """NaN-ignoring maximum (numpy's ``fmax``)."""
    if a > b or b != b:
        return a
    return b


def fmin_float(a, b):  # type: ignore[no-untyped-def]
    if a < b or b != b:
        return a
    return b


def clip_float(x, lo, hi):  # type: ignore[no-untyped-def]
    """``minimum(maximum(x, lo), hi)`` with NaN propagation, as numpy's ``clip``."""
    return minimum_float(maximum_float(x, lo), hi)


def sign_float(a):  # type: ignore[no-untyped-def]
    if a > 0:
        return a - a + 1
    if a < 0:
        return a - a - 1
    if a == 0:
        return a - a
    return a


def heaviside_float(x, h0):  # type: ignore[no-untyped-def]
    if x != x:
        return x
    if x == 0:
        return h0
    if x < 0:
        return x - x
    return x - x + 1


def logaddexp_float(x, y):  # type: ignore[no-untyped-def]
    if x == y:
        return x + math.log(2.0)
    tmp = x - y
    if tmp > 0:
        return x + np.log1p(np.exp(-tmp))
    if tmp <= 0:
        return y + np.log1p(np.exp(tmp))
    return tmp


def logaddexp2_float(x, y):  # type: ignore[no-untyped-def]
    if x == y:
        return x + 1
    tmp = x - y
    if tmp > 0:
        return x + np.log1p(np.exp2(-tmp)) * (1 / math.log(2.0))
    if tmp <= 0:
        return y + np.log1p(np.exp2(tmp)) * (1 / math.log(2.0))
    return tmp


# ------------------------------------------------------------------ complex helpers


def _complex_nan(z):  # type: ignore[no-untyped-def]
    return z.real != z.real or z.imag != z.imag


def complex_ge(a, b):  # type: ignore[no-untyped-def]
    """numpy's lexicographic ``>=`` on complex numbers (False if any part is NaN)."""
    return (a.real > b.real and a.imag == a.imag and b.imag == b.imag) or (
        a.real == b.real and a.imag >= b.imag
    )


def complex_gt(a, b):  # type: ignore[no-untyped-def]
    return (a.real > b.real and a.imag == a.imag and b.imag == b.imag) or (
        a.real == b.real and a.imag > b.imag
    )


def complex_le(a, b):  # type: ignore[no-untyped-def]
    return complex_ge(b, a)


def complex_lt(a, b):  # type: ignore[no-untyped-def]
    return complex_gt(b, a)


def maximum_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(a) or complex_ge(a, b):
        return a
    return b


def minimum_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(a) or complex_le(a, b):
        return a
    return b


def fmax_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(b) or complex_ge(a, b):
        return a
    return b


def fmin_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(b) or complex_le(a, b):
        return a
    return b


def sign_complex(z):  # type: ignore[no-untyped-def]
    """numpy 2's complex sign: ``z / |z|``, 0 for 0, NaN for NaN."""
    if _complex_nan(z):
        return z - z + complex(math.nan, math.nan)
    magnitude = abs(z)
    if magnitude == 0:
        return z - z
    if math.isinf(magnitude):
        if math.isinf(z.real) and math.isinf(z.imag):
            return z - z + complex(math.nan, math.nan)
        if math.isinf(z.real):
            return z - z + complex(math.copysign(1.0, z.real), 0.0)
        return z - z + complex(0.0, math.copysign(1.0, z.imag))
    return z / magnitude


# ------------------------------------------------------------------ mixed-sign compare


def less_iu(a, b):  # type: ignore[no-untyped-def]
    """``a < b`` for a signed ``a`` and an unsigned ``b``, exact over the full ranges."""
    return a < 0 or np.uint64(a) < b


def less_ui(a, b):  # type: ignore[no-untyped-def]
    return b >= 0 and a < np.uint64(b)


def equal_iu(a, b):  # type: ignore[no-untyped-def]
    return a >= 0 and np.uint64(a) == b


def float_to_uint64(x):  # type: ignore[no-untyped-def]
    """Cast like the C compiler numpy is built with: negatives wrap through int64."""
    if x < 0:
        return np.uint64(np.int64(x))
    return np.uint64(x)


HELPERS = tuple(
    name for name, value in list(globals().items())
    if callable(value) and not name.startswith("__") and value.__module__ == __name__
)
