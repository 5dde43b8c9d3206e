"""Floating-point flags, systematically: a kernel raises exactly the flags numpy's loops
raise — no flag from a value the program never passes to an operation, and no flag lost
because the compiler saw that a result is not selected.

Every row of the op table with float code (``numfuse.ops.OPS``), plus the operator forms
with a constant exponent (``x ** -1.5``, ``x ** 0.3``, ...) and the casts, is run

* plain: ``op(x)``;
* on a guarded input: ``op(np.where(m, x, safe))``, where ``m`` is False exactly where
  ``x`` holds a value on which numpy's loop raises a flag: numpy never passes it to ``op``,
  so it is silent;
* with a guarded result: ``np.where(m, op(x), 0)``: numpy computes ``op`` everywhere, so
  it raises the flag although the value is not selected;

in float32 and float64, on arrays of several sizes (1 to 67: a vector body, the partial
last granule and scalar-sized rows) holding at most one flagging value at a position
(first, middle, last), under ``np.errstate(all=mode)`` for mode ignore, warn and raise
(underflow stays ignored: numfuse does not track it, see README), and compared with numpy
on the same arrays: the same warnings ("divide by zero", "overflow", "invalid value"), the
same ``FloatingPointError``, the same values (to a loose tolerance: values are tested
elsewhere).  Which values make an operation raise a flag is numpy's answer on
one-element arrays of a pool of edge values (zeros, ones, halves, large and tiny
numbers, the largest finite value, subnormals, infinities, NaN) or pairs of them.

The default run compiles a few operations per kernel (each operation reads arguments of
its own, and one call holds a flagging value for one operation only) at a few sizes; the
exhaustive variant (``-m slow``) compiles every operation on its own and runs every size
from 1 to 67 with every flagging value.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from conftest import assert_like_numpy

import numfuse
from numfuse.ops import INTERNAL, OPS

DTYPES = (np.float32, np.float64)
MODES = ("ignore", "warn", "raise")
VARIANTS = ("plain", "guarded-input", "guarded-result")
DEFAULT_SIZES = (1, 3, 8, 17, 67)
ALL_SIZES = tuple(range(1, 68))
KINDS = ("divide by zero", "overflow", "invalid value")


@dataclasses.dataclass(frozen=True)
class Case:
    """One operation: ``fn`` of ``arity`` float arrays, exercising the op table's ``row``."""

    name: str
    row: str
    arity: int
    fn: Callable[..., Any]

    @property
    def transcendental(self) -> bool:
        return OPS[self.row].transcendental


def _ufunc_case(name: str) -> Case:
    ufunc = OPS[name].reference
    assert isinstance(ufunc, np.ufunc)
    return Case(name, name, ufunc.nin, ufunc)


def _cases() -> list[Case]:
    """A case for every op-table row with float code, and the operator forms numpy
    computes with other loops (constant exponents) or casts."""
    cases = []
    for name in OPS:
        if not _float_row(name):
            continue
        if name == "where":
            cases.append(Case("where", "where", 2, lambda x, y: np.where(x < y, x, y)))
        elif name == "clip":
            cases.append(Case("clip", "clip", 2, lambda x, y: np.clip(x, y, 2.0)))
        elif name == "astype":
            cases.append(Case("astype-int32", "astype", 1, lambda x: x.astype(np.int32)))
            cases.append(Case("astype-int64", "astype", 1, lambda x: x.astype(np.int64)))
            cases.append(Case("astype-narrower", "astype", 1, lambda x: x.astype(np.float32)))
        elif name in ("real", "imag"):
            cases.append(Case(name, name, 1, getattr(np, name)))
        elif name in INTERNAL:  # derivative rules' own rows: against their numpy formula
            cases.append(Case(name, name, OPS[name].arity, OPS[name].reference))
        else:
            cases.append(_ufunc_case(name))
    for exponent in (-1.5, 0.3, 0.5, -0.5, 2.0, -1.0, 3.0, -2.0):
        cases.append(Case(f"x**{exponent}", "power", 1,
                          lambda x, exponent=exponent: x ** exponent))
    cases.append(Case("1/x", "true_divide", 1, lambda x: 1.0 / x))
    cases.append(Case("x*x", "multiply", 1, lambda x: x * x))
    return cases


