"""Vectorisable exponentials, logarithms, trigonometric and hyperbolic functions, cbrt,
hypot and power for fused kernels.

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

Accuracy: the float64 functions use range reduction by ln 2 (by pi/2 for sin and cos)
with constants split in parts and polynomials long enough that truncation is far below an
ulp.  The float32 exp, expm1, log, log1p, tanh, sin and cos compute in float32 (see their
sections; float32 sin and cos take the float64 C library's value, rounded once, beyond 1e5
and very near multiples of pi/2).  Largest errors measured over wide random ranges (float32
sin and cos: over every float32 up to 1e5), in ulp against the exact value (float32 /
float64): exp 0.94 / 1, expm1 1.31 / 2, log 0.77 / 1, log1p 1.39 / 1, tanh 1.47 / 2, sin
0.78 / 1, cos 0.78 / 1 (numpy's own float32 exp and log are up to 2.1 and 2.2 ulp off,
its float32 sin and cos 1.5).  Known difference from numpy:
results in the subnormal range (float32; float64 too where numpy's AVX-512 loops run) may
raise "underflow" where numpy's SIMD loop does not (or the reverse), and numpy's float32
sin and cos of tiny arguments raise it where these do not; underflow is ignored by
default (``np.errstate``).

float32 arctan, arctan2, arcsin and arccos compute in float32 (see their sections);
float32 tan computes sin / cos in float64 and rounds once (in float32, with the reduction
of sin and cos and a quotient exact enough for 0.61 ulp, it was slower: its error-free
products cost more than the lanes gained).  Largest errors against the exact value
(float32 / float64): tan 0.5 / 1.11, arctan 0.73 / 0.82, arcsin 0.84 / 0.83, arccos 0.87
/ 0.88, arctan2 0.79 / 1.0 (numpy's own float32 arctan2 is up to 1.38 ulp off, numpy
2.4's float32 tan 3.6).  Like the C library's, tan, arctan and arcsin raise "underflow"
for subnormal arguments, arctan2 for subnormal angles (numpy's AVX-512 loops do not).
Known difference: numpy's float32 arctan2 (``atan2f``) is an ulp off the correctly
rounded angle where x < 0 and |y/x| >= 2**23; these return the correctly rounded one.

cbrt and hypot (float32 computed in float64 and rounded once), largest errors (float32 /
float64): cbrt 0.5 / 0.67 and hypot 0.5 / 0.5 ulp in the normal range, 1 ulp for float64
subnormal results (rounded twice); numpy's float64 cbrt, the C library's, is up to 3.1 ulp
off.

exp2, log2, log10, sinh, cosh, arcsinh, arccosh and arctanh build on the same reductions
(float32 exp2, sinh and cosh compute in float32, eight lanes; float32 log2, log10 and the
inverse hyperbolic functions in float64, four lanes, rounding once):
exp2 of an integer is exact, log2 of a power of two is its exponent exactly, log10 of a
power of ten is correctly rounded, sinh and cosh stay finite up to their own overflow threshold
(710.47, past exp's), arcsinh and arccosh of huge arguments take log(|x|) + ln 2.
Largest errors measured as above (float32 / float64): exp2 0.76 / 1, log2 0.5 / 1, log10
0.5 / 1, sinh 1.08 / 1, cosh 1.14 / 1, arcsinh 0.5 / 2, arccosh 0.5 / 1, arctanh 0.5 / 1
(numpy's own sinh, cosh and log10 are up to 2 ulp off, its float64 arccosh 2).  Like
numpy's (but for its AVX-512 loops), sinh, arcsinh and arctanh of subnormal arguments
raise "underflow".

``power`` (float exponents): exp(y log x) with log x and the product in two parts, within
an ulp (see its section).

Like ``kernel_lib``, these are plain Python (they run unchanged on numpy scalars, less
accurately where a fused multiply-add recovers a product's error: run as Python it rounds
twice) and the backend compiles them with numba.  They refer only to ``np``, ``math`` and each other
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
FUNCTIONS: tuple[str, ...] = ("exp", "log", "expm1", "log1p", "tanh", "sin", "cos")


# ------------------------------------------------------------------ building blocks


def hidden(x):  # type: ignore[no-untyped-def]
    """``x``, through a zero LLVM cannot see (compiled as ``Emitter.opaque``): nothing
    LLVM knows of ``x`` holds for the result, so it can neither fold an operation on it
    nor simplify a test of it with what it knows of ``x``."""
    return x


def fused_multiply_add(a, b, c):  # type: ignore[no-untyped-def]
    """``a * b + c`` rounded once (compiled to LLVM's ``fma``; rounded twice here)."""
    return a * b + c


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


def _log_reduction_f64(x):  # type: ignore[no-untyped-def]
    """``x = 2**exponent * mantissa`` for a positive finite (possibly subnormal) ``x``: the
    exponent (an int64) and the mantissa, in [sqrt(1/2), sqrt(2))."""
    tiny = x < 2.2250738585072014e-308
    # 2**52 makes a subnormal normal; every lane multiplies, by 1 unless tiny, so no
    # lane computes a product that overflows.
    normal = x * (4503599627370496.0 if tiny else 1.0)
    bits = np.float64(normal).view(np.int64)
    exponent = (bits >> 52) - 1023
    if tiny:
        exponent = exponent - 52
    mantissa = np.int64((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).view(np.float64)
    if mantissa > 1.4142135623730951:
        mantissa = mantissa * 0.5
        exponent = exponent + 1
    return exponent, mantissa


def _log_f64_reduced(x, short, zero):  # type: ignore[no-untyped-def]
    """``log(x)`` for a positive finite (possibly subnormal) ``x``; ``short`` selects a
    polynomial good to 1e-10 (for float32 results); and the quotient ``s`` it divides
    for, which is -inf, with "divide by zero" raised, in the lanes of ``zero`` (the
    answer of those whose argument was zero, see ``_log_answer``)."""
    exponent, mantissa = _log_reduction_f64(x)
    e = _int_to_f64(exponent)
    f = mantissa - 1.0  # exact
    # log(1 + f) = 2 atanh(s) = 2s + s R(s*s) with s = f / (2 + f), and 2s = f - s f.
    # Lanes of ``zero`` divide -1 by 0 instead, both hidden (LLVM, seeing the quotient's
    # value unused there, would divide as the other lanes do): one division serves both.
    s = hidden(-1.0 if zero else f) / hidden(0.0 if zero else 2.0 + f)
    z = s * s  # <= 0.0295 (+inf in the lanes of ``zero``, where every term stays +inf)
    if short:
        R = z * (0.6666666666666666 + z * (0.4 + z * (0.2857142857142857 + z * (
            0.2222222222222222 + z * 0.18181818181818182))))
    else:
        R = _log_series_f64(z)
    return e * 0.6931471803691238 + (f - (s * (f - R) - e * 1.9082149292705877e-10)), s


def _log_answer(x, result, quotient):  # type: ignore[no-untyped-def]
    """numpy's ``log`` of ``x`` (not NaN, not +inf) from ``_log_f64_reduced``'s (or
    ``_log_f32_reduced``'s) result and quotient, the lanes of ``zero`` having been those
    whose ``x`` is zero: -inf and "divide by zero" (the quotient's) for zeros, NaN and
    "invalid" for negative numbers.  Computed in every lane, these answers cost one
    addition more than the logarithm; ``_log_of_nonpositive``'s division and square root
    cost as much as the logarithm itself.  The test is of a hidden copy of x: where LLVM
    knows x > 0 (after ``abs``), a test of x would make the branch unreachable, and LLVM,
    free to assume anything there, once hoisted a division by zero out of such code for
    every call."""
    if hidden(x) <= 0:
        if hidden(x) == 0:
            return quotient
        # +inf - +inf: NaN and "invalid" for negative lanes, 0 - 0 for the others
        infinite = hidden(math.inf if x < 0 else 0.0)
        return infinite - infinite
    return result


def _log_answer_f32(x, result, quotient):  # type: ignore[no-untyped-def]
    """``_log_answer`` in float32."""
    if hidden(x) <= np.float32(0.0):
        if hidden(x) == np.float32(0.0):
            return quotient
        infinite = hidden(np.float32(math.inf) if x < np.float32(0.0) else np.float32(0.0))
        return infinite - infinite
    return result


def _log_of_nonpositive(x):  # type: ignore[no-untyped-def]
    """numpy's answer for ``log`` of ``x <= 0`` (or -0.0), with its flag: -inf and "divide
    by zero" for zeros, NaN and "invalid" for negative numbers."""
    # Every lane may compute both answers: the divisor is 1 but where x is zero, and
    # hidden (LLVM would fold a division it knows to be by zero, and its flag, away).  The
    # answer is chosen by a test of a hidden copy of x: under a test of x itself LLVM would
    # know x == 0 and simplify the divisor to a hidden constant, divided once for all lanes.
    # Callers test a hidden copy too (``hidden(x) <= 0``): where LLVM knows x > 0 (after
    # ``abs``), a test of x would make this code unreachable, and LLVM, free to assume
    # anything there, hoisted a division by zero out of it for every call.
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
    result, quotient = _log_f64_reduced(min(max(clean, 5e-324), 1.7976931348623157e308),
                                        False, hidden(clean) == 0)
    if x != x or clean == math.inf:
        return x
    return _log_answer(clean, result, quotient)


def log1p_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    u = 1.0 + clean
    # A valid u is at least 2**-53; lanes with u <= 0 (answered below) get harmless values.
    argument = min(max(u, 1e-20), 1.7976931348623157e308)
    shifted = clean if u > 0.0 else 0.0
    # log(u) plus the first-order correction for the rounding of 1 + x.
    logarithm, quotient = _log_f64_reduced(argument, False, hidden(u) == 0)
    result = logarithm + (shifted - (argument - 1.0)) / argument
    if x != x or u == 1.0 or u == math.inf:
        return x  # NaN, +inf, and |x| so small that log1p(x) rounds to x (keeps -0.0)
    return _log_answer(u, result, quotient)


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
# In float32 throughout (eight lanes of a 256-bit vector, not four): the same reductions
# with float32 constants and int32 bit tricks, and polynomials fitted to float32 accuracy
# (near-minimax on the reduced interval, coefficients rounded to float32).  Every float
# constant is written ``np.float32(...)``: a bare literal is a float64 and would widen
# the arithmetic.  The ``F32`` helpers are compiled with contraction (``CONTRACTED``):
# LLVM fuses ``a * b + c`` into one fused multiply-add where the machine has it, which
# only makes each step more accurate.


def _pow2_f32(k):  # type: ignore[no-untyped-def]
    """``2.0 ** k`` as a float32 for an integer ``-126 <= k <= 127``, built from its bits."""
    return np.int32((k + 127) << 23).view(np.float32)


def _round_to_int_f32(y):  # type: ignore[no-untyped-def]
    """The float32 ``y`` (|y| < 2**22) rounded to the nearest integer, ties to even: as a
    float32 and as an int32 (the last bits of 1.5 * 2**23 after an addition)."""
    shifted = np.float32(y + np.float32(12582912.0))
    return shifted - np.float32(12582912.0), np.int32(shifted.view(np.int32) - 1262485504)


def _expm1_f32_kernel(r):  # type: ignore[no-untyped-def]
    """``exp(r) - 1`` for ``|r| <= ln(2) / 2`` as ``r + r*r * Q(r)``, Q fitted to within
    4e-9 (a few hundredths of an ulp of the result)."""
    q = np.float32(0.0013933622976765037) + r * np.float32(0.00019907552632503211)
    q = np.float32(0.04166646674275398) + r * (np.float32(0.00833328627049923) + r * q)
    q = np.float32(0.5) + r * (np.float32(0.1666666716337204) + r * q)
    return r + (r * r) * q


def _reduce_ln2_f32(x):  # type: ignore[no-untyped-def]
    """``x = k ln 2 + r`` for a finite ``|x| <= 150``: (r, k as float32, k as int32).
    ln 2 in two parts; the high one has 9 significant bits, so ``k * high`` and the
    subtraction are exact."""
    k, scale = _round_to_int_f32(x * np.float32(1.4426950408889634))
    r = (x - k * np.float32(0.693359375)) - k * np.float32(-2.1219444005469057e-04)
    return r, scale


def _exp_f32_reduced(x):  # type: ignore[no-untyped-def]
    """``exp(x)`` for a float32 ``|x| <= 104``; the last multiplication overflows or
    underflows (raising the flag) exactly when the result does."""
    r, scale = _reduce_ln2_f32(x)
    p = np.float32(1.0) + _expm1_f32_kernel(r)
    half = scale >> 1  # two factors keep each power of two a normal number
    return (p * _pow2_f32(half)) * _pow2_f32(scale - half)


def _expm1_f32_moderate(x):  # type: ignore[no-untyped-def]
    """``exp(x) - 1`` for a float32 ``-17.5 <= x <= 18.5`` (``|k| <= 27``), as
    ``(p + (1 - 2**-k)) * 2**k``: ``1 - 2**-k`` is exact for ``|k| <= 24`` (past it, its
    rounding is far below an ulp of the result) and the scaling is exact, so the one
    rounding that matters is the addition's."""
    r, scale = _reduce_ln2_f32(x)
    p = _expm1_f32_kernel(r)
    return (p + (np.float32(1.0) - _pow2_f32(-scale))) * _pow2_f32(scale)


def _log_f32_reduced(x, zero):  # type: ignore[no-untyped-def]
    """``log(x)`` for a positive finite (possibly subnormal) float32 ``x``, and the
    quotient it divides for, -inf in the lanes of ``zero`` (see ``_log_f64_reduced``)."""
    tiny = x < np.float32(1.1754943508222875e-38)
    # 2**23 makes a subnormal normal; every lane multiplies, by 1 unless tiny.
    normal = x * (np.float32(8388608.0) if tiny else np.float32(1.0))
    # Bits relative to those of sqrt(1/2): the exponent of x's mantissa in
    # [sqrt(1/2), sqrt(2)) is their arithmetic shift, the mantissa their low bits.
    bits = np.int32(normal.view(np.int32) - 1060439283)
    exponent = np.int32(bits >> 23) - (np.int32(23) if tiny else np.int32(0))
    mantissa = np.int32((bits & 8388607) + 1060439283).view(np.float32)
    e = np.float32(exponent)
    f = mantissa - np.float32(1.0)  # exact
    # log(1 + f) = 2 atanh(s) = 2s + s R(s*s) with s = f / (2 + f), and 2s = f - s f.
    s = hidden(np.float32(-1.0) if zero else f) / hidden(
        np.float32(0.0) if zero else np.float32(2.0) + f)
    z = s * s  # <= 0.0295: the series' next term is below 3e-9 of the result
    R = z * (np.float32(0.6666666666666666) + z * (np.float32(0.4) + z * (
        np.float32(0.2857142857142857) + z * np.float32(0.2222222222222222))))
    return e * np.float32(0.693359375) + (
        f - (s * (f - R) - e * np.float32(-2.1219444005469057e-04))), s


def exp_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    infinite = abs(clean) == math.inf
    negligible = abs(clean) < np.float32(1e-8)  # exp rounds to 1; keeps r * r normal
    argument = np.float32(0.0) if (infinite or negligible) else \
        min(max(clean, np.float32(-104.0)), np.float32(104.0))
    result = _exp_f32_reduced(argument)
    if x != x:
        return x
    if infinite:
        return np.float32(math.inf) if clean > 0 else np.float32(0.0)
    return result


def expm1_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    infinite = abs(clean) == math.inf
    # expm1(x) rounds to x below 2**-25 (and r * r would underflow far below it)
    negligible = abs(clean) < np.float32(2.9802322387695312e-08)
    argument = np.float32(0.0) if (infinite or negligible) else \
        min(max(clean, np.float32(-17.5)), np.float32(104.0))
    moderate = _expm1_f32_moderate(min(argument, np.float32(18.0)))
    # past 2**24 the -1 is below half an ulp; the scaling overflows like exp's
    large = _exp_f32_reduced(argument) - np.float32(1.0)
    if x != x or negligible:
        return x
    if infinite:
        return np.float32(math.inf) if clean > 0 else np.float32(-1.0)
    if argument > np.float32(18.0):
        return large
    return moderate


def log_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(1.0)
    # Clamped into the positive finite numbers; lanes clamped here are answered below.
    result, quotient = _log_f32_reduced(min(max(clean, np.float32(1e-45)),
                                            np.float32(3.4028234663852886e38)),
                                        hidden(clean) == np.float32(0.0))
    if x != x or clean == math.inf:
        return x
    return _log_answer_f32(clean, result, quotient)


def log1p_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    u = np.float32(1.0) + clean
    # A valid u is at least 2**-24; lanes with u <= 0 (answered below) get harmless values.
    argument = min(max(u, np.float32(1e-30)), np.float32(3.4028234663852886e38))
    shifted = clean if u > 0 else np.float32(0.0)
    # log(u) plus the first-order correction for the rounding of 1 + x.
    logarithm, quotient = _log_f32_reduced(argument, hidden(u) == np.float32(0.0))
    result = logarithm + (shifted - (argument - np.float32(1.0))) / argument
    if x != x or u == np.float32(1.0) or u == math.inf:
        return x  # NaN, +inf, and |x| so small that log1p(x) rounds to x (keeps -0.0)
    return _log_answer_f32(u, result, quotient)


def _tanh_f32_small(x):  # type: ignore[no-untyped-def]
    """``tanh(x)`` for ``|x| <= 0.625`` as ``x + x**3 P(x**2)``, P fitted to within 5e-8
    (about 0.2 ulp of the result)."""
    z = x * x
    p = np.float32(0.02100999280810356) + z * np.float32(-0.006113170180469751)
    p = np.float32(-0.333333283662796) + z * (np.float32(0.1333279311656952) + z * (
        np.float32(-0.053854022175073624) + z * p))
    return x + x * (z * p)


def tanh_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    # tanh(x) rounds to x below 1e-4 (x**3 / 3 is under half an ulp) and to 1 past 9.1
    negligible = magnitude < np.float32(1e-4)
    small = magnitude < np.float32(0.625)
    # expm1(2|x|) = t, tanh |x| = t / (t + 2): accurate once t is not small
    argument = np.float32(0.625) if small else min(magnitude, np.float32(9.1))
    t = _expm1_f32_moderate(argument + argument)
    large = np.copysign(t / (t + np.float32(2.0)), clean)
    # of |x| (clamped), the sign copied last, like the other path's
    result = np.copysign(_tanh_f32_small(
        np.float32(0.0) if negligible else min(magnitude, np.float32(0.625))), clean)
    if x != x or negligible:
        return x
    if small:
        return result
    return large


# ------------------------------------------------------------------ sin and cos
# x = n pi/2 + r with |r| <= pi/4, then sin or cos of r by the quadrant n mod 4.  pi/2 is
# split in four: the first three parts have 33 significant bits, so n * part is exact for
# |n| <= 2**20, and the subtractions lose nothing that the next part does not restore
# (152 bits of pi/2 cover the closest approach of a double below 2**20 pi/2 to a multiple
# of pi/2).  Larger arguments need hundreds of bits of 2/pi: lanes beyond
# ``TRIG_REDUCTION_LIMIT`` are computed by the C library instead (a scalar call taken only
# by such lanes, so loops over ordinary arguments stay vectorised).


def rare_sin(x):  # type: ignore[no-untyped-def]
    """The C library's ``sin``, called by kernels only for the lanes that need it (the
    backend compiles a call of it that keeps the loop vectorised)."""
    return np.sin(x)


def rare_cos(x):  # type: ignore[no-untyped-def]
    return np.cos(x)


def _reduce_pio2(x):  # type: ignore[no-untyped-def]
    """``x = n pi/2 + r`` for a finite ``|x| <= 1.6e6``: (r, n as int64)."""
    n, quadrant = _round_to_int(x * 0.6366197723675814)
    r = x - n * 1.5707963267341256
    r = r - n * 6.077100506303966e-11
    r = r - n * 2.0222662487111665e-21
    return r - n * 8.4784276603689e-32, quadrant


def _sin_kernel(r):  # type: ignore[no-untyped-def]
    """``sin(r)`` for ``|r| <= pi/4``: ``r + r**3 S(r**2)``, S within 2e-17."""
    z = r * r
    q = -2.5051131845003624e-08 + z * 1.5918129294866608e-10
    q = -0.16666666666666666 + z * (0.008333333333330948 + z * (
        -0.00019841269836758574 + z * (2.755731610255244e-06 + z * q)))
    return r + r * (z * q)


def _cos_kernel(r):  # type: ignore[no-untyped-def]
    """``cos(r)`` for ``|r| <= pi/4``: ``1 - r**2/2 + r**4 C(r**2)``, C within 2e-18; the
    rounding of ``1 - r**2/2`` is recovered exactly and added back."""
    z = r * r
    q = 2.08761462684032e-09 + z * -1.1382632425521717e-11
    q = 0.041666666666666664 + z * (-0.0013888888888887398 + z * (
        2.480158729876569e-05 + z * (-2.7557317271729793e-07 + z * q)))
    half = 0.5 * z
    w = 1.0 - half
    return w + (((1.0 - w) - half) + (z * z) * q)


def _sin_or_cos(x, offset):  # type: ignore[no-untyped-def]
    """``sin(x)`` (``offset`` 0) or ``cos(x)`` (``offset`` 1, a quarter turn on) for a
    finite ``|x| <= 1.6e6``."""
    r, n = _reduce_pio2(x)
    quadrant = n + offset
    sine = _sin_kernel(r)
    cosine = _cos_kernel(r)
    value = cosine if (quadrant & 1) == 1 else sine
    return -value if (quadrant & 2) == 2 else value


def sin_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1e-9  # sin(x) rounds to x; keeps r * r from underflowing
    huge = magnitude > 1.6e6
    result = _sin_or_cos(0.0 if (negligible or huge) else clean, 0)
    if x != x or negligible:
        return x
    seen = hidden(clean)
    if abs(seen) == math.inf:
        # NaN, with numpy's "invalid".  Tested and computed on a hidden copy: knowing
        # clean is an infinity, LLVM would fold clean - clean to a NaN that raises
        # nothing, or compute inf - inf in every lane.
        return seen - clean
    if huge:
        return rare_sin(clean)
    return result


def cos_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1e-9  # cos(x) rounds to 1
    huge = magnitude > 1.6e6
    result = _sin_or_cos(0.0 if (negligible or huge) else clean, 1)
    if x != x:
        return x
    seen = hidden(clean)
    if abs(seen) == math.inf:
        return seen - clean  # NaN, with numpy's "invalid" (see sin_f64)
    if huge:
        return rare_cos(clean)
    return result


# float32, eight lanes (of AVX2), not four: the same reduction by pi/2 in float32
# arithmetic, then polynomials fitted to float32 accuracy.  pi/2 is split in five: the
# first four parts have at most 8 significant bits, on the grids 2**-7, 2**-15, 2**-23 and
# 2**-31, so for |x| <= 1e5 (|n| < 2**16) every product n * part is exact and so are the
# first three subtractions; the fourth keeps its rounding (a two-sum) and the last part,
# n * 6.08e-11, is added to that tail.  head + tail is then within |n| * 3e-18 of
# x - n pi/2, a relative error below 2**-31 except where x - n pi/2 is below |n| * 2**-27:
# there and beyond 1e5, lanes take the float64 C library function's value rounded once
# (``rare_sin``: a call made only by those lanes).


def _reduce_pio2_f32(x):  # type: ignore[no-untyped-def]
    """``x = n pi/2 + head + tail`` for a float32 ``|x| <= 1e5`` with ``|tail|`` at most
    half an ulp of ``head``: (head, tail, n as float32, n as int32).  Every product is
    exact, so contraction changes nothing."""
    n, quadrant = _round_to_int_f32(x * np.float32(0.6366197723675814))
    r = x - n * np.float32(1.5703125)
    r = r - n * np.float32(0.00048828125)
    r = r - n * np.float32(-4.410743713378906e-06)
    part = n * np.float32(-4.377216100692749e-08)
    # r - part and its rounding (fast two-sum): where |r| < |part| <= 2**-8.4 the
    # subtraction is exact (both are multiples of 2**-30), and the rounding found is 0
    head = r - part
    tail = ((r - head) - part) - n * np.float32(6.07710062827671e-11)
    total = head + tail  # |tail| < |head| wherever the result is used (see the callers)
    return total, tail - (total - head), n, quadrant


def _halves_f32(x):  # type: ignore[no-untyped-def]
    """``x`` as high + low, each of at most 12 significant bits (the high one by masking
    the last 12 bits): the product of two such halves is exact in float32."""
    high = np.int32(x.view(np.int32) & -4096).view(np.float32)
    return high, x - high


def _sin_parts_f32(head, tail):  # type: ignore[no-untyped-def]
    """``sin(head + tail)`` for ``|head| <= pi/4 * 1.01`` (``|tail|`` within half an ulp
    of it) as an unrounded sum head + correction: ``head + head**3 S(head**2)`` with S
    fitted to within 2e-10 of sin relatively (its first coefficient float32(-1/6), each
    next one fitted after rounding the previous), and ``tail cos(head)`` to first order."""
    z = head * head
    s = np.float32(-1.9852562400046736e-04) + z * np.float32(2.8263450531085255e-06)
    s = np.float32(-0.1666666716337204) + z * (np.float32(0.008333378471434116) + z * s)
    return head, head * (z * s) + tail * (np.float32(1.0) - np.float32(0.5) * z)


def _cos_parts_f32(head, tail):  # type: ignore[no-untyped-def]
    """``cos(head + tail)`` as in ``_sin_parts_f32``: ``1 - head**2/2 + head**4 C(head**2)``
    with C fitted to within 4e-10 of cos relatively; ``head**2 / 2`` is taken exactly
    (its high part from 12-bit halves of head) and ``1 - `` it rounds once, recovered."""
    high, low = _halves_f32(head)
    half = np.float32(0.5) * (high * high)  # exact
    w = np.float32(1.0) - half
    rest = (np.float32(1.0) - w) - half  # exact
    rest = rest - (high * low + np.float32(0.5) * (low * low))  # the rest of head**2 / 2
    z = head * head
    c = np.float32(-0.0013888203538954258) + z * np.float32(2.4518740247003734e-05)
    c = np.float32(0.0416666679084301) + z * c
    return w, rest + ((z * z) * c - tail * head)


def _sin_or_cos_f32(x, offset):  # type: ignore[no-untyped-def]
    """``sin(x)`` (``offset`` 0) or ``cos(x)`` (``offset`` 1) for a float32 ``|x| <= 1e5``,
    and whether the lane must take the C library's value instead: its argument is too
    close to a multiple of pi/2 for the reduction's precision (for a cosine of it, too
    small for the polynomials' products not to underflow)."""
    head, tail, n, quadrant = _reduce_pio2_f32(x)
    rare = abs(head) < abs(n) * np.float32(7.450580596923828e-09)  # |n| * 2**-27
    if rare:  # the reduced argument of a lane that takes the C library's value
        head = np.float32(0.5)
    odd = ((quadrant + offset) & 1) == 1
    sine, sine_correction = _sin_parts_f32(head, tail)
    cosine, cosine_correction = _cos_parts_f32(head, tail)
    value = (cosine + cosine_correction) if odd else (sine + sine_correction)
    return (-value if ((quadrant + offset) & 2) == 2 else value), rare


def sin_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    negligible = magnitude < np.float32(2.44140625e-04)  # 2**-12: sin(x) rounds to x
    huge = magnitude > np.float32(1e5)
    result, rare = _sin_or_cos_f32(np.float32(0.0) if (negligible or huge) else clean, 0)
    if x != x or negligible:
        return x
    seen = hidden(clean)
    if abs(seen) == math.inf:
        return seen - clean  # NaN, with numpy's "invalid" (see sin_f64)
    if huge or rare:
        return np.float32(rare_sin(np.float64(clean)))
    return result


def cos_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    negligible = magnitude < np.float32(2.44140625e-04)  # cos(x) rounds to 1
    huge = magnitude > np.float32(1e5)
    result, rare = _sin_or_cos_f32(np.float32(0.0) if (negligible or huge) else clean, 1)
    if x != x:
        return x
    seen = hidden(clean)
    if abs(seen) == math.inf:
        return seen - clean  # NaN, with numpy's "invalid" (see sin_f64)
    if huge or rare:
        return np.float32(rare_cos(np.float64(clean)))
    return result


# ------------------------------------------------------------------ logaddexp
# numpy's logaddexp without branches: max(x, y) + log1p(exp(-|x - y|)), equal arguments
# answered as numpy does (x + log 2, before x - y is formed, so inf - inf raises nothing).
# The ordered comparison of the difference raises "invalid" for NaN, as numpy's does; the
# "+ 0.0" keeps the two values it chooses between distinct for LLVM even for
# logaddexp(s, s), which would otherwise drop the comparison (the sum it feeds is the same:
# the log1p term is never -0.0).


def _logaddexp_f64(x, y, base2):  # type: ignore[no-untyped-def]
    """logaddexp (natural, or base 2 when ``base2``: the branch is decided when inlined)."""
    same = x == y
    a = 0.0 if same else x
    b = (0.0 if same else y) + 0.0
    tmp = a - b
    larger = a if tmp > 0 else b
    if base2:
        result = larger + log1p_f64(exp2_f64(-abs(tmp))) * 1.4426950408889634
    else:
        result = larger + log1p_f64(exp_f64(-abs(tmp)))
    if same:
        return x + (1.0 if base2 else 0.6931471805599453)
    if tmp != tmp:
        return tmp
    return result


def _logaddexp_f32(x, y, base2):  # type: ignore[no-untyped-def]
    same = x == y
    a = np.float32(0.0) if same else x
    b = (np.float32(0.0) if same else y) + np.float32(0.0)
    tmp = a - b
    larger = a if tmp > 0 else b
    if base2:
        result = larger + log1p_f32(exp2_f32(-abs(tmp))) * np.float32(1.4426950408889634)
    else:
        result = larger + log1p_f32(exp_f32(-abs(tmp)))
    if same:
        return x + (np.float32(1.0) if base2 else np.float32(0.6931471805599453))
    if tmp != tmp:
        return tmp
    return result


def logaddexp_f64(x, y):  # type: ignore[no-untyped-def]
    return _logaddexp_f64(x, y, False)


def logaddexp_f32(x, y):  # type: ignore[no-untyped-def]
    return _logaddexp_f32(x, y, False)


# logaddexp2(x, y) = log2(2**x + 2**y), as numpy's: max(x, y) + log1p(2**-|x - y|) / ln 2,
# equal arguments x + 1 (exp2 is defined further down).


def logaddexp2_f64(x, y):  # type: ignore[no-untyped-def]
    return _logaddexp_f64(x, y, True)


def logaddexp2_f32(x, y):  # type: ignore[no-untyped-def]
    return _logaddexp_f32(x, y, True)


# ------------------------------------------------------------------ tan
# sin / cos of the argument reduced as for sin and cos: in the quadrants where tan is
# -cot, -cos(r) / sin(r), so one division in every lane and a divisor never zero (r is 0
# only for x = 0, in quadrant 0).  Lanes beyond the vectorised reduction call the C
# library's tan.


def rare_tan(x):  # type: ignore[no-untyped-def]
    """The C library's ``tan``, for the lanes beyond ``_reduce_pio2`` (see ``rare_sin``)."""
    return np.tan(x)


def _subnormal_underflow_f64(x):  # type: ignore[no-untyped-def]
    """A zero of ``x``'s sign whose computation raises "underflow" where ``x`` is subnormal
    (and nothing elsewhere): the C library's functions that return a subnormal argument
    unchanged (``atan``, ``asin``, ``tan``) raise it there, and adding this to the result
    does too.  Hidden, or LLVM would see a product by zero in the other lanes."""
    # (hidden: LLVM would compare x itself, NaN included, as in _is_nan)
    clean = hidden(x if x == x else 0.0)
    return hidden(clean if abs(clean) < 2.2250738585072014e-308 else 0.0) * \
        1.0842021724855044e-19


def _subnormal_underflow_f32(x):  # type: ignore[no-untyped-def]
    """``_subnormal_underflow_f64`` for float32 ``x``."""
    clean = hidden(x if x == x else np.float32(0.0))
    return hidden(clean if abs(clean) < np.float32(1.1754943508222875e-38)
                  else np.float32(0.0)) * np.float32(1.0842021724855044e-19)


def _reduce_pio2_parts(x):  # type: ignore[no-untyped-def]
    """``_reduce_pio2`` keeping the roundings of its subtractions (each recovered exactly:
    the larger operand comes first): (r, its tail, n)."""
    n, quadrant = _round_to_int(x * 0.6366197723675814)
    r = x - n * 1.5707963267341256  # exact
    second = n * 6.077100506303966e-11
    third = n * 2.0222662487111665e-21
    last = n * 8.4784276603689e-32
    after_second = r - second
    after_third = after_second - third
    head = after_third - last
    tail = (((r - after_second) - second) + ((after_second - after_third) - third)) + (
        (after_third - head) - last)
    return head, tail, quadrant


def _sin_parts(r):  # type: ignore[no-untyped-def]
    """``sin(r)`` for ``|r| <= pi/4`` as an unrounded sum head + tail (``_sin_kernel``)."""
    z = r * r
    q = -2.5051131845003624e-08 + z * 1.5918129294866608e-10
    q = -0.16666666666666666 + z * (0.008333333333330948 + z * (
        -0.00019841269836758574 + z * (2.755731610255244e-06 + z * q)))
    return r, r * (z * q)


def _cos_parts(r):  # type: ignore[no-untyped-def]
    """``cos(r)`` for ``|r| <= pi/4`` as an unrounded sum head + tail (``_cos_kernel``)."""
    z = r * r
    q = 2.08761462684032e-09 + z * -1.1382632425521717e-11
    q = 0.041666666666666664 + z * (-0.0013888888888887398 + z * (
        2.480158729876569e-05 + z * (-2.7557317271729793e-07 + z * q)))
    half = 0.5 * z
    w = 1.0 - half
    return w, ((1.0 - w) - half) + (z * z) * q


def _split(a):  # type: ignore[no-untyped-def]
    """``a`` (|a| < 2**995) as the sum of two halves of 26 significant bits (Veltkamp),
    whose products with another split number are exact."""
    c = 134217729.0 * a
    high = c - (c - a)
    return high, a - high


def _tan_reduced(head, tail, odd):  # type: ignore[no-untyped-def]
    """``tan(head + tail)`` (``-cot`` if ``odd``) for ``|head| <= pi/4``: the quotient of
    sine and cosine as unrounded sums, refined by one Newton step whose residual is
    computed exactly (Dekker's product), so the one rounding that matters is the last."""
    sine, sine_tail = _sin_parts(head)
    cosine, cosine_tail = _cos_parts(head)
    sine_tail = sine_tail + tail * cosine  # sin(h + t) = sin h + t cos h (t tiny)
    cosine_tail = cosine_tail - tail * sine
    top = -cosine if odd else sine
    top_tail = -cosine_tail if odd else sine_tail
    bottom = sine if odd else cosine
    bottom_tail = sine_tail if odd else cosine_tail
    inverse = 1.0 / (bottom + bottom_tail)
    q = (top + top_tail) * inverse
    product = q * bottom
    q_high, q_low = _split(q)
    b_high, b_low = _split(bottom)
    error = ((q_high * b_high - product) + q_high * b_low + q_low * b_high) + q_low * b_low
    residual = ((top - product) - error) + (top_tail - q * bottom_tail)
    return q + residual * inverse


def _is_nan(x):  # type: ignore[no-untyped-def]
    """``x != x``, tested on a hidden copy.  A function answering NaN lanes last with
    ``if x != x: return x`` lets LLVM assume x is not NaN in the rest of its code, where
    it then replaces the cleaned copy (``x if x == x else 0.0``) by x itself, and an
    ordered comparison of the NaN raises "invalid"."""
    seen = hidden(x)
    return seen != seen


def tan_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1e-9  # tan(x) rounds to x; keeps r * r from underflowing
    huge = magnitude > 1.6e6
    head, tail, n = _reduce_pio2_parts(0.0 if (negligible or huge) else clean)
    result = _tan_reduced(head, tail, (n & 1) == 1)
    if _is_nan(x):
        return x
    if negligible:
        return clean + _subnormal_underflow_f64(clean)
    seen = hidden(clean)
    if abs(seen) == math.inf:
        return seen - clean  # NaN, with numpy's "invalid" (see sin_f64)
    if huge:
        return rare_tan(clean)
    return result


def tan_f32(x):  # type: ignore[no-untyped-def]
    """In float64, rounded once (four lanes, not eight): sin / cos of the plainly reduced
    argument, a few float64 ulp from tan, is far within half a float32 ulp."""
    wide = np.float64(x)
    clean = wide if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1e-9  # keeps r * r from underflowing
    huge = magnitude > 1.6e6
    r, n = _reduce_pio2(0.0 if (negligible or huge) else clean)
    sine = _sin_kernel(r)
    cosine = _cos_kernel(r)
    odd = (n & 1) == 1
    result = np.float32((-cosine if odd else sine) / (sine if odd else cosine))
    if _is_nan(x):
        return x
    if negligible:
        return x + _subnormal_underflow_f32(x)
    seen = hidden(clean)
    if abs(seen) == math.inf:
        return np.float32(seen - clean)  # NaN, with numpy's "invalid" (see sin_f64)
    if huge:
        return np.float32(rare_tan(clean))
    return result


FUNCTIONS = (*FUNCTIONS, "tan")


# ------------------------------------------------------------------ arctan and arctan2
# atan(n / d) for n, d >= 0 without forming n / d first: the quotient's range is split at
# 7/16, 11/16, 19/16 and 39/16 and reduced by atan(q) = atan(c) + atan((q - c) / (1 + c q))
# for c = 1/2, 1, 3/2 and infinity (-d / n), each reduced argument one division of
# differences of n and d that are exact (Sterbenz) or nearly so; then
# atan(t) = t + t**3 P(t**2) on |t| <= 7/16 with atan(c) in two parts.  arctan is
# atan(|x| / 1); arctan2 scales |y| and |x| by one power of two so that no sum
# overflows and no product underflows, and answers quotients beyond 2**60 at once.


def _atan_quotient(n, d, behind):  # type: ignore[no-untyped-def]
    """``atan(n / d)`` in [0, pi/2] (``pi - atan(n / d)`` if ``behind``) for finite
    ``n, d >= 0``, not both 0, each 0 or between 2**-1000 and 2**1000 and with ``n / d``
    not below 2**-1000 unless that quotient is the answer: a quotient below 2**-27 is
    answered by the division itself (its rounding, and its "underflow", are the
    answer's)."""
    beyond = n > 2.4375 * d
    high = n > 1.1875 * d
    middle = n > 0.6875 * d
    low = n > 0.4375 * d
    top = -d if beyond else (n - 1.5 * d if high else (
        n - d if middle else (n + n - d if low else n)))
    # (1.5 times d, not n, where not high: n may be subnormal, d never is)
    bottom = n if beyond else (d + 1.5 * (n if high else d) if high else (
        n + d if middle else (d + d + n if low else d)))
    # atan(c) in two parts for c = inf, 3/2, 1, 1/2, 0; pi - atan(c) when behind
    if behind:
        base = 1.5707963267948966 if beyond else (2.158798930342464 if high else (
            2.356194490192345 if middle else (2.677945044588987 if low else
                                              3.141592653589793)))
        base_low = 6.123233995736766e-17 if beyond else (2.1958367134601997e-16 if high else (
            9.184850993605148e-17 if middle else (1.5527705369303147e-16 if low else
                                                  1.2246467991473532e-16)))
    else:
        base = 1.5707963267948966 if beyond else (0.982793723247329 if high else (
            0.7853981633974483 if middle else (0.4636476090008061 if low else 0.0)))
        base_low = 6.123233995736766e-17 if beyond else (1.3903311031230998e-17 if high else (
            3.061616997868383e-17 if middle else (2.2698777452961687e-17 if low else 0.0)))
    quotient = top / bottom
    t = -quotient if behind else quotient  # pi - atan(c) - atan(q) = (pi - atan(c)) + atan(-q)
    u = 0.0 if abs(t) < 7.450580596923828e-09 else t  # t * t would underflow
    z = u * u
    # atan(t) = t + t**3 P(t**2), P fitted within 9e-18 relative on |t| <= 7/16
    p = -0.04974109053328455 + z * (0.036470903026744904 + z * -0.01622839251961969)
    p = 0.07691864404663165 + z * (-0.06660958601302765 + z * (0.058328556472632534 + z * p))
    p = -0.33333333333332893 + z * (0.19999999999867113 + z * (-0.14285714271731004 + z * (
        0.1111111037325344 + z * (-0.09090886352439195 + z * p))))
    return base + ((t * (z * p) + base_low) + t)


def arctan_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    # atan(2**66) rounds to pi/2, as does atan of anything larger (inf too)
    result = _atan_quotient(min(abs(clean), 7.378697629483821e19), 1.0, False)
    if _is_nan(x):
        return x
    return math.copysign(result, clean) + _subnormal_underflow_f64(clean)


def _exponent_field(x):  # type: ignore[no-untyped-def]
    """The biased exponent bits of a float64 ``x >= 0`` (0 for zeros and subnormals)."""
    return np.float64(x).view(np.int64) >> 52


def arctan2_f64(y, x):  # type: ignore[no-untyped-def]
    missing = y != y or x != x
    clean_y = 0.0 if missing else y
    clean_x = 1.0 if missing else x
    a = abs(clean_y)
    b = abs(clean_x)
    infinite = a == math.inf or b == math.inf
    # infinities become 1 and the other argument 0 (both 1 if both are infinite)
    a = (1.0 if a == math.inf else 0.0) if infinite else a
    b = (1.0 if b == math.inf else 0.0) if infinite else b
    behind = np.float64(clean_x).view(np.int64) < 0  # x negative or -0.0: the left half-plane
    gap = _exponent_field(a) - _exponent_field(b)
    vertical = gap > 60  # |y / x| > 2**59: the angle rounds to pi/2
    # |y / x| < 2**-59 and x < 0: the angle rounds to pi (no quotient, so no underflow)
    flat = gap < -60 and behind
    larger = max(a, b)
    scale = 1.0 if vertical else (7.888609052210118e-31 if larger > 1.0715086071862673e301
                                  else (1.2676506002282294e30 if larger < 1.1830521861667747e-271
                                        else 1.0))
    n = (1.0 if vertical else (0.0 if flat else a)) * scale
    d = (0.0 if vertical else (1.0 if flat or larger == 0 else b)) * scale
    result = math.copysign(_atan_quotient(n, d, behind), clean_y)
    if _is_nan(y):
        return y
    if _is_nan(x):
        return x
    return result + _subnormal_underflow_f64(result)


def _atan_quotient_f32(n, d, behind):  # type: ignore[no-untyped-def]
    """``_atan_quotient`` in float32, for finite ``n, d >= 0``, not both 0, each 0 or
    between 2**-120 and 2**90, ``n / d`` not below 2**-120 unless that quotient is the
    answer: the same reduction with float32 constants, P fitted within 1.4e-9 relative
    (a few hundredths of an ulp)."""
    beyond = n > np.float32(2.4375) * d
    high = n > np.float32(1.1875) * d
    middle = n > np.float32(0.6875) * d
    low = n > np.float32(0.4375) * d
    top = -d if beyond else (n - np.float32(1.5) * d if high else (
        n - d if middle else (n + n - d if low else n)))
    bottom = n if beyond else (d + np.float32(1.5) * (n if high else d) if high else (
        n + d if middle else (d + d + n if low else d)))
    if behind:
        base = np.float32(1.5707963705062866) if beyond else (
            np.float32(2.158798933029175) if high else (
                np.float32(2.356194496154785) if middle else (
                    np.float32(2.677945137023926) if low else np.float32(3.1415927410125732))))
        base_low = np.float32(-4.371138828673793e-08) if beyond else (
            np.float32(-2.6867106317496336e-09) if high else (
                np.float32(-5.962440319251527e-09) if middle else (
                    np.float32(-9.243493792610025e-08) if low else
                    np.float32(-8.742277657347586e-08))))
    else:
        base = np.float32(1.5707963705062866) if beyond else (
            np.float32(0.9827937483787537) if high else (
                np.float32(0.7853981852531433) if middle else (
                    np.float32(0.46364760398864746) if low else np.float32(0.0))))
        base_low = np.float32(-4.371138828673793e-08) if beyond else (
            np.float32(-2.5131424052915463e-08) if high else (
                np.float32(-2.1855694143368964e-08) if middle else (
                    np.float32(5.01215868808913e-09) if low else np.float32(0.0))))
    quotient = top / bottom
    # The quotient's rounding (up to half an ulp of the answer), recovered where it
    # matters: top - quotient * bottom is exact in float64, where it is divided too (in
    # float32 it could be subnormal), and atan(q + e) = atan(q) + e / (1 + q*q).
    error = (np.float64(top) - np.float64(quotient) * np.float64(bottom)) / np.float64(bottom)
    # (hidden: LLVM would convert every lane's error and choose afterwards)
    correction = np.float32(hidden(
        error if abs(quotient) > np.float32(9.5367431640625e-07) else 0.0))
    t = -quotient if behind else quotient
    u = np.float32(0.0) if abs(t) < np.float32(1e-10) else t  # t * t would underflow
    z = u * u
    p = np.float32(0.10484257340431213) + z * np.float32(-0.05805475264787674)
    p = np.float32(-0.33333301544189453) + z * (np.float32(0.19997663795948029) + z * (
        np.float32(-0.1422848403453827) + z * p))
    tail = (correction - correction * z) * (np.float32(-1.0) if behind else np.float32(1.0))
    return base + ((t * (z * p) + (base_low + tail)) + t)


def arctan_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    # atan(2**30) rounds to pi/2, as does atan of anything larger (inf too)
    result = _atan_quotient_f32(min(abs(clean), np.float32(1073741824.0)), np.float32(1.0),
                                False)
    if _is_nan(x):
        return x
    return np.copysign(result, clean) + _subnormal_underflow_f32(clean)


def arctan2_f32(y, x):  # type: ignore[no-untyped-def]
    """``arctan2_f64`` in float32: exponent gaps beyond 30 answered at once, scaling by
    2**-40 above 2**100 and by 2**60 below 2**-60."""
    missing = y != y or x != x
    clean_y = np.float32(0.0) if missing else y
    clean_x = np.float32(1.0) if missing else x
    a = abs(clean_y)
    b = abs(clean_x)
    infinite = a == math.inf or b == math.inf
    a = (np.float32(1.0) if a == math.inf else np.float32(0.0)) if infinite else a
    b = (np.float32(1.0) if b == math.inf else np.float32(0.0)) if infinite else b
    behind = clean_x.view(np.int32) < 0
    gap = (a.view(np.int32) >> 23) - (b.view(np.int32) >> 23)
    vertical = gap > 30  # |y / x| > 2**29: the angle rounds to pi/2
    flat = gap < -30 and behind  # the angle rounds to pi
    larger = max(a, b)
    scale = np.float32(1.0) if vertical else (
        np.float32(9.094947017729282e-13) if larger > np.float32(1.2676506002282294e30) else (
            np.float32(1.152921504606847e18) if larger < np.float32(8.673617379884035e-19)
            else np.float32(1.0)))
    n = (np.float32(1.0) if vertical else (np.float32(0.0) if flat else a)) * scale
    d = (np.float32(0.0) if vertical else (
        np.float32(1.0) if flat or larger == 0 else b)) * scale
    result = np.copysign(_atan_quotient_f32(n, d, behind), clean_y)
    if _is_nan(y):
        return y
    if _is_nan(x):
        return x
    return result + _subnormal_underflow_f32(result)


FUNCTIONS = (*FUNCTIONS, "arctan")


# ------------------------------------------------------------------ arcsin and arccos
# On |x| <= 1/2, asin(x) = x + x**3 P(x**2); beyond, with z = (1 - |x|) / 2 and s = sqrt(z),
# asin |x| = pi/2 - 2 asin(s) and acos |x| = 2 asin(s) (acos of a negative x: pi minus
# that), s split into a head of 21 bits (whose square is exact) and a correction so that
# the rounding of the square root is recovered.  |x| > 1 gives the square root of the
# negative 1 - |x|: NaN and "invalid", in those lanes only.


def _asin_series(x, z):  # type: ignore[no-untyped-def]
    """``asin(x) - x`` for ``|x| <= 1/2``, ``z = x * x``: ``x z P(z)``, P fitted within
    4e-18 relative to asin."""
    p = 0.010767050420932416 + z * (0.003756418384580855 + z * (0.021585730664082457 + z * (
        -0.020827071058849313 + z * 0.03252136677253647)))
    p = 0.022372213738795926 + z * (0.017351635152949296 + z * (0.013980537778747257 + z * (
        0.011401252713132394 + z * p)))
    p = 0.16666666666666757 + z * (0.07499999999971521 + z * (0.04464285717380503 + z * (
        0.030381942749934335 + z * p)))
    return x * (z * p)


def _asin_reduction(magnitude):  # type: ignore[no-untyped-def]
    """For ``1/2 <= magnitude <= 1``: ``z = (1 - magnitude) / 2`` (exact), ``s = sqrt(z)``,
    its head ``h`` (low 32 bits cleared), the correction ``c`` with ``s ~ h + c``, and
    ``asin(s) - s``."""
    z = (1.0 - magnitude) * 0.5
    s = np.sqrt(z)
    head = np.int64(np.float64(s).view(np.int64) & -4294967296).view(np.float64)
    c = (z - head * head) / (s + head if z > 0 else 1.0)
    return z, s, head, c, _asin_series(s, z)


def _asin_or_acos_argument(magnitude):  # type: ignore[no-untyped-def]
    """``magnitude`` clamped into [1/2, 1] (NaN and |x| > 1 lanes are answered apart)."""
    return min(max(magnitude, 0.5), 1.0)


def arcsin_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1.4901161193847656e-08  # asin(x) rounds to x
    near = min(magnitude, 0.5)
    squared = 0.0 if negligible else near  # its square would underflow
    small = near + _asin_series(near, squared * squared)
    _, s, head, c, series = _asin_reduction(_asin_or_acos_argument(magnitude))
    # pi/2 - 2 (head + c + series), the leading part pi/4 - 2 head exact below 0.975
    middle = 0.7853981633974483 - ((2.0 * series - (6.123233995736766e-17 - 2.0 * c)) - (
        0.7853981633974483 - 2.0 * head))
    edge = 1.5707963267948966 - (2.0 * (s + series) - 6.123233995736766e-17)
    large = edge if magnitude > 0.975 else middle
    result = math.copysign(small if magnitude <= 0.5 else large, clean)
    if _is_nan(x):
        return x
    if hidden(magnitude) > 1.0:
        return np.sqrt(1.0 - magnitude)
    return result + _subnormal_underflow_f64(clean)


def arccos_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 1.4901161193847656e-08  # x * x would underflow
    near = min(max(clean, -0.5), 0.5)
    squared = 0.0 if negligible else near  # its square would underflow
    series = _asin_series(near, squared * squared)
    small = 1.5707963267948966 - (near - (6.123233995736766e-17 - series))
    _, s, head, c, far_series = _asin_reduction(_asin_or_acos_argument(magnitude))
    # x <= -1/2: pi - 2 asin(s); x >= 1/2: 2 asin(s) = 2 (head + c + series)
    negative = 3.141592653589793 - 2.0 * (s + (far_series - 6.123233995736766e-17))
    positive = 2.0 * (head + (far_series + c))
    result = small if magnitude <= 0.5 else (negative if clean < 0 else positive)
    if _is_nan(x):
        return x
    if hidden(magnitude) > 1.0:
        return np.sqrt(1.0 - magnitude)
    return result


# float32: the same in float32 (eight lanes), the head of s with 12 significant bits.


def _asin_series_f32(x, z):  # type: ignore[no-untyped-def]
    """``_asin_series`` in float32: P fitted within 5e-9 relative to asin."""
    p = np.float32(0.04546250030398369) + z * (np.float32(0.024220509454607964) + z * (
        np.float32(0.042095039039850235)))
    p = np.float32(0.16666752099990845) + z * (np.float32(0.07495353370904922) + z * p)
    return x * (z * p)


def _asin_reduction_f32(magnitude):  # type: ignore[no-untyped-def]
    """``_asin_reduction`` in float32 (``magnitude`` in [1/2, 1])."""
    z = (np.float32(1.0) - magnitude) * np.float32(0.5)
    s = np.sqrt(z)
    head = np.int32(s.view(np.int32) & -4096).view(np.float32)
    c = (z - head * head) / (s + head if z > 0 else np.float32(1.0))
    return s, head, c, _asin_series_f32(s, z)


def arcsin_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    negligible = magnitude < np.float32(0.000244140625)  # asin(x) rounds to x
    near = min(magnitude, np.float32(0.5))
    squared = np.float32(0.0) if negligible else near
    small = near + _asin_series_f32(near, squared * squared)
    s, head, c, series = _asin_reduction_f32(
        min(max(magnitude, np.float32(0.5)), np.float32(1.0)))
    middle = np.float32(0.7853981852531433) - ((np.float32(2.0) * series - (
        np.float32(-4.371138828673793e-08) - np.float32(2.0) * c)) - (
        np.float32(0.7853981852531433) - np.float32(2.0) * head))
    edge = np.float32(1.5707963705062866) - (
        np.float32(2.0) * (s + series) - np.float32(-4.371138828673793e-08))
    large = edge if magnitude > np.float32(0.975) else middle
    result = np.copysign(small if magnitude <= np.float32(0.5) else large, clean)
    if _is_nan(x):
        return x
    if hidden(magnitude) > np.float32(1.0):
        return np.sqrt(np.float32(1.0) - magnitude)
    return result + _subnormal_underflow_f32(clean)


def arccos_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    negligible = magnitude < np.float32(0.000244140625)  # x * x would underflow
    near = min(max(clean, np.float32(-0.5)), np.float32(0.5))
    squared = np.float32(0.0) if negligible else near
    series = _asin_series_f32(near, squared * squared)
    small = np.float32(1.5707963705062866) - (
        near - (np.float32(-4.371138828673793e-08) - series))
    s, head, c, far_series = _asin_reduction_f32(
        min(max(magnitude, np.float32(0.5)), np.float32(1.0)))
    negative = np.float32(3.1415927410125732) - np.float32(2.0) * (
        s + (far_series - np.float32(-4.371138828673793e-08)))
    positive = np.float32(2.0) * (head + (far_series + c))
    result = small if magnitude <= np.float32(0.5) else (
        negative if clean < 0 else positive)
    if _is_nan(x):
        return x
    if hidden(magnitude) > np.float32(1.0):
        return np.sqrt(np.float32(1.0) - magnitude)
    return result


FUNCTIONS = (*FUNCTIONS, "arcsin", "arccos")


# ------------------------------------------------------------------ hypot
# sqrt(x**2 + y**2) of |x| and |y| scaled by a power of two when the larger is far from 1
# (so no square overflows or underflows), the sum of squares in two parts (Dekker's exact
# products: the halves of 26 bits of each factor multiply exactly) and the square root
# corrected by one step: within a hair of correct rounding.  float32 computes in float64,
# where the squares and their sum are exact or nearly so, and rounds once.


def _two_product(a, b):  # type: ignore[no-untyped-def]
    """``(p, e)``: ``p`` the rounded product ``a * b`` and ``p + e`` the exact one, for
    products far enough from the subnormals that the halves' products are exact."""
    p = a * b
    a_hi, a_lo = _split(a)
    b_hi, b_lo = _split(b)
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


def _fast_two_sum(a, b):  # type: ignore[no-untyped-def]
    """``(s, e)``: the rounded sum and its exact error, where ``a`` is 0 or its exponent is
    at least ``b``'s."""
    s = a + b
    return s, b - (s - a)


def hypot_f64(x, y):  # type: ignore[no-untyped-def]
    ax = 0.0 if x != x else abs(x)
    ay = 0.0 if y != y else abs(y)
    big = max(ax, ay)
    small = min(ax, ay)
    infinite = big == math.inf
    finite = 1.0 if infinite else big
    # Below 2**-27 of the larger, the smaller changes nothing: hypot is the larger exactly
    # (and its square, which could underflow, is not formed).  Tested with a product that
    # neither overflows nor underflows.
    negligible = (min(small, 1e280) * 134217728.0 <= big) if small <= 1e280 else (
        small <= max(big, 1e-280) * 7.450580596923828e-09)
    # Past 2**300 scaled down by 2**-600, below 2**-300 up by 2**700: squares and the
    # products of the halves stay normal numbers.
    large = finite > 2.037035976334486e90
    tiny = finite < 4.909093465297727e-91
    scale = 2.409919865102884e-181 if large else (5.260135901548374e210 if tiny else 1.0)
    unscale = 4.149515568880993e180 if large else (1.90109156629516e-211 if tiny else 1.0)
    b = finite * scale
    a = (0.0 if (infinite or negligible) else small) * scale
    square, square_error = _two_product(b, b)
    other, other_error = _two_product(a, a)
    total, total_error = _fast_two_sum(square, other)
    tail = total_error + (square_error + other_error)
    root = np.sqrt(total)
    # sqrt(t) = r + (t - r**2) / 2r to far below an ulp; t - r**2 exactly, less the tail.
    root_square, root_error = _two_product(root, root)
    residual = ((total - root_square) - root_error) + tail
    result = (root + residual / (root + root if root > 0.0 else 1.0)) * unscale
    if infinite:
        return math.inf  # even with a NaN: hypot(inf, nan) is inf, as in C
    if x != x or y != y:
        return x if x != x else y  # (x + y would raise "invalid" for inf - inf lanes)
    if negligible:
        return big
    return result


def hypot_f32(x, y):  # type: ignore[no-untyped-def]
    # In float64 the squares are exact and neither overflows nor underflows; their sum and
    # its root round within an ulp of float64, far below float32's.
    wide_x = np.float64(0.0 if x != x else x)
    wide_y = np.float64(0.0 if y != y else y)
    infinite = abs(wide_x) == math.inf or abs(wide_y) == math.inf
    clean_x = 0.0 if infinite else wide_x
    clean_y = 0.0 if infinite else wide_y
    result = np.float32(np.sqrt(clean_x * clean_x + clean_y * clean_y))
    if infinite:
        return np.float32(math.inf)
    if x != x or y != y:
        return x if x != x else y  # (x + y would raise "invalid" for inf - inf lanes)
    return result


# ------------------------------------------------------------------ cbrt
# |x| = 2**(3q) m with m in [1, 8), built from the bits (no power of two out of range);
# cbrt(m) estimated from the bits of m (a third of the exponent and mantissa field, as if
# they were a logarithm: about 5 bits), refined by two Halley steps t (t**3 + 2m) /
# (2 t**3 + m), each tripling the bits, then rounded to 21 bits so that its square is
# exact, and one last step computed from that exact square: t + t (m/t**2 - t) / (2t +
# m/t**2).  Exact cubes give their root exactly (the last step lands far within half an
# ulp of it).  float32 stops after the Halley steps (45 bits) and rounds once.


def _cbrt_f64_reduced(x, single):  # type: ignore[no-untyped-def]
    """``cbrt(x)`` for a positive finite (possibly subnormal) ``x``."""
    tiny = x < 2.2250738585072014e-308
    normal = x * (18014398509481984.0 if tiny else 1.0)  # 2**54, cube root 2**18
    bits = np.float64(normal).view(np.int64)
    exponent = (bits >> 52) - (1023 + 54 if tiny else 1023)
    # third = floor(exponent / 3), in float64 (exact: the 1/6 margin dwarfs the roundings)
    _whole, third = _round_to_int(np.floor((_int_to_f64(exponent) + 0.5) * 0.3333333333333333))
    m = np.int64((bits & 0x000FFFFFFFFFFFFF) | ((exponent - 3 * third + 1023) << 52)).view(
        np.float64)
    # The high word of m over 3, plus 2/3 of the exponent bias (682 << 20) less 0.033 of
    # an exponent step (which balances the estimate's errors).
    high = _int_to_f64(np.int64(m.view(np.int64)) >> 32) * 0.3333333333333333
    estimate = _round_to_int(high + 715094162.0)[1]
    t = np.int64(estimate << 32).view(np.float64)
    cube = t * t * t
    t = t * (cube + m + m) / (cube + cube + m)
    cube = t * t * t
    t = t * (cube + m + m) / (cube + cube + m)
    if not single:
        t = np.int64((t.view(np.int64) + 2147483648) & -4294967296).view(np.float64)
        square = t * t  # exact: t has 21 significant bits
        ratio = m / square
        t = t + t * ((ratio - t) / ((t + t) + ratio))
    return t * _pow2_f64(third)


def cbrt_f64(x):  # type: ignore[no-untyped-def]
    magnitude = abs(x)
    ordinary = x == x and magnitude != 0.0 and magnitude != math.inf
    result = math.copysign(_cbrt_f64_reduced(magnitude if ordinary else 1.0, False), x)
    if ordinary:
        return result
    return x  # NaN, +-0 and +-inf are their own cube roots


def cbrt_f32(x):  # type: ignore[no-untyped-def]
    magnitude = abs(np.float64(x))
    ordinary = x == x and magnitude != 0.0 and magnitude != math.inf
    result = np.float32(math.copysign(_cbrt_f64_reduced(
        magnitude if ordinary else 1.0, True), np.float64(x)))
    if ordinary:
        return result
    return x


FUNCTIONS = (*FUNCTIONS, "cbrt")

# ------------------------------------------------------------------ exp2, log2, log10
# exp2: x = k + r with k the nearest integer (r = x - k is exact, |r| <= 1/2), 2**r by its
# Taylor series in r (coefficients ln(2)**n / n!, truncation below 5e-18), scaled by 2**k
# in two factors as exp's; an integer argument gives r = 0 and an exact power of two.
# log2 and log10: log(x) = e ln 2 + hi + lo with hi keeping 21 significant bits of the
# reduced logarithm, so its products with the high parts of 1/ln 2 and 1/ln 10 are exact
# and e is added with its rounding error recovered: exact powers of two give log2(2**e) ==
# e exactly, and the results are within about half an ulp and a rounding.


def _exp2_f64_finite(x):  # type: ignore[no-untyped-def]
    """``2 ** x`` for ``x`` 0 or at least 1e-30 in magnitude, ``|x| <= 1100``; the last
    multiplication overflows or underflows exactly when the result does."""
    k, scale = _round_to_int(x)
    r = x - k
    q = 1.5252733804059841e-05 + r * (1.321548679014431e-06 + r * (
        1.01780860092397e-07 + r * (7.054911620801123e-09 + r * (
            4.4455382718708116e-10 + r * (2.5678435993488206e-11 + r * 1.3691488853904128e-12)))))
    q = 0.6931471805599453 + r * (0.24022650695910072 + r * (0.05550410866482158 + r * (
        0.009618129107628477 + r * (0.0013333558146428443 + r * (
            0.0001540353039338161 + r * q)))))
    p = 1.0 + r * q
    half = scale >> 1
    return (p * _pow2_f64(half)) * _pow2_f64(scale - half)


def exp2_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    infinite = abs(clean) == math.inf
    negligible = abs(clean) < 1e-30  # 2**x rounds to 1; keeps r * r from underflowing
    argument = 0.0 if (infinite or negligible) else min(max(clean, -1100.0), 1100.0)
    result = _exp2_f64_finite(argument)
    if x != x:
        return x
    if infinite:
        return math.inf if clean > 0 else 0.0
    return result


def _log_series_f64(z):  # type: ignore[no-untyped-def]
    """``R`` of ``log(1 + f) = 2s + s R`` with ``z = s * s <= 0.0295``: ``z P(z)``, P of
    degree 6 fitted (weighted least squares, near-minimax) so that ``s R`` is within
    1.6e-18 of the logarithm (``_log_f64_reduced``'s Taylor series needs degree 10)."""
    p = 0.22222198598783463 + z * (0.18183563092454957 + z * (
        0.15314080014092718 + z * 0.14795672575533336))
    return z * (0.6666666666666734 + z * (0.3999999999941595 + z * (
        0.2857142874211825 + z * p)))


def _log_parts_f64(x):  # type: ignore[no-untyped-def]
    """``log(x) = e ln 2 + hi + lo`` for a positive finite (possibly subnormal) ``x``:
    (e as a float64, hi, lo), ``hi`` with at most 21 significant bits."""
    exponent, mantissa = _log_reduction_f64(x)
    f = mantissa - 1.0  # exact
    s = f / (2.0 + f)
    R = _log_series_f64(s * s)
    # log(1 + f) = f - f*f/2 + s (f*f/2 + R); its leading part truncated to 21 bits
    # (f - hi is then exact), the rest in lo.
    square = 0.5 * f * f
    hi = np.int64(np.float64(f - square).view(np.int64) & -4294967296).view(np.float64)
    lo = ((f - hi) - square) + s * (square + R)
    return _int_to_f64(exponent), hi, lo


def _log2_f64_finite(x):  # type: ignore[no-untyped-def]
    e, hi, lo = _log_parts_f64(x)
    # 1/ln 2 in two parts, the high one with 33 significant bits.
    high = hi * 1.4426950407214463
    low = (lo + hi) * 1.6751713164886512e-10 + lo * 1.4426950407214463
    total = e + high
    return ((e - total) + high + low) + total


def _log10_f64_finite(x):  # type: ignore[no-untyped-def]
    e, hi, lo = _log_parts_f64(x)
    # log10(2) and 1/ln 10 in two parts; e * 0.30102999566361177 is exact (40 bits).
    exponent_part = e * 0.30102999566361177
    high = hi * 0.4342944818781689
    low = (e * 3.694239077158931e-13 + (lo + hi) * 2.5082946711645275e-11
           + lo * 0.4342944818781689)
    total = exponent_part + high
    return ((exponent_part - total) + high + low) + total


def log2_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 1.0
    result = _log2_f64_finite(min(max(clean, 5e-324), 1.7976931348623157e308))
    if x != x or clean == math.inf:
        return x
    if hidden(clean) <= 0:  # -inf, "divide by zero" / NaN, "invalid": see _log_of_nonpositive
        return _log_of_nonpositive(clean)
    return result


def log10_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 1.0
    result = _log10_f64_finite(min(max(clean, 5e-324), 1.7976931348623157e308))
    if x != x or clean == math.inf:
        return x
    if hidden(clean) <= 0:  # see _log_of_nonpositive
        return _log_of_nonpositive(clean)
    return result


# float32 exp2 computes in float32 (eight lanes): the same reduction, 2**r by a polynomial
# fitted to within 2.3e-9 (near-minimax on [-1/2, 1/2], coefficients rounded to float32).
# float32 log2 and log10 compute in float64 and round once.


def _exp2_f32_finite(x):  # type: ignore[no-untyped-def]
    """``2 ** x`` for a float32 ``x``, 0 or at least 2**-26 in magnitude, ``|x| <= 160``;
    the last multiplication overflows or underflows exactly when the result does."""
    k, scale = _round_to_int_f32(x)
    r = x - k  # exact
    q = np.float32(0.0013333935057744384) + r * (np.float32(0.00015466757758986205) + r * (
        np.float32(1.519614761491539e-05)))
    q = np.float32(0.6931471824645996) + r * (np.float32(0.24022650718688965) + r * (
        np.float32(0.055504102259874344) + r * (np.float32(0.009618038311600685) + r * q)))
    p = np.float32(1.0) + r * q
    half = scale >> 1
    return (p * _pow2_f32(half)) * _pow2_f32(scale - half)


def exp2_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    infinite = abs(clean) == math.inf
    negligible = abs(clean) < np.float32(1.4901161193847656e-08)  # 2**x rounds to 1
    argument = np.float32(0.0) if (infinite or negligible) else \
        min(max(clean, np.float32(-160.0)), np.float32(160.0))
    result = _exp2_f32_finite(argument)
    if x != x:
        return x
    if infinite:
        return np.float32(math.inf) if clean > 0 else np.float32(0.0)
    return result


def _scaled_log_f64(x, scale):  # type: ignore[no-untyped-def]
    """``log(x) * scale`` to float32 accuracy (the short polynomial, no high and low
    parts: float64 leaves 29 bits to spare, and log2 of a power of two still rounds to
    its exponent), with log_f64's special values and flags."""
    clean = x if x == x else 1.0
    logarithm, _quotient = _log_f64_reduced(min(max(clean, 5e-324), 1.7976931348623157e308),
                                            True, False)
    result = logarithm * scale
    if x != x or clean == math.inf:
        return x
    if hidden(clean) <= 0:  # see _log_of_nonpositive
        return _log_of_nonpositive(clean)
    return result


def log2_f32(x):  # type: ignore[no-untyped-def]
    return np.float32(_scaled_log_f64(np.float64(x), 1.4426950408889634))


def log10_f32(x):  # type: ignore[no-untyped-def]
    return np.float32(_scaled_log_f64(np.float64(x), 0.4342944819032518))


FUNCTIONS = (*FUNCTIONS, "exp2", "log2", "log10")


# ------------------------------------------------------------------ sinh and cosh
# Below 1 (sinh) and 1/2 (cosh) their Taylor series (truncation below 1e-17 of the
# result); above, h +- 1/(4h) with h = exp(|x|)/2 computed with the halving in its power of
# two, so sinh(710) and cosh(710) are finite though exp(710) is not, and h overflows
# (raising the flag) exactly when the result does; past |x| = 22 the 1/(4h) term is below
# half an ulp.


def _expm1_f64_kernel(r):  # type: ignore[no-untyped-def]
    """``exp(r) - 1`` for ``|r| <= ln(2) / 2``: its Taylor series to r**13 (as
    ``_expm1_f64_reduced``'s), accurate relative to r."""
    q = 2.755731922398589e-07 + r * (2.505210838544172e-08 + r * (
        2.08767569878681e-09 + r * 1.6059043836821613e-10))
    q = 0.001388888888888889 + r * (0.0001984126984126984 + r * (
        2.48015873015873e-05 + r * (2.7557319223985893e-06 + r * q)))
    q = 0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
        0.008333333333333333 + r * q)))
    return r + (r * r) * q


