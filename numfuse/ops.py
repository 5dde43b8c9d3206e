"""The op table: one row per elementwise operation.

A row names the numpy reference (the ufunc or function whose semantics it has), its arity
and the scalar code the kernel runs for each kind of loop dtype.  Adding a ufunc is one row;
the differential tests iterate over this table, so a new row is tested with no new test.

Scalar code is a template over the operands ``{0} {1} {2}`` (already cast to the loop
dtypes numpy would use) and ``{L}`` (the loop dtype's constructor, e.g. ``np.float32``),
``{bits}`` (its width) and ``{min}`` (its smallest value).  The template is looked up by
the kinds of the loop dtypes (``b`` bool, ``i`` signed, ``u`` unsigned, ``f`` float, ``c``
complex): first the full string (``"iu"``), then the first kind, then ``"*"``.  The result
is cast to the output dtype by the code generator.  Result dtypes come from numpy itself
(``ufunc.resolve_dtypes``), so promotion is NumPy 2's by construction.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import kernel_lib, vector_math

# An operand as the dtype rules see it: a strong dtype or a weak Python scalar type.
DtypeOrWeak = np.dtype | type


class Exactness(enum.Enum):
    """How a kernel's results compare with numpy's."""

    EXACT = "bit for bit"
    EXACT_FOR_REAL = "bit for bit on real dtypes, within a few ulp on complex ones"
    ULPS = "within a few ulp (the C library's or numfuse's own functions)"


@dataclasses.dataclass(frozen=True)
class Category:
    """A kind of operation and the facts its rows share: ``cost`` is the work per element
    in simple arithmetic operations (what recomputing a value or splitting a call over
    threads weighs), ``transcendental`` marks functions computed by polynomial or library
    code."""

    name: str
    cost: int
    transcendental: bool
    exactness: Exactness


ARITHMETIC = Category("arithmetic", 1, False, Exactness.EXACT)
DIVISION = Category("division", 8, False, Exactness.EXACT)
ROOT = Category("root", 8, False, Exactness.EXACT_FOR_REAL)
EXPONENTIAL = Category("exponential and logarithm", 20, True, Exactness.ULPS)
TRIGONOMETRIC = Category("trigonometric and hyperbolic", 20, True, Exactness.ULPS)
ROUNDING = Category("rounding", 1, False, Exactness.EXACT)
COMPARISON = Category("comparison", 1, False, Exactness.EXACT)
EXTREMUM = Category("maximum and minimum", 1, False, Exactness.EXACT)
LOGICAL = Category("logical", 1, False, Exactness.EXACT)
BITWISE = Category("bitwise", 1, False, Exactness.EXACT)
CLASSIFICATION = Category("classification and bits", 1, False, Exactness.EXACT)
SELECTION = Category("selection", 1, False, Exactness.EXACT)
CONVERSION = Category("conversion", 1, False, Exactness.EXACT)
CATEGORIES = (ARITHMETIC, DIVISION, ROOT, EXPONENTIAL, TRIGONOMETRIC, ROUNDING, COMPARISON,
              EXTREMUM, LOGICAL, BITWISE, CLASSIFICATION, SELECTION, CONVERSION)

Resolver = Callable[[Sequence["DtypeOrWeak"]], tuple[tuple[np.dtype, ...], np.dtype]]


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One elementwise operation and every fact about it.

    ``reference`` is the numpy callable with the same semantics (a ufunc for most rows);
    ``code`` maps loop-dtype kinds to scalar templates; ``category`` gives its cost and
    whether it is transcendental; ``exactness`` how its results compare with numpy's;
    ``resolve`` (when not a ufunc) returns the loop dtypes of the inputs and the output
    dtype; ``commutative`` the loop dtype kinds for which ``f(a, b)`` and ``f(b, a)`` are
    identical bit for bit, NaN payloads and signed zeros included (see ``commutes``).
    """

    name: str
    reference: Callable[..., Any]
    arity: int
    code: Mapping[str, str]
    category: Category
    exactness: Exactness
    resolve: Resolver | None = None
    commutative: str = ""

    @property
    def cost(self) -> int:
        return self.category.cost

    @property
    def transcendental(self) -> bool:
        return self.category.transcendental

    @property
    def comparison(self) -> bool:
        return self.category is COMPARISON

    @property
    def vector_math(self) -> bool:
        """Whether float loops compute it with numfuse's vectorisable functions."""
        return vector_math.ENABLED and self.name in vector_math.FUNCTIONS

    def commutes(self, loop: Sequence[np.dtype]) -> bool:
        """Whether swapping the two operands of this loop gives the same bits: a binary
        row whose loop dtypes are equal and of a ``commutative`` kind."""
        return self.arity == 2 and len(set(loop)) == 1 and loop[0].kind in self.commutative

    def template(self, loop: Sequence[np.dtype]) -> str | None:
        kinds = "".join(dtype.kind for dtype in loop)
        for key in (kinds, kinds[:1], "*"):
            if key in self.code:
                return self.code[key]
        return None

    def loop_dtypes(self, operands: Sequence[DtypeOrWeak]) -> tuple[tuple[np.dtype, ...], np.dtype]:
        """(loop dtypes of the inputs, output dtype), exactly as numpy resolves them."""
        if self.resolve is not None:
            return self.resolve(operands)
        ufunc = self.reference
        assert isinstance(ufunc, np.ufunc)
        resolved = ufunc.resolve_dtypes(tuple(operands) + (None,) * ufunc.nout)
        return tuple(resolved[: ufunc.nin]), resolved[ufunc.nin]


