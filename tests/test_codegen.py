"""Generated kernel source: the loop forms, fused reductions and fast-math flags."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same, observe

import numfuse
from numfuse.codegen import NEGATIVE_ZERO_SUMS, SAFE_FASTMATH, fastmath_flags

RNG = np.random.default_rng(3)


def test_fastmath_flags_refuse_what_would_break_nan_checks():
    assert fastmath_flags(False) == frozenset()
    assert fastmath_flags(True) == SAFE_FASTMATH
    assert fastmath_flags({"contract"}) == {"contract"}
    assert fastmath_flags(["afn", "nsz"]) == {"afn", "nsz"}
    for refused in ({"nnan"}, {"ninf", "contract"}, {"fast"}):
        with pytest.raises(ValueError, match=r"delete np\.isnan"):
            fastmath_flags(refused)
    with pytest.raises(TypeError, match="fastmath= takes"):
        fastmath_flags("fast")
    with pytest.raises(ValueError, match="not allowed"):
        numfuse.jit(lambda x: x, fastmath={"nnan"})


def test_fastmath_kernels_carry_the_flags_and_keep_nan_semantics():
    def fn(x, y):
        z = x * y + x
        return z, np.isnan(z), np.maximum(z, 0.0), np.isinf(x), np.sum(z * z)

    x = np.array([1.0, np.nan, np.inf, -2.0, 0.5] * 40)
    y = np.array([2.0, 1.0, 0.0, np.nan, 3.0] * 40)
    fast = numfuse.compile(fn, x, y, fastmath=True)
    exact = numfuse.compile(fn, x, y)
    source = fast.kernels[0].source
    assert "fastmath:" in source and "fastmath:" not in exact.kernels[0].source
    assert fast.kernels[0].name != exact.kernels[0].name
    ir = fast.kernels[0].llvm_ir()
    assert re.search(r"\bfmul (fast|reassoc|contract|nsz|arcp)", ir)
    assert "nnan" not in ir and "ninf" not in ir
    with np.errstate(all="ignore"):
        expected = fn(x, y)
        result = fast(x, y)
    assert_same(result[1:4], expected[1:4])
    np.testing.assert_allclose(result[0], expected[0], rtol=1e-15)
    assert np.isnan(result[4]) and np.isnan(expected[4])


def test_fastmath_is_opt_in_and_results_stay_close():
    x = RNG.standard_normal(10_000)

    def poly(x):
        return ((x * 0.3 + 0.2) * x + 0.1) * x + np.sum(x)

    result = numfuse.jit(poly, fastmath=True)(x)
    np.testing.assert_allclose(result, poly(x), rtol=1e-12, atol=1e-12)
    assert_same(numfuse.jit(poly)(x)[:10], poly(x)[:10], rtol=1e-13)


def test_a_float_sum_runs_in_blocks_counted_from_zero():
    source = numfuse.compile(lambda x: np.sum(x * 2.0), np.ones(10)).kernels[0].source
    assert "for j in range(min(512, n - start)):" in source
    assert "add_reassoc(" in source
    integer = numfuse.compile(lambda x: np.sum(x * 2), np.ones(10, dtype=np.int32))
    assert "for j in" not in integer.kernels[0].source  # exact in any order: one loop


def test_helpers_with_special_compile_options_exist():
    from numfuse import kernel_lib

    for group in (kernel_lib.REASSOCIATED, kernel_lib.CONTRACTED):
        assert group <= set(kernel_lib.HELPERS)


# ------------------------------------------------------------------ kernels of passes


def test_a_kernel_of_passes_names_its_rows_and_columns_in_its_layout():
    def fn(x, row_weights, column_shift, scale):
        d = (x - column_shift) * row_weights * scale
        return d - d.mean(axis=0), d.std(axis=0)

    x = RNG.standard_normal((5, 4))
    compiled = numfuse.compile(fn, x, RNG.random((5, 1)), RNG.random(4), 2.0)
    (kernel,) = compiled.kernels
    assert kernel.layout == "(m,n),(n),(m),()->(m,n),(n)"
    program = kernel.generated.program
    # the means in pass 1; the centred values and the squared deviations in pass 2
    assert [(sweep.label, sweep.rows) for sweep in program.sweeps] == [
        ("columns0", False), ("pass1", True), ("columns1", False), ("pass2", True),
        ("columns2", False)]
    source = kernel.source
    # each pass is called once per row on that row's part of a block of columns
    assert "for r in range(m):" in source and "in0[r, start:start + w]" in source
    assert "in2[r]" in source and "in1[start:start + w]" in source
    assert re.search(r"c\d+ = np\.empty\(w, np\.float64\)", source)
    # accumulators start where numpy's sums start and add one row at a time, in order
    start = "np.float64(-0.0)" if NEGATIVE_ZERO_SUMS else "np.float64(0.0)"
    assert start in source and "add_reassoc" not in source
    weights, shift = RNG.random((5, 1)), RNG.random(4)
    assert_same(compiled(x, weights, shift, 2.0), fn(x, weights, shift, 2.0))


def test_a_mean_is_divided_by_the_row_count_as_numpy_divides_it():
    """float32 totals are divided in float64 and rounded back, as numpy's true_divide of
    a float32 array by an intp count does; var's ddof is taken from the count."""
    def fn(x):
        return (x * 1).mean(axis=0), (x * 1).var(axis=0, ddof=2)

    x = RNG.standard_normal((7, 3)).astype(np.float32)
    compiled = numfuse.compile(fn, x)
    assert_same(compiled(x), fn(x))
    source = compiled.kernels[0].source
    assert re.search(r"np\.float32\(\(np\.float64\(a\d+\) / np\.float64\(count\)\)\)",
                     source)
    assert "(count - np.int64(2) if count > np.int64(2) else np.int64(0))" in source


