"""Vectorisable exponentials, logarithms and tanh for fused kernels.

Compiled kernels call libm's scalar ``exp``/``log``/... once per element, and such a call
keeps LLVM from vectorising the loop around it (numba's llvmlite has no vector math
library: SVML is gone since llvmlite 0.45, and LLVM 22 no longer reads the
``-vector-library`` option through which glibc's libmvec used to be selected).  These
functions compute the same values with arithmetic, integer operations and bit casts only,
so LLVM inlines them and vectorises the loop to the machine's full width.

Each function is written so that every lane of a vectorised loop may evaluate every
branch (LLVM turns the ``if``s into selects):

* a NaN never reaches an ordered comparison or a float-to-integer conversion (both signal
  "invalid" on x86, which numpy would report as a warning): NaN lanes are replaced by a
  harmless value first and the NaN is returned at the end;
* arguments are clamped so that no intermediate overflows or underflows, except in the
  final scaling, which overflows (to inf) or underflows (to 0 or a subnormal) exactly when
  the result does, raising the same floating-point flag numpy's loop raises;
* invalid arguments (``log`` of a negative number, of 0) produce their NaN or -inf by an
  operation on the argument itself (``sqrt``, ``-1/|x|``), which raises numpy's "invalid"
  or "divide by zero" flag only in the lanes that deserve it.

Accuracy: the float64 functions use range reduction by ln 2 with a two-part constant and
Taylor polynomials long enough that truncation is far below an ulp; their results are
within about 1-2 ulp of the exact value.  The float32 functions compute in float64 with
shorter polynomials and round once, so they are within about 0.5 ulp.  Known difference
from numpy: float32 results in the subnormal range may raise "underflow" where numpy's
SIMD loop does not (or the reverse); underflow is ignored by default (``np.errstate``).

Like ``kernel_lib``, these are plain Python (they run unchanged on numpy scalars) and the
backend compiles them with numba.  They refer only to ``np``, ``math`` and each other
(the backend rebinds them in a namespace holding exactly those), so constants are
written inline.  ``NUMFUSE_VECTOR_MATH=0`` makes the op table use numpy's scalar
functions (libm) instead.
"""

from __future__ import annotations

import math
import os

import numpy as np


def enabled_from_environment() -> bool:
    """``NUMFUSE_VECTOR_MATH``: ``0``/``false``/``off``/``no`` disable, anything else enables."""
    value = os.environ.get("NUMFUSE_VECTOR_MATH", "1").strip().lower()
    return value not in ("0", "false", "off", "no")


# Read once, at import: kernels compiled in one process all use the same functions.
ENABLED = enabled_from_environment()

# The operations that have a vectorisable implementation here, by numpy ufunc name; the op
# table's float template for each is ``<name>_f{bits}({0})``.
FUNCTIONS = ("exp", "log", "expm1", "log1p", "tanh")


# ------------------------------------------------------------------ building blocks


def hidden(x):  # type: ignore[no-untyped-def]
    """``x``, through a zero LLVM cannot see (compiled as ``Emitter.opaque``): nothing
    LLVM knows of ``x`` holds for the result, so it can neither fold an operation on it
    nor simplify a test of it with what it knows of ``x``."""
    return x


def _pow2_f64(k):  # type: ignore[no-untyped-def]
    """``2.0 ** k`` for an integer ``-1022 <= k <= 1023``, built from its bits."""
    return np.int64((k + 1023) << 52).view(np.float64)


# Conversions between float64 and int64 lanes have no AVX2 instruction (LLVM would convert
# lane by lane); these two go through the bits of 1.5 * 2**52 instead, whose last bits are
# an integer's two's complement after an addition, with integer adds and bit casts only.


def _round_to_int(y):  # type: ignore[no-untyped-def]
    """``y`` (|y| < 2**50) rounded to the nearest integer, ties to even like ``np.rint``:
    as a float64 and as an int64."""
    shifted = np.float64(y + 6755399441055744.0)
    return shifted - 6755399441055744.0, shifted.view(np.int64) - 4843621399236968448


