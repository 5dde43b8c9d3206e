"""The scalar compiler: kernel statements and helper functions, written in a small subset
of Python, become LLVM IR.

The subset is what ``codegen`` writes and what ``kernel_lib`` and ``vector_math`` are
written in: numbers, variables, arithmetic, comparisons, ``and``/``or``/``not``,
conditional expressions, casts such as ``np.float32(x)``, ``x.real``/``x.imag``/
``x.view(np.int64)``, numpy and ``math`` functions of scalars, calls of helpers, and in
helpers assignments (also of tuples), ``if``, ``while`` (with ``break``/``continue``) and
``return`` (also of tuples).  Operators type as numba types them (``types``), so a kernel
computes what the same Python source would compute compiled by numba.

Each helper is compiled once per argument dtypes and fast-math flags into a module of its
own (a function with ``alwaysinline``, so LLVM inlines it and can vectorise the loop
around it).  A numpy function this compiler has no code for (numpy's complex
transcendental functions) becomes a call of numpy's own scalar C function where
``numpy_loops`` finds one (``numfuse.numpy.<function>.<dtypes>``, registered by the
backend), else of numfuse's helper for it, else of ``fallback.<function>.<dtypes>``, a
function the backend compiles with numba.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import math
import textwrap
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np
from llvmlite import ir

from .. import kernel_lib, vector_math
from . import numpy_loops
from . import types as T
from .types import BOOL, COMPLEX128, FLOAT32, FLOAT64, INT64, UINT64

Flags = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Value:
    """A scalar in a register: its dtype and LLVM value."""

    dtype: np.dtype
    ir: ir.Value


Result = Value | tuple[Value, ...]


class LoweringError(TypeError):
    """The kernel language cannot express this (a bug of numfuse's code generator)."""


@dataclasses.dataclass(frozen=True)
class Fallback:
    """A numpy function of scalars the backend compiles (with numba): called as
    ``symbol(arguments...) -> result``, all in registers."""

    function: str
    arguments: tuple[np.dtype, ...]
    result: np.dtype

    @property
    def symbol(self) -> str:
        return f"numfuse.fallback.{self.function}.{_tag(self.arguments)}"


@dataclasses.dataclass(frozen=True)
class Helper:
    """A helper compiled for argument dtypes: its function's module as IR text, and the
    helpers and fallbacks it calls."""

    symbol: str
    arguments: tuple[np.dtype, ...]
    result: np.dtype | tuple[np.dtype, ...]
    text: str
    calls: frozenset[Helper]
    fallbacks: frozenset[Fallback]

    def closure(self) -> Iterator[Helper]:
        """This helper and every helper it calls, directly or not."""
        seen: set[str] = set()
        stack = [self]
        while stack:
            helper = stack.pop()
            if helper.symbol not in seen:
                seen.add(helper.symbol)
                yield helper
                stack.extend(helper.calls)


def _tag(dtypes: Sequence[np.dtype]) -> str:
    return "_".join(dtype.str[1:] for dtype in dtypes) or "void"


# ------------------------------------------------------------------ functions of scalars

# numpy (and math) functions of floats computed by the C library: name -> C name.
_LIBM = {
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
    "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos", "tan": "tan",
    "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh",
    "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh",
    "cbrt": "cbrt", "arctan2": "atan2", "hypot": "hypot", "nextafter": "nextafter",
    "asin": "asin", "acos": "acos", "atan": "atan", "atan2": "atan2", "asinh": "asinh",
    "acosh": "acosh", "atanh": "atanh", "fmod": "fmod", "sqrt": "sqrt",
}
_LIBM_ARITY = {name: 2 for name in ("arctan2", "atan2", "hypot", "nextafter", "fmod")}
# Exact operations LLVM has intrinsics for.  (``sqrt`` is the C library's: LLVM computes
# it with the instruction where it knows the C function would not set errno, and never
# moves it where the program did not compute it, as it moves the intrinsic out of a
# select whose other value is a constant -- raising "invalid" for masked-off lanes.)
_INTRINSICS = {"floor": "floor", "ceil": "ceil", "trunc": "trunc", "rint": "rint",
               "fabs": "fabs"}
_DTYPES = {name: np.dtype(name) for name in (
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128")}
_MATH_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf,
                   "nan": math.nan}


class Emitter:
    """Emits the code of one function: expressions, and for helpers statements.

    ``names`` maps a variable to its value (kernel variables) or to an ``alloca`` slot
    (helper locals, promoted to registers by LLVM).  ``flags`` are the fast-math flags of
    every float operation.
    """

    def __init__(self, builder: ir.IRBuilder, flags: Flags, compiler: HelperCompiler,
                 names: Mapping[str, Value] | None = None, guarded: bool = False) -> None:
        self.builder = builder
        self.flags = flags
        self.guarded = guarded
        self._hidden: set[int] = set()  # ids of the values ``opaque`` made
        self._zeros = 0  # the opaque zeros of their own made (``opaque_zero``)
        self.compiler = compiler
        self.values: dict[str, Value] = dict(names or {})
        self.slots: dict[str, tuple[np.dtype, ir.Value]] = {}
        self.calls: set[Helper] = set()
        self.fallbacks: set[Fallback] = set()

    @property
    def module(self) -> ir.Module:
        return self.builder.module

    # -------------------------------------------------------------- expressions

    def expression(self, text: str) -> Result:
        """The value of the Python expression ``text``."""
        return self.visit(_parse_expression(text))

    def visit(self, node: ast.expr) -> Result:
        method = getattr(self, f"_visit_{type(node).__name__}", None)
        if method is None:
            raise LoweringError(f"kernels cannot compute {ast.unparse(node)!r}")
        result: Result = method(node)
        return result

    def scalar(self, node: ast.expr) -> Value:
        result = self.visit(node)
        if isinstance(result, tuple):
            raise LoweringError(f"{ast.unparse(node)!r} is a tuple, not a number")
        return result

    def _visit_Constant(self, node: ast.Constant) -> Value:
        return self.literal(node.value)

    def literal(self, value: object) -> Value:
        dtype = T.literal_dtype(value)
        return Value(dtype, T.constant(dtype, value))

    def _visit_Name(self, node: ast.Name) -> Value:
        if node.id in self.values:
            return self.values[node.id]
        if node.id in self.slots:
            dtype, slot = self.slots[node.id]
            return Value(dtype, self.builder.load(slot))
        constant = getattr(kernel_lib, node.id, None)
        if isinstance(constant, (bool, int, float)) and node.id.isupper():
            return self.literal(constant)  # a module-level fact of kernel_lib
        raise LoweringError(f"unknown name {node.id!r}")

    def _visit_Tuple(self, node: ast.Tuple) -> tuple[Value, ...]:
        return tuple(self.scalar(element) for element in node.elts)

    def _visit_Attribute(self, node: ast.Attribute) -> Value:
        if isinstance(node.value, ast.Name) and node.value.id == "math" and \
                node.attr in _MATH_CONSTANTS:
            constant = self.literal(_MATH_CONSTANTS[node.attr])
            # A NaN operand known to LLVM folds the operations on it, and their "invalid"
            # flag with them (numpy's loops raise it, e.g. logaddexp(x, nan)).
            return self.opaque(constant) if self.guarded and node.attr == "nan" else constant
        value = self.scalar(node.value)
        if node.attr in ("real", "imag"):
            return self.part(value, node.attr)
        raise LoweringError(f"unknown attribute {ast.unparse(node)!r}")

    def _visit_Subscript(self, node: ast.Subscript) -> Value:
        result = self.visit(node.value)
        index = node.slice
        if not isinstance(result, tuple) or not isinstance(index, ast.Constant) or \
                not isinstance(index.value, int):
            raise LoweringError(f"only tuples indexed by a number: {ast.unparse(node)!r}")
        return result[index.value]

    def _visit_UnaryOp(self, node: ast.UnaryOp) -> Value:
        folded = _folded(node)
        if folded is not None:
            return self.literal(folded)
        operand = self.scalar(node.operand)
        if isinstance(node.op, ast.Not):
            return Value(BOOL, self.builder.not_(self.truth(operand).ir))
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.USub):
            return self.negate(operand)
        if isinstance(node.op, ast.Invert):
            if operand.dtype.kind == "b":
                return Value(BOOL, self.builder.not_(operand.ir))
            wide = self.convert(operand, T.widened_integer(operand.dtype))
            return Value(wide.dtype, self.builder.not_(wide.ir))
        raise LoweringError(f"unknown operator in {ast.unparse(node)!r}")

    def negate(self, operand: Value) -> Value:
        kind = operand.dtype.kind
        if kind == "f":
            return Value(operand.dtype, self.builder.fneg(operand.ir, flags=self.flags))
        if kind == "c":
            real, imag = self.parts(operand)
            return self.complex(self.negate(real), self.negate(imag))
        wide = self.convert(operand, T.widened_integer(operand.dtype))
        return Value(wide.dtype, self.builder.neg(wide.ir))

    def _visit_BinOp(self, node: ast.BinOp) -> Value:
        return self.binary(type(node.op), self.scalar(node.left), self.scalar(node.right))

    def binary(self, op: type, left: Value, right: Value) -> Value:
        builder = self.builder
        if op in (ast.BitAnd, ast.BitOr, ast.BitXor):
            dtype = T.bitwise(left.dtype, right.dtype)
            a, b = self.convert(left, dtype).ir, self.convert(right, dtype).ir
            bitwise: dict[type, Any] = {ast.BitAnd: builder.and_, ast.BitOr: builder.or_,
                                        ast.BitXor: builder.xor}
            method = bitwise[op]
            return Value(dtype, method(a, b))
        if op in (ast.LShift, ast.RShift):
            return self.shift(op, left, right)
        if op is ast.Pow:
            return self.power(left, right)
        dtype = T.arithmetic(left.dtype, right.dtype)
        if op is ast.Div and dtype.kind in "iu":
            dtype = FLOAT64
        a, b = self.convert(left, dtype), self.convert(right, dtype)
        if dtype.kind == "c":
            return self.complex_arithmetic(op, a, b)
        if dtype.kind == "f":
            floats: dict[type, Any] = {ast.Add: builder.fadd, ast.Sub: builder.fsub,
                                       ast.Mult: builder.fmul, ast.Div: builder.fdiv}
            method = floats.get(op)
            if method is None:
                raise LoweringError(f"{op.__name__} of floats is not in the kernel language")
            return Value(dtype, method(a.ir, b.ir, flags=self.flags))
        if op is ast.FloorDiv or op is ast.Mod:
            return self.floored(op, a, b)
        integers: dict[type, Any] = {ast.Add: builder.add, ast.Sub: builder.sub,
                                     ast.Mult: builder.mul}
        method = integers.get(op)
        if method is None:
            raise LoweringError(f"{op.__name__} of integers is not in the kernel language")
        return Value(dtype, method(a.ir, b.ir))

    def shift(self, op: type, left: Value, right: Value) -> Value:
        dtype = T.widened_integer(left.dtype) if left.dtype.kind != "u" else UINT64
        value = self.convert(left, dtype).ir
        amount = self.convert(right, dtype).ir
        if op is ast.LShift:
            return Value(dtype, self.builder.shl(value, amount))
        if dtype.kind == "i":
            return Value(dtype, self.builder.ashr(value, amount))
        return Value(dtype, self.builder.lshr(value, amount))

    def floored(self, op: type, a: Value, b: Value) -> Value:
        """Python's ``//`` and ``%`` of integers (rounding toward -inf); 0 for a zero
        divisor, as numba's numpy error model gives."""
        builder = self.builder
        zero = ir.Constant(a.ir.type, 0)
        is_zero = builder.icmp_unsigned("==", b.ir, zero)
        divisor = builder.select(is_zero, ir.Constant(a.ir.type, 1), b.ir)
        if a.dtype.kind == "u":
            result = builder.udiv(a.ir, divisor) if op is ast.FloorDiv else \
                builder.urem(a.ir, divisor)
            return Value(a.dtype, builder.select(is_zero, zero, result))
        # MIN // -1 overflows the C division: divide by 1 and negate instead (it wraps).
        minus_one = builder.icmp_signed("==", divisor, ir.Constant(a.ir.type, -1))
        divisor = builder.select(minus_one, ir.Constant(a.ir.type, 1), divisor)
        quotient = builder.sdiv(a.ir, divisor)
        remainder = builder.srem(a.ir, divisor)
        quotient = builder.select(minus_one, builder.neg(quotient), quotient)
        # C truncates; step toward -inf when the remainder's sign differs from the divisor's.
        adjust = builder.and_(builder.icmp_signed("!=", remainder, zero),
                              builder.icmp_signed("!=",
                                                  builder.icmp_signed("<", remainder, zero),
                                                  builder.icmp_signed("<", divisor, zero)))
        if op is ast.FloorDiv:
            result = builder.select(adjust, builder.sub(quotient, ir.Constant(a.ir.type, 1)),
                                    quotient)
        else:
            result = builder.select(adjust, builder.add(remainder, divisor), remainder)
        return Value(a.dtype, builder.select(is_zero, zero, result))

    def power(self, left: Value, right: Value) -> Value:
        if left.dtype.kind == "f" and right.dtype.kind in "biu":
            dtype = left.dtype  # float32 ** int stays float32 (as numba)
        else:
            dtype = T.arithmetic(left.dtype, right.dtype)
        if dtype.kind == "f":
            return self.libm("pow", [self.convert(left, dtype), self.convert(right, dtype)])
        if dtype.kind == "c":
            # numpy's or numba's, never the helper computing ``**`` with this
            return self.fallback("power", [self.convert(left, dtype),
                                           self.convert(right, dtype)], portable=False)
        raise LoweringError("integer ** is not in the kernel language (use power_int)")

    def complex_arithmetic(self, op: type, a: Value, b: Value) -> Value:
        (ar, ai), (br, bi) = self.parts(a), self.parts(b)
        if op is ast.Add:
            return self.complex(self.binary(ast.Add, ar, br), self.binary(ast.Add, ai, bi))
        if op is ast.Sub:
            return self.complex(self.binary(ast.Sub, ar, br), self.binary(ast.Sub, ai, bi))
        if op is ast.Mult:
            real = self.binary(ast.Sub, self.binary(ast.Mult, ar, br),
                               self.binary(ast.Mult, ai, bi))
            imag = self.binary(ast.Add, self.binary(ast.Mult, ar, bi),
                               self.binary(ast.Mult, ai, br))
            return self.complex(real, imag)
        if op is ast.Div:
            quotient = self.call_helper("complex_quotient", [a, b])
            assert not isinstance(quotient, tuple)
            return quotient
        raise LoweringError(f"{op.__name__} of complex numbers is not in the kernel language")

    def _visit_Compare(self, node: ast.Compare) -> Value:
        if len(node.ops) != 1:
            raise LoweringError(f"chained comparison {ast.unparse(node)!r}")
        return self.compare(type(node.ops[0]), self.scalar(node.left),
                            self.scalar(node.comparators[0]))

    def compare(self, op: type, left: Value, right: Value) -> Value:
        symbols: dict[type, str] = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
                                    ast.Eq: "==", ast.NotEq: "!="}
        symbol = symbols[op]
        dtype = T.comparison(left.dtype, right.dtype)
        a, b = self.convert(left, dtype), self.convert(right, dtype)
        builder = self.builder
        if dtype.kind == "c":
            if symbol not in ("==", "!="):
                raise LoweringError("complex numbers are not ordered")
            (ar, ai), (br, bi) = self.parts(a), self.parts(b)
            real, imag = self.compare(op, ar, br), self.compare(op, ai, bi)
            join = builder.and_ if symbol == "==" else builder.or_
            return Value(BOOL, join(real.ir, imag.ir))
        if dtype.kind == "f":
            if symbol == "!=":
                return Value(BOOL, builder.fcmp_unordered("!=", a.ir, b.ir, flags=self.flags))
            return Value(BOOL, builder.fcmp_ordered(symbol, a.ir, b.ir, flags=self.flags))
        if dtype.kind == "i":
            return Value(BOOL, builder.icmp_signed(symbol, a.ir, b.ir))
        return Value(BOOL, builder.icmp_unsigned(symbol, a.ir, b.ir))

    def _visit_BoolOp(self, node: ast.BoolOp) -> Value:
        """``and``/``or`` of truth values, short-circuiting as Python does."""
        builder = self.builder
        result = self.truth(self.scalar(node.values[0]))
        for operand in node.values[1:]:
            if not _calls(operand):  # nothing to skip: both computed, as LLVM would
                other = self.truth(self.scalar(operand))
                join = builder.and_ if isinstance(node.op, ast.And) else builder.or_
                result = Value(BOOL, join(result.ir, other.ir))
                continue
            start = builder.block
            rest = builder.append_basic_block("rest")
            done = builder.append_basic_block("done")
            if isinstance(node.op, ast.And):
                builder.cbranch(result.ir, rest, done)
            else:
                builder.cbranch(result.ir, done, rest)
            builder.position_at_end(rest)
            other = self.truth(self.scalar(operand))
            rest_end = builder.block
            builder.branch(done)
            builder.position_at_end(done)
            phi = builder.phi(T.I1)
            phi.add_incoming(result.ir, start)
            phi.add_incoming(other.ir, rest_end)
            result = Value(BOOL, phi)
        return result

    def _visit_IfExp(self, node: ast.IfExp) -> Value:
        static = self.static_truth(node.test)
        if static is not None:
            return self.scalar(node.body if static else node.orelse)
        condition = self.truth(self.scalar(node.test))
        if _calls(node.body) or _calls(node.orelse):
            return self.choose(condition, lambda: self.branch(node.body),
                               lambda: self.branch(node.orelse))
        # Arms without calls are computed both and selected, as LLVM would: a branch here
        # lets LLVM copy the code after it into each arm, where the arms' values become
        # known -- and a value computed after a clamp then runs on unclamped lanes.
        first, second = self.branch(node.body), self.branch(node.orelse)
        dtype = T.unified(first.dtype, second.dtype)
        first, second = self.convert(first, dtype), self.convert(second, dtype)
        if self.guarded:
            condition = self.pinned(condition, (first, second))
        return Value(dtype, self.builder.select(condition.ir, first.ir, second.ir))

    def pinned(self, condition: Value, values: Sequence[Value]) -> Value:
        """``condition``, made to depend on the float ``values`` through a zero LLVM
        cannot see.  The x86 back end turns a select of floats into a branch and may then
        sink the computation of a value into the branch that selects it, where it no
        longer runs for the other elements -- losing the floating-point flags numpy raises
        for every element (``np.where(m, 1.0 / x, 0)`` warns for x == 0 where m is False).
        A condition computed from the values has them computed before any branch.
        Operands loaded from memory and constants raise nothing and are left out."""
        builder = self.builder
        bits = self._computed_bits(values)
        if bits is None:
            return condition
        seen = builder.icmp_unsigned("!=", builder.and_(bits, self.opaque_zero(64)),
                                     ir.Constant(T.I64, 0))
        return Value(BOOL, builder.xor(condition.ir, seen))

    def pinned_count(self, count: ir.Value, values: Sequence[Value]) -> ir.Value:
        """The i64 ``count``, made to depend on the float ``values`` through a zero LLVM
        cannot see: a loop of ``count`` iterations that reads them has them computed
        before it, even when it runs no iteration (numpy computes scalar work once per
        call, raising its floating-point flags, however many elements there are)."""
        bits = self._computed_bits(values)
        if bits is None:
            return count
        return self.builder.add(count, self.builder.and_(bits, self.opaque_zero(64)))

    def _computed_bits(self, values: Sequence[Value]) -> ir.Value | None:
        """The OR of the bits (as i64) of the float parts of ``values`` that are computed
        (not constants, loads or hidden values), or None when there are none."""
        builder = self.builder
        bits: ir.Value | None = None
        for value in values:
            for part in self.parts(value) if value.dtype.kind == "c" else (value,):
                if part.dtype.kind != "f" or isinstance(part.ir, (ir.Constant, ir.LoadInstr)) \
                        or id(part.ir) in self._hidden:
                    continue
                word = builder.bitcast(part.ir, ir.IntType(part.dtype.itemsize * 8))
                if part.dtype.itemsize < 8:
                    word = builder.zext(word, T.I64)
                bits = word if bits is None else builder.or_(bits, word)
        return bits

    def branch(self, node: ast.expr) -> Value:
        """A value chosen by a condition.  In a kernel's statements (``guarded``) a constant
        one is hidden from LLVM: knowing it, LLVM rewrites ``f(c ? x : constant)`` as
        ``c ? f(x) : f(constant)``, computing ``f`` on every ``x`` -- and raising the
        floating-point flags of the elements a ``where`` guard (or ``where=``) keeps out.
        Helpers are written so that every value may be computed on every lane."""
        value = self.scalar(node)
        if self.guarded and value.dtype.kind != "b" and _constant(value.ir):
            return self.opaque(value)
        return value

    def opaque(self, value: Value) -> Value:
        """``value``, through a zero LLVM cannot see (a load of a weak global)."""
        if value.dtype.kind == "c":
            real, imag = self.parts(value)
            return self.complex(self.opaque(real), self.opaque(imag))
        bits = value.ir.type if isinstance(value.ir.type, ir.IntType) else \
            ir.IntType(value.dtype.itemsize * 8)  # (a bool is an i1)
        hidden = self.builder.xor(self.builder.bitcast(value.ir, bits),
                                  self.opaque_zero(bits.width, own=True))
        result = self.builder.bitcast(hidden, value.ir.type)
        self._hidden.add(id(result))
        return Value(value.dtype, result)

    def opaque_zero(self, width: int, own: bool = False) -> ir.Value:
        """A ``width``-bit zero LLVM cannot see (a load of a weak global); ``own``: of a
        global of its own, which LLVM cannot take for another's (values hidden by the
        same zero on both arms of a choice, ``where(m, int(x), 10)``, let LLVM take the
        zero out of the choice, and the backend made it a masked conversion, which raises
        no "invalid value" for the lanes left out)."""
        module = self.module
        name = "numfuse.opaque_zero"
        if own:
            # a name of this module's own, not taken yet: helpers are emitted in modules
            # of their own and linked into the kernel's, where globals of one name are one
            # zero, and two sharing a zero let LLVM cancel a value hidden twice
            # (hidden(hidden(sqrt(x))) seen as sqrt(x), its NaN test as a sign test)
            while True:
                self._zeros += 1
                name = f"numfuse.opaque_zero.{module.name}.{self._zeros}"
                if name not in module.globals:
                    break
        try:
            zero = module.get_global(name)
        except KeyError:
            zero = ir.GlobalVariable(module, T.I64, name=name)
            zero.linkage = "weak"
            zero.initializer = ir.Constant(T.I64, 0)
        mask = self.builder.load(zero)
        return self.builder.trunc(mask, ir.IntType(width)) if width < 64 else mask

    def choose(self, condition: Value, then: Callable[[], Value],
               otherwise: Callable[[], Value]) -> Value:
        """``then() if condition else otherwise()``, each computed only when chosen."""
        builder = self.builder
        yes = builder.append_basic_block("then")
        no = builder.append_basic_block("else")
        done = builder.append_basic_block("endif")
        builder.cbranch(condition.ir, yes, no)
        builder.position_at_end(yes)
        first = then()
        yes_end = builder.block
        builder.position_at_end(no)
        second = otherwise()
        no_end = builder.block
        dtype = T.unified(first.dtype, second.dtype)
        builder.position_at_end(yes_end)
        first = self.convert(first, dtype)
        builder.branch(done)
        yes_end = builder.block
        builder.position_at_end(no_end)
        second = self.convert(second, dtype)
        builder.branch(done)
        no_end = builder.block
        builder.position_at_end(done)
        phi = builder.phi(T.value_type(dtype))
        phi.add_incoming(first.ir, yes_end)
        phi.add_incoming(second.ir, no_end)
        return Value(dtype, phi)

    def static_truth(self, node: ast.expr) -> bool | None:
        """The value of a test known while compiling (``isinstance``, literals)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "isinstance":
            value = self.scalar(node.args[0])
            return bool(value.dtype == self.dtype_named(node.args[1]))
        return None

    def dtype_named(self, node: ast.expr) -> np.dtype:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "np" and node.attr in _DTYPES:
            return _DTYPES[node.attr]
        raise LoweringError(f"{ast.unparse(node)!r} is not a numpy scalar type")

    # -------------------------------------------------------------- calls

    def _visit_Call(self, node: ast.Call) -> Result:
        if node.keywords:
            raise LoweringError(f"keyword arguments in {ast.unparse(node)!r}")
        function = node.func
        if isinstance(function, ast.Name) and function.id == "isinstance":
            truth = self.static_truth(node)
            return self.literal(bool(truth))
        if isinstance(function, ast.Attribute) and function.attr == "view":
            value = self.scalar(function.value)
            return self.view(value, self.dtype_named(node.args[0]))
        arguments = [self.scalar(argument) for argument in node.args]
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) \
                and function.value.id in ("np", "math"):
            if function.value.id == "np" and function.attr in _DTYPES:
                (argument,) = arguments
                return self.convert(argument, _DTYPES[function.attr])
            return self.numpy_function(function.attr, arguments, function.value.id)
        if isinstance(function, ast.Name):
            builtin = getattr(self, f"_builtin_{function.id}", None)
            if builtin is not None:
                result: Result = builtin(*arguments)
                return result
            if function.id in kernel_lib.HELPERS:
                return self.call_helper(function.id, arguments)
        raise LoweringError(f"unknown function in {ast.unparse(node)!r}")

    def _builtin_abs(self, value: Value) -> Value:
        return self.numpy_function("absolute", [value], "np")

    def _builtin_min(self, first: Value, second: Value) -> Value:
        return self.extreme(first, second, ast.Lt)

    def _builtin_max(self, first: Value, second: Value) -> Value:
        return self.extreme(first, second, ast.Gt)

    def extreme(self, first: Value, second: Value, op: type) -> Value:
        """Python's ``min``/``max`` of two numbers: the second only if strictly beyond."""
        dtype = T.unified(first.dtype, second.dtype)
        first, second = self.convert(first, dtype), self.convert(second, dtype)
        take = self.compare(op, second, first)
        return Value(dtype, self.builder.select(take.ir, second.ir, first.ir))

    def _builtin_fused_multiply_add(self, a: Value, b: Value, c: Value) -> Value:
        """``kernel_lib.fused_multiply_add``: ``a * b + c`` rounded once (LLVM's ``fma``)."""
        return self.intrinsic("fma", self.floats([a, b, c]))

    def _builtin_kept(self, value: Value, also: Value) -> Value:
        """``kernel_lib.kept``: ``value``, its bits mixed with those of ``also`` under a
        zero LLVM cannot see, so the work making ``also`` (and its flags) stays."""
        if value.dtype.kind == "c" or also.dtype.kind == "c" or \
                value.dtype.itemsize != also.dtype.itemsize:
            raise LoweringError("kept() takes two real values of one width")
        bits = ir.IntType(value.dtype.itemsize * 8)
        builder = self.builder
        mixed = builder.xor(builder.bitcast(value.ir, bits), builder.and_(
            builder.bitcast(also.ir, bits), self.opaque_zero(bits.width)))
        return Value(value.dtype, builder.bitcast(mixed, value.ir.type))

    def _builtin_hidden(self, value: Value) -> Value:
        """``kernel_lib.hidden``: ``value`` through a zero LLVM cannot see."""
        return self.opaque(value)

    def _builtin_rare_sin(self, value: Value) -> Value:
        """``vector_math.rare_sin``: the C library's ``sin``, for the few lanes a
        vectorised function cannot reduce (see ``rare_libm``)."""
        return self.rare_libm("sin", value)

    def _builtin_rare_cos(self, value: Value) -> Value:
        return self.rare_libm("cos", value)

    def _builtin_rare_tan(self, value: Value) -> Value:
        return self.rare_libm("tan", value)

    def rare_libm(self, name: str, value: Value) -> Value:
        """A C library function called only where the program takes the branch to it,
        through a wrapper the loop vectoriser may call lane by lane: the call names
        masked vector versions of the wrapper (``_rare_variants``), which call the
        function for the lanes of their mask only, so the loop around it still
        vectorises and ordinary lanes never pay for the call."""
        (value,) = self.floats([value])
        wrapper = _rare_wrapper(self.module, name, value.dtype)
        call = self.builder.call(wrapper, [value.ir])
        call.attributes = _VariantAttribute(_rare_variants(self.module, wrapper))
        return Value(value.dtype, call)

    def _builtin_bool(self, value: Value) -> Value:
        return self.truth(value)

    def _builtin_int(self, value: Value) -> Value:
        return self.convert(value, INT64)

    def _builtin_float(self, value: Value) -> Value:
        return self.convert(value, FLOAT64)

    def _builtin_complex(self, real: Value, imag: Value | None = None) -> Value:
        if imag is None:
            return self.convert(real, COMPLEX128)
        return self.complex(self.convert(real, FLOAT64), self.convert(imag, FLOAT64))

    def numpy_function(self, name: str, arguments: list[Value], namespace: str) -> Value:
        """``np.name(...)``/``math.name(...)`` of scalars."""
        kinds = "".join(argument.dtype.kind for argument in arguments)
        method = getattr(self, f"_np_{name}", None)
        if method is not None:
            result: Value = method(*arguments)
            return result
        if "c" in kinds:
            return self.fallback(name, arguments)
        floats = self.floats(arguments)
        if name in _INTRINSICS:
            (value,) = floats
            return self.intrinsic(_INTRINSICS[name], [value])
        if name in _LIBM and len(arguments) == _LIBM_ARITY.get(name, 1):
            return self.libm(_LIBM[name], floats)
        raise LoweringError(f"{namespace}.{name} of {kinds!r} is not in the kernel language")

    def floats(self, arguments: Sequence[Value]) -> list[Value]:
        """Arguments of a float function: integers become float64, floats share a width."""
        dtype = FLOAT32 if all(argument.dtype == FLOAT32 for argument in arguments) \
            else FLOAT64
        return [self.convert(argument, dtype) for argument in arguments]

    def _np_absolute(self, value: Value) -> Value:
        kind = value.dtype.kind
        if kind == "f":
            return self.intrinsic("fabs", [value])
        if kind == "c":
            real, imag = self.parts(value)
            return self.libm("hypot", [real, imag])
        if kind == "i":
            negative = self.builder.icmp_signed("<", value.ir, ir.Constant(value.ir.type, 0))
            return Value(value.dtype, self.builder.select(
                negative, self.builder.neg(value.ir), value.ir))
        return value

    def _np_isnan(self, value: Value) -> Value:
        kind = value.dtype.kind
        if kind == "f":
            return Value(BOOL, self.builder.fcmp_unordered("uno", value.ir, value.ir))
        if kind == "c":
            real, imag = self.parts(value)
            return Value(BOOL, self.builder.or_(self._np_isnan(real).ir,
                                                self._np_isnan(imag).ir))
        return self.literal(False)

    def _np_isinf(self, value: Value) -> Value:
        kind = value.dtype.kind
        if kind == "f":
            magnitude = self.intrinsic("fabs", [value])
            infinity = T.constant(value.dtype, math.inf)
            return Value(BOOL, self.builder.fcmp_ordered("==", magnitude.ir, infinity))
        if kind == "c":
            real, imag = self.parts(value)
            return Value(BOOL, self.builder.or_(self._np_isinf(real).ir,
                                                self._np_isinf(imag).ir))
        return self.literal(False)

    def _np_isfinite(self, value: Value) -> Value:
        kind = value.dtype.kind
        if kind == "f":
            magnitude = self.intrinsic("fabs", [value])
            infinity = T.constant(value.dtype, math.inf)
            return Value(BOOL, self.builder.fcmp_ordered("<", magnitude.ir, infinity))
        if kind == "c":
            real, imag = self.parts(value)
            return Value(BOOL, self.builder.and_(self._np_isfinite(real).ir,
                                                 self._np_isfinite(imag).ir))
        return self.literal(True)

    _np_abs = _np_fabs = _np_absolute

    def _np_signbit(self, value: Value) -> Value:
        (value,) = self.floats([value])
        bits = ir.IntType(value.dtype.itemsize * 8)
        integer = self.builder.bitcast(value.ir, bits)
        return Value(BOOL, self.builder.icmp_signed("<", integer, ir.Constant(bits, 0)))

    def _np_copysign(self, magnitude: Value, sign: Value) -> Value:
        return self.intrinsic("copysign", self.floats([magnitude, sign]))

    def _np_conjugate(self, value: Value) -> Value:
        if value.dtype.kind != "c":
            return value
        real, imag = self.parts(value)
        return self.complex(real, self.negate(imag))

    def _np_rint(self, value: Value) -> Value:
        if value.dtype.kind == "c":
            real, imag = self.parts(value)
            return self.complex(self._np_rint(real), self._np_rint(imag))
        return self.intrinsic("rint", self.floats([value]))

    def _np_spacing(self, value: Value) -> Value:
        """The gap from ``value`` to the next float away from zero."""
        (value,) = self.floats([value])
        infinity = Value(value.dtype, T.constant(value.dtype, math.inf))
        away = self.intrinsic("copysign", [infinity, value])
        return self.binary(ast.Sub, self.libm("nextafter", [value, away]), value)

    def intrinsic(self, name: str, arguments: Sequence[Value]) -> Value:
        dtype = arguments[0].dtype
        kind = arguments[0].ir.type
        function = self.module.declare_intrinsic(
            f"llvm.{name}", [kind], ir.FunctionType(kind, [kind] * len(arguments)))
        result = self.builder.call(function, [argument.ir for argument in arguments],
                                   fastmath=self.flags)
        return Value(dtype, result)

    def libm(self, name: str, arguments: Sequence[Value]) -> Value:
        """A C library math function (``expf`` for float32 arguments), declared as numba
        declares it: reading no memory it writes (so LLVM may compute ``sqrt`` with the
        instruction and vectorise it)."""
        dtype = arguments[0].dtype
        symbol = f"{name}f" if dtype == FLOAT32 else name
        function = self.declare(symbol, T.value_type(dtype), [T.value_type(dtype)] *
                                len(arguments))
        if not function.attributes:
            function.attributes.add("readonly")
            function.attributes.add("nounwind")
        result = self.builder.call(function, [argument.ir for argument in arguments],
                                   fastmath=self.flags)
        return Value(dtype, result)

    def declare(self, symbol: str, result: ir.Type, arguments: Sequence[ir.Type]) -> Any:
        module = self.module
        try:
            return module.get_global(symbol)
        except KeyError:
            return ir.Function(module, ir.FunctionType(result, arguments), name=symbol)

    def fallback(self, name: str, arguments: Sequence[Value], portable: bool = True) -> Value:
        """A numpy function of complex numbers the kernel language has no code for:
        numpy's own scalar function where this numpy offers one (``numpy_loops``), so the
        values are numpy's; else, with ``portable``, numfuse's helper for it where
        ``kernel_lib`` has one (``PORTABLE``); else numba's version, compiled by the
        backend."""
        dtypes = tuple(argument.dtype for argument in arguments)
        ufunc = getattr(np, name, None)
        if not isinstance(ufunc, np.ufunc) or ufunc.nout != 1:
            raise LoweringError(f"np.{name} of {dtypes} is not in the kernel language")
        found = numpy_loops.function(name, _loop_dtypes(ufunc, dtypes))
        if found is not None:
            return self.numpy_call(found, arguments)
        if portable and name in PORTABLE:
            helped = self.call_helper(PORTABLE[name], arguments)
            assert not isinstance(helped, tuple)
            return helped
        with np.errstate(all="ignore"):
            result = ufunc(*(np.zeros((), dtype) for dtype in dtypes)).dtype
        needed = Fallback(name, dtypes, result)
        self.fallbacks.add(needed)
        function = self.declare(needed.symbol, T.value_type(result),
                                [T.value_type(dtype) for dtype in dtypes])
        return Value(result, self.builder.call(function, [argument.ir
                                                          for argument in arguments]))

    def numpy_call(self, found: numpy_loops.NumpyFunction,
                   arguments: Sequence[Value]) -> Value:
        """A call of numpy's scalar function ``found`` (through its adapter, which takes
        and returns values in registers; the backend registers the symbol)."""
        dtype = found.result
        adapter = _numpy_adapter(self.module, found)
        values = [self.convert(argument, dtype).ir for argument in arguments]
        return Value(dtype, self.builder.call(adapter, values))

    def call_helper(self, name: str, arguments: Sequence[Value]) -> Result:
        if name in kernel_lib.EXTERNAL:
            return self.external(name, arguments)
        helper = self.compiler.helper(name, tuple(argument.dtype for argument in arguments),
                                      self.flags)
        self.calls.add(helper)
        result_type = _result_type(helper.result)
        function = self.declare(helper.symbol, result_type,
                                [T.value_type(dtype) for dtype in helper.arguments])
        call = self.builder.call(function, [argument.ir for argument in arguments])
        if isinstance(helper.result, tuple):
            return tuple(Value(dtype, self.builder.extract_value(call, position))
                         for position, dtype in enumerate(helper.result))
        if helper.result.kind == "V":  # returns nothing
            return self.literal(0)
        return Value(helper.result, call)

    def external(self, name: str, arguments: Sequence[Value]) -> Value:
        """A helper that calls out of the kernel: raising a floating-point flag through the
        C library's ``feraiseexcept`` (an external call LLVM can neither remove nor
        speculate), or a function of numfuse's registered under ``EXTERNAL[name]``."""
        if arguments:
            raise LoweringError(f"{name}() takes no arguments")
        if name in kernel_lib.FLAG_RAISERS:
            function = self.declare("feraiseexcept", T.I32, [T.I32])
            self.builder.call(function, [ir.Constant(T.I32, kernel_lib.FLAG_RAISERS[name])])
        else:
            symbol = kernel_lib.EXTERNAL[name]
            if symbol is not None:
                self.builder.call(self.declare(symbol, ir.VoidType(), []), [])
        return self.literal(0)

    # -------------------------------------------------------------- conversions

    def view(self, value: Value, dtype: np.dtype) -> Value:
        if value.dtype.itemsize != dtype.itemsize or "c" in value.dtype.kind + dtype.kind:
            raise LoweringError(f"cannot view {value.dtype} as {dtype}")
        return Value(dtype, self.builder.bitcast(value.ir, T.value_type(dtype)))

    def truth(self, value: Value) -> Value:
        """``bool(value)``."""
        return self.convert(value, BOOL)

    def part(self, value: Value, which: str) -> Value:
        if value.dtype.kind == "c":
            real, imag = self.parts(value)
            return real if which == "real" else imag
        if which == "real":
            return value
        return Value(value.dtype, T.constant(value.dtype, 0))

    def parts(self, value: Value) -> tuple[Value, Value]:
        part = T.part_of(value.dtype)
        return (Value(part, self.builder.extract_value(value.ir, 0)),
                Value(part, self.builder.extract_value(value.ir, 1)))

    def complex(self, real: Value, imag: Value) -> Value:
        dtype = T.complex_of(T.unified(real.dtype, imag.dtype))
        part = T.part_of(dtype)
        real, imag = self.convert(real, part), self.convert(imag, part)
        struct = ir.Constant(T.value_type(dtype), ir.Undefined)
        struct = self.builder.insert_value(struct, real.ir, 0)
        return Value(dtype, self.builder.insert_value(struct, imag.ir, 1))

    def convert(self, value: Value, dtype: np.dtype) -> Value:
        """``value`` as ``dtype``, converted as numba converts (C casts)."""
        source = value.dtype
        if source == dtype:
            return value
        builder = self.builder
        target = T.value_type(dtype)
        if dtype.kind == "c":
            part = T.part_of(dtype)
            if source.kind == "c":
                real, imag = self.parts(value)
                return self.complex(self.convert(real, part), self.convert(imag, part))
            return self.complex(self.convert(value, part), Value(part, T.constant(part, 0)))
        if source.kind == "c":
            raise LoweringError(f"a complex number converts to {dtype} through .real")
        if dtype.kind == "b":
            if source.kind == "f":
                return Value(BOOL, builder.fcmp_unordered(
                    "!=", value.ir, T.constant(source, 0), flags=self.flags))
            return Value(BOOL, builder.icmp_unsigned("!=", value.ir,
                                                     ir.Constant(value.ir.type, 0)))
        if source.kind == "b":
            made = builder.uitofp if dtype.kind == "f" else builder.zext
            converted = Value(dtype, made(value.ir, target))
            # a kernel's bool made a number is hidden: knowing it 0 or 1, LLVM makes a
            # division by it (``1.0 / mask``) a choice of two constants, which raises no
            # "divide by zero" (the vector loop keeps the division: short arrays lost it)
            return self.opaque(converted) if self.guarded else converted
        if source.kind in "iu" and dtype.kind in "iu":
            if dtype.itemsize < source.itemsize:
                return Value(dtype, builder.trunc(value.ir, target))
            if dtype.itemsize == source.itemsize:
                return Value(dtype, value.ir)
            extend = builder.sext if source.kind == "i" else builder.zext
            return Value(dtype, extend(value.ir, target))
        if source.kind in "iu":
            convert = builder.sitofp if source.kind == "i" else builder.uitofp
            return Value(dtype, convert(value.ir, target))
        if dtype.kind in "iu":
            if getattr(value.ir, "opname", None) in ("sitofp", "uitofp"):
                # an integer made a float, then an integer again: LLVM would fold the two
                # into one integer cast, where numpy's float gives INT_MIN and "invalid"
                # for a value beyond the target's range
                value = self.opaque(value)
            convert = builder.fptosi if dtype.kind == "i" else builder.fptoui
            return Value(dtype, convert(value.ir, target))
        if dtype.itemsize > source.itemsize:
            return Value(dtype, builder.fpext(value.ir, target))
        return Value(dtype, builder.fptrunc(value.ir, target))

    # -------------------------------------------------------------- statements (helpers)

    def statements(self, body: Sequence[ast.stmt], frame: _Frame) -> None:
        for statement in body:
            if self.builder.block.is_terminated:
                return  # code after return/break/continue
            method = getattr(self, f"_statement_{type(statement).__name__}", None)
            if method is None:
                raise LoweringError(f"helpers cannot contain {ast.unparse(statement)!r}")
            method(statement, frame)

    def _statement_Expr(self, statement: ast.Expr, frame: _Frame) -> None:
        if not isinstance(statement.value, ast.Constant):  # a docstring
            self.visit(statement.value)

    def _statement_Pass(self, statement: ast.Pass, frame: _Frame) -> None:
        pass

    def _statement_Assign(self, statement: ast.Assign, frame: _Frame) -> None:
        (target,) = statement.targets
        value = self.visit(statement.value)
        if isinstance(target, ast.Tuple):
            if not isinstance(value, tuple) or len(value) != len(target.elts):
                raise LoweringError(f"cannot unpack in {ast.unparse(statement)!r}")
            for element, part in zip(target.elts, value, strict=True):
                self.assign(_name_of(element), part, frame)
            return
        if isinstance(value, tuple):
            raise LoweringError(f"tuple variables are not in the language: "
                                f"{ast.unparse(statement)!r}")
        self.assign(_name_of(target), value, frame)

    def _statement_AugAssign(self, statement: ast.AugAssign, frame: _Frame) -> None:
        name = _name_of(statement.target)
        current = self._visit_Name(ast.Name(name))
        self.assign(name, self.binary(type(statement.op), current,
                                      self.scalar(statement.value)), frame)

    def assign(self, name: str, value: Value, frame: _Frame) -> None:
        dtype = frame.variable(name, value.dtype)
        if name not in self.slots:
            with self.builder.goto_entry_block():
                slot = self.builder.alloca(T.value_type(dtype), name=name)
            self.slots[name] = (dtype, slot)
        dtype, slot = self.slots[name]
        self.builder.store(self.convert(value, dtype).ir, slot)

    def _statement_If(self, statement: ast.If, frame: _Frame) -> None:
        static = self.static_truth(statement.test)
        if static is not None:
            self.statements(statement.body if static else statement.orelse, frame)
            return
        condition = self.truth(self.scalar(statement.test))
        builder = self.builder
        then = builder.append_basic_block("then")
        otherwise = builder.append_basic_block("else")
        done = builder.append_basic_block("endif")
        builder.cbranch(condition.ir, then, otherwise)
        for block, body in ((then, statement.body), (otherwise, statement.orelse)):
            builder.position_at_end(block)
            self.statements(body, frame)
            if not builder.block.is_terminated:
                builder.branch(done)
        builder.position_at_end(done)

    def _statement_While(self, statement: ast.While, frame: _Frame) -> None:
        builder = self.builder
        test = builder.append_basic_block("while")
        body = builder.append_basic_block("loop")
        done = builder.append_basic_block("endwhile")
        builder.branch(test)
        builder.position_at_end(test)
        static = self.static_truth(statement.test)
        if static is None:
            builder.cbranch(self.truth(self.scalar(statement.test)).ir, body, done)
        else:
            builder.branch(body if static else done)
        builder.position_at_end(body)
        frame.loops.append((test, done))
        self.statements(statement.body, frame)
        frame.loops.pop()
        if not builder.block.is_terminated:
            builder.branch(test)
        builder.position_at_end(done)

    def _statement_Break(self, statement: ast.Break, frame: _Frame) -> None:
        self.builder.branch(frame.loops[-1][1])

    def _statement_Continue(self, statement: ast.Continue, frame: _Frame) -> None:
        self.builder.branch(frame.loops[-1][0])

    def _statement_Return(self, statement: ast.Return, frame: _Frame) -> None:
        value = self.visit(statement.value) if statement.value is not None else ()
        frame.returned(self, value)


