"""Tracing: what a traced function may do, what it may not, and what the errors say.

Every error test checks three things of the message: it names the operation, it names the
user's source file and line (not a numfuse internal), and it says what to do instead.
"""

from __future__ import annotations

import collections
import copy
import enum
import os
import random
import time
import warnings

import numpy as np
import pytest
from conftest import assert_like_numpy, assert_same, check, line_of, numpy_result, observe

import numfuse
from numfuse.dtypes import spec_of
from numfuse.graph import ELEMENTWISE
from numfuse.passes import simplify
from numfuse.trace import trace_graph

X = np.array([-1.5, -0.0, 0.25, 2.0, 3.5])


def assert_error_message(error: BaseException, fn, marker: str, operation: str,
                         advice: str) -> None:
    message = str(error)
    location = f"{__file__}:{line_of(fn, marker)}:"
    assert location in message, f"{location} not in {message!r}"
    # The quoted source line also appears in the message; look for the operation before
    # it and for the advice after it, so neither check passes by quoting the user's code.
    before, _, after = message.partition(location)
    advice_text = after.partition("\n")[2]
    assert operation in before, f"{operation!r} not named before the location: {message!r}"
    assert advice in advice_text, f"{advice!r} not in the advice: {message!r}"


# ------------------------------------------------------------------------- concretization


def uses_if(x):
    if x > 0:  # marker
        return x
    return -x


def uses_bool(x):
    return bool(x)  # marker


def uses_float(x):
    return x * float(x)  # marker


def uses_int(x):
    return x * int(x)  # marker


_asarray = np.asarray  # a name bound before tracing is numpy's own function


def uses_asarray(x):
    return _asarray(x) + 1  # marker


def uses_chained_comparison(x):
    return 0 < x < 1  # marker


def uses_and(x):
    return (x > 0) and (x < 1)  # marker


def uses_shape(x):
    return x * x.shape[0]  # marker


def uses_len(x):
    return x * len(x)  # marker


def uses_size(x):
    return x * x.size  # marker


def uses_iteration(x):
    return sum(x.sum())  # marker


def uses_item(x):
    return x * x.item()  # marker


def uses_tolist(x):
    return x.tolist()  # marker


def uses_complex(x):
    return x * complex(x)  # marker


CONCRETIZATION_CASES = [
    (uses_if, "bool()", "np.where"),
    (uses_bool, "bool()", "np.where"),
    (uses_float, "float()", "static"),
    (uses_int, "int()", "static"),
    (uses_asarray, "np.asarray", "static"),
    (uses_chained_comparison, "bool()", "np.where"),
    (uses_and, "bool()", "np.where"),
    (uses_iteration, "iterating", "np.where"),
    (uses_item, "item()", "static"),
    (uses_tolist, "tolist()", "static"),
    (uses_complex, "complex()", "static"),
]


def test_iterating_over_an_axis_gives_its_items():
    """``a, b = np.percentile(x, [5, 95])`` and ``sum(rows)``: a first axis of known length
    unpacks; a free one makes the function compile per shape."""
    def spread(x):
        low, high = np.percentile(x, [5, 95])
        return np.clip(x, low, high), sum(x), [row * 2 for row in x[:2]]

    matrix = np.arange(12.0).reshape(4, 3)
    assert_same(numfuse.jit(spread)(matrix), spread(matrix))


@pytest.mark.parametrize(("fn", "operation", "advice"), CONCRETIZATION_CASES,
                         ids=[case[0].__name__ for case in CONCRETIZATION_CASES])
def test_concrete_value_needed_raises_concretization_error(fn, operation, advice):
    with pytest.raises(numfuse.ConcretizationError) as excinfo:
        numfuse.jit(fn)(X)
    assert isinstance(excinfo.value, TypeError)
    assert_error_message(excinfo.value, fn, "# marker", operation, advice)


def test_static_facts_of_a_traced_array_are_usable_in_python():
    """The advice says to use ``x.ndim``; it and ``x.dtype`` are known while tracing."""
    def by_rank(x):
        if x.ndim == 2 and x.dtype == np.float64:
            return x * 2.0
        return x - 1.0

    check(by_rank, X)
    check(by_rank, X.reshape(1, 5))
    check(by_rank, X32.reshape(1, 5))


def test_user_exceptions_propagate_unchanged():
    def raises(x):
        raise KeyError("from the user's code")

    with pytest.raises(KeyError, match="from the user's code"):
        numfuse.jit(raises)(X)


def test_error_leaves_no_compiled_signature_behind():
    jitted = numfuse.jit(uses_if)
    with pytest.raises(numfuse.ConcretizationError):
        jitted(X)
    assert len(jitted.compiled) == 0


# --------------------------------------------------------------------- unsupported operations


def uses_savetxt(x):
    np.savetxt("never-written.txt", x)  # marker
    return x


def uses_ufunc_at(x):
    return np.add.at(x, [0], 1.0)  # marker


def uses_inplace_add(x):
    x += 1  # marker
    return x


def uses_inplace_multiply_on_a_view(x):
    y = x * 2
    view = y[1:]
    y *= 3  # marker
    return view


def uses_item_assignment(x):
    x[0] = 1.0  # marker
    return x


BUFFER = np.empty(5)


def uses_out_array(x):
    np.add(x, 1, out=BUFFER)  # marker
    return BUFFER


def uses_out_argument(x):
    np.multiply(x, 3, out=x)  # marker
    return x


def uses_ufunc_where(x):
    return np.add(x, 1, where=x > 0)  # marker


UNSUPPORTED_CASES = [
    (uses_savetxt, "np.savetxt", "outside the jitted function"),
    (uses_ufunc_at, "np.add.at on an argument", "copy first"),
    (uses_inplace_add, "+=", "x = x + 1"),
    (uses_inplace_multiply_on_a_view, "while a view of it", "copy the view"),
    (uses_item_assignment, "item assignment", "instead"),
    (uses_out_array, "out=<numpy array>", "np.zeros_like(x)"),
    (uses_out_argument, "out=x", "x = x + 1"),
    (uses_ufunc_where, "where=", "np.where"),
]


@pytest.mark.parametrize(("fn", "operation", "advice"), UNSUPPORTED_CASES,
                         ids=[case[0].__name__ for case in UNSUPPORTED_CASES])
def test_unsupported_operation_raises_with_location_and_advice(fn, operation, advice):
    with pytest.raises(numfuse.UnsupportedOperationError) as excinfo:
        numfuse.jit(fn)(X)
    assert isinstance(excinfo.value, numfuse.TracingError)
    assert_error_message(excinfo.value, fn, "# marker", operation, advice)


def _scatter_counts(i):
    counts = np.zeros(5)
    np.add.at(counts, [0, 0, 1], 1.0)
    one_hot = np.zeros((i.size, 5))
    one_hot[np.arange(i.size), i % 5] = 1
    return counts, one_hot, np.eye(5)[i % 5]


def _fill_by_mask(x):
    out = np.empty(x.shape)
    out[x > 0] = np.sqrt(x[x > 0])
    out[x <= 0] = 0
    total = np.zeros(len(x))
    total += x
    table = np.array([1.0, 2.0, 4.0])
    steps = np.arange(3)
    scale = sum(x[:1] * k for k in steps) + float(steps.sum()) + len(steps)
    order = np.linspace(1, 0, 3)
    order.sort()
    return out, total, table[np.argmax(x) % 3] * x, scale, order, steps.tolist()


@pytest.mark.parametrize("fn", [_scatter_counts, _fill_by_mask])
def test_arrays_made_in_the_function_behave_as_numpys(fn):
    """``np.zeros``, ``np.eye``, ``np.array([...])``, ``np.arange``... made in the traced
    function are constants that can be written (``+=``, ``a[key] = v``, ``np.add.at``,
    ``.sort()``), indexed by traced values and used as Python values (``len``, ``for``,
    ``float``, ``tolist``)."""
    argument = np.arange(-3.0, 4.0) if fn is _fill_by_mask else np.arange(7)
    assert_same(numfuse.jit(fn)(argument), fn(argument))


def _moving_average(a, n=3):
    total = np.cumsum(a, dtype=float)
    total[n:] = total[n:] - total[:-n]  # the views on the right are gone before the write
    counts = np.zeros(5, dtype=np.int64)
    np.add.at(counts, a.astype(np.int64) % 5, 1)
    edges = np.linspace(a.min(), a.max(), 4)
    return total[n - 1:] / n, counts, np.digitize(a, edges)


def test_temporary_views_do_not_block_writes():
    """numpy idioms that write into a fresh array after reading views of it, ``np.add.at``
    into an array made in the function, ``np.linspace`` between traced bounds."""
    check(_moving_average, np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]))


def _augmented_items(x):
    y = x.copy()
    y[0] += 1
    y[:, 0] *= 2
    y[1:] -= y[:-1]
    y[1:, 1:] /= y[:-1, :-1] + 1
    y[...] += 1
    return y


def _shifted_by_views(x):
    y = x * 2
    y[1:] = y[:-1]  # numpy reads the items before it writes them
    y[0] = y[-1]
    return y


def _accumulated_rows(x):
    y = np.zeros_like(x)
    y[1] += x[0]
    y[1] += x[1]
    return y


@pytest.mark.parametrize("fn", [_augmented_items, _shifted_by_views, _accumulated_rows])
def test_augmented_and_item_assignment_through_temporary_views_write_as_numpy(fn):
    """``y[0] += 1`` is ``t = y[0]; t += 1; y[0] = t``: the temporary view's in-place
    result is what the item assignment writes; ``y[1:] = y[:-1]`` assigns a temporary
    view of the array itself.  Both compile (no numpy fallback)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(fn, np.arange(12.0).reshape(3, 4))


def test_augmented_assignment_into_a_view_held_in_a_list_is_not_taken_for_an_item_of_it():
    """``views[0] += 100`` stores into the list, not into ``y``: numpy's write through the
    view cannot be the list's item assignment (it had left ``y`` unwritten, silently); it
    is the view's write, through it into ``y``."""
    def through_a_list(x):
        y = x * 2
        views = [y[1:]]
        views[0] += 100
        return y, views[0]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(through_a_list, X)


def _views_written(x):
    y = x * 2
    row = y[1:]
    row[0] = 5  # a view held in a variable, written
    z = np.zeros((2, 3, 4))
    z[1][2][3] = x.sum()  # chained indexing of an array the function made
    z[0][1] = x[:4]
    nested = z[1][1:]
    inner = nested[:, 1:]
    inner[0, 0] = x[0]
    inner += 1  # in place, through two views
    return y, row, z, inner


def _views_written_with_a_temporary_value(x):
    y = np.outer(x[:3], x[:3])
    row = y[0]
    row[:] = y[1]  # numpy reads the temporary view before it writes
    del row
    flipped = y[::-1]
    flipped[0] = -5
    return y, flipped


