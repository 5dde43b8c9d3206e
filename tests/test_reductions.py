"""Reductions folded into fusion kernels: numpy's dtype, shape and values for every
reduction over dtypes and axis/keepdims combinations, the kernel structure that proves the
reduction runs inside the loop, and the rules that keep such regions correct."""

from __future__ import annotations

import itertools
import tracemalloc
import warnings

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same, check, numpy_result

import numfuse
from numfuse.graph import NUMPY
from numfuse.partition import check_plan

RNG = np.random.default_rng(11)
DTYPES = ["bool", "int8", "int32", "int64", "uint16", "uint64", "float32", "float64",
          "complex128"]
AXES = [None, 1, -1, (0, 1), (1, 2), (0, 2), (0, 1, 2)]


def _data(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "bool":
        return RNG.random(shape) > 0.4
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(max(info.min, -50), min(info.max, 50), shape).astype(dtype)
    values = RNG.standard_normal(shape) * 3
    if np.dtype(dtype).kind == "c":
        values = values + 1j * RNG.standard_normal(shape)
    return values.astype(dtype)


def _tolerance(dtype: np.dtype) -> float:
    """Float sums are blocked, numpy's are pairwise: equal up to rounding."""
    if dtype.kind not in "fc":
        return 0.0
    return 1e-5 if dtype in (np.float32, np.complex64) else 1e-12


def _fused(fn, *args):
    compiled = numfuse.compile(fn, *args)
    check_plan(compiled.plan)
    return compiled


def _unfused_reductions(compiled) -> list[str]:
    return [step.op for step in compiled.plan.steps if getattr(step, "kind", None) == NUMPY]


REDUCERS = {
    "sum": lambda x, axis, keepdims: np.sum(x * 1, axis=axis, keepdims=keepdims),
    "prod": lambda x, axis, keepdims: (x * 1).prod(axis=axis, keepdims=keepdims),
    "max": lambda x, axis, keepdims: np.max(x + x, axis=axis, keepdims=keepdims),
    "min": lambda x, axis, keepdims: (x + x).min(axis=axis, keepdims=keepdims),
    "any": lambda x, axis, keepdims: np.any(x * 1, axis=axis, keepdims=keepdims),
    "all": lambda x, axis, keepdims: (x * 1).all(axis=axis, keepdims=keepdims),
    "mean": lambda x, axis, keepdims: np.mean(x * 1, axis=axis, keepdims=keepdims),
    "var": lambda x, axis, keepdims: np.var(x * 1, axis=axis, keepdims=keepdims),
    "std": lambda x, axis, keepdims: (x * 1).std(axis=axis, keepdims=keepdims, ddof=1),
}


def _bound(reducer, axis, keepdims):
    def fn(value):
        return reducer(value, axis, keepdims)

    return fn


@pytest.mark.parametrize("name", list(REDUCERS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_reduction_matches_numpy_over_axes_and_keepdims(name, dtype):
    reducer = REDUCERS[name]
    if name in ("max", "min") and dtype.startswith("complex"):
        pytest.skip("complex max/min run as numpy calls (covered in test_calls)")
    x = _data(dtype, (3, 4, 5))
    for axis, keepdims in itertools.product(AXES, (False, True)):
        fn = _bound(reducer, axis, keepdims)

        expected = numpy_result(fn, x)
        tolerance = _tolerance(np.asarray(expected).dtype)
        with np.errstate(all="ignore"):
            actual = numfuse.jit(fn)(x)
        assert_same(actual, expected, rtol=tolerance)


def test_the_sum_of_squares_is_one_kernel_without_numpy_calls():
    def fn(x, mu):
        return np.sum((x - mu) ** 2)

    x = RNG.standard_normal(10_000)
    compiled = _fused(fn, x, 0.5)
    assert len(compiled.kernels) == 1
    assert compiled.kernels[0].layout == "(n),()->()"
    assert _unfused_reductions(compiled) == []
    assert_same(compiled(x, 0.5), fn(x, 0.5), rtol=1e-13)


def test_a_kernel_returns_elementwise_values_and_their_reduction_together():
    def fn(x, mu):
        logp = -((x - mu) ** 2) / 2
        return logp, logp.sum(), np.max(logp)

    x = RNG.standard_normal((30, 40))
    compiled = _fused(fn, x, 0.1)
    assert len(compiled.kernels) == 1
    assert compiled.kernels[0].layout == "(n),()->(n),(),()"
    expected = fn(x, 0.1)
    actual = compiled(x, 0.1)
    assert_same(actual[0], expected[0])
    assert_same(actual[1], expected[1], rtol=1e-13)
    assert_same(actual[2], expected[2])


def test_no_temporary_of_the_input_size_is_allocated():
    def fn(x, mu):
        return np.sum((x - mu) ** 2), np.max(np.abs(x - mu))

    x = RNG.standard_normal(1_000_000)
    jitted = numfuse.jit(fn)
    jitted(x, 0.5)  # compile first
    tracemalloc.start()
    try:
        jitted(x, 0.5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes / 20, f"peak {peak} bytes for an input of {x.nbytes}"
    tracemalloc.start()
    try:
        fn(x, 0.5)
        _, numpy_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert numpy_peak >= x.nbytes  # numpy materialises x - mu (the check can fail)


def test_a_value_needed_before_and_after_its_own_reduction_takes_two_kernels():
    def normalise(e):
        w = np.exp(e)
        return w / w.sum()

    x = RNG.standard_normal(1000)
    compiled = _fused(normalise, x)
    # the second kernel writes w / sum into w's buffer: its only output is a placeholder
    assert [kernel.layout for kernel in compiled.kernels] == ["(n)->(n),()", "(n),()->()"]
    assert_same(compiled(x), normalise(x), rtol=1e-14)


def test_softmax_along_the_last_axis_folds_the_sum_into_the_exp_kernel():
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    x = RNG.standard_normal((64, 100))
    compiled = _fused(softmax, x)
    assert _unfused_reductions(compiled) == ["max"]  # max of an argument: numpy's own
    assert len(compiled.kernels) == 2
    assert_same(compiled(x), softmax(x), rtol=1e-14)


def test_reducing_axes_without_the_core_axis_accumulates_across_the_rows():
    def column_sums(x):
        return np.sum(x * 2, axis=0)

    x = RNG.standard_normal((20, 30))
    compiled = _fused(column_sums, x)
    assert _unfused_reductions(compiled) == []
    assert [kernel.layout for kernel in compiled.kernels] == ["(m,n)->(n)"]
    assert_same(compiled(x), column_sums(x))  # rows added in numpy's order: bit for bit


@pytest.mark.parametrize("layout", ["strided", "fortran", "broadcast", "unit-axis"])
def test_reductions_over_every_operand_layout(layout):
    base = RNG.standard_normal((6, 8))
    x = {"strided": base[:, ::2], "fortran": np.asfortranarray(base),
         "broadcast": np.broadcast_to(base[:1], (6, 8)), "unit-axis": base[:1]}[layout]

    def fn(x, v):
        d = x * v
        return d.sum(axis=1), np.mean(d), d.max(axis=(0, 1), keepdims=True)

    v = RNG.standard_normal(x.shape[1])
    with np.errstate(all="ignore"):
        assert_same(numfuse.jit(fn)(x, v), fn(x, v), rtol=1e-13)


def test_max_and_min_propagate_nan_and_keep_infinities():
    x = np.array([[1.0, np.nan, -np.inf], [np.inf, 2.0, -0.0]])

    def fn(x):
        y = x * 1.0
        return y.max(), y.min(axis=1), np.max(y, axis=1), np.any(y), np.all(y, axis=1)

    assert_same(numfuse.jit(fn)(x), fn(x))


def test_integer_sums_wrap_like_numpy():
    big = np.full(10, np.iinfo(np.int64).max - 3, dtype=np.int64)
    small = np.arange(-60, 60, dtype=np.int8)

    def fn(big, small):
        return np.sum(big + 1), np.sum(small * 3, dtype=np.int8), np.prod(small + 70), \
            np.sum(small > 0)

    assert_same(numfuse.jit(fn)(big, small), fn(big, small))


def test_empty_reductions_raise_or_warn_as_numpy_does():
    empty = np.zeros((3, 0))

    def maximum(x):
        return np.max(x + 1, axis=1)

    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        maximum(empty)
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        numfuse.jit(maximum)(empty)

    def mean(x):
        return np.mean(x * 2)

    with pytest.warns(RuntimeWarning, match="Mean of empty slice"), \
            np.errstate(invalid="ignore"):
        result = numfuse.jit(mean)(empty)
    assert_same(result, np.float64(np.nan))

    def var(x):
        return np.var(x - 1, ddof=3)

    x = RNG.standard_normal(3)
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"), \
            np.errstate(divide="ignore", invalid="ignore"):
        result = numfuse.jit(var)(x)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        assert_same(result, var(x))


def test_float32_sums_keep_numpy_like_accuracy():
    """A serial float32 sum of 4e6 values loses about 5 digits; numpy's pairwise sum and
    numfuse's blocked sum keep the error near float32 rounding."""
    x = (RNG.random(4_000_000) + 0.5).astype(np.float32)

    def total(x):
        return np.sum(x * np.float32(1.5))

    exact = np.sum(x.astype(np.float64) * 1.5)
    fused = numfuse.jit(total)(x)
    assert fused.dtype == np.float32
    fused_error = abs(float(fused) - exact) / exact
    numpy_error = abs(float(total(x)) - exact) / exact
    assert fused_error < 1e-6, (fused_error, numpy_error)
    assert fused_error < max(20 * numpy_error, 2e-7)


def test_fused_reduction_feeding_later_kernels_and_returned_scalars():
    def fn(x):
        m = x.mean(axis=-1, keepdims=True)
        centred = x - m
        return centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5), x.sum()

    x = RNG.standard_normal((16, 33)).astype(np.float32)
    # x - mean cancels: a last-bit difference in the mean shows in values near it
    assert_same(numfuse.jit(fn)(x), fn(x), rtol=1e-5, atol=1e-6)


def test_graph_marks_reductions_inside_their_kernel():
    def fn(x):
        return np.sum(np.exp(x))

    text = str(numfuse.trace(fn, np.ones(4)))
    lines = text.splitlines()
    kernel = next(index for index, line in enumerate(lines) if "# kernel 0" in line)
    assert lines[kernel + 2].strip().startswith("c:f64[] = sum(b)")


def test_reductions_can_be_left_as_numpy_calls():
    def fn(x):
        return np.sum(x * 2), (x + 1).max(axis=-1)

    x = RNG.standard_normal((5, 7))
    function, specs = fn, [numfuse.dtypes.spec_of(x)]
    unfused = numfuse.Compiled(function, specs, {}, [x.shape], fuse_reductions=False)
    check_plan(unfused.plan)
    assert sorted(_unfused_reductions(unfused)) == ["max", "sum"]
    assert_same(unfused(x), fn(x))
    assert _unfused_reductions(_fused(fn, x)) == []


def test_float_product_multiplies_in_numpys_order():
    """Regrouping a product can meet inf before the zero numpy meets first (0 * inf is
    NaN); the fused product multiplies in order (found by the fuzzer)."""
    x = np.zeros((2, 5))
    x[0, 3], x[1, 2] = 1e300, 1.8e8
    check(lambda x: (np.prod(x), np.abs(x)), x)


# ------------------------------------------------------------------ every reduction x dtype


def _registry_reductions() -> list[tuple[str, object]]:
    from numfuse.registry import REGISTRY

    return sorted(((record.name, function) for function, record in REGISTRY.items()
                   if record.reduction), key=lambda item: item[0])


ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "float32", "float64", "complex64", "complex128"]
FOLDED = {"sum", "prod", "mean", "min", "max", "amin", "amax", "any", "all", "std", "var"}


def _every_reduction_case(name: str, function, dtype: str, axis) -> None:
    def fn(x, mask):
        return function(np.where(mask, x, x), axis=axis)  # an elementwise value of dtype

    x = _data(dtype, (4, 7))
    mask = RNG.random((4, 7)) > 0.5
    try:
        expected = numpy_result(fn, x, mask)
    except Exception as error:  # numpy refuses (complex median...): so must numfuse
        with pytest.raises(type(error)):
            numfuse.jit(fn)(x, mask)
        return
    with np.errstate(all="ignore"):
        actual = numfuse.jit(fn)(x, mask)
    assert_same(actual, expected, rtol=_tolerance(np.asarray(expected).dtype),
                path=f"np.{name} of {dtype}, axis={axis}")


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name,function", [item for item in _registry_reductions()
                                           if item[0] in FOLDED],
                         ids=lambda item: item if isinstance(item, str) else "")