def _loop_dtypes(ufunc: np.ufunc, dtypes: tuple[np.dtype, ...]) -> tuple[np.dtype, ...]:
    """The dtypes numpy's loop takes for arguments of ``dtypes`` (the inputs are cast to
    them), or ``()`` when numpy has no loop for them."""
    try:
        resolved = ufunc.resolve_dtypes(dtypes + (None,) * ufunc.nout)
    except (TypeError, np.exceptions.DTypePromotionError):
        return ()
    return tuple(resolved[:ufunc.nin])


def _numpy_adapter(module: ir.Module, found: numpy_loops.NumpyFunction) -> ir.Function:
    """``<symbol>.registers(arguments...) -> result``, defined once per module: stores the
    arguments, calls numpy's ``symbol(&argument..., &result)`` and loads the result.
    LLVM inlines it and hoists its slots to the caller's entry block."""
    name = f"{found.symbol}.registers"
    with contextlib.suppress(KeyError):
        existing: ir.Function = module.get_global(name)
        return existing
    value = T.value_type(found.result)
    pointer = value.as_pointer()
    count = len(found.arguments)
    external = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer] * (count + 1)),
                           name=found.symbol)
    external.attributes.add("nounwind")
    adapter = ir.Function(module, ir.FunctionType(value, [value] * count), name=name)
    adapter.linkage = "linkonce_odr"
    adapter.attributes.add("alwaysinline")
    adapter.attributes.add("nounwind")
    builder = ir.IRBuilder(adapter.append_basic_block("entry"))
    slots = [builder.alloca(value) for _ in range(count + 1)]
    for slot, argument in zip(slots, adapter.args, strict=False):
        builder.store(argument, slot)
    builder.call(external, slots)
    builder.ret(builder.load(slots[-1]))
    return adapter