def _resolve_where(operands: Sequence[DtypeOrWeak]) -> tuple[tuple[np.dtype, ...], np.dtype]:
    _cond, *branches = operands
    out = np.result_type(*(_weak_sample(operand) for operand in branches))
    return (np.dtype(bool), out, out), out


def _weak_sample(operand: DtypeOrWeak) -> Any:
    """What ``np.result_type`` needs to treat a weak Python scalar as weak (NEP 50)."""
    return operand() if isinstance(operand, type) else operand


_ROWS: list[OpDef] = []


def _row(name: str, reference: Callable[..., Any], arity: int, category: Category, *,
         exactness: Exactness | None = None, resolve: Resolver | None = None,
         commutative: str = "", **code: str) -> None:
    """One row: the facts of ``category`` (``exactness`` overrides its own), the dtype
    kinds it is ``commutative`` for and the scalar templates by dtype kinds (``star`` for
    ``*``)."""
    star = code.pop("star", None)
    if star is not None:
        code["*"] = star
    _ROWS.append(OpDef(name, reference, arity, code, category,
                       exactness or category.exactness, resolve, commutative))


# Commutative kinds.  With two NaN operands numpy's float and complex arithmetic returns
# the first one's payload (x86), and maximum/minimum/fmax/fmin return the second operand
# of a tie between 0.0 and -0.0: for floats and complex numbers these are commutative in
# value only, so only integer and bool loops are declared.  Comparisons and logical
# operations give bools, the same either way for every kind.
_INTEGERS = "biu"
_EVERY_KIND = "biufc"


def _unary_math(ufunc: np.ufunc, category: Category) -> None:
    template = f"np.{ufunc.__name__}({{0}})"
    _row(ufunc.__name__, ufunc, 1, category, f=_float_math(ufunc.__name__), c=template)


def _float_math(name: str) -> str:
    """The float template of a math function: the vectorisable ``vector_math`` version
    (``exp_f64``/``exp_f32``) where there is one and it is enabled, else numpy's (libm)."""
    if vector_math.ENABLED and name in vector_math.FUNCTIONS:
        return f"{name}_f{{bits}}({{0}})"
    return f"np.{name}({{0}})"


# --- arithmetic -------------------------------------------------------------------------
# Signed integers wrap in numpy; numba's signed arithmetic carries LLVM's no-signed-wrap
# flag (an overflow is undefined, and code after it may see any value), so it runs in
# uint64, whose wrap-around is defined, and comes back with the dtype's cast.
_WRAP = "np.int64(np.uint64({0}) {op} np.uint64({1}))"
_row("add", np.add, 2, ARITHMETIC, commutative=_INTEGERS,
     b="({0} or {1})", i=_WRAP.replace("{op}", "+"),
     star="({0} + {1})")
_row("subtract", np.subtract, 2, ARITHMETIC, i=_WRAP.replace("{op}", "-"), star="({0} - {1})")
_row("multiply", np.multiply, 2, ARITHMETIC, commutative=_INTEGERS,
     b="({0} and {1})", i=_WRAP.replace("{op}", "*"),
     star="({0} * {1})")
_row("true_divide", np.true_divide, 2, DIVISION, exactness=Exactness.EXACT_FOR_REAL,
     c="complex_divide({0}, {1})", star="({0} / {1})")
_row("floor_divide", np.floor_divide, 2, DIVISION, i="floor_divide_int({0}, {1}, {min})",
     u="floor_divide_int({0}, {1}, {min})", f="floor_divide_float({0}, {1})",
     b="floor_divide_int({0}, {1}, {min})")