def _int_to_f64(n):  # type: ignore[no-untyped-def]
    """The int64 ``n`` (|n| < 2**50) as a float64, exactly."""
    return np.int64(n + 4843621399236968448).view(np.float64) - 6755399441055744.0


def _exp_f64_reduced(x):  # type: ignore[no-untyped-def]
    """``exp(x)`` for a finite ``|x| <= 1000``; the last multiplication overflows or
    underflows (raising the flag) exactly when the result does."""
    k, scale = _round_to_int(x * 1.4426950408889634)
    # ln 2 in two parts; the high part has 21 trailing zero bits, so k * high is exact.
    r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    # |r| <= ln(2) / 2: the Taylor series to r**13 leaves a relative error below 5e-18.
    q = 2.755731922398589e-07 + r * (2.505210838544172e-08 + r * (
        2.08767569878681e-09 + r * 1.6059043836821613e-10))
    q = 0.001388888888888889 + r * (0.0001984126984126984 + r * (
        2.48015873015873e-05 + r * (2.7557319223985893e-06 + r * q)))
    q = 1.0 + r * (0.5 + r * (0.16666666666666666 + r * (
        0.041666666666666664 + r * (0.008333333333333333 + r * q))))
    p = 1.0 + r * q
    half = scale >> 1  # two factors keep each power of two a normal number
    return (p * _pow2_f64(half)) * _pow2_f64(scale - half)


def _expm1_f64_reduced(x, short):  # type: ignore[no-untyped-def]
    """``exp(x) - 1`` for a finite ``-50 <= x <= 1000`` that is 0 or at least 1e-30 in
    magnitude; ``short`` selects a polynomial good to 2e-11 (for float32 results)."""
    k, scale = _round_to_int(x * 1.4426950408889634)
    r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    if short:
        q = 0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
            0.008333333333333333 + r * (0.001388888888888889 + r * (
                0.0001984126984126984 + r * (2.48015873015873e-05 + r * (
                    2.7557319223985893e-06)))))))
    else:
        q = 2.755731922398589e-07 + r * (2.505210838544172e-08 + r * (
            2.08767569878681e-09 + r * 1.6059043836821613e-10))
        q = 0.001388888888888889 + r * (0.0001984126984126984 + r * (
            2.48015873015873e-05 + r * (2.7557319223985893e-06 + r * q)))
        q = 0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
            0.008333333333333333 + r * q)))
    p = r + (r * r) * q  # expm1(r), accurate relative to r
    # 2**k * (1 + p) - 1: exact 2**k - 1 while k is small, the -1 vanishes once it is large.
    power = _pow2_f64(min(scale, np.int64(56)))
    moderate = power * p + (power - 1.0)
    half = scale >> 1
    large = ((1.0 + p) * _pow2_f64(half)) * _pow2_f64(scale - half)
    if scale == 0:
        return p
    if scale > 56:
        return large
    return moderate


def _log_f64_reduced(x, short):  # type: ignore[no-untyped-def]
    """``log(x)`` for a positive finite (possibly subnormal) ``x``; ``short`` selects a
    polynomial good to 1e-10 (for float32 results)."""
    tiny = x < 2.2250738585072014e-308
    # 2**52 makes a subnormal normal; every lane multiplies, by 1 unless tiny, so no
    # lane computes a product that overflows.
    normal = x * (4503599627370496.0 if tiny else 1.0)
    bits = np.float64(normal).view(np.int64)
    exponent = (bits >> 52) - 1023
    if tiny:
        exponent = exponent - 52
    mantissa = np.int64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)
    if mantissa > 1.4142135623730951:  # reduce to [sqrt(1/2), sqrt(2))
        mantissa = mantissa * 0.5
        exponent = exponent + 1
    e = _int_to_f64(exponent)
    f = mantissa - 1.0  # exact
    # log(1 + f) = 2 atanh(s) = 2s + s R(s*s) with s = f / (2 + f), and 2s = f - s f.
    s = f / (2.0 + f)
    z = s * s  # <= 0.0295
    if short:
        R = z * (0.6666666666666666 + z * (0.4 + z * (0.2857142857142857 + z * (
            0.2222222222222222 + z * 0.18181818181818182))))
    else:
        R = 0.15384615384615385 + z * (0.13333333333333333 + z * (
            0.11764705882352941 + z * (0.10526315789473684 + z * 0.09523809523809523)))
        R = z * (0.6666666666666666 + z * (0.4 + z * (0.2857142857142857 + z * (
            0.2222222222222222 + z * (0.18181818181818182 + z * R)))))
    return e * 0.6931471803691238 + (f - (s * (f - R) - e * 1.9082149292705877e-10))


