"""Scalar functions with numpy's exact semantics, used by the generated kernels.

They are plain Python: a generated kernel module imports the ones it uses by name, and the
backend replaces them with compiled versions before compiling the kernel, so a generated
file also runs (slowly) without numba.  Each function mirrors numpy's C loop for the same
operation, including its answers for division by zero, NaN and out-of-range shifts, so a
fused kernel returns what the numpy ufunc would.
"""

from __future__ import annotations

import ctypes
import math
import platform
import threading

import numpy as np

from .vector_math import ENABLED as VECTOR_POWER
from .vector_math import (
    exp2_f64,
    exp_f64,
    fused_multiply_add,
    hidden,
    power_f32,
    power_f64,
)

# ------------------------------------------------------------------ floating-point flags
#
# numpy reports division by zero, overflow and invalid operations by reading the CPU's
# floating-point status flags after a ufunc loop.  Integer operations never set them, and
# LLVM deletes, folds or speculates float operations freely, so a helper that must report
# one (integer division by zero, ``MIN // -1``, a NaN in ``logaddexp``) calls the C
# library's ``feraiseexcept``: an external call LLVM can neither remove nor speculate,
# made only on the rare path that needs it.  The backend compiles ``raise_invalid``,
# ``raise_divide_by_zero`` and ``raise_overflow`` to that call by its symbol name (so the
# kernels stay cacheable), with the flag values of ``FLAG_RAISERS``; the plain-Python
# versions below do nothing.

# <fenv.h>'s FE_INVALID, FE_DIVBYZERO and FE_OVERFLOW, which differ between architectures.
_FE_FLAGS = {
    "x86_64": (1, 4, 8), "amd64": (1, 4, 8), "i386": (1, 4, 8), "i686": (1, 4, 8),
    "aarch64": (1, 2, 4), "arm64": (1, 2, 4),
}
_MACHINE_FLAGS = _FE_FLAGS.get(platform.machine().lower())

# helper name -> the flag it raises; empty where the flag values are unknown (the helpers
# then stay no-ops and those warnings are missed).
FLAG_RAISERS: dict[str, int] = {} if _MACHINE_FLAGS is None else dict(
    zip(("raise_invalid", "raise_divide_by_zero", "raise_overflow"), _MACHINE_FLAGS,
        strict=True))


def raise_invalid():  # type: ignore[no-untyped-def]
    """Raise the "invalid value" flag (compiled by the backend; see ``FLAG_RAISERS``)."""
    return None


def raise_divide_by_zero():  # type: ignore[no-untyped-def]
    return None


def raise_overflow():  # type: ignore[no-untyped-def]
    return None


# ------------------------------------------------------------------ run-time errors
#
# numpy raises ValueError for an integer power with a negative exponent.  A compiled loop
# cannot raise, so the helper notes the error through a C callback into Python (taken only
# on that error path) and the runtime raises it after the kernel returns.

NEGATIVE_POWER_MESSAGE = "Integers to negative integer powers are not allowed."
kernel_errors = threading.local()  # .negative_power: set on the thread that ran the loop


def _note_negative_power() -> None:
    kernel_errors.negative_power = True


# The C function compiled kernels call (the backend registers its address under the
# symbol ``EXTERNAL["note_negative_power"]``, so kernels calling it can be cached).
NEGATIVE_POWER_CALLBACK = ctypes.CFUNCTYPE(None)(_note_negative_power)


def note_negative_power():  # type: ignore[no-untyped-def]
    NEGATIVE_POWER_CALLBACK()


# Helpers that call out of a compiled kernel, by name: the flag raisers call the C
# library's ``feraiseexcept`` with ``FLAG_RAISERS[name]`` (None here), the others the C
# function registered under the symbol given.  Their plain-Python versions above stand
# in for a kernel run without compiling.
EXTERNAL: dict[str, str | None] = {
    "raise_invalid": None, "raise_divide_by_zero": None, "raise_overflow": None,
    "note_negative_power": "numfuse_note_negative_power",
}

# ------------------------------------------------------------------ integer division


def floor_divide_int(a, b, min_value):  # type: ignore[no-untyped-def]
    """``a // b`` rounding toward -inf; numpy returns 0 for a zero divisor (warning "divide
    by zero") and wraps ``MIN // -1`` to ``MIN`` (warning "overflow")."""
    if b == 0:
        raise_divide_by_zero()
        return a - a
    if b == -1:
        if a == min_value:
            raise_overflow()
        return -a
    return a // b


def remainder_int(a, b):  # type: ignore[no-untyped-def]
    """Python-style modulo (sign of the divisor); 0 for a zero divisor ("divide by zero")."""
    if b == 0:
        raise_divide_by_zero()
        return a - a
    if b == -1:
        return a - a
    return a % b


def fmod_int(a, b):  # type: ignore[no-untyped-def]
    """C-style remainder (sign of the dividend); 0 for a zero divisor ("divide by zero")."""
    if b == 0:
        raise_divide_by_zero()
        return a - a
    if b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r = r - b
    return r


