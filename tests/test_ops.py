"""Differential tests driven by the op table: every row × every dtype numpy supports.

All the rows valid for one dtype are traced into one function returning a dict, so each
dtype costs one or two kernel compiles; every output is still compared on its own with
numpy's result for the same operation: dtype exactly, values bit for bit for exact
operations and within a few ulp for transcendental ones.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same, check

import numfuse
from numfuse import vector_math
from numfuse.ops import CATEGORIES, COMPARISON, OPS, Exactness, OpDef

DTYPES = [np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)]

# Rows whose results are within a few ulp rather than exact (libm differences).
# numpy raises ValueError for negative integer exponents (tested on its own below).
NON_NEGATIVE_EXPONENT = frozenset({"power", "power_or_root"})


def edge_values(dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "b":
        return np.array([False, True])
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        bits = dtype.itemsize * 8
        values = {0, 1, 2, 3, 7, 100, bits - 1, bits, bits + 1, info.max, info.max - 1,
                  info.min, info.min + 1}
        if dtype.kind == "i":
            values |= {-1, -2, -3, -7, -100, -bits}
        return np.array(sorted(v for v in values if info.min <= v <= info.max), dtype)
    real = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, 7.0, -7.0, 0.1, 1e-3,
            1e10, -1e10, 1e-310, 1e300, -1e300, np.nan, np.inf, -np.inf, np.pi, 100.0]
    if dtype.kind == "f":
        with np.errstate(all="ignore"):
            return np.array(real, dtype)
    parts = [0.0, -0.0, 1.0, -2.5, 0.5, np.nan, np.inf, 3.0]
    return np.array([complex(a, b) for a, b in itertools.product(parts, parts)], dtype)


def numpy_supports(op: OpDef, dtypes: tuple[np.dtype, ...]) -> bool:
    try:
        op.loop_dtypes(dtypes)
    except Exception:
        return False
    return True


ROWS = [row for row in OPS.values() if row.name not in ("astype", "real", "imag")]


def reference(op: OpDef, operands: list[np.ndarray]) -> np.ndarray:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return op.reference(*operands)


# numpy's own loops disagree on which zero to return for max(0.0, -0.0) between 0-d and
# array operands; numfuse always gives the array loops' answer.
SIGNED_ZERO_TIES = frozenset({"maximum", "minimum", "fmax", "fmin", "clip"})


def assert_matches(name: str, actual: np.ndarray, expected: np.ndarray, operands,
                   where: str = "") -> None:
    label = f"{where} {name}".strip()
    assert actual.dtype == expected.dtype, f"{label}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{label}: shape {actual.shape} != {expected.shape}"
    complex_in = any(np.asarray(operand).dtype.kind == "c" for operand in operands)
    row = OPS.get(name)  # a row, or the label of an exact check (astype, divmod...)
    exactness = row.exactness if row is not None else Exactness.EXACT
    inexact = exactness is Exactness.ULPS or (exactness is Exactness.EXACT_FOR_REAL
                                              and complex_in)
    if expected.dtype.kind in "fc" and inexact:
        _assert_close(name, actual, expected, operands)
        return
    same = (actual == expected) | (_isnan(actual) & _isnan(expected))
    if expected.dtype.kind in "f" and not (where == "0-d" and name in SIGNED_ZERO_TIES):
        same &= (np.signbit(actual) == np.signbit(expected)) | _isnan(expected)
    if not same.all():
        bad = np.flatnonzero(~same)[:8]
        detail = [(tuple(o.ravel()[i] for o in operands), actual.ravel()[i],
                   expected.ravel()[i]) for i in bad]
        raise AssertionError(f"{label} differs from numpy at (operands, got, numpy): {detail}")


def _isnan(values: np.ndarray) -> np.ndarray:
    return np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, bool)


def _assert_close(name, actual, expected, operands) -> None:
    if expected.dtype.kind == "c":
        _assert_close_complex(name, actual, expected, operands)
        return
    for part in ("real", "imag") if expected.dtype.kind == "c" else ("real",):
        got, want = getattr(actual, part), getattr(expected, part)
        finite = np.isfinite(want)
        same_special = (got == want) | (np.isnan(got) & np.isnan(want))
        tolerance = 8 * np.finfo(want.dtype).eps
        close = np.isclose(got, want, rtol=tolerance, atol=tolerance * 1e-300 + 1e-300)
        ok = np.where(finite, close, same_special)
        if expected.dtype.kind == "c":
            # complex results near branch cuts and overflow differ between libraries
            ok |= ~np.isfinite(expected.real) | ~np.isfinite(expected.imag)
        if not ok.all():
            bad = np.flatnonzero(~ok)[:8]
            detail = [(tuple(o.ravel()[i] for o in operands), got.ravel()[i],
                       want.ravel()[i]) for i in bad]
            raise AssertionError(f"{name} ({part}) differs from numpy: {detail}")


def _assert_close_complex(name, actual, expected, operands) -> None:
    """Complex results: relative to the magnitude; non-finite operands are only required
    to agree on being non-finite (libraries differ on which infinity or NaN they give)."""
    finite_in = np.ones(expected.shape, bool)
    for operand in operands:
        finite_in &= np.isfinite(operand)
    finite_out = np.isfinite(expected)
    tolerance = (128 if name in ("power", "float_power") else 8) * np.finfo(expected.real.dtype).eps
    error = np.abs(actual.astype(complex) - expected.astype(complex))
    scale = np.abs(expected.astype(complex))
    close = error <= tolerance * scale + 1e-300
    ok = np.where(finite_in & finite_out, close, True)
    if not ok.all():
        bad = np.flatnonzero(~ok)[:8]
        detail = [(tuple(o.ravel()[i] for o in operands), actual.ravel()[i],
                   expected.ravel()[i]) for i in bad]
        raise AssertionError(f"{name} differs from numpy: {detail}")


def _operand_arrays(dtype: np.dtype, arity: int) -> list[np.ndarray]:
    values = edge_values(dtype)
    if arity == 1:
        return [values]
    grids = np.meshgrid(*([values] * arity), indexing="ij")
    return [grid.ravel() for grid in grids]


def _run_rows(rows: list[OpDef], operands: list[np.ndarray]) -> None:
    arity = len(operands)
    integral = all(operand.dtype.kind in "biu" for operand in operands)
    # numpy raises for negative integer exponents: those rows run below on clamped values
    together = [row for row in rows if not (integral and row.name in NON_NEGATIVE_EXPONENT)]

    def fn(*args):
        return {row.name: row.reference(*args) for row in together}

    jitted = numfuse.jit(fn)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = jitted(*operands)
    for row in rows:
        args = operands
        if row.name in NON_NEGATIVE_EXPONENT and integral:
            args = [operands[0], np.where(operands[1] < 0, 0, operands[1])]
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results[row.name] = numfuse.jit(_single(row))(*args)
        assert_matches(row.name, results[row.name], reference(row, args), args)
    assert arity == len(operands)


def _single(row: OpDef):
    def fn(a, b):
        return row.reference(a, b)
    return fn


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arity", [1, 2, 3])
def test_every_row_matches_numpy(dtype: np.dtype, arity: int) -> None:
    rows = [row for row in ROWS
            if row.arity == arity and numpy_supports(row, (dtype,) * arity)]
    if not rows:
        pytest.skip(f"no {arity}-ary op supports {dtype}")
    _run_rows(rows, _operand_arrays(dtype, arity))


MIXED = [("int8", "uint8"), ("int64", "uint64"), ("uint64", "int64"), ("int16", "float32"),
         ("uint32", "int32"), ("float32", "float64"), ("bool", "int8"), ("int32", "float64"),
         ("float32", "complex64"), ("int64", "complex128"), ("float16", "float32"),
         ("int8", "float16"), ("float16", "complex64")]


@pytest.mark.parametrize("pair", MIXED, ids="-".join)
def test_binary_rows_on_mixed_dtypes(pair: tuple[str, str]) -> None:
    left, right = (np.dtype(name) for name in pair)
    rows = [row for row in ROWS if row.arity == 2 and numpy_supports(row, (left, right))]
    a, b = edge_values(left), edge_values(right)
    grid_a, grid_b = (grid.ravel() for grid in np.meshgrid(a, b, indexing="ij"))
    _run_rows(rows, [grid_a, grid_b])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64", "float32", "float64",
                                   "complex64"])
@pytest.mark.parametrize("scalar", [3, -1, 2.5, 300, 1j, True, 2**63, -(2**40)])
def test_weak_python_scalars_follow_nep50(dtype: str, scalar: object) -> None:
    values = edge_values(np.dtype(dtype))

    def fn(x):
        return x + scalar, x * scalar, x < scalar, x == scalar, np.maximum(x, scalar)

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = fn(values)
        except (OverflowError, TypeError) as error:
            with pytest.raises(type(error)):
                numfuse.jit(fn)(values)
            return
        actual = numfuse.jit(fn)(values)
    for name, got, want in zip(["add", "multiply", "less", "equal", "maximum"], actual,
                               expected, strict=True):
        assert_matches(name, got, want, [values])


@pytest.mark.parametrize("source", ["float64", "float32", "int64", "int8", "uint16", "bool",
                                    "complex128"])
def test_astype_matches_numpy(source: str) -> None:
    values = edge_values(np.dtype(source))
    targets = [d for d in DTYPES]

    def fn(x):
        return [x.astype(target) for target in targets]

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        actual = numfuse.jit(fn)(values)
        expected = fn(values)
    for target, got, want in zip(targets, actual, expected, strict=True):
        if np.dtype(source).kind in "fc" and target.kind in "iu":
            # numpy's out-of-range float->int casts are undefined in C; compare in range
            info = np.iinfo(target)
            real = values.real if values.dtype.kind == "c" else values
            in_range = np.isfinite(real) & (real >= info.min) & (real <= info.max)
            got, want = got[in_range], want[in_range]
        assert_matches(f"astype {source}->{target}", got, want, [values])


def test_an_integer_cast_to_float_and_back_to_a_narrower_integer_is_numpys() -> None:
    """Found by a conformance hunt: LLVM folded the two casts into one integer cast, where
    numpy's float cast of a value beyond the target's range gives its x86 result and
    "invalid value"."""
    assert_like_numpy(lambda x: x.astype(np.float64).astype(np.int32),
                      np.array([2**62 + 1, 5, -7], np.int64))
    assert_like_numpy(lambda x: x.astype(np.float64).astype(np.int8),
                      np.array([2**64 - 1, 3], np.uint64))
    assert_like_numpy(lambda x: x.astype(np.float32).astype(np.int64),
                      np.array([2**24 + 1, -3], np.int64))


def test_real_imag_conj() -> None:
    z = edge_values(np.dtype("complex128"))
    x = edge_values(np.dtype("float32"))

    def fn(z, x):
        return z.real, z.imag, np.real(x), np.imag(x), z.conj(), np.abs(z)

    actual = numfuse.jit(fn)(z, x)
    expected = fn(z, x)
    for got, want in zip(actual, expected, strict=True):
        assert_matches("real/imag", got, want, [z])


def test_divmod_returns_two_values() -> None:
    a = np.repeat(edge_values(np.dtype("float64")), 24)
    b = np.tile(edge_values(np.dtype("float64")), 24)
    with np.errstate(all="ignore"):
        quotient, remainder = numfuse.jit(lambda a, b: divmod(a, b))(a, b)
        expected_q, expected_r = np.divmod(a, b)
    assert_matches("divmod quotient", quotient, expected_q, [a, b])
    assert_matches("divmod remainder", remainder, expected_r, [a, b])


def test_float16_runs_as_numpy_calls_around_fused_kernels() -> None:
    """numba has no CPU float16: work touching float16 (``sin`` of int8 computes in
    float16) is numpy's own, while the float32 work after it still fuses."""
    small = np.arange(-3, 4, dtype=np.int8)
    fn = numfuse.jit(lambda x: (np.sin(x), (np.sin(x).astype(np.float32) * 2 + 1) ** 2))
    got, want = fn(small), (np.sin(small), (np.sin(small).astype(np.float32) * 2 + 1) ** 2)
    for actual, expected in zip(got, want, strict=True):
        assert actual.dtype == expected.dtype and np.array_equal(actual, expected)
    plan = str(fn.explain(small))
    assert "1 fused kernel" in plan and "involves float16" in plan