def test_every_folded_reduction_keeps_numpys_result_dtype(name, function, dtype):
    _every_reduction_case(name, function, dtype, -1)


@pytest.mark.slow
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name,function", _registry_reductions(),
                         ids=lambda item: item if isinstance(item, str) else "")
def test_every_reduction_over_every_dtype_and_axis(name, function, dtype, axis):
    _every_reduction_case(name, function, dtype, axis)


# ------------------------------------------------- reductions over leading axes (passes)
#
# A reduction whose axes leave out the last one (``x.sum(axis=0)`` of a matrix) runs in a
# kernel of passes: one accumulator per column adds the rows in order, as numpy's own
# reduction along a non-contiguous axis does, so on C-ordered arrays the results are
# numpy's bit for bit.

LEADING = {  # name: reducer of (value, axis, keepdims)
    **REDUCERS,
    "centred": lambda x, axis, keepdims: x - x.mean(axis=axis, keepdims=True),
}
LEADING_AXES = [0, 1, -2, (0, 1), (-3, -2)]  # of a 3-d array: never the last axis


def _all_leading(axis, keepdims, dtype):
    def fn(x):
        return {name: reducer(x, axis, keepdims) for name, reducer in LEADING.items()
                if not (name in ("max", "min") and np.dtype(dtype).kind == "c")}

    return fn