def power_int(a, b):  # type: ignore[no-untyped-def]
    """Integer power by squaring in 64-bit unsigned arithmetic, which wraps on overflow
    exactly as numpy's loop does once the result is cast back to the loop dtype.

    numpy raises ValueError for a negative exponent: the helper notes it (see
    ``note_negative_power``) and returns 0; the runtime raises after the kernel.
    """
    if b < 0:
        note_negative_power()
        return np.uint64(0)
    result = np.uint64(1)
    base = np.uint64(a) if a >= 0 else np.uint64(0) - np.uint64(-(a + 1)) - np.uint64(1)
    exponent = np.uint64(b)
    one = np.uint64(1)
    while exponent > np.uint64(0):
        if exponent & one:
            result = result * base
        base = base * base
        exponent = exponent >> one
    return result


def reciprocal_int(a, min_value):  # type: ignore[no-untyped-def]
    """``1 / a`` with C truncation; numpy yields ``min_value`` for 0, warning "divide by
    zero" and "invalid value" (its loop divides ``1.0 / 0`` and casts the infinity)."""
    if a == 0:
        raise_divide_by_zero()
        raise_invalid()
        return min_value
    if a == 1 or a == -1:
        return a
    return 0


def reciprocal_uint(a):  # type: ignore[no-untyped-def]
    if a == 1:
        return a
    if a == 0:
        raise_divide_by_zero()
        raise_invalid()
    return a ^ a


def magnitude_u64(a):  # type: ignore[no-untyped-def]
    """``|a|`` as uint64, exact even for the most negative integer."""
    if a >= 0:
        return np.uint64(a)
    return np.uint64(-(a + 1)) + np.uint64(1)


def gcd_int(a, b):  # type: ignore[no-untyped-def]
    """numpy's gcd: Euclid on the unsigned magnitudes."""
    x = magnitude_u64(a)
    y = magnitude_u64(b)
    while y != np.uint64(0):
        x, y = y, x % y
    return x


def lcm_int(a, b):  # type: ignore[no-untyped-def]
    g = gcd_int(a, b)
    if g == np.uint64(0):
        return g
    return magnitude_u64(a) // g * magnitude_u64(b)


def left_shift(a, b, bits):  # type: ignore[no-untyped-def]
    """numpy's ``a << b``: 0 once the shift reaches the bit width (or is negative)."""
    if b < 0 or b >= bits:
        return a ^ a
    return a << b


def right_shift(a, b, bits):  # type: ignore[no-untyped-def]
    """numpy's ``a >> b``: the sign fill once the shift reaches the bit width."""
    if b < 0 or b >= bits:
        if a < 0:
            return ~(a ^ a)
        return a ^ a
    return a >> b


# ------------------------------------------------------------------ float division


def divmod_float(a, b, one):  # type: ignore[no-untyped-def]
    """numpy's ``npy_divmod``: floor quotient and Python-style remainder of floats, every
    step in the operands' dtype (``one`` is 1 of it: a float32 quotient past 2**24 rounds
    as numpy's does, where float64 steps gave another integer).

    numpy's tests (``isless``, ``isgreater``) are quiet on NaN; ``_is_negative`` and
    ``_is_positive`` are too, so a NaN operand raises no "invalid value" flag.
    """
    zero = one - one
    # (hidden: LLVM folds fmod of a constant 0 to 0, where a NaN b makes it NaN)
    mod = np.fmod(hidden(a), b)
    if b == 0:
        return a / b, mod
    div = (a - mod) / b
    if mod != 0:
        if _is_negative(b) != _is_negative(mod):
            mod = mod + b
            div = div - one
    else:
        mod = np.copysign(zero, b)
    if div != 0:
        floordiv = np.floor(div)
        if _is_positive(div - floordiv - one / (one + one)):
            floordiv = floordiv + one
    else:
        floordiv = np.copysign(zero, a / b)
    return floordiv, mod


def _is_negative(x):  # type: ignore[no-untyped-def]
    """``x < 0`` from quiet tests only: False for NaN and never raising "invalid"."""
    return x == x and x != 0 and np.signbit(x)


def _is_positive(x):  # type: ignore[no-untyped-def]
    return x == x and x != 0 and not np.signbit(x)


def _numpy_warns_zero_to_minus_infinity(dtype: type) -> bool:
    """Whether numpy's power raises "divide by zero" for ``0 ** -inf`` here: its SIMD
    loops (AVX-512 machines) do, the C library's pow, which it calls elsewhere, does not."""
    with np.errstate(divide="raise", invalid="ignore", over="ignore", under="ignore"):
        try:
            np.power(np.zeros(16, dtype), np.full(16, -np.inf, dtype))
        except FloatingPointError:
            return True
    return False


def _numpy_warns_huge_to_infinity(dtype: type) -> bool:
    """Whether numpy's power raises "overflow" for ``x ** inf`` where ``x * x`` overflows:
    its SIMD loops (AVX-512 machines) square x on the way, the C library's pow does not."""
    largest = np.finfo(dtype).max
    with np.errstate(over="raise", invalid="ignore", divide="ignore", under="ignore"):
        try:
            np.power(np.full(16, largest, dtype), np.full(16, np.inf, dtype))
        except FloatingPointError:
            return True
    return False


