"""Running compiled programs: every layout of input numpy accepts, numpy's result types,
and the memory guarantees (inputs never written, outputs never aliased)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same, check, numpy_result

import numfuse
from numfuse.calls import NumpyCall
from numfuse.reductions import Reduction
from numfuse.runtime import (
    BlockTotal,
    CallStep,
    KernelOperands,
    KernelStep,
    LocalRunner,
    ReductionCompletion,
)


def fused(x, y):
    """Two outputs sharing an intermediate: one multi-output kernel."""
    product = x * y
    return product + 1.0, product - x


def unary(x):
    return np.maximum(x, 0.5) * 2.0 - x


def rng_array(shape, dtype=np.float64, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape) * 4
    return values.astype(dtype)


# ---------------------------------------------------------------------------- broadcasting


@pytest.mark.parametrize(("x_shape", "y_shape"), [
    ((5, 1), (1, 4)),
    ((3, 6), (6,)),
    ((6,), (3, 6)),
    ((3, 6), (3, 1)),
    ((2, 3, 4), (4,)),
    ((2, 3, 4), (3, 1)),
    ((2, 1, 4), (1, 3, 1)),
    ((4, 1, 3), (1, 5, 1)),
    ((2, 3, 4), (2, 3, 4)),
    ((1000, 3), (3,)),
    ((1000, 3), (1000, 1)),
    ((1, 5), (5, 1)),
    ((1,), (7,)),
    ((1, 1, 1), (2, 3, 1)),
])
def test_broadcasting_matches_numpy(x_shape, y_shape):
    check(fused, rng_array(x_shape, seed=1), rng_array(y_shape, seed=2))


def test_incompatible_shapes_raise_value_error_like_numpy():
    x, y = np.ones(5), np.ones(6)
    with pytest.raises(ValueError):
        numpy_result(fused, x, y)
    with pytest.raises(ValueError):
        numfuse.jit(fused)(x, y)


def test_new_sizes_reuse_the_compiled_program():
    jitted = numfuse.jit(fused)
    for rows, cols in [(3, 4), (7, 2), (1000, 3), (2, 1000)]:
        x, y = rng_array((rows, cols), seed=rows), rng_array((cols,), seed=cols)
        assert_same(jitted(x, y), fused(x, y))
    assert len(jitted.compiled) == 1


# ----------------------------------------------------------------- independent sibling values


def test_unrelated_outputs_of_different_sizes():
    """numpy computes ``x + 1`` and ``y + 1`` independently; sizes need not agree."""
    check(lambda x, y: (x + 1.0, y + 1.0), np.arange(5.0), np.arange(7.0))


def test_values_sharing_only_a_scalar_argument_may_differ_in_size():
    check(lambda x, y, s: (x * s, y * s), np.arange(5.0), np.arange(7.0), 2.5)


def test_values_sharing_only_a_scalar_may_differ_in_leading_size():
    check(lambda x, y: (x * 2.0, y * 2.0), np.ones((3, 4)), np.ones((5, 4)))


# ------------------------------------------------------------- 0-d arrays and numpy scalars


@pytest.mark.parametrize(("fn", "args"), [
    pytest.param(unary, (np.array(0.25),), id="ufuncs-on-0d-array-give-scalar"),
    pytest.param(unary, (np.float32(0.25),), id="ufuncs-on-numpy-scalar-give-scalar"),
    pytest.param(lambda x: np.sqrt(x), (np.array(2.0),), id="sqrt-0d"),
    pytest.param(lambda x: np.where(x > 0, x, 0.0), (np.array(0.5),), id="where-0d-array"),
    pytest.param(lambda x: np.where(x > 0, x, 0.0), (np.float64(-0.5),), id="where-scalar"),
    pytest.param(lambda x: np.where(x > 0, x * 2.0, 0.0), (np.array(0.5),),
                 id="where-of-scalar-intermediate"),
    pytest.param(lambda x: x.copy(), (np.array(2.0),), id="copy-0d-array"),
    pytest.param(lambda x: (x + 1.0).copy(), (np.array(2.0),), id="copy-of-scalar"),
    pytest.param(lambda x: np.copy(x + 1.0), (np.array(2.0),), id="np.copy-of-scalar"),
    pytest.param(lambda x: x.astype(np.float32), (np.array(2.0),), id="astype-0d-array"),
    pytest.param(lambda x: x.astype(np.float32), (np.float64(2.0),), id="astype-scalar"),
    pytest.param(lambda x, y: x * y, (np.array(2.0), np.array(3.0)), id="0d-times-0d"),
    pytest.param(lambda x, y: x * y, (np.array(2.0), np.arange(3.0)), id="0d-times-1d"),
    pytest.param(lambda x, y: x * y, (np.float32(2.0), np.array(3.0, np.float32)),
                 id="scalar-times-0d"),
    pytest.param(lambda x, y: x * y, (np.float32(2.0), np.arange(3.0)), id="f32-scalar-f64-array"),
    pytest.param(lambda x, y: x * y, (np.int8(100), np.int8(3)), id="int8-scalars-wrap"),
    pytest.param(lambda x: (x + 1.0, np.sqrt(x)), (np.array(0.5),), id="two-outputs-0d"),
    pytest.param(lambda x: (x, x + 1.0), (np.array(0.5),), id="returns-0d-input-and-scalar"),
])
def test_zero_dimensional_results_have_numpys_types(fn, args):
    check(fn, *args)


def test_python_numbers_in_give_python_numbers_out():
    check(lambda a, b: (a * b, a - b, -a), 1.5, 2.5)
    check(lambda a, b: (a * b, a - b, a // b, a % b, a / b), -7, 2)


def test_ufunc_on_python_numbers_gives_numpy_scalar():
    check(lambda a, b: (np.multiply(a, b), np.sqrt(a)), 1.5, 2.5)


def test_comparison_of_python_int_arguments():
    check(lambda a, b: (a < b, a == b), 1, 2)


def test_python_complex_on_the_left_of_a_float64_scalar_is_pythons_arithmetic():
    """numpy float64 subclasses Python float, so ``1.5j * np.float64(x)`` never reaches
    numpy: a Python complex (weak afterwards), Python's ``ZeroDivisionError`` (found by the
    fuzzer)."""
    check(lambda a, b: (b * np.abs(a), b - a.sum(), b ** np.abs(a), b == np.abs(a),
                        (b + np.abs(a)) * np.ones(2, np.complex64), 2j * a.sum(),
                        a.sum() * 2j), np.array([2.0]), 1.5j)
    with pytest.raises(ZeroDivisionError):
        numfuse.jit(lambda a, b: b / np.abs(a))(np.array(0.0), 1.5j)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_numpy_scalars_compare_with_numpys_scalar_math(dtype):
    """numpy compares complex *scalars* lexicographically with no NaN test
    (``np.complex64(3+nanj) > 0`` is True) and complex arrays with one (found by the
    fuzzer)."""
    nan = float("nan")
    for a, b in ((complex(3, nan), 0j), (complex(3, 1), complex(3, nan)), (complex(nan, 1), 1j)):
        check(lambda a, b: (a < b, a <= b, a > b, a >= b, a > 2.5,
                            2.5 < a),  # noqa: SIM300 - the reflected comparison
              dtype(a), dtype(b))
        check(lambda a, b: (a < b, a >= b), np.array(a, dtype), np.array(b, dtype))


def python_sum(a, b):
    return a + b


def python_power(a, b):
    return a ** b


# README, limits: "arithmetic among Python scalar arguments only runs in int64/float64 like
# numpy scalars, not with Python's unbounded ints or bool rules".
@pytest.mark.xfail(strict=True, reason="documented limit (README: limits)")
@pytest.mark.parametrize(("fn", "a", "b"), [
    pytest.param(python_sum, 2**62, 2**62, id="int-sum-beyond-int64"),
    pytest.param(python_power, 2, -1, id="int-to-negative-int-power-is-float"),
    pytest.param(python_power, -2.0, 0.5, id="negative-float-to-fractional-power-is-complex"),
])
def test_python_number_arithmetic_follows_python(fn, a, b):
    """With only Python numbers involved, the plain function computes with Python's
    arithmetic; the jitted function should return the same number."""
    check(fn, a, b)


# ------------------------------------------------------------------------------ empty arrays


@pytest.mark.parametrize(("x_shape", "y_shape"), [
    ((0,), (0,)),
    ((0,), (1,)),
    ((0, 3), (3,)),
    ((3, 0), (3, 1)),
    ((0, 1), (4,)),
    ((1, 0), (5, 1)),
    ((2, 0, 3), (3,)),
])
def test_empty_arrays(x_shape, y_shape):
    check(fused, np.ones(x_shape), np.ones(y_shape))


# ------------------------------------------------------------------------- memory layouts

BASE = rng_array((6, 9), seed=3)


@pytest.mark.parametrize("x", [
    pytest.param(BASE[0, ::2], id="1d-step-2"),
    pytest.param(BASE[:, ::3], id="2d-column-step-3"),
    pytest.param(BASE[::2], id="2d-row-step-2"),
    pytest.param(BASE[0, ::-1], id="1d-reversed"),
    pytest.param(BASE[::-1, ::-2], id="2d-reversed"),
    pytest.param(BASE.T, id="transposed"),
    pytest.param(np.asfortranarray(BASE), id="fortran-order"),
    pytest.param(BASE[1:4, 2:7], id="offset-window"),
    pytest.param(np.broadcast_to(BASE[0], (4, 9)), id="zero-row-stride"),
    pytest.param(np.broadcast_to(BASE[:, :1], (6, 9)), id="zero-column-stride"),
    pytest.param(BASE.astype(">f8"), id="big-endian"),
    pytest.param(BASE.astype(">f8")[:, ::2], id="big-endian-strided"),
    pytest.param(BASE[:, 3:4], id="column-slice-(n,1)"),
])
def test_memory_layouts(x):
    check(unary, x)
    check(fused, x, x[..., :1] if x.ndim == 2 else x[:1])


def test_unaligned_input():
    raw = np.zeros(8 * 6 + 1, dtype=np.uint8)
    x = raw[1:].view(np.float64)
    x[:] = np.arange(6.0) - 2.5
    assert not x.flags.aligned
    check(unary, x)


def test_big_endian_integer_and_mixed_byte_orders():
    check(lambda x, y: (x + y, x * 2), np.arange(6).astype(">i4"), np.arange(6).astype("<i4"))
    check(fused, np.arange(5.0).astype(">f8"), np.arange(5.0).astype(">f4"))


def test_read_only_inputs():
    x = rng_array((4, 5), seed=4)
    y = rng_array((5,), seed=5)
    x.flags.writeable = False
    y.flags.writeable = False
    check(fused, x, y)


def test_strided_complex_input():
    z = (rng_array((4, 6), seed=6) + 1j * rng_array((4, 6), seed=7))[:, ::2]
    check(lambda z: (z * 2.0 - 1j, z.real, z.imag), z)


def test_integer_fortran_order():
    x = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    check(lambda x: (x * 3 - 1, x // 2), x)


# ----------------------------------------------------------------- memory guarantees


@pytest.mark.parametrize("fn", [
    pytest.param(fused, id="fused"),
    pytest.param(lambda x, y: (x + y, x * y, np.where(x > y, x, y)), id="where"),
])
def test_inputs_are_never_modified(fn):
    x = rng_array((3, 4), seed=8)
    y = rng_array((4,), seed=9)
    x_before, y_before = x.copy(), y.copy()
    numfuse.jit(fn)(x, y)
    assert_same(x, x_before)
    assert_same(y, y_before)


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: x + 0.0, id="add-zero"),
    pytest.param(lambda x: x * 1.0, id="times-one"),
    pytest.param(lambda x: x.copy(), id="method-copy"),
    pytest.param(lambda x: np.copy(x), id="np.copy"),
    pytest.param(lambda x: np.positive(x), id="positive"),
    pytest.param(lambda x: x.astype(x.dtype), id="astype-same-dtype"),
    pytest.param(lambda x: np.where(True, x, 0), id="where-always-true"),
    pytest.param(lambda x: np.clip(x, None, 100), id="clip-upper-only"),
])
def test_computed_outputs_never_alias_inputs(fn):
    x = np.arange(6.0)
    result = numfuse.jit(fn)(x)
    assert not np.shares_memory(result, x)
    assert_same(result, numpy_result(fn, x))


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: np.round(x), id="np.round"),
    pytest.param(lambda x: x.round(), id="round-method"),
    pytest.param(lambda x: np.fix(x), id="np.fix"),
    pytest.param(lambda x: np.around(x, 1), id="around-positive-decimals"),
])
def test_rounding_integers_returns_a_new_array_like_numpy(fn):
    x = np.arange(-3, 3)
    expected = numpy_result(fn, x)
    assert not np.shares_memory(expected, x)
    result = numfuse.jit(fn)(x)
    assert_same(result, expected)
    assert not np.shares_memory(result, x)


def test_identical_expressions_return_independent_arrays():
    """numpy computes ``x + 1.0`` twice, so the two results are separate arrays: writing
    into one must not change the other."""
    def twice(x):
        return x + 1.0, x + 1.0

    first, second = numfuse.jit(twice)(np.arange(4.0))
    assert not np.shares_memory(first, second)
    first[:] = 0.0
    assert_same(second, np.arange(4.0) + 1.0)


def test_writing_into_a_result_does_not_change_later_results():
    jitted = numfuse.jit(fused)
    x, y = np.arange(4.0), np.arange(4.0) + 1
    first = jitted(x, y)
    first[0][:] = -1.0
    first[1][:] = -1.0
    assert_same(jitted(x, y), fused(x, y))


def test_multi_kernel_program_passes_intermediates_between_kernels():
    def two_stages(row, column):
        scaled = np.sin(row) * 2.0
        grid = scaled + column
        return grid * grid, scaled - 1.0, np.exp(column)

    row, column = np.linspace(0, 1, 5), np.linspace(-1, 1, 3)[:, None]
    check(two_stages, row, column, rtol=1e-14)
    assert len(numfuse.compile(two_stages, row, column).kernels) >= 2


@pytest.mark.parametrize("fn", [
    pytest.param(lambda row, column: (np.where(row < 0, row + column, 0.0), row < 0), id="bool"),
    pytest.param(lambda row, column: ((row * 3).astype(np.int32) + column.astype(np.int16),
                                      (row * 3).astype(np.int32)), id="int"),
    pytest.param(lambda row, column: ((row * 1j) * column, row * 1j), id="complex"),
    pytest.param(lambda row, column: ((row * 3).astype(np.float32) * column,
                                      (row * 3).astype(np.float32)), id="float32"),
])
def test_intermediates_of_every_kind_cross_kernel_boundaries(fn):
    row, column = np.linspace(-1, 1, 5), np.linspace(-2, 2, 3)[:, None]
    check(fn, row, column)
    assert len(numfuse.compile(fn, row, column).kernels) >= 2


@pytest.mark.parametrize(("kind", "fn", "x"), [
    pytest.param("invalid", lambda x: x - x, np.array([np.inf, 1.0]), id="invalid"),
    pytest.param("divide", lambda x: 1.0 / x, np.array([0.0, 1.0]), id="divide"),
    pytest.param("over", lambda x: x * 1e308, np.array([10.0, 1.0]), id="overflow"),
])
def test_floating_point_errors_follow_np_errstate(kind, fn, x):
    jitted = numfuse.jit(fn)
    with np.errstate(**{kind: "raise"}):
        with pytest.raises(FloatingPointError):
            fn(x)
        with pytest.raises(FloatingPointError):
            jitted(x)
    with np.errstate(all="ignore"):
        assert_same(jitted(x), fn(x))
    with np.errstate(all="warn"), pytest.warns(RuntimeWarning):
        jitted(x)


# ----------------------------------------------------------------------------- out=


def _logp_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


def test_out_receives_the_results_without_new_arrays():
    import tracemalloc

    x = np.random.default_rng(0).standard_normal(200_000)
    logp, grad = np.empty_like(x), np.empty_like(x)
    jitted = numfuse.jit(_logp_grad)
    jitted(x, 0.5)
    tracemalloc.start()
    try:
        result = jitted(x, 0.5, out=(logp, grad))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result[0] is logp and result[1] is grad
    assert peak < x.nbytes / 10
    assert_same((logp, grad), _logp_grad(x, 0.5))


def test_out_for_one_result_strided_and_fortran_targets():
    x = np.random.default_rng(1).standard_normal((6, 8))

    def scaled(x):
        return np.exp(x) * 2

    for target in (np.empty((6, 8)), np.empty((6, 16))[:, ::2], np.empty((6, 8), order="F")):
        result = numfuse.jit(scaled)(x, out=target)
        assert result is target
        assert_same(target, scaled(x), rtol=1e-15)


def test_out_aliasing_an_input_gives_numpys_result():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(1000)
    expected = _logp_grad(x, 0.25)
    grad = np.empty_like(x)
    result = numfuse.jit(_logp_grad)(x, 0.25, out=(x, grad))
    assert result[0] is x
    assert_same((x, grad), expected)

    def shifted(a):
        return np.sqrt(np.abs(a)) + a[::-1]

    y = rng.standard_normal(1000)
    want = shifted(y)
    numfuse.jit(shifted)(y, out=y)
    assert_same(y, want, rtol=1e-15)


def test_out_with_reductions_and_casting():
    x = np.random.default_rng(3).standard_normal((5, 7))

    def fn(x):
        y = x * 3
        return y, y.sum(axis=1)

    y, sums = np.empty((5, 7)), np.empty(5, dtype=np.float32)
    numfuse.jit(fn)(x, out=(y, sums))
    expected = fn(x)
    assert_same(y, expected[0])
    np.testing.assert_allclose(sums, expected[1].astype(np.float32), rtol=1e-6)


def test_out_errors_and_a_parameter_named_out():
    x = np.ones(4)
    jitted = numfuse.jit(_logp_grad)
    with pytest.raises(TypeError, match="tuple of 2 arrays"):
        jitted(x, 0.5, out=(np.empty(4),))
    read_only = np.empty(4)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        jitted(x, 0.5, out=(read_only, np.empty(4)))

    @numfuse.jit
    def own(x, out):
        return x * out

    assert_same(own(x, 3.0), x * 3.0)
    assert_same(own(x, out=2.0), x * 2.0)


def test_single_kernel_programs_take_the_direct_path():
    x = np.random.default_rng(4).standard_normal(1200)
    compiled = numfuse.compile(_logp_grad, x, 0.5)
    assert compiled.run is compiled.program.fast
    assert_same(compiled.run((x[::3], 0.5)), _logp_grad(x[::3], 0.5))
    pair = numfuse.compile(lambda a, b: a * b + 1, x, x)
    assert pair.run is pair.program.fast
    with pytest.raises(ValueError,
                       match=r"could not be broadcast together with shapes \(1200,\) \(7,\)"):
        pair.run((x, np.ones(7)))


def test_a_one_element_tuple_of_results_stays_a_tuple():
    x = np.arange(5.0)
    assert_same(numfuse.jit(lambda x: (x * 2,))(x), (x * 2,))


def test_single_kernel_programs_with_fused_reductions_take_the_direct_path():
    x = np.random.default_rng(5).standard_normal(1200)
    for fn in (lambda x, mu: np.sum((x - mu) ** 2), lambda x, mu: (x * mu, x.max(), x.sum())):
        compiled = numfuse.compile(fn, x, 0.5)
        assert compiled.run is compiled.program.fast
        for args in ((x, 0.5), (x[:7], 0.25)):
            direct = compiled.run(args)
            assert_same(direct, compiled.program(args))  # what the interpreter gives
            assert_same(direct, fn(*args), rtol=1e-13)


# ------------------------------------------------------------ the pieces of a kernel step


def _own_slots(kernel):
    return {node: index for index, node in enumerate(kernel.region.inputs)}


def test_operand_preparation_drops_length_one_axes_and_makes_the_core_contiguous():
    x = (np.ones((3, 1, 8)) * np.arange(8.0))[..., ::2]  # a strided (3, 1, 4) view
    assert x.strides[-1] == 2 * x.itemsize
    kernel = numfuse.compile(lambda x, s: x * s + 1, x, 2.0).kernels[0]
    layout = KernelOperands.of(kernel, _own_slots(kernel), ())
    assert (layout.dropped, layout.vector, layout.rows, layout.flatten) == ((1,), False,
                                                                           False, True)
    (x_slot, prepare_x, x_core), (s_slot, prepare_s, s_core) = layout.operands
    assert (x_slot, x_core, s_slot, prepare_s, s_core) == (0, True, 1, None, False)
    presented = prepare_x(x)
    assert presented.shape == (3, 4) and presented.flags.c_contiguous
    assert_same(presented, x[:, 0])
    flat, shape = layout.flattened([presented, 2.0])
    assert shape == (3, 4) and flat[0].shape == (12,) and flat[1] == 2.0
    assert layout.flattened([presented.T.copy().T, 2.0]) is None  # not C-contiguous
    assert layout.restore(np.zeros((3, 4))).shape == (3, 1, 4)
    out = np.empty((3, 1, 4))
    assert np.shares_memory(layout.present(out, False), out)
    assert layout.present(out, False).shape == (3, 4)
    assert layout.present(out, True).shape == (12,)
    assert layout.present(np.empty((3, 1, 8))[..., ::2], False) is None  # the kernel
    # would write a strided output as if it were contiguous


def test_operand_preparation_of_an_outer_broadcast_bounds_its_loop():
    a, b = np.ones((5, 1)), np.ones((1, 4))
    kernel = numfuse.compile(lambda a, b: a - b, a, b).kernels[0]
    layout = KernelOperands.of(kernel, _own_slots(kernel), ())
    assert layout.rows and not layout.flatten and layout.dropped == ()
    operands = [value if prepare is None else prepare(value)
                for value, (_slot, prepare, _core) in zip((a, b), layout.operands, strict=True)]
    assert [np.shape(value) for value in operands] == [(5,), (1, 4)]  # a is a () operand
    assert layout.core == 1 and layout.loop_bound(operands) == 20


def test_reduction_completion_from_per_row_partials():
    a = np.arange(12.0).reshape(3, 4)
    rows = a.sum(axis=1)  # what a (3, 4) loop leaves: one partial per row of 4

    def completed(reduction, partials, flattened=False):
        completion = ReductionCompletion.of(reduction, [0, 1], 2)
        return completion.complete(partials.copy(), 4, flattened)  # may divide in place

    f64 = np.dtype(np.float64)
    assert_same(completed(Reduction("add", (0, 1), False, f64), rows), np.sum(a))
    assert_same(completed(Reduction("add", (0, 1), False, f64), np.array(a.sum()), True),
                np.sum(a))
    assert_same(completed(Reduction("add", (1,), False, f64), rows), np.sum(a, axis=1))
    assert_same(completed(Reduction("add", (1,), True, f64, "mean"), rows),
                np.mean(a, axis=1, keepdims=True))
    assert_same(completed(Reduction("add", (0, 1), True, f64, "mean"), rows),
                np.mean(a, keepdims=True))
    whole = ReductionCompletion.of(Reduction("maximum", (0,), False, f64), [0], 1)
    assert whole.direct and whole.complete(np.array(7.0), 4, False) == 7.0
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        whole.complete(np.array(-np.inf), 0, False)
    chunks = [rows[:2] - 1, rows[:2] + 1]  # two chunks along the core axis
    assert_same(ReductionCompletion.of(Reduction("add", (1,), False, f64), [0, 1], 2)
                .combine(chunks), 2 * rows[:2])


def test_a_block_total_keeps_the_reduced_axes_and_does_not_divide():
    a = np.arange(12.0).reshape(3, 4)
    mean = Reduction("add", (1,), False, np.dtype(np.float64), "mean")
    total = BlockTotal.of(mean, [0, 1], 2)
    assert_same(total.complete(a.sum(axis=1), 4, False), a.sum(axis=1, keepdims=True))
    assert_same(BlockTotal.of(Reduction("maximum", (0, 1), False, np.dtype(np.float64)),
                              [0, 1], 2).complete(np.empty(0), 4, False),
                np.full((1, 1), -np.inf))  # an empty block: the ufunc's identity


# ---------------------------------------------------------------------- the interpreter


def test_the_interpreter_runs_every_step_in_order_with_any_runner():
    def fn(x):
        d = x - 1.0
        return np.cumsum(d) * 2 + d, d.sum()

    x = np.arange(6.0)
    program = numfuse.compile(fn, x).program
    order = []

    class Recording:
        """Runs a step as the program would, after checking its operands are ready."""

        def __init__(self, step):
            self.step = step
            self.inner = step if isinstance(step, CallStep) else LocalRunner(step)

        def run(self, values):
            assert all(values[slot] is not None for slot in self.step.inputs)
            order.append(self.step)
            self.inner.run(values)

    assert [type(step) for step in program.steps] == [KernelStep, CallStep, KernelStep]
    result = program((x,), runners=[Recording(step) for step in program.steps])
    assert order == list(program.steps)
    assert_same(result, fn(x))
    assert_same(program((x,)), fn(x))  # its own runners: the same interpreter


def test_a_call_returning_several_results_runs_once_for_all_its_items(monkeypatch):
    """``u, s, vt = np.linalg.svd(a)``, ``hist, edges = np.histogram(x)``: each item is a
    step of its own, but the call runs once per call of the function (not once per item:
    twice the work, and its warnings twice)."""
    def fn(a):
        u, s, vt = np.linalg.svd(a)
        return u * 2, s + 1, vt

    a = np.random.default_rng(3).standard_normal((6, 6))
    jitted = numfuse.jit(fn)
    jitted(a)
    runs = []

    def counted(call):
        invoke = call.invoke

        def run(values):
            runs.append(call.fn)
            return invoke(values)
        return run

    (compiled,) = jitted.compiled.values()
    for step in compiled.program.steps:
        for call in (getattr(step, "call", None), getattr(step, "whole", None)):
            if isinstance(call, NumpyCall):
                monkeypatch.setattr(call, "invoke", counted(call))
    for _ in range(2):
        assert_same(jitted(a), fn(a), rtol=1e-12)
    assert runs == [np.linalg.svd] * 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        numfuse.jit(lambda x: np.histogram(x))(np.array([True, False]))
    assert len(caught) == 1  # numpy's one "Converting input from bool" warning


# ------------------------------------------------------------------ loops of small steps


def _rows_written(x):
    out = np.zeros((6, x.size))
    for i in range(6):
        out[i] = x * (i + 1)
    out[2:4, ::2] = -1.0
    return out


def _large_rows_written(x):
    out = np.zeros((4, 5000))  # 160 KB: made by numpy at each call, not a constant
    for i in range(4):
        out[i, :x.size] = x * (i + 1)
    return out + np.ones(5000)


def _stencil(u, steps):
    u = u.copy()
    for _ in range(steps):
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def _kept_then_written(x):
    y = x * 2
    first = y[0:3] * 1  # a new array: y's old values
    y[0] = 100.0
    return first, y


def _runners(jitted, *args):
    compiled, _operands = jitted.specialize(*args)
    return compiled.program.runners


@pytest.mark.parametrize(("fn", "args"), [
    (_rows_written, (np.arange(5.0),)),
    (_large_rows_written, (np.arange(5.0),)),
    (_stencil, (np.sin(np.linspace(0.0, 3.0, 21)), 5)),
    (_kept_then_written, (np.arange(5.0),)),
])
def test_a_write_into_the_functions_own_array_that_nothing_reads_after_is_in_place(fn, args):
    """A loop writing rows into its own array copied the whole array at each write: the
    last write into an array nothing reads after (no view of it either, nor a return)
    writes into it; the others into a copy, as numpy's semantics need."""
    static = (1,) if fn is _stencil else ()
    jitted = numfuse.jit(fn, static_argnums=static)
    for _ in range(2):
        got, expected = jitted(*args), fn(*args)
        for one, other in zip(got if isinstance(got, tuple) else (got,),
                              expected if isinstance(expected, tuple) else (expected,),
                              strict=True):
            assert_same(one, other)
    writes = [runner for runner in _runners(jitted, *args)
              if getattr(runner, "op", None) == "setitem"]
    assert writes and all(runner.written is not None for runner in writes)
    if fn is not _kept_then_written:
        assert sum(runner.in_place for runner in writes) >= len(writes) - 1
    if fn is _large_rows_written:  # every write into the array numpy makes at each call
        assert all(runner.in_place for runner in writes)
        assert not any(isinstance(value, np.ndarray) and value.nbytes >= 1 << 16
                       for value in jitted.specialize(*args)[0].program.initial)


