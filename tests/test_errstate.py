"""Floating-point error state: fused kernels follow ``np.errstate`` / ``np.seterr`` as numpy.

For every category (divide, over, invalid) and every mode numpy offers (default, ignore,
warn, raise, call), a few operations that hit that category are run by numpy and by
numfuse on the same inputs, and what the caller sees must agree: the same warning
categories, the same FloatingPointError, the same calls of the handler, the same values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same

import numfuse

F64 = np.array([1.0, -2.0, 0.0, 3.5, 1e300, -1e300, np.nan, 4.0] * 3)
ZEROS = np.zeros_like(F64)
I64 = np.array([7, -7, 0, 3, np.iinfo(np.int64).min, 5, 1, -1] * 3)
I8 = np.array([7, -7, 0, 3, -128, 5, 1, -1] * 3, np.int8)


def _divide_float(x):
    return x / 0.0


def _log_of_zero(x):
    return np.log(x * 0.0)


def _floor_divide_int(x):
    return x // (x * 0)


def _remainder_int(x):
    return x % (x - x)


def _divmod_int(x):
    return divmod(x, x * 0)


def _fmod_int(x):
    return np.fmod(x, x * 0)


def _overflow_float(x):
    return x * 1e300


def _exp_overflow(x):
    return np.exp(x * 1000.0)


def _min_floor_divide_minus_one(x):
    return np.full_like(x, np.iinfo(x.dtype).min) // (x * 0 - 1)


def _invalid_float(x):
    return (x * 0.0) / (x * 0.0)


def _sqrt_negative(x):
    return np.sqrt(-np.abs(x) - 1.0)


def _logaddexp_nan(x):
    return np.logaddexp(x, np.nan)


def _inf_minus_inf(x):
    return (x * np.inf) - (x * np.inf)


# category -> [(function, argument)]: each hits that category (and maybe others) in numpy
CASES: dict[str, list[tuple[Callable[..., Any], np.ndarray]]] = {
    "divide": [(_divide_float, F64), (_log_of_zero, F64), (_floor_divide_int, I64),
               (_remainder_int, I8), (_divmod_int, I64), (_fmod_int, I8)],
    "over": [(_overflow_float, F64), (_exp_overflow, F64), (_min_floor_divide_minus_one, I64),
             (_min_floor_divide_minus_one, I8)],
    "invalid": [(_invalid_float, F64), (_sqrt_negative, F64), (_logaddexp_nan, F64),
                (_inf_minus_inf, F64)],
}
PARAMS = [pytest.param(category, fn, arg, id=f"{category}-{fn.__name__}-{arg.dtype}")
          for category, cases in CASES.items() for fn, arg in cases]


def _observe(fn: Callable[..., Any], arg: np.ndarray, **errstate: str) -> tuple[Any, set]:
    """(result or raised exception, {(warning category, kind)}) under ``errstate``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(**errstate):
            try:
                result: Any = fn(arg)
            except FloatingPointError as error:
                result = error
    kinds = {(warning.category.__name__, str(warning.message).split(" encountered")[0])
             for warning in caught if issubclass(warning.category, RuntimeWarning)}
    return result, kinds


def _assert_same_outcome(fn, arg, rtol=0.0, **errstate):
    expected, expected_warnings = _observe(fn, arg, **errstate)
    actual, actual_warnings = _observe(numfuse.jit(fn), arg, **errstate)
    assert actual_warnings == expected_warnings
    if isinstance(expected, FloatingPointError):
        assert isinstance(actual, FloatingPointError), f"numfuse gave {actual!r}"
        # numpy names the loop ("... encountered in divide"); the kind must agree
        assert str(actual).split(" encountered")[0] == str(expected).split(" encountered")[0]
    else:
        assert_same(actual, expected, rtol=rtol)
    return expected_warnings


@pytest.mark.parametrize(("category", "fn", "arg"), PARAMS)
def test_default_state_warns_like_numpy(category, fn, arg):
    warned = _assert_same_outcome(fn, arg)
    assert any(category[:3] in kind for _type, kind in warned) or category == "over"


@pytest.mark.parametrize(("category", "fn", "arg"), PARAMS)
@pytest.mark.parametrize("mode", ["ignore", "warn", "raise"])
def test_errstate_mode_of_the_category(category, fn, arg, mode):
    _assert_same_outcome(fn, arg, **{category: mode})