def _float_row(name: str) -> bool:
    """Whether the op-table row has float code for a loop numpy has (a ``*`` template
    also covers kinds numpy has no loop for, such as float ``bitwise_and``)."""
    row = OPS[name]
    if all(row.template((np.dtype(dtype),) * row.arity) is None for dtype in DTYPES):
        return False
    ufunc = row.reference
    if not isinstance(ufunc, np.ufunc):
        return True  # where, astype, real, imag: any dtype
    return any(signature.split("->")[0] in ("f" * ufunc.nin, "d" * ufunc.nin)
               for signature in ufunc.types)


CASES = _cases()
BY_NAME = {case.name: case for case in CASES}


def _pool(dtype: Any, binary: bool) -> list[float]:
    """Edge values of ``dtype`` (fewer for pairs)."""
    info = np.finfo(dtype)
    if binary:
        values = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.0, 3.0, -1.5, 1000.0, float(info.max),
                  -float(info.max), float(info.tiny), np.inf, -np.inf, np.nan]
    else:
        values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 1.5, -1.5, 3.0, -3.0, 0.3,
                  10.0, -10.0, 100.0, -100.0, 1000.0, -1000.0, 1e30, -1e30,
                  float(info.max), -float(info.max), float(info.tiny), -float(info.tiny),
                  float(info.smallest_subnormal), np.inf, -np.inf, np.nan]
    return [float(dtype(value)) for value in values]


def _kind(message: str) -> str:
    return message.split(" encountered")[0]


def _flags(fn: Callable[..., Any], operands: Sequence[Any]) -> frozenset[str]:
    """The warnings numpy gives for ``fn(*operands)`` (underflow ignored)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all="warn", under="ignore"):
            fn(*operands)
    return frozenset(_kind(str(warning.message)) for warning in caught
                     if issubclass(warning.category, RuntimeWarning))


@dataclasses.dataclass(frozen=True)
class Values:
    """A case's operand tuples on which numpy raises no flag (``good``) and those on which
    it does, one list per set of warnings (``bad``)."""

    good: tuple[tuple[float, ...], ...]
    bad: dict[frozenset[str], tuple[tuple[float, ...], ...]]

    def safe(self) -> tuple[float, ...]:
        return self.good[0]

    def flagging(self, per_set: int) -> list[tuple[float, ...]]:
        """Up to ``per_set`` operand tuples for each set of warnings."""
        return [item for items in self.bad.values() for item in items[:per_set]]


@functools.cache
def values_of(name: str, dtype: Any) -> Values:
    case = BY_NAME[name]
    pool = _pool(dtype, case.arity > 1)
    good: list[tuple[float, ...]] = []
    bad: dict[frozenset[str], list[tuple[float, ...]]] = {}
    for item in itertools.product(pool, repeat=case.arity):
        flags = _flags(case.fn, [np.array([value], dtype) for value in item])
        if flags:
            bad.setdefault(flags, []).append(item)
        else:
            good.append(item)
    assert good, f"{name}: every value of the pool raises a flag"
    return Values(tuple(good), {flags: tuple(items) for flags, items in bad.items()})


# --------------------------------------------------------------------- the functions run


def function(cases: Sequence[Case], variant: str, dtype: Any) -> Callable[..., Any]:
    """``f(m, *operands)``: each case on operands of its own, as ``variant``; one result
    per case."""
    spans, start = [], 0
    for case in cases:
        spans.append((case, start, start + case.arity))
        start += case.arity
    safe = {case.name: values_of(case.name, dtype).safe() for case in cases}

    def plain(m, *operands):
        return tuple(case.fn(*operands[first:last]) for case, first, last in spans)

    def guarded_input(m, *operands):
        return tuple(case.fn(*(np.where(m, operand, value) for operand, value
                               in zip(operands[first:last], safe[case.name], strict=True)))
                     for case, first, last in spans)

    def guarded_result(m, *operands):
        return tuple(np.where(m, case.fn(*operands[first:last]), 0)
                     for case, first, last in spans)

    return {"plain": plain, "guarded-input": guarded_input,
            "guarded-result": guarded_result}[variant]


def arguments(cases: Sequence[Case], dtype: Any, size: int, target: int | None,
              flagging: tuple[float, ...] | None, position: int) -> list[Any]:
    """``[m, *operands]`` of ``size`` elements: every case's operands hold values numpy is
    quiet on; case ``target`` holds ``flagging`` at ``position`` (where ``m`` is False)."""
    mask = np.ones(size, bool)
    if flagging is None:
        mask[1::2] = False
    else:
        mask[position] = False
    operands: list[Any] = [mask]
    for index, case in enumerate(cases):
        good = values_of(case.name, dtype).good
        items = [good[(index * 7 + 5 * element) % len(good)] for element in range(size)]
        if index == target and flagging is not None:
            items[position] = flagging
        operands += [np.array(column, dtype) for column in zip(*items, strict=True)]
    return operands


def outcome(fn: Callable[..., Any], args: Sequence[Any], mode: str) -> tuple[Any, frozenset]:
    """(the results or the FloatingPointError's kind, the warnings' kinds) under ``mode``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(all=mode, under="ignore"):
            try:
                result: Any = fn(*args)
            except FloatingPointError as error:
                result = f"FloatingPointError: {_kind(str(error))}"
    return result, frozenset(_kind(str(warning.message)) for warning in caught
                             if issubclass(warning.category, RuntimeWarning))