_RARE_WIDTHS = (2, 4, 8, 16)


class _VariantAttribute:
    """The call-site attribute naming a call's vector versions (LLVM's vector function
    ABI), which llvmlite's attribute sets do not know."""

    def __init__(self, variants: str) -> None:
        self.variants = variants

    def __bool__(self) -> bool:
        return True

    def _to_list(self, return_type: ir.Type) -> list[str]:
        return [f'"vector-function-abi-variant"="{self.variants}"']


VECTOR_VARIANT_PREFIX = "_ZGV_LLVM_M"  # how a masked vector variant's name starts
RARE_PREFIX = "numfuse_rare_"  # how a rare library call's wrapper's name starts


def _rare_wrapper(module: ir.Module, name: str, dtype: np.dtype) -> ir.Function:
    """``numfuse_rare_<C name>``: calls the C library function (never inlined, so the
    vectoriser sees one call it has vector versions of)."""
    symbol = f"{name}f" if dtype == FLOAT32 else name
    wrapper_name = f"{RARE_PREFIX}{symbol}"
    with contextlib.suppress(KeyError):
        existing: ir.Function = module.get_global(wrapper_name)
        return existing
    kind = T.value_type(dtype)
    try:
        libm = module.get_global(symbol)
    except KeyError:
        libm = ir.Function(module, ir.FunctionType(kind, [kind]), name=symbol)
    wrapper = ir.Function(module, ir.FunctionType(kind, [kind]), name=wrapper_name)
    wrapper.linkage = "linkonce_odr"
    for attribute in ("noinline", "readnone", "nounwind"):
        wrapper.attributes.add(attribute)
    builder = ir.IRBuilder(wrapper.append_basic_block("entry"))
    builder.ret(builder.call(libm, [wrapper.args[0]]))
    return wrapper