# Facts about numpy on this machine that helpers follow (number constants: the kernel
# language reads a helper's module-level numbers as literals).
POWER_ZERO_MINUS_INFINITY_F32 = _numpy_warns_zero_to_minus_infinity(np.float32)
POWER_ZERO_MINUS_INFINITY_F64 = _numpy_warns_zero_to_minus_infinity(np.float64)
POWER_HUGE_INFINITY_F32 = _numpy_warns_huge_to_infinity(np.float32)
POWER_HUGE_INFINITY_F64 = _numpy_warns_huge_to_infinity(np.float64)


def _last_finite_square(dtype: type) -> int:
    """The bits (as an integer) of the largest ``dtype`` value whose square is finite."""
    with np.errstate(over="ignore"):
        value = np.sqrt(np.finfo(dtype).max, dtype=dtype)
        while np.isfinite(value * value):
            value = np.nextafter(value, dtype(np.inf))
        while not np.isfinite(value * value):
            value = np.nextafter(value, dtype(0))
    return int(value.view(np.int32 if dtype == np.float32 else np.int64))


LAST_FINITE_SQUARE_F32 = _last_finite_square(np.float32)
LAST_FINITE_SQUARE_F64 = _last_finite_square(np.float64)


def _square_overflows(a):  # type: ignore[no-untyped-def]
    """Whether the finite ``a * a`` overflows, from a's bits (computing the square would
    raise the flag; comparing floats, "invalid" for NaN)."""
    if isinstance(a, np.float32):
        bits32 = np.float32(a).view(np.int32) & 0x7FFFFFFF
        return bits32 > LAST_FINITE_SQUARE_F32 and bits32 < 0x7F800000
    bits = np.float64(a).view(np.int64) & 0x7FFFFFFFFFFFFFFF
    return bits > LAST_FINITE_SQUARE_F64 and bits < 0x7FF0000000000000


def power_float(a, b):  # type: ignore[no-untyped-def]
    """``a ** b`` for floats; ``0 ** -inf`` is inf, with numpy's "divide by zero" where
    numpy's loop raises it and the C library's pow does not (found by the fuzzer), and
    ``x ** inf`` of a finite x whose square overflows is inf with numpy's "overflow"
    where its loop raises that."""
    if VECTOR_POWER:  # vectorisable (see vector_math's power section)
        if isinstance(a, np.float32):
            return _vector_power_f32(a, b)
        return _vector_power_f64(a, b)
    warns = POWER_ZERO_MINUS_INFINITY_F32 if isinstance(a, np.float32) else \
        POWER_ZERO_MINUS_INFINITY_F64
    overflows = POWER_HUGE_INFINITY_F32 if isinstance(a, np.float32) else \
        POWER_HUGE_INFINITY_F64
    if warns and a == 0 and b == -math.inf:
        raise_divide_by_zero()
    if overflows and b == math.inf and _square_overflows(a):
        raise_overflow()
    # LLVM computes a constant ``x ** 0.5`` as a square root with fix-ups, whose sqrt
    # raises "invalid" for -inf (numpy's scalar pow gives inf quietly): a hidden 0.5
    return a ** (hidden(b) if b == 0.5 else b)


# numpy's extra flags where its power loop raises more than ``pow`` (see
# ``power_float``), from operations in those lanes only -- a call would keep the loop from
# being vectorised: 1 / 0 and 2 * (the largest float), both hidden, their results kept
# (``kept``) but unused.


def _vector_power_f64(a, b):  # type: ignore[no-untyped-def]
    pole = POWER_ZERO_MINUS_INFINITY_F64 and a == 0 and b == -math.inf
    huge = POWER_HUGE_INFINITY_F64 and b == math.inf and _square_overflows(a)
    divided = np.float64(1.0) / hidden(0.0 if pole else 1.0)
    doubled = hidden(1.7976931348623157e308 if huge else 1.0) * 2.0
    return kept(kept(power_f64(a, b), divided), doubled)


def _vector_power_f32(a, b):  # type: ignore[no-untyped-def]
    pole = POWER_ZERO_MINUS_INFINITY_F32 and a == 0 and b == -math.inf
    huge = POWER_HUGE_INFINITY_F32 and b == math.inf and _square_overflows(a)
    divided = np.float32(1.0) / hidden(np.float32(0.0) if pole else np.float32(1.0))
    doubled = hidden(np.float32(3.4028234663852886e38) if huge else np.float32(1.0)) * \
        np.float32(2.0)
    return kept(kept(power_f32(a, b), divided), doubled)


def power_or_root(a, b, one):  # type: ignore[no-untyped-def]
    """numpy's power loop for a scalar exponent ``b`` (in the loop's dtype): exactly the
    square root, the square, the reciprocal or ``a`` itself where ``b`` is 0.5, 2, -1 or
    1 (``-0.0 ** 0.5`` is -0.0, ``-inf ** 0.5`` NaN), else ``power_float``.  Each
    operation computes on ``one`` where another's answer is taken, raising no flag (LLVM
    may compute them all: the values are hidden, and the answer is chosen by tests of a
    hidden copy of ``b``, under which LLVM cannot tell which value each operation got)."""
    general = b != 0.5 and b != 2 and b != -1 and b != 1
    powered = power_float(hidden(a if general else one), b)
    root = np.sqrt(hidden(a if b == 0.5 else one))
    factor = hidden(a if b == 2 else one)
    inverse = one / hidden(a if b == -1 else one)
    seen = hidden(b)
    result = powered
    if seen == 0.5:
        result = root
    if seen == 2:
        result = factor * factor
    if seen == -1:
        result = inverse
    if seen == 1:
        result = a
    return result