def _log_of_nonpositive(x):  # type: ignore[no-untyped-def]
    """numpy's answer for ``log`` of ``x <= 0`` (or -0.0), with its flag: -inf and "divide
    by zero" for zeros, NaN and "invalid" for negative numbers."""
    # Every lane may compute both answers: the divisor is 1 but where x is zero, and
    # hidden (LLVM would fold a division it knows to be by zero, and its flag, away).  The
    # answer is chosen by a test of a hidden copy of x: under a test of x itself LLVM would
    # know x == 0 and simplify the divisor to a hidden constant, divided once for all lanes.
    quotient = -1.0 / hidden(0.0 if x == 0 else 1.0)
    if hidden(x) == 0:
        return quotient
    return np.sqrt(x)


# ------------------------------------------------------------------ float64


def exp_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    infinite = abs(clean) == math.inf
    negligible = abs(clean) < 1e-30  # exp rounds to 1; keeps r * r from underflowing
    argument = 0.0 if (infinite or negligible) else min(max(clean, -1000.0), 1000.0)
    result = _exp_f64_reduced(argument)
    if x != x:
        return x
    if infinite:
        return math.inf if clean > 0 else 0.0
    return result


def expm1_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    infinite = abs(clean) == math.inf
    negligible = abs(clean) < 1e-30  # expm1(x) rounds to x
    argument = 0.0 if (infinite or negligible) else min(max(clean, -50.0), 1000.0)
    result = _expm1_f64_reduced(argument, False)
    if x != x or negligible:
        return x
    if infinite:
        return math.inf if clean > 0 else -1.0
    return result


def log_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 1.0
    # Clamped into the positive finite numbers; lanes clamped here are answered below.
    result = _log_f64_reduced(min(max(clean, 5e-324), 1.7976931348623157e308), False)
    if x != x or clean == math.inf:
        return x
    if clean <= 0:
        return _log_of_nonpositive(clean)
    return result


def log1p_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    u = 1.0 + clean
    # A valid u is at least 2**-53; lanes with u <= 0 (answered below) get harmless values.
    argument = min(max(u, 1e-20), 1.7976931348623157e308)
    shifted = clean if u > 0.0 else 0.0
    # log(u) plus the first-order correction for the rounding of 1 + x.
    result = _log_f64_reduced(argument, False) + (shifted - (argument - 1.0)) / argument
    if x != x or u == 1.0 or u == math.inf:
        return x  # NaN, +inf, and |x| so small that log1p(x) rounds to x (keeps -0.0)
    if u <= 0:
        return _log_of_nonpositive(u)
    return result


def tanh_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1e-30
    # tanh(22) rounds to 1; expm1(2 * 22) is far from overflow.
    argument = 0.0 if negligible else min(magnitude, 22.0)
    t = _expm1_f64_reduced(argument + argument, False)
    result = math.copysign(t / (t + 2.0), clean)
    if x != x or negligible:
        return x
    return result


# ------------------------------------------------------------------ float32
# Computed in float64 and rounded once: the conversion back raises overflow/underflow.