_row("remainder", np.remainder, 2, DIVISION, i="remainder_int({0}, {1})",
     u="remainder_int({0}, {1})", f="remainder_float({0}, {1})")
_row("fmod", np.fmod, 2, DIVISION, i="fmod_int({0}, {1})", u="fmod_int({0}, {1})",
     f="np.fmod({0}, {1})")
_row("power", np.power, 2, EXPONENTIAL, i="power_int({0}, {1})", u="power_int({0}, {1})",
     f="power_float({0}, {1})", c="complex_power({0}, {1})")
_row("float_power", np.float_power, 2, EXPONENTIAL, f="({0} ** {1})", c="complex_power({0}, {1})")
_row("negative", np.negative, 1, ARITHMETIC, i="np.int64(np.uint64(0) - np.uint64({0}))",
     star="(-{0})")
_row("positive", np.positive, 1, ARITHMETIC, star="{0}")
_row("absolute", np.absolute, 1, ARITHMETIC, exactness=Exactness.EXACT_FOR_REAL, b="{0}",
     u="{0}", c="complex_abs({0})",
     i="np.int64((np.uint64({0}) ^ np.uint64(np.int64({0}) >> 63)) - "
       "np.uint64(np.int64({0}) >> 63))",
     star="abs({0})")
_row("fabs", np.fabs, 1, ARITHMETIC, f="abs({0})")
_row("sign", np.sign, 1, ARITHMETIC, exactness=Exactness.EXACT_FOR_REAL,
     i="(np.int64({0} > 0) - np.int64({0} < 0))", u="({0} > 0)",
     f="sign_float({0})",
     c="sign_complex({0})")
_row("reciprocal", np.reciprocal, 1, DIVISION, exactness=Exactness.EXACT_FOR_REAL, b="{0}",
     i="reciprocal_int({0}, {recip_min})",
     u="reciprocal_uint({0})", c="complex_reciprocal({0})", star="({L}(1) / {0})")
_row("square", np.square, 1, ARITHMETIC, b="({0} and {0})", i=_WRAP.replace("{op}",
     "*").replace("{1}", "{0}"),
     star="({0} * {0})")
_row("conjugate", np.conjugate, 1, ARITHMETIC, c="np.conjugate({0})", star="{0}")
_row("heaviside", np.heaviside, 2, ARITHMETIC, f="heaviside_float({0}, {1})")
_row("gcd", np.gcd, 2, DIVISION, commutative=_INTEGERS,
     i="gcd_int({0}, {1})", u="gcd_int({0}, {1})")
_row("lcm", np.lcm, 2, DIVISION, commutative=_INTEGERS,
     i="lcm_int({0}, {1})", u="lcm_int({0}, {1})")

# --- exponentials, logarithms, roots ------------------------------------------------------
_ufunc: np.ufunc
_unary_math(np.sqrt, ROOT)
for _ufunc in (np.exp, np.log, np.log10):
    _unary_math(_ufunc, EXPONENTIAL)
# numba lowers float32 and float64 exp2 and log2 in one kernel to one mistyped intrinsic
# declaration: they compute in float64 (then round, within numpy's float32 ulps).
_row("log2", np.log2, 1, EXPONENTIAL, f="np.log2(np.float64({0}))", c="np.log2({0})")
for _ufunc in (np.expm1, np.log1p):
    _row(_ufunc.__name__, _ufunc, 1, EXPONENTIAL, f=_float_math(_ufunc.__name__),
         c=f"complex_{_ufunc.__name__}({{0}})")
_row("exp2", np.exp2, 1, EXPONENTIAL, f="np.exp2(np.float64({0}))", c="complex_exp2({0})")
_row("cbrt", np.cbrt, 1, EXPONENTIAL, f="np.cbrt({0})")
_row("logaddexp", np.logaddexp, 2, EXPONENTIAL, f="logaddexp_float({0}, {1})")
_row("logaddexp2", np.logaddexp2, 2, EXPONENTIAL, f="logaddexp2_float({0}, {1})")

# --- trigonometric and hyperbolic ---------------------------------------------------------
for _ufunc in (np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh,
               np.tanh, np.arcsinh, np.arctanh):
    _unary_math(_ufunc, TRIGONOMETRIC)
_row("arccosh", np.arccosh, 1, TRIGONOMETRIC, f="np.arccosh({0})", c="complex_arccosh({0})")
_row("arctan2", np.arctan2, 2, TRIGONOMETRIC, f="np.arctan2({0}, {1})")
_row("hypot", np.hypot, 2, TRIGONOMETRIC, f="math.hypot({0}, {1})")
_row("deg2rad", np.deg2rad, 1, ARITHMETIC, exactness=Exactness.ULPS,
     f="({0} * ({L}(math.pi) / {L}(180.0)))")