def test_float16_work_has_the_sizes_of_its_operands() -> None:
    """float16 work runs as numpy calls whose sizes are the broadcast of their operands',
    for example shapes (``concatenate``) and for sizes that depend on the values (both
    found by fuzzing with float16)."""
    half = np.zeros((2, 2), np.float16)
    check(lambda a, b: np.concatenate([np.abs(a), b]), half, half + 1)
    fn = numfuse.jit(lambda x, y: (x[x > 0].astype(np.float16) * 2).astype(np.float64)
                     + y[y > 0])
    for x, y in (([1.0, -1, 2, 3], [1.0, 2, -3, 4]), ([1.0, 2, -1], [-1.0, 5, 6])):
        x, y = np.array(x), np.array(y)
        want = (x[x > 0].astype(np.float16) * 2).astype(np.float64) + y[y > 0]
        assert np.array_equal(fn(x, y), want)


def test_complex_power_error_grows_with_the_exponent_like_numpys() -> None:
    """``(0.5+0j) ** -625``: where numpy's own power is not found (``numpy_loops``),
    numfuse's helper takes exp(b log a) as numpy does but rounds the exponent 433
    differently, so they agree within about |b log a| ulp (found by the fuzzer at 258
    ulp), not within the few ulp of other operations.  (With numpy's function, exactly.)"""
    base = np.array([0.5 + 0j, 0.5 + 0j, 1.5 - 0.25j], np.complex64)
    exponent = np.array([-625, 3, -90])
    got = numfuse.jit(lambda a, b: a ** b)(base, exponent)
    want = base ** exponent
    growth = np.abs(exponent * np.log(base.astype(np.complex128)))
    error = np.abs(got - want) / np.abs(want) / np.finfo(np.float64).eps
    assert got.dtype == want.dtype and (error <= np.maximum(128, 4 * growth)).all(), error