def floor_divide_float(a, b, one):  # type: ignore[no-untyped-def]
    if b == 0:
        return a / b
    # LLVM may compute this branch for a zero ``b`` too.  It is given operands that raise
    # no flag then, chosen by a test of a copy of ``b`` LLVM cannot see through (a test
    # of ``b`` itself it would fold to true here, knowing ``b != 0`` on this branch).
    seen = hidden(b)
    nonzero = seen != 0
    return divmod_float(a if nonzero else seen, seen if nonzero else seen + one, one)[0]


def remainder_float(a, b, one):  # type: ignore[no-untyped-def]
    if b == 0:
        return np.fmod(a, b)
    seen = hidden(b)
    nonzero = seen != 0
    return divmod_float(a if nonzero else seen, seen if nonzero else seen + one, one)[1]


# ------------------------------------------------------------------ float helpers


# Ordered float comparisons never compare floats: vectorised x86 compares (``vcmpltpd``)
# signal "invalid" on NaN, which numpy's quiet compares do not, and LLVM folds any guard
# around them away (it may compute the compare on a NaN whose result it then discards).
# They compare integer keys instead: the bits of ``x + 0.0`` (so -0.0 == 0.0) in an order
# that matches the floats', under a quiet NaN test.


def _order_key(x):  # type: ignore[no-untyped-def]
    if isinstance(x, np.float32):
        narrow = np.float32(x + np.float32(0.0)).view(np.int32)
        return narrow ^ ((narrow >> np.int32(31)) & np.int32(0x7FFFFFFF))
    bits = np.float64(x + 0.0).view(np.int64)
    return bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF)


def less_float(a, b, zero):  # type: ignore[no-untyped-def]
    """``a < b`` (``zero``, of the loop dtype, only types the call)."""
    return (a == a) & (b == b) & (_order_key(a) < _order_key(b))


def less_equal_float(a, b, zero):  # type: ignore[no-untyped-def]
    return (a == a) & (b == b) & (_order_key(a) <= _order_key(b))


def maximum_float(a, b, zero):  # type: ignore[no-untyped-def]
    """NaN-propagating maximum; on a tie numpy returns the second operand."""
    return a if (a != a) | less_float(b, a, zero) else b


def minimum_float(a, b, zero):  # type: ignore[no-untyped-def]
    return a if (a != a) | less_float(a, b, zero) else b


def fmax_float(a, b, zero):  # type: ignore[no-untyped-def]
    """NaN-ignoring maximum (numpy's ``fmax``)."""
    return a if (b != b) | less_float(b, a, zero) else b


def fmin_float(a, b, zero):  # type: ignore[no-untyped-def]
    return a if (b != b) | less_float(a, b, zero) else b


def clip_float(x, lo, hi, zero):  # type: ignore[no-untyped-def]
    """``minimum(maximum(x, lo), hi)`` with NaN propagation, as numpy's ``clip``; the
    key of the intermediate maximum is the key of the operand it picked."""
    key_x, key_lo, key_hi = _order_key(x), _order_key(lo), _order_key(hi)
    take_x = (x != x) | ((lo == lo) & (key_lo < key_x))
    low = x if take_x else lo
    key_low = key_x if take_x else key_lo
    return low if (low != low) | ((hi == hi) & (key_low < key_hi)) else hi


# sign and heaviside use only quiet tests (equality, the sign bit): once LLVM turns the
# branches into selects, an ordered comparison would also run on NaN lanes and signal.


def sign_float(a):  # type: ignore[no-untyped-def]
    """1, -1, 0 (also for -0.0) or NaN, with no flag raised (as numpy's loop)."""
    if a != a:
        return a
    if a == 0:
        return 0.0
    return math.copysign(1.0, a)


def heaviside_float(x, h0):  # type: ignore[no-untyped-def]
    if x != x:
        return x
    if x == 0:
        return h0
    if np.signbit(x):
        return 0.0
    return 1.0


# numpy's logaddexp tests ``x - y > 0`` with an ordered (signalling) comparison, so a NaN
# operand warns "invalid value"; the quiet tests here raise that flag explicitly.


def logaddexp_float(x, y):  # type: ignore[no-untyped-def]
    if x == y:
        return x + math.log(2.0)
    tmp = x - y
    if tmp != tmp:
        raise_invalid()
        return tmp
    if tmp > 0:
        return x + np.log1p(np.exp(-tmp))
    return y + np.log1p(np.exp(tmp))


def logaddexp2_float(x, y):  # type: ignore[no-untyped-def]
    if x == y:
        return x + 1
    tmp = x - y
    if tmp != tmp:
        raise_invalid()
        return tmp
    if tmp > 0:
        return x + np.log1p(np.exp2(np.float64(-tmp))) * (1 / math.log(2.0))
    return y + np.log1p(np.exp2(np.float64(tmp))) * (1 / math.log(2.0))


# ------------------------------------------------------------------ complex helpers

# numpy's complex multiply and square loops, dispatched to SIMD code on FMA hardware,
# round each part once as ``fma(ar, br, -(ai * bi))`` and ``fma(ar, bi, ai * br)``;
# elsewhere each product is rounded.  The results differ in the last bit and at overflow
# (the square of 1.7e38+1.7e38j is -inf+infj fused, nan+infj not), so numfuse asks
# numpy's own loops which it does, once at import.