def _assert_leading(dtype, axis, keepdims):
    x = _data(dtype, (6, 5, 7))
    fn = _all_leading(axis, keepdims, dtype)
    expected = numpy_result(fn, x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = _fused(fn, x)
        actual = compiled(x)
    assert _unfused_reductions(compiled) == []
    assert any(kernel.generated.reduced for kernel in compiled.kernels)
    for name in expected:
        tolerance = {}
        if name == "prod" and np.dtype(dtype).kind == "c":
            # numfuse's complex multiply differs from numpy's SIMD loop by an ulp, which
            # cancellation may make large relative to a small part
            rtol = 1e-5 if dtype == "complex64" else 1e-13
            tolerance = {"rtol": rtol, "atol": rtol * float(np.abs(expected[name]).max())}
        assert_same(actual[name], expected[name], **tolerance, path=f"{name}, axis={axis}")


@pytest.mark.parametrize("dtype", [*DTYPES, "complex64", "uint8"])
def test_reductions_over_leading_axes_are_numpys_bit_for_bit(dtype):
    for axis, keepdims in ((0, False), (1, True), ((0, 1), False)):
        _assert_leading(dtype, axis, keepdims)


@pytest.mark.slow
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", LEADING_AXES)
@pytest.mark.parametrize("dtype", [*DTYPES, "complex64", "uint8", "int16"])
def test_reductions_over_every_leading_axis_are_numpys_bit_for_bit(dtype, axis, keepdims):
    _assert_leading(dtype, axis, keepdims)


def standardise_columns(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(300, 200), (7, 5), (2, 1000), (1000, 3)])
def test_standardising_columns_is_one_kernel_and_numpys_result(dtype, shape):
    """The mean, the variance and the standardised values in one kernel of three passes
    (``(x - mean) / std``), no numpy call, and numpy's bits."""
    x = RNG.standard_normal(shape).astype(dtype) * 10 + 3
    compiled = _fused(standardise_columns, x)
    assert len(compiled.kernels) <= 2
    assert [kernel.layout for kernel in compiled.kernels] == ["(m,n)->(m,n)"]
    assert _unfused_reductions(compiled) == []
    assert_same(compiled(x), standardise_columns(x))