def test_power_operator_takes_numpy_fast_paths() -> None:
    x = np.array([-0.0, -np.inf, 2.0, 4.0, np.nan])
    with np.errstate(all="ignore"):
        actual = numfuse.jit(lambda x: (x ** 0.5, x ** 2, x ** -1, np.power(x, 0.5)))(x)
        expected = (x ** 0.5, x ** 2, x ** -1, np.power(x, 0.5))
    for got, want in zip(actual, expected, strict=True):
        assert_matches("power", got, want, [x])


@pytest.mark.parametrize("base, exponent", [
    (np.array([-4 + 0j, -1 + 0j, 2 + 0j]), 0.5),  # sqrt: 2j exactly, not 1.2e-16+2j
    (np.array([2 + 0j, -np.inf + 0j]), -1),  # reciprocal
    (np.array([1 + 1j, -0.0 + 0j]), 2),  # square
    (np.array([1 + 1j, 2 - 1j]), 3),
    (np.array([1 + 1j], np.complex64), 0.5),
    (np.array([True, False]), 2),  # square keeps int8
    (np.array([True, False]), 3),
])
def test_power_operator_by_a_number_argument_takes_numpys_fast_paths(base, exponent):
    """numpy's ``**`` takes sqrt, reciprocal or square by the Python number's value: for a
    complex or bool array the exponent argument is then static."""
    jitted = numfuse.jit(lambda z, p: z ** p)
    with np.errstate(all="ignore"):
        assert_like_numpy(lambda z, p: z ** p, base, exponent, jitted=jitted)
    assert jitted.auto_static == {1}