def _close(actual: Sequence[Any], expected: Sequence[Any]) -> bool:
    """The same results, loosely: dtypes and shapes, NaNs and infinities where numpy has
    them, other values to a relative 1e-3 (values are tested elsewhere)."""
    if [(np.result_type(item), np.shape(item)) for item in actual] != \
            [(np.result_type(item), np.shape(item)) for item in expected]:
        return False
    got, want = (np.concatenate([np.asarray(item, np.float64).ravel() for item in items])
                 for items in (actual, expected))
    return bool(np.allclose(got, want, rtol=1e-3, atol=1e-30, equal_nan=True)
                and np.array_equal(np.isinf(got), np.isinf(want)))


# Known differences: (case, variant, dtype) -> why the kernel's flags cannot be numpy's.
# Each runs alone, as a strict xfail, in test_known_flag_difference; the comparisons
# leave it out.  README lists them among the limits.
KNOWN: dict[tuple[str, str, str], str] = {}


def compare(cases: Sequence[Case], variant: str, dtype: Any, sizes: Sequence[int],
            per_set: int, positions: Callable[[int], Sequence[int]],
            skip_known: bool = True) -> list[str]:
    """Run ``cases`` in one jitted function and in numpy; the mismatches, in words."""
    fn = function(cases, variant, dtype)
    jitted = numfuse.jit(fn)
    dtype_name = np.dtype(dtype).name
    mismatches = []
    scenarios: list[tuple[int | None, tuple[float, ...] | None]] = [(None, None)]
    for index, case in enumerate(cases):
        if skip_known and (case.name, variant, dtype_name) in KNOWN:
            continue
        scenarios += [(index, item) for item in
                      values_of(case.name, dtype).flagging(per_set)]
    for size in sizes:
        for target, flagging in scenarios:
            for position in (positions(size) if flagging is not None else (0,)):
                args = arguments(cases, dtype, size, target, flagging, position)
                for mode in MODES:
                    expected, expected_kinds = outcome(fn, args, mode)
                    actual, actual_kinds = outcome(jitted, args, mode)
                    # the values do not depend on the mode: compared once
                    same = actual_kinds == expected_kinds and (
                        actual == expected if isinstance(expected, str) else
                        not isinstance(actual, str) and (
                            mode != "ignore" or _close(actual, expected)))
                    if same:
                        continue
                    where = "no flagging value" if target is None else \
                        f"{cases[target].name} of {flagging} at {position}"
                    mismatches.append(
                        f"{variant} {dtype_name} size {size}, {where}, {mode}: numpy "
                        f"{_described(expected, expected_kinds)}, numfuse "
                        f"{_described(actual, actual_kinds)}")
    return mismatches


