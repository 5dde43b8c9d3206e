"""Scalar types of the kernel language: numpy dtypes, their LLVM types, and the typing
rules of Python operators on them.

The generated kernels and the helpers of ``kernel_lib`` and ``vector_math`` are written in
Python with numba's typing rules in mind (they also run as plain Python on numpy scalars),
so the lowering types them as numba does:

* a Python ``int`` literal is ``int64`` (``uint64`` past its range), a ``float`` literal
  ``float64``, a ``complex`` literal ``complex128``;
* arithmetic on integers computes in 64 bits, signed if either operand is (``int8 + int8``
  is ``int64``; the generated code casts results back to the node's dtype), and a bool is
  an integer there;
* a float with an integer of more than 16 bits, or with a float64, computes in float64;
* shifts keep the left operand's signedness, widened to 64 bits.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
UINT64 = np.dtype(np.uint64)
FLOAT32 = np.dtype(np.float32)
FLOAT64 = np.dtype(np.float64)
COMPLEX128 = np.dtype(np.complex128)

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
BYTES = ir.PointerType(I8)


def value_type(dtype: np.dtype) -> ir.Type:
    """The LLVM type of a scalar of ``dtype`` in registers (a bool is ``i1``, a complex
    number a ``{real, imag}`` struct)."""
    kind = dtype.kind
    if kind == "b":
        return I1
    if kind in "iu":
        return ir.IntType(dtype.itemsize * 8)
    if kind == "f":
        if dtype.itemsize == 8:
            return ir.DoubleType()
        if dtype.itemsize == 4:
            return ir.FloatType()
    if kind == "c":
        return ir.LiteralStructType([value_type(part_of(dtype))] * 2)
    raise TypeError(f"kernels do not compute with {dtype}")


def memory_type(dtype: np.dtype) -> ir.Type:
    """The LLVM type of an array element of ``dtype`` (a numpy bool is one byte)."""
    return I8 if dtype.kind == "b" else value_type(dtype)


def part_of(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's real and imaginary parts."""
    return np.dtype(f"f{dtype.itemsize // 2}")


def complex_of(dtype: np.dtype) -> np.dtype:
    """The complex dtype whose parts have the float ``dtype``."""
    return np.dtype(f"c{dtype.itemsize * 2}")


def literal_dtype(value: object) -> np.dtype:
    """The dtype numba gives a Python literal."""
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, int):
        return INT64 if -(2**63) <= value < 2**63 else UINT64
    if isinstance(value, float):
        return FLOAT64
    if isinstance(value, complex):
        return COMPLEX128
    if isinstance(value, np.generic):
        return value.dtype
    raise TypeError(f"no kernel type for the literal {value!r}")


def constant(dtype: np.dtype, value: object) -> ir.Constant:
    """An LLVM constant of ``dtype`` holding ``value`` (converted as a numpy cast would)."""
    kind = dtype.kind
    if kind == "b":
        return ir.Constant(I1, int(bool(value)))
    if kind in "iu":
        bits = dtype.itemsize * 8
        number = int(value) % (1 << bits)  # type: ignore[call-overload]
        if number >= 1 << (bits - 1):
            number -= 1 << bits  # LLVM reads integer constants as signed
        return ir.Constant(value_type(dtype), number)
    if kind == "f":
        return ir.Constant(value_type(dtype), float(np.asarray(value).astype(dtype)))
    number = complex(value)  # type: ignore[arg-type,call-overload]
    part = part_of(dtype)
    return ir.Constant(value_type(dtype), [constant(part, number.real),
                                           constant(part, number.imag)])


def _integer(dtype: np.dtype) -> np.dtype:
    """A bool counts as a signed integer in arithmetic."""
    return INT64 if dtype.kind == "b" else dtype


def widened_integer(*dtypes: np.dtype) -> np.dtype:
    """numba's integer result type: 64 bits, signed if any operand is."""
    signed = any(_integer(dtype).kind == "i" for dtype in dtypes)
    return INT64 if signed else UINT64


def arithmetic(left: np.dtype, right: np.dtype) -> np.dtype:
    """The dtype ``left (op) right`` computes in, for ``+ - * // % **`` (``/`` moves
    integers to float64 on top of this)."""
    kinds = left.kind + right.kind
    if "c" in kinds:
        parts = [part_of(dtype) if dtype.kind == "c" else dtype for dtype in (left, right)]
        return complex_of(arithmetic(*parts))
    if "f" in kinds:
        floats = [dtype for dtype in (left, right) if dtype.kind == "f"]
        others = [dtype for dtype in (left, right) if dtype.kind != "f"]
        if any(dtype.itemsize == 8 for dtype in floats):
            return FLOAT64
        if all(dtype.itemsize <= 2 for dtype in others):
            return FLOAT32
        return FLOAT64
    return widened_integer(left, right)


def bitwise(left: np.dtype, right: np.dtype) -> np.dtype:
    """``& | ^``: bool with bool stays bool; integers widen as in arithmetic."""
    if left.kind == "b" and right.kind == "b":
        return BOOL
    if "f" in left.kind + right.kind or "c" in left.kind + right.kind:
        raise TypeError(f"bitwise operation on {left} and {right}")
    return widened_integer(left, right)


def comparison(left: np.dtype, right: np.dtype) -> np.dtype:
    """The dtype two operands are compared in: numba compares a signed integer with a
    uint64 in float64 (neither integer type holds both), other integers in 64 bits."""
    if left == right:
        return left
    if left.kind == "b" and right.kind == "b":
        return BOOL
    kinds = {_integer(left).kind, _integer(right).kind}
    if kinds == {"i", "u"} and UINT64 in (left, right):
        return FLOAT64
    return arithmetic(left, right)


def unified(left: np.dtype, right: np.dtype) -> np.dtype:
    """One dtype for values of either dtype (branches of a conditional, returns, a variable
    assigned in several places)."""
    if left == right:
        return left
    if left.kind == "b" and right.kind in "iu":
        return right
    if right.kind == "b" and left.kind in "iu":
        return left
    if left.kind in "iu" and right.kind in "iu":
        if left.kind == right.kind:
            return max(left, right, key=lambda dtype: dtype.itemsize)
        if INT64 in (left, right) and UINT64 in (left, right):
            return FLOAT64
        return INT64
    return arithmetic(left, right)