@pytest.mark.parametrize("fn", [_views_written, _views_written_with_a_temporary_value])
def test_writes_into_indexed_views_of_arrays_the_function_made_write_as_numpy(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(fn, np.arange(6.0))


def _another_view_alive(x):
    y = x * 2
    first, rest = y[:2], y[2:]
    first[0] = 1
    return y, rest


def _transposed_view_written(x):
    y = np.zeros((3, 3))
    y.T[0] = x[:3]
    return y


@pytest.mark.parametrize("fn, message", [
    (_another_view_alive, "another view of that array is alive"),
    (_transposed_view_written, "other than by indexing")])
def test_writes_into_views_numfuse_cannot_follow_are_refused_and_run_by_numpy(fn, message):
    with pytest.raises(numfuse.UnsupportedOperationError, match=message):
        numfuse.compile(fn, np.arange(6.0))
    with pytest.warns(numfuse.NumpyFallbackWarning, match=message):
        got = numfuse.jit(fn)(np.arange(6.0))
    for value, expected in zip(got if isinstance(got, tuple) else (got,),
                               (fn(np.arange(6.0)),) if not isinstance(fn(np.arange(6.0)),
                                                                       tuple)
                               else fn(np.arange(6.0)), strict=True):
        np.testing.assert_array_equal(value, expected)


def _symmetrised(m):
    a = m.copy()
    a += a.T  # numpy reads the temporary view before it writes
    b = m * 1.0
    b -= b[0]
    return a, b


def test_in_place_operators_reading_a_temporary_view_of_the_array_itself_write_as_numpy():
    check(_symmetrised, np.arange(9.0).reshape(3, 3))

    def named(m):
        a = m.copy()
        transposed = a.T
        a += transposed  # the view lives on: numpy's would see the write
        return a, transposed

    with pytest.raises(numfuse.UnsupportedOperationError):
        numfuse.compile(named, np.arange(9.0).reshape(3, 3))


def test_augmented_item_assignment_keeps_numpys_casting_and_shape_rules():
    def casts(x):
        y = x.astype(np.int64)
        y[0] += 1.5
        return y

    def grows(x):
        y = x.copy()
        y[0:1] += np.ones((3, 4))
        return y

    for fn, error in ((casts, TypeError), (grows, ValueError)):  # (numpy's UFuncTypeError)
        with pytest.raises(error):
            fn(np.ones((3, 4)))
        with pytest.raises(error):
            numfuse.jit(fn)(np.ones((3, 4)))


def _nan_to_num_in_place(x):
    y = x * 2
    np.nan_to_num(y, copy=False, nan=-1.0)
    return y


def _written_results(x):
    norms = np.einsum("ij,ij->i", x, x)  # sklearn's row_norms
    np.sqrt(norms, norms)
    upper = np.triu(x)
    upper += 1
    taken = np.take(x, [0, 1], axis=1)
    taken *= 2
    squares = np.subtract.outer(x[0], x[0])
    squares **= 2
    running = np.add.accumulate(x, axis=1)
    running -= 1
    return norms, upper, taken, squares, running


@pytest.mark.parametrize("fn", [_nan_to_num_in_place, _written_results])
def test_fresh_results_of_numpy_calls_are_written_as_numpy(fn):
    """``np.nan_to_num(y, copy=False)`` writes into ``y``; the results of ``np.einsum``
    (but a view such as ``'ii->i'``), ``np.triu``, ``np.take``, ``ufunc.outer`` and
    ``ufunc.accumulate`` are new arrays the function may write into."""
    check(fn, np.array([[1.0, np.nan, 3.0], [np.inf, -2.0, 0.5]]))


@pytest.mark.parametrize("write", [
    lambda s: s.fill(0), lambda s: np.put(s, 0, 7), lambda s: s.put(0, 7),
    lambda s: np.copyto(s, 0), lambda s: np.putmask(s, True, 0),
    lambda s: np.place(s, True, 0), lambda s: np.add.at(s, (), 1),
], ids=["fill", "np.put", "put", "copyto", "putmask", "place", "add.at"])
@pytest.mark.parametrize("make", [lambda x: x.max(), lambda x: x[0] * 1],
                         ids=["reduced", "indexed"])
def test_writing_functions_on_a_numpy_scalar_do_as_numpy(write, make):
    """Found by a conformance hunt: ``m = x.max(); m.fill(0)`` changed the scalar (numpy
    fills a copy) and ``np.copyto(m, 0)`` wrote where numpy raises TypeError."""
    def fn(x):
        scalar = make(x)
        write(scalar)
        return scalar

    assert_like_numpy(fn, X)


def test_a_view_numpy_einsum_returns_is_not_written():
    def diagonal_plus_one(x):
        d = np.einsum("ii->i", x)
        d += 1
        return d

    with pytest.raises(numfuse.UnsupportedOperationError, match="in-place"):
        numfuse.jit(diagonal_plus_one)(np.eye(3))


def _writes_after_a_view_of_a_view(x):
    y = x * 2
    view = y[1:]
    inner = view[1:]
    del view
    y += 1  # marker
    return inner


def _writes_into_real_part(x):
    z = x * (1 + 1j)
    real = z.real
    real += 1  # marker
    return z


def _real_part_before_a_write(x):
    z = x * (1 + 1j)
    real = z.real  # a view of z (found by a conformance hunt: taken as a copy)
    z *= 2  # marker
    return real


def _imaginary_part_before_an_item_write(x):
    z = x * (1 + 1j)
    imag = z[1:].imag
    z[2] = 99  # marker
    return imag


@pytest.mark.parametrize("fn", [_writes_after_a_view_of_a_view, _writes_into_real_part,
                                _real_part_before_a_write,
                                _imaginary_part_before_an_item_write])
def test_writes_that_a_live_view_would_see_are_refused(fn):
    with pytest.raises(numfuse.UnsupportedOperationError,
                       match=r"in-place|item assignment into an array the function made"):
        numfuse.jit(fn)(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
        assert_same(numfuse.jit(fn)(X), fn(X))


def _write_through_a_traced_row(x, i):
    y = x * 2
    y[i][0] = -1  # y[i] is a view of y: numpy writes into y
    return y


def _row_after_a_write(x, i):
    y = x * 2
    row = y[i]
    y[:] = 0  # seen through the view
    return row


def _row_scaled_in_place(x):
    y = x * 2
    row = y[np.argmax(x.sum(1))]
    row *= 0
    return y


@pytest.mark.parametrize(("fn", "args"), [
    (_write_through_a_traced_row, (np.arange(10.0).reshape(5, 2), 1)),
    (_row_after_a_write, (np.arange(10.0).reshape(5, 2), 3)),
    (_row_scaled_in_place, (np.arange(10.0).reshape(5, 2),)),
])
def test_an_item_at_a_traced_integer_is_a_view_as_numpys(fn, args):
    """An integer index known only when the function runs (a Python int argument, an
    argmax) is numpy's basic indexing: writes through the row or into the array are
    seen by the other, and numpy runs such a function."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(fn)
        for _ in range(2):
            assert_same(jitted(*args), fn(*args))
    check(lambda x, i: x[i] * 2 + x[i - 1], np.arange(10.0).reshape(5, 2), 3)  # only read: compiles


def _tail_cleared(x, n):
    y = x * 2
    y[n:] = 0
    return y


def _after_the_peak_cleared(x):
    y = x * 2
    y[np.argmax(x):] = 0
    return y


def test_a_traced_slice_bound_in_an_item_assignment_is_numpys_value():
    """y[n:] = v: a number argument as the bound is static (one compile per value); a
    computed one makes numpy run the function."""
    x = np.array([1.0, 5.0, 2.0, 3.0])
    jitted = numfuse.jit(_tail_cleared)
    for n in (2, 3, 2):
        assert_same(jitted(x, n), _tail_cleared(x, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
        peak = numfuse.jit(_after_the_peak_cleared)
        for _ in range(2):
            assert_same(peak(x), _after_the_peak_cleared(x))


def test_a_view_of_a_constant_keeps_it_unwritable():
    def writes_after_view(x):
        a = np.ones(3)
        view = a[1:]
        a += x  # marker
        return view

    with pytest.raises(numfuse.UnsupportedOperationError, match="in-place"):
        numfuse.jit(writes_after_view)(np.ones(3))


def test_unsupported_error_does_not_mutate_caller_array():
    x = X.copy()
    with pytest.raises(numfuse.UnsupportedOperationError):
        numfuse.jit(uses_item_assignment)(x)
    assert_same(x, X)


# ------------------------------------------------------------------------------ constants

X32 = X.astype(np.float32)
I8 = np.array([-128, -1, 0, 1, 127], dtype=np.int8)


@pytest.mark.parametrize(("fn", "arg"), [
    pytest.param(lambda x: x * 2.5, X32, id="python-float-is-weak"),
    pytest.param(lambda x: x + 3, I8, id="python-int-is-weak"),
    pytest.param(lambda x: x * 1j, X32, id="python-complex-is-weak"),
    pytest.param(lambda x: x * True, X32, id="python-bool"),
    pytest.param(lambda x: x * 0.1, X, id="python-float-inexact"),
    pytest.param(lambda x: x * np.float64(2.5), X32, id="numpy-float64-is-strong"),
    pytest.param(lambda x: x + np.int16(3), I8, id="numpy-int16-is-strong"),
    pytest.param(lambda x: x * np.float32(0.1), X, id="numpy-float32-into-float64"),
    pytest.param(lambda x: x * np.array(2.5), X32, id="0d-array-is-strong"),
    pytest.param(lambda x: x < [0, 1, 2, 3, 4], X, id="list"),
    pytest.param(lambda x: x + (1, 2, 3, 4, 5), X32, id="tuple"),  # noqa: RUF005
    pytest.param(lambda x: x + [[1.5], [-2.0]], X, id="nested-list-broadcasts"),  # noqa: RUF005
    pytest.param(lambda x: x * np.array([1, 2, 3, 4, 5], np.int8), X32, id="int8-array"),
    pytest.param(lambda x: x * np.arange(10.0).reshape(2, 5), X, id="2d-array"),
    pytest.param(lambda x: x - np.arange(5.0).astype(">f8"), X, id="big-endian-array"),
    pytest.param(lambda x: x + np.arange(10.0)[::2], X, id="strided-array"),
    pytest.param(lambda x: x + np.nan, X, id="nan"),
    pytest.param(lambda x: x * -0.0, X, id="negative-zero"),
])
def test_constants_of_every_kind_behave_as_in_numpy(fn, arg):
    check(fn, arg)


def test_out_of_range_python_int_constant_raises_like_numpy():
    def add_big(x):
        return x + 1000

    with pytest.raises(OverflowError):
        numpy_result(add_big, I8)
    with pytest.raises(OverflowError):
        numfuse.jit(add_big)(I8)


def test_comparison_with_out_of_range_python_int_constant():
    check(lambda x: (x < 1000, x > -1000, x == 2**63), I8)


def test_closed_over_array_is_snapshotted_at_trace_time():
    """A closed-over array is a constant of the traced function: mutating it after the
    first call does not change the compiled result (pass it as an argument instead)."""
    weights = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

    def weighted(x):
        return x * weights

    jitted = numfuse.jit(weighted)
    first = jitted(X)
    assert_same(first, X * np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    weights[:] = 100.0
    assert_same(jitted(X), first)
    assert len(jitted.compiled) == 1


def test_closed_over_python_number_is_snapshotted_at_trace_time():
    scale = {"value": 2.0}

    def scaled(x):
        return x * scale["value"]

    jitted = numfuse.jit(scaled)
    first = jitted(X)
    scale["value"] = 3.0
    assert_same(jitted(X), first)
    assert_same(first, X * 2.0)


def test_new_signature_traced_after_mutation_sees_the_new_value():
    weights = np.array([1.0, 2.0, 3.0, 4.0, 5.0])

    def weighted(x):
        return x * weights

    jitted = numfuse.jit(weighted)
    jitted(X)
    weights[:] = 10.0
    assert_same(jitted(X32), X32 * weights)


def test_constant_array_used_by_a_kernel_is_not_written():
    table = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    before = table.copy()
    check(lambda x: (x + table, x * table), X)
    assert_same(table, before)


# ------------------------------------------------------ results that do not depend on arguments


def test_function_without_arguments():
    check(lambda: (np.arange(3.0) * 2, 1.5))


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: np.sin(np.float32(0.5)), id="numpy-scalar"),
    pytest.param(lambda x: np.float32(1) + 2.5, id="weak-promotion-at-trace-time"),
    pytest.param(lambda x: np.arange(3) * 2, id="array"),
    pytest.param(lambda x: 3 * 2.5, id="python-float"),
    pytest.param(lambda x: 7, id="python-int"),
    pytest.param(lambda x: None, id="none"),
    pytest.param(lambda x: "text", id="string"),
    pytest.param(lambda x: (x + 1, np.ones(2), 7), id="mixed-with-traced"),
])
def test_result_independent_of_arguments_is_numpys_value(fn):
    check(fn, X)


def test_constant_array_result_is_a_fresh_copy_on_every_call():
    jitted = numfuse.jit(lambda x: (x + 1, np.arange(3.0)))
    _, first = jitted(X)
    first[:] = -1.0
    _, second = jitted(X)
    assert_same(second, np.arange(3.0))


# ------------------------------------------------------------------ Python code runs once


def test_python_loops_unroll():
    def polynomial(x):
        total = x * 0.0
        for coefficient in (1.0, -2.0, 0.5, 3.0):
            total = total * x + coefficient
        return total

    check(polynomial, X)
    graph = simplify(trace_graph(polynomial, [spec_of(X)]))
    multiplies = [node for node in graph.nodes if node.op == "multiply"]
    assert len(multiplies) == 5


def test_while_loop_over_python_counter_unrolls():
    def repeated(x):
        count = 0
        while count < 3:
            x = x * 2.0 + 1.0
            count += 1
        return x

    check(repeated, X)


def test_helper_functions_inline():
    def square_plus(value, offset):
        return value * value + offset

    def outer(x):
        return square_plus(x, 1.0) - square_plus(x - 1.0, 2.0)

    check(outer, X)
    compiled = numfuse.compile(outer, X)
    assert len(compiled.kernels) == 1


def test_jitted_helper_called_inside_a_jitted_function_inlines():
    @numfuse.jit
    def helper(value):
        return value * 2.0

    def outer(x):
        return helper(x) + 1.0

    assert_same(numfuse.jit(outer)(X), X * 2.0 + 1.0)


def test_python_conditional_on_a_python_value_is_fine():
    settings = {"shift": True}

    def branch(x):
        if settings["shift"]:
            return x + 1.0
        return x - 1.0

    check(branch, X)


def test_ufunc_dtype_keyword_computes_in_that_dtype():
    check(lambda x: np.add(x, x, dtype=np.float64), I8)


def test_only_elementwise_nodes_are_recorded():
    graph = trace_graph(lambda x: np.exp(x) * 2.0, [spec_of(X)])
    kinds = {node.kind for node in graph.nodes}
    assert kinds <= {"input", "const", ELEMENTWISE}


# ------------------------------------------------------------------------- containers

Pair = collections.namedtuple("Pair", "total difference")


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x, y: (x + y, x - y), id="tuple"),
    pytest.param(lambda x, y: [x + y, x - y], id="list"),
    pytest.param(lambda x, y: {"b": x + y, "a": x - y}, id="dict-keeps-order"),
    pytest.param(lambda x, y: {"sum": (x + y, [x * y]), "diff": {"d": x - y}}, id="nested"),
    pytest.param(lambda x, y: Pair(x + y, x - y), id="namedtuple"),
    pytest.param(lambda x, y: ((x + y,),), id="single-element-tuple"),
    pytest.param(lambda x, y: [], id="empty-list"),
    pytest.param(lambda x, y: x + y, id="bare-array"),
])
def test_returned_containers_keep_their_structure(fn):
    check(fn, X, X[::-1].copy())


def test_returning_an_argument_unchanged_gives_the_callers_object():
    """Plain Python returns the argument itself; so does the jitted function."""
    x = X.copy()
    result = numfuse.jit(lambda a: a)(x)
    assert result is x


def test_returning_arguments_of_every_kind_unchanged():
    check(lambda a, b, c, d: (d, c, b, a), X, np.float32(1.5), 2.5, 3)


def test_returning_the_same_traced_value_twice():
    """Plain Python returns one array object twice; writing into one changes "both"."""
    def twice(x):
        y = x + 1.0
        return y, y

    first, second = numfuse.jit(twice)(X)
    assert first is second
    assert_same(first, X + 1.0)


def _same_value_twice(x):
    y = x * 2.0
    return y, x * 2.0, y


def _constant_twice(x):
    table = np.arange(3.0)
    return table, table, x + 1.0


def _nested_twice(x):
    y = x + 1.0
    return {"p": y, "q": [y, x + 1.0]}


@pytest.mark.parametrize(("fn", "same", "distinct"), [
    pytest.param(_same_value_twice, [(0, 2)], [(0, 1)], id="one-value-vs-equal-expression"),
    pytest.param(_constant_twice, [(0, 1)], [], id="constant-array"),
    pytest.param(_nested_twice, [(("p",), ("q", 0))], [(("p",), ("q", 1))], id="nested"),
])
def test_returned_objects_are_shared_exactly_when_numpys_are(fn, same, distinct):
    def leaf(tree, path):
        for key in path if isinstance(path, tuple) else (path,):
            tree = tree[key]
        return tree

    expected = numpy_result(fn, X)
    actual = numfuse.jit(fn)(X)
    assert_same(actual, expected)
    for first, second in same:
        assert leaf(expected, first) is leaf(expected, second)
        assert leaf(actual, first) is leaf(actual, second)
    for first, second in distinct:
        assert not np.shares_memory(leaf(expected, first), leaf(expected, second))
        assert not np.shares_memory(leaf(actual, first), leaf(actual, second))


@pytest.mark.parametrize("fn", [uses_shape, uses_len, uses_size])
def test_functions_reading_sizes_compile_per_shape(fn):
    """Reading ``x.shape``/``len(x)``/``x.size`` needs concrete sizes: the function is then
    compiled once per argument shape, and gives numpy's results for each shape."""
    jitted = numfuse.jit(fn)
    for size in (5, 8, 5):
        x = np.linspace(-1.0, 1.0, size)
        assert_same(jitted(x), fn(x))
    assert jitted.per_shape
    assert len(jitted.compiled) == 2


def test_compiled_for_a_size_dependent_function_names_the_shape():
    compiled = numfuse.compile(uses_shape, X)
    with pytest.raises(numfuse.SignatureMismatchError, match="shape differs"):
        compiled(np.concatenate([X, X]))


def test_len_of_a_0d_value_is_a_concretization_error():
    with pytest.raises(numfuse.ConcretizationError, match="len"):
        numfuse.jit(lambda x: len(x))(np.float64(1.0))


def _len_of_selection(x):
    return x.sum() / len(x[x > 1])  # marker


def _size_of_selection(x):
    return x[x > 1].size * x  # marker


def _rows_of_selection(m):
    return m[:, m[0] > 0].shape[1] + m  # marker


def _len_of_nonzero(x):
    return len(np.nonzero(x)[0]) + x  # marker


def _len_of_unique(x):
    return len(np.unique(x)) + x  # marker


def _iterates_a_selection(x):
    return sum(value for value in x[x > 1] * 2)  # marker


@pytest.mark.parametrize(("fn", "operation", "advice"), [
    (_len_of_selection, "len() of a traced array whose size depends on the values (from "
     "a boolean mask selection x[mask])", "x[mask].sum() / np.count_nonzero(mask)"),
    (_size_of_selection, "x.size of a traced array whose size depends on the values",
     "np.count_nonzero(mask) is that size as a traced value"),
    (_rows_of_selection, "x.shape of a traced array whose size depends on the values",
     "np.count_nonzero(mask)"),
    (_len_of_nonzero, "(from np.nonzero(x))", "np.count_nonzero(x) is that size"),
    (_len_of_unique, "(from np.unique)", "reductions over the values"),
    (_iterates_a_selection, "iterating over a traced array whose size depends",
     "np.count_nonzero(mask)"),
])
def test_sizes_that_depend_on_the_values_say_how_to_count(fn, operation, advice):
    """``len(x[mask])``: no compilation fixes a size that depends on the values (it was
    a SizeDependentError, retried per shape, whose advice was to use x.ndim)."""
    argument = np.ones((3, 4)) if fn is _rows_of_selection else X
    with pytest.raises(numfuse.ConcretizationError) as excinfo:
        numfuse.jit(fn)(argument)
    assert not isinstance(excinfo.value, numfuse.errors.SizeDependentError)
    assert_error_message(excinfo.value, fn, "# marker", operation, advice)


def _mean_of_selection(x):
    return x[x > 1].sum() / np.count_nonzero(x > 1)  # 0 / 0 for no selection: invalid


@pytest.mark.parametrize("x", [X, np.array([0.5, -1.0, 1.0])], ids=["some", "none"])
def test_counting_a_selection_as_advised_follows_numpy(x):
    assert_like_numpy(_mean_of_selection, x)


def test_ufunc_on_a_comparison_of_python_scalar_arguments():
    """Found by fuzzing: a comparison of two Python int arguments is a weak bool node,
    and checking the next ufunc with numpy crashed on it."""
    def fn(x, a, b):
        return np.minimum(b, a < b) + x

    check(fn, X, 0, 1)


# ------------------------------------------------------------------ writing in place

I64 = np.array([-7, -1, 0, 3, 100])
MATRIX = np.arange(12.0).reshape(3, 4) - 5.5


def _augmented_chain(x):
    y = x * 2
    y += 1
    y *= x
    y -= 0.5
    y /= 3
    y **= 2
    return y


def _integer_augmented(i):
    y = i * 3
    y //= 2
    y %= 7
    y <<= 1
    y >>= 1
    y &= 6
    y |= 1
    y ^= 2
    return y


def _downcast_into_float32(x):
    y = x.astype(np.float32)
    y += x  # computed in float64, stored as float32 like numpy
    return y


def _downcast_into_int8(i):
    y = i.astype(np.int8)
    y *= i  # int64 product wraps into int8
    return y


def _broadcast_into_matrix(m, row):
    y = m * 1
    y -= row
    y /= np.sum(y, axis=1, keepdims=True)
    return y


def _alias_sees_the_write(x):
    y = x + 1
    alias = y
    y *= 2
    return alias, y


def _earlier_reader_keeps_the_old_value(x):
    y = x + 1
    before = y * 10
    y += 100
    return before, y


def _ufunc_out(x):
    y = np.abs(x) + 1
    result = np.sqrt(y, out=y)
    return result, y


def _masked_divide(x, i):
    return np.divide(x, i, out=np.zeros_like(x), where=i != 0)


def _masked_sqrt(x):
    return np.sqrt(x, out=np.full_like(x, -1.0), where=x >= 0)


def _masked_by_a_number(x, s):
    out = np.zeros_like(x)
    np.add(x, s, out=out, where=x > 0)
    return out


def _safe_divide(a, b):
    return np.divide(a, b, out=np.zeros_like(a), where=b != 0)


@pytest.mark.parametrize("args", [(np.ones(4), 0.0), (np.ones(4, np.float32), 0.0),
                                  (np.ones(4, np.float32), 0.1), (np.arange(4.0), 2)],
                         ids=["by-zero", "float32-by-zero", "float32", "by-an-int"])
def test_a_division_masked_where_the_python_number_divisor_is_0_raises_nothing(args):
    """Found by a conformance hunt: ``np.divide(a, b, out=..., where=b != 0)`` with a
    Python float 0 warned "divide by zero" for the elements the mask leaves out."""
    assert_like_numpy(_safe_divide, *args)


@pytest.mark.parametrize("args", [
    (np.ones(3, np.float32), 2.0**-24 + 2.0**-50),
    (np.array([100, 50, 1], np.int8), 3),
    (np.array([0.1, -2.0, 3.0], np.float32), 0.1),
], ids=["float32-rounds-the-number", "int8-wraps", "float32"])
def test_a_python_number_beside_where_stays_weak(args):
    """Found by a conformance hunt: masking the operands for ``where=`` made a Python
    number argument a float64 (int64) array, so the loop of a float32 (int8) array was
    float64 (int64): other values, and numpy's OverflowError for 1000 was lost."""
    check(_masked_by_a_number, *args)
    with pytest.raises(OverflowError, match="1000"):
        numfuse.jit(_masked_by_a_number)(np.arange(4, dtype=np.int8), 1000)


def _copy_of_reduction(x):
    c = np.cumsum(x)
    c /= c[-1]
    s = x.sum()
    s += 1  # a numpy scalar: rebinds
    return c, s


def _mask_assignment(x):
    y = x * 1
    y[y < 0] = 0
    y[y > 2] = np.float32(2.5)
    return y


def _static_assignment(m):
    y = m + 0
    y[0] = -1
    y[1:, ::2] = 7
    y[:, 1] = m[:, 0] * 2
    return y


def _mask_assignment_of_an_array(x, i):
    y = x + 0
    y[i > 0] = x[:2]  # numpy's rule: the value must fill the selected elements
    return y


def _zeros_like_accumulator(x):
    acc = np.zeros_like(x)
    for k in range(3):
        acc += x * k
    return acc


def _scalar_rebinds(x):
    s = x[0]  # a numpy scalar
    s += 1.5
    z = np.float32(2) * x[1]
    z *= 2
    return s, z


@pytest.mark.parametrize(("fn", "args"), [
    (_augmented_chain, (X,)),
    (_integer_augmented, (I64,)),
    (_downcast_into_float32, (X,)),
    (_downcast_into_int8, (I64,)),
    (_broadcast_into_matrix, (MATRIX, MATRIX[0] + 1)),
    (_alias_sees_the_write, (X,)),
    (_earlier_reader_keeps_the_old_value, (X,)),
    (_ufunc_out, (X,)),
    (_masked_divide, (X, np.array([0, 2, 0, -1, 4]))),
    (_masked_sqrt, (X,)),
    (_copy_of_reduction, (X,)),
    (_mask_assignment, (X,)),
    (_static_assignment, (MATRIX,)),
    (_mask_assignment_of_an_array, (X, np.array([1, 0, 0, 0, 1]))),
    (_zeros_like_accumulator, (X,)),
    (_scalar_rebinds, (X,)),
], ids=lambda value: getattr(value, "__name__", "")[1:] or None)
def test_writes_into_fresh_arrays_give_numpys_result(fn, args):
    copies = [np.array(arg) for arg in args]
    check(fn, *args)
    for arg, original in zip(args, copies, strict=True):
        assert_same(arg, original)  # arguments are never written


def _written_then_added(u):
    y = u.copy()
    y[0] = 0.0
    return (y + u).sum()


def _zeros_like_written_then_sorted(u):
    y = np.zeros_like(u)
    y[-1] = u[3]
    return np.sort(y - u)


def _full_like_written_then_cumsum(u):
    y = np.full_like(u, 2)
    y[2] = 7
    return np.cumsum(y)[1:] * u[:-1]


def _written_twice_then_sliced(u):
    y = u * 1
    y[0] = np.inf
    y[1:3] = u[:2]
    return y[::2] - u[::2]  # inf - inf: numpy's invalid warning


def _written_matrix_multiplied(m):
    y = m.copy()
    y[0, 1] = -1
    return (y @ m).sum(axis=0) + m[0]


def _written_selection_then_summed(x):
    y = x[x > 0] * 1
    y[0] = 0.0
    return np.cumsum(y) + x.sum()


def _written_selection_broadcast(x):
    y = x[x > 0] * 1  # one element here: it broadcasts against x
    y[0] = 0.5
    return (np.exp(y) + x * 2).sum()


@pytest.mark.parametrize(("fn", "arg"), [
    (_written_then_added, np.ones(33)),
    (_written_then_added, np.arange(33, dtype=np.int8)),
    (_zeros_like_written_then_sorted, np.linspace(-3, 5, 33)),
    (_full_like_written_then_cumsum, np.arange(33)),
    (_full_like_written_then_cumsum, np.arange(33.0) + 1j),
    (_written_twice_then_sliced, np.r_[np.inf, np.ones(32)]),
    (_written_twice_then_sliced, np.arange(33.0)),
    (_written_matrix_multiplied, np.arange(16.0).reshape(4, 4)),
    (_written_selection_then_summed, np.linspace(-3, 5, 33)),
    (_written_selection_broadcast, np.array([-1.0, 2.0, -3.0])),
], ids=lambda value: getattr(value, "__name__", "")[1:] or None)
def test_writes_at_fixed_indices_then_numpy_calls_follow_numpy(fn, arg):
    """``y[0] = v`` builds its node without running numpy on stand-ins: its stand-in
    shape is its array's (it was a default size, which later numpy calls on stand-ins
    could not broadcast with the argument's); a written selection keeps its size that
    depends on the values, so no kernel loops over it with the argument's size."""
    jitted = numfuse.jit(fn)
    assert_like_numpy(fn, arg, jitted=jitted)
    if fn is not _written_selection_broadcast:
        for size in (7, 50):  # other sizes reuse the compiled function
            assert_like_numpy(fn, np.resize(arg, (size,) * arg.ndim), jitted=jitted)


def test_masked_out_elements_raise_no_warning():
    """numpy never computes the elements ``where=`` masks off: no divide-by-zero or
    invalid warning for them, even under errstate(all="raise")."""
    x, i = X, np.array([0, 2, 0, -1, 4])
    with np.errstate(all="raise"):
        assert_same(numfuse.jit(_masked_divide)(x, i), _masked_divide(x, i))
        assert_same(numfuse.jit(_masked_sqrt)(x), _masked_sqrt(x))


@pytest.mark.parametrize("dtype, value", [
    (np.float64, 1 + 2j),  # a complex number into a real array: numpy's TypeError
    (np.int64, 1 + 2j),
    (np.complex64, 1 + 2j),
    (np.complex64, 1e300),  # beyond the dtype's range: "overflow encountered in cast"
    (np.float16, 1e300),
    (np.float16, 2**63 - 1),
    (np.float32, 2**63 - 1),
    (np.float32, 7),
    (np.int32, 2.5),
    (np.bool_, 7),
])
def test_mask_assignment_of_a_python_number_casts_as_numpy(dtype, value):
    def assign(x):
        y = x.copy()
        y[y.real > 0] = value
        return y

    assert_like_numpy(assign, np.array([1, -2, 3]).astype(dtype))


def test_mask_assignment_of_a_scalar_fuses_into_the_kernel():
    kinds = {node.kind for node in simplify(trace_graph(_mask_assignment, [spec_of(X)]))
             .nodes}
    assert kinds <= {ELEMENTWISE, "input", "const"}


def _integer_true_divide_in_place(i):
    y = i + 1
    y /= 2
    return y


def _shape_changing_in_place(x):
    y = x[:1] * 1
    y += x
    return y


def _nan_into_integers(i):
    y = i + 0
    y[0] = np.nan
    return y


@pytest.mark.parametrize(("fn", "arg"), [
    (_integer_true_divide_in_place, I64),
    (_shape_changing_in_place, X),
    (_nan_into_integers, I64),
])
def test_invalid_writes_raise_numpys_error(fn, arg):
    with pytest.raises(Exception) as expected:
        fn(arg)
    with pytest.raises(type(expected.value)) as actual:
        numfuse.jit(fn)(arg)
    assert str(expected.value).split(" ")[:4] == str(actual.value).split(" ")[:4]


def _writes_through_view(x):
    y = x * 2
    view = y.T
    view += 1  # marker
    return y


def _writes_after_view(x):
    y = x * 2
    view = y.reshape(-1)
    y[0] = 5  # marker
    return view


def _writes_into_real_part(x):
    y = x * 1j
    real = y.real
    real += 1  # marker
    return y


def _item_assignment_on_scalar(x):
    s = x.sum()
    s[0] = 1  # marker
    return s


@pytest.mark.parametrize(("fn", "operation", "advice"), [
    (_writes_through_view, "in-place += into a view of an array the function made, taken "
     "other than by indexing", "copy the view first"),
    (_writes_after_view, "item assignment", "copy the view"),
    (_writes_into_real_part, "in-place += into a view", "copy the view first"),
])
def test_writes_that_a_view_would_see_raise(fn, operation, advice):
    with pytest.raises(numfuse.UnsupportedOperationError) as excinfo:
        numfuse.jit(fn)(X)
    assert_error_message(excinfo.value, fn, "# marker", operation, advice)


def test_item_assignment_on_a_numpy_scalar_raises_numpys_type_error():
    with pytest.raises(TypeError, match="does not support item assignment"):
        _item_assignment_on_scalar(X)
    with pytest.raises(TypeError, match=r"'numpy\.float64' object does not support item"):
        numfuse.jit(_item_assignment_on_scalar)(X)


def _assigns_into_numpy_array(x):
    a = BUFFER.copy()  # a numpy array, not made by a creation function
    a[:] = x  # marker
    return a


def test_assigning_a_traced_value_into_a_numpy_array_says_what_to_do():
    with pytest.raises(numfuse.ConcretizationError) as excinfo:
        numfuse.jit(_assigns_into_numpy_array)(X[:5])
    assert_error_message(excinfo.value, _assigns_into_numpy_array, "# marker", "np.asarray",
                         "np.zeros_like(x)")


def test_assigning_a_traced_value_into_an_array_made_in_the_function():
    def assigns(x):
        a = np.empty(5)
        a[:] = x
        return a

    assert_same(numfuse.jit(assigns)(X[:5]), X[:5].copy())


# ------------------------------------------------------------ ufuncs without kernel code


@pytest.mark.parametrize("fn", [
    lambda x: np.ldexp(x, 3) + 1,
    lambda x: np.frexp(x),
    lambda x: np.modf(x * 3),
    lambda x: np.spacing(x) * 2 if hasattr(np, "spacing") else x,
    lambda i: np.bitwise_count(i) + i,
    lambda x: np.frexp(x)[1] * 2,
], ids=["ldexp", "frexp", "modf", "spacing", "bitwise_count", "frexp-exponent"])
def test_ufuncs_without_kernel_code_run_as_numpy_calls(fn):
    arg = I64 if "bitwise" in repr(fn.__code__.co_names) else X
    check(fn, arg)


def test_scipy_special_ufuncs_run_as_numpy_calls():
    special = pytest.importorskip("scipy.special")
    check(lambda x: special.expit(x) * 2 + special.erf(x), X)


# ------------------------------------------------------------ np.asarray and friends


@pytest.mark.parametrize("fn", [
    lambda x: np.asarray(x) * 2,
    lambda x: np.asarray(x, dtype=np.float32) + 1,
    lambda x: np.asarray(x, np.int64) // 2,
    lambda x: np.array(x) - x,
    lambda x: np.array([x, x * 2]),
    lambda x: np.array([x.sum(), 1.0]),
    lambda x: np.asarray(x.sum()),
    lambda x: np.ascontiguousarray(x[::2]) + 1,
    lambda x: np.array(x, ndmin=2),
    lambda x: np.asanyarray(x, order="F") - 1,
    lambda x: np.asarray_chkfinite(x, dtype=np.float32) * 2,
    lambda x: (np.require(x, np.float32, "C") + 1, np.require(x.astype(int), None, ["A"])),
], ids=["asarray", "asarray-dtype", "asarray-positional-dtype", "array-copies", "array-of-list",
        "array-of-scalars", "asarray-of-scalar-is-0d", "ascontiguousarray", "array-ndmin",
        "asanyarray-order", "asarray-chkfinite", "require"])
def test_array_conversions_of_traced_values_follow_numpy(fn):
    check(fn, X)


def test_asarray_chkfinite_checks_the_values_of_each_call():
    jitted = numfuse.jit(lambda x: np.asarray_chkfinite(x * 2) + 1)
    assert_same(jitted(X), X * 2 + 1)
    with pytest.raises(ValueError, match="must not contain infs or NaNs"):
        jitted(np.array([1.0, np.nan]))


def test_asarray_of_a_python_scalar_argument_is_a_strong_0d_array():
    check(lambda x, a: np.asarray(a) * x.astype(np.float32), X, 2.5)


def test_array_copies_and_asarray_does_not():
    def write_through_asarray(x):
        y = x * 2
        same = np.asarray(y)
        copied = np.array(y)
        same += 1  # y sees it; the copy does not
        return y, copied

    check(write_through_asarray, X)


_C_MATRIX = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("fn", [
    lambda x: np.ascontiguousarray(x), lambda x: np.asfortranarray(x),
    lambda x: np.asarray(x, order="C"), lambda x: np.asarray(x, order="F"),
    lambda x: np.array(x, order="C", copy=None), lambda x: np.array(x, order="F"),
    lambda x: np.require(x, requirements="C"), lambda x: np.require(x, requirements=["F"]),
    lambda x: np.ascontiguousarray(x * 2), lambda x: np.asfortranarray(x * 2),
], ids=["ascontiguousarray", "asfortranarray", "asarray-C", "asarray-F", "array-C",
        "array-F", "require-C", "require-F", "computed-C", "computed-F"])
@pytest.mark.parametrize("x", [np.asfortranarray(_C_MATRIX), _C_MATRIX, _C_MATRIX[:, ::2],
                               _C_MATRIX[0]], ids=["fortran", "c", "strided", "row"])
def test_layout_conversions_copy_exactly_when_numpy_does(fn, x):
    """``np.ascontiguousarray(x)`` is ``x`` itself when ``x`` is C-contiguous and a copy
    otherwise (a write into it must not reach the caller's array): numpy's layout,
    identity and memory for arguments and their views."""
    expected, actual = fn(x), numfuse.jit(fn)(x)
    assert_same(actual, expected)
    assert (actual.flags.c_contiguous, actual.flags.f_contiguous) == \
        (expected.flags.c_contiguous, expected.flags.f_contiguous)
    assert (actual is x) == (expected is x)
    assert np.shares_memory(actual, x) == np.shares_memory(expected, x)


def test_asarray_of_complex_values_to_a_real_dtype_warns_like_numpy():
    z = np.array([1 + 2j, -3.5 + 0j])
    with pytest.warns(np.exceptions.ComplexWarning):
        assert_same(numfuse.jit(lambda z: np.asarray(z, dtype=np.float64) * 2)(z),
                    np.array([2.0, -7.0]))


@pytest.mark.parametrize("fn", [lambda x: x.flat[1:3], lambda x: x.flat[::2],
                                lambda x: x.T.flat[1:4], lambda x: x.flat[2]],
                         ids=["slice", "step", "transposed", "item"])
def test_flat_indexing_copies_as_numpy(fn):
    """``x.flat[a:b]`` is a new array in numpy, never a view of the argument."""
    x = np.arange(6.0).reshape(2, 3)
    expected, actual = fn(x), numfuse.jit(fn)(x)
    assert_same(actual, expected)
    assert not np.shares_memory(actual, x)


def _total_of_items(x):
    total = 0.0
    for value in x.flat:
        total = total + value
    return total


def test_a_loop_over_flat_follows_each_shape_and_flat_converts_as_its_items():
    """``for v in x.flat`` reads the size (compiled per shape: it had kept the first
    shape's count); ``np.array(x.flat)`` is x's items, flattened."""
    jitted = numfuse.jit(_total_of_items)
    for shape in ((2, 3), (3, 3), (1, 2)):
        assert_same(jitted(np.ones(shape)), _total_of_items(np.ones(shape)))
    check(lambda x: (np.array(x.flat), np.asarray(x.flat) * 2), np.arange(6.0).reshape(2, 3))


def test_byteswap_in_place_writes_into_the_functions_own_array():
    def swapped(x):
        y = x * 1
        z = y.byteswap(inplace=True)
        return y, z, x.byteswap()

    x = np.array([1.0, 2.0, -0.5])
    actual, expected = numfuse.jit(swapped)(x), swapped(x)
    assert_same(actual, expected)
    assert actual[0] is actual[1]  # numpy returns the array itself
    with pytest.raises(numfuse.UnsupportedOperationError, match="in-place"):
        numfuse.jit(lambda x: x.byteswap(True))(x)


@pytest.mark.parametrize(("fn", "arg"), [
    (lambda x: np.asarray(x - 10, dtype=np.uint64),
     np.array([7.0, 12.5, -128.9, np.inf, np.nan, 2.0**64])),
    (lambda x: np.asarray(x - 10, dtype=np.uint16), np.array([7.0, 12.5], np.float32)),
    (lambda z: np.asarray(z * 1, dtype=bool), np.array([1 + 1j, 0j])),
    (lambda z: np.asarray(z * 2, dtype=np.float64), np.array(1.5 - 0.5j)),
    (lambda z: np.array(z * 2, dtype=np.float32), np.array([1.5 - 0.5j])),
    (lambda x: np.asarray(x.sum(), dtype=np.float32), np.array([1.5, 2.0])),
], ids=["float-to-uint64", "float32-to-uint16", "complex-to-bool", "complex-0d-to-real",
        "complex-to-float32", "numpy-scalar"])
def test_asarray_with_a_dtype_casts_as_astype(fn, arg):
    """np.asarray(x, dtype)'s cast is numpy's (values beyond the range included), and
    its result an array."""
    assert_like_numpy(fn, arg)


@pytest.mark.parametrize("fn", [
    lambda x: (x * 2).astype(">f8"),
    lambda x: ((x * 2).astype(">i4"), x.sum().astype(">f4")),  # a numpy scalar is native
    lambda x: np.sqrt((x + 1).astype(">f4")) * 2,  # computed on: native again
    lambda x: np.asarray(x * 2, dtype=">f8"),
    lambda x: np.array(x - 1, dtype=">c16"),
], ids=["astype", "astype-scalar", "computed-on", "asarray", "array"])
def test_a_non_native_byte_order_asked_for_is_kept_as_numpy_keeps_it(fn):
    for _ in range(2):  # and through the cached call
        check(fn, X)


def test_astype_without_copy_to_the_same_dtype_is_the_array_itself():
    def write_through_astype(x):
        y = x * 2
        same = y.astype(y.dtype, copy=False)
        copied = y.astype(np.float32, copy=False)  # another dtype: a copy all the same
        same += 1
        copied += 1
        return y, copied, x.astype(np.float64, copy=False) is x

    check(write_through_astype, X)

    def into_argument(x):
        y = x.astype(np.float64, copy=False)  # x itself, as in numpy
        y *= 2
        return y

    with pytest.raises(numfuse.UnsupportedOperationError, match="on an argument"):
        numfuse.jit(into_argument)(X)
    assert_same(numfuse.jit(into_argument)(X.astype(np.float32)),
                into_argument(X.astype(np.float32)))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.uint64, np.float32])
