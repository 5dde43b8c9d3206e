"""numpy's own scalar complex functions (``lowering.numpy_loops``), and every complex ufunc
at extreme values: numfuse gives numpy's values bit for bit and raises the floating-point
flags numpy raises.

The grid takes each part from ±0, the smallest normal and subnormal, ±1, the thresholds
of exp and tanh (45, 89, 710, 750), half the largest float, the largest, ±inf and NaN.
Unary ufuncs run on every combination of a real and an imaginary part, binary ones on a
smaller grid.  The slow variants compare the flags element by element."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import numfuse
from numfuse.backend import store
from numfuse.lowering import numpy_loops
from numfuse.ops import OPS, OpDef

REPO = Path(__file__).resolve().parents[1]
COMPLEX = [np.dtype(np.complex64), np.dtype(np.complex128)]

# numpy's complex absolute, on contiguous and positively strided arrays, runs SIMD code
# that clears the flags it raised: it never reports the underflow of a subnormal ratio of
# the parts or the overflow of |z| beyond the largest float, which numfuse does report
# (numpy's loop for other layouts reports them too).
QUIET_IN_NUMPY = {"absolute": {"underflow", "overflow"}}


def _accepts_complex(op: OpDef) -> bool:
    """Whether the row is a numpy ufunc numfuse computes for complex operands."""
    ufunc = op.reference
    if not isinstance(ufunc, np.ufunc) or op.template(COMPLEX[1:] * op.arity) is None:
        return False
    try:
        ufunc.resolve_dtypes((COMPLEX[1],) * op.arity + (None,) * ufunc.nout)
    except TypeError:
        return False
    return True


UNARY = [name for name, op in OPS.items() if op.arity == 1 and _accepts_complex(op)]
BINARY = [name for name, op in OPS.items() if op.arity == 2 and _accepts_complex(op)]


def parts(dtype: np.dtype, small: bool = False) -> np.ndarray:
    """The extreme values of one part of a complex ``dtype``, each with both signs."""
    part = np.finfo(dtype)
    if small:
        magnitudes = [0.0, part.smallest_subnormal, 0.5, 1.0, 2.0, 89.0, part.max, np.inf]
    else:
        magnitudes = [0.0, part.smallest_normal, part.smallest_subnormal, 1.0, 45.0, 89.0,
                      710.0, 750.0, 0.5 * part.max, part.max, np.inf]
    values = [sign * magnitude for magnitude in magnitudes for sign in (1.0, -1.0)]
    return np.array([*values, np.nan], part.dtype)


def grid(dtype: np.dtype, small: bool = False) -> np.ndarray:
    """Every complex number of ``dtype`` whose parts are both from ``parts``."""
    values = parts(dtype, small)
    real, imag = np.meshgrid(values, values, indexing="ij")
    z = np.empty(real.size, dtype)
    z.real, z.imag = real.ravel(), imag.ravel()
    return z


def pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of numbers of the small grid."""
    z = grid(dtype, small=True)
    first, second = np.meshgrid(z, z, indexing="ij")
    return first.ravel(), second.ravel()


def flags(fn, *operands) -> set[str]:
    """The floating-point errors numpy reports for ``fn(*operands)``."""
    seen: list[str] = []
    with np.errstate(all="call", call=lambda kind, flag: seen.append(kind)):
        fn(*operands)
    return set(seen)


def _canonical(array: np.ndarray) -> np.ndarray:
    """One row per element: its bits (a complex number's two parts), every NaN as one
    NaN; other dtypes as they are."""
    array = np.ascontiguousarray(np.atleast_1d(array))
    if array.dtype.kind not in "fc":
        return array.reshape(len(array), -1)
    floats = array.view(array.real.dtype).reshape(len(array), -1)
    bits = floats.view(f"u{floats.dtype.itemsize}").copy()
    bits[np.isnan(floats)] = np.array(np.nan, floats.dtype).view(bits.dtype)
    return bits


def assert_identical(got: np.ndarray, want: np.ndarray, inputs: tuple[np.ndarray, ...]) -> None:
    """Same dtype and values, bit for bit (NaN equal to NaN)."""
    assert got.dtype == want.dtype, f"dtype {got.dtype} != numpy's {want.dtype}"
    differ = (_canonical(got) != _canonical(want)).any(axis=1)
    if differ.any():
        index = np.flatnonzero(differ)[:4]
        shown = [tuple(operand[i] for operand in inputs) for i in index]
        raise AssertionError(f"{differ.sum()} of {differ.size} differ, e.g. at {shown}: "
                             f"numfuse {got[index]}, numpy {want[index]}")


