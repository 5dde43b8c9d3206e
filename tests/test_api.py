"""The public API: jit, compile, trace, Compiled, Kernel and the in-memory kernel cache."""

from __future__ import annotations

import ast
import collections
import contextlib
import dataclasses
import functools
import mmap
import os
import random
import subprocess
import sys
import types
import warnings
from random import random as _imported_random

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same, check, line_of, numpy_result
from numpy.random import rand as _imported_rand

import numfuse
import numfuse.api
from numfuse import memory
from numfuse.api import _MISS as MISS
from numfuse.errors import ObjectValuesError, UnsupportedOperationError
from numfuse.kernel import kernel_key
from numfuse.trace import others_may_draw

X = np.linspace(-2.0, 3.0, 7)
M = np.arange(12.0).reshape(3, 4) - 4.5


def logp_and_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


# ------------------------------------------------------------------------------ decorating


def test_jit_bare_decorator():
    @numfuse.jit
    def double(x):
        """Doubles."""
        return x * 2.0

    assert isinstance(double, numfuse.Jitted)
    assert double.__name__ == "double"
    assert double.__doc__ == "Doubles."
    assert_same(double(X), X * 2.0)


def test_jit_with_empty_options():
    @numfuse.jit()
    def double(x):
        return x * 2.0

    assert isinstance(double, numfuse.Jitted)
    assert_same(double(X), X * 2.0)


def test_jit_with_static_argnums_option():
    @numfuse.jit(static_argnums=(1,))
    def power_sum(x, terms):
        total = x * 0.0
        for k in range(terms):
            total = total + x ** float(k)
        return total

    assert_same(power_sum(X, 3), 1.0 + X + X ** 2.0)
    assert_same(power_sum(X, 2), 1.0 + X)
    assert len(power_sum.compiled) == 2


def test_settings_arguments_are_static_values():
    """``copy=True``, ``axis=None``, ``mode="same"``, a dtype: arguments that configure the
    function are passed as concrete values, one compilation per value (bools included)."""
    def configured(x, copy=True, axis=None, mode="same", dtype=np.float64):
        y = np.copy(x) if copy else x * 1
        if mode == "same":
            y = y * 2
        return y.sum(axis=axis).astype(dtype)

    jitted = numfuse.jit(configured)
    for args in ((), (False,), (True, 0), (True, None, "other", np.float32)):
        assert_same(jitted(M, *args), configured(M, *args))
    flag = numfuse.jit(lambda x, negate: -x if negate else x)
    assert_same(flag(X, True), -X)
    assert_same(flag(X, False), X)  # the fast path keys on the bool's value
    assert_same(flag(X, True), -X)
    compiled = numfuse.compile(configured, M, False, 1)
    assert_same(compiled(M, False, 1), configured(M, False, 1))


def test_scalar_arguments_used_as_python_values_become_static():
    """``x[:n]``, ``range(n)``, ``np.arange(n)``: the int's value is needed, so the function
    compiles once per value of ``n``; other scalars stay traced."""
    def head(x, n, scale):
        return x[:n] * scale + sum(range(n))

    jitted = numfuse.jit(head)
    for n, scale in ((3, 2.0), (5, 2.0), (3, 7.5)):
        assert_same(jitted(X, n, scale), head(X, n, scale))
    assert jitted.auto_static == {1}
    assert len(jitted.compiled) == 2  # per n, not per scale
    assert_same(numfuse.compile(head, X, 4, 1.5)(X, 4, 3.0), head(X, 4, 3.0))
    with pytest.raises(numfuse.ConcretizationError, match="bool"):
        numfuse.jit(lambda x: x if x.sum() > 0 else -x)(X)


def test_scalar_arguments_given_to_numpy_functions_are_static_unless_data():
    """``axis=``, ``n=``, ``q=`` may decide a result's shape: a scalar argument passed to a
    numpy function is static; as an index or a fill value it stays traced."""
    def centred(x, axis=-1, n=1):
        return x - x.mean(axis=axis, keepdims=True), np.diff(x, n=n, axis=axis)

    jitted = numfuse.jit(centred)
    for args in ((), (0,), (0, 2), (1, 2)):
        assert_same(jitted(M, *args), centred(M, *args))
    assert jitted.auto_static == {1, 2}
    pick = numfuse.jit(lambda x, row, fill: (x[row], np.full(2, fill)))
    for row, fill in ((0, 1.5), (2, -3.0)):
        assert_same(pick(M, row, fill), (M[row], np.full(2, fill)))
    assert not pick.auto_static and len(pick.compiled) == 1
    # the data of a numpy function stays traced, and its later warnings are numpy's
    data = numfuse.jit(lambda x, s: (np.all(s), np.stack([s, s]), np.logaddexp(s, s) + x))
    with pytest.warns(RuntimeWarning, match="invalid value"):
        assert_same(data(X, np.nan), (np.True_, np.array([np.nan, np.nan]),
                                      np.full_like(X, np.nan)))
    assert_same(data(X, 1.0), (np.True_, np.array([1.0, 1.0]), np.logaddexp(1.0, 1.0) + X))
    assert not data.auto_static and len(data.compiled) == 1


# ------------------------------------------------------------------------- recompilation


def test_recompiles_on_new_dtype_ndim_and_broadcast_pattern_but_not_size():
    jitted = numfuse.jit(lambda x, y: x * y - 1.0)
    jitted(np.ones(4), np.ones(4))
    assert len(jitted.compiled) == 1
    jitted(np.ones(9), np.ones(9))                      # new size: same signature
    assert len(jitted.compiled) == 1
    jitted(np.ones(4, np.float32), np.ones(4))          # new dtype
    assert len(jitted.compiled) == 2
    jitted(np.ones((2, 4)), np.ones(4))                 # new ndim
    assert len(jitted.compiled) == 3
    jitted(np.ones((1, 4)), np.ones(4))                 # new broadcast pattern
    assert len(jitted.compiled) == 4
    jitted(np.ones((5, 3)), np.ones(3))                 # new sizes of a known pattern
    assert len(jitted.compiled) == 4


def test_byte_order_is_not_part_of_the_signature():
    jitted = numfuse.jit(lambda x: x * 2.0 + 1.0)
    little = np.arange(5.0)
    big = little.astype(">f8")
    assert_same(jitted(big), big * 2.0 + 1.0)
    assert_same(jitted(little), little * 2.0 + 1.0)
    assert_same(jitted(big), big * 2.0 + 1.0)
    assert len(jitted.compiled) == 1


def test_alternating_signatures_each_get_their_own_program():
    jitted = numfuse.jit(lambda x, s: x * s)
    calls = [(F32, 2.0), (X, 2.0), (F32, 2), (X[:1], 2.0), (F32, 2.0), (X.reshape(7, 1), 2.0),
             (X, 2.0), (np.float32(1.5), 2.0), (np.array(1.5), 2.0)]
    for args in calls:
        assert_same(jitted(*args), args[0] * args[1])
    assert len(jitted.compiled) == 7


def test_concurrent_first_calls_from_threads():
    import concurrent.futures

    jitted = numfuse.jit(lambda x, y: (x * y, x - y))
    inputs = [(X, X[::-1].copy()), (F32, F32[::-1].copy())] * 4
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda args: jitted(*args), inputs))
    for args, result in zip(inputs, results, strict=True):
        assert_same(result, (args[0] * args[1], args[0] - args[1]))
    assert len(jitted.compiled) == 2


def test_python_scalar_kind_is_part_of_the_signature():
    jitted = numfuse.jit(lambda x, s: x * s)
    assert_same(jitted(X, 2.0), X * 2.0)
    assert_same(jitted(X, 3.5), X * 3.5)
    assert len(jitted.compiled) == 1
    assert_same(jitted(X, 2), X * 2)
    assert len(jitted.compiled) == 2
    assert_same(jitted(X, np.float64(2.0)), X * np.float64(2.0))
    assert len(jitted.compiled) == 3


# ------------------------------------------------------------------ weak Python scalars

F32 = np.array([0.1, -2.5, 3.0], dtype=np.float32)
I8 = np.array([-128, -1, 0, 5, 127], dtype=np.int8)
U8 = np.array([0, 1, 200, 255], dtype=np.uint8)
B = np.array([True, False, True])


def multiply(a, b):
    return a * b


def add(a, b):
    return a + b


@pytest.mark.parametrize(("fn", "a", "b"), [
    pytest.param(multiply, F32, 0.1, id="float32*float-stays-float32"),
    pytest.param(multiply, F32, 3, id="float32*int-stays-float32"),
    pytest.param(multiply, F32, 1j, id="float32*complex-is-complex64"),
    pytest.param(add, I8, 3, id="int8+int-stays-int8"),
    pytest.param(add, U8, 100, id="uint8+int-wraps"),
    pytest.param(multiply, I8, 0.5, id="int8*float-is-float64"),
    pytest.param(add, B, 2, id="bool+int-is-int64"),
    pytest.param(add, 1.5, F32, id="float-on-the-left"),
    pytest.param(add, 1.5, 2, id="python-float+int-is-python-float"),
    pytest.param(add, 3, 4, id="python-int+int-is-python-int"),
    pytest.param(multiply, 2j, 1.5, id="python-complex"),
])
def test_python_scalar_arguments_are_weak(fn, a, b):
    check(fn, a, b)


@pytest.mark.parametrize(("a", "b"), [
    pytest.param(I8, True, id="int8+bool"),
    pytest.param(F32, False, id="float32+bool"),
    pytest.param(True, True, id="bool+bool"),  # static values: Python's own True + True
])
def test_python_bool_arguments(a, b):
    check(add, a, b)


def test_out_of_range_python_int_argument_raises_like_numpy():
    with pytest.raises(OverflowError):
        numpy_result(add, I8, 1000)
    with pytest.raises(OverflowError):
        numfuse.jit(add)(I8, 1000)


def test_python_int_computed_from_an_argument_is_range_checked_like_numpy():
    """``n * 2`` is a Python int (200) before it meets the int8 array: numpy raises.  Found
    by a conformance hunt to wrap silently; checked at each call, from the arguments,
    without compiling per value."""
    def add_twice(x, n):
        return x + n * 2

    def subtract_negated(x, n):
        return x * (n + 1) - (-n)

    jitted = numfuse.jit(add_twice)
    for n in (100, 20, 100, -64, -65):
        if -128 <= n * 2 <= 127:
            assert_same(jitted(I8, n), numpy_result(add_twice, I8, n))
        else:
            with pytest.raises(OverflowError):
                numpy_result(add_twice, I8, n)
            with pytest.raises(OverflowError, match="out of bounds for int8"):
                jitted(I8, n)
    assert len(jitted.compiled) == 1
    negated = numfuse.jit(subtract_negated)
    assert_same(negated(U8, 0), numpy_result(subtract_negated, U8, 0))
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        negated(U8, 1)


def test_comparison_with_out_of_range_python_int_argument_is_exact():
    check(lambda x, n: (x < n, x == n, x >= n), I8, 1000)
    check(lambda x, n: (x < n, x != n), U8, -1)


def test_where_with_out_of_range_python_int_argument():
    check(lambda c, x, n: np.where(c, x, n), I8 > 0, I8, 1000)


def test_python_int_argument_beyond_int64_runs_with_numpy():
    """A Python int of 2**63 or more reaches numpy as a uint64 or a float: numpy runs the
    function (kernels take Python ints as int64)."""
    for args in ((np.array([1, 2], dtype=np.uint64), 2**63 + 1), (X, 2**63), (X, 2**64 - 1)):
        with pytest.warns(RuntimeWarning, match="beyond int64"):
            check(add, *args)


# ---------------------------------------------------------------------- numfuse.compile


def test_compile_returns_compiled_that_runs_any_size():
    compiled = numfuse.compile(logp_and_grad, X, 0.5)
    assert isinstance(compiled, numfuse.Compiled)
    assert_same(compiled(X, 0.5), logp_and_grad(X, 0.5))
    longer = np.linspace(0.0, 1.0, 31)
    assert_same(compiled(longer, -1.25), logp_and_grad(longer, -1.25))


def test_compile_accepts_a_jitted_function():
    jitted = numfuse.jit(logp_and_grad)
    compiled = numfuse.compile(jitted, X, 0.5)
    assert_same(compiled(X, 0.5), logp_and_grad(X, 0.5))


