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
# The categories whose operations raise floating-point flags on ordinary operands (a
# division by zero, a root or logarithm of a negative number); arithmetic raises them
# only on floats that overflow or meet infinities.
FLAG_RAISING = (DIVISION, ROOT, EXPONENTIAL, TRIGONOMETRIC)

Resolver = Callable[[Sequence["DtypeOrWeak"]], tuple[tuple[np.dtype, ...], np.dtype]]
# A derivative rule: ``vjp(g, ans, *operands)`` is the cotangent of each operand (None for
# one that gets none) given the cotangent ``g`` of the result ``ans``.  Rules are written
# with numpy functions, so they run on traced values (``numfuse.autodiff`` calls them while
# tracing the backward pass) as on arrays; ``g`` may have more dimensions than ``ans``
# (its sum over them is the cotangent), which numpy's broadcasting carries through.
VJP = Callable[..., tuple[Any, ...]]


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One elementwise operation and every fact about it.

    ``reference`` is the numpy callable with the same semantics (a ufunc for most rows);
    ``code`` maps loop-dtype kinds to scalar templates; ``category`` gives its cost and
    whether it is transcendental; ``exactness`` how its results compare with numpy's;
    ``resolve`` (when not a ufunc) returns the loop dtypes of the inputs and the output
    dtype; ``vjp`` is its derivative rule for ``numfuse.grad`` (None: not differentiable,
    as for integer-only and boolean operations);
    ``commutative`` the loop dtype kinds for which ``f(a, b)`` and ``f(b, a)`` are
    identical bit for bit, NaN payloads and signed zeros included (see ``commutes``).
    """

    name: str
    reference: Callable[..., Any]
    arity: int
    code: Mapping[str, str]
    category: Category
    exactness: Exactness
    resolve: Resolver | None = None
    vjp: VJP | None = None
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
         vjp: VJP | None = None, commutative: str = "", **code: str) -> None:
    """One row: the facts of ``category`` (``exactness`` overrides its own), the scalar
    templates by dtype kinds (``star`` for ``*``), the derivative rule and the dtype kinds
    it is ``commutative`` for."""
    star = code.pop("star", None)
    if star is not None:
        code["*"] = star
    _ROWS.append(OpDef(name, reference, arity, code, category,
                       exactness or category.exactness, resolve, vjp, commutative))


# Commutative kinds.  With two NaN operands numpy's float and complex arithmetic returns
# the first one's payload (x86), and maximum/minimum/fmax/fmin return the second operand
# of a tie between 0.0 and -0.0: for floats and complex numbers these are commutative in
# value only, so only integer and bool loops are declared.  Comparisons and logical
# operations give bools, the same either way for every kind.
_INTEGERS = "biu"
_EVERY_KIND = "biufc"


def _unary_math(ufunc: np.ufunc, category: Category, vjp: VJP) -> None:
    template = f"np.{ufunc.__name__}({{0}})"
    _row(ufunc.__name__, ufunc, 1, category, f=_float_math(ufunc.__name__), c=template,
         vjp=vjp)


# --- derivative helpers shared by several rows (JAX's conventions at kinks and ties) ------
def _no_derivative(g: Any, ans: Any, *operands: Any) -> tuple[None, ...]:
    """Piecewise-constant operations (rounding, sign, floor division): derivative 0."""
    return (None,) * len(operands)


def _sign_of(x: Any) -> Any:
    """The derivative of ``abs`` as JAX takes it: +1 where ``x >= 0`` (0 and -0 too)."""
    return np.where(x >= 0, 1.0, -1.0)


def _balanced(x: Any, ans: Any, other: Any) -> Any:
    """How much of a ``maximum``/``minimum`` result comes from ``x``: 1 where it was
    chosen, 1/2 on a tie, 0 otherwise (and 0 for both when the result is NaN)."""
    return np.where(x == ans, 1.0, 0.0) / np.where(other == ans, 2.0, 1.0)


def _extremum_vjp(g: Any, ans: Any, x: Any, y: Any) -> tuple[Any, Any]:
    return g * _balanced(x, ans, y), g * _balanced(y, ans, x)


def _chosen_vjp(first: Callable[[Any, Any], Any]) -> VJP:
    """The rule of an operation choosing ``x`` where ``first(x, y)``, else ``y``."""
    return lambda g, ans, x, y: (np.where(first(x, y), g, 0.0), np.where(first(x, y), 0.0, g))


def _power_vjp(g: Any, ans: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """d/dx: y x^(y-1) (0 for an integer exponent 0); d/dy: log(x) x^y, taking log(0) as 0
    there as JAX does."""
    if np.result_type(y).kind in "iub":
        zero = y == 0
        if not isinstance(zero, (bool, np.bool_)):
            # x^1 where y is 0 (its derivative is 0): 0^-1 would raise numpy's flags
            # (x ** np.arange(k) at x = 0, polynomial features)
            dx = np.where(zero, 0.0, y * np.power(x, np.where(zero, 1, y - 1)))
        else:
            dx = np.where(zero, 0.0, y * np.power(x, 1 if zero else y - 1))
    else:
        dx = y * np.power(x, y - 1)
    # (the base promoted to the result's dtype first: a float32 base to a float64 power
    # takes its logarithm in float64)
    return g * dx, g * np.log(np.where(x == 0, 1.0, x) + np.zeros_like(ans)) * ans


def _clip_vjp(g: Any, ans: Any, x: Any, low: Any, high: Any) -> tuple[Any, Any, Any]:
    """``clip`` as JAX computes it: ``minimum(high, maximum(low, x))``, ties shared."""
    raised = np.maximum(low, x)
    g_high, g_raised = _extremum_vjp(g, ans, high, raised)
    g_low, g_x = _extremum_vjp(g_raised, raised, low, x)
    return g_x, g_low, g_high


def _hypot_vjp(g: Any, ans: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """x/h and y/h; JAX's values where h is 0 (half of abs's derivative to each) and
    infinite (NaN)."""
    def part(value: Any) -> Any:
        share = np.where(ans == 0, 0.5 * _sign_of(value), value / np.where(ans == 0, 1.0, ans))
        return g * np.where(np.isinf(ans), np.nan, share)
    return part(x), part(y)


def _float_math(name: str, libm: str = "") -> str:
    """The float template of a math function: the vectorisable ``vector_math`` version
    (``exp_f64``/``exp_f32``) where there is one and it is enabled, else numpy's (libm):
    ``libm``, or ``np.<name>({0})``."""
    if vector_math.ENABLED and name in vector_math.FUNCTIONS:
        return f"{name}_f{{bits}}({{0}})"
    return libm or f"np.{name}({{0}})"


# --- arithmetic -------------------------------------------------------------------------
# Signed integers wrap in numpy; numba's signed arithmetic carries LLVM's no-signed-wrap
# flag (an overflow is undefined, and code after it may see any value), so it runs in
# uint64, whose wrap-around is defined, and comes back with the dtype's cast.
_WRAP = "np.int64(np.uint64({0}) {op} np.uint64({1}))"
_row("add", np.add, 2, ARITHMETIC, commutative=_INTEGERS,
     b="({0} or {1})", i=_WRAP.replace("{op}", "+"),
     star="({0} + {1})", vjp=lambda g, ans, x, y: (g, g))
_row("subtract", np.subtract, 2, ARITHMETIC, i=_WRAP.replace("{op}", "-"), star="({0} - {1})",
     vjp=lambda g, ans, x, y: (g, -g))
_row("multiply", np.multiply, 2, ARITHMETIC, commutative=_INTEGERS,
     b="({0} and {1})", i=_WRAP.replace("{op}", "*"),
     c="complex_product({0}, {1})", star="({0} * {1})",
     vjp=lambda g, ans, x, y: (g * y, g * x))
_row("true_divide", np.true_divide, 2, DIVISION, exactness=Exactness.EXACT_FOR_REAL,
     c="complex_divide({0}, {1})", star="({0} / {1})",
     vjp=lambda g, ans, x, y: (g / y, -g * ans / y))
_row("floor_divide", np.floor_divide, 2, DIVISION, i="floor_divide_int({0}, {1}, {min})",
     u="floor_divide_int({0}, {1}, {min})", f="floor_divide_float({0}, {1}, {L}(1))",
     b="floor_divide_int({0}, {1}, {min})", vjp=_no_derivative)
_row("remainder", np.remainder, 2, DIVISION, i="remainder_int({0}, {1})",
     u="remainder_int({0}, {1})", f="remainder_float({0}, {1}, {L}(1))",
     vjp=lambda g, ans, x, y: (g, -g * np.floor_divide(x, y)))
_row("fmod", np.fmod, 2, DIVISION, i="fmod_int({0}, {1})", u="fmod_int({0}, {1})",
     f="np.fmod({0}, {1})", vjp=lambda g, ans, x, y: (g, -g * np.trunc(x / y)))
_row("power", np.power, 2, EXPONENTIAL, i="power_int({0}, {1})", u="power_int({0}, {1})",
     f="power_float({0}, {1})", c="np.power({0}, {1})", vjp=_power_vjp)
_row("float_power", np.float_power, 2, EXPONENTIAL, f="({0} ** {1})",
     c="np.float_power({0}, {1})", vjp=_power_vjp)
_row("negative", np.negative, 1, ARITHMETIC, i="np.int64(np.uint64(0) - np.uint64({0}))",
     star="(-{0})", vjp=lambda g, ans, x: (-g,))
_row("positive", np.positive, 1, ARITHMETIC, star="{0}", vjp=lambda g, ans, x: (g,))
_row("absolute", np.absolute, 1, ARITHMETIC, exactness=Exactness.EXACT_FOR_REAL, b="{0}",
     u="{0}", c="complex_abs({0})",
     i="np.int64((np.uint64({0}) ^ np.uint64(np.int64({0}) >> 63)) - "
       "np.uint64(np.int64({0}) >> 63))",
     star="abs({0})", vjp=lambda g, ans, x: (g * _sign_of(x),))
_row("fabs", np.fabs, 1, ARITHMETIC, f="abs({0})", vjp=lambda g, ans, x: (g * _sign_of(x),))
_row("sign", np.sign, 1, ARITHMETIC, exactness=Exactness.EXACT_FOR_REAL,
     i="(np.int64({0} > 0) - np.int64({0} < 0))", u="({0} > 0)",
     f="sign_float({0})",
     c="sign_complex({0})", vjp=_no_derivative)
_row("reciprocal", np.reciprocal, 1, DIVISION, exactness=Exactness.EXACT_FOR_REAL, b="{0}",
     i="reciprocal_int({0}, {recip_min})",
     u="reciprocal_uint({0})", c="complex_reciprocal({0})", star="({L}(1) / {0})",
     vjp=lambda g, ans, x: (-g * ans * ans,))
_row("square", np.square, 1, ARITHMETIC, b="({0} and {0})", i=_WRAP.replace("{op}",
     "*").replace("{1}", "{0}"),
     c="complex_product({0}, {0})", star="({0} * {0})",
     vjp=lambda g, ans, x: (g * (2.0 * x),))
_row("conjugate", np.conjugate, 1, ARITHMETIC, c="np.conjugate({0})", star="{0}",
     vjp=lambda g, ans, x: (g,))
_row("heaviside", np.heaviside, 2, ARITHMETIC, f="heaviside_float({0}, {1})",
     vjp=lambda g, ans, x, h0: (None, np.where(x == 0, g, 0.0)))  # h0 is the value at 0
_row("gcd", np.gcd, 2, DIVISION, commutative=_INTEGERS,
     i="gcd_int({0}, {1})", u="gcd_int({0}, {1})")
_row("lcm", np.lcm, 2, DIVISION, commutative=_INTEGERS,
     i="lcm_int({0}, {1})", u="lcm_int({0}, {1})")

# --- exponentials, logarithms, roots ------------------------------------------------------
_ufunc: np.ufunc
_LN2, _LN10 = float(np.log(2.0)), float(np.log(10.0))
# the root hidden from LLVM: knowing it a root, LLVM turns a NaN test of it (a quiet
# comparison, in vector math after it) into a test of its operand's sign, which signals
# "invalid" for a NaN operand on x86 (np.exp(-np.sqrt(x)) of a NaN)
_row("sqrt", np.sqrt, 1, ROOT, f="hidden(np.sqrt({0}))", c="np.sqrt({0})",
     vjp=lambda g, ans, x: (g * (0.5 / ans),))
_unary_math(np.exp, EXPONENTIAL, vjp=lambda g, ans, x: (g * ans,))
_unary_math(np.log, EXPONENTIAL, vjp=lambda g, ans, x: (g / x,))
_unary_math(np.log10, EXPONENTIAL, vjp=lambda g, ans, x: (g / (x * _LN10),))
# numba lowers float32 and float64 exp2 and log2 in one kernel to one mistyped intrinsic
# declaration: without vector math they compute in float64 (then round, within numpy's
# float32 ulps).
_row("log2", np.log2, 1, EXPONENTIAL, f=_float_math("log2", libm="np.log2(np.float64({0}))"),
     c="np.log2({0})",
     vjp=lambda g, ans, x: (g / (x * _LN2),))
_unary_math(np.expm1, EXPONENTIAL, vjp=lambda g, ans, x: (g * (ans + 1.0),))
_unary_math(np.log1p, EXPONENTIAL, vjp=lambda g, ans, x: (g / (x + 1.0),))
_row("exp2", np.exp2, 1, EXPONENTIAL, f=_float_math("exp2", libm="np.exp2(np.float64({0}))"),
     c="np.exp2({0})",
     vjp=lambda g, ans, x: (g * (ans * _LN2),))
_row("cbrt", np.cbrt, 1, EXPONENTIAL, f=_float_math("cbrt"),
     vjp=lambda g, ans, x: (g * (1.0 / 3.0) / (ans * ans),))
# log(exp(x) + exp(y)): d/dx is the share of exp(x) in the sum, computed by the internal
# rows below with one exponential (JAX's special values: its exp(x - ans), +inf taken as 0)
_row("logaddexp", np.logaddexp, 2, EXPONENTIAL,
     f="logaddexp_f{bits}({0}, {1})" if vector_math.ENABLED else "logaddexp_float({0}, {1})",
     vjp=lambda g, ans, x, y: (g * _internal("logaddexp_dx", x, y),
                               g * _internal("logaddexp_dy", x, y)))
_row("logaddexp2", np.logaddexp2, 2, EXPONENTIAL,
     f="logaddexp2_f{bits}({0}, {1})" if vector_math.ENABLED else "logaddexp2_float({0}, {1})",
     vjp=lambda g, ans, x, y: (g * _internal("logaddexp2_dx", x, y),
                               g * _internal("logaddexp2_dy", x, y)))

# --- trigonometric and hyperbolic ---------------------------------------------------------
_unary_math(np.sin, TRIGONOMETRIC, vjp=lambda g, ans, x: (g * np.cos(x),))
_unary_math(np.cos, TRIGONOMETRIC, vjp=lambda g, ans, x: (-g * np.sin(x),))
_unary_math(np.tan, TRIGONOMETRIC, vjp=lambda g, ans, x: (g * (1.0 + ans * ans),))
_unary_math(np.arcsin, TRIGONOMETRIC, vjp=lambda g, ans, x: (g / np.sqrt(1.0 - x * x),))
_unary_math(np.arccos, TRIGONOMETRIC, vjp=lambda g, ans, x: (-g / np.sqrt(1.0 - x * x),))
_unary_math(np.arctan, TRIGONOMETRIC, vjp=lambda g, ans, x: (g / (1.0 + x * x),))
_unary_math(np.sinh, TRIGONOMETRIC, vjp=lambda g, ans, x: (g * np.cosh(x),))
_unary_math(np.cosh, TRIGONOMETRIC, vjp=lambda g, ans, x: (g * np.sinh(x),))
_unary_math(np.tanh, TRIGONOMETRIC, vjp=lambda g, ans, x: (g * ((1.0 + ans) * (1.0 - ans)),))
_unary_math(np.arcsinh, TRIGONOMETRIC, vjp=lambda g, ans, x: (g / np.sqrt(x * x + 1.0),))
_unary_math(np.arctanh, TRIGONOMETRIC,
            vjp=lambda g, ans, x: (g / ((1.0 + x) * (1.0 - x)),))
_row("arccosh", np.arccosh, 1, TRIGONOMETRIC, f=_float_math("arccosh"), c="np.arccosh({0})",
     vjp=lambda g, ans, x: (g / np.sqrt((x - 1.0) * (x + 1.0)),))
# arctan2(y, x): d/dy = x / (x² + y²), d/dx = -y / (x² + y²)
_row("arctan2", np.arctan2, 2, TRIGONOMETRIC,
     f="arctan2_f{bits}({0}, {1})" if vector_math.ENABLED else "np.arctan2({0}, {1})",
     vjp=lambda g, ans, y, x: (g * x / (x * x + y * y), -g * y / (x * x + y * y)))
_row("hypot", np.hypot, 2, TRIGONOMETRIC,
     f="hypot_f{bits}({0}, {1})" if vector_math.ENABLED else "math.hypot({0}, {1})",
     vjp=_hypot_vjp)
_row("deg2rad", np.deg2rad, 1, ARITHMETIC, exactness=Exactness.ULPS,
     f="({0} * ({L}(math.pi) / {L}(180.0)))", vjp=lambda g, ans, x: (g * (np.pi / 180.0),))
_row("rad2deg", np.rad2deg, 1, ARITHMETIC, exactness=Exactness.ULPS,
     f="({0} * ({L}(180.0) / {L}(math.pi)))", vjp=lambda g, ans, x: (g * (180.0 / np.pi),))

# --- rounding (derivative 0, as JAX takes it) ---------------------------------------------
for _ufunc in (np.floor, np.ceil, np.trunc):
    _row(_ufunc.__name__, _ufunc, 1, ROUNDING, f=f"np.{_ufunc.__name__}({{0}})", b="{0}",
         i="{0}", u="{0}", vjp=_no_derivative)
_row("rint", np.rint, 1, ROUNDING, f="np.rint({0})", c="np.rint({0})", b="{0}", i="{0}",
     u="{0}", vjp=_no_derivative)

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
# maximum/minimum: the chosen operand gets the cotangent, each half of it on a tie;
# fmax/fmin: the first operand where it is chosen (larger/smaller, or the second is NaN),
# else the second (ties go to the second, as in JAX)
_row("maximum", np.maximum, 2, EXTREMUM, commutative=_INTEGERS,
     f="maximum_float({0}, {1}, {L}(0))", c="maximum_complex({0}, {1})",
     star="({0} if {0} > {1} else {1})", vjp=_extremum_vjp)
_row("minimum", np.minimum, 2, EXTREMUM, commutative=_INTEGERS,
     f="minimum_float({0}, {1}, {L}(0))", c="minimum_complex({0}, {1})",
     star="({0} if {0} < {1} else {1})", vjp=_extremum_vjp)
_row("fmax", np.fmax, 2, EXTREMUM, commutative=_INTEGERS,
     f="fmax_float({0}, {1}, {L}(0))", c="fmax_complex({0}, {1})",
     star="({0} if {0} > {1} else {1})",
     vjp=_chosen_vjp(lambda x, y: (x > y) | np.isnan(y)))
_row("fmin", np.fmin, 2, EXTREMUM, commutative=_INTEGERS,
     f="fmin_float({0}, {1}, {L}(0))", c="fmin_complex({0}, {1})",
     star="({0} if {0} < {1} else {1})",
     vjp=_chosen_vjp(lambda x, y: (x < y) | np.isnan(y)))

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
# copysign(x, y) = ±|x|: the sign of y times abs's derivative; y gets none
_row("copysign", np.copysign, 2, CLASSIFICATION, f="np.copysign({0}, {1})",
     vjp=lambda g, ans, x, y: (np.where(np.signbit(y), -g, g) * _sign_of(x), None))
_row("nextafter", np.nextafter, 2, CLASSIFICATION, f="np.nextafter({0}, {1})")
_row("spacing", np.spacing, 1, CLASSIFICATION, f="spacing_float({0})")

# --- selection and conversion (not ufuncs in numpy) ---------------------------------------
_CLIP: np.ufunc = np._core.umath.clip  # type: ignore[attr-defined]  # np.clip's ufunc
_row("where", np.where, 3, SELECTION, resolve=_resolve_where, star="({1} if {0} else {2})",
     vjp=lambda g, ans, c, x, y: (None, np.where(c, g, 0.0), np.where(c, 0.0, g)))
_row("clip", _CLIP, 3, EXTREMUM, f="clip_float({0}, {1}, {2}, {L}(0))",
     c="clip_complex({0}, {1}, {2})",
     star="min(max({0}, {1}), {2})", vjp=_clip_vjp)
# the cotangent goes back in the operand's dtype (numfuse.autodiff casts it)
_row("astype", np.ndarray.astype, 1, CONVERSION, resolve=lambda operands: _by_target(),
     star="{0}", vjp=lambda g, ans, x: (g,))
_row("real", np.real, 1, CONVERSION, resolve=lambda operands: _real_part(operands[0]),
     c="real_part({0})", star="{0}", vjp=lambda g, ans, x: (g,))
_row("imag", np.imag, 1, CONVERSION, resolve=lambda operands: _real_part(operands[0]),
     c="imag_part({0})", star="{L}(0)", vjp=_no_derivative)


# --- internal rows: operations no numpy function names, emitted by derivative rules -------
# Their reference is an ``Internal``: numpy's formula on arrays, the row itself on traced
# values.  Operands promote as numpy's ``logaddexp`` promotes them.
def _as_ufunc(ufunc: np.ufunc, operands: Sequence[DtypeOrWeak]
              ) -> tuple[tuple[np.dtype, ...], np.dtype]:
    resolved = ufunc.resolve_dtypes((*operands, None))
    return tuple(resolved[:2]), resolved[2]


_as_logaddexp: Resolver = functools.partial(_as_ufunc, np.logaddexp)


def _power_or_root(x: Any, y: Any) -> Any:
    """numpy's power loop for an exponent given as a scalar: in a float loop, the square
    root, square, reciprocal or ``x`` itself where ``y`` (in the loop's dtype) is 0.5, 2,
    -1 or 1, else ``x ** y``; each flag raised where its answer is taken."""
    inputs, out = _as_ufunc(np.power, [_weak_or_dtype(x), _weak_or_dtype(y)])
    if out.kind != "f":
        return np.power(x, y)
    x, y = np.asarray(x, inputs[0]), np.asarray(y, inputs[1])
    result = np.empty(np.broadcast(x, y).shape, out)
    exact = (y == 0.5) | (y == 2) | (y == -1) | (y == 1)
    np.power(x, y, out=result, where=~exact)
    np.sqrt(x, out=result, where=y == 0.5)
    np.square(x, out=result, where=y == 2)
    np.reciprocal(x, out=result, where=y == -1)
    np.positive(x, out=result, where=y == 1)
    return result[()]


def _logistic_weight(x: Any, y: Any, base2: bool) -> Any:
    """numpy's formula for the share of ``exp(x)`` in ``exp(x) + exp(y)`` (base 2 with
    ``base2``) with JAX's special values (see ``kernel_lib.logaddexp_weight_f64``),
    computed in float64: 1 where x is +inf, exp(x) where only y is, NaN for two -inf and
    for a NaN operand, else the logistic function of x - y."""
    out = _as_logaddexp([_weak_or_dtype(x), _weak_or_dtype(y)])[1]
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    above = (x == np.inf) | (y == np.inf)
    half = np.subtract(x * 0.5, y * 0.5, out=np.zeros(np.broadcast(x, y).shape),
                       where=~above)
    magnitude = np.minimum(np.abs(half), 1000.0)
    argument = np.where(above, np.where(x == np.inf, 0.0, x), -2.0 * magnitude)
    power = np.exp2(argument) if base2 else np.exp(argument)
    weight = np.where(above, power, np.where(half >= 0, 1.0, power) / (1.0 + power))
    weight = np.where(np.isnan(y), y, np.where(np.isnan(half), half, weight))
    return np.asarray(weight).astype(out)[()]


def _weak_or_dtype(value: Any) -> DtypeOrWeak:
    return type(value) if type(value) in (bool, int, float) else np.asarray(value).dtype


class Internal:
    """The callable of an internal row: on arrays and numbers its numpy ``formula``, on
    traced values the row itself (an operand's type provides ``apply_op``); ``ufunc``:
    the numpy ufunc whose loop it is, in a special case (its warnings' name), if any."""

    def __init__(self, name: str, formula: Callable[..., Any],
                 ufunc: np.ufunc | None = None) -> None:
        self.name = name
        self.formula = formula
        self.ufunc = ufunc if ufunc is not None or not isinstance(formula, np.ufunc) \
            else formula
        self.__name__ = name

    def __call__(self, *operands: Any) -> Any:
        for operand in operands:
            apply = getattr(type(operand), "apply_op", None)
            if apply is not None:
                return apply(OPS[self.name], operands)
        return self.formula(*operands)

    def __reduce__(self) -> tuple[Any, ...]:
        return _internal_reference, (self.name,)


def _internal_reference(name: str) -> Any:
    return OPS[name].reference


def _internal(name: str, *operands: Any) -> Any:
    """Internal row ``name`` applied to ``operands`` (arrays, numbers or traced values)."""
    return OPS[name].reference(*operands)


def _weight_vjp(other: str, scale: float, wrt_x: bool) -> VJP:
    """The rule of a logistic weight ``w`` of ``x`` (of ``y`` when not ``wrt_x``):
    dw/dx = scale w (1 - w), with 1 - w the ``other`` weight (exact where w is near 1),
    and dw/dy = -dw/dx."""
    def vjp(g: Any, ans: Any, x: Any, y: Any) -> tuple[Any, Any]:
        slope = g * (ans * _internal(other, x, y) * scale)
        return (slope, -slope) if wrt_x else (-slope, slope)
    return vjp


for _base, _scale in (("logaddexp", 1.0), ("logaddexp2", _LN2)):
    _helper = f"{_base}_weight_f{{bits}}" if vector_math.ENABLED else f"{_base}_weight_float"
    _base2 = _base == "logaddexp2"
    _row(f"{_base}_dx", Internal(f"{_base}_dx", functools.partial(_logistic_weight,
                                                                   base2=_base2)),
         2, EXPONENTIAL, resolve=_as_logaddexp, f=_helper + "({0}, {1})",
         vjp=_weight_vjp(f"{_base}_dy", _scale, True))
    _row(f"{_base}_dy", Internal(f"{_base}_dy", lambda x, y, base2=_base2: _logistic_weight(
        y, x, base2)), 2, EXPONENTIAL, resolve=_as_logaddexp, f=_helper + "({1}, {0})",
         vjp=_weight_vjp(f"{_base}_dx", _scale, False))
# numpy's scalar math multiplies two complex numpy scalars without the fused multiply-add
# its array loops take (``trace.nodes.elementwise`` picks this row for them)
_row("scalar_multiply", Internal("scalar_multiply", np.multiply), 2, ARITHMETIC,
     resolve=functools.partial(_as_ufunc, np.multiply),
     b="({0} and {1})", i=_WRAP.replace("{op}", "*"),
     c="complex_scalar_product({0}, {1})", star="({0} * {1})",
     vjp=lambda g, ans, x, y: (g * y, g * x))
# ``x ** p`` of a float array and a traced scalar exponent: numpy's loop computes the
# square root, square, reciprocal or x itself where ``p`` is 0.5, 2, -1 or 1
# (``trace.nodes.elementwise`` picks this row); one op, so that its derivative is the
# power's there too
_row("power_or_root", Internal("power_or_root", _power_or_root, np.power), 2, EXPONENTIAL,
     resolve=functools.partial(_as_ufunc, np.power), i="power_int({0}, {1})",
     u="power_int({0}, {1})", f="power_or_root({0}, {1}, {L}(1))",
     c="np.power({0}, {1})", vjp=_power_vjp)
# ``value`` computed with ``also``, whose work (and flags) LLVM may not drop: the outputs
# of ``np.divmod``, one of which a function may use alone (numpy computes both)
_row("kept", Internal("kept", lambda value, also: np.array(
        np.broadcast_arrays(np.asarray(value), np.asarray(also))[0])[()]), 2, CONVERSION,
     resolve=lambda operands: ((np.dtype(operands[0]), np.dtype(operands[1])),
                               np.dtype(operands[0])),
     f="kept({0}, {1})", star="{0}", vjp=lambda g, ans, value, also: (g, None))
INTERNAL: frozenset[str] = frozenset(row.name for row in _ROWS
                                     if isinstance(row.reference, Internal))


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