def kept(value, also):  # type: ignore[no-untyped-def]
    """``value``, computed with ``also``, which LLVM may not drop (compiled with a zero it
    cannot see): numpy computes both parts of a complex value, and raises the flags of
    the part ``.real`` or ``.imag`` then drops."""
    return value


def real_part(z):  # type: ignore[no-untyped-def]
    """``z.real``, the imaginary part computed too (its flags raised, as numpy's)."""
    return kept(z.real, z.imag)


def imag_part(z):  # type: ignore[no-untyped-def]
    """``z.imag``, the real part computed too (its flags raised, as numpy's)."""
    return kept(z.imag, z.real)


def _numpy_fuses_complex_products() -> bool:
    """Whether numpy's complex multiply and square of both widths round as fused
    multiply-adds, told by two products where that differs from every other rounding."""
    for part in (np.float32, np.float64):
        complex_type = np.complex64 if part is np.float32 else np.complex128
        tiny = np.finfo(part).smallest_subnormal
        half_max = np.finfo(part).max / 2
        subnormal = np.array([complex(tiny, tiny)], complex_type)
        huge = np.array([complex(half_max, half_max)], complex_type)
        with np.errstate(all="ignore"):
            product = np.multiply(subnormal, np.array([1.0 + 0.5j], complex_type))[0]
            squares = (np.multiply(huge, huge)[0], np.square(huge)[0])
        if product.imag != 2 * tiny or any(square.real != -math.inf for square in squares):
            return False
    return True


FUSED_COMPLEX_PRODUCTS = _numpy_fuses_complex_products()


def complex_product(a, b):  # type: ignore[no-untyped-def]
    """numpy's complex multiply (and square, ``complex_product(z, z)``), rounded as its
    loops round on this machine (``FUSED_COMPLEX_PRODUCTS``)."""
    if FUSED_COMPLEX_PRODUCTS:
        return complex(fused_multiply_add(a.real, b.real, -(a.imag * b.imag)),
                       fused_multiply_add(a.real, b.imag, a.imag * b.real))
    return complex(a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real)



def complex_scalar_product(a, b):  # type: ignore[no-untyped-def]
    """numpy's complex multiply of two numpy scalars (its scalar math): each part rounded
    after each product, never fused."""
    return complex(a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real)


def _complex_nan(z):  # type: ignore[no-untyped-def]
    return z.real != z.real or z.imag != z.imag


def _part(z, value):  # type: ignore[no-untyped-def]
    """``value`` as the type of ``z``'s parts: complex64 arithmetic stays in float32, as
    numpy's does."""
    return np.float32(value) if isinstance(z, np.complex64) else value


def _one(z):  # type: ignore[no-untyped-def]
    return _part(z, 1.0)


def complex_ge(a, b):  # type: ignore[no-untyped-def]
    """numpy's lexicographic ``>=`` on complex numbers (False if any part is NaN), and its
    "invalid" flag (``_complex_order_flag``)."""
    _complex_order_flag(a, b)
    return _quiet_complex_ge(a, b)


def complex_gt(a, b):  # type: ignore[no-untyped-def]
    _complex_order_flag(a, b)
    return (less_float(b.real, a.real, a.real) and a.imag == a.imag and b.imag == b.imag) or (
        a.real == b.real and less_float(b.imag, a.imag, a.imag)
    )


def _complex_order_flag(a, b):  # type: ignore[no-untyped-def]
    """Raise "invalid" where numpy's complex order does: its C compares of parts signal a
    NaN, and it compares the imaginary parts only for equal real parts that did not
    decide.  The compares here are quiet (``less_float``: LLVM computes every compare of
    an expression, where C stops early), so the flag is raised on its own."""
    decided = less_float(b.real, a.real, a.real) and a.imag == a.imag and b.imag == b.imag
    if a.real != a.real or b.real != b.real or (
            not decided and a.real == b.real and (a.imag != a.imag or b.imag != b.imag)):
        raise_invalid()
    return


def _quiet_complex_ge(a, b):  # type: ignore[no-untyped-def]
    """``complex_ge`` raising no flag: numpy's complex maximum and minimum clear the flags
    their compares raise."""
    return (less_float(b.real, a.real, a.real) and a.imag == a.imag and b.imag == b.imag) or (
        a.real == b.real and less_equal_float(b.imag, a.imag, a.imag)
    )


def complex_le(a, b):  # type: ignore[no-untyped-def]
    return complex_ge(b, a)


def complex_lt(a, b):  # type: ignore[no-untyped-def]
    return complex_gt(b, a)


def maximum_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(a) or _quiet_complex_ge(a, b):
        return a
    return b


def minimum_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(a) or _quiet_complex_ge(b, a):
        return a
    return b


def fmax_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(b) or _quiet_complex_ge(a, b):
        return a
    return b


def fmin_complex(a, b):  # type: ignore[no-untyped-def]
    if _complex_nan(b) or _quiet_complex_ge(b, a):
        return a
    return b