def _described(result: Any, kinds: frozenset[str]) -> str:
    text = result if isinstance(result, str) else "returns"
    return f"{text} warning {sorted(kinds)}" if kinds else text


def _few_positions(size: int) -> list[int]:
    """The middle (in the vector body of long rows) and the last element (in the partial
    last granule, run through buffers)."""
    return sorted({size // 2, size - 1})


def _three_positions(size: int) -> list[int]:
    return sorted({0, size // 2, size - 1})


def _groups(cases: Sequence[Case], budget: int = 56) -> list[tuple[Case, ...]]:
    """``cases`` in groups of at most ``budget`` kernel operands (numpy's gufuncs take 64),
    transcendental functions apart (a kernel calling the C library is not vectorised)."""
    groups: list[tuple[Case, ...]] = []
    for transcendental in (False, True):
        group: list[Case] = []
        for case in cases:
            if case.transcendental != transcendental:
                continue
            if sum(member.arity + 1 for member in (*group, case)) > budget:
                groups.append(tuple(group))
                group = []
            group.append(case)
        groups += [tuple(group)] if group else []
    return groups


# Guarded operations read the mask: each group is one kernel.  Plain ones share nothing,
# so each is a kernel of its own, run alone; those numpy raises no flag for run plain in
# the exhaustive variant only.
GUARDED_GROUPS = _groups(CASES)
PLAIN_CASES = [case.name for case in CASES if any(values_of(case.name, dtype).bad
                                                  for dtype in DTYPES)]


def _report(mismatches: list[str]) -> str:
    shown = "\n".join(mismatches[:25])
    more = f"\n... and {len(mismatches) - 25} more" if len(mismatches) > 25 else ""
    return f"{len(mismatches)} mismatches with numpy:\n{shown}{more}"


# ------------------------------------------------------------------------------ the tests


def test_every_float_row_of_the_op_table_has_a_case():
    float_rows = {name for name in OPS if _float_row(name)}
    assert float_rows == {case.row for case in CASES}
    assert {"true_divide", "log", "arccos", "power", "where", "astype"} <= float_rows


# Operations numpy raises flags for on some edge value: the pool must find those values,
# or the comparisons would test nothing for them.
FLAGGING = {
    "true_divide": {"divide by zero", "overflow", "invalid value"},
    "floor_divide": {"divide by zero", "invalid value"},
    "remainder": {"invalid value"}, "fmod": {"invalid value"},
    "reciprocal": {"divide by zero"}, "1/x": {"divide by zero"},
    "log": {"divide by zero", "invalid value"}, "log2": {"divide by zero", "invalid value"},
    "log10": {"divide by zero", "invalid value"}, "log1p": {"divide by zero", "invalid value"},
    "sqrt": {"invalid value"}, "power": {"divide by zero", "overflow", "invalid value"},
    "x**-1.5": {"divide by zero", "invalid value"}, "x**0.3": {"invalid value"},
    "float_power": {"divide by zero", "overflow", "invalid value"},
    "exp": {"overflow"}, "exp2": {"overflow"}, "expm1": {"overflow"},
    "arccos": {"invalid value"}, "arcsin": {"invalid value"},
    "arctanh": {"divide by zero", "invalid value"}, "arccosh": {"invalid value"},
    "multiply": {"overflow", "invalid value"}, "x*x": {"overflow"},
    "add": {"overflow", "invalid value"}, "subtract": {"overflow", "invalid value"},
    "cosh": {"overflow"}, "sinh": {"overflow"}, "square": {"overflow"},
    "sin": {"invalid value"}, "cos": {"invalid value"}, "tan": {"invalid value"},
    "hypot": {"overflow"}, "astype-int32": {"invalid value"},
    # exp(x) where y is +inf (JAX's value), NaN from two -inf
    "logaddexp_dx": {"overflow", "invalid value"}, "logaddexp2_dy": {"overflow", "invalid value"},
    "astype-narrower": {"overflow"},
}


@pytest.mark.parametrize("name", sorted(FLAGGING))
def test_the_edge_values_make_numpy_raise_each_flag(name):
    for dtype in DTYPES:
        raised = set().union(*values_of(name, dtype).bad)
        if name == "astype-narrower" and dtype is np.float32:
            continue  # float32 to float32 is no cast
        assert FLAGGING[name] <= raised, f"{name} {np.dtype(dtype).name}: {raised}"


def _group_id(group: Sequence[Case]) -> str:
    return f"{group[0].name}..{group[-1].name}"


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS[1:])
@pytest.mark.parametrize("group", GUARDED_GROUPS, ids=[_group_id(group)
                                                       for group in GUARDED_GROUPS])
def test_guarded_kernel_flags_are_numpys(group, variant, dtype):
    mismatches = compare(group, variant, dtype, DEFAULT_SIZES, per_set=1,
                         positions=_few_positions)
    assert not mismatches, _report(mismatches)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", PLAIN_CASES)
def test_plain_kernel_flags_are_numpys(name, dtype):
    mismatches = compare([BY_NAME[name]], "plain", dtype, DEFAULT_SIZES, per_set=1,
                         positions=_few_positions)
    assert not mismatches, _report(mismatches)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_kernel_flags_are_numpys_for_each_operation_alone_at_every_size(name, variant, dtype):
    if (name, variant, np.dtype(dtype).name) in KNOWN:
        pytest.skip("a known difference (test_known_flag_difference)")
    mismatches = compare([BY_NAME[name]], variant, dtype, ALL_SIZES, per_set=2,
                         positions=_three_positions)
    assert not mismatches, _report(mismatches)


@pytest.mark.parametrize("key", sorted(KNOWN) or [pytest.param(None, marks=pytest.mark.skip(
    reason="no known difference"))])
def test_known_flag_difference(key, request):
    if key is None:
        return
    name, variant, dtype = key
    request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN[key]))
    mismatches = compare([BY_NAME[name]], variant, np.dtype(dtype).type, DEFAULT_SIZES,
                         per_set=2, positions=_few_positions, skip_known=False)
    assert not mismatches, _report(mismatches)


def _speculated_floor_divide(x, y):
    flag = x > y
    return np.abs(x), flag, flag // y


def _speculated_remainder(x, y):
    flag = x > y
    return np.abs(x), flag, flag % y


@pytest.mark.parametrize("fn", [_speculated_floor_divide, _speculated_remainder])
@pytest.mark.parametrize("size", [None, 1, 20])
def test_a_division_branch_computed_for_a_zero_divisor_raises_no_flag(fn, size):
    # LLVM may compute the quotient of the nonzero-divisor branch for every element; the
    # operands it would see for a zero divisor must raise nothing numpy's loop does not.
    shape = () if size is None else (size,)
    x = np.resize(np.array([1.0, -1.0, 0.0, np.nan]), shape)
    y = np.resize(np.array([0.0, 0.0, 0.0, 2.0]), shape)
    assert_like_numpy(fn, x, y)


@pytest.mark.parametrize("fn", [
    lambda m: np.sum(1.0 / m), lambda m: 1.0 / m.astype(np.int8),
    lambda m: np.sum(np.float32(1.0) / m.astype(np.int16)), lambda m: 2.0 % m,
    lambda m: 3.0 // m,
])
@pytest.mark.parametrize("size", [1, 3, 15, 40])
def test_a_division_by_a_bool_made_a_number_raises_numpys_flags(fn, size):
    """Found by a conformance hunt: knowing a bool 0 or 1, LLVM made a division by it a
    choice of two constants in the scalar loop, so arrays under 16 elements lost the
    "divide by zero" flag."""
    mask = np.zeros(size, bool)
    mask[::2] = True
    assert_like_numpy(fn, mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("name", ["log", "log2", "log10", "log1p"])
def test_logarithms_of_extreme_values_raise_only_numpys_flags(name, dtype):
    # Every lane computes the answer for zero (a division by a divisor that is zero only
    # there): for the largest and the subnormal numbers it must raise nothing.
    info = np.finfo(dtype)
    extremes = [info.max, info.max / 3, info.smallest_normal, info.smallest_subnormal,
                -info.smallest_subnormal, 0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.5]
    ufunc = getattr(np, name)
    for size in (1, 5, 20):
        for value in extremes:
            x = np.full(size, value, dtype)
            x[::3] = 1.5
            if name == "log1p" and 0 < abs(value) < info.smallest_normal:
                continue  # numpy's own loops disagree (its SIMD loop raises "underflow")
            # values within 2 ulp: numpy's AVX-512 float32 log10 is an ulp off (1.5)
            assert_like_numpy(lambda x: ufunc(x), x, rtol=2 * info.eps)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("size", [1, 19])
def test_spacing_raises_numpys_flags_only(dtype, size):
    # numpy: "underflow" for a nonzero subnormal, "overflow" for the largest finite,
    # nothing for zeros (libm's nextafter raised "underflow" for every subnormal result).
    info = np.finfo(dtype)
    for value in [info.smallest_subnormal, -3 * info.smallest_subnormal, info.smallest_normal,
                  info.smallest_normal / 2, 0.0, -0.0, info.max, -info.max, 1.0, -3.5,
                  np.inf, -np.inf, np.nan]:
        x = np.full(size, value, dtype)
        x[::3] = 1.5
        assert_like_numpy(lambda v: np.spacing(v), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("size", [1, 20])
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sine_and_cosine_of_infinities_raise_invalid_even_after_abs(name, dtype, size):
    # Knowing its argument is an infinity (after abs, or under the test of one), LLVM
    # folded the NaN numpy's "invalid" comes with; computing it in every lane raised it
    # for finite numbers.
    ufunc = getattr(np, name)
    for values in ([np.inf], [-np.inf], [1.0, 2.0], [1.0, np.inf, 2e7, -3.0], [np.nan, 1e30]):
        x = np.resize(np.array(values, dtype), size)
        for fn in (lambda v: ufunc(v), lambda v: ufunc(np.abs(v)),
                   lambda v: np.where(v < 1e30, ufunc(v), 0)):
            _assert_flags_like_numpy(fn, x)


def _assert_flags_like_numpy(fn: Callable[..., Any], x: Any) -> None:
    """numpy's warnings and errors exactly under every mode, its values to a few ulp."""
    for mode in MODES:
        expected, got = outcome(fn, [x], mode), outcome(numfuse.jit(fn), [x], mode)
        assert got[1] == expected[1], (x, mode)
        if isinstance(expected[0], str):  # the FloatingPointError raised
            assert got[0] == expected[0], (x, mode)
        else:
            assert _close([got[0]], [expected[0]]), (x, mode)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "float64"])
@pytest.mark.parametrize("size", [None, 1, 20])
def test_logarithms_of_values_known_positive_raise_nothing(dtype, size):
    # After abs (or x * x + 2) LLVM knows the argument is positive: the code for zeros and
    # negatives is then unreachable, and LLVM hoisted a division by zero out of it.
    functions = [lambda v: np.log1p(np.abs(v)), lambda v: np.log(np.abs(v) + 1),
                 lambda v: np.log(v * v + 2), lambda v: np.log1p(v * v),
                 lambda v: np.log2(np.abs(v) + 3)]
    for value in (0.0, 1.0, -1.0, np.inf, np.nan, 3.0):
        x = np.array(value, dtype) if size is None else np.full(size, value, dtype)
        for fn in functions:
            _assert_flags_like_numpy(fn, x)