def _rare_variants(module: ir.Module, wrapper: ir.Function) -> str:
    """Masked vector versions of ``wrapper`` for each width in ``_RARE_WIDTHS`` (each
    calls it lane by lane where its mask is set), as the attribute value naming them."""
    kind = wrapper.function_type.return_type
    names = []
    for width in _RARE_WIDTHS:
        # named by its own mangled name, as vector math libraries name theirs
        variant_name = f"{VECTOR_VARIANT_PREFIX}{width}v_{wrapper.name}"
        names.append(f"{variant_name}({variant_name})")
        with contextlib.suppress(KeyError):
            module.get_global(variant_name)
            continue
        vector = ir.VectorType(kind, width)
        variant = ir.Function(module, ir.FunctionType(
            vector, [vector, ir.VectorType(T.I1, width)]), name=variant_name)
        # weak, not linkonce: only an attribute names it, and LLVM would drop an unused
        # linkonce function before the vectoriser looks for it
        variant.linkage = "weak_odr"
        variant.attributes.add("nounwind")
        # inlined after vectorisation (``backend.compile_object``): the test of the mask
        # stays in the loop, the calls in a branch its ordinary iterations never take
        variant.attributes.add("alwaysinline")
        builder = ir.IRBuilder(variant.append_basic_block("entry"))
        values, mask = variant.args
        # lanes left out are zeros, not undefined: inlined, an undefined lane is whatever
        # a register holds, which a conversion after the call (float32's rounding of the
        # float64 result) can find tiny or huge, raising "underflow" or "overflow"
        result: ir.Value = ir.Constant(vector, None)
        lanes = builder.append_basic_block("lanes")
        nothing = builder.append_basic_block("nothing")
        bits = builder.bitcast(mask, ir.IntType(width))
        builder.cbranch(builder.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(width), 0)),
                        lanes, nothing)
        builder.position_at_end(nothing)
        builder.ret(result)
        builder.position_at_end(lanes)
        for lane in range(width):
            index = ir.Constant(T.I32, lane)
            start = builder.block
            call_block = builder.append_basic_block(f"lane{lane}")
            done = builder.append_basic_block(f"done{lane}")
            builder.cbranch(builder.extract_element(mask, index), call_block, done)
            builder.position_at_end(call_block)
            computed = builder.insert_element(result, builder.call(
                wrapper, [builder.extract_element(values, index)]), index)
            builder.branch(done)
            builder.position_at_end(done)
            phi = builder.phi(vector)
            phi.add_incoming(result, start)
            phi.add_incoming(computed, call_block)
            result = phi
        builder.ret(result)
    return ",".join(names)