def sign_complex(z):  # type: ignore[no-untyped-def]
    """numpy 2's complex sign: each part divided by ``hypot(re, im)`` (so a ``-0`` part
    stays ``-0``); NaN when that is NaN, 0 for 0; for an infinite magnitude the unit
    along the infinite part, or NaN when both parts are infinite."""
    magnitude = abs(z)
    if magnitude != magnitude:
        return complex(math.nan, math.nan)
    if math.isinf(magnitude):
        if math.isinf(z.real):
            if math.isinf(z.imag):
                return complex(math.nan, math.nan)
            return complex(math.copysign(1.0, z.real), 0.0)
        return complex(0.0, math.copysign(1.0, z.imag))
    if magnitude == 0:
        return complex(0.0, 0.0)
    return complex(z.real / magnitude, z.imag / magnitude)


def complex_abs(z):  # type: ignore[no-untyped-def]
    """numpy's SIMD complex absolute: ``larger * sqrt(fma(ratio, ratio, 1))``.

    Compiled with floating-point contraction (see ``CONTRACTED``) so ``ratio * ratio + 1``
    becomes the same fused multiply-add numpy's loop uses on FMA hardware.  One formula
    for every element, as numpy's: an infinite part makes both infinite, else a NaN part
    the result NaN, and the ratio is 0 where it would be 0 / 0 or inf / inf.  (LLVM computes every
    line for every element, and drops a guard whose value an early return leaves unused:
    here every guard decides the result, so no element divides 0 by 0.)
    """
    re = abs(z.real)
    im = abs(z.imag)
    infinite = math.isinf(re) or math.isinf(im)
    nan = not infinite and (re != re or im != im)
    # NaNs kept out of max and min: x86 vector compares raise "invalid" for them
    re = _part(z, math.inf) if infinite else (_part(z, 0.0) if nan else re)
    im = _part(z, math.inf) if infinite else (_part(z, 0.0) if nan else im)
    larger = max(re, im)
    smaller = min(re, im)
    divide = larger != 0 and smaller != math.inf
    ratio = (smaller if divide else _part(z, 0.0)) / (larger if divide else _part(z, 1.0))
    larger = _part(z, math.nan) if nan else larger
    return np.sqrt(ratio * ratio + _part(z, 1.0)) * larger


def spacing_float(x):  # type: ignore[no-untyped-def]
    """numpy's spacing: the gap to the next float away from zero; +0's for both zeros.

    The next float comes from the bits (libm's ``nextafter`` raises "underflow" for every
    subnormal result), and the gap is exact.  numpy's flags -- "underflow" for a nonzero
    subnormal ``x``, "overflow" for the largest finite -- come from operations on hidden
    values that add nothing to the result elsewhere."""
    finite = (x == x) & (abs(x) != math.inf)  # NaN and inf lanes compute with 0
    if isinstance(x, np.float32):
        magnitude = np.float32(abs(x)) if finite else np.float32(0.0)
        following = np.int32(magnitude.view(np.int32) + np.int32(1)).view(np.float32)
        largest = np.float32(3.4028234663852886e38)
        subnormal = (magnitude != 0) & (magnitude < np.float32(1.1754943508222875e-38))
        flags = hidden(np.float32(1e-45) if subnormal else np.float32(0.0)) * np.float32(
            0.5) + hidden(largest if magnitude == largest else np.float32(0.0)) * np.float32(2.0)
    else:
        magnitude = np.float64(abs(x)) if finite else np.float64(0.0)
        following = np.int64(magnitude.view(np.int64) + 1).view(np.float64)
        largest = 1.7976931348623157e308
        subnormal = (magnitude != 0) & (magnitude < 2.2250738585072014e-308)
        flags = hidden(5e-324 if subnormal else 0.0) * 0.5 + hidden(
            largest if magnitude == largest else 0.0) * 2.0
    # exact; inf for the largest finite; flags is 0 (with "underflow") or inf ("overflow")
    gap = (following - magnitude) + flags
    if x != x or abs(x) == math.inf:
        # a NaN of x's own type (a float64 NaN here broke numba's float32 lowering)
        return np.float32(math.nan) if isinstance(x, np.float32) else math.nan
    if x == 0:
        return gap
    return math.copysign(gap, x)


def complex_divide(a, b):  # type: ignore[no-untyped-def]
    """numpy's complex division: Smith's method, dividing by the divisor's part of larger
    magnitude; a zero divisor divides each part by zero (complex inf or NaN).

    numpy takes one of three branches.  Here the operands are chosen first and one
    sequence of operations runs for every element -- the zero divisor's division by
    ``|b.real|`` (0) is a division by 1 elsewhere -- so no division of a branch not taken
    (LLVM computes them all) raises a flag numpy does not."""
    br_abs = abs(b.real)
    bi_abs = abs(b.imag)
    if b.real != b.real or b.imag != b.imag:
        raise_invalid()  # numpy's ordered test of |b.real| >= |b.imag| signals on NaN
    direct = br_abs >= bi_abs
    zero = br_abs == 0 and bi_abs == 0
    larger = _one(b) if zero else (b.real if direct else b.imag)
    smaller = _part(b, 0.0) if zero else (b.imag if direct else b.real)
    first = _part(b, 0.0) if zero else (a.real if direct else a.imag)
    second = _part(b, 0.0) if zero else (a.imag if direct else a.real)
    ratio = smaller / larger
    scale = _one(b) / (larger + smaller * ratio)
    across = first * ratio
    real = (first + second * ratio) * scale
    imag = ((second - across) if direct else (across - second)) * scale
    divisor = br_abs if br_abs + bi_abs == 0 else _one(b)
    return complex((a.real if zero else real) / divisor, (a.imag if zero else imag) / divisor)