def test_clip_with_python_int_bounds_beyond_an_integer_dtype_as_numpy(dtype):
    x = np.arange(-3, 9).astype(dtype) if np.dtype(dtype).kind != "u" else \
        np.arange(12).astype(dtype)
    cases = [lambda x: np.clip(x, 0, 300), lambda x: np.clip(x, -1000, 5),
             lambda x: np.clip(x, 1, 4)]
    if np.dtype(dtype).kind in "iu":  # (a float array with such ints: numpy's own run)
        cases += [lambda x: x.clip(max=2**70), lambda x: x.clip(min=-(2**70)),
                  lambda x: np.clip(x, -(2**65), 2**65)]
    for fn in cases:
        assert_like_numpy(fn, x)
    if np.dtype(dtype).kind in "iu":  # a bound beyond the range on the other side
        with pytest.raises(OverflowError):
            numfuse.jit(lambda x: np.clip(x, 2**70, 2**71))(x)


def test_numpy_functions_given_a_list_of_traced_values_take_it_as_an_array():
    """Found by a conformance hunt: numpy's dispatch does not look inside a list, so
    np.mean([a, b]) asked each traced value for a concrete array."""
    a, b = X, X * 2.0 - 1.0
    check(lambda a, b: np.mean([a, b], axis=0), a, b)
    check(lambda a, b: np.linalg.norm([a, b], axis=0), a, b)
    check(lambda a: np.max([a.sum(), a.min(), 0.0]), a)
    check(lambda a, b: np.sum((a, b), axis=0) * 2 + np.std([a, b]), a, b)
    check(lambda a, b: np.argmax([a, b], axis=0), a, b)
    check(lambda a: np.mean([1.0, 2.0]) * a, a)  # no traced value: numpy's own call
    assert np.mean is numpy_mean and np.linalg.norm is numpy_norm  # restored after tracing