@pytest.mark.parametrize("fn", [
    lambda a: a * 1e300, lambda a: a + 1e300j, lambda a: np.maximum(a, -1e39),
    lambda a: a < 1e39, lambda a: np.where(a > 0, a, 1e300), lambda a: a * 1e-50 + 1,
], ids=["multiply", "complex", "maximum", "less", "where", "underflow"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float16])
def test_a_python_float_beyond_the_loop_dtype_warns_at_every_call(fn, dtype):
    # numpy converts a Python float to the array's dtype at each call, warning "overflow"
    # (never "underflow") each time; the kernel converts it at run time, not at codegen.
    jitted = numfuse.jit(fn)
    for size in (1, 40, 40):
        assert_like_numpy(fn, np.ones(size, dtype), jitted=jitted)


def test_the_name_a_kernel_reports_its_flags_under():
    from numfuse.codegen import reported_name
    from numfuse.dtypes import spec_of
    from numfuse.passes import simplify
    from numfuse.trace import trace_graph

    def named(fn, x):
        return reported_name(simplify(trace_graph(fn, [spec_of(x)])).nodes)

    x = np.ones(4)
    assert named(lambda x: x * 2 + np.log(x) / x, x) == "log"  # the first that raises
    assert named(lambda x: (x * 3 - 1).astype(np.int8), x) == "cast"  # float to int
    assert named(lambda x: (x * 3 - 1).astype(np.float32), x) == "multiply"
    assert named(lambda x: x.astype(np.float32) > 0, x) == "cast"
    assert named(lambda x: x > 0, x) == "greater"
    assert named(lambda x: np.maximum(x, 2), x) == "maximum"  # else its first ufunc's
    assert named(lambda x: np.nextafter(x, np.inf), x) == "nextafter"
    assert named(lambda x: np.where(x > 0, x, 1e300), x.astype(np.float32)) == "cast"
    assert named(lambda x: np.sum(x * 2), x) == "reduce"  # numpy's name for its sums
    assert named(lambda x: np.sum(x / 3), x) == "divide"
    assert named(lambda x: x.max() + x.min(), x) == "add"


def test_a_sum_overflowing_warns_in_numpys_words():
    x = np.full(10, 1e308)
    assert_like_numpy(lambda x: np.sum(x * 1.0), x)
    assert_like_numpy(lambda x: x.sum(), x)


# (not uint32: numpy's own conversion of NaN and infinities to it differs between its
# vector loop and its scalar tail, so by the array's length: 0 or 2**31)
@pytest.mark.parametrize("target", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                    "uint64"])
@pytest.mark.parametrize("fn", [
    lambda x, t: ((x - x) / 0.0).astype(t),  # NaN, as LLVM can prove
    lambda x, t: (x / 0.0).astype(t),        # +-inf
    lambda x, t: (-x / 0.0).astype(t),
    lambda x, t: np.round(x.astype(np.float64), -400).astype(t),
])
def test_casting_values_llvm_proves_nan_or_infinite_to_int_is_numpys(fn, target):
    # LLVM takes such a conversion for undefined and folds it to any value
    x = np.array([1, 2, 3, -4, 0] * 4)
    actual, warned = observe(numfuse.jit(lambda x: fn(x, target)), x)
    expected, numpy_warned = observe(lambda x: fn(x, target), x)
    np.testing.assert_array_equal(actual, expected)
    assert actual.dtype == expected.dtype
    assert {category for category, _ in warned} == {category for category, _ in numpy_warned}


def test_power_by_a_traced_scalar_names_numpys_power_in_its_warnings():
    x = np.array([-2.0, 0.0, 4.0])
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        numfuse.jit(lambda x, p: x ** p)(x, -0.3)
    assert sorted(str(warning.message) for warning in caught) == [
        "divide by zero encountered in power", "invalid value encountered in power"]