def complex_quotient(a, b):  # type: ignore[no-untyped-def]
    """Python's (and numba's) complex ``a / b``: CPython's algorithm, NaN for 0 / 0.  The
    kernel language computes ``/`` of complex numbers with it."""
    if abs(b.real) >= abs(b.imag):
        if b.real == 0:
            return complex(math.nan, math.nan)
        ratio = b.imag / b.real
        denominator = b.real + b.imag * ratio
        return complex((a.real + a.imag * ratio) / denominator,
                       (a.imag - a.real * ratio) / denominator)
    if abs(b.imag) >= abs(b.real):
        ratio = b.real / b.imag
        denominator = b.real * ratio + b.imag
        return complex((a.real * ratio + a.imag) / denominator,
                       (a.imag * ratio - a.real) / denominator)
    return complex(math.nan, math.nan)


def complex_reciprocal(z):  # type: ignore[no-untyped-def]
    """numpy's complex reciprocal (Smith's method).  numpy divides by the part of larger
    magnitude, in one of two branches; here the operands are chosen first and one
    sequence of operations runs, so no division of the other branch (which LLVM would
    compute too) raises a flag numpy does not."""
    direct = abs(z.imag) <= abs(z.real)
    larger = z.real if direct else z.imag
    smaller = z.imag if direct else z.real
    ratio = smaller / larger
    denominator = larger + smaller * ratio
    inverse = _one(z) / denominator
    scaled = ratio / denominator
    if direct:
        return complex(inverse, -scaled)
    return complex(scaled, -inverse)


def complex_power(a, b):  # type: ignore[no-untyped-def]
    """numpy's complex power: exact small integer powers by repeated multiplication."""
    if b.real == 0 and b.imag == 0:
        return complex(1.0, 0.0)
    if a.real == 0 and a.imag == 0:
        if b.real > 0:
            return complex(0.0, 0.0)
        return complex(math.nan, math.nan)
    if b.imag == 0 and b.real == np.trunc(b.real) and abs(b.real) < 100:
        n = int(b.real)
        if n == 1:
            return complex(a.real, a.imag)
        if n == 2:
            return a * a
        if n == 3:
            return a * a * a
        exponent = abs(n)
        result = complex(1.0, 0.0)
        base = complex(a.real, a.imag)
        mask = 1
        while True:
            if exponent & mask:
                result = result * base
            mask = mask << 1
            if exponent < mask:
                break
            base = base * base
        if b.real < 0:
            return complex_divide(complex(1.0, 0.0), result)
        return result
    return a ** b


def clip_complex(x, lo, hi):  # type: ignore[no-untyped-def]
    """numpy's complex clip: lexicographic order, NaN in ``x`` kept."""
    low = x if (_complex_gt_plain(x, lo) or _complex_nan(x)) else lo
    return low if (_complex_gt_plain(hi, low) or _complex_nan(low)) else hi


def _complex_gt_plain(a, b):  # type: ignore[no-untyped-def]
    """Lexicographic ``a > b`` with quiet comparisons (numpy's clip raises no flag on
    NaN parts)."""
    if a.real == b.real:
        return less_float(b.imag, a.imag, a.imag)
    return less_float(b.real, a.real, a.real)


def complex_arccosh(z):  # type: ignore[no-untyped-def]
    """``log(z + sqrt(z + 1) * sqrt(z - 1))``: C99's cacosh, right on the branch cut."""
    above = np.sqrt(complex(z.real + 1, z.imag))
    below = np.sqrt(complex(z.real - 1, z.imag))
    return np.log(z + above * below)


def complex_expm1(z):  # type: ignore[no-untyped-def]
    """numpy's complex ``expm1``, accurate for small ``z``."""
    half = np.sin(z.imag / 2)
    real = np.expm1(z.real) * np.cos(z.imag) - 2 * half * half
    return complex(real, np.exp(z.real) * np.sin(z.imag))


def complex_log1p(z):  # type: ignore[no-untyped-def]
    shifted = z.real + 1
    return complex(np.log(np.hypot(shifted, z.imag)), np.arctan2(z.imag, shifted))


def complex_exp2(z):  # type: ignore[no-untyped-def]
    return np.exp(z * math.log(2.0))


# ------------------------------------------------------------------ mixed-sign compare


def less_iu(a, b):  # type: ignore[no-untyped-def]
    """``a < b`` for a signed ``a`` and an unsigned ``b``, exact over the full ranges."""
    return a < 0 or np.uint64(a) < b


def less_ui(a, b):  # type: ignore[no-untyped-def]
    return b >= 0 and a < np.uint64(b)