numpy_mean, numpy_norm = np.mean, np.linalg.norm


def test_fftfreq_sizes_are_static_and_histogram_edges_are_the_bins_array():
    """Found by a conformance hunt: numpy's own check (``n should be an integer``)
    refused the traced int, so numpy ran the function."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        spectrum = numfuse.jit(lambda x, n, d: x[:n] * np.fft.fftfreq(n, d))
        half = numfuse.jit(lambda x, n: x[: n // 2 + 1] + np.fft.rfftfreq(n))
        for n, d in ((4, 0.5), (5, 0.25)):
            assert_same(spectrum(X, n, d), X[:n] * np.fft.fftfreq(n, d))
            assert_same(half(X, n), X[: n // 2 + 1] + np.fft.rfftfreq(n))
        edges = np.linspace(-2.0, 3.0, 4)

        def histogram_edges_written(x, bins):
            bins = bins * 1.0
            counts, found = np.histogram(x, bins)
            found *= 10  # (numpy's edges are bins itself)
            return counts, bins

    # numpy returns the bins array itself as the edges: a write into them is numpy's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
        assert_same(numfuse.jit(histogram_edges_written)(X, edges),
                    histogram_edges_written(X, edges))


@pytest.mark.parametrize("fn", [
    lambda a, b: np.lexsort([a, b]),
    lambda a, b: np.unique([a[0], b[0], a[1]]),
    lambda a, b: np.partition([a[0], b[0], a[1]], 1),
    lambda a, b: np.nonzero([a[0] > 1, b[0] > 1]),
    lambda a, b: np.isclose([a[0], b[0]], 1.0),
    lambda a, b: np.clip(a[:3], [b[0], 0.0, 0.0], 5.0),
    lambda a, b: np.dot(a[:2], [b[0], b[1]]),
    lambda a, b: np.interp([a[0], 1.5], [0.0, 5.0], [1.0, b[0]]),
    lambda a, b: np.searchsorted(np.sort(a), [b[0], b[1]]),
], ids=["lexsort", "unique", "partition", "nonzero", "isclose", "clip-bounds", "dot-second",
        "interp", "searchsorted"])
def test_a_list_of_traced_values_in_any_argument_is_an_array(fn):
    """Found by a conformance hunt: lists of traced values made numpy run the function
    (only the first argument of a few functions was taken as an array)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(fn)
        for a, b in [(X, X[::-1] * 0.5), (X * 3.0 - 2.0, X)]:
            assert_same(jitted(a, b), fn(a, b))


def test_clip_of_python_number_values_and_int_argument_bounds_as_numpy():
    """numpy's own TestClip.test_out_of_bound_pyints, with the bounds as arguments; and a
    Python number clipped is a (strong) array first, as numpy makes it."""
    u8 = np.array([1, 200], np.uint8)
    upper = numfuse.jit(lambda x, hi: np.clip(x, 0, hi))
    for hi in (300, 100, -5, 2**40):
        assert_like_numpy(lambda x, hi: np.clip(x, 0, hi), u8, hi, jitted=upper)
    lower = numfuse.jit(lambda x, lo: np.clip(x, lo, 10))
    for lo in (-1, 3, 300):
        assert_like_numpy(lambda x, lo: np.clip(x, lo, 10), u8, lo, jitted=lower)
    i32 = np.array([-(2**31), 0, 2**31 - 1], np.int32)
    assert_like_numpy(lambda x, lo, hi: np.clip(x, lo, hi), i32, -(2**32), 2**32)
    assert_like_numpy(lambda a, lo: np.clip(a, lo, 10), 7, u8)
    assert_like_numpy(lambda lo: np.clip(7, lo, 10), np.float32(2.5))
    assert_like_numpy(lambda a, lo: np.clip(a, lo, 10), 7.0, np.array([1.0, 2.0], np.float32))


@pytest.mark.parametrize("call", [
    lambda x: np.clip(x, 1),  # a_max missing: numpy's TypeError
    lambda x: np.clip(x, a_min=1),
    lambda x: np.clip(x, 1, max=2),
    lambda x: np.clip(x, 0, 2, min=1),  # both ways at once: numpy's ValueError
    lambda x: np.clip(x),  # no bound: a copy
    lambda x: np.clip(x, None, None),
    lambda x: np.clip(x, min=1),
    lambda x: np.clip(x, max=2.5),
    lambda x: x.clip(1),  # the method's bounds are optional
    lambda x: x.clip(max=2),
], ids=["a_max-missing", "a_min-keyword", "a_max-as-max", "both-ways", "none", "nones",
        "min", "max", "method-min", "method-max"])
def test_clip_takes_its_bounds_as_numpy_does(call):
    assert_like_numpy(call, np.arange(4.0))


@pytest.mark.parametrize("values, low, high", [
    (np.array([3, 0, 1]), 0.5, 1.5),  # float bounds into an int array: numpy's casting error
    (np.array([True, False]), -1, 1),  # int bounds into a bool array
    (np.array([-1.0, 2.0]), 0, None),
    (np.array([-1, 2]), 0, 1),
])
def test_clip_into_an_out_array_checks_the_casting_of_its_bounds_as_numpy(values, low, high):
    def into_itself(x):
        y = x.copy()
        np.clip(y, low, high, out=y)
        return y

    assert_like_numpy(into_itself, values)


def test_clip_writes_into_an_out_array_the_function_made():
    """scikit-learn's hinge loss: np.clip(losses, 0, None, out=losses)."""
    def hinge(y, p):
        losses = 1 - y * p
        np.clip(losses, 0, None, out=losses)
        return losses.mean()

    assert_like_numpy(hinge, np.array([1.0, -1.0, 1.0]), np.array([0.5, 0.3, 2.0]))

    def into_other(x):
        y = np.empty_like(x)
        return np.clip(x, -1, 1, out=y), y

    assert_like_numpy(into_other, np.array([-3.0, 0.5, 3.0]))
    with pytest.raises(TypeError, match="'clip' output"):  # numpy's same_kind error
        numfuse.jit(lambda x: np.clip(x, -1, 1, out=np.empty(x.shape, np.int64)))(X)


def test_numpy_corners_of_conj_std_size_and_round():
    assert_like_numpy(lambda x: x.conj(), np.array([True, False]))  # the array itself
    assert_like_numpy(lambda x: x.conjugate() * 2, X)
    x = np.array([1.0, 2.5, -3.0, 4.0, 0.25, 6.0])
    assert_like_numpy(lambda x: np.std(x, dtype=np.int64), x)  # cast back to the ints
    assert_like_numpy(lambda x: np.std(x.reshape(2, 3), axis=0, dtype=np.int64), x)
    assert_like_numpy(lambda x: x.std(dtype=np.int8), x)
    assert_like_numpy(lambda x: np.size(x.reshape(2, 3), (0, 1)) * x, x)  # a tuple axis
    numfuse.jit(lambda x: np.round(x, -400))(np.array([5]))  # numpy's factor: inf, no error


def test_python_round_follows_numpy():
    """numpy scalars round with ``round()`` (to a Python int without ndigits, which needs a
    concrete value); arrays have no ``__round__``."""
    check(lambda x: x * round(x.sum(), 1), X)
    check(lambda x, k: x * round(k, 1) + round(k), X, 2.26)
    # a Python float rounds as Python rounds its decimal value (numpy's 1.68), a float
    for value in (1.685, 2.675, 0.125):
        jitted = numfuse.jit(lambda k: round(k, 2))
        assert type(jitted(value)) is float and jitted(value) == round(value, 2)
        check(lambda x, k: x * round(k, 2), X, value)
    with pytest.raises(TypeError, match="doesn't define __round__"):
        numfuse.jit(lambda x: round(x))(X)
    with pytest.raises(numfuse.ConcretizationError, match="round"):
        numfuse.jit(lambda x: x * round(x.sum()))(X)