_row("rad2deg", np.rad2deg, 1, ARITHMETIC, exactness=Exactness.ULPS,
     f="({0} * ({L}(180.0) / {L}(math.pi)))")

# --- rounding -----------------------------------------------------------------------------
for _ufunc in (np.floor, np.ceil, np.trunc):
    _row(_ufunc.__name__, _ufunc, 1, ROUNDING, f=f"np.{_ufunc.__name__}({{0}})", b="{0}",
         i="{0}", u="{0}")
_row("rint", np.rint, 1, ROUNDING, f="np.rint({0})", c="np.rint({0})", b="{0}", i="{0}",
     u="{0}")

# --- comparisons (complex compares lexicographically, as numpy does) ----------------------
_row("equal", np.equal, 2, COMPARISON, commutative=_EVERY_KIND,
     iu="equal_iu({0}, {1})", ui="equal_iu({1}, {0})",
     star="({0} == {1})")
_row("not_equal", np.not_equal, 2, COMPARISON, commutative=_EVERY_KIND,
     iu="(not equal_iu({0}, {1}))",
     ui="(not equal_iu({1}, {0}))", star="({0} != {1})")
_row("less", np.less, 2, COMPARISON, iu="less_iu({0}, {1})", ui="less_ui({0}, {1})",
     c="complex_lt({0}, {1})", f="less_float({0}, {1}, {L}(0))",
     star="({0} < {1})")
_row("less_equal", np.less_equal, 2, COMPARISON, iu="(not less_ui({1}, {0}))",
     ui="(not less_iu({1}, {0}))", c="complex_le({0}, {1})", f="less_equal_float({0}, {1}, {L}(0))",
     star="({0} <= {1})")
_row("greater", np.greater, 2, COMPARISON, iu="less_ui({1}, {0})", ui="less_iu({1}, {0})",
     c="complex_gt({0}, {1})", f="less_float({1}, {0}, {L}(0))",
     star="({0} > {1})")
_row("greater_equal", np.greater_equal, 2, COMPARISON, iu="(not less_iu({0}, {1}))",
     ui="(not less_ui({0}, {1}))", c="complex_ge({0}, {1})", f="less_equal_float({1}, {0}, {L}(0))",
     star="({0} >= {1})")
_row("maximum", np.maximum, 2, EXTREMUM, commutative=_INTEGERS, f="maximum_float({0}, {1}, {L}(0))",
     c="maximum_complex({0}, {1})",
     star="({0} if {0} > {1} else {1})")
_row("minimum", np.minimum, 2, EXTREMUM, commutative=_INTEGERS, f="minimum_float({0}, {1}, {L}(0))",
     c="minimum_complex({0}, {1})",
     star="({0} if {0} < {1} else {1})")
_row("fmax", np.fmax, 2, EXTREMUM, commutative=_INTEGERS,
     f="fmax_float({0}, {1}, {L}(0))", c="fmax_complex({0}, {1})",
     star="({0} if {0} > {1} else {1})")
_row("fmin", np.fmin, 2, EXTREMUM, commutative=_INTEGERS,
     f="fmin_float({0}, {1}, {L}(0))", c="fmin_complex({0}, {1})",
     star="({0} if {0} < {1} else {1})")

# --- logical and bitwise ------------------------------------------------------------------
_row("logical_and", np.logical_and, 2, LOGICAL, commutative=_EVERY_KIND,
     star="(({0} != 0) and ({1} != 0))")
_row("logical_or", np.logical_or, 2, LOGICAL, commutative=_EVERY_KIND,
     star="(({0} != 0) or ({1} != 0))")
_row("logical_xor", np.logical_xor, 2, LOGICAL, commutative=_EVERY_KIND,
     star="(({0} != 0) != ({1} != 0))")
_row("logical_not", np.logical_not, 1, LOGICAL, star="({0} == 0)")
_row("bitwise_and", np.bitwise_and, 2, BITWISE, commutative=_INTEGERS, star="({0} & {1})")
_row("bitwise_or", np.bitwise_or, 2, BITWISE, commutative=_INTEGERS, star="({0} | {1})")
_row("bitwise_xor", np.bitwise_xor, 2, BITWISE, commutative=_INTEGERS, star="({0} ^ {1})")
_row("invert", np.invert, 1, BITWISE, b="(not {0})", star="(~{0})")
_row("left_shift", np.left_shift, 2, BITWISE, i="left_shift({0}, {1}, {bits})",
     u="left_shift({0}, {1}, {bits})")