@pytest.mark.parametrize(("category", "fn", "arg"), PARAMS)
def test_everything_ignored_is_silent(category, fn, arg):
    assert _assert_same_outcome(fn, arg, all="ignore") == set()


@pytest.mark.parametrize(("category", "fn", "arg"), PARAMS)
def test_everything_raised(category, fn, arg):
    expected, _ = _observe(fn, arg, all="raise")
    assert isinstance(expected, FloatingPointError)
    _assert_same_outcome(fn, arg, all="raise")


@pytest.mark.parametrize(("category", "fn", "arg"), PARAMS[::3])
def test_call_mode_calls_the_handler_with_the_same_kinds(category, fn, arg):
    def calls(function):
        seen = []
        with np.errstate(all="call", call=lambda kind, flag: seen.append(kind)):
            function(arg)
        return sorted(set(seen))

    assert calls(numfuse.jit(fn)) == calls(fn)


def test_seterr_is_honoured_like_errstate():
    previous = np.seterr(divide="raise")
    try:
        with pytest.raises(FloatingPointError, match="divide by zero"):
            numfuse.jit(_floor_divide_int)(I64)
        with pytest.raises(FloatingPointError, match="divide by zero"):
            numfuse.jit(_divide_float)(F64)
    finally:
        np.seterr(**previous)


def _restoring_seterr(x):
    old = np.seterr(divide="ignore")
    quiet = 1 / x
    np.seterr(**old)  # the caller's handling again
    return quiet + 2 / x


def _errstate_of_geterr(x):
    with np.errstate(**np.geterr()):
        return 3 / x + 1


@pytest.mark.parametrize("fn", [_restoring_seterr, _errstate_of_geterr])
def test_the_callers_state_given_back_to_seterr_stays_the_callers(fn):
    """While tracing, np.geterr()/np.seterr() give the modes the function has not set as
    the caller's: given back, they follow the caller's state at each call."""
    jitted = numfuse.jit(fn)
    for mode in ("raise", "warn", "ignore"):
        with np.errstate(divide=mode):
            assert_like_numpy(fn, F64, jitted=jitted)


def test_one_compiled_kernel_follows_the_state_of_each_call():
    jitted = numfuse.jit(_floor_divide_int)
    with np.errstate(divide="ignore"):
        jitted(I64)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        jitted(I64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        jitted(I64)
    assert [str(warning.message).split(" encountered")[0] for warning in caught] == \
        ["divide by zero"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["sign", "heaviside", "maximum", "minimum", "fmax", "fmin",
                                  "isfinite", "spacing", "less", "greater_equal"])
def test_nan_is_quiet_where_numpy_is_quiet(name, dtype):
    x = np.array([np.nan, 1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, 2.5] * 3, dtype)
    ufunc = getattr(np, name)
    if ufunc.nin == 1:
        def fn(x):
            return ufunc(x)
    else:
        def fn(x):
            return ufunc(x, x[::-1])
    # underflow is not tracked (README): numpy ignores it by default
    _assert_same_outcome(fn, x, all="raise", under="ignore")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_of_nan_warns_invalid_like_numpy(name, dtype):
    x = np.array([np.nan, 1.0, np.inf, -np.inf] * 5, dtype)
    ufunc = getattr(np, name)

    def fn(x):
        return ufunc(x, 1.0)
    warned = _assert_same_outcome(fn, x)
    assert ("RuntimeWarning", "invalid value") in warned


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "uint64"])
def test_integer_reciprocal_of_zero_warns_like_numpy(dtype):
    x = np.array([0, 1, 2, 3] * 5, dtype)
    warned = _assert_same_outcome(lambda x: np.reciprocal(x), x)
    assert ("RuntimeWarning", "divide by zero") in warned


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_remainder_and_fmod_of_min_by_minus_one_are_quiet_like_numpy(dtype):
    x = np.full(20, np.iinfo(dtype).min, dtype)
    minus_one = np.full(20, -1, dtype)
    for fn in (lambda a, b: a % b, lambda a, b: np.fmod(a, b)):
        with np.errstate(all="raise"):
            assert_same(numfuse.jit(fn)(x, minus_one), fn(x, minus_one))