# numpy functions of complex numbers that numfuse's helpers compute where numpy's own are
# not available (``Emitter.fallback``): name -> helper.
PORTABLE = {"power": "complex_power", "float_power": "complex_power",
            "expm1": "complex_expm1", "log1p": "complex_log1p", "exp2": "complex_exp2",
            "arccosh": "complex_arccosh"}


def _name_of(target: ast.expr) -> str:
    if not isinstance(target, ast.Name):
        raise LoweringError(f"cannot assign to {ast.unparse(target)!r}")
    return target.id


def _folded(node: ast.UnaryOp) -> object | None:
    """``-<number>`` as one literal, as Python's compiler folds it."""
    if isinstance(node.operand, ast.Constant) and isinstance(node.op, (ast.USub, ast.UAdd)) \
            and isinstance(node.operand.value, (int, float)) and \
            not isinstance(node.operand.value, bool):
        value = node.operand.value
        return -value if isinstance(node.op, ast.USub) else value
    return None


# Functions whose calls neither raise floating-point flags (beyond what their operands'
# arithmetic would) nor do anything else observable: computing them where Python would
# not is harmless.  By name, as ``np.<name>``/``x.<name>`` or as a builtin.
_QUIET = frozenset({*_DTYPES, "view", "abs", "absolute", "fabs", "min", "max", "bool",
                    "complex", "isinstance", "isnan", "isinf", "isfinite", "signbit",
                    "copysign", "conjugate", "floor", "ceil", "trunc", "rint"})