def test_standardising_columns_allocates_only_its_result():
    x = RNG.standard_normal((1000, 500))
    jitted = numfuse.jit(standardise_columns)
    jitted(x)
    tracemalloc.start()
    try:
        result = jitted(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak - result.nbytes < x.nbytes / 20, f"peak {peak} bytes for {x.nbytes}"
    tracemalloc.start()
    try:
        standardise_columns(x)
        _, numpy_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert numpy_peak >= 2 * x.nbytes  # numpy materialises x - mean and more


@pytest.mark.parametrize(("fn", "dtype"), [
    pytest.param(lambda x: (x + 1).sum(axis=0), "int8", id="int8-sum-is-int64"),
    pytest.param(lambda x: (x + 1).sum(axis=0), "uint8", id="uint8-sum-is-uint64"),
    pytest.param(lambda x: (x * 1).prod(axis=0), "int16", id="int16-prod-wraps-in-int64"),
    pytest.param(lambda x: (x > 0).sum(axis=0), "float64", id="bool-sum-counts"),
    pytest.param(lambda x: (x * 2).mean(axis=0), "int32", id="int-mean-is-float64"),
    pytest.param(lambda x: (x * 2).var(axis=0, ddof=1), "uint16", id="int-var"),
    pytest.param(lambda x: (x * 2).sum(axis=0, dtype=np.float64), "float32",
                 id="float32-summed-in-float64"),
    pytest.param(lambda x: (x * 2).mean(axis=0, dtype=np.float32), "float64",
                 id="float64-mean-in-float32"),
    pytest.param(lambda x: (x * 2).sum(axis=0, dtype=np.int8), "int64", id="narrowing-dtype"),
    pytest.param(lambda x: np.add.reduce(x * 2), "int32", id="ufunc-reduce-axis-0"),
    pytest.param(lambda x: (x * 2).max(axis=0), "uint64", id="uint64-max"),
    pytest.param(lambda x: np.logical_or.reduce(x * 2, axis=0), "float32", id="logical-or"),
])
def test_accumulations_keep_numpys_result_dtype_and_values(fn, dtype):
    x = _data(dtype, (9, 11))
    compiled = _fused(fn, x)
    assert _unfused_reductions(compiled) == []
    assert_same(compiled(x), numpy_result(fn, x))


@pytest.mark.parametrize(("axis", "shape"), [
    ((0, 2), (3, 4, 5, 6)),  # not next to each other
    (0, (1, 6)),  # only a length-1 axis
])
def test_leading_axes_a_kernel_cannot_accumulate_stay_numpy_calls(axis, shape):
    def fn(x):
        return (x * 2).sum(axis=axis, keepdims=True) + x

    x = RNG.standard_normal(shape)
    compiled = _fused(fn, x)
    assert _unfused_reductions(compiled) == ["sum"]
    assert_same(compiled(x), fn(x))


@pytest.mark.parametrize("layout", ["strided", "rows-strided", "reversed", "broadcast",
                                    "unit-axis"])
def test_accumulations_over_every_operand_layout(layout):
    base = RNG.standard_normal((30, 16)) * 100
    x = {"strided": base[:, ::2], "rows-strided": base[::3], "reversed": base[::-1, ::-1],
         "broadcast": np.broadcast_to(base[:, :1], (30, 16)), "unit-axis": base[:, None]}[layout]

    def fn(x):
        return (x * 2).sum(axis=0), x - x.mean(axis=0), (x * 2).max(axis=0, keepdims=True)

    assert_same(numfuse.jit(fn)(x), fn(x))


def test_a_fortran_ordered_array_is_summed_within_rounding():
    """Along its contiguous first axis numpy sums a Fortran-ordered array pairwise; the
    kernel adds its rows in order: the same sums up to rounding."""
    x = np.asfortranarray(RNG.standard_normal((300, 40)))
    assert_same(numfuse.jit(standardise_columns)(x), standardise_columns(x), rtol=1e-10)


def test_results_of_a_transposed_arrangement_are_c_contiguous():
    """Reducing the first axis of a 3-d array, the kernel sees (axis 1, axis 0, axis 2);
    its results are still numpy's shapes, C-contiguous."""
    def fn(x):
        return x - x.mean(axis=0), (x * 2).sum(axis=0), x.std(axis=0, keepdims=True)

    x = RNG.standard_normal((4, 5, 6))
    compiled = _fused(fn, x)
    assert [kernel.layout for kernel in compiled.kernels] == ["(m,n)->(m,n),(n),(n)"]
    results = compiled(x)
    assert_same(results, fn(x))
    assert all(result.flags.c_contiguous for result in results)


@pytest.mark.parametrize("shape", [(0, 5), (0, 0), (5, 0), (1, 5)])
def test_accumulations_of_too_few_rows_warn_and_raise_like_numpy(shape):
    x = np.ones(shape)
    cases = [lambda x: (x * 2).sum(axis=0), lambda x: (x * 2).mean(axis=0),
             lambda x: (x * 2).var(axis=0, ddof=1), lambda x: (x - x.mean(axis=0)) / x.std(0),
             lambda x: (x * 2).max(axis=0)]
    for fn in cases:
        with warnings.catch_warnings(record=True) as expected_warnings:
            warnings.simplefilter("always")
            try:
                expected, error = fn(x), None
            except ValueError as raised:
                expected, error = None, str(raised)
        with warnings.catch_warnings(record=True) as actual_warnings:
            warnings.simplefilter("always")
            if error is not None:
                with pytest.raises(ValueError, match="zero-size array"):
                    numfuse.jit(fn)(x)
                continue
            actual = numfuse.jit(fn)(x)
        assert_same(actual, expected)  # a sum of no rows is +0.0
        kinds = [{str(warning.message).split(" encountered")[0] for warning in caught}
                 for caught in (actual_warnings, expected_warnings)]
        assert kinds[0] == kinds[1]


def test_rows_chosen_by_a_mask_are_accumulated():
    x = RNG.standard_normal((8, 5))

    def fn(x, mask):
        rows = x[mask]
        return (rows - rows.mean(axis=0)) / rows.std(axis=0), (rows * 2).sum(axis=0)

    for mask in (x[:, 0] > 0, np.zeros(8, bool), np.arange(8) == 3):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same(numfuse.jit(fn)(x, mask), numpy_result(fn, x, mask))


def test_operands_along_rows_columns_or_neither_join_the_passes():
    def fn(x, row_weights, column_shift, scale):
        weighted = (x - column_shift) * row_weights * scale
        return weighted.sum(axis=0) / row_weights.sum(), (weighted - weighted.mean(0)).max(0)

    x, weights = RNG.standard_normal((12, 9)), RNG.random((12, 1))
    shift = RNG.standard_normal(9)
    compiled = _fused(fn, x, weights, shift, 0.5)
    assert [kernel.layout for kernel in compiled.kernels] == ["(m,n),(n),(m),(),()->(n),(n)"]
    assert_same(compiled(x, weights, shift, 0.5), fn(x, weights, shift, 0.5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_long_float_product_multiplies_in_numpys_order(dtype):
    """Found by a conformance hunt: rows from CHUNKED_FROM elements were folded in chunks,
    whose partial products rounded otherwise than numpy's one product in order."""
    v = (1 + np.random.default_rng(1).standard_normal(1_000_000) * 1e-6).astype(dtype)
    for threads in (None, 1):
        jitted = numfuse.jit(lambda v: np.prod(v * 1.0), threads=threads)
        for _ in range(3):  # past the calls that measure the kernel's cost
            assert_same(jitted(v), np.prod(v * 1.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
def test_a_sum_of_negative_zeros_across_rows_has_numpys_sign(dtype):
    """Found by a conformance hunt: accumulators across rows started at -0.0, where
    numpy 2.4's sum starts from +0.0 (``codegen.NEGATIVE_ZERO_SUMS`` asks numpy)."""
    x = np.full((2, 3), -0.0, dtype)
    for fn in (lambda x: np.sum(x * 1, axis=0), lambda x: np.mean(x * 1, axis=0),
               lambda x: (x * 1).sum(axis=0, keepdims=True), lambda x: np.sum(x * 1),
               lambda x: np.sum(x * 1, axis=1)):
        assert_like_numpy(fn, x)
    assert_like_numpy(lambda x: np.sum(x * 1, axis=(0, 1)), np.full((2, 3, 4), -0.0, dtype))


def test_complex_values_reduced_into_a_real_dtype_warn_like_numpy():
    """A reduction of complex values with a real dtype= discards the imaginary parts:
    numpy warns ComplexWarning (numfuse's fused cast did not; it runs as numpy's call)."""
    z = np.array([1 + 1j, 2 - 3j, -0.5 + 2j])
    for fn in (lambda z: np.sum(z * 1, dtype=np.float64),
               lambda z: np.mean(z * 1, dtype=np.float64),
               lambda z: np.add.reduce(z * 1, dtype=float)):
        with pytest.warns(np.exceptions.ComplexWarning):
            expected = fn(z)
        with pytest.warns(np.exceptions.ComplexWarning):
            assert_same(numfuse.jit(fn)(z), expected)