def exp_f32(x):  # type: ignore[no-untyped-def]
    wide = np.float64(x)
    clean = wide if wide == wide else 0.0
    infinite = abs(clean) == math.inf
    argument = 0.0 if infinite else min(max(clean, -200.0), 200.0)
    k, scale = _round_to_int(argument * 1.4426950408889634)
    r = (argument - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = 1.0 + r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (
        0.041666666666666664 + r * (0.008333333333333333 + r * (
            0.001388888888888889 + r * (0.0001984126984126984 + r * (
                2.48015873015873e-05 + r * 2.7557319223985893e-06))))))))
    result = np.float32(p * _pow2_f64(scale))
    if wide != wide:
        return x
    if infinite:
        return np.float32(math.inf) if clean > 0 else np.float32(0.0)
    return result


def expm1_f32(x):  # type: ignore[no-untyped-def]
    wide = np.float64(x)
    clean = wide if wide == wide else 0.0
    infinite = abs(clean) == math.inf
    negligible = abs(clean) < 1e-30
    argument = 0.0 if (infinite or negligible) else min(max(clean, -50.0), 200.0)
    result = np.float32(_expm1_f64_reduced(argument, True))
    if wide != wide or negligible:
        return x
    if infinite:
        return np.float32(math.inf) if clean > 0 else np.float32(-1.0)
    return result


def log_f32(x):  # type: ignore[no-untyped-def]
    wide = np.float64(x)
    clean = wide if wide == wide else 1.0
    result = np.float32(_log_f64_reduced(min(max(clean, 1e-300), 1e300), True))
    if wide != wide or clean == math.inf:
        return x
    if clean <= 0:
        return np.float32(_log_of_nonpositive(clean))
    return result


def log1p_f32(x):  # type: ignore[no-untyped-def]
    wide = np.float64(x)
    clean = wide if wide == wide else 0.0
    u = 1.0 + clean
    argument = min(max(u, 1e-20), 1e300)
    shifted = clean if u > 0.0 else 0.0
    result = np.float32(_log_f64_reduced(argument, True)
                        + (shifted - (argument - 1.0)) / argument)
    if wide != wide or u == 1.0 or u == math.inf:
        return x
    if u <= 0:
        return np.float32(_log_of_nonpositive(u))
    return result


def tanh_f32(x):  # type: ignore[no-untyped-def]
    wide = np.float64(x)
    clean = wide if wide == wide else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1e-30
    argument = 0.0 if negligible else min(magnitude, 22.0)
    t = _expm1_f64_reduced(argument + argument, True)
    result = np.float32(math.copysign(t / (t + 2.0), clean))
    if wide != wide or negligible:
        return x
    return result


# ------------------------------------------------------------------ logaddexp
# numpy's logaddexp without branches: max(x, y) + log1p(exp(-|x - y|)), equal arguments
# answered as numpy does (x + log 2, before x - y is formed, so inf - inf raises nothing).
# The ordered comparison of the difference raises "invalid" for NaN, as numpy's does; the
# "+ 0.0" keeps the two values it chooses between distinct for LLVM even for
# logaddexp(s, s), which would otherwise drop the comparison (the sum it feeds is the same:
# the log1p term is never -0.0).


def logaddexp_f64(x, y):  # type: ignore[no-untyped-def]
    same = x == y
    a = 0.0 if same else x
    b = (0.0 if same else y) + 0.0
    tmp = a - b
    larger = a if tmp > 0 else b
    result = larger + log1p_f64(exp_f64(-abs(tmp)))
    if same:
        return x + 0.6931471805599453
    if tmp != tmp:
        return tmp
    return result


def logaddexp_f32(x, y):  # type: ignore[no-untyped-def]
    same = x == y
    a = np.float32(0.0) if same else x
    b = (np.float32(0.0) if same else y) + np.float32(0.0)
    tmp = a - b
    larger = a if tmp > 0 else b
    result = larger + log1p_f32(exp_f32(-abs(tmp)))
    if same:
        return x + np.float32(0.6931471805599453)
    if tmp != tmp:
        return tmp
    return result


HELPERS = tuple(
    name for name, value in list(globals().items())
    if callable(value) and not name.startswith("__") and value.__module__ == __name__
    and name != "enabled_from_environment"
)