def _constant(value: ir.Value) -> bool:
    """Whether LLVM can fold ``value`` to a constant: a constant, or a cast, arithmetic
    or intrinsic call on constants only (``np.float32(0.0)`` is an ``fptrunc``)."""
    if isinstance(value, ir.Constant):
        return True
    if isinstance(value, (ir.LoadInstr, ir.PhiInstr)) or not isinstance(value,
                                                                          ir.Instruction):
        return False
    if isinstance(value, ir.CallInstr) and not getattr(value.callee, "name",
                                                       "").startswith("llvm."):
        return False
    operands = value.args if isinstance(value, ir.CallInstr) else value.operands
    return all(_constant(operand) for operand in operands)


def _calls(node: ast.AST) -> bool:
    """Whether computing ``node`` calls a function that may raise a floating-point flag
    or call out of the kernel (a C library function, an external, a helper doing so):
    such code runs only where Python would run it."""
    return any(not _quiet_call(inner) for inner in ast.walk(node)
               if isinstance(inner, ast.Call))


def _quiet_call(call: ast.Call) -> bool:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr in _QUIET
    if not isinstance(function, ast.Name):
        return False
    if function.id in _QUIET:
        return True
    return function.id in kernel_lib.HELPERS and function.id not in kernel_lib.EXTERNAL \
        and _quiet_helper(function.id)