def _added_into_int8(x, options):
    out = np.zeros(x.shape, np.int8)
    np.add(x, x, out=out, **options)
    return out


def _added_where(x, mask):
    out = np.zeros_like(x)
    np.add(x, 1, out=out, where=mask)
    return out


def test_a_loop_chosen_by_dtype_or_signature_is_cast_into_out_as_numpy_checks():
    """Found by a conformance hunt: ``np.add(x, x, dtype=np.float64, out=int8_out)``
    cast silently where numpy refuses the float64 result (``same_kind``); a mask of ints
    (``where=[0, 2, 0]``) was taken where numpy refuses it."""
    x = np.arange(3, dtype=np.int8)
    for options in ({"dtype": np.float64}, {"signature": "dd->d"}):
        with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):
            _added_into_int8(x, options)
        with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output"):
            numfuse.jit(_added_into_int8, static_argnums=(1,))(x, options)
    check(lambda x: _added_into_int8(x, {"dtype": np.int16, "casting": "unsafe"}), x)
    with pytest.raises(TypeError, match="to dtype\\('bool'\\)"):
        numfuse.jit(_added_where)(np.arange(3.0), np.array([0, 2, 0]))
    check(_added_where, np.arange(3.0), np.array([True, False, True]))


def _complex_added_into_float32(z):
    out = np.zeros(z.shape, np.float32)
    np.add(z, 1, out=out, casting="unsafe")
    return out


def test_a_complex_result_cast_into_a_real_out_warns_at_every_call():
    """Found by a conformance hunt: numpy's ComplexWarning came on the first call only
    (the cast into ``out=`` was a kernel's)."""
    z = np.array([1 + 2j, 3], np.complex64)
    jitted = numfuse.jit(_complex_added_into_float32)
    for _ in range(3):
        assert_like_numpy(_complex_added_into_float32, z, jitted=jitted)


@pytest.mark.parametrize(("fn", "args"), [
    (lambda a, b: np.sqrt(b, out=np.zeros_like(a)), (np.ones(3), 4.0)),
    (lambda a, b: np.add(b, 1.0, out=np.zeros_like(a)) * 2, (np.ones((2, 3)), np.arange(3.0))),
    (lambda a, b: np.multiply(b, a[:1], out=np.ones_like(a)), (np.ones((2, 3)), np.arange(3.0))),
], ids=["number-into-array", "row-into-matrix", "one-row-into-matrix"])
def test_a_ufunc_result_broadcasts_into_a_larger_out_as_numpy(fn, args):
    """Found by a conformance hunt: a result of fewer dimensions than ``out=`` (numpy
    broadcasts it) made numpy run the function ("non-broadcastable output operand")."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        check(fn, *args)
    with pytest.raises(ValueError, match="non-broadcastable output"):
        numfuse.jit(lambda a, b: np.add(b, 1, out=np.zeros_like(a)))(np.ones(3), np.ones((2, 3)))


def _added_into_three(a, b):
    out = np.zeros(3)
    np.add(a, b, out=out)
    return out


def test_an_out_of_a_fixed_size_is_checked_against_the_arguments_sizes():
    """Found by a conformance hunt: an ``out=`` array of a fixed size took the result of
    whatever size the arguments had (5 elements came back in ``np.zeros(3)``), where numpy
    raises; the function now compiles per shape, and the check is numpy's."""
    jitted = numfuse.jit(_added_into_three)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        for n in (5, 3, 3, 5, 2):
            x = np.arange(float(n))
            if n == 3:
                assert_same(jitted(x, x), _added_into_three(x, x))
            else:  # (numpy's words: "operands could not be broadcast together")
                with pytest.raises(ValueError, match="broadcast"):
                    jitted(x, x)
        square = numfuse.jit(lambda a: np.sqrt(a, out=np.zeros((2, 2))))
        with pytest.raises(ValueError, match="broadcast"):
            square(np.ones((2, 3)))
        assert_same(square(np.full((2, 2), 4.0)), np.full((2, 2), 2.0))


def test_ufunc_casting_rules_other_than_same_kind_run_as_numpy():
    check(lambda x: (np.add(x, 1, casting="unsafe", dtype=np.int32),
                     np.multiply(x, 2, casting="unsafe", dtype=np.uint8)), X)
    with pytest.raises(TypeError, match="same_kind"):  # numpy's UFuncTypeError
        numfuse.jit(lambda x: np.add(x, 1, dtype=np.int32))(X)


@pytest.mark.parametrize(("fn", "args"), [
    (lambda a: np.add(a, a, signature="dd->d"), (np.arange(3),)),
    (lambda a, b: np.equal(a, b, signature=(np.float32, np.float32, np.bool_)),
     (np.array([1.0]), np.array([1.0 + 1e-9]))),
    (lambda a: np.add(a, a, signature=(None, None, np.float64)) * 2, (np.arange(3),)),
    (lambda a: np.add(a, a, signature="ii->d"), (np.arange(3),)),
], ids=["string", "tuple-of-types", "output-only", "no-such-loop"])
def test_a_ufunc_signature_picks_numpys_loop(fn, args):
    """``signature=`` names the loop, the operands' dtypes too (float32 operands compare
    equal where float64 ones do not); a signature numpy has no loop for raises its
    TypeError."""
    assert_like_numpy(fn, *args)


@pytest.mark.parametrize("target", [np.float64, np.float32, np.int32])
def test_casting_complex_values_to_a_real_dtype_warns_like_numpy(target):
    z = np.array([1.5 + 2j, -3.25 - 1j, 0j])

    def cast(z):
        y = (z * 2).astype(target)
        y += 1  # a fresh array, the function's own
        return y, z.sum().astype(target)

    for _ in range(2):  # every call warns, as numpy's cast does
        with pytest.warns(np.exceptions.ComplexWarning, match="discards the imaginary"):
            assert_same(numfuse.jit(cast)(z), cast(z))
    assert_like_numpy(lambda z: (z * 2).astype(np.bool_), z)  # silent in numpy
    with pytest.warns(np.exceptions.ComplexWarning):  # a numpy scalar's cast: a scalar
        assert_same(numfuse.jit(lambda z: np.arccos(z).astype(target))(z[2:].reshape(())),
                    np.arccos(z[2:].reshape(())).astype(target))
        assert_same(numfuse.jit(lambda z: z.astype(target))(np.complex64(1 + 2j)),
                    np.complex64(1 + 2j).astype(target))


def test_the_casting_rule_of_a_ufunc_applies_to_its_out_array():
    def unsafe(a):
        y = np.zeros(a.shape, np.int32)
        np.add(y, a, out=y, casting="unsafe")  # float64 sums cast into int32
        np.multiply(a, 3, out=y, casting="unsafe")
        return y

    check(unsafe, X * 7.3)

    def safe(a):
        y = np.zeros(a.shape, np.float32)
        np.sqrt(a, out=y, casting="safe")
        return y

    with pytest.raises(TypeError, match="'safe'"):  # numpy's UFuncTypeError
        numfuse.jit(safe)(X)
    with pytest.raises(TypeError, match="same_kind"):
        numfuse.jit(lambda a: np.multiply(a, 2, out=np.zeros(a.shape, np.int32)))(X)


@pytest.mark.parametrize("fn", [
    lambda x: np.vectorize(lambda v: v * 2 + 1)(x),
    lambda x: np.vectorize(lambda v, w: v * w)(x.astype(np.float32), 2.5),
    lambda x: np.vectorize(lambda v: 1.5)(x),
    lambda x: np.vectorize(lambda v: v > 1, otypes=[float])(x),
    lambda x: np.vectorize(lambda v: (v + 1, np.abs(v)))(x),
    lambda x: np.vectorize(lambda v: v * 2)(x[0]),
], ids=["arithmetic", "python-number-becomes-strong", "constant", "otypes", "two-results",
        "0-d"])
def test_vectorize_of_elementwise_functions_applies_them_to_whole_arrays(fn):
    check(fn, X)


def _wrapped_int(v):
    return v * 2 + 1


@pytest.mark.parametrize(("fn", "args"), [
    (lambda x: np.vectorize(lambda v: v if v > 0 else -v)(x) * 2, (X,)),
    (lambda x: np.vectorize(_wrapped_int)(x) + 1, (np.array([50, 5], np.int8),)),
    (lambda x, y: np.vectorize(lambda v, w: v * w)(x, y), (np.array([3, 2]),
                                                         np.array([2**40, 3]))),
    (lambda x: np.vectorize(lambda v: v * 0.1)(x), (np.array([0.1, 0.7], np.float32),)),
    (lambda x: np.vectorize(lambda v: ~v)(x), (np.array([True, False]),)),
    (lambda x: np.vectorize(lambda v: v ** 2)(x), (np.array([True, False]),)),
    (lambda x: np.vectorize(lambda v: 1.0 / v)(x), (np.array([1.0, 2.0]),)),
    (lambda x: np.vectorize(lambda v: v ** 2)(x), (np.array([1e100, 2.0]),)),
    (lambda x: np.vectorize(lambda v: v - 2, otypes=[np.uint8])(x), (np.array([3, 5]),)),
    (lambda x, y: np.vectorize(lambda a, b: a * b + 0.5)(x, y),
     (np.array([0.3 + 0.7j]), np.array([0.9 - 0.4j]))),
    (lambda x: np.vectorize(lambda v: 2.0 * v + 1.0, otypes=[int])(x), (np.array([1.5, 2.0]),)),
    (lambda x: np.vectorize(lambda a: (a + 0.3j) * (a - 0.7j))(x),
     (np.array([-0.1321048632913019, 0.6404226504432821, -1.2459109472530652, 1e308]),)),
    (lambda x: np.vectorize(lambda a: abs(a + 0.3j))(x), (np.array([-0.1321048632913019]),)),
    (lambda x: np.vectorize(lambda a: 1.0 if isinstance(a, float) else 2.0)(x),
     (np.array([1.5, 2.5]),)),
    (lambda x: np.vectorize(lambda a: round(a, 1))(x), (np.array([1.25, 2.5]),)),
    (lambda x: np.vectorize(lambda a: a.is_integer())(x), (np.array([1.25, 2.0]),)),
], ids=["branching", "int8", "int64-unbounded", "float32-in-float64", "bool-invert",
        "bool-power", "division", "power", "otypes", "complex-product", "int-otypes",
        "complex-from-floats", "abs-of-complex", "isinstance", "round", "float-method"])
def test_vectorize_runs_numpys_per_element_calls_where_whole_arrays_would_differ(fn, args):
    """Found by a conformance hunt: numpy calls the function on Python numbers (ints
    unbounded, a float32 element in float64, 1.0 / 0.0 raising ZeroDivisionError, ``~``
    of a bool -2), so applied to whole int, float32 or bool arrays, or dividing by its
    element, it gave other values; numpy's vectorize now runs there when the function
    runs, and the work around it still fuses (no fallback)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's scalar overflow
        check(fn, *args)


def test_vectorize_raises_what_numpys_raises():
    for fn, args in ((lambda x: np.vectorize(lambda v: 1.0 / v)(x), (np.array([1.0, 0.0]),)),
                     (lambda x: np.vectorize(lambda v: v * v.sum())(x), (X,)),
                     (lambda x: np.vectorize(_wrapped_int)(x), (np.array([100, 5], np.int8),)),
                     (lambda x: np.vectorize(lambda v: v ** 2)(x), (np.array([1e200, 2.0]),)),
                     (lambda x: np.vectorize(lambda v: v - 2, otypes=[np.uint8])(x),
                      (np.array([1, 5]),)),
                     (lambda x: np.vectorize(lambda v: 2.0 * v, otypes=[int])(x),
                      (np.array([1.5, np.nan]),))):
        with pytest.raises(Exception) as expected:
            fn(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
            with pytest.raises(type(expected.value)):
                numfuse.jit(fn)(*args)


@pytest.mark.parametrize("other", [np.float64(2.0), 2.0, np.array(2.0), np.ones(5)],
                         ids=["numpy-scalar", "python-float", "0-d-array", "array"])
def test_isscalar_of_traced_values_answers_as_numpy(other):
    """Code branching on ``np.isscalar`` takes numpy's branch (a traced value is no
    scalar to numpy's own isscalar, which would pick the array branch)."""
    check(lambda x, b: x * 2 if np.isscalar(b) else x - b, X, other)


def test_np_broadcast_of_traced_values_gives_their_shape_and_counts():
    """scipy.stats-style ``np.broadcast(a, b).shape``: the shape, ``ndim``, ``size`` and
    ``numiter`` numpy gives, nested broadcasts included; its iterators are refused."""
    def fn(x, y):
        both = np.broadcast(x, y, 1.0)
        again = np.broadcast(both, x)
        return np.zeros(both.shape) + both.size * 10 + both.ndim + both.numiter + \
            again.numiter * 100 + again.nd

    check(fn, np.ones((2, 1, 3)), np.arange(4.0).reshape(4, 1))
    assert isinstance(np.broadcast(np.ones(2), 1.0), np.broadcast)  # numpy's own again
    with pytest.raises(numfuse.UnsupportedOperationError, match=r"np\.broadcast_arrays"):
        numfuse.jit(lambda x, y: [a for a in np.broadcast(x, y)])(X, X)


@pytest.mark.parametrize("number", [1.5, 2, True, 1 + 2j], ids=type)
def test_real_and_imag_of_a_python_number_are_python_numbers(number):
    """``np.real(s)`` of a Python number is its ``.real``: a Python number, weak in what
    follows (a float32 stays float32)."""
    check(lambda x, s: (np.real(s), np.imag(s), s.real, s.imag, np.real(s) * np.float32(2),
                        np.imag(s) + x.astype(np.float32)), X, number)


def _first_of_runs(a):  # scipy's rankdata
    ordered = np.sort(a)
    return np.r_[True, ordered[1:] != ordered[:-1]]


@pytest.mark.parametrize(("fn", "args"), [
    (_first_of_runs, (np.array([3.0, 1.0, 1.0, 2.0]),)),
    (lambda v: np.c_[v, v * 2], (np.arange(3.0),)),
    (lambda v: np.r_[0.5, v], (np.arange(3, dtype=np.float32),)),  # the 0.5 is weak
    (lambda v, w: np.r_[v, w, 7], (np.arange(3), np.ones(2))),
    (lambda m: np.c_[m, m * 2], (np.ones((2, 3)),)),
    (lambda v: np.r_[v.sum(), v], (np.arange(3.0),)),
], ids=["rankdata", "columns", "weak-number", "mixed", "matrices", "0-d"])
def test_r_and_c_of_traced_values_join_as_numpy(fn, args):
    check(fn, *args)


_WEIGHTS = {np.sum: 1.0, np.mean: 2.0}


def test_numpy_functions_wrapped_while_tracing_compare_and_hash_as_numpys():
    def weighted(x, agg=np.mean):
        return agg(x) * _WEIGHTS.get(np.mean, 0.0) if agg == np.mean else -agg(x)

    check(weighted, X)
    check(lambda a, b: np.mean([a, b], axis=0), X, X * 3)


def test_real_of_a_real_array_is_the_array_itself():
    def written_through_real(a):
        y = a * 2
        view = y.real
        view += 1  # numpy's y.real is y
        return y, np.real(a) is a, a.real is a

    check(written_through_real, X)
    assert numfuse.jit(lambda a: a.real)(X) is X