@pytest.mark.parametrize(("args", "words"), [
    pytest.param((X.astype(np.float32), 0.5), ["argument 0", "dtype", "float32"], id="dtype"),
    pytest.param((np.ones((2, 7)), 0.5), ["argument 0", "dimensions", "1 vs 2"], id="ndim"),
    pytest.param((np.ones(1), 0.5), ["argument 0", "length-1", "axes [0]"], id="broadcast"),
    pytest.param((X, 1), ["argument 1", "Python int", "dtype"], id="python-kind"),
    pytest.param((X, np.float64(0.5)), ["argument 1", "numpy scalar"], id="strong-scalar"),
    pytest.param((X,), ["2 arguments", "with 1"], id="too-few"),
    pytest.param((X, 0.5, 0.5), ["2 arguments", "with 3"], id="too-many"),
])
def test_compiled_called_with_another_signature_raises(args, words):
    compiled = numfuse.compile(logp_and_grad, X, 0.5)
    with pytest.raises(numfuse.SignatureMismatchError) as excinfo:
        compiled(*args)
    assert isinstance(excinfo.value, TypeError)
    message = str(excinfo.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    assert "numfuse.compile" in message


def test_broadcast_mismatch_message_names_the_axis():
    compiled = numfuse.compile(lambda x: x + 1.0, np.ones((3, 4)))
    with pytest.raises(numfuse.SignatureMismatchError, match=r"axes \[1\]"):
        compiled(np.ones((3, 1)))


def test_compile_with_static_argument_checks_its_value():
    jitted = numfuse.jit(lambda x, n: x * float(n), static_argnums=(1,))
    compiled = numfuse.compile(jitted, X, 3)
    assert_same(compiled(X, 3), X * 3.0)
    with pytest.raises(numfuse.SignatureMismatchError, match="static argument 1"):
        compiled(X, 4)


def test_compiled_with_a_non_numeric_static_argument_can_be_called():
    def apply(x, mode):
        return x + 1.0 if mode == "add" else x - 1.0

    compiled = numfuse.compile(numfuse.jit(apply, static_argnums=(1,)), X, "add")
    assert_same(compiled(X, "add"), apply(X, "add"))
    with pytest.raises(numfuse.SignatureMismatchError, match="static argument 1"):
        compiled(X, "subtract")


def test_compiled_refuses_a_static_argument_equal_in_value_but_of_another_type():
    """The static value was 1; 1.0 compares equal but gives numpy another result dtype."""
    compiled = numfuse.compile(numfuse.jit(multiply, static_argnums=(1,)), I8, 1)
    assert_same(compiled(I8, 1), I8 * 1)
    with pytest.raises(numfuse.SignatureMismatchError, match="static argument 1"):
        compiled(I8, 1.0)


def test_unsupported_argument_dtype_names_the_argument():
    with pytest.raises(numfuse.UnsupportedDtypeError, match=r"argument 1 \('b'\) has dtype <U1"):
        numfuse.compile(add, X, np.array(list("abcdefg")))


def test_arguments_that_are_not_data_are_python_values_with_pythons_errors():
    with pytest.raises(TypeError, match="unsupported operand"):  # a set, as Python
        numfuse.jit(lambda x: x + 1)({"not an array"})
    with pytest.raises(TypeError, match="unsupported operand"):  # a dict, as Python
        numfuse.jit(lambda x: x + 1)({"not": "an array"})
    with pytest.raises(TypeError, match="can only concatenate str"):  # a setting, as Python
        numfuse.jit(lambda x: x + 1)("text")


@dataclasses.dataclass
class _Options:
    scale: float = 2.0


def test_functions_slices_and_option_objects_are_static_values():
    """An argument that is not data (a function, a slice, a range, an options object,
    hashable or not) is passed as itself, one compilation per value (by ``==``)."""
    x = np.arange(5.0)
    applied = numfuse.jit(lambda fn, a: fn(a) + 1)
    assert_same(applied(np.tanh, x), np.tanh(x) + 1)
    assert_same(applied(lambda v: v * 2, x), x * 2 + 1)
    taken = numfuse.jit(lambda a, s: a[s] * 2)
    for index in (slice(1, 3), slice(None, None, -1), slice(1, 3)):
        assert_same(taken(x, index), x[index] * 2)
    assert len(taken.compiled) == 2
    assert_same(numfuse.jit(lambda a, r: a[r.start:r.stop])(x, range(1, 3)), x[1:3])
    scaled = numfuse.jit(lambda a, options: a * options.scale)
    for options in (_Options(), _Options(), _Options(3.0)):
        assert_same(scaled(x, options), x * options.scale)
    assert len(scaled.compiled) == 2


class _Activations:
    tanh = numfuse.jit(np.tanh)
    doubled = numfuse.jit(functools.partial(np.multiply, 2.0))

    @numfuse.jit
    def shifted(self, x):
        return x + 1


def test_a_jitted_ufunc_or_partial_as_a_class_attribute_binds_nothing():
    """As Python binds nothing to a ufunc or a functools.partial found on a class, nor to
    their jitted functions; a jitted function defined in the class body is a method."""
    layer = _Activations()
    assert_same(layer.tanh(X), np.tanh(X), rtol=1e-15)
    assert_same(layer.doubled(X), X * 2)
    assert_same(layer.shifted(X), X + 1)


def test_static_argnums_may_be_one_int_as_jaxs():
    assert_same(numfuse.jit(lambda x, n: x * n, static_argnums=1)(X, 3), X * 3)
    assert_same(numfuse.grad(lambda x, n: np.sum(x**n), static_argnums=1)(X, 2), 2 * X)
    with pytest.raises(TypeError, match="an int or a sequence of ints"):
        numfuse.jit(lambda x: x, static_argnums=0.0)


def test_static_objects_are_told_apart_by_their_fields_values_and_lists_of_names_static():
    """``Opt(2) == Opt(2.0)``, but an int and a float compute otherwise; a list or tuple
    holding names (or None) is no data: a static value (it had raised as an array of
    strings)."""
    jitted = numfuse.jit(lambda x, options: x * options.scale)
    for options in (_Options(2), _Options(2.0), _Options(-0.0), _Options(0.0)):
        assert_same(jitted(np.arange(3), options), np.arange(3) * options.scale)
    assert len(jitted.compiled) == 4
    keyed = numfuse.jit(lambda x, names: {name: x * 2 for name in names})
    assert_same(keyed(X, ["a", "b"]), {"a": X * 2, "b": X * 2})
    assert_same(numfuse.jit(lambda x, spec: x * spec[1])(X, ("linear", 2.0)), X * 2.0)
    assert_same(numfuse.jit(lambda x, spec: x * spec[0])(X, (2.0, None)), X * 2.0)


def test_static_floats_are_told_apart_by_their_bits():
    """``0.0`` and ``-0.0`` compare equal but give other results; a NaN equals nothing
    but is one value."""
    x = np.array([0.0, 1.0])
    jitted = numfuse.jit(lambda x, s: x * s, static_argnums=(1,))
    for value in (0.0, -0.0, float("nan"), float("nan")):
        assert_same(jitted(x, value), x * value)
    assert len(jitted.compiled) == 3


def _min_max(x, feature_range=(0, 1)):  # scikit-learn's MinMaxScaler
    low, high = feature_range
    return (x - x.min()) / (x.max() - x.min()) * (high - low) + low


def _horner(x, coefficients):
    total = 0.0
    for coefficient in coefficients:
        total = total * x + coefficient
    return total


@pytest.mark.parametrize(("fn", "args"), [
    (_min_max, (np.arange(4, dtype=np.float32), (-1.0, 1.0))),
    (_horner, (np.arange(3, dtype=np.float32), [1.0, 2.0, 3.0])),
    (lambda x, b: np.clip(x, b[0], b[1]), (np.arange(3, dtype=np.float32), [0.5, 1.5])),
    (lambda x, m: x * m[1][0], (np.ones(2, np.float32), [[1.0, 2.0], [3.0, 4.0]])),
    (lambda x, c: x * c[0], (np.ones(2, np.int16), [2, 1])),
    (lambda x, c: x * c, (np.ones(3, np.float32), [1.0, 2.0, 3.0])),
], ids=["unpacked", "iterated", "indexed", "nested", "int-list", "as-data"])
def test_items_of_a_list_or_tuple_of_numbers_are_python_numbers(fn, args):
    """numpy takes a Python float out of ``(-1.0, 1.0)``, weak beside a float32 array;
    the list as a whole is a float64 array, as numpy makes it.  A new list of the same
    kind does not compile again."""
    check(fn, *args)
    jitted = numfuse.jit(_horner)
    for coefficients in ([1.0, 2.0], [5.0, -6.0]):
        assert_same(jitted(np.float32(2.0), coefficients), _horner(np.float32(2.0),
                                                                   coefficients))
    assert len(jitted.compiled) == 1


def _rescaled(x, bounds):
    low, high = bounds
    return (x - low) / (high - low), low // 2


@pytest.mark.parametrize("bounds", [(0, 1.5), [0, 1.5], [1.5, 0], (3, 0.5)])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_items_of_a_list_of_ints_and_floats_are_the_python_numbers_they_are(bounds, dtype):
    """Found by a conformance hunt: ``low, high = (0, 1.5)`` took the items from the
    float64 array numpy makes of the tuple, strong: a float32 array became float64."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        check(_rescaled, np.arange(1, 4, dtype=dtype), bounds)


def _reshaped(x, shape):
    return x.reshape(shape[0], -1) * 2


def _counted(x, config):
    bins, scale = config
    return np.histogram(x * scale, bins=bins)[0]


@pytest.mark.parametrize(("fn", "lists"), [
    (_reshaped, ([2, 3], [4, 1], [2, 3])), (_counted, ([3, 2], [5, 1])),
], ids=["reshape", "histogram-bins"])
def test_an_int_item_of_a_list_deciding_a_size_makes_the_list_static(fn, lists):
    """Found by a conformance hunt: ``x.reshape(b[0], -1)`` with ``b = [2, 3]`` raised
    CallShapeError (the size depends on the item's value, which per-shape compiling does
    not follow): such lists are static values once that shows."""
    jitted = numfuse.jit(fn)
    x = np.arange(8.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        for values in lists:
            assert_same(jitted(x, values), fn(x, values))


def test_an_int_item_of_a_list_beyond_the_arrays_range_raises_as_numpy():
    """Found by a conformance hunt: ``x * b[0]`` with an int8 array and ``b = [1000, 2]``
    wrapped where numpy raises OverflowError (the check was for int arguments only)."""
    jitted = numfuse.jit(lambda x, b: x * b[0] + b[1])
    x = np.arange(3, dtype=np.int8)
    assert_same(jitted(x, [2, 3]), x * 2 + 3)
    for values in ([1000, 2], [2, -200]):
        with pytest.raises(OverflowError, match="out of bounds for int8"):
            jitted(x, values)
    assert_same(numfuse.jit(lambda x, b: x * b[0])(x, [2, 1000]), x * 2)  # b[1] unused


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32, np.uint64, np.float32])
def test_items_of_a_list_reach_numpy_calls_as_python_numbers(dtype):
    """Found by a conformance hunt: ``np.clip(x, b[0], b[1])`` with ``b = [1, 3]`` gave
    numpy's call the items as 0-d int64 arrays, strong: an int64 result where numpy's is
    the uint8 array's dtype (``CallShapeError``)."""
    x = np.arange(5, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        check(lambda x, b: np.clip(x, b[0], b[1]), x, [1, 3])
        check(lambda x, b: x.clip(*b) * 2, x, [1, 3])


def test_list_argument_is_converted_like_numpy():
    jitted = numfuse.jit(lambda x: np.asarray(x) * 2)
    assert_same(jitted([1.0, 2.0, 3.0]), np.asarray([1.0, 2.0, 3.0]) * 2)


def _joined(a, b):
    return np.array(a + b)


def _horner_padded(x, coefficients):
    total = 0.0
    for coefficient in coefficients[::-1] + [0.0]:  # noqa: RUF005 (the list's +)
        total = total * x + coefficient
    return total


@pytest.mark.parametrize(("fn", "args"), [
    (_joined, ([1.0, 2.0], [3.0])),
    (_horner_padded, (np.array([2.0]), [1.0, 2.0, 3.0])),
    (lambda a: np.array(a * 2), ([1.0, 2.0],)),
    (lambda x, b: (x * 2, b), (np.ones(2), [0.0, 1.0])),
    (lambda x, b: (x * 2, b[1:]), (np.ones(2), (0.0, 1.0, 2.0))),
    (lambda a, b: a == b, ([1.0, 2.0], [1.0, 3.0])),
    (lambda a, b: a < b, ([1.0, 2.0], [1.0, 3.0])),
    (lambda x, a: x * a.count(1.0), (np.ones(2), [1.0, 2.0, 1.0])),
    (lambda x, a: x + a.index(2.0), (np.ones(2), [1.0, 2.0])),
    (lambda x, a: (x, a.copy()), (np.ones(2), [1.0, 2.0])),
    (lambda a: a * np.int64(2), ([1.0, 2.0],)),
], ids=["joined", "padded", "repeated", "returned", "sliced", "equal", "ordered", "count",
        "index", "copied", "repeated-by-numpy-int"])
def test_a_list_argument_of_numbers_joins_repeats_and_compares_as_a_list(fn, args):
    """Found by a conformance hunt: a list of Python numbers is traced as an array, and
    ``a + b`` added the items, ``a * 2`` doubled them, ``a == b`` compared them one by one
    and a returned list came back an array.  Python's own operator and methods apply
    there: numpy runs the function, warning once."""
    expected = fn(*args)
    jitted = numfuse.jit(fn)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="list or tuple"):
        got = jitted(*args)
    for result in (got, jitted(*args)):
        assert type(result) is type(expected)
        if isinstance(expected, tuple):
            assert_same(result[0], expected[0])
            assert result[1] == expected[1] and type(result[1]) is type(expected[1])
        else:
            assert_same(result, expected)


@pytest.mark.parametrize(("fn", "args"), [
    (lambda x, a: x + a, (np.ones(2), [1.0, 2.0])),
    (lambda x, a: np.asarray(a) * 2 + x, (np.ones(2), [1.0, 2.0])),
    (lambda x, a: x + np.array(a[1:]), (np.ones(2), [1.0, 2.0, 3.0])),
    (lambda x, a: np.float64(2.0) + a + x, (np.ones(2), [1.0, 2.0])),
    (lambda x, c: np.polyval(c, x), (np.ones(3), [1.0, 2.0, 3.0])),
    (lambda x, shape: x.reshape(shape + [1]), (np.arange(6.0), [2, 3])),  # noqa: RUF005
], ids=["with-array", "asarray", "sliced-then-array", "numpy-scalar", "polyval",
        "int-list-joined-static"])
def test_a_list_argument_of_numbers_beside_arrays_is_numpys_data_and_fuses(fn, args):
    """An array (or a numpy scalar, but for ``*``) takes the list as data: that fuses."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        check(fn, *args)


# ----------------------------------------------------------------- arguments and binding


def test_wrong_number_of_arguments_to_jitted_raises_type_error():
    jitted = numfuse.jit(logp_and_grad)
    with pytest.raises(TypeError, match="logp_and_grad"):
        jitted(X)
    with pytest.raises(TypeError, match="logp_and_grad"):
        jitted(X, 0.5, 1.0)
    with pytest.raises(TypeError):
        jitted(X, nu=0.5)


def test_keyword_arguments_bind_like_python():
    jitted = numfuse.jit(logp_and_grad)
    assert_same(jitted(X, mu=0.5), logp_and_grad(X, 0.5))
    assert_same(jitted(mu=0.5, x=X), logp_and_grad(X, 0.5))
    assert len(jitted.compiled) == 1
    assert_same(jitted(X, 0.5), logp_and_grad(X, 0.5))
    assert len(jitted.compiled) == 1


def test_default_arguments_are_used():
    def shifted(x, shift=1.5, scale=np.float32(2.0)):  # noqa: B008
        return (x + shift) * scale

    jitted = numfuse.jit(shifted)
    assert_same(jitted(F32), shifted(F32))
    assert_same(jitted(F32, 0.5), shifted(F32, 0.5))
    assert_same(jitted(F32, scale=np.float32(3.0)), shifted(F32, scale=np.float32(3.0)))


def test_keyword_only_argument_passed_by_keyword_is_used():
    def scaled(x, *, scale=2.0):
        return x * scale

    jitted = numfuse.jit(scaled)
    assert_same(jitted(X), scaled(X))
    assert_same(jitted(X, scale=5.0), scaled(X, scale=5.0))


def test_defaults_the_caller_leaves_out_are_the_functions_own():
    """A parameter left to its default is left out of the traced call too, so defaults
    numfuse cannot take as arguments (numpy's ``np._NoValue``, an array, a sentinel)
    apply as in Python."""
    sentinel = object()
    table = np.array([1.0, 2.0, 3.0])

    def picky(x, weights=table, marker=sentinel, *, offset=None):
        result = x[:3] * weights
        if marker is not sentinel:
            result = result + 1
        return result if offset is None else result + offset

    jitted = numfuse.jit(picky)
    assert_same(jitted(X), picky(X))
    assert_same(jitted(X, offset=2.0), picky(X, offset=2.0))
    assert_same(jitted(X, marker=1), picky(X, marker=1))
    # found by a conformance hunt: an array default changed in place after the first
    # call was not seen (it had been read once, while tracing)
    table[:] = [5.0, 6.0, 7.0]
    assert_same(jitted(X), picky(X))
    assert_same(jitted(X, offset=2.0), picky(X, offset=2.0))


@dataclasses.dataclass
class _Scale:
    factor: float = 2.0


def test_defaults_changed_in_place_are_seen_as_numpy_sees_them():
    """A dict default, an array inside a tuple default, a list default and an options
    object default were read once, while tracing: later changes were not seen."""
    options = {"scale": 2.0}
    pair = (np.ones(3), 2)
    offsets = [1.0, 2.0, 3.0]
    scale = _Scale()

    def fn(x, opts=options, w=pair, offs=offsets, *, by=scale):
        return x[:3] * opts["scale"] * w[0] + w[1] + np.asarray(offs) * by.factor

    jitted = numfuse.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.errors.NumpyFallbackWarning)
        assert_same(jitted(X), fn(X))
        options["scale"] = 5.0
        pair[0][:] = 7.0
        offsets[1] = -4.0
        scale.factor = 0.5
        assert_same(jitted(X), fn(X))
        assert_same(jitted(X, {"scale": 1.0}), fn(X, {"scale": 1.0}))


def test_ndarray_subclasses_with_their_own_semantics_run_as_written(tmp_path):
    """``np.matrix`` multiplies matrices with ``*`` and masked arrays skip masked elements:
    numpy runs the function (warning once per type); a memmap computes as an ndarray."""
    square = numfuse.jit(lambda a: a * a + 1)
    matrix = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    with pytest.warns(RuntimeWarning, match="numpy.matrix, an ndarray subclass"):
        assert_same(square(matrix), matrix * matrix + 1)
    masked = np.ma.masked_array([1.0, 2.0, 3.0], mask=[False, True, False])
    with pytest.warns(RuntimeWarning, match="MaskedArray"):
        result = square(masked)
    assert isinstance(result, np.ma.MaskedArray)
    assert result.mask.tolist() == [False, True, False]
    assert result.compressed().tolist() == [2.0, 10.0]
    mapped = np.memmap(tmp_path / "values", dtype=np.float64, mode="w+", shape=(4,))
    mapped[:] = [1.0, 2.0, 3.0, 4.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(square(mapped), np.asarray(mapped) ** 2 + 1)


class _Aligned(np.lib.mixins.NDArrayOperatorsMixin):
    """A container defining numpy's operations its own way (as a pandas Series does)."""

    def __init__(self, values, labels):
        self.values, self.labels = np.asarray(values), list(labels)

    def __array__(self, dtype=None, copy=None):
        return self.values

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        order = sorted(range(len(self.labels)), key=self.labels.__getitem__)
        aligned = [item.values[sorted(range(len(item.labels)), key=item.labels.__getitem__)]
                   if isinstance(item, _Aligned) else item for item in inputs]
        return _Aligned(getattr(ufunc, method)(*aligned, **kwargs),
                        [self.labels[index] for index in order])


def test_types_defining_numpys_operations_run_as_written():
    """An argument with an ``__array_ufunc__`` of its own (pandas aligns Series on their
    index) is numpy's to run, its type kept."""
    combine = numfuse.jit(lambda x, y: x * 2 + y)
    a, b = _Aligned([1.0, 2.0, 3.0], [0, 1, 2]), _Aligned([10.0, 20.0, 30.0], [2, 1, 0])
    with pytest.warns(RuntimeWarning, match="defines numpy's operations"):
        result = combine(a, b)
    assert isinstance(result, _Aligned)
    assert_same(result.values, np.array([32.0, 24.0, 16.0]))
    pd = pytest.importorskip("pandas")
    with pytest.warns(RuntimeWarning, match="Series"):
        series = combine(pd.Series([1.0, 2.0], index=[0, 1]), pd.Series([5.0, 7.0], index=[1, 0]))
    assert series.to_dict() == {0: 9.0, 1: 9.0}


def test_lists_of_different_lengths_are_numpys_to_take():
    """numpy makes no array of [[1, 2], [3]]; its functions take it as a list of arrays."""
    joined = numfuse.jit(lambda parts: np.concatenate(parts) * 2)
    with pytest.warns(RuntimeWarning, match="lists of different lengths"):
        assert_same(joined([[1, 2], [3]]), np.array([2, 4, 6]))
    with pytest.raises(ValueError, match="inhomogeneous"):  # numpy's own error
        numfuse.jit(lambda parts: np.asarray(parts) * 2)([[1, 2], [3]])


def _object_arithmetic(x, y=1.5):
    return x * 2 - y


def _object_square_root(x):
    return np.sqrt(x) + 1  # numpy calls each element's sqrt method: ints have none


@pytest.mark.parametrize(("fn", "args"), [
    (_object_arithmetic, (np.array([1, 2.5, 3], dtype=object),)),
    (_object_arithmetic, (np.array([[1, 2**70]], dtype=object), np.array([0.5, 1.0]))),
    (_object_arithmetic, (np.arange(3.0), np.array([1, 2.5, 3], dtype=object))),
    (lambda x, y: x / y, (np.array([1.0, 2.0], dtype=object), np.array([0.0, 1.0]))),
    (_object_square_root, (np.array([1.0, 4.0], dtype=object),)),
    (_object_square_root, (np.array([1, 4], dtype=object),)),
    (lambda x, y: x + y, (np.arange(2.0), np.array([1, "a"], dtype=object))),
    (lambda x: x + "!", (np.array(["a", "b"], dtype=object),)),
], ids=["numbers", "big-int", "second", "divide-by-zero", "sqrt", "sqrt-of-ints", "str-error",
        "strings"])
def test_object_arrays_run_with_numpy_warning_once(fn, args):
    """numpy computes object arrays with Python's operators per element (its results,
    its errors: ZeroDivisionError, a missing sqrt method); numfuse refused them, and now
    runs the function with numpy, warning once per function."""
    jitted = numfuse.jit(fn)
    try:
        fn(*args)
    except (ZeroDivisionError, TypeError) as error:  # numpy's own error, and no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
            with pytest.raises(type(error)):
                jitted(*args)
        assert_like_numpy(fn, *args, jitted=jitted)
        return
    expected = pytest.warns(numfuse.NumpyFallbackWarning,
                            match="dtype object, which numfuse cannot compile")
    with expected as caught:
        jitted(*args)  # marker
    ours = [warning for warning in caught if "numfuse" in str(warning.message)]
    assert [(warning.filename, warning.lineno) for warning in ours] == [
        (__file__, line_of(test_object_arrays_run_with_numpy_warning_once, "# marker"))]
    assert_like_numpy(fn, *args, jitted=jitted)  # no second warning


@pytest.mark.parametrize("values", [[2**70, 1], [1, 2**64], [[1.5, 2**80]], (1, 2**64)],
                         ids=["list", "list-uint64", "nested", "tuple"])
def test_lists_numpy_makes_object_arrays_of_run_with_numpy_warning_once(values):
    def fn(x):
        return np.asarray(x) * 2 - 1

    jitted = numfuse.jit(fn)
    if type(values) is tuple:  # a tuple of ints is static: numpy's values, computed once
        assert_like_numpy(fn, values, jitted=jitted)
        return
    with pytest.warns(numfuse.NumpyFallbackWarning,
                      match="list or tuple numpy converts to an array of dtype object"):
        jitted(values)
    assert_like_numpy(fn, values, jitted=jitted)  # no second warning
    assert_same(jitted([1, 2]), fn([1, 2]))  # small ints still fuse
    assert len(jitted.compiled) == 1


def _times_big(x):
    return x * 2**70


def _plus_big_list(x):
    return x + [2**70, 1, 2]  # noqa: RUF005 (an array plus a list)


def _plus_big_array(x):
    return np.add(x, np.array([1, 2**65, 3]))


def _below_big(x):
    return x < 2**70


@pytest.mark.parametrize("fn", [_times_big, _plus_big_list, _plus_big_array, _below_big])
@pytest.mark.parametrize("x", [np.arange(3.0), np.arange(3, dtype=np.float32),
                               np.arange(3), np.arange(3, dtype=np.uint8)],
                         ids=["float64", "float32", "int64", "uint8"])
def test_python_ints_beyond_64_bits_in_the_function_run_with_numpy(fn, x):
    """numpy computes with such a constant as a Python object (or converts it to the
    float dtype it meets; raises OverflowError for an int array): the call runs the
    function with numpy, warning once, at the caller's line, once numpy has run (numpy's
    own OverflowError comes without it); ``numfuse.compile`` raises."""
    jitted = numfuse.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn(x)
        except OverflowError:
            raises = True
        else:
            raises = False
        caught.clear()
        with contextlib.suppress(OverflowError):
            jitted(x)  # marker
    ours = [warning for warning in caught if "Python objects" in str(warning.message)]
    assert [(warning.filename, warning.lineno) for warning in ours] == ([] if raises else [
        (__file__, line_of(test_python_ints_beyond_64_bits_in_the_function_run_with_numpy,
                           "# marker"))])
    assert_like_numpy(fn, x, jitted=jitted)  # no second warning
    with pytest.raises(numfuse.errors.ObjectValuesError, match=r"beyond 64 bits|dtype object"):
        numfuse.compile(fn, x)


def test_python_int_arguments_beyond_64_bits_run_with_numpy():
    """Also after a plan for int arguments was kept (the kernel's int64 cannot hold it)."""
    jitted = numfuse.jit(lambda x, k: x * k)
    assert_like_numpy(jitted.fn, X, 3, jitted=jitted)
    assert_like_numpy(jitted.fn, X, 3, jitted=jitted)
    with pytest.warns(RuntimeWarning, match="Python integer beyond 64 bits"):
        assert_same(jitted(X, 2**70), X * 2**70)
    for k in (-(2**70), 5):  # warned once
        assert_like_numpy(jitted.fn, X, k, jitted=jitted)
    with pytest.raises(OverflowError):  # numpy's error for an int array
        jitted(np.arange(3), 2**70)


def test_object_arrays_and_compiled_signatures_share_a_function():
    jitted = numfuse.jit(_object_arithmetic)
    numbers = np.array([1, 2.5, 3], dtype=object)
    assert_same(jitted(X), _object_arithmetic(X))
    with pytest.warns(RuntimeWarning, match="dtype object"):
        assert_same(jitted(numbers), _object_arithmetic(numbers))
    assert_same(jitted(X, y=np.float32(2)), _object_arithmetic(X, np.float32(2)))
    assert_like_numpy(_object_arithmetic, numbers, jitted=jitted)
    assert_like_numpy(lambda x: _object_arithmetic(x, y=numbers), X,
                      jitted=lambda x: jitted(x, y=numbers))
    assert len(jitted.compiled) == 2


def test_dict_arguments_are_rebuilt_for_the_function():
    """``params`` dicts (nested too) pass their values as arguments; each structure of
    keys compiles on its own, static arguments keep their positions."""
    def layer(params, x, mode, *, scale=1.0):
        y = (x @ params["w"] + params["b"]) * scale
        return y * params["extra"]["gain"] if mode == "gain" else y

    params = {"w": np.ones((7, 2)), "b": np.array([0.5, -0.5]), "extra": {"gain": 2.0}}
    rows = np.stack([X, X * 2])
    jitted = numfuse.jit(layer, static_argnums=(2,))
    assert_same(jitted(params, rows, "gain"), layer(params, rows, "gain"))
    assert_same(jitted(params, rows, "plain", scale=3.0), layer(params, rows, "plain", scale=3.0))
    reordered = {"b": params["b"], "w": params["w"] * 2, "extra": {"gain": 0.5}}
    assert_same(jitted(reordered, rows, "gain"), layer(reordered, rows, "gain"))
    assert len(jitted._by_structure) == 2
    out = np.empty((2, 2))
    assert jitted(params, rows, "gain", out=out) is out
    assert_same(out, layer(params, rows, "gain"))


def _sgd_step(params, grads, history, lr):
    for key in params:
        params[key] = params[key] - lr * grads[key]
    history.append(lr * 2)
    return sum(np.sum(value) for value in params.values())


def test_changes_to_dict_and_list_arguments_reach_the_caller():
    """A function assigning into its dict argument or appending to its list argument
    changes the caller's containers, as numpy's run does: numpy runs it, on them."""
    def arguments():
        return ({"w": np.ones(3), "b": np.zeros(2)}, {"w": np.full(3, 0.5),
                                                     "b": np.ones(2)}, [np.ones(1)], 0.1)

    expected, given = arguments(), arguments()
    jitted = numfuse.jit(_sgd_step)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="dict or list argument"):
        assert_same(jitted(*given), _sgd_step(*expected))
    given[2].pop()  # the same kind of arguments again: numpy runs it at once
    expected[2].pop()
    assert_same(jitted(*given), _sgd_step(*expected))
    assert_same(given, expected)
    assert len(given[2]) == 2 and given[2][1] == 0.2
    with pytest.raises(numfuse.UnsupportedOperationError, match="dict or list argument"):
        numfuse.grad(lambda p: _sgd_step(p, p, [], 0.5))({"w": np.ones(3)})


def _squared_distances(X, Y):
    D = (X * X).sum(1)[:, None] - 2 * X @ Y.T + (Y * Y).sum(1)[None, :]
    if X is Y:  # scikit-learn's: exact zeros for the distances of X to itself
        np.fill_diagonal(D, 0.0)
    return D


def test_one_array_given_twice_to_a_function_comparing_with_is_runs_as_numpy_does():
    points = np.random.default_rng(5).standard_normal((4, 3)) * 1e3 + 1e5
    jitted = numfuse.jit(_squared_distances)
    assert_same(jitted(points, points.copy()), _squared_distances(points, points.copy()))
    with pytest.warns(RuntimeWarning, match="one array as two arguments"):
        assert_same(jitted(points, points), _squared_distances(points, points))
    assert_same(np.diag(jitted(points, points)), np.zeros(4))
    assert_same(jitted(points, Y=points), _squared_distances(points, points))
    plain = numfuse.jit(lambda x, y=None: x + (x if y is None else y))  # no such compare
    assert not plain._identity and type(plain) is not numfuse.api.Jitted


def _mlp(x, weights):
    for weight in weights:
        x = np.tanh(x @ weight)
    return x


def test_lists_and_tuples_of_arrays_pass_their_items_as_arguments():
    """An MLP's weights (arrays of different shapes: numpy could not make one array of
    them) and a tuple mixing a numpy scalar with an array: their items are arguments, the
    function gets the list or tuple rebuilt (Python's list operations stay list
    operations), and each length compiles on its own."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3))
    weights = [rng.standard_normal((3, 4)), rng.standard_normal((4, 2))]
    jitted = numfuse.jit(_mlp)
    for given in (weights, tuple(weights), weights, [*weights, np.eye(2)]):
        assert_same(jitted(x, given), _mlp(x, given), rtol=1e-14)  # (tanh: a few ulp)
    assert len(jitted._by_structure) == 3
    assert_same(numfuse.compile(_mlp, x, weights)(x, weights), _mlp(x, weights), rtol=1e-14)
    assert "matmul" in str(numfuse.trace(_mlp, x, weights))

    def scaled(x, pair):
        scale, shift = pair
        return x * scale + shift, pair + [x]  # noqa: RUF005 (a list: concatenation)

    pair = [np.float32(2.0), np.ones(3, np.float32)]
    x32 = x.astype(np.float32)
    assert_same(numfuse.jit(scaled)(x32, pair), scaled(x32, pair))
    stacked = numfuse.jit(lambda x, xs: np.asarray(xs).sum(axis=0) * x)
    assert_same(stacked(X, [X, X * 2]), np.asarray([X, X * 2]).sum(axis=0) * X)


def test_compile_of_a_jitted_function_with_defaults_left_out():
    def scaled(x, scale=2.0, *, shift=0.5):
        return x * scale + shift

    assert_same(numfuse.compile(numfuse.jit(scaled), X)(X), scaled(X))
    assert_same(numfuse.compile(numfuse.jit(scaled), X, 3.0)(X, 3.0), scaled(X, 3.0))


@pytest.mark.parametrize(("fn", "args"), [
    (np.add, (X, X[::-1])), (np.exp, (X,)), (np.divmod, (X, 1.5)), (np.frexp, (X,)),
    (np.sum, (X,)), (np.mean, (X,)), (np.diff, (X,)), (np.clip, (X, 0, 1)), (np.sinc, (X,)),
    (np.linalg.norm, (X,)), (np.where, (X > 0, X, -X)), (np.round, (X, 1)),
    (np.maximum.reduce, (X,)), (np.add.accumulate, (X,)), (np.heaviside, (X, 0.5)),
], ids=lambda item: getattr(item, "__name__", "") if callable(item) else "")
def test_numpy_functions_jitted_directly_match_numpy(fn, args):
    """``numfuse.jit(np.exp)``: ufuncs and numpy functions whose defaults are numpy's
    sentinels, and whose own code calls ``np.asanyarray`` (numpy's arrays, not constants)."""
    assert_same(numfuse.jit(fn)(*args), fn(*args), rtol=1e-15)


def test_variadic_arguments():
    def total(*values):
        result = values[0]
        for value in values[1:]:
            result = result + value
        return result

    check(total, X, X * 2.0, 1.5)


def test_keywords_of_functions_with_star_args_or_star_star_kwargs_reach_the_function():
    def scaled(x, **options):
        return x * options.get("scale", 1.0)

    def summed(*values, scale=1.0):
        return sum(values) * scale

    def shifted(x, y=2, **options):
        return x * y + options.get("z", 0)

    def reduced(x, **options):
        return x.sum(**options)  # a static keyword (axis) among the gathered ones

    def only(**options):
        return options["a"] + 1

    def weighted(x, **options):  # a dict among the keywords
        return x * options["params"]["w"]

    y = np.arange(6.0).reshape(2, 3)
    cases = [(scaled, (X,), {"scale": 2.0}), (scaled, (X,), {}),
             (summed, (X, X * 2.0), {"scale": 3.0}), (summed, (X, X), {}),
             (shifted, (X,), {"y": 4}), (shifted, (X, 3), {"z": 1.5}),
             (shifted, (X,), {"z": X}), (reduced, (y,), {"axis": 1}),
             (reduced, (y,), {"axis": 0, "keepdims": True}), (only, (), {"a": X}),
             (weighted, (X,), {"params": {"w": 3.0}})]
    for fn, args, kwargs in cases:
        jitted = numfuse.jit(fn)
        for _ in range(2):  # the second call through what the first one compiled
            assert_same(jitted(*args, **kwargs), fn(*args, **kwargs))
    jitted = numfuse.jit(summed)
    assert_same(jitted(X, X, scale=3.0), summed(X, X, scale=3.0))
    assert_same(jitted(X, X, scale=4.0), summed(X, X, scale=4.0))  # a value, not static
    out = np.empty_like(X)
    assert jitted(X, X, scale=3.0, out=out) is out
    assert_same(out, summed(X, X, scale=3.0))
    with pytest.raises(TypeError, match="positional arguments"):
        numfuse.jit(shifted)(X, 1, 2)
    with pytest.raises(TypeError, match="call the jitted function"):
        numfuse.jit(scaled).specialize(X, scale=2.0)


def test_an_argument_made_static_for_a_python_value_takes_an_array_or_list_later():
    """Found by a conformance hunt: q, made static by np.percentile(x, 50), could not
    be hashed when a list came in its place."""
    jitted = numfuse.jit(lambda x, q: np.percentile(x, q))
    x = np.arange(10.0)
    for q in (50, [25, 75], np.array([10.0, 90.0]), 30, (5, 95)):
        assert_same(jitted(x, q), np.percentile(x, q))
    assert jitted.auto_static == {1}


def test_a_tuple_of_ints_is_static_and_a_list_numpy_needs_as_numbers_becomes_static():
    """A shape, axis=(0, 2), pad widths or an index given as a tuple argument is read as
    numbers, as numpy reads it (``x[t]`` is ``x[0, 1]``, not ``x[[0, 1]]``); given as a
    list, it is traced as an array first and, failing, traced again as a static value."""
    x = np.arange(24.0).reshape(2, 3, 4)
    cases = [(lambda x, s: (x * 2).reshape(s), (x, (4, 6))),
             (lambda x, ax: x.sum(axis=ax) + 1, (x, (0, 2))),
             (lambda x, w: np.pad(x, w), (X, (1, 2))),
             (lambda x, a: np.transpose(x, a) * 2, (x, (2, 0, 1))),
             (lambda v, s: np.broadcast_to(v, s) + 1, (X, (2, X.size))),
             (lambda x, r: np.tile(x, r), (X, (2, 2))),
             (lambda x, i: x[i] * 2, (x, (0, 1))),
             (lambda x, i: x[i], (x, (1, (0, 2)))),
             (lambda x, i: x[i], (x, ()))]
    for fn, args in cases:
        assert_same(numfuse.jit(fn)(*args), fn(*args))
        listed = (args[0], list(args[1]))
        try:
            expected = fn(*listed)
        except (TypeError, ValueError):
            continue  # (numpy takes no list for axis=, nor a ragged index list)
        if expected.shape != fn(*args).shape:
            continue  # (x[list] is fancy indexing)
        jitted = numfuse.jit(fn)
        for _ in range(2):
            assert_same(jitted(*listed), fn(*listed))

    def assigned(x, i):
        y = x.copy()
        y[i] = -1
        return y

    assert_same(numfuse.jit(assigned)(x, (0, 1)), assigned(x, (0, 1)))
    summed = numfuse.jit(lambda x, ax: x.sum(axis=ax))
    for axes in ((0, 2), (1,), (0, 1, 2)):
        assert_same(summed(x, axes), x.sum(axis=axes))
    assert_same(numfuse.jit(lambda x, t: x * np.array(t))(X[:3], (1, 2, 3)),
                X[:3] * np.array((1, 2, 3)))
    with pytest.raises(ValueError, match="could not be broadcast"):  # numpy's error stands
        numfuse.jit(lambda x, y: x + y)(X, (1, 2))


def test_static_argument_used_in_python_control_flow():
    def apply(x, mode):
        return x + 1.0 if mode == "add" else x - 1.0

    jitted = numfuse.jit(apply, static_argnums=(1,))
    assert_same(jitted(X, "add"), apply(X, "add"))
    assert_same(jitted(X, "subtract"), apply(X, "subtract"))


def test_static_arguments_equal_in_value_but_of_different_type_do_not_share_a_compile():
    """``1 == 1.0`` but ``int8_array * 1`` is int8 and ``int8_array * 1.0`` is float64."""
    jitted = numfuse.jit(multiply, static_argnums=(1,))
    assert_same(jitted(I8, 1), I8 * 1)
    assert_same(jitted(I8, 1.0), I8 * 1.0)


def test_static_argument_value_change_recompiles():
    jitted = numfuse.jit(lambda x, n: x * float(n), static_argnums=(1,))
    assert_same(jitted(X, 2), X * 2.0)
    assert_same(jitted(X, 5), X * 5.0)
    assert_same(jitted(X, 2), X * 2.0)
    assert len(jitted.compiled) == 2


# ------------------------------------------------------------------------------ methods


class Scaled:
    """A model whose jitted methods read its attributes."""

    def __init__(self, weight, bias):
        self.weight = weight
        self.bias = np.asarray(bias)

    @numfuse.jit
    def forward(self, x):
        return self.weight / x + self.bias  # 1 / 0: numpy's divide warning

    @numfuse.jit(static_argnums=(2,))
    def head(self, x, n):  # static_argnums count self, as the function's parameters do
        return self.forward(x)[:n].sum()  # a jitted method called while tracing: inlined

    scale = 3

    @classmethod
    @numfuse.jit
    def by_class(cls, x):
        return x * cls.scale

    @numfuse.jit
    @classmethod
    def by_class_inside(cls, x):
        return x * cls.scale + 1

    @staticmethod
    @numfuse.jit
    def alone(x):
        return x + 1

    @numfuse.jit
    @staticmethod
    def alone_inside(x):
        return x + 2


def test_methods_bind_their_instance_as_a_static_argument():
    """``@numfuse.jit`` on a method: the instance is a static first argument (it failed
    with "missing a required argument: 'x'"); each instance compiles once, its
    attributes are constants of its compilation."""
    model = Scaled(2.0, [0.5, -1.0, 0.0])
    x = np.array([1.0, 0.0, 3.0])
    plain = Scaled.forward.__wrapped__
    assert_like_numpy(lambda x: plain(model, x), x, jitted=model.forward)
    assert_same(Scaled.forward(model, x), numpy_result(plain, model, x))
    assert_same(model.forward(x=x), numpy_result(plain, model, x))
    assert_like_numpy(lambda x: Scaled.head.__wrapped__(model, x, 2), x,
                      jitted=lambda x: model.head(x, 2))
    other = Scaled(np.float32(0.5), np.float32(1.0))
    assert_like_numpy(lambda x: plain(other, x), x.astype(np.float32), jitted=other.forward)
    assert len(Scaled.forward.compiled) == 2  # one per instance (and signature of x)
    model.weight = 10.0  # read when the method was traced for model: not seen
    assert_same(model.forward(x), numpy_result(plain, Scaled(2.0, model.bias), x))
    assert len(Scaled.forward.compiled) == 2


def test_instances_with_a_hash_share_compilations_by_value():
    """A frozen dataclass compares by value: an equal instance reuses the compilation, a
    changed one compiles anew; an unhashable one (a dataclass with eq) is keyed by
    identity."""
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        weight: float

        @numfuse.jit
        def forward(self, x):
            return x * self.weight

    @dataclasses.dataclass
    class Mutable:
        weight: float

        @numfuse.jit
        def forward(self, x):
            return x * self.weight

    for kind in (Frozen, Mutable):
        for weight in (2.0, 3.0, 2.0):
            instance = kind(weight)
            assert_like_numpy(lambda x, i=instance: x * i.weight, X, jitted=instance.forward)
    assert len(Frozen.forward.compiled) == 2
    assert len(Mutable.forward.compiled) == 3


def test_value_compared_instances_are_told_apart_by_their_fields_types_and_bits():
    """Found by a conformance hunt: a frozen dataclass instance was keyed by ``==``, so
    ``Scale(2)`` reused ``Scale(2.0)``'s compilation (float64 for int32 arrays) and
    ``Scale(0.0)`` reused ``Scale(-0.0)``'s."""
    @dataclasses.dataclass(frozen=True)
    class Scale:
        factor: float

        @numfuse.jit
        def apply(self, a):
            return a * self.factor

    ints = np.arange(4, dtype=np.int32)
    for factor in (2.0, 2, -0.0, 0.0, 2.0):
        assert_same(Scale(factor).apply(ints), ints * factor)
    assert len(Scale.apply.compiled) == 4


def test_a_jitted_function_reached_through_an_instance_keeps_array_arguments_data():
    """Found by a conformance hunt: reaching a jitted helper through an instance (a class
    attribute; even ``hasattr``) made its first argument static for every later direct
    call: an array changed in place was not seen, each new array compiled again."""
    add = numfuse.jit(lambda a, b: a + b)

    class Model:
        combine = add

    assert hasattr(Model(), "combine")
    x = np.zeros(3)
    assert_same(add(x, 1.0), x + 1.0)
    x[:] = 5.0
    assert_same(add(x, 1.0), x + 1.0)
    assert_same(add(np.ones(3), 1.0), np.ones(3) + 1.0)
    assert len(add.compiled) == 1


class _Cycle:
    def __init__(self, scale):
        self.scale = scale
        self.me = self

    def apply(self, a):
        return a * self.scale


def test_callables_and_cyclic_objects_as_static_arguments():
    """Found by a conformance hunt: a jitted function already called, passed to another,
    and an object holding itself raised RecursionError while being keyed; a bound
    method's instance changed later was not seen."""
    square = numfuse.jit(lambda v: v * v)
    apply = numfuse.jit(lambda fn, a: fn(a) + 1)
    assert_same(apply(square, X), X * X + 1)
    square(X)
    assert_same(apply(square, X), X * X + 1)
    looped = _Cycle(2.0)
    assert_same(apply(looped.apply, X), X * 2.0 + 1)
    looped.scale = 5.0
    assert_same(apply(looped.apply, X), X * 5.0 + 1)
    assert_same(numfuse.jit(lambda c, a: a * c.scale)(looped, X), X * 5.0)


@pytest.mark.parametrize(("first", "second"), [
    ((np.int64(3),), (np.int8(3),)),
    ((np.float64(0.5),), (np.float32(0.5),)),
    ((True,), (1,)),
    ((np.datetime64("2020-01-01", "D"),), (np.datetime64("2020-01-01T00", "h"),)),
])
def test_static_numpy_scalars_are_told_apart_by_their_dtype(first, second):
    """Found by a conformance hunt: numpy scalars in a static tuple were keyed by value
    (``np.int8(3) == np.int64(3)``, a datetime of another unit), and ``True`` as ``1``."""
    def fn(x, s):
        if isinstance(s[0], np.datetime64):
            return x + ((s[0] + 1) - s[0]).astype("m8[m]").astype(np.int64)
        return x * s[0]

    jitted = numfuse.jit(fn, static_argnums=1)
    for value in (first, second, first):
        for x in (np.array([1.0, 2.0], np.float32), np.array([True, False])):
            assert_same(jitted(x, value), fn(x, value))


def test_an_options_objects_structured_and_object_arrays_are_keyed_by_dtype_and_items():
    """Found by a conformance hunt: a structured array was keyed by ``dtype.str`` (``|V8``
    for any fields of 8 bytes) and an object array by its items' addresses."""
    options = types.SimpleNamespace(table=np.array([(1.5,)], dtype=[("a", "f8")]))

    def fn(x, o):
        return x * o.table["a"][0]

    jitted = numfuse.jit(fn)
    x = np.array([1.0, 2.0])
    assert_same(jitted(x, options), fn(x, options))
    options.table = options.table.view([("a", "i8")])
    assert_same(jitted(x, options), fn(x, options))
    boxes = np.empty(1, object)
    boxes[0] = [1.5]
    held = types.SimpleNamespace(table=boxes)
    picked = numfuse.jit(lambda x, o: x * o.table[0][0])
    assert_same(picked(x, held), x * 1.5)
    boxes[0][0] = 2.5
    assert_same(picked(x, held), x * 2.5)


def test_out_of_a_call_numpy_runs_receives_its_results():
    """Found by a conformance hunt: numfuse's out= was passed on to the function when numpy
    ran it (TypeError: unexpected keyword 'out'), and a string constant raised
    UnsupportedDtypeError with out= only; such fallbacks warned with a plain
    RuntimeWarning, which the fallback filter missed."""
    x = np.array([1.0, 2.0, 3.0])
    dates = np.array(["2020-01-01", "NaT", "2020-01-03"], "M8[D]")
    cases = [(lambda d, x: x + np.isnat(d), (dates, x)), (lambda x: (x == "a") + x, (x,)),
             (lambda x: x * 2, (np.array([2**70, 1], dtype=object),))]
    for fn, args in cases:
        expected = fn(*args)
        out = np.empty_like(expected)
        with pytest.warns(numfuse.NumpyFallbackWarning):
            result = numfuse.jit(fn)(*args, out=out)
        assert result is out
        assert_same(out, expected)


def _less(a, b):
    return a < b


@pytest.mark.parametrize("fn", [lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
                                _less, lambda a, b: a ** b])
def test_a_python_bool_argument_with_python_numbers_gives_python_numbers(fn):
    """Found by a conformance hunt: ``f(True, 2.5)`` gave ``np.float64(-1.5)`` for
    ``a - b`` (a Python bool argument is a constant, which was not weak)."""
    jitted = numfuse.jit(fn)
    for args in [(True, 2.5), (True, 3), (2, True), (True, 1j)]:
        if not (isinstance(args[1], complex) and fn is _less):  # (complex: no order)
            assert_same(jitted(*args), fn(*args))


def test_a_builtin_without_a_signature_is_jitted():
    """Found by a conformance hunt: ``numfuse.jit(max)`` raised ValueError (no signature
    found) when applied."""
    largest = numfuse.jit(max)
    assert largest(1, 5) == 5 and type(largest(1, 5)) is int
    assert_same(largest(np.float32(2.5), 1.0), max(np.float32(2.5), 1.0))


def test_compiled_compares_static_arguments_by_their_keys():
    """Found by a conformance hunt: ``Compiled`` accepted a static value equal by ``==``
    (``0.0`` for ``-0.0``, ``Opt(2)`` for ``Opt(2.0)``), raised numpy's "truth value is
    ambiguous" for a static array and refused the NaN it was compiled for."""
    fn = numfuse.jit(lambda a, s: a * s, static_argnums=(1,))
    ones = np.ones(3)
    with pytest.raises(numfuse.SignatureMismatchError):
        numfuse.compile(fn, ones, -0.0)(ones, 0.0)
    nan = numfuse.compile(fn, ones, float("nan"))
    assert_same(nan(ones, float("nan")), ones * np.nan)
    table = np.array([1.0, 2.0, 3.0])
    by_table = numfuse.compile(fn, ones, table)
    assert_same(by_table(ones, table.copy()), ones * table)
    with pytest.raises(numfuse.SignatureMismatchError):
        by_table(ones, table * 2)


class _Centering:
    @numfuse.jit
    def fit_transform(self, X):
        self.mean_ = X.mean(axis=0)  # scikit-learn's fitted attribute
        return X - self.mean_


def test_a_value_stored_on_an_argument_object_is_numpys_array():
    """A method storing a computed array on its instance (or a function on an object it
    is given) leaves numpy's array there: numpy runs it (a traced value would stay)."""
    rows = np.arange(6.0).reshape(3, 2)
    model = _Centering()
    with pytest.warns(numfuse.NumpyFallbackWarning, match="storing a traced value"):
        assert_same(model.fit_transform(rows), rows - rows.mean(axis=0))
    assert_same(model.mean_, rows.mean(axis=0))
    assert_same(model.fit_transform(rows * 2), rows * 2 - rows.mean(axis=0) * 2)
    assert_same(model.mean_, rows.mean(axis=0) * 2)

    def fit(state, x):
        state.coef_ = x.sum(0)
        return x * 2

    state = types.SimpleNamespace()
    with pytest.warns(numfuse.NumpyFallbackWarning):
        assert_same(numfuse.jit(fit)(state, rows), rows * 2)
    assert_same(state.coef_, rows.sum(0))


def test_classmethods_and_staticmethods_in_either_order():
    model = Scaled(1.0, 0.0)
    for owner in (model, Scaled):
        assert_same(owner.by_class(X), X * 3)
        assert_same(owner.by_class_inside(X), X * 3 + 1)
        assert_same(owner.alone(X), X + 1)
        assert_same(owner.alone_inside(X), X + 2)


def test_a_function_in_a_class_called_through_the_class_keeps_its_arguments_traced():
    """Only an instance of the class makes the first argument static: arrays given to a
    jitted function stored in a class and called through it stay traced arguments."""
    class Ops:
        double = numfuse.jit(lambda x: x * 2)

        @numfuse.jit
        def times(self, x):
            return x * self.factor

    ops = Ops()
    ops.factor = 3
    assert_same(Ops.times(ops, X), X * 3)  # through the class first: ops is static
    assert_same(ops.times(X + 1), (X + 1) * 3)
    assert Ops.times.static_argnums == (0,) and len(Ops.times.compiled) == 1

    def compute(model, x):
        return model.weight / x

    class Late:
        weight = 4.0

    Late.compute = numfuse.jit(compute)  # no __set_name__: bound on the instance
    for x in (X, X + 1, M):
        assert_same(Ops.double(x), x * 2)
        assert_same(Late().compute(x), compute(Late, x))
    assert len(Ops.double.compiled) == 2  # per signature, not per array
    model = Scaled(2.0, 1.0)
    compiled = numfuse.compile(Scaled.forward, model, X)  # the instance: static
    assert_same(compiled(model, X + 1), numpy_result(Scaled.forward.__wrapped__, model, X + 1))


# --------------------------------------------------------------------------- kernels


def test_founding_case_is_one_kernel_with_two_outputs():
    compiled = numfuse.compile(logp_and_grad, X, 0.5)
    assert len(compiled.kernels) == 1
    kernel = compiled.kernels[0]
    assert isinstance(kernel, numfuse.Kernel)
    assert kernel.n_inputs == 2
    assert kernel.n_outputs == 2
    assert kernel.layout == "(n),()->(n),(n)"
    assert_same(compiled(X, 0.5), logp_and_grad(X, 0.5))


def test_kernel_source_is_python_defining_kernel():
    kernel = numfuse.compile(logp_and_grad, X, 0.5).kernels[0]
    module = ast.parse(kernel.source)
    names = [node.name for node in module.body if isinstance(node, ast.FunctionDef)]
    assert names == ["kernel"]
    assert "def kernel(" in kernel.source


def test_kernel_nodes_compute_the_shared_difference_once():
    kernel = numfuse.compile(logp_and_grad, X, 0.5).kernels[0]
    ops = [node.op for node in kernel.nodes]
    assert ops.count("subtract") == 1
    assert len(ops) == 5
    assert all(node.kind == "elementwise" for node in kernel.nodes)


def test_kernel_gufunc_is_callable_on_its_own():
    kernel = numfuse.compile(logp_and_grad, X, 0.5).kernels[0]
    assert kernel.gufunc.signature == kernel.layout
    assert (kernel.gufunc.nin, kernel.gufunc.nout) == (2, 2)
    expected = logp_and_grad(X, 0.5)
    assert_same(tuple(kernel.gufunc(X, 0.5)), expected)
    # Like any gufunc it loops over leading dimensions.
    stacked = np.stack([X, X[::-1]])
    assert_same(tuple(kernel.gufunc(stacked, 0.5)), logp_and_grad(stacked, 0.5))


def test_regions_of_different_loop_shapes_are_separate_kernels():
    def outer_product_and_row(row, column):
        scaled = row * 2.0
        return scaled + column, scaled - 1.0

    row, column = np.arange(4.0), np.arange(3.0)[:, None]
    compiled = numfuse.compile(outer_product_and_row, row, column)
    assert len(compiled.kernels) == 2
    assert_same(compiled(row, column), outer_product_and_row(row, column))


# ----------------------------------------------------------------------- printing


def test_compiled_graph_str_shows_kernel_markers():
    compiled = numfuse.compile(logp_and_grad, X, 0.5)
    text = str(compiled.graph)
    assert text.startswith("{ lambda a:f64[n] b:f64[] .")
    assert "# kernel 0: (n),()->(n),(n)" in text
    assert "subtract a b" in text
    assert text.rstrip().endswith("}")
    assert "kernel 1" not in text


def test_trace_str_shows_every_kernel():
    def two_shapes(row, column):
        scaled = row * 2.0
        return scaled + column, scaled - 1.0

    text = str(numfuse.trace(two_shapes, np.arange(4.0), np.arange(3.0)[:, None]))
    assert "# kernel 0:" in text
    assert "# kernel 1:" in text
    assert "f64[n,1]" in text


def test_trace_accepts_a_jitted_function():
    text = str(numfuse.trace(numfuse.jit(logp_and_grad), X, 0.5))
    assert "# kernel 0: (n),()->(n),(n)" in text


def test_reprs_name_the_function():
    jitted = numfuse.jit(logp_and_grad)
    jitted(X, 0.5)
    assert "logp_and_grad" in repr(jitted)
    assert "1 signature" in repr(jitted)
    compiled = numfuse.compile(logp_and_grad, X, 0.5)
    assert "logp_and_grad" in repr(compiled)
    assert "1 kernel" in repr(compiled)


# -------------------------------------------------------------------- the kernel cache


def test_functions_with_the_same_structure_share_a_compiled_kernel():
    def first(a, b):
        t = a - b
        return -(t**2) / 2, -t

    def second(values, centre):
        delta = values - centre
        return -(delta**2) / 2, -delta

    one = numfuse.compile(first, X, 0.5).kernels[0]
    two = numfuse.compile(second, X[:3], 9.0).kernels[0]
    assert one.name == two.name
    assert one.gufunc is two.gufunc
    assert numfuse.api._kernel_cache[kernel_key(one.generated)] is one.compiled


def test_another_dtype_is_another_kernel():
    one = numfuse.compile(logp_and_grad, X, 0.5).kernels[0]
    two = numfuse.compile(logp_and_grad, X.astype(np.float32), 0.5).kernels[0]
    assert one.name != two.name
    assert one.gufunc is not two.gufunc
    assert_same(numfuse.jit(logp_and_grad)(F32, 0.5), logp_and_grad(F32, 0.5))


def _concurrently(call, count: int) -> tuple[list, list]:
    """``call()`` in ``count`` threads that start together: the results, the errors."""
    import threading

    barrier, results, errors = threading.Barrier(count), [], []

    def run():
        barrier.wait()
        try:
            results.append(call())
        except Exception as error:  # reported by the caller
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def test_eight_threads_calling_a_cold_function_compile_it_once():
    @numfuse.jit
    def logp_and_total(x, mu):
        d = x - mu * 1.2345  # a structure no other test compiles
        return -(d ** 2) / 2, np.sum(d)

    x = np.linspace(-2.0, 2.0, 1001)
    results, errors = _concurrently(lambda: logp_and_total(x, 0.3), 8)
    assert not errors
    assert len(logp_and_total.compiled) == 1
    expected = logp_and_total.fn(x, 0.3)
    assert len(results) == 8
    for result in results:  # the sum is blocked, not pairwise: equal to rounding
        assert_same(result[0], expected[0])
        assert_same(result[1], expected[1], rtol=1e-13)
        assert_same(result[1], results[0][1])


# ---------------------------------------------------------------------- the call cache


def test_the_call_cache_keeps_one_plan_per_kind_of_arguments():
    """A second call with arguments of the same types, dtypes and shapes takes the plan
    kept for them; arrays of another shape, dtype or length-1 pattern, numpy scalars and
    Python numbers of another type get their own plan or none, each result numpy's."""
    jitted = numfuse.jit(logp_and_grad)
    calls = [(X, 0.5), (X, 0.25), (X[:3], 0.5), (X.astype(np.float32), 0.5), (X, 2),
             (X, 1 + 2j), (X[:1], 0.5), (M, 0.5), (M[:1], 0.5), (0.5, X), (X, np.float32(2)),
             (X, np.array(0.5)), (np.float64(0.5), 0.25)]
    for args in calls * 2:
        assert_same(jitted(*args), logp_and_grad(*args))
    # one plan per kind but the first two calls' (one kind) and the numpy scalars' (none)
    assert len(jitted._calls) == len(calls) - 3


def test_plans_of_the_call_cache_read_strided_arguments_like_numpy():
    """The key has no strides: a strided view of the shape a plan was made for runs
    through it; the kernel reads it through buffers (a fused reduction instead takes the
    contiguous copy, which keeps its order of additions)."""
    base = np.random.default_rng(7).standard_normal(3 * 1200)
    jitted = numfuse.jit(logp_and_grad)
    total = numfuse.jit(lambda x, mu: np.sum((x - mu) ** 2))
    jitted(base[:1200], 0.5)  # each makes the plan for a contiguous (1200,) array
    total(base[:1200], 0.5)
    for view in (base[::3], base[::-3], base[1::3]):
        assert_like_numpy(logp_and_grad, view, 0.25, jitted=jitted)
        assert_same(total(view, 0.25), total.fn(view, 0.25), rtol=1e-13)  # blocked sums
        assert_same(total(view, 0.25), total(np.ascontiguousarray(view), 0.25))
    outer = numfuse.jit(lambda a, b: (a - b) ** 2 * 0.5)  # a (30,1) and b (1,40): squeezed
    outer(base[:30].reshape(30, 1), base[:40].reshape(1, 40))
    rows, columns = base[:90:3].reshape(30, 1), base[::3][:80:2].reshape(1, 40)
    assert_like_numpy(outer.fn, rows, columns, jitted=outer)


def test_calls_through_the_call_cache_keep_numpys_errors_and_warnings():
    def power(x, y):
        return x**y

    ints = np.arange(1, 6)
    jitted = numfuse.jit(power)
    for _ in range(3):
        assert_like_numpy(power, ints, ints, jitted=jitted)
        assert_like_numpy(power, ints, ints - 3, jitted=jitted)  # ValueError: negative power
    divide = numfuse.jit(lambda x, y: x / y)
    for _ in range(3):
        assert_like_numpy(divide.fn, X, X - X[2], jitted=divide)
    with pytest.raises(ValueError, match=r"could not be broadcast together with shapes "
                                         r"\(7,\) \(3,\)"):
        divide(X, X[:3])


def test_the_call_cache_is_bounded_and_emptied_when_arguments_become_static():
    jitted = numfuse.jit(logp_and_grad)
    lengths = range(1, numfuse.api.CALL_CACHE_SIZE + 20)
    for length in lengths:
        assert_same(jitted(np.arange(float(length)), 0.5),
                    logp_and_grad(np.arange(float(length)), 0.5))
    assert len(jitted._calls) == numfuse.api.CALL_CACHE_SIZE
    assert_same(jitted(X, 0.5), logp_and_grad(X, 0.5))

    def head(x, n):
        return x[:n] * 2.0

    head_jitted = numfuse.jit(head)
    assert_same(head_jitted(X, 3), head(X, 3))  # n becomes static: no plan was kept
    assert not head_jitted._calls
    assert_same(head_jitted(X, 5), head(X, 5))


def test_nested_results_of_one_kernel_take_the_kernels_shortcut():
    """A single kernel's results in a nested structure (``value_and_grad``'s
    ``(value, (g1, g2))``, dicts, lists) come from the plan's call of the kernel, not the
    interpreter, in the traced structure."""
    x = np.random.default_rng(9).standard_normal(1000)

    def nested(x, mu):
        d = x - mu
        return {"d": d, "parts": [d * 2.0, (np.sum(d * d), np.max(d))]}

    def logpdf(x, mu, sigma):
        return np.sum(-0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma))

    gradient = numfuse.value_and_grad(logpdf, argnums=(1, 2))
    jitted = numfuse.jit(nested)
    for _ in range(3):
        result = jitted(x, 0.5)
        value, (g_mu, g_sigma) = gradient(x, 0.3, 1.2)
    expected = nested(x, 0.5)
    assert list(result) == ["d", "parts"] and isinstance(result["parts"], list)
    assert_same(result["d"], expected["d"])
    assert_same(result["parts"][0], expected["parts"][0])
    assert_same(result["parts"][1], expected["parts"][1], rtol=1e-13)  # blocked sum
    z = (x - 0.3) / 1.2
    assert_same(value, logpdf(x, 0.3, 1.2), rtol=1e-13)
    assert_same((g_mu, g_sigma), (np.sum(z) / 1.2, np.sum(z * z - 1.0) / 1.2), rtol=1e-12)
    for function in (jitted, gradient):
        (plan,) = function._calls.values()
        assert plan.run.__name__ == "shaped"  # the kernel's shortcut, not Program.interpret


class Subclass(np.ndarray):
    pass


def test_the_latest_kind_of_arguments_is_recognised_by_its_guard():
    jitted = numfuse.jit(lambda x, mu: (x - mu) * 2.0)
    x, y = np.arange(5.0), np.arange(6.0)
    for args in [(x, 0.5), (x, 0.5), (y, 0.5), (x, 1), (x, 1)]:  # kept from its 2nd call
        assert_same(jitted(*args), (args[0] - args[1]) * 2.0)
    guard, plan, direct, _call = jitted._last
    assert plan is jitted._calls[((5,), np.dtype("float64"), int)]
    assert guard(x, 2)
    # the small call's whole work: its gufunc, for arguments of the kind only
    assert_same(direct(x, 2), (x - 2) * 2.0)
    assert direct(x, 2.0) is MISS and direct(y, 2) is MISS and direct(x, 2, 3) is MISS
    assert not guard(x, 2.0) and not guard(y, 2) and not guard(x.astype(np.float32), 2)
    assert not guard(x) and not guard(x, 2, 3) and not guard(x.view(Subclass), 2)
    assert not guard(x, True)  # a bool is not an int here, as in the key
    # an equal dtype that is another object: looked up by its key instead
    same = x.view(np.dtype(np.float64, metadata={"unit": "m"}))
    assert not guard(same, 2)
    assert_same(jitted(same, 1), (x - 1) * 2.0)
    assert_same(jitted(x.astype(">f8"), 1), (x - 1) * 2.0)
    with pytest.raises(TypeError):
        jitted(x)  # one argument missing: numpy's own error, no plan


def test_the_latest_kind_of_arguments_is_called_through_its_generated_call():
    jitted = numfuse.jit(lambda x, mu: (x - mu) * 2.0)
    other = numfuse.jit(lambda x, mu: x + mu)
    x = np.arange(5.0)
    for _ in range(2):
        assert_same(jitted(x, 1), (x - 1) * 2.0)
        assert_same(other(x, 1), x + 1)
    assert isinstance(jitted, numfuse.Jitted) and type(jitted) is not numfuse.Jitted
    assert type(jitted).__call__ is jitted._last.call  # one Python call, then the gufunc
    assert type(other).__call__ is other._last.call is not jitted._last.call
    assert_same(jitted(x, mu=1), (x - 1) * 2.0)  # keywords take the general path
    with pytest.warns(RuntimeWarning, match="beyond 64 bits"):  # numpy runs it as written
        assert_same(jitted(x, 2**70), (x - 2**70) * 2.0)
    with pytest.raises(TypeError):
        jitted(x, 1, 2)
    assert_same(jitted(np.arange(6.0), 1), (np.arange(6.0) - 1) * 2.0)
    assert type(jitted).__call__ is jitted._last.call  # another kind is now the latest
    with jitted._lock:
        jitted._forget_calls()  # as when an argument turns out to be static
    assert type(jitted).__call__ is numfuse.Jitted.__call__
    assert_same(jitted(x, 1), (x - 1) * 2.0)


def test_out_with_arguments_of_a_cached_kind_runs_their_program_at_once(monkeypatch):
    def logp_grad(x, mu):
        d = x - mu
        return -(d**2) / 2, -d

    jitted = numfuse.jit(logp_grad)
    x, y = np.arange(5.0), np.arange(6.0)
    for _ in range(2):  # two kinds in the call cache, y's the latest
        jitted(x, 1.0)
        jitted(y, 1.0)
    assert type(jitted).__call__ is jitted._last.call

    def general(*args, **kwargs):
        raise AssertionError("took the general path")

    monkeypatch.setattr(numfuse.Jitted, "_general_call", general)
    for values in (y, x):  # the latest kind (its generated call), then the other one
        first, second = np.empty_like(values), np.empty_like(values)
        result = jitted(values, 1.0, out=(first, second))
        assert result[0] is first and result[1] is second
        assert_same((first, second), logp_grad(values, 1.0))
        result = jitted(values, 0.5, out=(values, second))  # out= aliasing an argument
        assert_same(result, logp_grad(np.arange(float(values.size)), 0.5))
        with pytest.raises(TypeError, match="tuple of 2 arrays"):
            jitted(values, 1.0, out=(first,))
        with pytest.raises(ValueError):
            jitted(values, 1.0, out=(np.empty(values.size + 1), second))
        read_only = np.empty_like(values)
        read_only.flags.writeable = False
        with pytest.raises(ValueError, match="read-only"):
            jitted(values, 1.0, out=(read_only, second))
        buffer = np.arange(values.size + 1.0)  # out= overlapping an argument, shifted
        shifted = buffer[1:]
        want = logp_grad(buffer[:-1].copy(), 1.0)
        jitted(buffer[:-1], 1.0, out=(shifted, second))
        assert_same((shifted, second), want)
    monkeypatch.undo()
    other = np.arange(5, dtype=np.float32)  # a kind never called: the general path
    first, second = np.empty_like(other), np.empty_like(other)
    jitted(other, 1.0, out=(first, second))
    assert_same((first, second), logp_grad(other, 1.0))
    assert_same(jitted(x, 1.0, out=None), logp_grad(x, 1.0))  # out=None: as without


def test_out_of_a_small_call_of_reshaped_arguments_goes_straight_to_its_gufunc():
    def outer(a, b):
        d = a - b
        return np.exp(-0.5 * d * d), -d

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((7, 1)), rng.standard_normal((1, 9))
    jitted = numfuse.jit(outer)
    for _ in range(2):
        jitted(a, b)
    assert jitted._last.plan.operands is not None  # the kernel reads them reshaped
    assert jitted._last.plan.outputs == (((7, 9), np.dtype("float64")),) * 2
    first, second = np.empty((7, 9)), np.empty((7, 9))
    result = jitted(a, b, out=(first, second))
    assert result[0] is first and result[1] is second
    assert_same((first, second), outer(a, b), rtol=1e-15)
    fortran, strided = np.empty((7, 9), order="F"), np.empty((7, 18))[:, ::2]
    jitted(a, b, out=(fortran, strided))  # not C-contiguous: written by the program
    assert_same((fortran, strided), outer(a, b), rtol=1e-15)
    wider = np.empty((7, 9), np.float32)  # numpy casts ('same_kind')
    jitted(a, b, out=(wider, second))
    assert_same(wider, outer(a, b)[0].astype(np.float32))


def test_a_small_whole_reduction_goes_straight_to_its_gufunc():
    def squares(x, mu):
        return np.sum((x - mu) ** 2)

    jitted = numfuse.jit(squares)
    y = np.random.default_rng(6).standard_normal(2000)
    x = y[:1000].copy()
    for _ in range(2):
        assert_same(jitted(x, 0.25), squares(x, 0.25), rtol=1e-13)
    guard, plan, direct, _call = jitted._last
    assert plan.unit_strides == ((0, 8),)  # the partial is the value for contiguous x
    assert direct(x, 0.25) == jitted(x, 0.25) and type(direct(x, 0.25)) is np.float64
    strided = y[::2]  # the same kind of argument, another order of its elements
    assert guard(strided, 0.25) and direct(strided, 0.25) is MISS
    assert jitted(strided, 0.25) == jitted(strided.copy(), 0.25)  # added in order


def test_parameters_named_like_the_generated_calls_own_pass_by_keyword():
    def scaled(self, a0, rest=1.0, options=2.0):
        return (self - a0) * rest + options

    jitted = numfuse.jit(scaled)
    x = np.arange(4.0)
    for _ in range(3):  # the generated call of this kind is the latest after the second
        assert_same(jitted(x, 1.5, 1.0, 2.0), scaled(x, 1.5))
    assert type(jitted).__call__ is jitted._last.call
    assert_same(jitted(x, a0=0.5, rest=3.0), scaled(x, 0.5, 3.0))
    assert_same(jitted(self=x, a0=0.5, options=1.0), scaled(x, 0.5, options=1.0))


def test_a_small_call_of_reshaped_arguments_goes_straight_to_its_gufunc():
    def outer(a, b):
        d = a - b
        k = np.exp(-0.5 * d * d)
        return k, -d * k

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((7, 1)), rng.standard_normal((1, 9))
    jitted = numfuse.jit(outer)
    for _ in range(2):
        assert_same(jitted(a, b), outer(a, b), rtol=1e-15)
    _guard, plan, direct, _call = jitted._last
    assert plan.operands is not None  # the kernel reads the arguments reshaped
    assert_same(direct(a, b), jitted(a, b))
    a2, b2 = rng.standard_normal((7, 1)), rng.standard_normal((1, 9))
    assert_same(jitted(a2, b2), outer(a2, b2), rtol=1e-15)
    assert direct(a, b.T) is MISS and direct(b, a) is MISS


def test_the_call_cache_leaves_large_calls_to_the_thread_policy(monkeypatch):
    from numfuse.threads import ThreadPolicy

    x = np.random.default_rng(8).standard_normal(300_000)
    jitted = numfuse.jit(logp_and_grad)
    for _ in range(2):
        assert_same(jitted(x, 0.5), logp_and_grad(x, 0.5))
    (plan,) = jitted._calls.values()
    assert plan.loop == x.size
    plan.policy.small = x.size // 2  # a loop the policy may split (it measures this bound)
    asked = []
    call = ThreadPolicy.call
    monkeypatch.setattr(ThreadPolicy, "call",
                        lambda policy, *args: asked.append(policy) or call(policy, *args))
    _guard, _plan, direct, _call = jitted._last
    assert direct(x, 0.5) is MISS  # never the gufunc alone
    assert_same(jitted(x, 0.5), logp_and_grad(x, 0.5))
    assert asked == [plan.policy]


def test_a_small_call_stops_going_straight_to_its_gufunc_when_the_pool_takes_it():
    x = np.random.default_rng(9).standard_normal(4096)
    jitted = numfuse.jit(logp_and_grad)
    for _ in range(2):
        assert_same(jitted(x, 0.5), logp_and_grad(x, 0.5))
    _guard, _plan, direct, _call = jitted._last
    assert direct(x, 0.5) is not MISS
    settings = memory.pool()
    memory.pool(min_bytes=x.nbytes)
    try:
        assert direct(x, 0.5) is MISS  # read at each call, not when the guard was made
        logp, grad = jitted(x, 0.5)
        assert_same((logp, grad), logp_and_grad(x, 0.5))
        assert isinstance(logp.base, mmap.mmap)  # the pool's memory
    finally:
        memory.pool(**dataclasses.asdict(settings))


# ------------------------------------------------------------------ the retry policy


def test_one_retry_policy_for_jit_and_compile():
    from numfuse.api import retry_policy
    from numfuse.errors import CallShapeError, SizeDependentError, StaticArgumentError

    sizes = SizeDependentError("x.shape", "advice")
    assert retry_policy(sizes, False, frozenset()) == (True, frozenset())
    with pytest.raises(SizeDependentError):
        retry_policy(sizes, True, frozenset())          # already per shape: no help
    shape = CallShapeError("a size tracing did not foresee")
    assert retry_policy(shape, False, frozenset({2})) == (True, frozenset({2}))
    with pytest.raises(CallShapeError):
        retry_policy(shape, True, frozenset())
    value = StaticArgumentError("np.sum with a scalar argument", "advice", (1, 2))
    assert retry_policy(value, True, frozenset({1})) == (True, frozenset({1, 2}))
    with pytest.raises(StaticArgumentError):
        retry_policy(value, False, frozenset({1, 2}))    # already static: no help


def test_compile_and_jit_specialise_alike():
    def fn(x, n):
        return np.sum(x.reshape(len(x) // n, n), axis=1) * 2.0

    x = np.arange(12.0)
    jitted = numfuse.jit(fn)
    np.testing.assert_array_equal(jitted(x, 3), fn(x, 3))
    compiled = numfuse.compile(fn, x, 3)
    np.testing.assert_array_equal(compiled(x, 3), fn(x, 3))
    assert jitted.per_shape and jitted.auto_static == {1}


_BASE = np.ones(3)


def test_a_function_calling_itself_while_traced_never_hangs():
    """Found by an API hunt: a call of the function's own signature while it was traced
    waited for the lock its compile held; the lock is reentrant and such a call says so."""
    @numfuse.jit
    def itself(x):
        if x is _BASE:
            return x
        return itself(_BASE) + x  # concrete values of the kind being compiled

    with pytest.raises(numfuse.UnsupportedOperationError, match="calling itself"):
        itself(np.arange(3.0))

    @numfuse.jit(static_argnums=(1,))
    def power(x, n):  # recursion on a static argument: fine
        return np.ones_like(x) if n == 0 else x * power(x, n - 1)

    assert_same(power(np.arange(3.0), 3), np.arange(3.0) ** 3)


@pytest.mark.parametrize("value", [True, None, 3.0])
def test_a_gradient_with_respect_to_a_constant_raises_instead_of_hanging(value):
    """A bool, None, or a float made static (int(v)) has no gradient: numfuse.grad says
    so (it recompiled itself forever under its own lock)."""
    fn = (lambda v: np.sum(np.arange(int(v)) * 1.0)) if value == 3.0 else (lambda v: 1.0)
    with pytest.raises(TypeError, match="has no gradient"):
        numfuse.grad(fn)(value)


def _forked_child_call(queue):  # run in a forked child
    from numfuse.trace import patches

    patched = np.asarray is not patches._CONVERSIONS["asarray"]
    queue.put((patched, numfuse.jit(lambda v: np.asarray(v) * 2 + 1, cache=False)(
        np.ones(3)).tolist(), _FORK_JITTED(np.arange(3.0)).tolist()))


_FORK_JITTED = numfuse.jit(lambda x: x * 3.0, cache=False)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_other_threads_hold_numfuse_state_works():
    """Found by an API hunt: a child forked while another thread traced or compiled
    inherited numfuse's locks held (and numpy's attributes replaced) and hung."""
    import multiprocessing
    import threading

    from numfuse.trace import patches

    entered, release = threading.Event(), threading.Event()

    def hold():  # a thread in the middle of a trace and of a Jitted's compile
        with patches._converting_tracers(), _FORK_JITTED._lock:
            entered.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert entered.wait(30)
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_forked_child_call, args=(queue,))
        child.start()
        child.join(60)
        hung = child.is_alive()
        if hung:
            child.kill()
        assert not hung and child.exitcode == 0
        assert queue.get(timeout=5) == (False, [3.0, 3.0, 3.0], [0.0, 3.0, 6.0])
    finally:
        release.set()
        holder.join()


@pytest.mark.parametrize("kind", ["per shape", "static"])
def test_concurrent_first_calls_of_a_function_that_specialises_further_all_succeed(kind):
    """Found by an API hunt: threads that built their key before another thread switched
    the function to per-shape (or static) compiles got its internal error."""
    fn = (lambda x, n: x[:3] * n + x.shape[0]) if kind == "per shape" else \
        (lambda x, n: x * 2 if n > 1 else x)
    jitted = numfuse.jit(fn)
    results, errors = _concurrently(lambda: jitted(np.arange(10.0), 2.0), 6)
    assert not errors
    for result in results:
        assert_same(result, fn(np.arange(10.0), 2.0))


def test_compile_trace_and_explain_take_dict_arguments_as_a_call_does():
    """Found by an API hunt: numfuse.compile, numfuse.trace and explain refused the dict
    arguments a call of the jitted function takes."""
    def loss(p, X, y):
        z = X @ p["w"] + p["b"]
        return np.mean(np.logaddexp(0, z) - y * z)

    X, y = np.ones((10, 3)), np.ones(10)
    p = {"w": np.linspace(-1.0, 1.0, 3), "b": 0.5}
    value_and_grad = numfuse.value_and_grad(loss)
    compiled = numfuse.compile(value_and_grad, p, X, y)
    assert_same(compiled(p, X, y), value_and_grad(p, X, y))
    other = {"w": np.zeros(3), "b": 0.0}
    assert_same(compiled(other, X, y), value_and_grad(other, X, y))
    with pytest.raises(numfuse.SignatureMismatchError, match="dict, list or tuple arguments"):
        compiled({"w": np.zeros(3)}, X, y)
    assert_same(numfuse.compile(loss, p, X, y)(p, X, y), loss(p, X, y), rtol=1e-15)
    assert "matmul" in str(numfuse.trace(loss, p, X, y))
    assert value_and_grad.explain(p, X, y).regions


def _branching(x):
    if x.sum() > 0:  # Python control flow on a value: not traceable
        return x * 2
    return x - 1


def _count_up_to(x):  # a size from a value: not traceable
    return np.arange(int(x.max())) * 2


def test_a_function_numfuse_cannot_compile_runs_with_numpy_and_warns_once():
    """numpy's result, for every call of arguments of the kind that failed (once traced),
    with one ``NumpyFallbackWarning`` naming the reason; numfuse.compile still raises."""
    jitted = numfuse.jit(_branching)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", numfuse.NumpyFallbackWarning)
        for x in (X, -X - 10, X + 1):
            assert_same(jitted(x), _branching(x))
        counted = np.array([1.0, 4.0, 2.0])
        assert_same(numfuse.jit(_count_up_to)(counted), _count_up_to(counted))
    assert [type(w.message) for w in caught] == [numfuse.NumpyFallbackWarning] * 2
    assert "ConcretizationError" in str(caught[0].message)
    assert len(jitted.compiled) == 0
    with pytest.raises(numfuse.ConcretizationError, match="bool"):
        numfuse.compile(_branching, X)


def _inverse_or_pseudo_inverse(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(a)


def test_a_numpy_call_inside_try_except_runs_with_numpy():
    """An error a numpy call raises when the compiled function runs could not reach the
    function's except clause: such a function runs with numpy (a ``with`` block or a
    ``finally`` does not catch, and compiles)."""
    jitted = numfuse.jit(_inverse_or_pseudo_inverse)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", numfuse.NumpyFallbackWarning)
        for a in (np.zeros((2, 2)), np.eye(2) * 2):
            assert_same(jitted(a), _inverse_or_pseudo_inverse(a))
    assert len(caught) == 1 and "try block" in str(caught[0].message)

    def guarded(a):
        with np.errstate(divide="ignore"):
            try:
                scaled = a * 2
            finally:
                pass
            return np.linalg.inv(scaled) + 1.0 / a

    assert_same(numfuse.jit(guarded)(np.eye(2) * 2), guarded(np.eye(2) * 2))


def _log_or_zero(x):
    try:
        return np.log(x) * 2
    except FloatingPointError:
        return np.zeros_like(x)


def _log_unless_invalid(x):
    try:
        return np.log(x) * 2
    except (ValueError, np.linalg.LinAlgError):  # never numpy's FloatingPointError
        return np.zeros_like(x)


def test_math_inside_try_catching_floating_point_errors_runs_with_numpy():
    """Under np.errstate(...="raise") a fused kernel raises after the function returned,
    past its ``except FloatingPointError``: such a function runs with numpy; clauses that
    cannot catch it compile."""
    x = np.array([0.0, 1.0, 2.0])
    jitted = numfuse.jit(_log_or_zero)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="FloatingPointError"), \
            np.errstate(divide="raise"):
        assert_same(jitted(x), np.zeros(3))
    for mode in ("raise", "warn"):
        with np.errstate(divide=mode):
            assert_like_numpy(_log_or_zero, x, jitted=jitted)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        with np.errstate(all="ignore"):
            assert_same(numfuse.jit(_log_unless_invalid)(x), _log_unless_invalid(x))


def _reciprocal_or_zero(a):
    try:
        with np.errstate(divide="raise"):
            r = 1.0 / a
    except FloatingPointError:
        r = np.zeros_like(a)
    return r


def _reciprocal_raising(a):
    try:
        with np.errstate(divide="raise"):
            r = 1.0 / a
    except KeyError:
        r = np.zeros_like(a)
    return r


def test_math_in_an_errstate_block_inside_try_catching_its_error_runs_with_numpy():
    """Found by a conformance hunt: a ``with np.errstate(...)`` block inside the ``try``
    hid the ``except FloatingPointError`` clause (the block's exit stood between them),
    so the kernel's error reached the caller; a clause that cannot catch it compiles."""
    x = np.arange(3.0)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="FloatingPointError"):
        assert_same(numfuse.jit(_reciprocal_or_zero)(x), np.zeros(3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(_reciprocal_raising)
        assert_same(jitted(x + 1), 1.0 / (x + 1))
        with pytest.raises(FloatingPointError):
            jitted(x)


def test_out_of_a_function_that_falls_back_receives_numpys_results():
    jitted = numfuse.jit(_branching)
    out = np.zeros_like(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", numfuse.NumpyFallbackWarning)
        for x in (X, -X - 10):
            assert jitted(x, out=out) is out
            assert_same(out, _branching(x))
    assert len(caught) == 1


def _bootstrap_mean(x, rng):
    return x[rng.integers(0, x.size, x.size)].mean()


def test_a_random_generator_argument_makes_numpy_run_the_function():
    """Its draws, made once while tracing, would come back at every call (a bootstrap
    with the rng passed in): numpy runs the function, warning once."""
    jitted = numfuse.jit(_bootstrap_mean)
    x = np.arange(10.0)
    with pytest.warns(RuntimeWarning, match="random generator|Generator"):
        for seed in (0, 1, 2):
            assert_same(jitted(x, np.random.default_rng(seed)),
                        _bootstrap_mean(x, np.random.default_rng(seed)))


class _Dropout:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def __call__(self, x):
        return x * (self.rng.random(x.shape) >= 0.5) * 2.0


_GLOBAL_RNG = np.random.default_rng(7)


def _with_imported_rand(x):
    return x + _imported_rand()


def _with_imported_random(x):
    return x + _imported_random()


def _with_a_global_generator(x):
    return x + _GLOBAL_RNG.random()


def _with_a_layer(x, layer):
    return layer(x)


def test_draws_from_generators_numfuse_does_not_replace_make_numpy_run_the_function():
    """Found by a conformance hunt: numbers drawn while tracing from a generator held by
    an argument object (``self.rng``), a global one, or numpy's and Python's global ones
    through names imported from their modules came back at every call.  numpy runs such
    functions, and draws what it would have drawn without numfuse."""
    global _GLOBAL_RNG
    x = np.zeros(4)
    # the states are restored only where no other thread could have drawn meanwhile
    restored = not others_may_draw()
    for fn in (_with_imported_rand, _with_imported_random, _with_a_global_generator):
        np.random.seed(3), random.seed(3)
        _GLOBAL_RNG = np.random.default_rng(7)
        jitted = numfuse.jit(fn)
        with pytest.warns(numfuse.NumpyFallbackWarning, match="random numbers"):
            got = [jitted(x) for _ in range(3)]
        assert len({value.tobytes() for value in got}) == 3  # fresh numbers at each call
        if restored:
            np.random.seed(3), random.seed(3)
            _GLOBAL_RNG = np.random.default_rng(7)
            for value, expected in zip(got, [fn(x) for _ in range(3)], strict=True):
                assert_same(value, expected)
    jitted = numfuse.jit(_with_a_layer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [jitted(np.ones(64), layer) for layer in [_Dropout(0)] * 3]
    assert len({value.tobytes() for value in got}) == 3  # a new mask at each call
    if restored:
        layer = _Dropout(0)
        for value in got:
            assert_same(value, _with_a_layer(np.ones(64), layer))


def _present_classes_weights(x, y):
    return x[np.unique(y) != 0]


def test_a_result_size_no_compilation_foresees_makes_numpy_run_the_function():
    """Found by a conformance hunt: a mask as long as an argument's distinct values
    indexing another argument raised CallShapeError at every call, compiled per shape
    or not, where numpy returns the selection."""
    x, y = np.arange(5.0) + 10, np.arange(1.0, 6.0)
    jitted = numfuse.jit(_present_classes_weights)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="CallShapeError"):
        assert_same(jitted(x, y), _present_classes_weights(x, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            assert_same(jitted(x, y), _present_classes_weights(x, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        with pytest.raises(numfuse.CallShapeError):
            numfuse.jit(_present_classes_weights)(x, y)


def test_the_fallback_made_an_error_raises_the_reason():
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        with pytest.raises(numfuse.ConcretizationError, match="bool"):
            numfuse.jit(_branching)(X)


def test_numpys_own_error_is_raised_without_a_fallback_warning():
    """An error numpy raises too (a bound out of uint8's range) comes without the
    warning, and the functions's own ``raise`` is never a reason to fall back."""
    def bounded(x, hi):
        return np.clip(x, 0, hi)

    def refusing(x, k):
        if k == 2:
            raise ValueError("k must not be 2")
        return x * k

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", numfuse.NumpyFallbackWarning)
        with pytest.raises(OverflowError):
            numfuse.jit(bounded)(np.array([1, 200], np.uint8), -5)
        with pytest.raises(ValueError, match="must not be 2"):
            numfuse.jit(refusing)(X, 2)
    assert caught == []


def test_a_gradient_never_falls_back_to_numpy():
    """numpy cannot run a backward pass: the reason is raised even where the fallback
    is allowed."""
    with warnings.catch_warnings():
        warnings.simplefilter("always", numfuse.NumpyFallbackWarning)
        with pytest.raises(numfuse.ConcretizationError):
            numfuse.grad(lambda x: np.sum(x**2) if x.sum() > 0 else np.sum(x))(X)
        with pytest.raises(numfuse.ConcretizationError):
            numfuse.grad(lambda p: np.sum(p["w"] ** 2) if p["w"].sum() > 0 else 0.0)(
                {"w": X})


def _summed(x, axis=0, mode="plain"):
    return x.sum(axis=axis)


@functools.wraps(_summed)
def _reading_its_keywords(*args, **kwargs):
    """A wrapper that reads how it was called (as scipy.stats' nan_policy decorator)."""
    return _summed(*args, **kwargs) + (100 if "mode" in kwargs else 0)


def test_a_wrapper_taking_args_and_kwargs_gets_its_arguments_as_the_call_gave_them():
    """functools.wraps makes inspect.signature report the wrapped function's parameters:
    binding by them passed the keywords by position, and the wrapper did not see them."""
    m = np.ones((2, 3))
    jitted = numfuse.jit(_reading_its_keywords)
    for args, kwargs in [((m,), {"axis": 1, "mode": "b"}), ((m, 1), {}), ((m,), {})]:
        assert_same(jitted(*args, **kwargs), _reading_its_keywords(*args, **kwargs))


class _WithDegrees(collections.namedtuple("_WithDegrees", ["statistic", "pvalue"])):
    """A result type as scipy's TtestResult: more constructor arguments than items."""

    def __new__(cls, statistic, pvalue, df):
        made = super().__new__(cls, statistic, pvalue)
        made.df = df
        return made


def test_a_result_not_made_again_from_its_items_runs_with_numpy():
    x = np.arange(4.0)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="not made again from its items"):
        result = numfuse.jit(lambda x: _WithDegrees(x.sum(), x.mean(), df=3))(x)
    assert result == (6.0, 1.5) and result.df == 3
    pair = collections.namedtuple("pair", "a b")
    assert_same(numfuse.jit(lambda x: pair(x.sum(), x))(x), pair(x.sum(), x))


_Bounds = collections.namedtuple("_Bounds", "low high")


@pytest.mark.parametrize(("fn", "first", "second"), [
    (lambda x, p: np.clip(x, p.low, p.high), _Bounds(0.5, 1.5), _Bounds(1.0, 2.5)),
    (lambda x, p: (x * p[0], p), _Bounds(2.0, np.float32(1.0)), _Bounds(3.0, np.float32(2))),
    (lambda x, p: x * p.low + p.high, _Bounds(3, 4), _Bounds(-1, 2)),
    (lambda x, p: np.zeros(p) + x[0], _Bounds(2, 3), _Bounds(1, 4)),
    (lambda x, p: x[:4].reshape(p), _Bounds(1, 4), _Bounds(2, 2)),
    (lambda x, ps: x * ps[0].low + ps[1].high, [_Bounds(2.0, 1.0), _Bounds(3.0, 4.0)],
     [_Bounds(-2.0, 0.5), _Bounds(1.0, 8.0)]),
])
def test_a_namedtuple_argument_is_read_by_its_fields(fn, first, second):
    """A namedtuple of numbers was taken as an array: its fields raised AttributeError
    (numpy ran the function) and a returned one came back as an array; a namedtuple of
    ints is static as a tuple of ints is (a shape)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(fn)
        for bounds in (first, second, first):
            assert_same(jitted(X, bounds), fn(X, bounds))


@pytest.mark.parametrize(("fn", "x", "items"), [
    (lambda x, bounds: np.stack([np.clip(x[:, j], low, high)
                                 for j, (low, high) in enumerate(bounds)], axis=1),
     np.ones((4, 2), np.float32), [(0, 1.5), (-1, 0.5)]),
    (lambda a, p: a * p[0] + p[1], np.ones(3, np.int8), [True, 2]),
    (lambda a, p: a * p[0] + p[1], np.ones(2, np.float32), [1.5, 1j]),
    (lambda a, p: (a * p[0][1], p[1][0]), np.ones(2, np.float32), ((1, 2.5), (3, 4.0))),
])
def test_items_of_a_short_list_of_numbers_of_mixed_types_are_python_numbers(fn, x, items):
    # nested or mixing bool or complex: a static value (each item the number it is)
    jitted = numfuse.jit(fn)
    for _ in range(2):
        assert_same(jitted(x, items), numpy_result(fn, x, items))


def _sum_or_first(a, b):
    try:
        return a + b
    except ValueError:  # operands that do not broadcast
        return a


def _shifted_or_same(x, s):
    try:
        return x + s
    except OverflowError:  # a Python int beyond the array's dtype
        return x


def _doubled_log(x):
    try:
        return np.log(x) * 2
    except ValueError:  # nothing here raises it: compiles
        return x


def test_arithmetic_inside_try_catching_value_or_overflow_errors_runs_with_numpy():
    # the kernel would raise after the function returned, past the clause
    for fn, args in ((_sum_or_first, (np.ones(3), np.ones(2))),
                     (_sum_or_first, (np.ones(3), np.ones(3))),
                     (_shifted_or_same, (np.ones(3, np.int8), 300)),
                     (_shifted_or_same, (np.ones(3, np.int8), 3))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
            jitted = numfuse.jit(fn)
            for _ in range(2):
                assert_same(jitted(*args), numpy_result(fn, *args))
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        assert_same(numfuse.jit(_doubled_log)(np.ones(3)), _doubled_log(np.ones(3)))


def _logged(log, x):
    log.append(x * 2)
    return x + 1


def _named(names, x):
    names.append("called")
    return x + 1


def test_a_list_argument_the_function_appends_to_is_the_callers_own_and_numpys():
    """Found by a conformance hunt: a list argument holding no arrays (empty, or of
    strings) was traced as the caller's own list: the traced value appended stayed in it
    (an empty list then failed the call); it is traced as a copy, and numpy runs a
    function changing it, on the caller's list."""
    for fn, first, expected_types in ((_logged, ["start"], ["str", "ndarray", "ndarray"]),
                                      (_logged, [], ["ndarray", "ndarray"]),
                                      (_named, [], ["str", "str"])):
        log = list(first)
        jitted = numfuse.jit(fn)
        with pytest.warns(numfuse.NumpyFallbackWarning, match="list"):
            assert_same(jitted(log, np.arange(3.0)), np.arange(3.0) + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
            assert_same(jitted(log, np.arange(3.0)), np.arange(3.0) + 1)
        assert [type(item).__name__ for item in log] == expected_types
    options = {"scale": 2.0, "names": ["a", "b"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        assert_same(numfuse.jit(lambda o, x: x * o["scale"] + len(o["names"]))(
            options, np.ones(2)), np.full(2, 4.0))


@pytest.mark.parametrize("fn", [
    lambda x: iter([x * 2]),
    lambda x: zip([x * 2], "a", strict=True),
    lambda x: map(np.abs, [x * 2]),
    lambda x: (v * 2 for v in [x, x + 1]),
    lambda x: iter([1, 2]),
    lambda x: functools.partial(np.add, x * 2),
    lambda x: ValueError(x * 2),
], ids=["iter", "zip", "map", "generator", "constant-iterator", "partial", "exception"])
def test_returned_iterators_partials_and_exceptions_are_made_at_each_call(fn):
    """Found by a conformance hunt: an iterator (or a partial, an exception) holding a
    traced value gave the traced value back, and an iterator made while tracing was
    given back, used up, from the second call: numpy runs such functions."""
    jitted = numfuse.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
        for shift in (0.0, 1.0, 1.0):
            x = np.arange(3.0) + shift
            got, expected = jitted(x), fn(x)
            if isinstance(expected, functools.partial):
                assert_same(got(1.0), expected(1.0))
            elif isinstance(expected, BaseException):
                assert_same(got.args[0], expected.args[0])
            else:
                for one, other in zip(list(got), list(expected), strict=True):
                    assert_same(one, other)


@pytest.mark.parametrize(("fn", "args", "error"), [
    (lambda a, b: a * b, (np.matrix([[1.0, 2.0], [3.0, 4.0]]),) * 2,
     UnsupportedOperationError),
    (lambda a: np.sum(a * 2), (np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0]),),
     UnsupportedOperationError),
    (lambda a, rng: a * 2, (np.ones(2), np.random.default_rng(0)),
     UnsupportedOperationError),
    (lambda x: x * 2, (2**63,), ObjectValuesError),
], ids=["matrix", "masked", "generator", "int-beyond-int64"])
def test_compile_refuses_the_arguments_jit_runs_numpy_for(fn, args, error):
    """Found by a documentation audit: ``numfuse.compile`` compiled a function of an
    ``np.matrix`` as of a plain array (an elementwise product where numpy multiplies
    matrices), and one of a Python int beyond int64 that its call then refused."""
    with pytest.raises(error, match="was called with"):
        numfuse.compile(fn, *args)


class _Weights:
    def __init__(self):
        self.w = np.array([2.0])
        self.d = {"k": 1.0}


def _weighted(x, options):
    return x * options.w[0] + options.d["k"]


def test_an_options_objects_arrays_and_dicts_changed_in_place_are_seen():
    """Found by a conformance hunt: an options object's array or dict field changed in
    place kept the value it had when traced (its key held the field itself, equal to
    itself after the change); small arrays and dicts are keyed by their contents."""
    jitted, options, x = numfuse.jit(_weighted), _Weights(), np.arange(3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        assert_same(jitted(x, options), _weighted(x, options))
        options.w[0] = 5.0
        assert_same(jitted(x, options), _weighted(x, options))
        options.d["k"] = 100.0
        assert_same(jitted(x, options), _weighted(x, options))
        assert_same(jitted(x, options), _weighted(x, options))
    assert len(jitted.compiled) == 3


@dataclasses.dataclass(slots=True)
class _SlottedScale:
    s: float


class _PrivateSlots:
    __slots__ = ("__b", "a")

    def __init__(self, a, b):
        self.a, self.__b = a, b

    def __eq__(self, other):
        return True  # equal to any other: told apart by the fields alone

    def __hash__(self):
        return 0

    def b(self):
        return self.__b


def test_an_options_object_with_slots_is_told_apart_by_its_slots_values():
    """Found by a conformance hunt: an object without ``__dict__`` (``dataclass(slots=True)``,
    ``__slots__``) was keyed by itself alone: a field changed after the first call was not
    seen, and ``Opt(100)`` compiled for int8 arrays served ``Opt(100.0)``."""
    x = np.array([1, 2, 3], np.int8)
    scaled = numfuse.jit(lambda x, o: x * o.s)
    options = _SlottedScale(2.0)
    assert_same(scaled(x, options), x * 2.0)
    options.s = 5.0
    assert_same(scaled(x, options), x * 5.0)
    assert_same(scaled(x, _SlottedScale(100)), x * 100)
    assert_same(scaled(x, _SlottedScale(100.0)), x * 100.0)
    shifted = numfuse.jit(lambda x, o: x * o.a + o.b())
    assert_same(shifted(x, _PrivateSlots(1, 2)), x + 2)
    assert_same(shifted(x, _PrivateSlots(1, 2.5)), x + 2.5)


def _scaled(x, *, k=2.0):
    return x * k


def test_a_keyword_only_parameter_is_not_taken_by_position():
    """Found by a conformance hunt: ``f(x, 3.0)`` of ``def f(x, *, k=2.0)`` multiplied by
    3.0 where Python raises TypeError (as many positional arguments as parameters were
    bound one to each)."""
    jitted, x = numfuse.jit(_scaled), np.ones(2)
    assert_same(jitted(x), x * 2.0)
    for _ in range(2):
        with pytest.raises(TypeError, match="positional"):
            jitted(x, 3.0)
    assert_same(jitted(x, k=3.0), x * 3.0)


def _masked_zero(x, mask):
    y = x * 2
    y[mask] = 0.0
    return y


def test_a_mask_of_another_length_raises_numpys_index_error_on_a_later_call():
    """Found by a conformance hunt: numpy raises IndexError for a mask of another length
    than the axis it selects along; numfuse raised its broadcast error (a ValueError)."""
    jitted, mask = numfuse.jit(_masked_zero), np.array([True, False, True, False])
    assert_same(jitted(np.arange(4.0), mask), _masked_zero(np.arange(4.0), mask))
    with pytest.raises(IndexError, match="boolean index did not match"):
        jitted(np.arange(5.0), mask)


_SCRIPT_PICKLING = """
import multiprocessing, pickle
import numpy as np, numfuse

@numfuse.jit
def scaled(x):
    return x * 2 + 1

if __name__ == "__main__":
    x = np.arange(4.0)
    scaled(x)
    again = pickle.loads(pickle.dumps(scaled))
    assert isinstance(again, numfuse.Jitted) and (again(x) == x * 2 + 1).all()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert (pool.map(scaled, [x])[0] == x * 2 + 1).all()
    print("ok")
"""


def test_a_jitted_function_of_a_script_pickles_with_pickle(tmp_path):
    """Found by a conformance hunt: ``@numfuse.jit`` in a script (``__main__``) could not
    be pickled by pickle ("not the same object as __main__.f"), so a process pool could
    not take it; its function is found through the jitted object (``f.fn``)."""
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT_PICKLING)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("fn", [
    lambda v: np.asarray(v),
    lambda v: np.full(2, v),
    lambda v: np.stack([v, 1]),
    lambda v: np.sum([v, 1]),
], ids=["asarray", "full", "stack", "sum-of-list"])
def test_a_python_int_beyond_int64_after_small_ones_runs_with_numpy(fn):
    """Found by a conformance hunt: once compiled for small Python ints, a call with 2**63
    (or beyond 64 bits) gave a numpy call another array than tracing found, and raised
    CallShapeError or TypeError; numpy runs such calls, as it does a first one."""
    jitted = numfuse.jit(fn)
    assert_same(jitted(5), fn(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for value in (2**63, 2**64 + 3, 7):
            got, expected = jitted(value), fn(value)
            assert np.asarray(got).dtype == np.asarray(expected).dtype
            assert np.array_equal(got, expected)