@cache
def _quiet_helper(name: str) -> bool:
    """A helper whose body calls only quiet functions and quiet helpers."""
    return not _calls(_definition(name))


@cache
def _parse_expression(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _result_type(result: np.dtype | tuple[np.dtype, ...]) -> ir.Type:
    if isinstance(result, tuple):
        return ir.LiteralStructType([T.value_type(dtype) for dtype in result])
    if result.kind == "V":
        return ir.VoidType()
    return T.value_type(result)


# ------------------------------------------------------------------ helper functions

_VOID = np.dtype("V")


@dataclasses.dataclass
class _Frame:
    """What one compile of a helper learns: its variables' dtypes (the union of every
    value assigned) and its return dtype.  A helper is compiled until these are stable."""

    variables: dict[str, np.dtype]
    result: np.dtype | tuple[np.dtype, ...] | None
    exit: ir.Block | None = None
    slot: ir.Value | None = None  # holds a result of dtype ``slot_result``
    slot_result: np.dtype | tuple[np.dtype, ...] | None = None
    changed: bool = False
    loops: list[tuple[ir.Block, ir.Block]] = dataclasses.field(default_factory=list)

    def variable(self, name: str, dtype: np.dtype) -> np.dtype:
        known = self.variables.get(name)
        merged = dtype if known is None else T.unified(known, dtype)
        if known is None or merged != known:
            self.variables[name] = merged
            self.changed = True
        return merged

    def returned(self, emitter: Emitter, value: Result) -> None:
        if isinstance(value, tuple):
            dtypes = tuple(element.dtype for element in value) if value else _VOID
        else:
            dtypes = value.dtype
        merged = _merge_results(self.result, dtypes)
        if self.result is None or merged != self.result:
            self.result = merged
            self.changed = True
        builder = emitter.builder
        if self.slot is not None and merged == self.slot_result:
            if isinstance(merged, tuple):
                assert isinstance(value, tuple)
                struct = ir.Constant(_result_type(merged), ir.Undefined)
                for position, (element, dtype) in enumerate(zip(value, merged, strict=True)):
                    converted = emitter.convert(element, dtype)
                    struct = builder.insert_value(struct, converted.ir, position)
                builder.store(struct, self.slot)
            else:
                assert not isinstance(value, tuple)
                builder.store(emitter.convert(value, merged).ir, self.slot)
        assert self.exit is not None
        builder.branch(self.exit)


def _merge_results(known: np.dtype | tuple[np.dtype, ...] | None,
                   new: np.dtype | tuple[np.dtype, ...]) -> np.dtype | tuple[np.dtype, ...]:
    if known is None or known == new:
        return new
    if isinstance(known, tuple) and isinstance(new, tuple) and len(known) == len(new):
        return tuple(T.unified(a, b) for a, b in zip(known, new, strict=True))
    if isinstance(known, np.dtype) and isinstance(new, np.dtype) and _VOID not in (known, new):
        return T.unified(known, new)
    raise LoweringError(f"a helper returns both {known} and {new}")


class HelperCompiler:
    """Compiles ``kernel_lib``'s helpers (and ``vector_math``'s, re-exported there) per
    argument dtypes and fast-math flags, once per process."""

    def __init__(self) -> None:
        self._compiled: dict[tuple[str, tuple[np.dtype, ...], Flags], Helper] = {}
        self._lock = threading.RLock()

    def helper(self, name: str, arguments: tuple[np.dtype, ...], flags: Flags) -> Helper:
        flags = _helper_flags(name, flags)
        key = (name, arguments, flags)
        with self._lock:
            helper = self._compiled.get(key)
            if helper is None:
                helper = self._compiled[key] = self._compile(name, arguments, flags)
            return helper

    def _compile(self, name: str, arguments: tuple[np.dtype, ...], flags: Flags) -> Helper:
        definition = _definition(name)
        parameters = [argument.arg for argument in definition.args.args]
        if len(parameters) != len(arguments):
            raise LoweringError(f"{name} takes {len(parameters)} arguments, "
                                f"called with {len(arguments)}")
        symbol = f"numfuse.helper.{name}.{_tag(arguments)}" + (
            f".{'_'.join(flags)}" if flags else "")
        frame = _Frame({}, None)
        for _ in range(8):  # until the variables' and the result's dtypes are stable
            frame.changed = False
            emitter, function = self._emit(symbol, definition, parameters, arguments, flags,
                                           frame)
            if not frame.changed:
                break
        else:  # pragma: no cover - the dtypes of a helper are a small lattice
            raise LoweringError(f"the types of {name} do not settle")
        assert frame.result is not None
        return Helper(symbol, arguments, frame.result, str(function.module),
                      frozenset(emitter.calls), frozenset(emitter.fallbacks))

    def _emit(self, symbol: str, definition: ast.FunctionDef, parameters: list[str],
              arguments: tuple[np.dtype, ...], flags: Flags,
              frame: _Frame) -> tuple[Emitter, ir.Function]:
        module = ir.Module(name=symbol)
        result = frame.result if frame.result is not None else _VOID
        function = ir.Function(module, ir.FunctionType(
            _result_type(result), [T.value_type(dtype) for dtype in arguments]), name=symbol)
        function.linkage = "linkonce_odr"
        function.attributes.add("alwaysinline")
        function.attributes.add("nounwind")
        entry = function.append_basic_block("entry")
        body = function.append_basic_block("body")
        builder = ir.IRBuilder(body)
        names = {parameter: Value(dtype, value) for parameter, dtype, value in
                 zip(parameters, arguments, function.args, strict=True)}
        emitter = Emitter(builder, flags, self, names)
        frame.exit = function.append_basic_block("exit")
        frame.slot = None
        frame.slot_result = result
        if result != _VOID:
            with builder.goto_entry_block():
                frame.slot = builder.alloca(_result_type(result), name="result")
        for parameter in parameters:  # parameters may be assigned: give them slots
            if _assigns(definition, parameter):
                emitter.values.pop(parameter)
                emitter.assign(parameter, names[parameter], frame)
        emitter.statements(definition.body, frame)
        if not builder.block.is_terminated:
            if result != _VOID and (frame.result is None or frame.result != result):
                frame.changed = True
            builder.branch(frame.exit)
        builder.position_at_end(frame.exit)
        if frame.slot is None:
            builder.ret_void()
        else:
            builder.ret(builder.load(frame.slot))
        builder.position_at_end(entry)
        builder.branch(body)
        return emitter, function


def _helper_flags(name: str, flags: Flags) -> Flags:
    """A helper's fast-math flags: its own where it has them, else its caller's (the
    kernel's, or the helper calling it), except for ``vector_math``'s, which take only
    contraction from their caller: their reductions and error terms rely on each rounding
    (reassociated, float64 ``log`` was off by 1e20 ulp) and on signed zeros."""
    if name in kernel_lib.CONTRACTED:
        return ("contract",)
    if name in kernel_lib.REASSOCIATED:
        return ("reassoc",)
    if name in _VECTOR_MATH_HELPERS:
        # contraction alone passes on, from a contracted caller (the float32 functions'
        # polynomials are fused multiply-adds); a fast-math kernel's flags never do
        return ("contract",) if tuple(flags) == ("contract",) else ()
    return tuple(sorted(flags))


_VECTOR_MATH_HELPERS = frozenset(vector_math.HELPERS)


@cache
def _definition(name: str) -> ast.FunctionDef:
    function = getattr(kernel_lib, name)
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    assert isinstance(definition, ast.FunctionDef)
    return definition


def _assigns(definition: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(node, (ast.Assign, ast.AugAssign)) and any(
        isinstance(target, ast.Name) and target.id == name
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target]))
        for node in ast.walk(definition))


HELPERS = HelperCompiler()