@pytest.mark.parametrize("exponent", [0.5, np.float64(0.5), 2.0, 0.25, -0.5, 3])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_of_a_traced_scalar_exponent_takes_numpys_square_root_at_one_half(exponent,
                                                                               dtype):
    """numpy's power loop takes the square root for a scalar exponent of 0.5 (the value,
    not only a constant): ``-0.0 ** 0.5`` is ``-0.0``, ``-inf ** 0.5`` NaN; other
    exponents, and the flags of each, as numpy's."""
    base = np.array([-np.inf, -0.0, 0.0, 4.0, -1.0, 2.0, np.nan], dtype)
    # (other exponents: vector math's power, within an ulp of numpy's)
    rtol = 0.0 if exponent in (0.5, 2.0, 3) else float(np.finfo(dtype).eps)
    for fn in (lambda a, e: a ** e, lambda a, e: np.power(a, e)):
        assert_like_numpy(fn, base, exponent, rtol=rtol)
    for value in (-np.inf, -0.0):  # a 0-d array, or a numpy scalar given to the ufunc
        assert_like_numpy(lambda a, e: np.power(a, e), np.array(value, dtype), exponent)
        assert_like_numpy(lambda a, e: np.power(a, e), dtype(value), exponent)
        assert_like_numpy(lambda a, e: a ** e, np.array(value, dtype), exponent)
        assert_like_numpy(lambda a, e: a ** e, dtype(value), exponent)  # scalar math


def _p_norm(x, p):
    if p in {1, 2}:  # a set lookup of a number argument: its value
        return np.sum(np.abs(x) ** p) ** (1.0 / p)
    return np.max(np.abs(x))


@pytest.mark.parametrize(("fn", "args"), [
    (_p_norm, (np.array([3.0, -4.0]), 2)), (_p_norm, (np.array([3.0, -4.0]), 3)),
    (lambda x, i: x * {0: 1.0, 1: 2.0}.get(i, 10.0), (X, 1)),
    (lambda x, n: np.concatenate([x, [0.0] * n]), (X, 3)),
    (lambda x, n: np.concatenate([x, n * (0.0,)]), (X, np.int64(2))),
    (lambda x, s: (x * s, f"scale={s:.2f}", str(s)), (X, 0.5)),
], ids=["set-2", "set-3", "dict-get", "list-repeat", "tuple-repeat", "f-string"])
def test_python_operations_on_number_arguments_use_their_values(fn, args):
    """Hashing, repeating a sequence and formatting a number argument need its value:
    the argument is made static (they had used the tracer: a set lookup missed, a list
    was multiplied elementwise, the text was the tracer's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check(fn, *args)


def test_a_traced_array_is_unhashable_as_numpys():
    with pytest.raises(TypeError, match="unhashable"):
        numfuse.compile(lambda x: {x: 1}, X)


def test_r_of_an_int_out_of_the_results_range_raises_numpys_overflow_error():
    with pytest.raises(OverflowError):
        numfuse.compile(lambda a: np.r_[a, 255], np.arange(3, dtype=np.int8))


RNG_FOR_TRACING = np.random.default_rng(5)


def test_random_draws_inside_a_traced_function_are_refused():
    """Tracing runs the function once: numbers drawn then would come back at every call."""
    for draw in (lambda x: x + np.random.normal(size=x.shape), lambda x: x * np.random.rand(),
                 lambda x: x + np.random.default_rng().random(3)):
        with pytest.raises(numfuse.UnsupportedOperationError, match=r"np\.random\.\w+ inside a "
                           r"traced function"):
            numfuse.jit(draw)(X)
    # a seeded generator draws the same numbers at every call, as numpy does
    check(lambda x: x + np.random.default_rng(3).random(x.shape[-1]), X)


def _jittered(x):
    return x + random.random()


def _timed(x):
    start = time.perf_counter()
    y = x * 2
    return y, time.perf_counter() - start


def test_pythons_random_numbers_and_clocks_inside_a_traced_function_make_numpy_run_it():
    """Found by a conformance hunt: ``random.random()`` was drawn once, while tracing, and
    the same number came back at every call (the generator's state stopped moving)."""
    for fn, name in ((_jittered, "random.random"), (_timed, "time.perf_counter")):
        with pytest.raises(numfuse.UnsupportedOperationError, match=rf"{name}\(\) inside"):
            numfuse.compile(fn, X)
    jitted = numfuse.jit(_jittered)
    random.seed(3)
    expected = [_jittered(X) for _ in range(3)]
    random.seed(3)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="random.random"):
        got = [jitted(X) for _ in range(3)]
    for one, other in zip(got, expected, strict=True):
        assert_same(one, other)
    assert not np.array_equal(got[0], got[1])
    assert random.random.__self__ is random._inst  # Python's own again after tracing
    assert not hasattr(time.perf_counter, "__wrapped__")


def test_numpy_compiled_code_creating_arrays_gets_arrays():
    """``rng.random`` is compiled code that calls ``np.empty``; seen from Python, that call
    comes from the traced function's frame, and must still give numpy's array, not a
    constant of the trace (it crashed).  (Its draw then makes numpy run the function,
    which draws what it would have drawn.)"""
    jitted = numfuse.jit(lambda x: x + RNG_FOR_TRACING.random(x.shape[-1]))
    with pytest.warns(numfuse.NumpyFallbackWarning, match="random numbers"):
        first = jitted(X)
    second = jitted(X)
    for got in (first, second):
        assert got.dtype == X.dtype and got.shape == X.shape
        assert np.all((got - X >= 0) & (got - X < 1))
    assert not np.array_equal(first, second)  # fresh numbers at each call


def _r2_scores(y, p, multioutput):
    """scikit-learn's r2_score (older releases): an array made with a conditional
    expression in its size, then written through masks."""
    numerator = ((y - p) ** 2).sum(axis=0)
    denominator = ((y - y.mean(axis=0)) ** 2).sum(axis=0)
    nonzero_denominator = denominator != 0
    valid = nonzero_denominator & (numerator != 0)
    scores = np.ones([y.shape[1]] if multioutput else [])
    scores[valid] = 1 - numerator[valid] / denominator[valid]
    scores[nonzero_denominator & ~(numerator != 0)] = 0.0
    return scores


def test_an_array_made_by_a_call_holding_a_conditional_expression_is_the_functions():
    """``np.ones(2 if flag else 3)``: the jumps of the conditional expression inside the
    call do not hide that the function calls ``np.ones`` (a masked write into it fell
    back to numpy)."""
    def masked(x, flag):
        out = np.ones(2 if flag else 3)
        out[x[: out.size] > 0] = 3.0
        return out

    for flag in (True, False):
        assert_like_numpy(masked, np.array([1.0, -2.0, 4.0]), flag)
    rng = np.random.default_rng(2)
    y, p = rng.standard_normal((10, 3)), rng.standard_normal((10, 3))
    assert_like_numpy(_r2_scores, y, p, True)


def _zeros_of_size(x, n):
    return np.zeros(n) / x  # 0 / 0: numpy's invalid warning


def _filled_rows(x, n):
    y = np.empty((n, 3))
    y[:] = x
    return y


@pytest.mark.parametrize(("fn", "args"), [
    (_zeros_of_size, (0.0, 4)),
    (_zeros_of_size, (np.float32(2), np.int64(3))),
    (lambda n, v: np.full(n, v), (4, 2.5)),
    (lambda x, n: np.ones(n, dtype=np.int8) + x, (3, 5)),
    (_filled_rows, (np.array([1.0, -2.0, 3.0]), 2)),
    (lambda x, n: np.zeros((n, 3)) + x, (np.ones(3), 4)),
    (lambda x, n: np.zeros(shape=2 * n) - x, (1.5, 2)),
    (lambda x, n: np.arange(n) * x, (1.5, 4)),
    (lambda x, n: np.eye(n, k=1) * x, (2.0, 3)),
    (lambda x, n: np.full_like(x, 3.0, shape=(n,)) * x.sum(), (np.ones(4), 4)),
    (lambda x, n: np.zeros_like(x, shape=(n, 2)) + x, (np.ones(2), 3)),
    (lambda x, n: np.linspace(x, 1.0, n), (0.5, 5)),
])
def test_scalar_arguments_giving_sizes_of_new_arrays_become_static(fn, args):
    """``np.zeros(n)``, ``np.full(n, v)``, ``np.ones((n, 3))``, ``np.arange(n)``: a size
    needs the scalar argument's value (numpy turned the error saying so into its own
    TypeError, and ``np.full`` learnt a size of 1 from a stand-in), so ``jit`` makes that
    argument static, compiling once per size; the data arguments stay traced."""
    jitted = numfuse.jit(fn)
    assert_like_numpy(fn, *args, jitted=jitted)
    size = len(args) - 1 if fn.__code__.co_varnames[0] == "x" else 0
    assert jitted.auto_static == {size}
    other = list(args)
    other[1 - size] = other[1 - size] * 2  # new data, same size: no new compilation
    assert_like_numpy(fn, *other, jitted=jitted)
    other[size] = args[size] + 1
    assert_like_numpy(fn, *other, jitted=jitted)
    assert len(jitted.compiled) == 2
    assert_same(numfuse.compile(fn, *args)(*args), fn(*args))


def _zeros_of_a_traced_size(x):
    return np.zeros(x.sum())  # marker


def test_sizes_of_new_arrays_computed_from_array_values_say_what_to_do():
    with pytest.raises(numfuse.ConcretizationError) as excinfo:
        numfuse.jit(_zeros_of_a_traced_size)(np.ones(3, int))
    assert_error_message(excinfo.value, _zeros_of_a_traced_size, "# marker",
                         "np.zeros(shape=...) given a traced value", "static_argnums")


def test_conversions_are_numpys_own_outside_tracing():
    numfuse.jit(lambda x: np.asarray(x) + 1)(X)
    assert not hasattr(np.asarray, "__wrapped__")


def test_bool_squared_takes_numpys_square_fast_path():
    """``bool_array ** 2`` is numpy's ``square`` (int8), not ``power`` (int64), and min/max
    keep int8; other exponents and numpy-scalar exponents are ``power``."""
    b = np.array([True, False, True])
    check(lambda b: b ** 2, b)
    check(lambda b: np.max(b ** 2), b)
    check(lambda b: (b ** 2).min(axis=0, keepdims=True), b)
    check(lambda b: b ** 3, b)
    check(lambda b: b ** 2.0, b)
    check(lambda b: b ** np.int64(2), b)
    check(lambda b: b[0] ** 2, b)


def test_round_of_bool_is_float16_and_scaling_refused_like_numpy():
    b = np.array([True, False])
    check(lambda b: np.round(b), b)
    check(lambda b: b.round(), b)
    with pytest.raises(TypeError):
        np.round(b, 1)
    with pytest.raises(TypeError):
        numfuse.jit(lambda b: np.round(b, 1))(b)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("decimals", [2, 22, 23, 30, 39, 300, 310, -5, -23, -100, -400])
def test_rounding_floats_scales_by_numpys_power_of_ten(dtype, decimals):
    # numpy's factor is 1e9 times ten, step by step (off by ulps past 1e22, inf past the
    # largest float) and a Python float: converted to float32 or float16, it overflows
    # with numpy's warning.  Fused, a flag raised by several of the operations is
    # reported once (numpy: once per operation).
    rng = np.random.default_rng(decimals % 97)
    x = np.concatenate([rng.standard_normal(40) * 10.0 ** rng.integers(-30, 30, 40),
                        [469.15430281842896, 1e30, 0.0, -0.0, 1.5, 2.5]]).astype(dtype)
    expected, expected_warnings = observe(lambda x: np.round(x, decimals), x)
    actual, actual_warnings = observe(numfuse.jit(lambda x: np.round(x, decimals)), x)
    assert_same(actual, expected)
    assert set(actual_warnings) == set(expected_warnings)


@pytest.mark.parametrize("decimals", [2.0, np.float64(1.0), 1.5, np.int64(1), True])
def test_rounding_takes_an_integer_number_of_decimals_as_numpy(decimals):
    """A float number of decimals is numpy's TypeError, given in the function or as an
    argument; numpy integers and bools are integers."""
    x = np.array([1.25, 2.675, -0.5])
    assert_like_numpy(lambda x: np.round(x, decimals), x)
    assert_like_numpy(lambda x, d: np.round(x, d), x, decimals)


def test_rounding_a_0d_integer_value_gives_a_numpy_scalar_like_numpy():
    ints = np.arange(6)
    for fn, arg in [(lambda a: np.round(a.sum()), ints), (lambda a: (a * 2).sum().round(1), ints),
                    (lambda a: np.fix(a.max()), ints), (lambda s: np.round(s + 1), np.int16(7)),
                    (lambda a: np.round(a), np.array(5)), (lambda a: np.fix(a), np.array(5)),
                    (lambda a: np.round(a) + 1, ints)]:
        assert_like_numpy(fn, arg)


def test_fix_writes_into_its_out_array():
    """Found by a conformance hunt: np.fix(x, out=y) left y as it was."""
    def into(x):
        y = np.zeros(x.shape)
        result = np.fix(x, out=y)
        np.fix(x * 2, y)  # out given by position
        return result, y

    assert_like_numpy(into, np.array([1.5, -1.5, 2.7]))
    assert_like_numpy(into, np.array([1, -2, 3]))


def test_rounding_complex_numbers_rounds_each_part_like_numpy():
    z = np.array([1.2345 - 6.789j, complex(np.inf, 0), complex(-0.0, 0.0),
                  complex(0.5, -np.inf), complex(np.nan, 2.25)])
    for dtype in (np.complex64, np.complex128):
        for decimals in (0, 1, 3, -1):
            assert_like_numpy(lambda z, d=decimals: np.round(z, d) * 2, z.astype(dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32, np.uint64])
@pytest.mark.parametrize("decimals", [-1, -2, -3, -20])
def test_rounding_integers_to_tens_rounds_halves_to_even_like_numpy(dtype, decimals):
    # numpy divides into float64, rounds half to even and casts back: -5 and 5 round to 0,
    # -15 to -20, 25 to 20.  Unsigned values stay small: a wrapped one near the top of
    # uint32 rounds out of range, where numpy's own cast differs with the array's length.
    values = np.array([-35, -5, 45, -15, 5, 25, 3, -7, 15, 95, -95, 127, -128])
    x = (np.abs(values) if np.dtype(dtype).kind == "u" else values).astype(dtype)
    assert_like_numpy(lambda v: np.round(v, decimals), x)
    assert_like_numpy(lambda v: v.round(decimals) * 2, x)
    assert_like_numpy(lambda v: np.round(v, -3), np.array([2**62 + 12345, -2**63, 2**63 - 1]))


def _unique_meets_argument(x):
    u = np.unique(x)
    v = np.add(np.where(u > 0, x, 1), u)  # u's size must be 1 or x's last
    return v[..., ::2]


@pytest.mark.parametrize("values", [[[0.0, 0.0, 0.0]], [[0.0, 1.0, 2.0]], [[1.0, 2.0, 3.0]]])
def test_an_argument_fixes_the_size_of_a_data_dependent_axis_it_broadcasts_with(values):
    # The where's last axis has x's size whatever unique returns: probing the slice after
    # it must not take it for a data-dependent axis and broadcast two guessed sizes.
    assert_like_numpy(_unique_meets_argument, np.array(values))


def test_returning_an_object_that_holds_traced_values_raises():
    """Found by an API hunt: a dataclass (or any object) returned with traced values in
    it came back holding the tracers, the same object at every call."""
    import dataclasses

    @dataclasses.dataclass
    class Result:
        mean: object
        scaled: object

    class Holder:
        def __init__(self, value):
            self.value = value

    for fn in (lambda x: Result(x.mean(), x * 2), lambda x: Holder(x * 2),
               lambda x: (x * i for i in range(2)), lambda x: (lambda: x * 2),
               lambda x: (x, {1, Holder(x)})):
        with pytest.raises(numfuse.UnsupportedOperationError, match="holds traced values"):
            numfuse.jit(fn)(X)
    constant = Holder(np.arange(2.0))  # an object made outside, of no traced value
    assert numfuse.jit(lambda x: (x * 2, constant))(X)[1] is constant


def _array_api_style(x):
    """Code written for the array API (scipy's, through array_api_compat): the namespace,
    the device and numpy's copy modes."""
    xp = x.__array_namespace__()
    y = xp.asarray(x, copy=np._CopyMode.IF_NEEDED)
    z = np.array(y, copy=np._CopyMode.ALWAYS).to_device(x.device)
    return xp.exp(z - xp.max(z)), z.device


