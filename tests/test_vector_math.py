"""The vectorisable functions of numfuse.vector_math (its FUNCTIONS: exp, log, expm1,
log1p, tanh, sin, cos, tan, arctan, arcsin, arccos, cbrt, exp2, log2, log10, sinh, cosh,
arcsinh, arccosh, arctanh; and arctan2 and hypot of two arguments), compiled into kernels.

Each function is compared with numpy over wide ranges (both signs, subnormals, values past
the overflow and underflow thresholds) and on the special values, where the result must be
exactly numpy's (NaN, infinities, signed zeros); its floating-point warnings must be the
ones numpy gives.  Accuracy is measured in ulps of the result dtype, against numpy and
against a more precise reference (float64 for float32, long double for float64).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from conftest import assert_like_numpy

import numfuse
from numfuse import inspection, vector_math
from numfuse.backend import store

FUNCTIONS = vector_math.FUNCTIONS
DTYPES = (np.float32, np.float64)
# Largest error allowed against numpy and against the precise reference.  numpy's own
# float32 loops are up to 2.2 ulp from the exact value (exp, log: SIMD polynomials), its
# float64 ones within about 1 ulp.
ULP_VS_NUMPY = {np.float32: 3.0, np.float64: 4.0}
ULP_VS_EXACT = {np.float32: 1.5, np.float64: 3.0}
PRECISE_LONG_DOUBLE = np.finfo(np.longdouble).nmant > np.finfo(np.float64).nmant

pytestmark = pytest.mark.skipif(not vector_math.ENABLED,
                                reason="NUMFUSE_VECTOR_MATH=0: kernels call libm")


def special_values(dtype: type) -> np.ndarray:
    info = np.finfo(dtype)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5,
              info.smallest_subnormal, -info.smallest_subnormal, info.smallest_normal,
              -info.smallest_normal, info.max, -info.max, info.eps, -info.eps,
              1e-30, -1e-30, 1e30, -1e30, 1000.0, -1000.0, -1.0 + info.eps, -1.0 - info.eps * 2]
    return np.array(values, dtype=dtype)


def wide_values(function: str, dtype: type) -> np.ndarray:
    """Random arguments covering every region of ``function``'s domain for ``dtype``."""
    rng = np.random.default_rng(sum(map(ord, function)) + np.dtype(dtype).itemsize)
    info = np.finfo(dtype)
    low, high = np.log10(float(info.smallest_subnormal)), np.log10(float(info.max))
    magnitudes = 10.0 ** rng.uniform(low, high, 20_000)
    signs = rng.choice([-1.0, 1.0], magnitudes.size)
    limit = 800.0 if dtype == np.float64 else 110.0  # past overflow and underflow
    parts = [signs * magnitudes, rng.uniform(-limit, limit, 20_000),
             rng.uniform(-3.0, 3.0, 20_000)]
    if function == "log1p":
        parts.append(-1.0 + 10.0 ** rng.uniform(-15, 0, 5_000))
    if function in ("arcsin", "arccos"):  # the domain [-1, 1], dense near its ends and 0
        tiny = 10.0 ** rng.uniform(low, 0.0, 20_000)
        parts += [rng.uniform(-1.0, 1.0, 20_000), signs * (1.0 - tiny),
                  signs * tiny, rng.uniform(0.45, 0.55, 5_000), rng.uniform(-0.55, -0.45, 5_000)]
    if function == "tan":  # near multiples of pi/2, where tan is large or small
        multiples = rng.integers(-2**20, 2**20, 20_000) * (np.pi / 2)
        parts.append(multiples * (1.0 + rng.uniform(-1e-9, 1e-9, 20_000)))
    if function == "arctan":  # around the reduction's boundaries 7/16 ... 39/16
        parts.append(rng.uniform(-2.6, 2.6, 20_000))
    parts.extend(_more_values(function, dtype, rng))
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(dtype)


def _more_values(function: str, dtype: type, rng: np.random.Generator) -> list[np.ndarray]:
    """The regions of exp2, sinh, cosh, arccosh and arctanh the wide values miss."""
    wide = dtype == np.float64
    if function == "exp2":  # past overflow and underflow, integers
        limit = 1100.0 if wide else 160.0
        return [rng.uniform(-limit, limit, 20_000), np.arange(-limit, limit)]
    if function in ("sinh", "cosh"):  # the moderate range, around the overflow threshold
        edge = 710.0 if wide else 89.0
        return [rng.uniform(-25.0, 25.0, 20_000), rng.uniform(edge - 5.0, edge + 2.0, 5_000),
                -rng.uniform(edge - 5.0, edge + 2.0, 5_000)]
    if function == "arccosh":  # near 1, and everything above it
        return [1.0 + 10.0 ** rng.uniform(-16, 1, 20_000),
                10.0 ** rng.uniform(0, 308 if wide else 38, 20_000)]
    if function == "arctanh":  # (-1, 1), near its ends
        ends = 1.0 - 10.0 ** rng.uniform(-16, 0, 10_000)
        return [rng.uniform(-1.0, 1.0, 20_000), ends, -ends]
    return []


@pytest.fixture(scope="module")
def kernels() -> dict[str, numfuse.Jitted]:
    return {name: numfuse.jit(_calling(getattr(np, name))) for name in FUNCTIONS}


def _calling(ufunc: np.ufunc):  # type: ignore[no-untyped-def]
    def function(x):  # type: ignore[no-untyped-def]
        return ufunc(x)
    return function


def ulps(result: np.ndarray, reference: np.ndarray, dtype: type) -> np.ndarray:
    """|result - reference| in units of the last place of ``reference`` rounded to dtype."""
    both = np.isfinite(result) & np.isfinite(reference)
    spacing = np.spacing(np.abs(reference[both].astype(dtype))).astype(np.float64)
    difference = np.abs(result[both].astype(np.float64) - reference[both].astype(np.float64))
    return difference / spacing  # type: ignore[no-any-return]


def correctly_rounded(function: str, dtype: type, *args: np.ndarray) -> np.ndarray | None:
    """numpy's ``function`` of ``args`` computed in a wider type (float64 for float32, long
    double for float64) and rounded to ``dtype``: the correctly rounded value but for rare
    double roundings; None for float64 where no long double is wider than float64."""
    if dtype == np.float64 and not PRECISE_LONG_DOUBLE:
        return None
    wider = np.float64 if dtype == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        return getattr(np, function)(*(arg.astype(wider) for arg in args)).astype(dtype)