_row("right_shift", np.right_shift, 2, BITWISE, i="right_shift({0}, {1}, {bits})",
     u="right_shift({0}, {1}, {bits})")

# --- floating-point classification and bits -----------------------------------------------
_row("isnan", np.isnan, 1, CLASSIFICATION, f="np.isnan({0})", c="np.isnan({0})", star="False")
_row("isinf", np.isinf, 1, CLASSIFICATION, f="np.isinf({0})", c="np.isinf({0})", star="False")
_row("isfinite", np.isfinite, 1, CLASSIFICATION, f="(({0} == {0}) and (abs({0}) != math.inf))",
     c="np.isfinite({0})", star="True")
_row("signbit", np.signbit, 1, CLASSIFICATION, f="np.signbit({0})")
_row("copysign", np.copysign, 2, CLASSIFICATION, f="np.copysign({0}, {1})")
_row("nextafter", np.nextafter, 2, CLASSIFICATION, f="np.nextafter({0}, {1})")
_row("spacing", np.spacing, 1, CLASSIFICATION, f="spacing_float({0})")

# --- selection and conversion (not ufuncs in numpy) ---------------------------------------
_CLIP: np.ufunc = np._core.umath.clip  # type: ignore[attr-defined]  # np.clip's ufunc
_row("where", np.where, 3, SELECTION, resolve=_resolve_where, star="({1} if {0} else {2})")
_row("clip", _CLIP, 3, EXTREMUM, f="clip_float({0}, {1}, {2}, {L}(0))",
     c="clip_complex({0}, {1}, {2})",
     star="min(max({0}, {1}), {2})")
_row("astype", np.ndarray.astype, 1, CONVERSION, resolve=lambda operands: _by_target(),
     star="{0}")
_row("real", np.real, 1, CONVERSION, resolve=lambda operands: _real_part(operands[0]),
     c="{0}.real", star="{0}")
_row("imag", np.imag, 1, CONVERSION, resolve=lambda operands: _real_part(operands[0]),
     c="{0}.imag", star="{L}(0)")


def _by_target() -> tuple[tuple[np.dtype, ...], np.dtype]:
    raise TypeError("astype's dtypes come from its target dtype (see trace.astype)")


def _real_part(operand: DtypeOrWeak) -> tuple[tuple[np.dtype, ...], np.dtype]:
    dtype = np.dtype(operand)
    out = np.empty((), dtype).real.dtype
    return (dtype,), out


OPS: dict[str, OpDef] = {row.name: row for row in _ROWS}
BY_UFUNC: dict[np.ufunc, OpDef] = {
    row.reference: row for row in _ROWS if isinstance(row.reference, np.ufunc)
}
# Two-output ufuncs, traced as one node per output.
MULTI_OUTPUT: dict[np.ufunc, tuple[str, ...]] = {np.divmod: ("floor_divide", "remainder")}

HELPER_NAMES: frozenset[str] = frozenset(kernel_lib.HELPERS)


def template_for(op: OpDef, loop: Sequence[np.dtype]) -> str | None:
    """The filled-in scalar template, or None when numfuse has no code for this loop."""
    return _filled(op.name, tuple(loop))


@functools.cache
def _filled(name: str, loop: tuple[np.dtype, ...]) -> str | None:
    op = OPS[name]
    template = op.template(loop)
    if template is None:
        return None
    first = loop[0] if loop else np.dtype(bool)
    info = np.iinfo(first.type) if first.kind in "iu" else None  # type: ignore[type-var]
    return template.replace("{L}", f"np.{first.name}" if first.kind != "b" else "np.bool_") \
        .replace("{bits}", str(first.itemsize * 8)) \
        .replace("{min}", str(info.min if info is not None else 0)) \
        .replace("{recip_min}", str(info.min if info is not None and first.itemsize >= 4 else 0))


def evaluate(op_name: str, dtype: np.dtype, values: Sequence[Any]) -> Any:
    """An elementwise operation on concrete values, computed by its numpy reference and
    given the node's dtype (a numpy scalar for 0-d results)."""
    op = OPS[op_name]
    with np.errstate(all="ignore"):
        if op_name == "astype":
            return np.asarray(values[0]).astype(dtype)[()]
        if op_name == "sqrt" and len(values) == 2:  # power rewritten to sqrt
            values = values[:1]
        result = op.reference(*values)
    return np.asarray(result, dtype=dtype)[()]