def assert_same_flags(name: str, fn, expected, *operands) -> None:
    """numfuse's ``fn`` reports the floating-point errors numpy's ``expected`` reports (but
    those numpy's loop clears, ``QUIET_IN_NUMPY``)."""
    quiet = QUIET_IN_NUMPY.get(name, set())
    assert flags(fn, *operands) - quiet == flags(expected, *operands) - quiet


def jitted(name: str):
    ufunc = OPS[name].reference
    if ufunc.nin == 1:
        return numfuse.jit(lambda z: ufunc(z))
    return numfuse.jit(lambda a, b: ufunc(a, b))


# ------------------------------------------------------------------ finding the functions


def test_numpys_scalar_complex_functions_are_found() -> None:
    """On this numpy every transcendental complex ufunc of numfuse's has its function."""
    for name in ("exp", "log", "log10", "log2", "log1p", "expm1", "exp2", "sqrt", "sin",
                 "cos", "tan", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan",
                 "arcsinh", "arccosh", "arctanh", "power"):
        for dtype in COMPLEX:
            found = numpy_loops.function(name, (dtype,) * getattr(np, name).nin)
            assert found is not None, (name, dtype)
            assert numpy_loops.available()[found.symbol] == found.address
    assert numpy_loops.function("float_power", (COMPLEX[1],) * 2) is not None


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", ["exp", "tanh", "sqrt", "arccosh", "power"])
def test_a_found_function_computes_numpys_values(name: str, dtype: np.dtype) -> None:
    """Called through ctypes as the kernels call it: ``f(&in..., &out)``."""
    ufunc = getattr(np, name)
    found = numpy_loops.function(name, (dtype,) * ufunc.nin)
    assert found is not None
    part = ctypes.c_float if dtype == COMPLEX[0] else ctypes.c_double
    pointer = ctypes.POINTER(part * 2)
    call = ctypes.CFUNCTYPE(None, *[pointer] * (ufunc.nin + 1))(found.address)
    z = grid(dtype, small=True)
    operands = [z, z[::-1]][:ufunc.nin]
    got = np.empty_like(z)
    for index in range(z.size):
        slots = [(part * 2)(value.real, value.imag) for value in
                 (operand[index] for operand in operands)] + [(part * 2)()]
        call(*[ctypes.pointer(slot) for slot in slots])
        got[index] = complex(slots[-1][0], slots[-1][1])
    with np.errstate(all="ignore"):
        assert_identical(got, ufunc(*operands), tuple(operands))


@pytest.mark.parametrize(("name", "dtypes"), [
    ("exp", ("float64",)),                    # real loops are numfuse's own
    ("add", ("complex128", "complex128")),    # not a generic loop
    ("absolute", ("complex128",)),
    ("power", ("complex64", "complex128")),   # mixed dtypes
    ("matmul", ("complex128", "complex128")),  # a gufunc
    ("no_such_ufunc", ("complex128",)),
    ("float_power", ("complex64", "complex64")),  # numpy has no complex64 loop
])
def test_nothing_is_offered_for_other_loops(name: str, dtypes: tuple[str, ...]) -> None:
    assert numpy_loops.function(name, tuple(np.dtype(dtype) for dtype in dtypes)) is None


def test_the_functions_key_names_them_all() -> None:
    assert numpy_loops.key() == numpy_loops.key()
    assert all(symbol.startswith("numfuse.numpy.") for symbol in numpy_loops.available())


# ------------------------------------------------------------------ every complex ufunc


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary_complex_ufuncs_at_extremes_match_numpy(name: str, dtype: np.dtype) -> None:
    ufunc, fn = OPS[name].reference, jitted(name)
    z = grid(dtype)
    with np.errstate(all="ignore"):
        assert_identical(fn(z), ufunc(z), (z,))
    assert_same_flags(name, fn, ufunc, z)


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", BINARY)
def test_binary_complex_ufuncs_at_extremes_match_numpy(name: str, dtype: np.dtype) -> None:
    ufunc, fn = OPS[name].reference, jitted(name)
    a, b = pairs(dtype)
    with np.errstate(all="ignore"):
        assert_identical(fn(a, b), ufunc(a, b), (a, b))
    assert_same_flags(name, fn, ufunc, a, b)


