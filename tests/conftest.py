"""Shared helpers: compare numfuse results with numpy's, leaf by leaf.

``assert_same(actual, expected)`` checks what a caller could observe: the container
structure, the type of every leaf (ndarray, numpy scalar or Python number), its dtype and
shape, and its values — bit for bit by default (so ``-0.0`` differs from ``0.0``), with
NaNs equal to NaNs whatever their payload.  ``rtol``/``atol`` allow a tolerance for results
of transcendental functions, where numba's libm may differ from numpy's by an ulp.
"""

from __future__ import annotations

import inspect
import os
import tempfile
import warnings
from typing import Any

import numpy as np

import numfuse

# The suite compiles into a disk cache of its own, removed at exit, so no test depends on
# kernels that an earlier run left in the user's cache.
_disk_cache = tempfile.TemporaryDirectory(prefix="numfuse-test-cache-")
os.environ["NUMFUSE_CACHE_DIR"] = _disk_cache.name


def assert_same(actual: Any, expected: Any, *, rtol: float = 0.0, atol: float = 0.0,
                path: str = "result") -> None:
    """Assert ``actual`` is what numpy gave as ``expected`` (type, dtype, shape, values)."""
    assert type(actual) is type(expected), (
        f"{path}: type {type(actual).__name__} != numpy's {type(expected).__name__}"
    )
    if isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], rtol=rtol, atol=atol, path=f"{path}[{key!r}]")
        return
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_same(got, want, rtol=rtol, atol=atol, path=f"{path}[{index}]")
        return
    if isinstance(expected, (np.ndarray, np.generic, bool, int, float, complex)):
        _assert_values(np.asarray(actual), np.asarray(expected), rtol, atol, path)
        return
    assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _assert_values(actual: np.ndarray, expected: np.ndarray, rtol: float, atol: float,
                   path: str) -> None:
    assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind == "c":
        _assert_values(actual.real, expected.real, rtol, atol, f"{path}.real")
        _assert_values(actual.imag, expected.imag, rtol, atol, f"{path}.imag")
        return
    if expected.dtype.kind != "f":
        mismatch = actual != expected
        assert not mismatch.any(), (
            f"{path}: differs at {np.argwhere(mismatch)[:5].tolist()}: "
            f"{actual[mismatch][:5]} != {expected[mismatch][:5]}"
        )
        return
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(actual), nan), f"{path}: NaNs differ: {actual} vs {expected}"
    got, want = actual[~nan], expected[~nan]
    if rtol or atol:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=path)
        return
    bits = np.dtype(f"u{expected.dtype.itemsize}")
    mismatch = got.view(bits) != want.view(bits)
    assert not mismatch.any(), (
        f"{path}: not bit-identical: {got[mismatch][:5]!r} != {want[mismatch][:5]!r}"
    )


def line_of(fn: Any, marker: str) -> int:
    """The line number of the first line of ``fn``'s source that contains ``marker``."""
    lines, start = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if marker in line:
            return start + offset
    raise AssertionError(f"{marker!r} is not in the source of {fn.__name__}")


def numpy_result(fn: Any, *args: Any) -> Any:
    """What the undecorated function returns when numpy runs it."""
    with np.errstate(all="ignore"):
        return fn(*args)


def check(fn: Any, *args: Any, rtol: float = 0.0, atol: float = 0.0) -> Any:
    """Run ``fn`` jitted and with numpy on the same arguments and compare the results."""
    expected = numpy_result(fn, *args)
    actual = numfuse.jit(fn)(*args)
    assert_same(actual, expected, rtol=rtol, atol=atol)
    return actual


def observe(fn: Any, *args: Any, **errstate: str) -> tuple[Any, list[tuple[str, str]]]:
    """(result, or the exception raised, and the warnings given) of ``fn(*args)`` under
    ``np.errstate(**errstate)``; a warning is its category and its message up to
    " encountered" (numpy names its loop after that, numfuse its kernel)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(**errstate):
            try:
                result: Any = fn(*args)
            except Exception as error:  # compared with numpy's below
                result = error
    return result, [(warning.category.__name__, str(warning.message).split(" encountered")[0])
                    for warning in caught]


def assert_like_numpy(fn: Any, *args: Any, jitted: Any = None, rtol: float = 0.0) -> Any:
    """``jitted`` (default: a new ``numfuse.jit(fn)``) behaves as numpy running ``fn``:
    the same result (type, dtype, shape, values; within ``rtol`` where given, for
    functions numpy computes differently on different CPUs) and the same warnings by
    default, and under ``np.errstate(all="raise")`` the same result or the same
    exception."""
    jitted = numfuse.jit(fn) if jitted is None else jitted
    results = []
    for errstate in ({}, {"all": "raise"}):
        expected, expected_warnings = observe(fn, *args, **errstate)
        actual, actual_warnings = observe(jitted, *args, **errstate)
        assert actual_warnings == expected_warnings, (errstate, actual_warnings)
        if isinstance(expected, Exception):
            assert type(actual) is type(expected), f"numfuse gave {actual!r}, numpy {expected!r}"
            assert str(actual).split(" encountered")[0] == str(expected).split(" encountered")[0]
        else:
            assert not isinstance(actual, Exception), f"numfuse raised {actual!r}"
            assert_same(actual, expected, rtol=rtol)
        results.append(expected)
    return results[0]