def test_array_api_attributes_and_copy_modes_are_numpys():
    assert_like_numpy(_array_api_style, np.array([1.0, 2.0, 4.0]))
    with pytest.raises(ValueError, match="Unsupported device"):
        numfuse.jit(lambda x: x.to_device("gpu"))(np.ones(2))
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        numfuse.jit(lambda x: np.asarray(x, dtype=np.float32, copy=np._CopyMode.NEVER))(
            np.ones(2))


@pytest.mark.parametrize("name", ["special.softmax", "special.log_softmax",
                                  "special.logsumexp"])
def test_scipy_functions_written_for_the_array_api_compile(name):
    """scipy's array-API functions compile (the tests turn a fallback to numpy into an
    error) and give numpy's values.  (scipy.stats tells lazy arrays apart by catching
    the error of ``bool()`` of one, so its functions run with numpy.)"""
    scipy = pytest.importorskip("scipy")
    import importlib

    module, function = name.split(".")
    fn = getattr(importlib.import_module(f"{scipy.__name__}.{module}"), function)
    x = np.array([[1.0, 2.0, 4.0], [0.5, 1.5, 3.0]])
    assert_same(numfuse.jit(fn)(x), fn(x), rtol=1e-13)


def _catches_a_concrete_bool(x):
    try:
        large = bool(x.max() > 10)  # needs the values: numfuse raises, the function catches
    except Exception:
        large = False
    return x * 2 if large else x


def _catches_a_concrete_int(x, n):
    try:
        count = int(n)  # needs the argument's value: it becomes static
    except TypeError:
        count = 0
    return x * count


def test_an_error_numfuse_raised_and_the_function_caught_is_not_a_path_numpy_takes():
    """The trace of a function that caught numfuse's error (the ``except`` branch, which
    numpy never takes) is not the function: numpy runs it, or a number argument becomes
    static, as if the error had not been caught."""
    x = np.array([1.0, 20.0])
    with pytest.warns(numfuse.NumpyFallbackWarning, match="bool"):
        assert_same(numfuse.jit(_catches_a_concrete_bool)(x), _catches_a_concrete_bool(x))
    jitted = numfuse.jit(_catches_a_concrete_int)
    assert_same(jitted(x, 3), x * 3)
    assert jitted.auto_static == {1}


def test_errors_numpy_provokes_and_handles_itself_are_not_noted():
    """numpy's own functions may catch the TypeError of a traced value and go on another
    way (their path is numpy's): such an error leaves the trace alone."""
    from numfuse.errors import ConcretizationError, raised_while_tracing

    noted: list = []
    token = raised_while_tracing.set(noted)
    try:
        ConcretizationError("a test", "none")  # raised here, on behalf of this test
        assert len(noted) == 1
        namespace = {"__name__": "numpy.fake", "ConcretizationError": ConcretizationError}
        exec(compile("ConcretizationError('numpy', 'none')",
                     np.__file__.replace("__init__.py", "fake.py"), "exec"), namespace)
        assert len(noted) == 1
    finally:
        raised_while_tracing.reset(token)


def test_0d_items_of_several_results_are_arrays_as_numpy_returns_them():
    """np.broadcast_arrays of a 0-d array gives 0-d arrays (writable), not numpy scalars."""
    def rebroadcast(x):
        a, b = np.broadcast_arrays(x, 1.0)
        a = a.copy()
        a[()] = 5.0
        return a, b

    assert_like_numpy(rebroadcast, np.array(2.0))
    assert_like_numpy(lambda x: np.broadcast_arrays(x)[0].copy(), np.array(2.0))
    assert_like_numpy(lambda x: np.frexp(x)[0], np.float64(3.0))


@pytest.mark.parametrize("value", [300, -1, 5, 2.5, float("nan")])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float32])
def test_a_number_argument_converted_to_a_dtype_is_numpys_conversion(value, dtype):
    """np.asarray(300, np.int8) raises numpy's OverflowError (NaN to an int its
    ValueError) where a cast would wrap."""
    assert_like_numpy(lambda x, s: np.asarray(s, dtype=x.dtype) + x,
                      np.array([1, 2], dtype), value)


def test_a_function_given_to_a_numpy_call_that_uses_traced_values():
    """np.piecewise runs its functions when the program runs: one using a number
    argument makes that argument static; one using a traced array runs with numpy (it
    had raised at every call)."""
    x = np.array([1.5, 2.5])
    scaled = numfuse.jit(lambda x, a: np.piecewise(x, [x < 2], [lambda v: a * v, 0]))
    for a in (2.0, 3.0):
        assert_same(scaled(x, a), np.piecewise(x, [x < 2], [lambda v, a=a: a * v, 0]))
    assert scaled.auto_static == {1}

    def by_mean(x):
        return np.piecewise(x, [x < 2], [lambda v: x.mean() * v, 0])

    with pytest.warns(numfuse.NumpyFallbackWarning, match="uses a traced value"):
        assert_same(numfuse.jit(by_mean)(x), by_mean(x))
    assert_like_numpy(lambda x: np.piecewise(x, [x < 2], [lambda v: 2 * v, 0]), x)


def _diffusion(steps):
    def diffuse(u, r):
        u = u.copy()
        for _ in range(steps):  # unrolled while tracing: a program as long as the loop
            u[1:-1] = u[1:-1] + r * (u[2:] - 2 * u[1:-1] + u[:-2])
        return u
    return diffuse


def test_tracing_a_long_unrolled_loop_does_not_walk_the_graph_again_at_each_step(
        monkeypatch):
    """Each slice's example shape is found from the nodes not yet known: the work of
    tracing grows with the program, not with its square (1,000 steps had taken 31 s)."""
    from numfuse.trace import probes

    walked = []
    original = probes._unknown_in_order

    def counting(node, memo):
        found = original(node, memo)
        walked.append(len(found))
        return found

    monkeypatch.setattr(probes, "_unknown_in_order", counting)
    u = np.sin(np.linspace(0.0, np.pi, 21))
    work = {}
    for steps in (25, 100):
        walked.clear()
        numfuse.trace(_diffusion(steps), u, 0.25)
        work[steps] = sum(walked)
    assert work[100] < 6 * work[25]  # linear: about 4 times; quadratic: 16
    assert_same(numfuse.jit(_diffusion(30))(u, 0.25), _diffusion(30)(u, 0.25))


def _indexing_its_own_value(steps):
    def halve(x):
        for _ in range(steps):
            x = x * 0.5 + x[0]
        return x
    return halve


def test_tracing_a_loop_indexing_its_value_does_not_walk_back_at_each_step(monkeypatch):
    """Found by a conformance hunt: each ``x[0]`` asked whether x's sizes depend on the
    values, walking back through every earlier step (1,000 steps: 4.3 s of tracing)."""
    from numfuse.trace import probes

    walked = []
    original = probes._acts_elementwise

    def counting(node):
        walked.append(node)
        return original(node)

    monkeypatch.setattr(probes, "_acts_elementwise", counting)
    work = {}
    for steps in (25, 100):
        walked.clear()
        numfuse.trace(_indexing_its_own_value(steps), np.arange(3.0))
        work[steps] = len(walked)
    assert work[100] < 6 * work[25]  # linear: about 4 times; quadratic: 16
    check(_indexing_its_own_value(20), np.arange(3.0))


def _root_into_int(x):
    out = np.zeros(2, dtype=np.int64)
    out[0] = np.sqrt(x[0])  # a float64 scalar: converted as a Python float
    return out


def _scaled_into_int8(x):
    out = np.zeros(3, dtype=np.int8)
    out[1:] = x.max() * 2.5
    out[[0]] = x.sum() * 100  # a list index: numpy casts
    return out


@pytest.mark.parametrize(("fn", "arg"), [
    (_root_into_int, np.array([-4.0])), (_root_into_int, np.array([16.0])),
    (_scaled_into_int8, np.array([1.0, 3.0])), (_scaled_into_int8, np.array([100.0, 2.0])),
])
def test_a_numpy_scalar_stored_into_an_integer_array_converts_as_numpys(fn, arg):
    """numpy converts a float64 scalar given to ``y[i] = v`` as a Python float (NaN or a
    value out of range raises); the program passes the scalar, not a 0-d array."""
    assert_like_numpy(fn, arg)


class _Quality(enum.IntFlag):
    BAD = 1
    SATURATED = 128


class _Count(enum.IntEnum):
    THREE = 3


class _Real(float):
    pass


@pytest.mark.parametrize(("fn", "args"), [
    (lambda flags: flags & _Quality.SATURATED, (np.array([0, 129, 255], np.uint8),)),
    (lambda x, k: x * k, (np.array([100, -3], np.int8), _Count.THREE)),
    (lambda x, k: x * k, (np.ones(2, np.float32), _Real(2.5))),
    (lambda x: x * _Count.THREE + 1, (np.ones(2, np.float32),)),
    (lambda x, k: x[k] * 2, (np.arange(5.0), _Count.THREE)),
], ids=["intflag-constant", "intenum-argument", "float-subclass", "intenum-constant",
        "intenum-index"])
def test_subclasses_of_python_numbers_are_strong_as_in_numpy(fn, args):
    """numpy takes only the Python types themselves as weak scalars: an IntEnum or an
    IntFlag is an int64, a float subclass a float64."""
    jitted = numfuse.jit(fn)
    for _ in range(2):
        assert_same(jitted(*args), fn(*args))


def _neighbour_counts(Z):
    N = np.zeros(Z.shape, dtype=int)  # a constant the function made (its shape Z's)
    N[1:-1, 1:-1] += Z[:-2, :-2] + Z[1:-1, :-2] + Z[2:, 2:]
    return N