def test_negative_integer_power_raises_whatever_the_errstate():
    base, exponent = np.arange(1, 6), np.array([1, 2, -3, 0, 1])
    for mode in ("ignore", "warn", "raise"):
        with np.errstate(all=mode):
            with pytest.raises(ValueError, match="negative integer powers") as numpy_error:
                np.power(base, exponent)
            with pytest.raises(ValueError) as excinfo:
                numfuse.jit(lambda x, y: x ** y)(base, exponent)
        assert str(excinfo.value) == str(numpy_error.value)


@pytest.mark.parametrize("name", ["log", "log1p", "log2", "log10"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int16, np.uint16])
@pytest.mark.parametrize("with_reduction", [False, True], ids=["alone", "with-reduction"])
def test_logarithms_of_integers_warn_like_numpy(name, dtype, with_reduction):
    """``log(0)`` of an integer converted to float: LLVM knew that value is exactly 0 and
    folded the vector-math division giving -inf without its "divide by zero" flag (found by
    the fuzzer: ``np.all(x)`` and ``np.log(x)`` of int64 in one kernel), so integer
    operands take the C library's logarithm."""
    ufunc = getattr(np, name)
    values = np.array([3, 0, 1, -1, np.iinfo(np.int64).min, 2] * 4)
    arg = values.astype(dtype) if dtype is not np.int64 else values
    fn = (lambda x: (np.all(x), ufunc(x))) if with_reduction else (lambda x: ufunc(x))
    expected, expected_warnings = _observe(fn, arg)
    actual, actual_warnings = _observe(numfuse.jit(fn), arg)
    assert actual_warnings == expected_warnings
    logs = expected[1] if with_reduction else expected
    assert_same(actual, expected, rtol=4 * float(np.finfo(logs.dtype).eps))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zero_to_the_minus_infinity_warns_like_numpy(dtype):
    """numpy's power raises "divide by zero" for ``0 ** -inf``; the C library's pow does
    not (found by the fuzzer); ``float_power`` stays quiet, as numpy's does."""
    base = np.array([0.0, -0.0, 0.5, 2.0] * 5, dtype)
    exponent = np.array([-np.inf, -np.inf, -np.inf, np.inf] * 5, dtype)
    for fn in (lambda b: b ** exponent, lambda b: np.float_power(b, exponent)):
        expected, expected_warnings = _observe(fn, base)
        actual, actual_warnings = _observe(numfuse.jit(fn), base)
        assert actual_warnings == expected_warnings
        assert_same(actual, expected)


def test_flag_raising_survives_llvm_optimisation():
    """The divide-by-zero flag of ``//`` comes from a call LLVM cannot delete."""
    from numfuse import backend

    compiled = numfuse.compile(_floor_divide_int, I64)
    ir = backend.llvm_ir(compiled.kernels[0].compiled)
    assert "@feraiseexcept(i32 " in ir