def _half_exp_f64(x):  # type: ignore[no-untyped-def]
    """``exp(x) / 2`` for a finite ``0 <= x <= 1000``, three ways: a power of two ``high``
    and ``low`` whose exact sum it is for ``x < 22`` (``low`` carries the reduced
    exponential's rounding error, not 1 + low's; their sum is at most 2**40 for any x),
    and the rounded value, whose last multiplication overflows (raising the flag) exactly
    when the value does."""
    k, scale = _round_to_int(x * 1.4426950408889634)
    r = (x - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    m = _expm1_f64_kernel(r)
    high = _pow2_f64(min(scale, np.int64(40)) - 1)
    scale = scale - 1
    half = scale >> 1
    return high, high * m, ((1.0 + m) * _pow2_f64(half)) * _pow2_f64(scale - half)


def sinh_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 3.725290298461914e-09  # 2**-28: sinh(x) rounds to x
    a = 0.0 if negligible else min(magnitude, 1.0)
    z = a * a
    q = 2.505210838544172e-08 + z * (1.6059043836821613e-10 + z * (
        7.647163731819816e-13 + z * (2.8114572543455206e-15 + z * 8.22063524662433e-18)))
    q = 0.16666666666666666 + z * (0.008333333333333333 + z * (
        0.0001984126984126984 + z * (2.7557319223985893e-06 + z * q)))
    small = a + a * (z * q)
    # 0 or 2**-28 <= |x| <= 1000 (r * r must not underflow), infinities answered below.
    # Tested on a hidden copy: LLVM saw that h is used only where |x| is finite, dropped
    # the test and computed exp(1000) (overflow) for infinities.
    high, low, h = _half_exp_f64(0.0 if (hidden(magnitude) == math.inf or negligible)
                                 else min(magnitude, 1000.0))
    moderate = high + (low - 0.25 / (high + low))  # (not / h: 1/h underflows)
    result = math.copysign(small if magnitude < 1.0 else (
        moderate if magnitude < 22.0 else h), clean)
    if x != x or magnitude == math.inf:
        return x
    if negligible:
        return x + _subnormal_underflow_f64(clean)
    return result


def cosh_f64(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    # below 2**-28 the series is 1 (and z would underflow)
    negligible = magnitude < 3.725290298461914e-09
    a = 0.0 if negligible else min(magnitude, 0.5)
    z = a * a
    q = 2.755731922398589e-07 + z * (2.08767569878681e-09 + z * (
        1.1470745597729725e-11 + z * 4.779477332387385e-14))
    q = 0.5 + z * (0.041666666666666664 + z * (0.001388888888888889 + z * (
        2.48015873015873e-05 + z * q)))
    small = 1.0 + z * q
    high, low, h = _half_exp_f64(0.0 if (hidden(magnitude) == math.inf or negligible)
                                 else min(magnitude, 1000.0))  # see sinh_f64
    moderate = high + (low + 0.25 / (high + low))  # (not / h: 1/h underflows)
    if x != x:
        return x
    if magnitude == math.inf:
        return magnitude
    if magnitude < 0.5:
        return small
    if magnitude < 22.0:
        return moderate
    return h


# float32 in float32 (eight lanes): the same forms, Taylor series to float32 accuracy,
# exp(|x|)/2 from the float32 reduction, 1/(4h) negligible past |x| = 9, overflow past
# 89.42.


def _half_exp_f32(x):  # type: ignore[no-untyped-def]
    """``_half_exp_f64`` in float32, for a finite ``0 <= x <= 100`` (``high`` at most
    2**20)."""
    r, scale = _reduce_ln2_f32(x)
    m = _expm1_f32_kernel(r)
    high = _pow2_f32(min(scale, np.int32(20)) - np.int32(1))
    scale = scale - np.int32(1)
    half = scale >> 1
    return high, high * m, ((np.float32(1.0) + m) * _pow2_f32(half)) * _pow2_f32(scale - half)


def _half_exp_argument_f32(magnitude, negligible):  # type: ignore[no-untyped-def]
    """The argument of ``_half_exp_f32`` for ``|x|``: 0 for infinities (tested on a hidden
    copy, see sinh_f64) and negligible ones, else clamped to 100."""
    if hidden(magnitude) == math.inf or negligible:
        return np.float32(0.0)
    return min(magnitude, np.float32(100.0))


def sinh_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    negligible = magnitude < np.float32(0.000244140625)  # 2**-12: sinh(x) rounds to x
    a = np.float32(0.0) if negligible else min(magnitude, np.float32(1.0))
    z = a * a
    q = np.float32(2.7557318844628753e-06) + z * (np.float32(2.5052107943679403e-08) + z * (
        np.float32(1.6059044372074283e-10)))
    q = np.float32(0.1666666716337204) + z * (np.float32(0.008333333767950535) + z * (
        np.float32(0.00019841270113829523) + z * q))
    small = a + a * (z * q)
    high, low, h = _half_exp_f32(_half_exp_argument_f32(magnitude, negligible))
    moderate = high + (low - np.float32(0.25) / (high + low))
    result = np.copysign(small if magnitude < np.float32(1.0) else (
        moderate if magnitude < np.float32(9.0) else h), clean)
    if x != x or magnitude == math.inf:
        return x
    if negligible:
        return x + _subnormal_underflow_f32(clean)
    return result


def cosh_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    magnitude = abs(clean)
    negligible = magnitude < np.float32(0.000244140625)  # 2**-12: cosh(x) rounds to 1
    a = np.float32(0.0) if negligible else min(magnitude, np.float32(0.5))
    z = a * a
    q = np.float32(0.0013888889225199819) + z * (np.float32(2.4801587642286904e-05) + z * (
        np.float32(2.755731998149713e-07)))
    small = np.float32(1.0) + z * (np.float32(0.5) + z * (
        np.float32(0.0416666679084301) + z * q))
    high, low, h = _half_exp_f32(_half_exp_argument_f32(magnitude, negligible))
    moderate = high + (low + np.float32(0.25) / (high + low))
    if x != x:
        return x
    if magnitude == math.inf:
        return magnitude
    if magnitude < np.float32(0.5):
        return small
    if magnitude < np.float32(9.0):
        return moderate
    return h


FUNCTIONS = (*FUNCTIONS, "sinh", "cosh")


# ------------------------------------------------------------------ inverse hyperbolic
# arcsinh and arccosh as log(w) with w = |x| + sqrt(x*x +- 1) = 1 + u, computed as
# log1p(u) is (log(1 + u) plus the rounding of 1 + u); past 2**28, log(|x|) + ln 2, so
# huge arguments do not overflow.  arctanh as log1p(2|x| / (1 - |x|)) / 2, the argument
# written 2|x| + 2x*x / (1 - |x|) below 1/2 (as glibc does).  Arguments outside the
# domain get their NaN or infinity (and flag) from _log_of_nonpositive or a square root
# of a negative number.


def _log1p_parts_f64(u, error, huge, short):  # type: ignore[no-untyped-def]
    """``log(1 + u + error)`` for a finite ``u >= 0`` and a tiny ``error`` (u's own
    rounding error, to first order), or ``log(huge) + ln 2`` where ``huge`` (a finite
    number, or 0.0 to take the first form); ``short``: to float32 accuracy."""
    w = 1.0 + u
    correction = ((u - (w - 1.0)) + error) / w
    logarithm, _quotient = _log_f64_reduced(huge if huge > 0.0 else w, short, False)
    return logarithm + (0.6931471805599453 if huge > 0.0 else correction)


def _sqrt_with_error_f64(v):  # type: ignore[no-untyped-def]
    """``sqrt(v)`` for ``v`` 0 or ``2**-60 <= v < 2**60``, and its rounding error to first
    order: ``(v - s*s) / 2s`` (0 for 0), with ``s*s`` exact as the sum of products of
    s's 26-bit high part and its low part (Dekker's split; no fused multiply-add needed)."""
    s = np.sqrt(v)
    high = np.int64(np.float64(s).view(np.int64) & -134217728).view(np.float64)
    low = s - high
    residual = ((v - high * high) - (high + high) * low) - low * low
    return s, residual / max(s + s, 1e-300)  # (no 0 / 0 for v = 0)


def arcsinh_f64(x):  # type: ignore[no-untyped-def]
    return _arcsinh_f64(x, False)


def _arcsinh_f64(x, short):  # type: ignore[no-untyped-def]
    """``arcsinh(x)``; ``short``: to float32 accuracy."""
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 3.725290298461914e-09  # 2**-28: arcsinh(x) rounds to x
    a = 0.0 if negligible else min(magnitude, 268435456.0)
    t = a * a
    c = t / (1.0 + np.sqrt(1.0 + t))
    u = a + c  # asinh(a) = log1p(a + sqrt(1 + a*a) - 1)
    error = 0.0 if short else (a - u) + c  # u's rounding error (Fast2Sum: a >= c)
    huge = min(magnitude, 1.7976931348623157e308) if magnitude > 268435456.0 else 0.0
    result = math.copysign(_log1p_parts_f64(u, error, huge, short), clean)
    if x != x or magnitude == math.inf:
        return x
    if negligible:
        return x + _subnormal_underflow_f64(clean)  # as numpy's, see sinh_f64
    return result


def arccosh_f64(x):  # type: ignore[no-untyped-def]
    return _arccosh_f64(x, False)


def _arccosh_f64(x, short):  # type: ignore[no-untyped-def]
    """``arccosh(x)``; ``short``: to float32 accuracy (without carrying the rounding
    errors of the square root along)."""
    clean = x if x == x else 1.0
    argument = min(max(clean, 1.0), 268435456.0)
    t = argument - 1.0  # exact
    # acosh(x) = log1p(x - 1 + sqrt(x*x - 1)): near 1 the rounding errors of the square
    # root and of its argument are most of the result's, so they are carried along.
    square = t * t
    radicand = (t + t) + square
    radicand_error = ((t + t) - radicand) + square if t <= 2.0 else \
        (square - radicand) + (t + t)  # the larger term first: exact (Fast2Sum)
    root, root_error = _sqrt_with_error_f64(radicand)
    u = t + root
    u_error = ((root - u) + t) + (root_error + radicand_error / max(root + root, 1e-300))
    if short:
        u_error = 0.0
    huge = min(clean, 1.7976931348623157e308) if clean > 268435456.0 else 0.0
    result = _log1p_parts_f64(u, u_error, huge, short)
    if x != x or clean == math.inf:
        return x
    seen = hidden(clean)
    if seen < 1.0:
        return np.sqrt(seen - 1.0)  # NaN, with numpy's "invalid"
    return result


def arctanh_f64(x):  # type: ignore[no-untyped-def]
    return _arctanh_f64(x, False)


def _arctanh_f64(x, short):  # type: ignore[no-untyped-def]
    """``arctanh(x)``; ``short``: to float32 accuracy."""
    clean = x if x == x else 0.0
    magnitude = abs(clean)
    negligible = magnitude < 3.725290298461914e-09  # 2**-28: arctanh(x) rounds to x
    a = 0.0 if negligible else min(magnitude, 0.9999999999999999)
    d = 1.0 - a
    t = a + a
    c = t * a / d
    u = t / d if a >= 0.5 else t + c
    # below 1/2, u's rounding error (Fast2Sum: t >= c there)
    error = 0.0 if (short or a >= 0.5) else (t - u) + c
    result = math.copysign(0.5 * _log1p_parts_f64(u, error, 0.0, short), clean)
    if x != x:
        return x
    if negligible:
        return x + _subnormal_underflow_f64(clean)  # as numpy's, see sinh_f64
    seen = hidden(magnitude)
    if seen >= 1.0:
        # 1 - |x| <= 0: +inf with "divide by zero" at 1, NaN with "invalid" beyond
        return math.copysign(-_log_of_nonpositive(1.0 - seen), clean)
    return result


def arcsinh_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    return np.float32(_arcsinh_f64(np.float64(x), True)) + _subnormal_underflow_f32(clean)


def arccosh_f32(x):  # type: ignore[no-untyped-def]
    return np.float32(_arccosh_f64(np.float64(x), True))


def arctanh_f32(x):  # type: ignore[no-untyped-def]
    clean = x if x == x else np.float32(0.0)
    return np.float32(_arctanh_f64(np.float64(x), True)) + _subnormal_underflow_f32(clean)


FUNCTIONS = (*FUNCTIONS, "arcsinh", "arccosh", "arctanh")


# ------------------------------------------------------------------ power
# x ** y = exp(y log x), with log x in two parts good to about 2**-66 of its value (so
# that y log x, up to 745 where the result is finite, keeps its last bits), their product
# with y in two parts (``_exact_product``), and exp of that sum reduced by ln 2 as ``exp``'s,
# the low part added to the reduced argument.  log(1 + f) = 2 atanh(s), s = f / (2 + f):
# 2s and (2/3) s**3 are taken in two parts (s exactly as f / (2 + f) to 2**-105; the cube
# through error-free products), the rest of the series, below 2e-4 of the logarithm, in
# plain arithmetic.  exp of the two parts is rounded once from a value within about 0.1
# ulp (``_exp_two_parts_f64``): the largest error measured against the exact value is
# 0.5 ulp, exactly representable results come out exact, and about 5% of results differ
# by an ulp from numpy's (its AVX-512 ``pow`` is not correctly rounded), as libm's do.
# float32 computes in float64 and rounds once.  Special values, signs and flags are C99's
# (numpy's loops call ``pow``):
# a negative base to a non-integer power is NaN with "invalid", zero to a negative power
# infinite with "divide by zero", a result beyond the range infinite with "overflow"; the
# infinite and unit cases raise nothing.  ``kernel_lib.power_float`` adds numpy's own
# flags where its loop raises more than ``pow``.


def _exact_product(a, b):  # type: ignore[no-untyped-def]
    """``(p, e)``: the rounded product and its exact error, by one fused multiply-add
    (``_two_product`` takes 17 operations; where the machine has no FMA instruction, the
    C library's ``fma`` is called, exact too)."""
    p = a * b
    return p, fused_multiply_add(a, b, -p)


def _two_sum(a, b):  # type: ignore[no-untyped-def]
    """``(s, e)``: the rounded sum and its exact error, for any two finite numbers."""
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


def _atanh_tail(z):  # type: ignore[no-untyped-def]
    """``sum(2 / (2k + 1) z**(k - 2) for k = 2 .. 13)``: Taylor's coefficients of 2 atanh."""
    inner = 0.09523809523809523 + z * (0.08695652173913043 + z * (
        0.08 + z * 0.07407407407407407))
    return 0.4 + z * (0.2857142857142857 + z * (0.2222222222222222 + z * (
        0.18181818181818182 + z * (0.15384615384615385 + z * (0.13333333333333333 + z * (
            0.11764705882352941 + z * (0.10526315789473684 + z * inner)))))))


def _log_two_parts_f64(x):  # type: ignore[no-untyped-def]
    """``log(x)`` as ``hi + lo`` for a positive finite (possibly subnormal) ``x``, within
    about 2**-66 of its value."""
    exponent, mantissa = _log_reduction_f64(x)
    e = _int_to_f64(exponent)
    f = mantissa - 1.0  # exact, |f| < 0.42
    # s = f / (2 + f) in two parts: 2 + f is exactly u + u_low, and s's rounding error is
    # recovered from the exact residual f - s (u + u_low)
    # (one division: s's rounding, an ulp or two, is what s_low recovers)
    u = 2.0 + f
    u_low = f - (u - 2.0)
    inverse = 1.0 / u
    s = f * inverse
    product, product_error = _exact_product(s, u)
    s_low = (((f - product) - product_error) - s * u_low) * inverse
    # (2/3) s**3 in two parts, from exact products of s (|s| < 0.18, far from subnormal
    # products but where f is 0, all zero)
    square, square_error = _exact_product(s, s)
    square_error = square_error + 2.0 * s * s_low
    cube, cube_error = _exact_product(square, s)
    cube_error = cube_error + square_error * s + square * s_low
    third, third_error = _exact_product(cube, 0.6666666666666666)
    third_error = third_error + cube_error * 0.6666666666666666 + cube * 3.700743415417188e-17
    # the rest of the series: (2/5) s**5 + (2/7) s**7 + ... + (2/27) s**27 = s z**2 P(z)
    # (z < 0.0295: the terms left out are below 5e-24)
    z = square
    rest = s * (z * z) * _atanh_tail(z)
    # e ln 2 (its high part exact) + 2s + third + rest, summed in two parts
    high, high_error = _two_sum(e * 0.6931471803691238, 2.0 * s)
    high, middle = _two_sum(high, third)
    low = (high_error + middle) + (
        ((e * 1.9082149292705877e-10 + 2.0 * s_low) + third_error) + rest)
    return _fast_two_sum(high, low)


def _exp_tail_f64(r):  # type: ignore[no-untyped-def]
    """``(exp(r) - 1 - r) / r**2`` for ``|r| <= 0.35``: the Taylor series of ``exp`` from
    its r**2 term to r**13 (below 5e-18 left out; compiled contracted)."""
    q = 2.755731922398589e-07 + r * (2.505210838544172e-08 + r * (
        2.08767569878681e-09 + r * 1.6059043836821613e-10))
    q = 0.001388888888888889 + r * (0.0001984126984126984 + r * (
        2.48015873015873e-05 + r * (2.7557319223985893e-06 + r * q)))
    return 0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
        0.008333333333333333 + r * q)))