def test_an_augmented_assignment_into_a_slice_of_an_array_made_by_np_zeros():
    """The game of life's neighbour count: ``N[1:-1, 1:-1] += ...`` into ``np.zeros``
    compiles (it had run with numpy, blamed on an argument)."""
    board = (np.arange(36).reshape(6, 6) % 3 == 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(_neighbour_counts)
        for _ in range(2):
            assert_same(jitted(board), _neighbour_counts(board))


def _weighted_mean(x, w):
    if np.iterable(w):
        return (x * w).sum() / w.sum()
    return x.mean()


def test_np_iterable_of_a_traced_array_is_true():
    """Found by a conformance hunt: numpy's own test, ``iter(y)``, asked for the length
    and took numfuse's error for "not iterable": the branch for numbers was taken."""
    x, w = np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        check(_weighted_mean, x, w)
        check(_weighted_mean, x, 2.0)
        check(lambda x: (np.iterable(x), np.iterable(x[0]), np.iterable(x.sum())), x)


def test_copy_module_copies_of_a_traced_value_are_copies():
    """Found by a conformance hunt: ``copy.copy(x * 2)`` recursed without end."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        check(lambda x: (copy.copy(x * 2) + 1, copy.deepcopy(x.sum()) * 2), X)
        # a Python number's copy is itself: weak beside a float32 array
        check(lambda x, s: (x * copy.copy(s), copy.deepcopy(s)), X.astype(np.float32), 2.5)


@pytest.mark.parametrize("fn", [
    lambda x: np.copysign(1.0, x * -1), lambda x: np.signbit(x / -1.0),
    lambda x: np.signbit(-0.0 - x), lambda x: np.signbit(-1 * x),
], ids=["times-minus-one", "over-minus-one", "from-minus-zero", "minus-one-times"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_nan_keeps_its_sign_through_a_multiplication_by_minus_one(fn, dtype):
    """Found by a conformance hunt: LLVM made ``x * -1`` a negation, which flips a NaN's
    sign bit; numpy's multiplication keeps the NaN as it is."""
    check(fn, np.array([np.nan, 2.0, -np.nan, -3.0] * 5, dtype))


@pytest.mark.parametrize("fn", [
    lambda z: z * -1, lambda z: z / -1.0, lambda z: -0.0 - z, lambda z: -1 * z,
], ids=["times-minus-one", "over-minus-one", "from-minus-zero", "minus-one-times"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_nan_parts_keep_their_signs_through_a_multiplication_by_minus_one(fn, dtype):
    parts = np.array([np.nan, 2.0, -np.nan, -3.0] * 5)
    z = (parts + 1j * parts[::-1]).astype(dtype)
    expected, got = fn(z), numfuse.jit(fn)(z)
    for part in ("real", "imag"):
        np.testing.assert_array_equal(np.signbit(getattr(got, part)),
                                      np.signbit(getattr(expected, part)))


@pytest.mark.parametrize("fn", [
    lambda z: z[0] * z[1], lambda z: z.sum() * z.mean(), lambda z: np.square(z.sum()),
    lambda z: np.multiply(z[0], z[1]), lambda z: z[0] * 2.5 * z[1],
], ids=["items", "reductions", "square-of-a-scalar", "ufunc-of-scalars", "chain"])
def test_complex_numpy_scalars_multiply_as_numpys_scalar_math(fn):
    """Found by a conformance hunt: ``z[0] * z[1]`` of complex numpy scalars is numpy's
    scalar math, whose products are not fused (its array loops' are): 45% of the
    products differed in the last bits."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal(60) + 1j * rng.standard_normal(60)
    jitted = numfuse.jit(fn)
    for start in range(0, 60, 3):
        assert_same(jitted(z[start:start + 3]), fn(z[start:start + 3]))


# ------------------------------------------------- warnings the function gives itself


def _checked(x, strict=False):
    if x.ndim == 1:
        warnings.warn("a 1-d input is taken as one row", UserWarning, stacklevel=2)
    if strict:
        warnings.warn("strict is deprecated", DeprecationWarning, stacklevel=1)
    return x * 2


def _given(run):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [(str(w.message), w.category, os.path.basename(w.filename), w.lineno)
            for w in caught]


def test_warnings_the_function_gives_are_given_at_every_call_as_numpys():
    def both(run):  # (the 1-d warning names this line, through stacklevel=2)
        return run(np.ones(3)), run(np.ones(3), True)

    jitted = numfuse.jit(_checked, static_argnums=(1,))
    for _ in range(3):  # the first call traces, the later ones run the compiled program
        expected = _given(lambda: both(_checked))
        assert _given(lambda: both(jitted)) == expected
    assert len(expected) == 3
    assert "warns UserWarning('a 1-d input is taken as one row')" in str(
        numfuse.compile(_checked, np.ones(3)).graph)


def test_warnings_the_function_gives_follow_the_filters_of_each_call():
    jitted = numfuse.jit(_checked)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="1-d input"):
                jitted(np.ones(3))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("ignore")
            jitted(np.ones(3))
        assert caught == []
        np.testing.assert_array_equal(jitted(np.ones((2, 3))), 2 * np.ones((2, 3)))  # no warning
    # the "default" action: once per location, as for numpy's run
    counted = {}
    for name, run in (("numpy", _checked), ("numfuse", numfuse.jit(_checked))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            for _ in range(3):
                run(np.ones(3))
        counted[name] = len(caught)
    assert counted == {"numpy": 1, "numfuse": 1}


def test_a_warning_is_given_once_per_call_when_numpy_runs_the_function():
    def data_dependent(x):
        warnings.warn("careful", UserWarning, stacklevel=1)
        return x * 2 if float(x.sum()) > 0 else x  # needs the values: numpy runs it

    jitted = numfuse.jit(data_dependent)
    for _ in range(2):
        given = _given(lambda: jitted(np.ones(3)))
        assert [message for message, category, _file, _line in given
                if category is UserWarning] == ["careful"]


def test_a_warning_is_given_once_per_call_into_out():
    def scaled(x):
        warnings.warn("careful", UserWarning, stacklevel=1)
        return x * 2

    jitted, out = numfuse.jit(scaled), np.empty(3)
    for _ in range(2):
        assert [message for message, *_rest in _given(lambda: jitted(np.ones(3), out=out))] \
            == ["careful"]


@pytest.mark.parametrize("statistic", [
    lambda d: np.median(d, overwrite_input=True),
    lambda d: np.median(d, None, None, True),  # overwrite_input given by position
    lambda d: np.percentile(d, [25, 75], overwrite_input=True),
    lambda d: np.quantile(d, 0.3, axis=0, overwrite_input=True),
    lambda d: np.nanmedian(d, overwrite_input=True),
    lambda d: np.nanpercentile(d, 90, None, None, True),
])
def test_overwrite_input_leaves_a_shared_value_intact(statistic):
    # both np.abs(x - med) are one value in the graph: the statistic must not sort it
    def robust(x):
        med = np.median(x)
        spread = statistic(np.abs(x - med))
        return np.abs(x - med) / (1.4826 * np.max(spread))

    x = np.array([5.0, 1.0, 7.0, 2.0, 8.0, -1.0, 3.0, 0.5])
    jitted = numfuse.jit(robust)
    for _ in range(2):
        assert_same(jitted(x), numpy_result(robust, x))


@pytest.mark.parametrize("name", ["polynomial.polyval", "chebyshev.chebval",
                                  "legendre.legval", "hermite.hermval",
                                  "hermite_e.hermeval", "laguerre.lagval"])
@pytest.mark.parametrize("shapes", [((4,), (3, 4)), ((4,), (3, 1)), ((10,), (3, 2)),
                                    ((2, 3), (3, 2)), ((4,), (3,)), ((), (3, 2))])
def test_polynomial_values_of_2d_coefficients_give_each_column_its_polynomial(name, shapes):
    # numpy tests isinstance(x, np.ndarray) to evaluate a column of coefficients per x
    module, function = name.split(".")

    def fn(x, c):  # (through the module, as np.polynomial.polynomial.polyval(x, c))
        return getattr(getattr(np.polynomial, module), function)(x, c) * 2

    x_shape, c_shape = shapes
    x = np.linspace(-1.0, 2.0, int(np.prod(x_shape))).reshape(x_shape)
    c = np.arange(1.0, 1.0 + np.prod(c_shape)).reshape(c_shape)
    jitted = numfuse.jit(fn)
    for _ in range(2):
        assert_same(jitted(x, c), numpy_result(fn, x, c), rtol=1e-12)


def test_a_python_number_argument_has_a_python_numbers_attributes():
    def duck_typed(x, s):  # library code telling arrays from numbers
        if hasattr(s, "dtype"):
            return x * s.astype(np.float64)
        return x * s

    x = np.ones(3, np.float32)
    for s in (2.5, 3, 1.5j):
        assert_same(numfuse.jit(duck_typed)(x, s), numpy_result(duck_typed, x, s))
    for method in (lambda s: s.sum(), lambda s: s.astype(np.float32), lambda s: s.shape,
                   lambda s: (s * 2).reshape(1), lambda s: s.T):
        for s in (2.5, 3, True):
            with pytest.raises(AttributeError, match="object has no attribute"):
                numfuse.jit(method)(s)
    # what Python numbers have stays: real, imag, conjugate; numpy's functions of them too
    check(lambda x, s: x * (s.real + s.imag + s.conjugate()) + np.ndim(s), x, 2.5)
    check(lambda x, s: x * np.size(s) + len(np.shape(s)) + np.iscomplexobj(s), x, 2.5)
    check(lambda x, s: x * s.conjugate().imag, x, 1.5j)


@pytest.mark.parametrize("fn", [
    lambda x: np.copy(x, order="F"), lambda x: x.copy(order="F"),
    lambda x: x.astype(np.float32, order="F"), lambda x: np.copy(x * 2, order="F").ravel("K"),
    lambda x: (x * 2).copy(order="A"), lambda x: np.asfortranarray(x).copy(order="A"),
])
def test_copies_in_fortran_order_are_numpys(fn):
    x = np.arange(6.0).reshape(2, 3)
    jitted = numfuse.jit(fn)
    for _ in range(2):
        result, expected = jitted(x), fn(x)
        assert_same(result, expected)
        assert result.flags.f_contiguous == expected.flags.f_contiguous
        assert result.flags.c_contiguous == expected.flags.c_contiguous


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.float32])
def test_a_python_int_joined_by_r_is_range_checked_at_each_call(dtype):
    def joined(x, fill):
        return np.r_[x, fill]

    x = np.array([1, 2], dtype=dtype)
    jitted = numfuse.jit(joined)
    for fill in (5, 300, 70000, -129, 7):
        assert_like_numpy(joined, x, fill, jitted=jitted)


@pytest.mark.parametrize("constant", [np.float32(3.1), np.float16(0.7), np.complex64(1 + 2j),
                                      np.array(0.3, np.float32)])
def test_vectorize_of_work_with_a_narrow_constant_computes_as_numpy(constant):
    # numpy passes each element as a Python float, which the float32 constant does not
    # widen: the whole-array path (float64 arrays) would compute in float64
    def vectorized(x):
        return np.vectorize(lambda a: a * constant + 1)(x)

    x = np.array([1.1, 2.3, 1e-3, 7.7])
    for _ in range(2):
        check(vectorized, x)


@pytest.mark.parametrize(("fn", "args"), [
    (lambda items, i, x: items[i] + x, ([1, 2, 3], 1, np.int8(100))),
    (lambda items, i, x: x * items[i], ((1.5, 2.5), 1, np.ones(2, np.float32))),
    (lambda items, i: items[i], ([1.5, 2.5], 0)),
    (lambda items, i: items[i], ((1.5, 2**53 + 1), 1)),
    (lambda items, i, x: items[i] * x, ([0, 1.5, 2], 2, np.ones(2, np.float32))),
    (lambda items, i, j: items[i][j] + np.int8(3), ([[1, 2], [3, 4]], 1, 0)),
], ids=["int-item", "float-item-beside-float32", "returned", "int-beyond-2**53",
        "mixed-list", "nested"])
def test_an_item_of_a_list_argument_at_a_traced_index_is_the_python_number(fn, args):
    """Found by a conformance hunt: ``items[i]`` with ``i`` an int argument was a strong
    float64 or int64 (``items[i] + np.int8(100)`` gave int64); an item is a Python number,
    weak as in numpy, whatever the index (an index into a list of ints and floats is
    static: the item's type follows it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(fn)
        for _ in range(2):
            assert_like_numpy(fn, *args, jitted=jitted)


@pytest.mark.parametrize("key", [np.array([0, 2]), None, (0, 1), Ellipsis, 1.0])
def test_a_list_argument_is_indexed_as_pythons_lists_are(key):
    """Found by a conformance hunt: a list argument took numpy's indexing
    (``items[np.array([0, 2])]`` gave an array); Python raises TypeError."""
    def fn(items, x):
        return items[key] * x

    with pytest.raises(TypeError):
        fn([[1.0, 2.0], [3.0, 4.0]], 2.0)
    with pytest.raises(TypeError):
        numfuse.jit(fn)([[1.0, 2.0], [3.0, 4.0]], 2.0)


def _ridge_gram(x, lam):
    gram = x.T @ x
    gram[np.diag_indices_from(gram)] += lam
    gram[np.triu_indices_from(gram, 1)] = 0.0
    return gram


def test_index_arrays_an_unlisted_function_makes_leave_the_array_writable():
    """Found by two conformance hunts: ``K[np.diag_indices_from(K)] += lam`` was refused
    (the index arrays of an unlisted function were taken for views of ``K``); its results
    on stand-ins share no memory with them, so they are new arrays."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(_ridge_gram)
        for x, lam in ((np.arange(6.0).reshape(3, 2), 0.5), (np.ones((4, 3)), 2.0)):
            assert_same(jitted(x, lam), _ridge_gram(x, lam))


def _histogram_weighted(x, index, weight):
    counts = x * 0
    np.add.at(counts, index, weight)
    np.negative.at(counts, index)
    return counts


def test_ufunc_at_with_a_python_number_argument_writes_into_the_functions_array():
    """Found by a conformance hunt: ``np.add.at(h, idx, weight)`` with a Python number
    argument (weight, or the index) ran with numpy: numpy asks the number's tracer first,
    which refused the write into another operand."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(_histogram_weighted)
        for index, weight in ((1, 1.5), (2, 2.5), (np.array([0, 0, 2]), 3)):
            for _ in range(2):
                assert_same(jitted(np.ones(3), index, weight),
                            _histogram_weighted(np.ones(3), index, weight))


@pytest.mark.parametrize("args", [
    (np.arange(3), np.ones(2, np.float32)),
    (np.ones(2, np.float32), np.ones(2, np.float16)),
    (np.ones(2, np.complex64), np.ones(2)),
], ids=["int-float32", "float32-float16", "complex64-float64"])
def test_common_type_is_answered_from_the_dtypes(args):
    """Found by two conformance hunts: ``x.astype(np.common_type(x, y))`` ran with numpy
    (the function's type result failed tracing)."""
    def fn(x, y):
        return x.astype(np.common_type(x, y)) * 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        assert_same(numfuse.jit(fn)(*args), fn(*args))


def _matrix_product_in_place(a, b):
    c = a * 1
    alias = c
    c @= b
    return c, alias


def _argument_product_in_place(x, b):
    x @= b
    return x


def test_an_in_place_matrix_product_runs_with_numpy():
    """Found by a conformance hunt: without ``__imatmul__`` Python made ``c @= b`` a new
    array (float32 became float64, an alias of c kept the old values, an argument was
    left unchanged); numpy runs such functions."""
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 2.0)
    with pytest.warns(numfuse.NumpyFallbackWarning, match="in-place matrix product"):
        got = numfuse.jit(_matrix_product_in_place)(a, b)
    for one, other in zip(got, _matrix_product_in_place(a, b), strict=True):
        assert_same(one, other)
    mine, theirs = np.ones((2, 2)), np.ones((2, 2))
    with pytest.warns(numfuse.NumpyFallbackWarning):
        numfuse.jit(_argument_product_in_place)(mine, b)
    _argument_product_in_place(theirs, b)
    assert_same(mine, theirs)


@pytest.mark.parametrize("fn", [
    lambda x: (y := np.zeros_like(x), np.cumsum(x, 0, None, y))[0],
    lambda x: (y := np.zeros(()), x.sum(0, None, y))[0],
    lambda x: (y := np.zeros(()), np.max(x, None, y))[0],
], ids=["cumsum", "sum-method", "max"])
def test_an_out_array_given_by_position_runs_with_numpy(fn):
    """Found by a conformance hunt: ``np.cumsum(x, 0, None, y)`` ignored ``y`` (by keyword,
    ``out=`` runs with numpy): the position of ``out`` is read from the signature."""
    x = np.arange(4.0) - 1.5
    with pytest.warns(numfuse.NumpyFallbackWarning, match="out="):
        assert_same(numfuse.jit(fn)(x), fn(x))


@pytest.mark.parametrize("fn", [
    lambda x: x[0].view(np.int64),
    lambda x: x.sum().view(np.uint64) >> 52,
    lambda x: np.max(x).byteswap(),
    lambda x: (x * 2).view(np.int64) & 0xFF,
], ids=["item", "sum", "byteswap-of-max", "array"])
def test_view_and_byteswap_of_numpy_scalars_trace(fn):
    """Found by a conformance hunt: ``x.sum().view(np.uint64)`` (a float's bits) made numpy
    run the function: ``np.ndarray.view`` takes arrays only, the method of the value runs."""
    x = np.array([1.5, -2.25, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(fn)
        for values in (x, x * 3):
            assert_same(jitted(values), fn(values))


@pytest.mark.parametrize("fn", [
    lambda x: np.arange(3.0).dot(x),
    lambda x: np.arange(5.0).take(x.astype(np.int64) % 5),
    lambda x: np.arange(5.0).searchsorted(x),
    lambda x: np.arange(6.0).reshape(2, 3).sum(where=x > 0),
    lambda x: np.arange(3.0).max(initial=x.max()),
], ids=["dot", "take", "searchsorted", "sum-where", "max-initial"])
def test_a_method_of_a_constant_given_a_traced_operand_is_traced(fn):
    """Found by a conformance hunt: ``np.arange(3.0).dot(x)`` ran the method on the
    constant at trace time and failed on the traced operand (numpy then ran it all)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(fn)
        for x in (np.array([0.5, -1.0, 2.0]), np.array([3.0, 1.0, -0.5])):
            assert_same(jitted(x), fn(x))


@pytest.mark.parametrize("order", ["f", "a", "k", "c", "Z", "", 1])
def test_order_arguments_are_checked_and_read_as_numpy_reads_them(order):
    """Found by a conformance hunt: ``order="f"`` gave a C-ordered copy and ``order="Z"``
    or ``order=1`` a result, where numpy takes the letter in either case and raises for
    anything else."""
    x = np.arange(6.0).reshape(2, 3)
    for fn in (lambda v: (v * 1).astype(np.float32, order=order),
               lambda v: (v * 1).copy(order=order), lambda v: np.copy(v * 1, order=order),
               lambda v: np.asarray(v * 1, order=order), lambda v: np.array(v * 1, order=order)):
        try:
            expected = fn(x)
        except (TypeError, ValueError) as error:
            with pytest.raises(type(error)):
                numfuse.jit(fn)(x)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
            got = numfuse.jit(fn)(x)
        assert_same(got, expected)
        assert got.flags.f_contiguous == expected.flags.f_contiguous


@pytest.mark.parametrize("fn", [
    np.linalg.inv, lambda x: np.linalg.solve(x, x), lambda x: np.linalg.matrix_power(x, -1),
    np.linalg.cholesky, lambda x: np.linalg.solve(x, x[0]),
], ids=["inv", "solve", "matrix_power", "cholesky", "solve-vector"])
def test_linear_algebra_of_bool_matrices_traces(fn):
    """Found by a conformance hunt: the stand-in bool matrices tracing gave numpy were all
    True (singular), so inv, solve and cholesky of bool matrices ran with numpy."""
    for size in (2, 3):
        matrix = np.eye(size, dtype=bool)
        matrix[-1, 0] = fn is not np.linalg.cholesky  # (cholesky: symmetric)
        with warnings.catch_warnings():
            warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
            assert_same(numfuse.jit(fn)(matrix), fn(matrix))


@pytest.mark.parametrize("decimals", [2**31, -(2**31) - 1, 2**63, 2**31 - 1, -400, 10**6])
def test_round_to_decimals_beyond_a_float_is_numpys(decimals):
    """Found by a conformance hunt: ``np.round(x, 2**31)`` computed its scale factor one
    multiplication at a time (hanging), where numpy raises OverflowError for a decimals
    beyond a C int and the factor becomes infinite past the largest float."""
    for x in (np.arange(5, dtype=np.uint8), X, X.astype(np.float32)):
        if not -(2**31) <= decimals < 2**31:
            with pytest.raises(OverflowError):
                np.round(x, decimals)
            with pytest.raises(OverflowError):
                numfuse.jit(lambda x: np.round(x, decimals))(x)
            continue
        with np.errstate(all="ignore"):  # (numpy warns once per ufunc, a kernel once)
            check(lambda x: np.round(x, decimals), x)


@pytest.mark.parametrize("order", ["C", "K", "A"])
def test_a_ufuncs_order_of_c_contiguous_results_compiles(order):
    """Found by a conformance hunt: any ``order=`` made numpy run the function, though
    numfuse's results are C-contiguous (``"F"`` still runs numpy)."""
    m = np.arange(6.0).reshape(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        assert_same(numfuse.jit(lambda m: np.add(m, 1, order=order) * 2)(m),
                    np.add(m, 1, order=order) * 2)
    with pytest.raises(numfuse.UnsupportedOperationError, match="order"):
        numfuse.compile(lambda m: np.add(m, 1, order="F"), m)