def test_power_by_a_constant_half_of_any_float_type_takes_the_square_root() -> None:
    """numpy's float power loop takes sqrt for a stride-0 exponent of 0.5: a numpy float
    scalar or a 0-d array as much as a Python float (-0.0 stays -0.0, -inf is NaN)."""
    x = np.array([-0.0, -np.inf, 2.0, 4.0, -1.0, np.nan] * 3)
    for fn in (lambda x: x ** np.float64(0.5), lambda x: np.power(x, np.array(0.5)),
               lambda x: np.power(x, np.float32(0.5)),
               lambda x: np.power(x.astype(np.float32), np.float32(0.5))):
        assert_like_numpy(fn, x)


@pytest.mark.parametrize("value", [-np.inf, -0.0, -1.0, 4.0, np.nan])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_numpy_scalar_to_the_power_one_half_is_numpys_scalar_pow(dtype, value):
    """``x.max() ** 0.5`` is numpy's scalar math, ``pow`` (-inf gives inf quietly, -0.0
    gives 0.0); ``np.power`` of the scalar is its loop, the square root."""
    x = np.array([value], dtype)
    assert_like_numpy(lambda x: x.max() ** 0.5, x)
    assert_like_numpy(lambda x: x[0] ** 0.5, x)
    assert_like_numpy(lambda x: np.power(x.max(), 0.5), x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_of_a_number_whose_square_overflows_to_infinity_warns_like_numpy(dtype):
    """numpy's SIMD power loop squares its base on the way to ``x ** inf`` and raises
    "overflow" for a finite base whose square overflows (the C library's pow does not)."""
    big = np.sqrt(np.finfo(dtype).max, dtype=dtype)
    x = np.array([2.0, big * 0.999, big * 1.001, -big * 2, np.finfo(dtype).max, 0.5,
                  np.inf, np.nan, 0.0], dtype)
    for exponent in (np.inf, -np.inf, 2.0):
        assert_like_numpy(lambda x, e=exponent: np.power(x, dtype(e)), x)
        for size in (x.size, 40):  # one exponent per element: only its +inf lanes warn
            exponents = np.resize(np.array([exponent, 1.0, -np.inf], dtype), size)
            assert_like_numpy(lambda x, y: np.power(x, y), np.resize(x, size), exponents)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_division_by_a_nan_warns_invalid_like_numpy(dtype):
    """numpy's complex division tests |b.real| >= |b.imag|, an ordered comparison that
    signals "invalid value" for a NaN part of the divisor."""
    values = [complex(np.nan, 0), complex(0, np.nan), complex(np.nan, np.nan), 1 + 0j,
              complex(np.inf, 1), 0j, 2 - 3j]
    numerators = np.array([a for a in values for _ in values], dtype)
    divisors = np.array([b for _ in values for b in values], dtype)
    for size in (1, numerators.size):
        assert_like_numpy(lambda x, y: x / y, numerators[:size], divisors[:size])
    assert_like_numpy(lambda x: x / np.nan, numerators)
    assert_like_numpy(lambda x, y: x / y, numerators, np.full(numerators.size, np.nan))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_clip_of_nan_parts_is_quiet_like_numpy(dtype):
    z = np.array([complex(np.nan, 0), complex(0.5, np.nan), 2 + 1j, -1 - 1j, 0.5 + 0.5j,
                  complex(np.inf, 0), complex(np.nan, np.nan)] * 3, dtype)
    assert_like_numpy(lambda x: np.clip(x, 0, 1), z)
    assert_like_numpy(lambda x: np.clip(x, 0.5 + 0.5j, 1 + 2j), z)
    assert_like_numpy(lambda x: np.clip(x, x[::-1], 1 + 2j), z)


def _layouts(values: np.ndarray, arity: int) -> dict[str, list[np.ndarray]]:
    """The same edge values presented in every memory layout and broadcast pattern."""
    size = len(values)
    square = np.resize(values, (size, size))
    return {
        "0-d": [np.asarray(values[index]) for index in range(arity)],
        "empty": [values[:0].reshape(0, 1) for _ in range(arity)],
        "strided-2d": [np.resize(values, (size, 2 * size))[:, ::2] for _ in range(arity)],
        "fortran": [np.asfortranarray(square), np.asfortranarray(square.T)][:arity],
        "negative-stride": [values[::-1], values][:arity],
        "broadcast": [values.reshape(-1, 1), values.reshape(1, -1)][:arity],
    }


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("arity", [1, 2])
def test_every_row_in_every_layout(dtype: np.dtype, arity: int) -> None:
    rows = [row for row in ROWS
            if row.arity == arity and numpy_supports(row, (dtype,) * arity)
            and not (row.name in NON_NEGATIVE_EXPONENT and dtype.kind in "biu")]
    if not rows:
        pytest.skip(f"no {arity}-ary op supports {dtype}")

    def fn(*args):
        return {row.name: row.reference(*args) for row in rows}

    jitted = numfuse.jit(fn)
    for layout, operands in _layouts(edge_values(dtype), arity).items():
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = jitted(*operands)
        for row in rows:
            got, want = actual[row.name], reference(row, operands)
            assert type(got) is type(want), f"{layout} {row.name}: {type(got)} != {type(want)}"
            assert_matches(row.name, np.asarray(got), np.asarray(want),
                           [np.broadcast_to(o, np.shape(want)) for o in operands], layout)


# ------------------------------------------------------------------ regressions


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8"])
def test_integer_power_with_a_negative_exponent_in_the_data_raises_like_numpy(dtype):
    base = np.array([2, 3, 4], dtype)
    exponent = np.array([1, -1, 2], "int8")
    with pytest.raises(ValueError, match="Integers to negative integer powers") as numpy_error:
        np.power(base, exponent)
    jitted = numfuse.jit(lambda x, y: (x ** y, x + y))
    with pytest.raises(ValueError) as excinfo:
        jitted(base, exponent)
    assert str(excinfo.value) == str(numpy_error.value)
    # the same compiled kernel still works, and the check does not leak into the next call
    assert_matches("power", jitted(base, np.abs(exponent))[0], base ** np.abs(exponent), [base])


@pytest.mark.parametrize("exponent", [-1, np.int8(-2)])
def test_a_constant_negative_integer_power_raises_only_when_an_element_meets_it(exponent):
    """numpy returns an empty array for ``empty ** -1``; the check was made at trace time
    on a sample element, so it raised for every array."""
    jitted = numfuse.jit(lambda x: (x + 1) ** exponent)
    for dtype in ("int8", "int16", "int64"):
        empty = np.zeros(0, dtype)
        assert_same(jitted(empty), (empty + 1) ** exponent)
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            np.power(np.ones(2, dtype), exponent)
        with pytest.raises(ValueError, match="Integers to negative integer powers"):
            jitted(np.ones(2, dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_divide_and_remainder_of_nan_raise_no_flag(dtype):
    """Found by fuzzing: ``x // nan`` and ``x % nan`` warned "invalid value"; numpy's
    ``npy_divmod`` tests with quiet comparisons."""
    a = np.array([0.0, -0.0, 1.0, -2.5, np.nan, 3.0, 7.0, 1e30] * 3, dtype)
    b = np.full_like(a, np.nan)
    with np.errstate(all="raise"):
        for ufunc in (np.floor_divide, np.remainder, np.divmod):
            jitted = numfuse.jit(_binary(ufunc))
            assert_same(jitted(a, b), ufunc(a, b))
            assert_same(jitted(b, a), ufunc(b, a))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_divide_of_a_large_quotient_rounds_in_the_operands_dtype(dtype):
    """Found by a conformance hunt: float32 quotients past 2**24 took another integer
    when the steps after the division ran in float64 (numpy's run in float32)."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(20_000) * 10.0 ** rng.integers(-8, 8, 20_000)).astype(dtype)
    b = (rng.standard_normal(20_000) * 10.0 ** rng.integers(-8, 8, 20_000)).astype(dtype)
    a[:2], b[:2] = np.array([-4.032229, 2.0], dtype), np.array([-8.649529e-07, 1e-7], dtype)
    for ufunc in (np.floor_divide, np.remainder, np.divmod):
        assert_same(numfuse.jit(_binary(ufunc))(a, b), ufunc(a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_of_a_constant_zero_by_nan_is_nan(dtype):
    """Found by a conformance hunt: LLVM folded fmod(0.0, y) to 0.0, NaN y included."""
    y = np.array([np.nan, -np.nan, 2.0, -3.0, np.inf], dtype)
    zero = np.dtype(dtype).type(0.0)
    for fn in (lambda y: zero % y, lambda y: np.divmod(-zero, y), lambda y: 0.0 % y):
        with np.errstate(all="ignore"):
            assert_same(numfuse.jit(fn)(y), fn(y))


def _binary(ufunc):
    return lambda x, y: ufunc(x, y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sign_and_heaviside_of_nan_are_quiet_like_numpy(dtype):
    x = np.array([np.nan, 1.0, -1.0, 0.0, -0.0, np.inf, -np.inf] * 3, dtype)
    with np.errstate(all="raise"):
        assert_same(numfuse.jit(lambda x: np.sign(x))(x), np.sign(x))
        assert_same(numfuse.jit(lambda x: np.heaviside(x, 0.5))(x), np.heaviside(x, 0.5))



@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_to_uint64_cast_of_values_in_range_is_quiet(dtype):
    """Found by fuzzing: casting -2.5 or 2**63 to uint64 warned "invalid value" (LLVM
    computed a signed and an unsigned conversion and kept one); numpy is quiet."""
    values = np.array([-2.5, 0.0, -0.0, 1.5, 2.0**63, 2.0**63 + 2**40, 1e19, -1e18, 12345.7,
                       -9.2e18, 4294967296.5, -4294967297.0] * 2, dtype)
    with np.errstate(all="raise"):
        assert_same(numfuse.jit(lambda x: x.astype(np.uint64))(values),
                    values.astype(np.uint64))


def test_values_computed_from_a_wrapped_signed_integer_match_numpy():
    """Found by fuzzing: ``np.log(x + x)`` at int64's minimum (x + x wraps to 0 in numpy,
    log gives -inf) returned 0.0: numba's signed arithmetic is no-signed-wrap, so signed
    + - * negative abs square now run in uint64."""
    x = np.full(5, np.iinfo(np.int64).min)
    with np.errstate(all="ignore"):
        assert_same(numfuse.jit(lambda x: np.log(x + x))(x), np.log(x + x))
        assert_same(numfuse.jit(lambda x: np.abs(x) < 0)(x), np.abs(x) < 0)
        assert_same(numfuse.jit(lambda x: (-x) > 0)(x), (-x) > 0)
    for dtype in ("int8", "int16", "int32", "int64"):
        info = np.iinfo(dtype)
        a = np.array([info.min, info.max, -1, 0, 1, 7, 99], dtype=dtype)
        b = a[::-1].copy()

        def wrapping(a, b):
            return a + b, a - b, a * b, -a, np.abs(a), np.square(a), (a * b) // 3

        assert_same(numfuse.jit(wrapping)(a, b), wrapping(a, b))


def test_spacing_of_float32_next_to_float64_work_compiles():
    """A float32 ``spacing`` in a kernel that also reads a float64 value (found by the
    fuzzer: its NaN branch returned a float64)."""
    check(lambda a, b: (a % b, np.spacing(b), np.spacing(b * np.float32(np.inf))),
          2.5, np.float32(0.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ties_of_signed_zeros_return_the_second_operand(dtype):
    """maximum/minimum of +0.0 and -0.0 give the second operand as numpy's loops do; so do
    fmax/fmin, as numpy's SIMD loop does for 8 or more elements (README, limits; found by
    the fuzzer)."""
    negative, positive = np.full(16, -0.0, dtype), np.zeros(16, dtype)
    for fn in (np.maximum, np.minimum, np.fmax, np.fmin):
        check(lambda a, b, fn=fn: (fn(a, b), fn(b, a)), negative, positive)


MIXED_WIDTHS = {
    "exp2": lambda a, c: (np.exp2(c), np.exp2(a), np.less(a, np.exp2(c))),
    "log2": lambda a, c: (np.log2(c), np.log2(a), np.less(a, np.log2(c))),
    "logaddexp2-exp2": lambda a, c: (np.logaddexp2(c, np.abs(c)), np.exp2(a)),
}


@pytest.mark.parametrize("name", list(MIXED_WIDTHS))
def test_float32_and_float64_of_one_function_in_one_kernel(name):
    """numba lowered float32 and float64 ``exp2``/``log2`` in one kernel to a mistyped
    call (found by the fuzzer, also through ``logaddexp2``'s use of ``exp2``): both compute
    in float64, float32 results then rounded."""
    wide, narrow = np.linspace(0.5, 2.0, 9), np.linspace(0.5, 2.0, 9, dtype=np.float32)
    check(MIXED_WIDTHS[name], wide, narrow, rtol=5e-7)


# ------------------------------------------------------------------ the rows' facts


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_row_has_every_fact(name: str) -> None:
    row = OPS[name]
    assert row.category in CATEGORIES and isinstance(row.exactness, Exactness)
    assert isinstance(row.cost, int) and row.cost >= 1
    assert row.arity in (1, 2, 3) and row.code
    if row.transcendental:
        assert row.cost >= 20 and row.exactness is Exactness.ULPS
    assert row.vector_math == (vector_math.ENABLED and name in vector_math.FUNCTIONS)
    if row.comparison:
        _, out = row.loop_dtypes((np.dtype(np.float64),) * row.arity)
        assert out == np.dtype(bool)


def test_the_comparisons_are_the_six_orderings_and_equalities() -> None:
    assert {name for name, row in OPS.items() if row.category is COMPARISON} == {
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def test_every_vectorisable_function_has_a_row() -> None:
    assert set(vector_math.FUNCTIONS) <= set(OPS)


# ------------------------------------------------------------------ commutativity


def _nan_payloads(dtype: np.dtype) -> np.ndarray:
    """Quiet NaNs with different payloads and signs (complex: in either part)."""
    if dtype.kind not in "fc":
        return np.array([], dtype)
    real = np.dtype(f"f{dtype.itemsize // (2 if dtype.kind == 'c' else 1)}")
    info = np.finfo(real)
    exponent, quiet = ((1 << info.nexp) - 1) << info.nmant, 1 << (info.nmant - 1)
    sign = 1 << (real.itemsize * 8 - 1)
    raw = np.array([exponent | quiet | 1, exponent | quiet | 2, sign | exponent | quiet | 3,
                    exponent | quiet], f"u{real.itemsize}").view(real)
    if dtype.kind == "f":
        return raw
    return np.array([complex(a, b) for a in raw for b in (raw[0], 1.0)], dtype)


def _every_pair(dtype: np.dtype, row: OpDef) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate([edge_values(dtype), _nan_payloads(dtype)]).astype(dtype)
    if row.name in NON_NEGATIVE_EXPONENT and dtype.kind == "i":
        values = values[values >= 0]
    first, second = zip(*itertools.product(values, values), strict=True)
    return np.array(first, dtype), np.array(second, dtype)


@pytest.mark.parametrize("name", sorted(name for name, row in OPS.items()
                                        if row.arity == 2 and isinstance(row.reference,
                                                                         np.ufunc)))
def test_a_row_is_commutative_exactly_for_the_loops_where_numpy_gives_the_same_bits(name):
    """``commutes`` (what CSE merges ``f(a, b)`` and ``f(b, a)`` on) is declared for a loop
    dtype exactly when numpy's ``f(a, b)`` and ``f(b, a)`` agree bit for bit on every pair
    of edge values and NaNs of different payloads: float ``a + b`` keeps the first NaN's
    payload, ``maximum(0.0, -0.0)`` returns the second zero, so neither is declared for
    floats; comparisons and logical operations give bools, the same either way."""
    row = OPS[name]
    loops = {row.loop_dtypes((dtype, dtype))[0][0] for dtype in DTYPES
             if numpy_supports(row, (dtype, dtype))}
    assert loops
    for dtype in sorted(loops, key=str):
        first, second = _every_pair(dtype, row)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            forward, backward = row.reference(first, second), row.reference(second, first)
        identical = forward.dtype == backward.dtype and forward.tobytes() == backward.tobytes()
        assert row.commutes((dtype, dtype)) == identical, (name, dtype, identical)


def test_commutativity_needs_one_loop_dtype_and_two_operands():
    assert OPS["add"].commutes((np.dtype("int64"),) * 2)
    assert not OPS["add"].commutes((np.dtype("int64"), np.dtype("uint64")))
    assert not OPS["add"].commutes((np.dtype("float64"),) * 2)
    assert OPS["equal"].commutes((np.dtype("complex128"),) * 2)
    assert not OPS["negative"].commutes((np.dtype("int64"),))
    assert not OPS["subtract"].commutes((np.dtype("int64"),) * 2)