def _slices_joined(y):
    return np.concatenate([y[:3] * 2, y[1:], y[-2:]], axis=0)


def test_basic_indexing_with_sizes_tracing_fixed_runs_as_the_indexing_and_checks_them():
    """``y[:3]`` fixes a size (3) where ``y[1:]`` may leave it free: each runs as the
    indexing alone (not numpy's call through the general path), and a result of another
    size than tracing found is refused, as a call's is."""
    jitted = numfuse.jit(_slices_joined)
    for n in (8, 2, 5, 8, 2):
        y = np.arange(n, dtype=float) - 3.0
        assert_same(jitted(y), _slices_joined(y))
    views = [runner for runner in _runners(jitted, np.zeros(8))
             if getattr(runner, "op", None) == "getitem"]
    assert len(views) == 3 and all(runner.view is not None for runner in views)
    assert any(runner.fixed for runner in views)
    compiled = numfuse.compile(_slices_joined, np.zeros(8))
    with pytest.raises(numfuse.CallShapeError, match=r"getitem returned float64\(2,\)"):
        compiled(np.zeros(2))


def test_an_item_of_a_list_argument_returned_as_it_is_is_a_python_number():
    def bounded(x, bounds):
        low, high = bounds
        return np.clip(x, low, high), high, bounds[0]

    jitted = numfuse.jit(bounded)
    for bounds in ((0, 1.5), [2, 7], (0.5, 3)):
        for _ in range(2):
            result, expected = jitted(np.ones(2), bounds), bounded(np.ones(2), bounds)
            assert [type(item) for item in result[1:]] == [type(item) for item in expected[1:]]
            assert result[1:] == expected[1:]