# The derivatives of logaddexp and logaddexp2: the share of exp(x) (2**x) in
# exp(x) + exp(y), the logistic weight 1 / (1 + e**(y - x)), with one exponential of
# -|x - y| in every lane.  Special values are JAX's (its rule is exp(x - ans) with +inf
# taken as 0 on both sides): 1 where x is +inf, exp(x) where only y is (the same
# exponential, its argument chosen per lane), NaN with "invalid" for two -inf, NaN for a
# NaN operand.  The difference is taken of halves (x - y overflows where the
# weight is exactly 0 or 1) and of zeros where an operand is +inf (no inf - inf); NaN
# never reaches the ordered comparison (it would signal "invalid").  ``vector`` chooses
# ``vector_math``'s exponentials or the C library's, ``base2`` the base: both are decided
# when the function is inlined.  float32 computes in float64 and rounds once.


def _logistic_weight(x, y, base2, vector):  # type: ignore[no-untyped-def]
    above = (x == math.inf) | (y == math.inf)
    # hidden: LLVM would move the choices after the subtraction (inf - inf in every lane)
    half = (0.0 if above else x) * 0.5 - hidden(0.0 if above else y) * 0.5
    clean = half if half == half else 0.0
    magnitude = min(abs(clean), 1000.0)
    argument = (0.0 if x == math.inf else x) if above else -(magnitude + magnitude)
    if vector:
        power = exp2_f64(argument) if base2 else exp_f64(argument)
    else:
        power = np.exp2(argument) if base2 else np.exp(argument)
    tail = 0.0 if above else power  # at most 1: no inf * 0 where exp(x) overflowed
    share = 1.0 / (1.0 + tail)
    weight = share if clean >= 0.0 else tail * share
    if y != y:
        return y
    if above:
        return power
    if half != half:
        return half
    return weight


def logaddexp_weight_f64(x, y):  # type: ignore[no-untyped-def]
    return _logistic_weight(x, y, False, True)


def logaddexp_weight_f32(x, y):  # type: ignore[no-untyped-def]
    return np.float32(_logistic_weight(np.float64(x), np.float64(y), False, True))


def logaddexp2_weight_f64(x, y):  # type: ignore[no-untyped-def]
    return _logistic_weight(x, y, True, True)


def logaddexp2_weight_f32(x, y):  # type: ignore[no-untyped-def]
    return np.float32(_logistic_weight(np.float64(x), np.float64(y), True, True))


def logaddexp_weight_float(x, y):  # type: ignore[no-untyped-def]
    """With the C library's exp (``NUMFUSE_VECTOR_MATH=0``); the result is cast to the
    loop's dtype."""
    return _logistic_weight(np.float64(x), np.float64(y), False, False)


def logaddexp2_weight_float(x, y):  # type: ignore[no-untyped-def]
    return _logistic_weight(np.float64(x), np.float64(y), True, False)


def equal_iu(a, b):  # type: ignore[no-untyped-def]
    return a >= 0 and np.uint64(a) == b


def float_to_uint64(x):  # type: ignore[no-untyped-def]
    """Cast like the C compiler numpy is built with: negatives wrap through int64.

    Built from two signed conversions that are in range for every ``|x| < 2**64`` (the
    high and low 32 bits), with no branch: LLVM turns a branch between a signed and an
    unsigned conversion into computing both, and the unused one raised "invalid value".
    Beyond the range (``x >= 2**64``, ``x < -2**63``, infinities) numpy's conversion gives
    the instruction's "indefinite" integer (0 and 2**63) and raises "invalid value": a
    signed conversion of ``x`` made only in those lanes does both."""
    outside = (x >= 18446744073709551616.0) | (x < -9223372036854775808.0)
    inside = 0.0 if outside else x
    high = np.int64(inside * 2.3283064365386963e-10)  # x / 2**32, exact
    low = np.int64(inside - np.float64(high) * 4294967296.0)  # exact, |low| < 2**32
    exact = np.uint64(high) * np.uint64(4294967296) + np.uint64(low)
    # 2**63, and the flag.  Hidden: LLVM would convert both sides of the choice (x in
    # every lane) and choose after; and the result is chosen by a test of a hidden copy of
    # x, under a test of x itself LLVM would know which side the choice takes.
    indefinite = np.uint64(np.int64(hidden(x if outside else 0.0)))
    seen = hidden(x)
    if (seen >= 18446744073709551616.0) | (seen < -9223372036854775808.0):
        return indefinite ^ (np.uint64(9223372036854775808) if x > 0 else np.uint64(0))
    return exact


def add_reassoc(total, value):  # type: ignore[no-untyped-def]
    """A float sum's accumulation step, compiled with reassociation allowed (and not
    inlined by numba, so the flag reaches LLVM): the loop vectoriser may then keep several
    partial sums.  Used only inside one block of a fused reduction (see codegen)."""
    return total + value


# Helpers compiled with floating-point contraction (fused multiply-add) to match numpy.
CONTRACTED = frozenset({"complex_abs"})
# Helpers compiled with reassociation: the accumulation steps of fused reductions.
REASSOCIATED = frozenset({"add_reassoc"})

HELPERS = tuple(
    name for name, value in list(globals().items())
    if callable(value) and not name.startswith("__") and value.__module__ == __name__
)

# The vectorisable exp/log/tanh of ``vector_math`` are kernel helpers too: generated kernels
# import them from here and the backend compiles them with the others.
from . import vector_math as _vector_math  # noqa: E402

globals().update({name: getattr(_vector_math, name) for name in _vector_math.HELPERS})
HELPERS = HELPERS + _vector_math.HELPERS
CONTRACTED = CONTRACTED | _vector_math.CONTRACTED