def test_the_operators_of_complex_arrays_match_numpy_at_extremes() -> None:
    """``*``, ``/`` and ``**`` of arrays are numpy's multiply, divide and power."""
    a, b = pairs(COMPLEX[0])
    fn = numfuse.jit(lambda a, b: (a * b, a / b, a ** b, a * a))
    with np.errstate(all="ignore"):
        for got, want in zip(fn(a, b), (a * b, a / b, a ** b, a * a), strict=True):
            assert_identical(got, want, (a, b))


def test_tanh_and_exp_of_large_parts_keep_a_finite_part() -> None:
    """The issue's cases: numba's tanh gave nan+nanj, its complex64 functions inf±infj."""
    z = np.array([50 + 1j, -800 + 0.5j], np.complex64)
    big = np.array([-89 + 2j, 89.5 + 3j], np.complex64)
    fn = numfuse.jit(lambda z, big: (np.tanh(z), np.sin(big * 1j), np.cosh(big), np.exp(big)))
    with np.errstate(all="ignore"):
        want = (np.tanh(z), np.sin(big * 1j), np.cosh(big), np.exp(big))
        for got, expected in zip(fn(z, big), want, strict=True):
            assert_identical(got, expected, (z, big))
    assert np.isfinite(want[0]).all() and np.isfinite(want[3].imag).any()


CACHED = """
import json
import numpy as np
import numfuse
from numfuse import hooks
z = np.array([50 + 1j, 1e-300 + 710j, np.inf + 0j, 1 + 1j])
with hooks.recording() as events, np.errstate(all="ignore"):
    got = numfuse.jit(lambda z: (np.tanh(z), z ** z, np.arccosh(z)))(z)
    want = (np.tanh(z), z ** z, np.arccosh(z))
print(json.dumps({"from_cache": [event.from_cache for event in events],
                  "same": all(np.array_equal(g, w, equal_nan=True)
                              for g, w in zip(got, want))}))
"""


def test_kernels_calling_numpys_functions_load_from_the_disk_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The functions are registered before a cached kernel is loaded in a new process."""
    monkeypatch.setenv("NUMFUSE_CACHE_DIR", str(tmp_path))
    store.reset_cache_settings()
    try:
        namespace: dict = {}
        exec(compile(CACHED, "<cached>", "exec"), namespace)  # compiles into tmp_path
    finally:
        monkeypatch.undo()
        store.reset_cache_settings()
    environment = {**os.environ, "NUMFUSE_CACHE_DIR": str(tmp_path),
                   "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.run([sys.executable, "-c", CACHED], cwd=REPO, env=environment,
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    assert json.loads(process.stdout.strip().splitlines()[-1]) == {"from_cache": [True],
                                                                   "same": True}


def test_without_numpys_functions_the_kernel_holds_numbas(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where numpy's function is not found, numba's is linked into the kernel's code: a
    kernel that only declared it called the copy in numba's JIT, and crashed when loaded
    from the disk cache in another process."""
    monkeypatch.setattr(numpy_loops, "function", lambda name, arguments: None)
    z = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j])  # ordinary values: numba's differ at extremes
    compiled = numfuse.compile(lambda z: np.tanh(z) * 2, z, cache=False)
    np.testing.assert_allclose(compiled(z), np.tanh(z) * 2, rtol=1e-13)
    declared = [line for line in compiled.kernels[0].llvm_ir().splitlines()
                if line.startswith("declare") and "tanh" not in line and "@llvm." not in line]
    assert not [line for line in declared if "cdynamic" in line], declared


# ------------------------------------------------------------------ element by element


@pytest.mark.slow
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", UNARY)
def test_unary_flags_match_numpy_element_by_element(name: str, dtype: np.dtype) -> None:
    ufunc, fn = OPS[name].reference, jitted(name)
    z = grid(dtype)
    for index in range(z.size):
        assert_same_flags(name, fn, ufunc, z[index:index + 1])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
@pytest.mark.parametrize("name", BINARY)
def test_binary_flags_match_numpy_element_by_element(name: str, dtype: np.dtype) -> None:
    ufunc, fn = OPS[name].reference, jitted(name)
    a, b = pairs(dtype)
    for index in range(a.size):
        assert_same_flags(name, fn, ufunc, a[index:index + 1], b[index:index + 1])