@pytest.mark.parametrize("shape", [(3, 5), (15,), (5, 1), (2, 5, 3), (5, 3)])
def test_an_out_of_another_shape_is_numpys_broadcast_or_error(shape):
    """Found by a conformance hunt: ``out=`` of the result's size but another shape, (3, 5)
    for a (5, 3) result, was written as if it were one; it now takes the result as
    ``np.copyto`` does (broadcast into a larger one, numpy's ValueError otherwise)."""
    x = np.arange(15.0).reshape(5, 3)
    jitted, out = numfuse.jit(lambda v: v * 2), np.zeros(shape)
    try:
        np.copyto(np.zeros(shape), x * 2)
    except ValueError:
        with pytest.raises(ValueError, match="could not broadcast"):
            jitted(x, out=out)
        return
    assert jitted(x, out=out) is out
    assert_same(out, np.broadcast_to(x * 2, shape))


def test_kernels_of_one_source_and_other_numpy_types_are_other_gufuncs():
    """Found by a conformance hunt: ``int64`` and ``longlong`` are one machine type, so
    their kernels have one source; the gufunc compiled for a ``longlong`` function served
    another function's ``int64`` arrays, whose results came back ``longlong``."""
    first = numfuse.jit(lambda x: x * 3)
    assert first(np.arange(5, dtype=np.longlong)).dtype.char == "q"
    second = numfuse.jit(lambda x: x * 3)
    result = second(np.arange(5))
    assert result.dtype.char == (np.arange(5) * 3).dtype.char
    assert type(result[0]) is type((np.arange(5) * 3)[0])


@pytest.mark.parametrize("fn", [
    lambda img: img.transpose(1, 0, 2).copy(),
    lambda img: np.rot90(img).copy(),
    lambda img: np.ascontiguousarray(img.transpose(1, 0, 2) / 255),
    lambda img: img.transpose(1, 0, 2).astype(np.float32, order="C"),
    lambda img: img.transpose(1, 0, 2).copy().ravel("K"),
], ids=["copy", "rot90-copy", "ascontiguousarray", "astype-C", "ravel-K"])
@pytest.mark.parametrize("size", [4, 300])
def test_results_of_permuted_arguments_are_c_contiguous(fn, size):
    """Found by a conformance hunt: numpy allocated a small kernel's outputs in the order
    of an argument whose leading axes are permuted, so ``img.transpose(1, 0, 2).copy()``
    came back not C-contiguous (``ravel("K")`` then read another order)."""
    img = np.arange(size * 5 * 3, dtype=np.uint8).reshape(size, 5, 3)
    jitted = numfuse.jit(fn)
    for _ in range(2):
        result, expected = jitted(img), fn(img)
        assert_same(result, expected)
        assert result.flags.c_contiguous