def _exp_two_parts_f64(hi, lo):  # type: ignore[no-untyped-def]
    """``exp(hi + lo)`` for ``|hi| <= 1000``, ``|lo| <= 2**-40 |hi|`` or 0, rounded once
    from a value within about 0.1 ulp (exactly representable results come out exact); the
    last multiplication overflows or underflows exactly when the result does."""
    k, scale = _round_to_int(hi * 1.4426950408889634)
    # the reduced argument in two parts: hi - k ln2_high is exact, the rest small
    r, r_error = _two_sum(hi - k * 0.6931471803691238, lo - k * 1.9082149292705877e-10)
    # exp(r + r_error) = (1 + r) + r**2 tail(r) + r_error (1 + r), 1 + r taken exactly
    one_plus, one_error = _fast_two_sum(1.0, r)
    p = one_plus + (one_error + (r * r * _exp_tail_f64(r) + r_error * (1.0 + r)))
    half = scale >> 1
    return (p * _pow2_f64(half)) * _pow2_f64(scale - half)


def power_f32(x, y):  # type: ignore[no-untyped-def]
    """``powf``: ``power_f64`` of the float64 values, rounded once -- overflowing or
    underflowing in the rounding where the float32 result does; a float32 result halfway
    between two float32 numbers is exact in float64, and rounds to even as numpy's."""
    return np.float32(power_f64(np.float64(x), np.float64(y)))