def assert_same_classes(result: np.ndarray, expected: np.ndarray, x: np.ndarray,
                        exact: np.ndarray | None = None) -> None:
    """NaN, infinities and signed zeros exactly where numpy has them.  Where numpy's loop
    flushes to zero a result whose correctly rounded value ``exact`` is not zero (numpy's
    AVX-512 float32 exp2 just above -150), the result is within ULP_VS_EXACT of ``exact``
    and of its sign instead."""
    for test in (np.isnan, np.isposinf, np.isneginf):
        mismatch = test(result) != test(expected)
        assert not mismatch.any(), f"{test.__name__} differs at x = {x[mismatch][:5]}"
    zeros = expected == 0
    if exact is not None:
        flushed = zeros & (exact != 0)
        zeros &= ~flushed
        dtype = result.dtype.type
        assert ulps(result[flushed], exact[flushed], dtype).max(initial=0.0) <= ULP_VS_EXACT[dtype]
        assert (np.signbit(result[flushed]) == np.signbit(exact[flushed])).all()
    assert np.array_equal(result[zeros], expected[zeros])
    signs = np.signbit(result[zeros]) != np.signbit(expected[zeros])
    assert not signs.any(), f"sign of zero differs at x = {x[zeros][signs]}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_special_values_are_numpys_exactly(kernels, function: str, dtype: type) -> None:
    x = special_values(dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(x)
        result = kernels[function](x)
    assert result.dtype == expected.dtype
    assert_same_classes(result, expected, x)
    exact = ~np.isfinite(x) | (x == 0)
    np.testing.assert_array_equal(result[exact], expected[exact])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_wide_ranges_are_within_a_few_ulp_of_numpy(kernels, function: str, dtype: type
                                                   ) -> None:
    x = wide_values(function, dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(x)
        result = kernels[function](x)
    assert result.dtype == expected.dtype
    assert_same_classes(result, expected, x, correctly_rounded(function, dtype, x))
    errors = ulps(result, expected, dtype)
    worst = x[np.isfinite(result) & np.isfinite(expected)][np.argmax(errors)]
    assert errors.max() <= ULP_VS_NUMPY[dtype], f"{errors.max()} ulp from numpy at x = {worst!r}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_wide_ranges_are_accurate(kernels, function: str, dtype: type) -> None:
    if dtype == np.float64 and not PRECISE_LONG_DOUBLE:
        pytest.skip("no long double wider than float64 for a reference")
    x = wide_values(function, dtype)
    wider = np.float64 if dtype == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        exact = getattr(np, function)(x.astype(wider))
        result = kernels[function](x)
        in_range = np.abs(exact) <= np.finfo(dtype).max
    errors = ulps(result[in_range], exact[in_range], dtype)
    assert errors.max() <= ULP_VS_EXACT[dtype]


# Arguments and the floating-point errors numpy reports for them (the same for both dtypes).
FLAG_CASES = [
    ("exp", [1000.0], "overflow"),
    ("exp", [-1000.0], "underflow"),
    ("exp", [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0], None),
    ("expm1", [1000.0], "overflow"),
    ("expm1", [np.nan, np.inf, -np.inf, -1000.0, -0.0, 1e-30], None),
    ("log", [-1.0], "invalid"),
    ("log", [-np.inf], "invalid"),
    ("log", [0.0], "divide by zero"),
    ("log", [-0.0], "divide by zero"),
    ("log", [np.nan, np.inf, 1.0, 1e-30, 1e30], None),
    ("log1p", [-2.0], "invalid"),
    ("log1p", [-1.0], "divide by zero"),
    ("log1p", [np.nan, np.inf, -0.0, 1e-30, 1e30, -0.5], None),
    ("tanh", [np.nan, np.inf, -np.inf, -0.0, 1e-30, 30.0, -30.0], None),
    ("sin", [np.inf], "invalid"),
    ("sin", [-np.inf], "invalid"),
    # (numpy's float32 sin and cos of tiny arguments raise "underflow", numfuse's do not)
    ("sin", [np.nan, -0.0, 1e-3, 1e30, -1e30, 1e6, 3.0, 1e5, -1.00001e5, 1.5707964,
             4.7123890], None),
    ("cos", [np.inf], "invalid"),
    ("cos", [-np.inf], "invalid"),
    ("cos", [np.nan, -0.0, 1e-3, 1e30, -1e30, 1e6, 3.0, 1e5, -1.00001e5, 1.5707964,
             4.7123890], None),
]
FLAG_CASES += [
    ("tan", [np.inf], "invalid"),
    ("tan", [-np.inf], "invalid"),
    ("tan", [np.nan, -0.0, 1e-3, 1e30, -1e30, 1e6, 3.0, 1.5707963267948966, 1e5,
             -1.00001e5, 1.5707964, 4.7123890], None),
    ("arctan", [np.nan, np.inf, -np.inf, -0.0, 1e-30, 1e30, -3.0, 0.5, 1e-3], None),
    ("arcsin", [1.0000001], "invalid"),
    ("arcsin", [-np.inf], "invalid"),
    ("arcsin", [np.nan, -0.0, 1e-30, -1.0, 1.0, 0.5, 0.9999999], None),
    ("arccos", [-1.0000001], "invalid"),
    ("arccos", [np.inf], "invalid"),
    ("arccos", [np.nan, -0.0, 1e-30, -1.0, 1.0, -0.5, 0.9999999], None),
]

FLAG_CASES += [
    ("cbrt", [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e30, 27.0, -8.0, 5e-324], None),
]


# exp2, log2, log10, sinh, cosh and the inverse hyperbolic functions.
FLAG_CASES += [
    ("exp2", [2000.0], "overflow"),
    ("exp2", [-2000.0], "underflow"),
    ("exp2", [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -100.0, 10.5, -126.0], None),
    ("log2", [-1.0], "invalid"),
    ("log2", [-np.inf], "invalid"),
    ("log2", [0.0], "divide by zero"),
    ("log2", [-0.0, 2.0], "divide by zero"),
    ("log2", [np.nan, np.inf, 1.0, 1e-30, 1e30, 1024.0], None),
    ("log10", [-1.0], "invalid"),
    ("log10", [-np.inf], "invalid"),
    ("log10", [0.0], "divide by zero"),
    ("log10", [-0.0, 10.0], "divide by zero"),
    ("log10", [np.nan, np.inf, 1.0, 1e-30, 1e30, 1000.0], None),
    ("sinh", [1000.0], "overflow"),
    ("sinh", [-1000.0, 1.0], "overflow"),
    ("sinh", [np.nan, np.inf, -np.inf, -0.0, 1e-30, 3.0, -3.0, 30.0, -80.0], None),
    ("cosh", [1000.0], "overflow"),
    ("cosh", [-1000.0, 0.5], "overflow"),
    ("cosh", [np.nan, np.inf, -np.inf, -0.0, 1e-30, 3.0, -3.0, 30.0, -80.0], None),
    ("arcsinh", [np.nan, np.inf, -np.inf, -0.0, 1e-30, 1e30, -1e30, 3.0, -0.5], None),
    ("arccosh", [0.5], "invalid"),
    ("arccosh", [-np.inf], "invalid"),
    ("arccosh", [0.0, 2.0], "invalid"),
    ("arccosh", [np.nan, np.inf, 1.0, 2.0, 1e30], None),
    ("arctanh", [2.0], "invalid"),
    ("arctanh", [-np.inf], "invalid"),
    ("arctanh", [np.inf, 0.5], "invalid"),
    ("arctanh", [1.0], "divide by zero"),
    ("arctanh", [-1.0, 0.25], "divide by zero"),
    ("arctanh", [np.nan, -0.0, 0.5, -0.999, 1e-30, 0.75], None),
]


def _floating_point_error(call, x: np.ndarray) -> str | None:  # type: ignore[no-untyped-def]
    with np.errstate(all="raise"):
        try:
            call(x)
        except FloatingPointError as error:
            return str(error).split(" encountered")[0].replace(" value", "")
    return None


def _known_underflow_difference(expected: str | None, actual: str | None,
                                results: np.ndarray) -> bool:
    """The documented difference: numfuse raises "underflow" for results in the subnormal
    range, as the C library does, where numpy's loop raised nothing (its own AVX-512 code
    for tan, arctan, arcsin, sinh, arcsinh, arctanh and float64 arctan2 returns them
    silently).  Decided by what numpy's loop did, not by the machine."""
    tiny = np.finfo(results.dtype).smallest_normal
    subnormal = (results != 0) & (np.abs(results) < tiny)
    return expected is None and actual == "underflow" and bool(subnormal.any())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize(("function", "values", "error"), FLAG_CASES)
def test_floating_point_errors_are_numpys(kernels, function: str, values: list[float],
                                          error: str | None, dtype: type) -> None:
    # 40 copies, so the vectorised loop body (not only its scalar remainder) runs them.
    x = np.tile(np.array(values, dtype=dtype), 40)
    assert _floating_point_error(getattr(np, function), x) == error  # the table is right
    assert _floating_point_error(kernels[function], x) == error


def test_overflow_warns_under_errstate_like_numpy(kernels) -> None:
    x = np.array([1.0, 1000.0, 2.0] * 20)
    with pytest.warns(RuntimeWarning, match="overflow"), np.errstate(over="warn"):
        result = kernels["exp"](x)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(result, np.exp(x), rtol=4e-16)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_kernels_using_them_are_vectorised(function: str, dtype: type) -> None:
    x = np.linspace(0.5, 2.0, 64).astype(dtype)
    compiled = numfuse.compile(_calling(getattr(np, function)), x)
    (kernel,) = compiled.kernels
    assert f"{function}_f{np.dtype(dtype).itemsize * 8}(" in kernel.source
    report = inspection.kernel_vector_report(kernel)
    assert report.vectorised, report.summary()


def test_fused_black_scholes_terms_match_numpy() -> None:
    def terms(s, k, t):  # type: ignore[no-untyped-def]
        d1 = (np.log(s / k) + 0.065 * t) / (0.3 * np.sqrt(t))
        return np.exp(-0.5 * d1 * d1), np.tanh(d1), np.log1p(np.expm1(-t))

    rng = np.random.default_rng(7)
    args = (rng.uniform(5, 30, 5000), rng.uniform(1, 100, 5000), rng.uniform(0.25, 10, 5000))
    for result, expected in zip(numfuse.jit(terms)(*args), terms(*args), strict=True):
        np.testing.assert_allclose(result, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_plain_python_versions_agree_with_numpy(function: str) -> None:
    # The generated kernel files also run without numba: the helpers work on numpy scalars.
    for dtype in DTYPES:
        helper = getattr(vector_math, f"{function}_f{np.dtype(dtype).itemsize * 8}")
        for value in (0.3, 1.7, 0.05):
            x = dtype(value)
            with np.errstate(invalid="ignore"):  # outside the domain (arcsin(1.7), arctanh(1.7))
                result = helper(x)
                expected = getattr(np, function)(x)
            if np.isnan(expected):
                assert np.isnan(result)
                continue
            if not np.isfinite(expected):
                continue
            assert abs(float(result) - float(expected)) <= 2 * abs(float(np.spacing(expected)))


def test_codegen_options_key_names_the_mode() -> None:
    key = store.vector_math_key()
    assert key["vector_math"] == "on"
    assert len(key["vector_math_source"]) == 64


def test_environment_switch_keeps_libm_calls(tmp_path) -> None:
    script = textwrap.dedent("""
        import numpy as np
        import numfuse
        from numfuse.backend import store

        x = np.linspace(-3.0, 3.0, 101)
        compiled = numfuse.compile(lambda x: np.exp(x) + np.log1p(x * x), x)
        print(store.vector_math_key()["vector_math"])
        print("np.exp(" in compiled.kernels[0].source, "exp_f64" in compiled.kernels[0].source)
        print(np.allclose(compiled(x), np.exp(x) + np.log1p(x * x), rtol=1e-15, atol=0))
    """)
    environment = dict(os.environ, NUMFUSE_VECTOR_MATH="0", NUMFUSE_CACHE_DIR=str(tmp_path))
    output = subprocess.run([sys.executable, "-c", script], env=environment, check=True,
                            capture_output=True, text=True, timeout=300).stdout.split("\n")
    assert output[:3] == ["off", "True False", "True"]


@pytest.mark.parametrize("value", ["0", "false", "OFF", "no"])
def test_switch_values(monkeypatch, value: str) -> None:
    monkeypatch.setenv("NUMFUSE_VECTOR_MATH", value)
    assert not vector_math.enabled_from_environment()
    monkeypatch.setenv("NUMFUSE_VECTOR_MATH", "1")
    assert vector_math.enabled_from_environment()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", ["sin", "cos"])
def test_trigonometric_functions_of_huge_arguments_are_numpys(kernels, function: str,
                                                              dtype: type) -> None:
    # Beyond the vectorised reduction (|x| > 1.6e6) lanes call the C library, mixed with
    # ordinary lanes in one vector: every value stays within an ulp of numpy's.
    rng = np.random.default_rng(11)
    high = float(np.finfo(dtype).max)
    huge = 10.0 ** rng.uniform(6.0, np.log10(high), 500)
    ordinary = rng.uniform(-10.0, 10.0, 500)
    x = np.stack([huge * rng.choice([-1.0, 1.0], 500), ordinary], axis=1).ravel().astype(dtype)
    x[::7] = np.array([1.6e6, np.nextafter(1.6e6, 2e6), 2.0**20 * np.pi / 2], dtype)[
        np.arange(x[::7].size) % 3]
    expected = getattr(np, function)(x)
    result = kernels[function](x)
    assert ulps(result, expected, dtype).max() <= 1.0


@pytest.mark.slow
@pytest.mark.parametrize("function", ["sin", "cos"])
def test_trigonometric_functions_near_multiples_of_pi_over_2(kernels, function: str) -> None:
    # The arguments closest to multiples of pi/2, where the reduction cancels most.
    n = np.arange(1, 2**20, 3, dtype=np.float64)
    x = np.concatenate([n * (np.pi / 2), np.nextafter(n * (np.pi / 2), 0),
                        np.nextafter(n * (np.pi / 2), np.inf)])
    exact = getattr(np, function)(x.astype(np.longdouble))
    result = kernels[function](x)
    if PRECISE_LONG_DOUBLE:
        assert ulps(result, exact, np.float64).max() <= 1.5
    assert ulps(result, getattr(np, function)(x), np.float64).max() <= 2.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_cube_roots_of_cubes_are_exact(kernels, dtype: type) -> None:
    # (the C library's float64 cbrt is not: it gives 3.0000000000000004 for 27)
    limit = 2**53 if dtype == np.float64 else 2**24
    roots = np.arange(1, round(limit ** (1 / 3)), dtype=np.float64)
    scaled = np.concatenate([roots, roots * 2.0**-40, roots * 2.0**30]).astype(dtype)
    cubes = scaled * scaled * scaled
    assert np.array_equal(kernels["cbrt"](cubes), scaled)
    assert np.array_equal(kernels["cbrt"](-cubes), -scaled)


@pytest.mark.parametrize("function", ["tanh", "exp", "log1p"])
def test_float32_polynomials_are_contracted(function: str) -> None:
    """The float32 functions and every helper they call compile with contraction (fused
    multiply-adds), float64 ones only in their polynomial kernels: the helpers a
    contracted function calls take it on."""
    x = np.linspace(0.5, 2.0, 64).astype(np.float32)
    (kernel,) = numfuse.compile(_calling(getattr(np, function)), x).kernels
    row = kernel.llvm_ir().split(".row(")[1].split("\n}\n")[0]
    # 8 float32 lanes with AVX2, 16 with AVX-512
    products = re.findall(r"= fmul( contract)? <(?:8|16) x float>", row)
    assert products and all(products), products  # every vector product may fuse


def test_fused_float32_gelu_matches_numpy() -> None:
    # tanh inlined among other float32 work: LLVM once folded its selects here and kept
    # only the small-argument polynomial for every lane.
    half, one = np.float32(0.5), np.float32(1.0)
    c0, c1 = np.float32(0.7978845608028654), np.float32(0.044715)

    def gelu(x):  # type: ignore[no-untyped-def]
        return half * x * (one + np.tanh(c0 * (x + c1 * (x * x * x))))

    x = np.random.default_rng(3).standard_normal(10_000, dtype=np.float32) * np.float32(3)
    np.testing.assert_allclose(numfuse.jit(gelu)(x), gelu(x), rtol=1e-6, atol=1e-6)



# ------------------------------------------------------------------ edges and subnormals


# Arguments where the answer is a constant or the argument itself: numpy's exactly.
EDGES = {
    "tan": [0.0, -0.0, 1e-300, -1e-300],
    "arctan": [np.inf, -np.inf, 1e300, -1e300, 1e20, 0.0, -0.0, 1e-300],
    "arcsin": [1.0, -1.0, 0.0, -0.0, 1e-300, -1e-300],
    "arccos": [1.0, -1.0, 0.0, -0.0, 1e-300, -1e-300],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", sorted(EDGES))
def test_domain_edges_are_numpys_exactly(kernels, function: str, dtype: type) -> None:
    info = np.finfo(dtype)
    x = np.array(EDGES[function] + [info.smallest_subnormal, -info.smallest_subnormal,
                                    info.max, -info.max], dtype=np.float64)
    with np.errstate(all="ignore"):
        x = x.astype(dtype)
        expected = getattr(np, function)(x)
        result = kernels[function](x)
    assert_same_classes(result, expected, x)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", ["tan", "arctan", "arcsin"])
def test_subnormal_arguments_raise_underflow_like_numpy(kernels, function: str,
                                                        dtype: type) -> None:
    # The C library's tan, atan and asin return a subnormal argument with "underflow", and
    # so do numfuse's; numpy's AVX-512 loops return it without (a known difference).
    info = np.finfo(dtype)
    for value in (info.smallest_subnormal, -3 * info.smallest_subnormal):
        x = np.full(40, value, dtype=dtype)
        expected = _floating_point_error(getattr(np, function), x)
        actual = _floating_point_error(kernels[function], x)
        with np.errstate(all="ignore"):
            result = kernels[function](x)
        assert actual == "underflow"
        assert actual == expected or _known_underflow_difference(expected, actual, result)
    x = np.full(40, info.smallest_normal, dtype=dtype)
    assert _floating_point_error(kernels[function], x) is None


@pytest.mark.slow
def test_tan_near_multiples_of_pi_over_2(kernels) -> None:
    # The reduction keeps the roundings of its steps: tan stays accurate where it is huge.
    n = np.arange(1, 2**20, 3, dtype=np.float64)
    x = np.concatenate([n * (np.pi / 2), np.nextafter(n * (np.pi / 2), 0),
                        np.nextafter(n * (np.pi / 2), np.inf), n * (np.pi / 4)])
    result = kernels["tan"](x)
    if PRECISE_LONG_DOUBLE:
        assert ulps(result, np.tan(x.astype(np.longdouble)), np.float64).max() <= 1.5
    assert ulps(result, np.tan(x), np.float64).max() <= 2.0


def test_float32_tan_near_multiples_of_pi_over_2(kernels) -> None:
    n = np.arange(1, 2**20, 97, dtype=np.float64)
    x = np.concatenate([n * (np.pi / 2), n * (np.pi / 4)]).astype(np.float32)
    x = np.concatenate([x, np.nextafter(x, np.float32(0)), np.nextafter(x, np.float32(np.inf))])
    assert ulps(kernels["tan"](x), np.tan(x.astype(np.float64)), np.float32).max() <= 0.51


# float32 sin and cos compute in float32, tan in float64.  Largest errors against the exact
# value measured over every float32 in [2**-13, 1e5] (below, sin and tan return x and cos
# 1; beyond, and very near multiples of pi/2, lanes take the float64 C library's value).
FLOAT32_TRIGONOMETRIC_ULP = {"sin": 0.79, "cos": 0.79, "tan": 0.51}


def float32_trigonometric_values() -> np.ndarray:
    """Arguments of every region of the float32 reduction, mixed so that one vector holds
    lanes computed in float32 and lanes taking the C library's value: wide, moderate,
    the float32 numbers nearest multiples of pi/2 and their neighbours, around 1e5."""
    rng = np.random.default_rng(32)
    signs = rng.choice([-1.0, 1.0], 40_000)
    multiples = (signs * rng.integers(1, 70_000, 40_000) * (np.pi / 2)).astype(np.float32)
    near = [multiples, np.nextafter(multiples, np.float32(0)),
            np.nextafter(multiples, np.float32(np.inf))]
    edges = np.array([1e5, np.nextafter(np.float32(1e5), np.float32(np.inf))], np.float32)
    wide = [rng.uniform(-1.2e5, 1.2e5, 40_000), rng.uniform(-4.0, 4.0, 40_000),
            signs * 10.0 ** rng.uniform(-5.0, 5.0, 40_000)]
    x = np.concatenate([*(part.astype(np.float32) for part in wide), *near, edges, -edges])
    return rng.permutation(x)  # type: ignore[no-any-return]


@pytest.mark.parametrize("function", ["sin", "cos", "tan"])
def test_float32_trigonometric_functions_are_accurate(kernels, function: str) -> None:
    x = float32_trigonometric_values()
    with np.errstate(all="raise"):  # and no lane raises a floating-point flag
        result = kernels[function](x)
    errors = ulps(result, getattr(np, function)(x.astype(np.float64)), np.float32)
    worst = x[np.argmax(errors)]
    assert errors.max() <= FLOAT32_TRIGONOMETRIC_ULP[function], f"{errors.max()} at {worst!r}"


@pytest.mark.slow
@pytest.mark.parametrize("function", ["sin", "cos", "tan"])
def test_float32_trigonometric_functions_of_every_float32(kernels, function: str) -> None:
    # Every positive float32 from 2**-13 to past 1e5 (the functions are odd or even).
    first = np.float32(2.0**-13).view(np.int32)
    last = np.float32(1.01e5).view(np.int32)
    worst = 0.0
    for start in range(int(first), int(last), 2**23):
        x = np.arange(start, min(start + 2**23, int(last)), dtype=np.int32).view(np.float32)
        with np.errstate(all="raise"):
            result = kernels[function](x)
        reference = getattr(np, function)(x.astype(np.float64))
        worst = max(worst, float(ulps(result, reference, np.float32).max()))
    assert worst <= FLOAT32_TRIGONOMETRIC_ULP[function]


@pytest.mark.parametrize("function", ["sin", "cos"])
def test_float32_trigonometric_functions_compute_in_float32(function: str) -> None:
    # float arithmetic only: doubles appear only as the C library call's argument and value
    x = np.linspace(0.5, 2.0, 64).astype(np.float32)
    (kernel,) = numfuse.compile(_calling(getattr(np, function)), x).kernels
    row = kernel.llvm_ir().split(".row(")[1].split("\n}\n")[0]
    assert re.search(r"= fmul[a-z ]* <\d+ x float>", row)
    assert not re.search(r"= f(add|sub|mul|div)[a-z ]* <\d+ x double>", row)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_tan_of_huge_arguments_is_accurate(kernels, dtype: type) -> None:
    # Beyond the vectorised reduction lanes call the C library's tan (see sin and cos):
    # as accurate as the ordinary lanes, within an ulp of numpy's float64 tan and within
    # ULP_VS_NUMPY of its float32 one (with AVX-512 numpy's own code, up to 3.6 ulp off).
    rng = np.random.default_rng(12)
    huge = 10.0 ** rng.uniform(6.0, np.log10(float(np.finfo(dtype).max)), 500)
    x = np.stack([huge * rng.choice([-1.0, 1.0], 500), rng.uniform(-10.0, 10.0, 500)],
                 axis=1).ravel().astype(dtype)
    result = kernels["tan"](x)
    if dtype == np.float32:
        exact = np.tan(x.astype(np.float64))
        assert ulps(result, exact, dtype).max() <= FLOAT32_TRIGONOMETRIC_ULP["tan"]
    elif PRECISE_LONG_DOUBLE:
        assert ulps(result, np.tan(x.astype(np.longdouble)), dtype).max() <= 1.5
    bound = ULP_VS_NUMPY[dtype] if dtype == np.float32 else 1.0
    assert ulps(result, np.tan(x), dtype).max() <= bound


# ------------------------------------------------------------------ arctan2


@pytest.fixture(scope="module")
def arctan2() -> numfuse.Jitted:
    return numfuse.jit(lambda y, x: np.arctan2(y, x))


def grid_pairs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of {±0, ±1, ±inf, nan, ±tiny, ±huge} (tiny: the smallest subnormal and
    normal numbers; huge: the largest number and 1e20)."""
    info = np.finfo(dtype)
    values = [0.0, 1.0, np.inf, float(info.smallest_subnormal), float(info.smallest_normal),
              float(info.max), 1e20]
    values = values + [-v for v in values] + [np.nan]
    y, x = np.meshgrid(np.array(values, dtype=dtype), np.array(values, dtype=dtype))
    return y.ravel(), x.ravel()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_arctan2_special_values_are_correctly_rounded(arctan2, dtype: type) -> None:
    # numpy's float32 arctan2 is an ulp off the correctly rounded angle at some of these:
    # with AVX2 (the C library's atan2f) where x < 0 and |y/x| >= 2**23, with AVX-512 (its
    # own loop) at arctan2(1, 1) and arctan2(1e20, 1e20).  numfuse returns the correctly
    # rounded angle at every pair, numpy's classes and signed zeros.
    y, x = grid_pairs(dtype)
    with np.errstate(all="ignore"):
        expected = np.arctan2(y, x)
        result = arctan2(y, x)
    assert result.dtype == expected.dtype
    assert_same_classes(result, expected, np.stack([y, x], axis=1))
    exact = correctly_rounded("arctan2", dtype, y, x)
    np.testing.assert_array_equal(result, expected if exact is None else exact)
    assert ulps(result, expected, dtype).max() <= 1.0


def wide_pairs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """Random pairs: magnitudes over the whole range (ratios beyond 2**60 too), both signs,
    and pairs of similar magnitude around the reduction's boundaries."""
    rng = np.random.default_rng(29 + np.dtype(dtype).itemsize)
    info = np.finfo(dtype)
    low, high = np.log10(float(info.smallest_subnormal)), np.log10(float(info.max))

    def signed(values: np.ndarray) -> np.ndarray:
        return values * rng.choice([-1.0, 1.0], values.size)

    size = 20_000
    moderate = signed(10.0 ** rng.uniform(-30, 30, size))
    y = np.concatenate([signed(10.0 ** rng.uniform(low, high, size)),
                        signed(rng.uniform(0.0, 3.0, size)), moderate])
    x = np.concatenate([signed(10.0 ** rng.uniform(low, high, size)),
                        signed(rng.uniform(0.0, 3.0, size)),
                        moderate * signed(10.0 ** rng.uniform(-20, 20, size))])
    with np.errstate(over="ignore"):
        return y.astype(dtype), x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_arctan2_wide_ranges(arctan2, dtype: type) -> None:
    y, x = wide_pairs(dtype)
    with np.errstate(all="ignore"):
        expected = np.arctan2(y, x)
        result = arctan2(y, x)
    assert_same_classes(result, expected, np.stack([y, x], axis=1))
    assert ulps(result, expected, dtype).max() <= ULP_VS_NUMPY[dtype]
    if dtype == np.float64 and not PRECISE_LONG_DOUBLE:
        return
    wider = np.float64 if dtype == np.float32 else np.longdouble
    exact = np.arctan2(y.astype(wider), x.astype(wider))
    assert ulps(result, exact, dtype).max() <= ULP_VS_EXACT[dtype]


def _pair_error(call, y: np.ndarray, x: np.ndarray) -> str | None:  # type: ignore[no-untyped-def]
    return _floating_point_error(lambda tile: call(tile, x), y)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_arctan2_floating_point_errors_are_numpys(arctan2, dtype: type) -> None:
    # numpy raises nothing but "underflow", for angles in the subnormal range.
    y, x = grid_pairs(dtype)
    # (angles just above float32's smallest normal number: 1e-37 / 7, 3e-38 / 0.7)
    extra_y = np.array([1e-300, 1e-310, -1e-310, 5e-324, 1e-30, 1e-37, 3e-38, 2e-38],
                       dtype=np.float64)
    extra_x = np.array([1e10, 1.0, 3.0, 1.0, -1e20, 7.0, 0.7, 3.0], dtype=np.float64)
    with np.errstate(all="ignore"):
        y = np.concatenate([y, extra_y.astype(dtype)])
        x = np.concatenate([x, extra_x.astype(dtype)])
    mismatches = []
    for y_value, x_value in zip(y, x, strict=True):
        tile_y, tile_x = np.full(40, y_value, dtype), np.full(40, x_value, dtype)
        expected = _pair_error(np.arctan2, tile_y, tile_x)
        actual = _pair_error(arctan2, tile_y, tile_x)
        with np.errstate(all="ignore"):
            angles = arctan2(tile_y, tile_x)
        if actual != expected and not _known_underflow_difference(expected, actual, angles):
            mismatches.append((y_value, x_value, expected, actual))
    assert not mismatches


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_arctan2_kernels_are_vectorised(dtype: type) -> None:
    x = np.linspace(0.5, 2.0, 64).astype(dtype)
    compiled = numfuse.compile(lambda y, x: np.arctan2(y, x), x, x[::-1].copy())
    (kernel,) = compiled.kernels
    assert f"arctan2_f{np.dtype(dtype).itemsize * 8}(" in kernel.source
    report = inspection.kernel_vector_report(kernel)
    assert report.vectorised, report.summary()


def test_arctan2_plain_python_version_agrees_with_numpy() -> None:
    for dtype in DTYPES:
        helper = getattr(vector_math, f"arctan2_f{np.dtype(dtype).itemsize * 8}")
        for y, x in ((0.3, -1.7), (-2.0, 0.05), (1.0, 1.0)):
            result, expected = helper(dtype(y), dtype(x)), np.arctan2(dtype(y), dtype(x))
            assert abs(float(result) - float(expected)) <= 2 * abs(float(np.spacing(expected)))


# ------------------------------------------------------------------ binary functions
# hypot(x, y): compared on the grid of special values (every pair), on wide random pairs
# (both magnitudes and their ratio spread over the whole range) and on numpy's flags.

BINARY = ("hypot",)


@pytest.fixture(scope="module")
def binary_kernels() -> dict[str, numfuse.Jitted]:
    return {name: numfuse.jit(_calling_binary(getattr(np, name))) for name in BINARY}


def _calling_binary(ufunc: np.ufunc):  # type: ignore[no-untyped-def]
    def function(x, y):  # type: ignore[no-untyped-def]
        return ufunc(x, y)
    return function


def special_pairs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    values = special_values(dtype)
    x, y = np.meshgrid(values, values)
    return x.ravel(), y.ravel()


def wide_binary_pairs(function: str, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(sum(map(ord, function)) + np.dtype(dtype).itemsize)
    x = wide_values(function, dtype)
    ratios = 10.0 ** rng.uniform(-20.0, 20.0, x.size) * rng.choice([-1.0, 1.0], x.size)
    with np.errstate(over="ignore", under="ignore"):
        y = (x.astype(np.float64) * ratios).astype(dtype)
    return x, rng.permutation(y) if function != "hypot" else y


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", BINARY)
def test_binary_special_values_are_numpys(binary_kernels, function: str, dtype: type) -> None:
    x, y = special_pairs(dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(x, y)
        result = binary_kernels[function](x, y)
    assert result.dtype == expected.dtype
    assert_same_classes(result, expected, np.stack([x, y], axis=1))
    exact = ~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0)
    np.testing.assert_array_equal(result[exact], expected[exact])
    with np.errstate(over="ignore"):  # np.spacing of the largest numbers
        assert ulps(result, expected, dtype).max() <= 1.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", BINARY)
def test_binary_wide_ranges_match_numpy_and_the_exact_value(binary_kernels, function: str,
                                                            dtype: type) -> None:
    x, y = wide_binary_pairs(function, dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(x, y)
        result = binary_kernels[function](x, y)
    assert_same_classes(result, expected, np.stack([x, y], axis=1))
    assert ulps(result, expected, dtype).max() <= ULP_VS_NUMPY[dtype]
    if dtype == np.float64 and not PRECISE_LONG_DOUBLE:
        return
    wider = np.float64 if dtype == np.float32 else np.longdouble
    with np.errstate(all="ignore"):
        exact = getattr(np, function)(x.astype(wider), y.astype(wider))
    in_range = np.abs(exact) <= np.finfo(dtype).max
    assert ulps(result[in_range], exact[in_range], dtype).max() <= ULP_VS_EXACT[dtype]


def test_hypot_is_correctly_rounded_in_the_normal_range(binary_kernels) -> None:
    if not PRECISE_LONG_DOUBLE:
        pytest.skip("no long double wider than float64 for a reference")
    rng = np.random.default_rng(9)
    x = 10.0 ** rng.uniform(-300.0, 290.0, 100_000) * rng.choice([-1.0, 1.0], 100_000)
    y = x * 10.0 ** rng.uniform(-9.0, 9.0, x.size)
    result = binary_kernels["hypot"](x, y)
    exact = np.hypot(x.astype(np.longdouble), y.astype(np.longdouble))
    spacing = np.spacing(exact.astype(np.float64)).astype(np.longdouble)
    # half an ulp, and the long double reference's own rounding (2**-11 ulp)
    assert (np.abs(result - exact) / spacing).max() <= 0.5 + 2.0**-10


def _binary_flag_cases() -> list[tuple[str, type, list[float], list[float], str | None]]:
    cases = []
    for dtype in DTYPES:
        info = np.finfo(dtype)
        tiny, subnormal = float(info.tiny), float(info.smallest_subnormal)
        cases += [
            ("hypot", dtype, [float(info.max)], [float(info.max)], "overflow"),
            ("hypot", dtype, [float(info.max)], [float(info.max) / 2], "overflow"),
            ("hypot", dtype, [3 * subnormal], [3 * subnormal], "underflow"),
            ("hypot", dtype, [tiny, subnormal, 1e-30, 1.0], [tiny, 0.0, 1.0, 1e-30], None),
            ("hypot", dtype, [np.inf, np.nan, np.inf, 0.0, 3.0, float(info.max)],
             [np.nan, 1.0, -np.inf, -0.0, 4.0, 1.0], None),
        ]
    return cases


@pytest.mark.parametrize(("function", "dtype", "x", "y", "error"), _binary_flag_cases())
def test_binary_floating_point_errors_are_numpys(binary_kernels, function: str, dtype: type,
                                                 x: list[float], y: list[float],
                                                 error: str | None) -> None:
    first = np.tile(np.array(x, dtype=dtype), 40)
    second = np.tile(np.array(y, dtype=dtype), 40)

    def raised(call) -> str | None:  # type: ignore[no-untyped-def]
        with np.errstate(all="raise"):
            try:
                call(first, second)
            except FloatingPointError as caught:
                return str(caught).split(" encountered")[0].replace(" value", "")
        return None

    assert raised(getattr(np, function)) == error  # the table is right
    assert raised(binary_kernels[function]) == error


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", BINARY)
def test_binary_kernels_are_vectorised(function: str, dtype: type) -> None:
    x = np.linspace(0.5, 2.0, 64).astype(dtype)
    compiled = numfuse.compile(_calling_binary(getattr(np, function)), x, x[::-1].copy())
    (kernel,) = compiled.kernels
    assert f"{function}_f{np.dtype(dtype).itemsize * 8}(" in kernel.source
    report = inspection.kernel_vector_report(kernel)
    assert report.vectorised, report.summary()


@pytest.mark.parametrize("function", BINARY)
def test_binary_plain_python_versions_agree_with_numpy(function: str) -> None:
    for dtype in DTYPES:
        helper = getattr(vector_math, f"{function}_f{np.dtype(dtype).itemsize * 8}")
        for first, second in ((0.3, 1.7), (-3.0, 4.0), (1e-3, 2.5)):
            result = helper(dtype(first), dtype(second))
            expected = getattr(np, function)(dtype(first), dtype(second))
            assert abs(float(result) - float(expected)) <= abs(float(np.spacing(expected)))


# The libm kernels (NUMFUSE_VECTOR_MATH=0) are compared with numpy within a couple of ulp:
# numpy's AVX-512 loops are its own code, not the C library's.
LIBM_ULP_VS_NUMPY = 2.0
_ULPS_SOURCE = textwrap.dedent("""
    import numpy as np

    def ulps(result, expected):
        return float((abs(result - expected) / np.spacing(abs(expected))).max())
""")


def test_environment_switch_keeps_libm_cbrt_and_hypot(tmp_path) -> None:
    script = _ULPS_SOURCE + textwrap.dedent("""
        import numpy as np
        import numfuse

        def both(x):
            return np.cbrt(x), np.hypot(x, 2.0)

        x = np.linspace(-3.0, 3.0, 101)
        compiled = numfuse.compile(both, x)
        source = compiled.kernels[0].source
        print("np.cbrt(" in source, "math.hypot(" in source, "_f64(" in source)
        print(max(ulps(a, b) for a, b in zip(compiled(x), both(x))))
    """)
    environment = dict(os.environ, NUMFUSE_VECTOR_MATH="0", NUMFUSE_CACHE_DIR=str(tmp_path))
    output = subprocess.run([sys.executable, "-c", script], env=environment, check=True,
                            capture_output=True, text=True, timeout=300).stdout.split("\n")
    assert output[0] == "True True False"
    assert float(output[1]) <= LIBM_ULP_VS_NUMPY


# ----------------------------------------------------------------- exp2, log2, log10
def test_exp2_of_integers_is_exact(kernels) -> None:
    for dtype in DTYPES:
        limit = 1100 if dtype == np.float64 else 160
        k = np.arange(-limit, limit)
        with np.errstate(all="ignore"):
            exact = np.ldexp(np.ones(k.size, dtype), k)  # 0 and inf beyond the range
            expected = np.exp2(k.astype(dtype))
            result = kernels["exp2"](k.astype(dtype))
        np.testing.assert_array_equal(result, exact)
        # (numpy's AVX-512 float32 exp2 is an ulp off at 127)
        assert ulps(result, expected, dtype).max() <= 1.0


def test_log2_of_powers_of_two_is_exact(kernels) -> None:
    for dtype in DTYPES:
        info = np.finfo(dtype)
        k = np.arange(info.minexp - info.nmant, info.maxexp)
        x = np.ldexp(np.ones(k.size, dtype), k)  # subnormal ones too
        result = kernels["log2"](x)
        np.testing.assert_array_equal(result, k.astype(dtype))
        np.testing.assert_array_equal(result, np.log2(x))


def test_log10_of_powers_of_ten_is_correctly_rounded(kernels) -> None:
    # (numpy's AVX-512 float32 log10 is an ulp off at many: log10(1e-38) is -38.000004)
    for dtype in DTYPES:
        high = 308 if dtype == np.float64 else 38
        k = np.arange(-high, high + 1)
        x = np.array([f"1e{n}" for n in k]).astype(dtype)  # the nearest dtype to 10**n
        x = x[x > 0]
        result, expected = kernels["log10"](x), np.log10(x)
        rounded = correctly_rounded("log10", dtype, x)
        np.testing.assert_array_equal(result, expected if rounded is None else rounded)
        assert ulps(result, expected, dtype).max() <= 1.0
        exact = np.abs(k) <= (22 if dtype == np.float64 else 10)
        np.testing.assert_array_equal(kernels["log10"](x[exact[-x.size:]]),
                                      k[-x.size:][exact[-x.size:]].astype(dtype))


# ----------------------------------------------------------------- sinh, cosh
@pytest.mark.parametrize("function", ["sinh", "cosh"])
def test_hyperbolic_functions_near_overflow_are_numpys(kernels, function: str) -> None:
    # exp(710) overflows, sinh(710) and cosh(710) do not; both overflow past 710.4758.
    x = np.tile(np.array([709.0, 709.9, 710.0, 710.47, -710.0, -710.47]), 20)
    assert _floating_point_error(kernels[function], x) is None
    expected = getattr(np, function)(x)
    assert ulps(kernels[function](x), expected, np.float64).max() <= 2.0
    x = np.tile(np.array([710.0, 710.48, 88.0]), 20)
    assert _floating_point_error(kernels[function], x) == "overflow"
    with np.errstate(over="ignore"):
        assert_same_classes(kernels[function](x), getattr(np, function)(x), x)


# ----------------------------------------------------------------- inverse hyperbolic
def test_inverse_hyperbolic_functions_of_extreme_arguments(kernels) -> None:
    big = np.array([1e300, -1e300, 1.7976931348623157e308, 3e8, 2.0**28, 2.0**28 + 2.0])
    tiny = np.array([1e-300, -1e-300, 3e-9, -3.7e-9, 1e-8])
    assert ulps(kernels["arcsinh"](big), np.arcsinh(big), np.float64).max() <= 1.0
    np.testing.assert_array_equal(kernels["arcsinh"](tiny[:4]), tiny[:4])
    np.testing.assert_array_equal(kernels["arctanh"](tiny[:4]), tiny[:4])
    positive = np.abs(big)
    assert ulps(kernels["arccosh"](positive), np.arccosh(positive), np.float64).max() <= 1.0
    edges = np.array([1.0, np.nextafter(1.0, 2.0), 1.0 + 1e-10, 2.0])
    assert ulps(kernels["arccosh"](edges), np.arccosh(edges), np.float64).max() <= 2.0
    ends = np.array([np.nextafter(1.0, 0.0), -np.nextafter(1.0, 0.0), 0.5, -0.5])
    assert ulps(kernels["arctanh"](ends), np.arctanh(ends), np.float64).max() <= 2.0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", ["sinh", "arcsinh", "arctanh", "cosh", "exp2"])
def test_subnormal_arguments_underflow_like_numpy(kernels, function: str, dtype: type) -> None:
    # numpy's sinh, arcsinh and arctanh return a subnormal argument with "underflow" (its
    # AVX-512 loops without: a known difference), numfuse's with it.
    info = np.finfo(dtype)
    for values in ([info.smallest_subnormal], [-info.smallest_normal / 3, 0.5],
                   [info.smallest_normal, -0.0, np.nan, 1e-30, 2.0]):
        x = np.tile(np.array(values, dtype=dtype), 40)
        expected = _floating_point_error(getattr(np, function), x)
        actual = _floating_point_error(kernels[function], x)
        with np.errstate(all="ignore"):
            result, expected_values = kernels[function](x), getattr(np, function)(x)
            assert actual == expected or _known_underflow_difference(expected, actual, result)
            assert_same_classes(result, expected_values, x)
            tiny = np.abs(x) < 1e-20
            np.testing.assert_array_equal(result[tiny], expected_values[tiny])


NEW_FUNCTIONS = ("exp2", "log2", "log10", "sinh", "cosh", "arcsinh", "arccosh", "arctanh")


def test_environment_switch_keeps_libm_calls_of_the_new_functions(tmp_path) -> None:
    script = _ULPS_SOURCE + textwrap.dedent(f"""
        import numpy as np
        import numfuse

        names = {NEW_FUNCTIONS!r}
        def all_of_them(x, y):
            return tuple(getattr(np, name)(x + 1.0 if name == "arccosh" else
                                           y if name == "arctanh" else x) for name in names)
        for dtype in (np.float32, np.float64):
            x = np.linspace(0.1, 3.0, 101, dtype=dtype)
            y = np.linspace(-0.9, 0.9, 101, dtype=dtype)
            compiled = numfuse.compile(all_of_them, x, y)
            source = "".join(kernel.source for kernel in compiled.kernels)
            print(any(name + "_f" in source for name in names),
                  max(ulps(a, b) for a, b in zip(compiled(x, y), all_of_them(x, y))))
    """)
    environment = dict(os.environ, NUMFUSE_VECTOR_MATH="0", NUMFUSE_CACHE_DIR=str(tmp_path))
    output = subprocess.run([sys.executable, "-c", script], env=environment, check=True,
                            capture_output=True, text=True, timeout=300).stdout.split("\n")
    for line in output[:2]:  # float32, float64
        calls_vector_math, worst = line.split()
        assert calls_vector_math == "False"
        assert float(worst) <= LIBM_ULP_VS_NUMPY


@pytest.mark.slow
@pytest.mark.parametrize("function", NEW_FUNCTIONS)
def test_float32_functions_over_every_binade(kernels, function: str) -> None:
    # One float32 in every 61 (by bit pattern), both signs: all exponents, dense mantissas.
    bits = np.arange(0, 0x7F800000, 61, dtype=np.int32)
    x = np.concatenate([bits.view(np.float32), -bits.view(np.float32)])
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(x)
        exact = getattr(np, function)(x.astype(np.float64))
        result = kernels[function](x)
        in_range = np.abs(exact) <= np.finfo(np.float32).max
        assert_same_classes(result, expected, x, exact.astype(np.float32))
    assert ulps(result[in_range], exact[in_range], np.float32).max() <= ULP_VS_EXACT[np.float32]
    assert ulps(result, expected, np.float32).max() <= ULP_VS_NUMPY[np.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", FUNCTIONS)
def test_fastmath_kernels_keep_the_functions_accurate(function: str, dtype: type) -> None:
    # The kernel's reassociation must not reach the functions: their reductions and error
    # terms rely on each rounding (reassociated, float64 log was off by 1e20 ulp).
    x = wide_values(function, dtype)[::7]
    jitted = numfuse.jit(_calling(getattr(np, function)), fastmath=True)
    with np.errstate(all="ignore"):
        expected = getattr(np, function)(x)
        result = jitted(x)
    assert_same_classes(result, expected, x, correctly_rounded(function, dtype, x))
    assert ulps(result, expected, dtype).max() <= ULP_VS_NUMPY[dtype]


# ------------------------------------------------------------------ logaddexp2
# numpy's formula, max(x, y) + log1p(2**-|x - y|) / ln 2, loses the relative accuracy of
# results near 0 to cancellation (numpy's own are up to ~20 ulp from the exact value
# there): compared within a few ulp of the larger argument.


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_logaddexp2_is_numpys(dtype: type) -> None:
    kernel = numfuse.jit(_calling_binary(np.logaddexp2))
    grid_x, grid_y = special_pairs(dtype)
    rng = np.random.default_rng(5)
    random_x = (rng.standard_normal(50_000) * 60.0).astype(dtype)
    random_y = (random_x + rng.standard_normal(50_000) * rng.choice([0.1, 3.0, 80.0],
                                                                     50_000)).astype(dtype)
    x, y = np.concatenate([grid_x, random_x]), np.concatenate([grid_y, random_y])
    with np.errstate(all="ignore"):
        expected = np.logaddexp2(x, y)
        result = kernel(x, y)
        finite_x = np.where(np.isfinite(x), np.abs(x), 0.0)
        finite_y = np.where(np.isfinite(y), np.abs(y), 0.0)
        scale = np.spacing(np.maximum(np.maximum(finite_x, finite_y), 1.0).astype(dtype))
    assert result.dtype == expected.dtype
    assert_same_classes(result, expected, np.stack([x, y], axis=1))
    finite = np.isfinite(expected)
    assert (np.abs(result[finite] - expected[finite]) <= 4 * scale[finite]).all()
    assert "logaddexp2_f" in kernel.compiled[next(iter(kernel.compiled))].kernels[0].source
    for values, error in (([1.0, np.nan], "invalid"), ([np.inf, -np.inf, 1e30, -3.0], None)):
        tile = np.tile(np.array(values, dtype=dtype), 40)
        assert _floating_point_error(lambda t: np.logaddexp2(t, t[::-1].copy()), tile) == error
        assert _floating_point_error(lambda t: kernel(t, t[::-1].copy()), tile) == error



# ------------------------------------------------------------------ power


def _power_grid(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    values = np.concatenate([special_values(dtype), np.array(
        [3.0, -3.0, 2.5, -2.5, 0.25, 1e20, -1e20, 9007199254740993.0, -9007199254740992.0,
         700.0, -745.5], dtype)])
    x, y = np.meshgrid(values, values, indexing="ij")
    return x.ravel(), y.ravel()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_power_of_special_values_is_numpys_with_its_flags(dtype: type) -> None:
    power = numfuse.jit(lambda x, y: np.power(x, y))
    x, y = _power_grid(dtype)
    with np.errstate(all="ignore"):
        result, expected = power(x, y), np.power(x, y)
    assert result.dtype == expected.dtype
    assert_same_classes(result, expected, x)
    both = np.isfinite(expected) & (expected != 0)
    assert ulps(result[both], expected[both], dtype).max() <= 1.0
    for a, b in zip(x, y, strict=True):  # each pair's flags, in a vector loop's lanes
        xs, ys = np.full(17, a), np.full(17, b)
        assert _flags(power, xs, ys) == _flags(np.power, xs, ys), (a, b)


def _flags(function, *args) -> list[str]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught, \
            np.errstate(all="warn", under="ignore"):
        warnings.simplefilter("always")
        function(*args)
    return sorted(str(warning.message).split(" encountered")[0] for warning in caught)


def _power_arguments(dtype: type) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(11 + np.dtype(dtype).itemsize)
    n = 50_000
    x = np.exp(rng.uniform(-50, 50, n))
    near_range = (x, rng.uniform(-740, 709, n) / np.log(x))  # results near over/underflow
    return [(np.exp(rng.uniform(-5, 5, n)), rng.uniform(-10, 10, n)),
            (1 + rng.uniform(-1e-3, 1e-3, n), rng.uniform(-1e5, 1e5, n)),  # x near 1
            (np.exp(rng.uniform(-700, 700, n)), rng.uniform(-1.5, 1.5, n)),
            (rng.uniform(-10, 10, n), rng.integers(-60, 60, n).astype(float)),  # signs
            near_range]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
def test_power_is_within_an_ulp_over_wide_ranges(dtype: type) -> None:
    power = numfuse.jit(lambda x, y: np.power(x, y))
    for x, y in _power_arguments(dtype):
        with np.errstate(all="ignore"):
            x, y = x.astype(dtype), y.astype(dtype)
            result, expected = power(x, y), np.power(x, y)
        assert_same_classes(result, expected, x)
        assert ulps(result, expected, dtype).max(initial=0.0) <= 1.0
        exact = correctly_rounded("power", dtype, x, y)
        if exact is not None:  # (the reference itself rounded twice: half an ulp more)
            assert ulps(result, exact, dtype).max(initial=0.0) <= 1.5


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("function", [lambda x, y: x ** 1.7, lambda x, y: np.power(x, y),
                                      lambda x, y: x ** y[0]])  # (a traced scalar exponent)
def test_power_kernels_are_vectorised(function, dtype: type) -> None:  # type: ignore[no-untyped-def]
    x = np.linspace(0.5, 2.0, 64).astype(dtype)
    (kernel,) = numfuse.compile(function, x, x).kernels
    report = inspection.kernel_vector_report(kernel)
    assert report.vectorised and not report.scalar_calls, report.summary()


def test_plain_python_power_agrees_with_numpy() -> None:
    # run as Python, the fused multiply-adds round twice: a few ulp on moderate values
    for x, y in ((0.3, 1.7), (2.5, -3.0), (-2.0, 3.0), (7.0, 0.5), (1e-3, 2.25)):
        for helper, dtype, tolerance in ((vector_math.power_f64, np.float64, 8),
                                         (vector_math.power_f32, np.float32, 1)):
            result, expected = helper(dtype(x), dtype(y)), np.power(dtype(x), dtype(y))
            assert abs(float(result) - float(expected)) <= tolerance * float(
                np.spacing(abs(expected)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("exponent", [2.0, 2, -1.0, -1, 1.0, 1, 0.5])
def test_power_by_a_scalar_numpy_computes_exactly_is_exact(exponent, dtype: type) -> None:
    # numpy's loop computes a scalar exponent of 2, -1, 1 or 0.5 as a square, reciprocal,
    # copy or square root: bit for bit, however the exponent is given
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-30, 30, 5000), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    x = x.astype(dtype)
    for fn in (lambda x, p: x ** p, lambda x, p: np.power(x, p),
               lambda x, p: x ** exponent, lambda x, p: np.power(x, np.array(exponent))):
        assert_like_numpy(fn, x, exponent)


def test_power_results_that_are_numbers_of_the_dtype_are_exact() -> None:
    power = numfuse.jit(lambda x, y: np.power(x, y))  # (an array exponent: pow itself)
    k = np.arange(1.0, 2.0**17)
    for exponent in (2.0, 3.0):
        exact = k ** int(exponent) if exponent == 2.0 else k * k * k
        representable = exact < 2.0**53
        result = power(k, np.full(k.size, exponent))
        np.testing.assert_array_equal(result[representable], exact[representable])
    # a float32 result halfway between two float32 numbers rounds to even, as numpy's
    x = np.array([17.0, 4097.0], np.float32)
    np.testing.assert_array_equal(power(x, np.full(2, 6.0, np.float32))[:1], x[:1] ** 6)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: np.dtype(dtype).name)
@pytest.mark.parametrize("fn", [
    lambda x: np.exp(-np.sqrt(x)), lambda x: np.log(np.sqrt(x)),
    lambda x: np.arctan(np.sqrt(x)), lambda x: np.arctan2(np.sqrt(x), 1.0),
    lambda x: np.sin(np.sqrt(x)), lambda x: np.sqrt(x) ** 2.5,
    lambda x: x ** 0.5 + np.cos(x ** 0.5),
])
def test_vector_math_of_a_square_root_of_nan_raises_nothing(fn, dtype: type) -> None:
    # knowing a value a square root (or a value hidden twice by one shared zero: each
    # helper's zeros are its own), LLVM had turned NaN tests into sign tests of the
    # root's operand, which signal "invalid" for a NaN
    x = np.array([4.0, np.nan, 0.25] * 7, dtype)
    assert_like_numpy(fn, x, rtol=4 * float(np.finfo(dtype).eps))