def test_kernels_raising_flags_stay_cacheable():
    """feraiseexcept is called by name: numba can cache the kernel (a ctypes pointer
    would make it refuse, warning "Cannot cache ... dynamic globals")."""
    def unusual(x, y):
        return (x // y) % (y - 29) + np.logaddexp(x * 0.5, y * 0.25)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        numfuse.jit(unusual)(I64, I64[::-1])
    assert not [warning for warning in caught if "cache" in str(warning.message).lower()]


@pytest.mark.parametrize("fn", [
    lambda x: np.maximum(x, np.abs(x)),
    lambda x: (x > 0).any(axis=-1),
    lambda x: np.where(x > 1, x, -x).max(),
    lambda x: np.clip(x, -1.0, x[::-1]) + np.fmin(x, 0.5),
    lambda x: (np.signbit(x), x < np.signbit(x)),  # found by the fuzzer
], ids=["maximum-of-abs", "any-of-comparison", "max-of-where", "clip-fmin",
        "less-than-bool"])
def test_ordered_comparisons_on_nan_are_quiet(fn):
    """numpy's comparisons are quiet; a vectorised x86 compare signals "invalid" on NaN and
    LLVM moves compares past any NaN guard, so kernels compare integer keys instead."""
    x = np.array([np.nan, 1.0, -np.inf, 2.5, -0.0, np.nan, 3.0, -1.0] * 5)
    _assert_same_outcome(fn, x, all="raise")


def test_float32_floor_divide_overflowing_quotient_warns_like_numpy():
    _assert_same_outcome(lambda x: x // np.float32(1e-40), np.ones(20, np.float32))


@pytest.mark.xfail(strict=True, reason="README limit: numpy's scalar integer math warns on "
                   "overflow; kernels follow numpy's array loops, which wrap silently")
def test_numpy_scalar_integer_overflow_warns_like_numpy():
    _assert_same_outcome(lambda x: x + np.int8(100), np.int8(100))


@pytest.mark.xfail(strict=True, reason="README limit: LLVM folds a float operation whose "
                   "operands it can prove constant, and the folded operation raises no flag")
def test_division_of_values_llvm_proves_zero_warns_like_numpy():
    _assert_same_outcome(lambda x: 1.0 / (x - x), I64)


def test_division_by_a_bool_llvm_proves_false_warns_like_numpy():
    # (a bool made a number is hidden from LLVM, so the division stays)
    _assert_same_outcome(lambda x: (x != x) / (x != x), I64)
    _assert_same_outcome(lambda x: 1.0 / np.isinf(x), I64)


# ------------------------------------------------- error handling set inside the function
#
# numpy handles each operation's flags under the errstate (and warnings filters) in force
# where it runs in the program: a block inside the jitted function applies to the
# operations traced inside it, the caller's state to the others.

POSITIVE = np.array([0.0, 1.0, 2.0, 0.5, 3.0, 4.0, 5.0, 6.0] * 3)


def _log_ignoring_divide(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def _reciprocal_raising_divide(x):
    with np.errstate(divide="raise"):
        return 1.0 / x


def _inside_and_outside(x):
    outside = 1.0 / x  # the caller's state
    with np.errstate(divide="ignore"):
        inside = np.log(x) * 2.0
    return outside, inside * outside


def _nested(x):
    with np.errstate(all="ignore"):
        quiet = np.log(x)
        with np.errstate(invalid="raise"):
            raised = np.sqrt(x - 1.0)  # invalid raises; divide is still ignored
        again = 1.0 / x
    return quiet, raised, again


def _only_overflow_set(x):
    with np.errstate(over="ignore"):  # divide stays the caller's
        return np.exp(x * 1000.0) + 1.0 / x


def _seterr_inside(x):
    np.seterr(divide="ignore")  # numpy: the operations after it (and the caller, after)
    return np.log(x)


@np.errstate(divide="ignore")
def _decorated_helper(x):
    return np.log(x)


def _errstate_as_decorator(x):
    return _decorated_helper(x) + 1.0 / x


def _same_expression_twice(x):
    warned = 1.0 / x
    with np.errstate(divide="ignore"):
        quiet = 1.0 / x
    return warned, quiet


def _cumsum_raising_overflow(x):
    with np.errstate(over="raise"):  # a numpy call, replayed by the runtime
        return np.cumsum(x * 1e300)


def _float16_ignoring_divide(x):
    with np.errstate(divide="ignore"):  # float16 work runs in numpy
        return np.log(x.astype(np.float16))


def _mean_ignoring_invalid(x):
    with np.errstate(invalid="ignore", divide="ignore"):  # a reduction fused into the loop
        return np.mean(np.log(x) - np.log(x), axis=-1)


INSIDE = [_log_ignoring_divide, _reciprocal_raising_divide, _inside_and_outside, _nested,
          _only_overflow_set, _errstate_as_decorator, _same_expression_twice,
          _cumsum_raising_overflow, _float16_ignoring_divide, _mean_ignoring_invalid]


@pytest.mark.parametrize("fn", INSIDE, ids=[fn.__name__.strip("_") for fn in INSIDE])
@pytest.mark.parametrize("caller", [{}, {"all": "ignore"}, {"all": "warn"}, {"all": "raise"},
                                    {"divide": "raise"}, {"invalid": "raise", "over": "warn"}],
                         ids=["default", "ignore", "warn", "raise", "divide-raise",
                              "invalid-raise"])
def test_errstate_inside_the_function_applies_to_its_operations(fn, caller):
    _assert_same_outcome(fn, POSITIVE, rtol=1e-15, **caller)
    _assert_same_outcome(fn, POSITIVE[:5], rtol=1e-15, **caller)  # one-kernel fast path


def test_seterr_inside_applies_to_the_operations_after_it():
    previous = np.geterr()
    try:
        expected = _observe(_seterr_inside, POSITIVE, divide="raise")
    finally:
        np.seterr(**previous)
    jitted = numfuse.jit(_seterr_inside)
    for _ in range(2):  # the first call traces, the second runs the compiled program
        actual = _observe(jitted, POSITIVE, divide="raise")
        assert actual[1] == expected[1] == set()
        assert_same(actual[0], expected[0], rtol=1e-15)
    assert np.geterr() == previous


def test_the_caller_state_still_applies_outside_the_block():
    jitted = numfuse.jit(_inside_and_outside)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero"):
        jitted(POSITIVE)
    with np.errstate(divide="ignore"):
        jitted(POSITIVE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted(POSITIVE)
    assert [str(warning.message).split(" encountered")[0] for warning in caught] == \
        ["divide by zero"]


def test_call_handler_set_inside_is_called():
    seen: list[str] = []

    def fn(x):
        with np.errstate(all="call", call=lambda kind, flag: seen.append(kind)):
            return np.log(x) + np.sqrt(x - 1.0)

    fn(POSITIVE)
    expected, seen[:] = sorted(set(seen)), []
    with np.errstate(all="raise"):
        numfuse.jit(fn)(POSITIVE)
    assert sorted(set(seen)) == expected == ["divide by zero", "invalid value"]


def _ignore_warnings_inside(x):
    loud = 1.0 / x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quiet = np.log(x)
    return loud + quiet


def _warnings_as_errors_inside(x):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="divide by zero", category=RuntimeWarning)
        return np.log(x) + np.sqrt(x - 1.0)


@pytest.mark.parametrize("fn", [_ignore_warnings_inside, _warnings_as_errors_inside])
@pytest.mark.parametrize("caller", [{}, {"divide": "ignore"}, {"invalid": "raise"}])
def test_warnings_filters_set_inside_apply_to_its_operations(fn, caller):
    def outcome(function):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with np.errstate(**caller):
                try:
                    result = function(POSITIVE)
                except (FloatingPointError, RuntimeWarning) as error:
                    result = (type(error).__name__, str(error).split(" encountered")[0])
        kinds = [(warning.category.__name__, str(warning.message).split(" encountered")[0])
                 for warning in caught]
        return result, kinds

    expected, actual = outcome(fn), outcome(numfuse.jit(fn))
    assert actual[1] == expected[1]
    if isinstance(expected[0], tuple):
        assert actual[0] == expected[0]
    else:
        assert_same(actual[0], expected[0], rtol=1e-15)


def test_other_error_handling_is_a_kernel_of_its_own_and_explained():
    compiled = numfuse.compile(_inside_and_outside, POSITIVE)
    assert len(compiled.kernels) == 2
    assert {kernel.region.errstate for kernel in compiled.kernels} == {
        None, numfuse.graph.ErrState((("divide", "ignore"),))}
    text = str(compiled.graph)
    assert "# under np.errstate(divide='ignore')" in text
    assert "different floating-point error handling" in str(compiled.explain())
    assert "np.errstate(divide='ignore') vs the caller's" in str(compiled.explain())


def test_without_inner_error_handling_the_fast_path_is_kept():
    compiled = numfuse.compile(_divide_float, F64)
    assert compiled.run is compiled.program.fast
    assert all(node.errstate is None for node in compiled.graph.nodes)
    inside = numfuse.compile(_log_ignoring_divide, POSITIVE)
    assert inside.program.fast is None


def test_scalar_work_under_other_handling_stays_out_of_the_prelude():
    def fn(x, y):
        scale = 1.0 / y  # 0-d, the caller's state
        with np.errstate(divide="ignore"):
            return np.log(x) * scale

    zero, two = np.float64(0.0), np.float64(2.0)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            fn(POSITIVE, zero)
        with pytest.raises(FloatingPointError):
            numfuse.jit(fn)(POSITIVE, zero)
        assert_same(numfuse.jit(fn)(POSITIVE, two), fn(POSITIVE, two), rtol=1e-15)
    from numfuse.partition import Reason, check_plan

    plan = numfuse.compile(fn, POSITIVE, two).plan
    check_plan(plan)
    assert any(refusal.reason is Reason.ERRSTATE for refusal in plan.refusals)


def test_out_and_threads_run_under_the_inner_state():
    big = np.concatenate([np.zeros(1), np.ones(400_000)])
    jitted = numfuse.jit(_reciprocal_raising_divide, threads=2)
    for _ in range(3):  # the first large calls measure, later ones may split
        with np.errstate(divide="ignore"), pytest.raises(FloatingPointError):
            jitted(big)
    with pytest.raises(FloatingPointError):
        jitted(POSITIVE, out=np.empty_like(POSITIVE))
    quiet = numfuse.jit(_log_ignoring_divide, threads=2)
    expected = _log_ignoring_divide(big)
    with np.errstate(all="raise"):
        for _ in range(3):
            assert_same(quiet(big), expected, rtol=1e-15)
        target = np.empty_like(POSITIVE)
        assert quiet(POSITIVE, out=target) is target


def test_dask_block_tasks_run_under_the_inner_state():
    da = pytest.importorskip("dask.array")
    x = da.from_array(POSITIVE, chunks=8)
    with np.errstate(divide="raise"):
        result = numfuse.jit(_log_ignoring_divide)(x).compute(scheduler="sync")
        assert_same(result, _log_ignoring_divide(POSITIVE), rtol=1e-15)
        with pytest.raises(FloatingPointError):
            numfuse.jit(_reciprocal_raising_divide)(x).compute(scheduler="sync")


# ----------------------------------------------- flags of values a np.where guards or drops


def test_a_float32_constant_in_a_guard_keeps_the_operation_off_the_guarded_values():
    """``np.where(m, x, 0.0)`` on float32 holds ``np.float32(0.0)``, a cast LLVM folds to a
    constant: it then computed ``rad2deg`` on ``x`` and selected after, raising "overflow"
    for the element the guard keeps out (found by tests/test_fpflags.py)."""
    x = np.array([1.0, np.finfo(np.float32).max, 2.0] * 7, np.float32)
    m = np.array([True, False, True] * 7)
    for fn in (lambda m, x: np.rad2deg(np.where(m, x, 0.0)),
               lambda m, x: np.where(m, x, 0.0).astype(np.int32),
               lambda m, x: np.sqrt(3.0 - np.where(m, x, 1.0))):
        with np.errstate(all="raise"):
            assert_same(numfuse.jit(fn)(m, x), fn(m, x), rtol=1e-6)


def test_a_dropped_result_keeps_its_flags_in_a_loop_that_is_not_vectorised():
    """In a loop LLVM does not vectorise (``//`` of floats branches), the x86 back end
    turned ``np.where(m, x + y, 0)`` into a branch and computed ``x + y`` only where m
    holds, losing numpy's "overflow" for the other elements (found by
    tests/test_fpflags.py)."""
    big = np.finfo(np.float64).max
    x = np.array([big, 1.0, 2.0] * 7)
    m = np.array([False, True, True] * 7)

    def fn(m, x, a, b):
        return np.where(m, x + x, 0), np.where(m, 1.0 / a, 0), np.where(m, a // b, 0)

    args = (m, x, np.array([0.0, 1.0, 2.0] * 7), np.ones(21))
    expected = _observe(lambda arg: fn(*arg), args)
    actual = _observe(lambda arg: numfuse.jit(fn)(*arg), args)
    assert actual[1] == expected[1] == {("RuntimeWarning", "overflow"),
                                        ("RuntimeWarning", "divide by zero")}
    assert_same(actual[0], expected[0])



@pytest.mark.parametrize(("fn", "arg"), [
    (lambda x: x / (x - 1.0) + 1.0, np.array([1.0, 2.0])),  # divide by zero
    (lambda x: np.log(x) * 2.0 - x, np.array([-1.0, 0.0, 2.0])),
    (lambda x: np.sqrt(x - 3.0) * x, np.array([1.0, 4.0])),
    (lambda x: np.arcsin(x * 2.0), np.array([0.25, 0.75])),
    (lambda x: x * 1e300 * 1e10, np.array([1.0, 2.0])),  # overflow
    (lambda x: (x * 2.0).astype(np.int32), np.array([np.nan, 1e20])),
    (lambda x: np.exp(x + 1.0), np.array([1000.0], np.float32)),
    # found by a conformance hunt: these named the kernel ("kernel_676d4ff8...")
    (lambda x: x > 0, np.array([1 + 1j, complex(np.nan, 0)])),
    (lambda x: np.where(x > 0, x, 1e300), np.array([0.5, -1.5], np.float32)),
    (lambda x: x < 1e300, np.array([0.5, -1.5], np.float32)),
])
def test_a_warning_names_the_operation_that_raised_it_as_numpy(fn, arg):
    """numpy names the ufunc whose loop raised a flag; a fused kernel, which raises its
    flags together, names its operation that raises such flags (``codegen.reported_name``),
    numpy's name whenever one operation raised them."""
    for size in (arg.size, 300_000):  # one gufunc call, and a call cut into chunks
        values = np.resize(arg, size)
        with warnings.catch_warnings(record=True) as expected:
            warnings.simplefilter("always")
            fn(values)
        with warnings.catch_warnings(record=True) as actual:
            warnings.simplefilter("always")
            jitted = numfuse.jit(fn, threads=2)
            for _ in range(4):  # past the calls that measure the kernel's cost
                jitted(values)
        messages = {str(warning.message) for warning in expected}
        assert messages and {str(warning.message) for warning in actual} == messages


@pytest.mark.parametrize("fn", [
    lambda x: np.isnan(np.sqrt(x)), lambda x: np.sqrt(x) != 0, lambda x: np.sqrt(x) == 0,
    lambda x: np.sqrt(x).astype(bool), lambda x: np.where(np.sqrt(x), 1.0, 2.0),
    lambda x: (x / 0) != 0, lambda x: np.isfinite(np.log(x)),
    lambda x: np.logical_and(np.arcsin(x * 0.3), x > 0), lambda x: np.isinf(1.0 / x),
], ids=["isnan-sqrt", "sqrt-ne-0", "sqrt-eq-0", "sqrt-as-bool", "where-on-sqrt",
        "divide-ne-0", "isfinite-log", "and-of-arcsin", "isinf-reciprocal"])
@pytest.mark.parametrize("size", [1, 20])
def test_an_operation_whose_result_is_only_tested_raises_its_flags(fn, size):
    """Found by a conformance hunt: LLVM answered ``sqrt(x) != 0`` as ``x != 0`` and
    dropped the square root, and its "invalid value" with it."""
    x = np.resize(np.array([-1.0, 4.0, 0.0, np.nan]), size)
    assert_like_numpy(fn, x)


@pytest.mark.parametrize("fn", [
    lambda x: np.maximum(np.sqrt(x), 1e-12), lambda x: np.minimum(np.sqrt(x), 1.0),
    lambda x: np.fmax(np.sqrt(x), 0.5), lambda x: np.sign(np.sqrt(x)),
    lambda x: np.heaviside(np.sqrt(x), 0.5), lambda x: np.clip(np.sqrt(x), 1e-3, None),
], ids=["maximum", "minimum", "fmax", "sign", "heaviside", "clip"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_nan_quiet_choice_on_a_square_root_stays_quiet(fn, dtype):
    """Found by a conformance hunt: maximum's NaN test of sqrt(x) became a signalling
    ``x < 0``, which raised "invalid value" for a NaN x (numpy's maximum is quiet)."""
    assert_like_numpy(fn, np.array([np.nan, 4.0, -1.0, 0.0] * 5, dtype))


@pytest.mark.parametrize(("fn", "values"), [
    (lambda v: np.sqrt(np.maximum(v, 0)) + 1e-8, [-1e-9, 0.25, 4.0]),
    (lambda d: 1.0 / np.maximum(d, 1.0) - 1.0, [0.0, 2.0]),
    (lambda v: np.sqrt(np.clip(v, 0, None)) * 2, [-1.0, 4.0]),
    (lambda v: np.maximum(v, 0) ** 0.5 + 1, [-1.0, 4.0]),
    (lambda d: 2.0 * (1.0 / np.maximum(d, 1e-12)), [0.0, 2.0]),
    (lambda v: np.log(np.fmax(v, 1e-300)) * 0.5, [-1.0, 0.0, 3.0]),
], ids=["sqrt-of-maximum", "reciprocal-of-maximum", "sqrt-of-clip", "root-of-maximum",
        "scaled-reciprocal", "log-of-fmax"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 40])
def test_work_on_a_value_clamped_by_a_constant_raises_no_flag_of_the_unclamped_value(
        fn, values, dtype, size):
    """Found by a conformance hunt: LLVM moved a clamp by a constant (a choice with a
    constant arm) below the operations on the clamped value, which then ran on the
    unclamped one: ``np.sqrt(np.maximum(var, 0)) + 1e-8`` warned "invalid value"."""
    assert_like_numpy(fn, np.resize(np.array(values, dtype), size), rtol=1e-6)  # (log)


def _optional_log(x, use_log=False):
    return np.where(use_log, np.log(x), x)


@pytest.mark.parametrize("fn", [_optional_log, lambda x: np.where(True, x, np.log(x)),
                                lambda x: np.where(np.True_, x * 2, np.sqrt(x))],
                         ids=["python-bool-default", "true", "numpy-bool"])
@pytest.mark.parametrize("size", [3, 40])
def test_where_of_a_constant_condition_raises_the_flags_of_the_arm_it_drops(fn, size):
    """Found by a conformance hunt: ``np.where(use_log, np.log(x), x)`` with a Python
    bool computes both arms in numpy, which warns for the logarithm it drops; LLVM,
    seeing the choice made, dropped the arm and its flags."""
    assert_like_numpy(fn, np.resize(np.array([0.0, -1.0, 2.0]), size))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
@pytest.mark.parametrize("size", [4, 40])
def test_a_cast_on_one_arm_of_a_where_raises_its_invalid_value(dtype, size):
    """Found by a conformance hunt: both arms of the choice hidden behind one opaque zero
    let LLVM take the zero out of the choice, and the backend made the cast a masked
    conversion (AVX-512), which raises nothing for the lanes left out: numpy's "invalid
    value encountered in cast" of a NaN was lost."""
    x = np.resize(np.array([0.2, np.nan, 3.3, 7.0]), size)
    assert_like_numpy(lambda x: np.where(np.isfinite(x), x.astype(dtype), 1), x)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32])
def test_an_image_clipped_then_cast_to_uint8_is_silent_as_numpy(dtype):
    """skimage's rescale: the cast to uint8 had run on the unclipped product."""
    image = np.array([0, 50, 100, 2**31 - 1], dtype)
    assert_like_numpy(lambda im: (np.clip(im / 100.0, 0.0, 1.0) * 255).astype(np.uint8),
                      np.resize(image, 37))


@np.errstate(divide="ignore", invalid="ignore")
def _quiet_divide(a, b):
    return a / b


@np.errstate(all="raise")
def _strict_log(a):
    return np.log(a)


def test_a_function_decorated_with_errstate_sets_its_own_handling():
    """``@np.errstate(...)`` as a decorator sets the state without ``__enter__``, and the
    function is called by numfuse while traced: the state is still the function's."""
    a, b = np.array([1.0, 0.0]), np.array([0.0, 0.0])
    for _ in range(2):
        assert_like_numpy(_quiet_divide, a, b)
    with pytest.raises(FloatingPointError, match="divide by zero"):
        numfuse.jit(_strict_log)(np.array([0.0]))


@pytest.mark.parametrize("fn", [
    lambda z: (z * 2).real,                       # inf * 0 in the imaginary part
    lambda z: (z * z).real,
    lambda z: np.real(z * np.conj(z)),
    lambda z: (z - complex(np.inf, np.inf)).imag,  # inf - inf in the real part
    lambda z: np.abs((z * 2).real),
])
def test_a_part_of_a_complex_value_raises_the_other_parts_flags_too(fn):
    # numpy computes the whole complex value before taking a part of it
    z = np.array([complex(np.inf, 0.0), 1 + 1j] * 7)  # the flags come from the part dropped
    assert_like_numpy(fn, z)  # its warnings, and under errstate(all="raise") its error


@pytest.mark.parametrize("fn", [
    lambda x: np.divmod(x, 0.0)[1],   # the quotient's "divide by zero" too
    lambda x: np.divmod(x, 0.0)[0],   # the remainder's "invalid value" too
    lambda x: divmod(x, 0.0)[1],
    lambda x: np.divmod(x, 2.5),
])
def test_one_output_of_divmod_raises_the_flags_of_both(fn):
    # numpy computes the quotient and the remainder together
    assert_like_numpy(fn, np.array([1.0, -2.0, 0.0, np.inf] * 5))