def power_f64(x, y):  # type: ignore[no-untyped-def]
    """C99's ``pow(x, y)`` (see the section's comment)."""
    clean_x = x if x == x else 1.0
    clean_y = y if y == y else 0.0
    magnitude_y = abs(clean_y)
    infinite_y = magnitude_y == math.inf
    # an integer y, and an odd one (every float from 2**53 on is even)
    whole_y = clean_y if magnitude_y < 9007199254740992.0 else 0.0
    integral = np.floor(whole_y) == whole_y
    odd = integral and np.floor(whole_y * 0.5) != whole_y * 0.5
    signed = np.float64(clean_x).view(np.int64) < 0  # -0.0 included
    base = abs(clean_x)
    zero_x = base == 0.0
    infinite_x = base == math.inf
    special = zero_x or infinite_x or infinite_y or clean_x == 1.0 or clean_y == 0.0
    invalid = signed and not integral and not special  # a negative base, y not whole
    # the core, exp(y log |x|), computed on 1 ** 0 in the lanes answered otherwise (no flag)
    core_x = 1.0 if (special or invalid) else base
    core_y = 0.0 if (special or invalid) else min(max(clean_y, -1.8446744073709552e19),
                                                   1.8446744073709552e19)
    log_high, log_low = _log_two_parts_f64(core_x)
    t, t_error = _exact_product(core_y, log_high)
    t_error = t_error + core_y * log_low
    beyond = abs(t) > 1000.0  # (beyond the range: the clamped exponent says so)
    negligible = abs(t) < 1e-30  # the result rounds to 1
    hi = 0.0 if negligible else min(max(t, -1000.0), 1000.0)
    lo = 0.0 if (beyond or negligible) else t_error
    result = _exp_two_parts_f64(hi, lo)
    negated = signed and odd
    if negated:
        result = -result
    # A negative base to a non-integer power: +inf - +inf, "invalid" in those lanes only;
    # zero to a negative finite power: 1 / +-0, "divide by zero" in those lanes only.  Each
    # answer is taken where it is NaN (infinite), not by its lanes' test: under that test
    # LLVM would know the hidden operands and compute the flagging operation in every lane.
    infinite = hidden(math.inf if invalid else 0.0)
    not_a_number = infinite - infinite
    pole = zero_x and clean_y < 0.0 and not infinite_y
    quotient = np.float64(1.0) / hidden((-0.0 if negated else 0.0) if pole else 1.0)
    if not_a_number != not_a_number:
        result = not_a_number
    if infinite_y:  # a finite base: |x| < 1 vanishes or grows without bound, -1 stays
        result = 1.0 if base == 1.0 else (
            0.0 if (base < 1.0) == (clean_y > 0.0) else math.inf)
    if infinite_x:
        result = (-0.0 if negated else 0.0) if clean_y < 0.0 else (
            -math.inf if negated else math.inf)
    if zero_x:
        result = math.inf if clean_y < 0.0 else (-0.0 if negated else 0.0)
    if abs(quotient) == math.inf:
        result = quotient
    if x != x or y != y:  # (NaN chosen, not computed: x + y would add infinities)
        result = x if x != x else y
    if x == 1.0 or y == 0.0:
        result = 1.0
    return result



HELPERS = tuple(
    name for name, value in list(globals().items())
    if callable(value) and not name.startswith("__") and value.__module__ == __name__
    and name != "enabled_from_environment"
)

# Helpers compiled with floating-point contraction (see the float32 section), and the
# float64 polynomial kernels: a multiply-add fused where the machine has the instruction
# (one rounding instead of two) makes each Horner step as accurate or more, and on AVX2
# halves the instructions of the polynomials (exp of 1e5 float64: about 1.4x faster).
# Kept to functions whose every product is either exact or a polynomial term: the flags
# and the error recoveries around them are computed as written.
CONTRACTED = frozenset(name for name in HELPERS if name.endswith("_f32")) | {
    "_exp_f64_reduced", "_expm1_f64_reduced", "_log_f64_reduced", "_sin_kernel",
    "_cos_kernel", "_exp2_f64_finite", "_expm1_f64_kernel", "_half_exp_f64", "_log_series_f64",
    "_exp_tail_f64", "_atanh_tail"}
