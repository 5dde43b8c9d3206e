"""Non-fusible numpy operations inside traced functions: replayed by numpy itself, with the
elementwise work around them still fused.  Every case compares with plain numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import assert_same, check
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import numfuse
from numfuse.errors import UnsupportedOperationError
from numfuse.graph import NUMPY

RNG = np.random.default_rng(7)
M = RNG.standard_normal((4, 6))
V = RNG.standard_normal(6)
INTS = RNG.integers(-5, 5, (4, 6)).astype(np.int32)
W = RNG.standard_normal((6, 3))
SPD = M @ M.T + 4 * np.eye(4)

CASES = [
    ("sum", lambda x: np.sum(x), (M,)),
    ("sum-axis-keepdims", lambda x: x.sum(axis=1, keepdims=True), (M,)),
    ("sum-int32-dtype", lambda x: (np.sum(x), np.sum(x, dtype=np.int8)), (INTS,)),
    ("mean-int", lambda x: (x.mean(), np.mean(x, axis=0)), (INTS,)),
    ("min-max-nan", lambda x: (np.max(x * np.nan), x.min(axis=0)), (M,)),
    ("any-all", lambda x: ((x > 0).any(), np.all(x > -10, axis=1)), (M,)),
    ("std-var", lambda x: (x.std(), np.var(x, axis=(0, 1), ddof=1)), (M,)),
    ("prod-tuple-axis", lambda x: np.prod(x + 1, axis=(0,)), (M,)),
    ("argmax", lambda x: (x.argmax(), np.argmin(x, axis=1)), (M,)),
    ("cumsum", lambda x: (np.cumsum(x, axis=1), x.cumsum()), (M,)),
    ("matmul", lambda x, w: np.tanh(x @ w + 1.0), (M, W)),
    ("dot", lambda x, w: np.dot(x, w).sum(axis=0) * 2, (M, W)),
    ("reshape-ravel", lambda x: (x.reshape(-1), x.reshape(3, 8), np.ravel(x * 2)), (M,)),
    ("transpose", lambda x: (x.T + 1, np.transpose(x), x.transpose(1, 0), np.swapaxes(x, 0, 1)),
     (M,)),
    ("expand-squeeze", lambda x: (np.expand_dims(x, 0) * 2, np.squeeze(x[None]),
                                  x[:, np.newaxis]), (M,)),
    ("broadcast-to", lambda v: np.broadcast_to(v, (3, 6)) + 1, (V,)),
    ("indexing", lambda x: (x[0], x[1:3, ::2], x[..., -1], x[:, None, 2], x[[0, 2]]), (M,)),
    ("concatenate-stack", lambda x: (np.concatenate([x, x * 2]), np.stack([x, -x], axis=1)),
     (M,)),
    ("like", lambda x: (np.zeros_like(x) + x, np.ones_like(x), np.full_like(x, 2.5)), (M,)),
    ("softmax", lambda x: np.exp(x - x.max(axis=-1, keepdims=True))
     / np.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1, keepdims=True), (M,)),
    ("logsumexp", lambda x: np.log(np.sum(np.exp(x - x.max()))) + x.max(), (M,)),
    ("ufunc-reduce", lambda x: (np.add.reduce(x, axis=0), np.maximum.accumulate(x, axis=1)),
     (M,)),
    ("sort-diff", lambda x: (np.sort(x, axis=1), np.diff(x, axis=0)), (M,)),
    ("0-d-sum-scalar", lambda v: np.sum(v) * 2.0, (V,)),
    ("fft", lambda v: np.abs(np.fft.rfft(v * 2)), (V,)),
    ("linalg-needs-nonzero-probes", lambda x: np.linalg.inv(x[:, :4] @ x[:, :4].T + 1) * 2,
     (M,)),
    ("isclose-convolve-argsort", lambda v: (np.isclose(v, 0.5) | (v > 0.9),
                                            np.convolve(v, [1.0, 2.0, 1.0]), np.argsort(-v)),
     (V,)),
    ("norm", lambda x: np.linalg.norm(x, axis=0) + 1, (M,)),
    ("several-results-linalg", lambda s: (np.linalg.eigh(s), np.linalg.slogdet(s),
                                          np.linalg.qr(s).R, np.linalg.svd(s)),
     (SPD,)),
    ("several-results-lstsq", lambda x, v: np.linalg.lstsq(x.T, v, rcond=None)[0], (M, V)),
    ("several-results-arrays", lambda x: (np.meshgrid(x[0], x[1, :3]), np.split(x, 2),
                                          np.array_split(x, 4, axis=1),
                                          np.broadcast_arrays(x, x[:1]),
                                          np.gradient(x), np.gradient(x[0])), (M,)),
    ("histogram-fixed-bins", lambda v: np.histogram(v, bins=4, range=(-3, 3)), (V,)),
    ("positive-definite-probes", lambda s: (np.linalg.cholesky(s), np.linalg.eigvalsh(s),
                                            np.linalg.matrix_rank(s), np.linalg.cond(s)),
     (SPD,)),
    ("gather-and-count", lambda x: (np.take_along_axis(x, np.argsort(x, axis=1), axis=1),
                                    np.count_nonzero(x > 0, axis=0), np.isin(x, x[0]),
                                    np.ediff1d(x)), (M,)),
    ("function-arguments", lambda v: (np.piecewise(v, [v < 0, v >= 0], [lambda t: -t, 1.0]),
                                      np.apply_along_axis(np.cumsum, 0, v)), (V,)),
    ("static-queries", lambda x, i: x * np.ndim(x) + np.iscomplexobj(x) + np.isrealobj(i)
     + np.zeros(np.shape(x), np.result_type(x, i, 1.0)) + x.itemsize, (M, INTS)),
    ("view", lambda x: x.view(np.int64) & 0xFF, (M,)),
    ("python-bool-results", lambda x: (np.allclose(x, x + 1e-12), np.array_equal(x, x[::-1]),
                                       np.array_equiv(x, x[:1]), x * np.allclose(x, x)), (M,)),
    ("orderings-and-bits", lambda v, i: (np.argpartition(v, 2)[:2].sum(), np.lexsort((v, -v)),
                                         np.vander(v, 3), np.sort_complex(v),
                                         np.unpackbits(i.astype(np.uint8), axis=1),
                                         np.packbits(i > 0, axis=-1)), (V, INTS)),
    ("linalg-more", lambda s, v: (np.linalg.multi_dot([s, s, s]), np.linalg.vector_norm(v),
                                  np.linalg.matrix_norm(s)), (SPD, V)),
]


@pytest.mark.parametrize(("name", "fn", "args"), CASES, ids=[case[0] for case in CASES])
def test_numpy_calls_match_numpy(name, fn, args):
    expected = fn(*args)
    actual = numfuse.jit(fn)(*args)
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for got, want in zip(actual, expected, strict=True):
            assert_same(got, want, rtol=1e-12)
    else:
        assert_same(actual, expected, rtol=1e-12)


def test_calls_are_graph_nodes_and_elementwise_work_around_them_still_fuses():
    def normalise(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    compiled = numfuse.compile(normalise, M)
    calls = [node for node in compiled.graph.nodes if node.kind == NUMPY]
    assert [node.op for node in calls] == ["max", "sum"]
    assert len(compiled.kernels) == 2  # exp(x - max) | e / sum
    text = str(compiled.graph)
    assert "max(a, axis=-1, keepdims=True)" in text


def test_a_new_size_reuses_the_compiled_calls():
    jitted = numfuse.jit(lambda x: (x.T @ x).sum(axis=0))
    for rows in (3, 5, 9):
        x = RNG.standard_normal((rows, 4))
        assert_same(jitted(x), (x.T @ x).sum(axis=0), rtol=1e-12)
    assert len(jitted.compiled) == 1


DATA_DEPENDENT_CASES = [
    ("mask", lambda x: (x[x > 0], x[x > 0].sum(), x - x[x > 0].mean()), (M,)),
    ("mask-rows", lambda x: (x[x[:, 0] > 0], x[:, x[0] > 0] * 2), (M,)),
    ("mask-fused-after", lambda x, v: (x[0][v > 0] * v[v > 0] + 1, np.sort(v[v > 0.5])),
     (M, V)),
    ("nonzero", lambda x: (np.nonzero(x > 0), np.where(x[0] > 0)[0] * 2, (x > 0).nonzero(),
                           np.flatnonzero(x), np.argwhere(x > 0)), (M,)),
    ("unique", lambda i: (np.unique(i), np.unique(i, return_counts=True),
                          np.unique_values(i[0]), np.unique_all(i.ravel())), (INTS,)),
    ("set-operations", lambda i: (np.setdiff1d(i[0], i[1]), np.union1d(i[0], i[2]),
                                  np.intersect1d(i[0], i[3]), np.setxor1d(i[1], i[2])),
     (INTS,)),
    ("counts-and-selections", lambda i, v: (np.bincount(np.abs(i).ravel()),
                                            np.compress(v > 0, v), np.extract(v < 0, v),
                                            np.trim_zeros(np.maximum(v, 0))), (INTS, V)),
    ("integer-indices", lambda x, v: (v[np.argsort(v)], x[:, np.argmax(x, axis=1)],
                                      v[np.abs(INTS[0]) % 6]), (M, V)),
    ("assign-selected", lambda x, v: _assign_selected(v, x[0]), (M, V)),
]


def _assign_selected(v, w):
    z = v * 2
    z[w < 0] = w[w < 0] + 1
    return z


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
@pytest.mark.parametrize(("name", "fn", "args"), DATA_DEPENDENT_CASES,
                         ids=[case[0] for case in DATA_DEPENDENT_CASES])
def test_sizes_that_depend_on_the_values_follow_each_call(name, fn, args):
    """``x[mask]``, ``np.nonzero``, ``np.unique``... : one compiled function serves every
    mask, and each call's sizes are the ones numpy gives for its values."""
    jitted = numfuse.jit(fn)
    for flip in (1, -1, 0):
        flipped = tuple(arg * flip if arg.dtype.kind == "f" else arg[::-1] for arg in args)
        expected = fn(*flipped)
        actual = jitted(*flipped)
        assert_same(actual, expected, rtol=1e-12)
    assert len(jitted.compiled) == 1


def test_set_operations_on_bool_operands_follow_the_values():
    """Found by a conformance hunt: ``np.intersect1d`` of bool arrays, one of one
    element, met the same one value on every stand-in, so its size was fixed at 1 and an
    empty intersection raised ``CallShapeError``."""
    jitted = numfuse.jit(lambda a, b: np.intersect1d(a, b))
    for a, b in (([True, True], [False]), ([True, False], [False]), ([True, True], [True])):
        a, b = np.array(a), np.array(b)
        assert_same(jitted(a, b), np.intersect1d(a, b))
    assert len(jitted.compiled) == 1


def test_a_data_dependent_size_of_1_broadcasts_as_in_numpy():
    """A size found at run time can be 0, 1 or anything: 1 broadcasts against a longer axis
    (the kernel's core axis does not, so the runtime widens that operand)."""
    jitted = numfuse.jit(lambda x, y: (x[x > 0] + y, y * x[x > 0][:, None]))
    for x in (np.array([1.0, -1, -2]), np.array([1.0, 2, 3])):
        y = np.arange(3.0) + 0.5
        assert_same(jitted(x, y), (x[x > 0] + y, y * x[x > 0][:, None]))
    empty = np.array([-1.0, -2, -3])
    assert_same(numfuse.jit(lambda x: (x[x > 0] * 2 + 1, x[x > 0].sum()))(empty),
                (empty[:0] * 2 + 1, np.float64(0.0)))


def _selection_against_a_column(x):
    return x[x > 0][:, None] + x[:, None]  # (k, 1) + (n, 1): k may be 1


def test_a_data_dependent_size_of_1_broadcasts_beside_other_size_1_axes():
    jitted = numfuse.jit(_selection_against_a_column)
    for x in (np.array([1.0, -1, -1, -1]), np.array([1.0, 2, 3, 4]), np.array([-1.0, 3, -1])):
        assert_same(jitted(x), _selection_against_a_column(x))


def _halves_at_the_peak(x):
    low, high = np.split(x * 2, [np.argmax(x)])
    return low.sum() - high.sum(), np.repeat(x, np.argmax(x) + 1)


def test_sizes_set_by_an_integer_the_function_computes_follow_it():
    """np.split at an argmax, np.repeat by one: the sizes follow the computed integer."""
    jitted = numfuse.jit(_halves_at_the_peak)
    for x in (np.array([1.0, 5, 2, 3]), np.array([9.0, 5, 2, 3]), np.array([1.0, 5, 2, 30])):
        assert_same(jitted(x), _halves_at_the_peak(x))
    assert len(jitted.compiled) == 1


@pytest.mark.parametrize("name", ["sqrt", "log", "log10", "arcsin", "arctanh"])
def test_a_function_whose_dtype_follows_the_signs_of_the_values_runs_with_numpy(name):
    """np.emath's functions are complex for negative values: tracing tries negative
    stand-ins too, and numpy runs the function (it had raised at every call)."""
    function = getattr(np.emath, name)
    jitted = numfuse.jit(lambda x: function(x) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)
        for value in (np.array([-4, 4]), np.array([0.25, 0.5]), -4.0, np.array([-4, 4])):
            with np.errstate(all="ignore"):
                assert_same(jitted(value), function(value) * 2)


def _confusion(truth, predicted):
    return np.bincount(truth * 3 + predicted, minlength=9).reshape(3, 3)


def test_counts_of_at_least_minlength_reshape_as_in_numpy():
    """np.bincount's size comes from the data but is at least ``minlength``: the confusion
    matrix idiom reshapes it (tracing had tried a smaller size, and numpy ran it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", numfuse.NumpyFallbackWarning)
        jitted = numfuse.jit(_confusion)
        for truth, predicted in ((np.array([0, 1, 2, 2]), np.array([0, 2, 2, 1])),
                                 (np.array([0, 0]), np.array([1, 1]))):
            assert_same(jitted(truth, predicted), _confusion(truth, predicted))
    with pytest.raises(ValueError, match="cannot reshape"):  # numpy's, for labels beyond
        jitted(np.array([3]), np.array([0]))


@pytest.mark.parametrize("fn", [
    lambda a: (a - a.mean(axis=0)).T @ (a - a.mean(axis=0)),  # a covariance, written out
    lambda a: (a * 2) @ (a * 2).T,
    lambda a: np.dot(a * 2, (a * 2).T),
    lambda a: np.inner(a * 2, a * 2),
    lambda a: np.tensordot(a * 2, a * 2, axes=([0], [0])),
    lambda a: (lambda x: x @ x.T)(a * 2),  # one array: numpy's symmetric product too
], ids=["covariance", "matmul", "dot", "inner", "tensordot", "one-array"])
def test_a_product_of_equal_computations_is_numpys_bit_for_bit(fn):
    """numpy multiplies two arrays where the function computed two (its general
    product), though common-subexpression elimination makes them one (whose product
    with its transpose numpy takes as a symmetric one, rounding otherwise)."""
    a = RNG.standard_normal((50, 30))
    jitted = numfuse.jit(fn)
    for _ in range(2):
        assert_same(jitted(a), fn(a))


def test_a_mask_of_length_0_on_a_length_1_axis():
    """numpy lets ``x[y != 0]`` with ``x`` of shape (1,) take a mask of length 0: tracing
    probes with the example's sizes (found by the fuzzer)."""
    masked = lambda x, y: x[y != 0]  # noqa: E731
    jitted = numfuse.jit(masked)
    for y in (np.array([]), np.array([2.0]), np.array([0.0]), np.array([])):
        assert_same(jitted(np.array([3.0]), y), masked(np.array([3.0]), y))


def test_a_0_d_mask_from_a_python_number_adds_an_axis_of_0_or_1():
    """``x[y != 0]`` with a Python number ``y``: the mask is True or False, so the new
    axis is 1 or 0 (found by the fuzzer)."""
    jitted = numfuse.jit(lambda x, y: x[y != 0])
    for y in (0.0, 1.0, 0.0):
        for x in (np.array([]), np.arange(3.0)):
            assert_same(jitted(x, y), x[y != 0])


def test_a_data_dependent_size_selected_by_a_mask_of_one_element():
    """``n[y != 0]`` for ``n = np.nonzero(y)[-1]`` and a one-element ``y``: the mask has
    the fixed size 1, so the selection works only where ``n`` has 1 element, and its size
    moves with the mask's values (found by the fuzzer)."""
    jitted = numfuse.jit(lambda y: np.nonzero(y)[-1][y != 0])
    for value in (np.iinfo(np.int64).min, 5, 0):
        y = np.array([value])
        if value:
            assert_same(jitted(y), np.nonzero(y)[-1][y != 0])
        else:
            with pytest.raises(IndexError):  # numpy's: a mask of 1 for 0 elements
                np.nonzero(y)[-1][y != 0]
            with pytest.raises(IndexError):
                jitted(y)


def test_a_data_dependent_mask_on_a_length_1_axis():
    """numpy lets a boolean index of length 0 select from an axis of length 1; tracing
    finds the selection's size with data-dependent sizes of 0 and 1 when the usual
    stand-ins fail (found by the fuzzer)."""
    jitted = numfuse.jit(lambda b: b[np.nonzero(b)[-1] == 0])
    for b in (np.array([0.0]), np.array([1.0]), np.array([0.0])):
        assert_same(jitted(b), b[np.nonzero(b)[-1] == 0])


def _mixed_sizes(x):
    selected = np.nonzero(x)[-1]
    magnitude = np.abs(selected)
    signed = np.copysign(x, magnitude)  # broadcasts a selection of 1 against x
    total = np.abs(x + selected)
    return selected, magnitude, signed, total, total[..., ::2]


def test_values_of_a_data_dependent_size_never_share_a_loop_with_others():
    """``abs(nonzero(x))`` and ``copysign(x, abs(nonzero(x)))`` have one shape pattern but
    different sizes when one element is selected: they are separate kernels, and a size of
    1 broadcasts (found by the fuzzer)."""
    jitted = numfuse.jit(_mixed_sizes)
    for x in (np.array([0.0, 0.0, 1e-310]), np.array([1.0, 2.0, 3.0])):
        assert_same(jitted(x), _mixed_sizes(x))
    with pytest.raises(ValueError, match="could not be broadcast"):
        jitted(np.array([0.0, 2.0, 3.0]))


def test_data_dependent_sizes_that_do_not_broadcast_raise_numpys_error():
    x, y = np.array([1.0, 2, -3]), np.arange(3.0)
    with pytest.raises(ValueError, match=r"could not be broadcast together with shapes \(2,\) "
                                         r"\(3,\)"):
        numfuse.jit(lambda x, y: x[x > 0] + y)(x, y)
    with pytest.raises(ValueError, match="zero-size array"):
        numfuse.jit(lambda x: x[x > 5].max())(x)


def test_sizes_computed_from_a_data_dependent_size_follow_it():
    """``np.sort(x[mask])[:3]`` is 3 long or shorter: tracing varies the selected size to
    find such axes, so one compilation serves all (arguments of one signature)."""
    fns = [lambda x: np.sort(x[x > 0])[:3] * 2, lambda x: (x[x > 0] * 2)[:2].sum(),
           lambda x: np.diff(x[x > 0]), lambda x: np.concatenate([x[x > 0], x[x < 0]]) + 1]
    jitted = [numfuse.jit(fn) for fn in fns]
    for size in (5, 0, 2, 3, 20):
        x = RNG.standard_normal(size) + 0.3
        for fn, compiled in zip(fns, jitted, strict=True):
            assert_same(compiled(x), fn(x))
    assert [len(compiled.compiled) for compiled in jitted] == [1] * len(fns)


def test_a_call_whose_size_does_not_follow_the_arguments_compiles_per_shape():
    """``x[:3]`` is 3 long for long arguments, shorter for short ones: when a result size
    disagrees with the traced one the function compiles per shape and runs again."""
    jitted = numfuse.jit(lambda x: x[:3] * 2)
    for size in (5, 2, 0, 7):
        x = np.arange(float(size))
        assert_same(jitted(x), x[:3] * 2)
    assert jitted.per_shape
    fixed = numfuse.compile(lambda x: x[:3] * 2, np.arange(5.0))
    with pytest.raises(numfuse.CallShapeError, match=r"numfuse\.compile"):
        fixed(np.arange(2.0))


def _put_into_made(x):
    y = x * 2
    np.put(y, [0, 3], -1.0)
    np.putmask(y, y > 1, 0.5)
    z = np.zeros((4, 4))
    np.fill_diagonal(z, x[0, :4])
    np.copyto(z, x[:, :4], where=x[:, :4] > 0.5)
    w = np.ones_like(x)
    np.place(w, x > 0, [3.0, 4.0])
    np.put_along_axis(w, np.argmax(x, axis=1, keepdims=True), 9.0, axis=1)
    return y, z, w


def _methods_writing(v):
    b, c, d, e = v * 2, np.abs(v), v - 1, v + 0
    b.sort()
    c.fill(1.5)
    d.partition(3)
    e.put([0, 2], 9.0)
    table = np.arange(4.0)
    table.fill(v[0])
    return b, c, d[3], e, table, np.arange(6.0).item(2) * v


# numpy functions numfuse does not list run as numpy calls learnt from stand-ins.
UNLISTED_CASES = [
    ("choose", lambda i, x: np.choose(np.abs(i) % 3, [x, x * 2, -x]), (INTS, M)),
    ("diagflat-tri", lambda v: (np.diagflat(v * 2) + 1, np.tri(6, 6) * v), (V,)),
    ("isneginf-isposinf", lambda x: (np.isneginf(x / 0), np.isposinf(x / 0) | (x > 1)),
     (M,)),
    ("isreal-iscomplex", lambda x: (np.isreal(x + 0j), np.iscomplex(x * 1j)), (M,)),
    ("index-helpers", lambda i: (np.unravel_index(np.abs(i) % 24, (4, 6)),
                                 np.ravel_multi_index((np.abs(i) % 4, np.abs(i) % 6), (4, 6))),
     (INTS,)),
    ("triu-indices-from", lambda s: s[np.triu_indices_from(s)] * 2, (SPD,)),
    ("histogram-bin-edges", lambda v: np.histogram_bin_edges(v, bins=5) + 1, (V,)),
    ("polynomials", lambda v: (np.polyder(v, 2), np.polymul(v, v[:2]), np.polyint(v),
                               np.polyfit(v, v ** 2, 2)), (V,)),
    ("sliding-window-view", lambda v: np.lib.stride_tricks.sliding_window_view(v * 2, 3)
     .sum(axis=-1), (V,)),
    ("matrix-helpers", lambda s: (np.linalg.tensorinv(s, ind=1), np.linalg.cond(s, p=1)),
     (SPD,)),
    ("writers", _put_into_made, (M,)),
    ("writing-methods", _methods_writing, (V,)),
    ("methods", lambda v: (v.searchsorted(0.5), v.argpartition(2)[:2], v.compress(v > 0),
                           (np.abs(v * 3) % 3).astype(int).choose([v, -v, v * 2]),
                           v.byteswap(), v.flat[3] + v.flat[-1], v.flat[1:4]), (V,)),
]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize(("name", "fn", "args"), UNLISTED_CASES,
                         ids=[case[0] for case in UNLISTED_CASES])
def test_numpy_functions_not_listed_run_as_numpy_calls(name, fn, args):
    expected = fn(*args)
    actual = numfuse.jit(fn)(*args)
    assert_same(actual, expected, rtol=1e-10, atol=1e-12)


# Unlisted functions whose results depend on the values in different ways: sizes (polyder
# of a short polynomial, trim_zeros-like stripping in polydiv), integer outputs, views.
UNLISTED_PROPERTIES = {
    "polyder": lambda v: np.polyder(v) * 2,
    "polyint": lambda v: np.polyint(v, 2) + 1,
    "polymul": lambda v: np.polymul(v, v[::-1]),
    "diagflat": lambda v: np.diagflat(v) - 1,
    "choose": lambda v: np.choose((np.abs(np.nan_to_num(v)) % 3).astype(np.int64),
                                  [v, -v, v * 2]),
    "histogram_bin_edges": lambda v: np.histogram_bin_edges(np.nan_to_num(v), bins=4),
    "sliding_window_view": lambda v: np.lib.stride_tricks.sliding_window_view(v, 1) + v[:, None],
    "isposinf": lambda v: np.isposinf(v * 2) | np.isneginf(v),
    "tril_indices": lambda v: v[np.tril_indices(len(v) // 2 + 1, m=1)[0]],
}


@pytest.mark.parametrize("name", list(UNLISTED_PROPERTIES))
@settings(max_examples=8, deadline=None, derandomize=True)
@given(values=hnp.arrays(np.float64, st.integers(1, 6),
                         elements=st.floats(-1e3, 1e3) | st.sampled_from([0.0, np.nan, np.inf])))
def test_unlisted_functions_follow_numpy_on_any_values(name, values):
    """Random values and sizes through numpy functions numfuse learns from stand-ins: the
    same values, dtypes and exceptions as numpy (a value-dependent result numfuse refuses
    is an UnsupportedOperationError or CallShapeError, never a wrong answer)."""
    fn = UNLISTED_PROPERTIES[name]
    with np.errstate(all="ignore"):
        try:
            expected = fn(values)
        except Exception as error:
            expected = error
        try:
            actual = numfuse.jit(fn)(values)
        except (UnsupportedOperationError, numfuse.CallShapeError):
            return
        except Exception as error:
            actual = error
    if isinstance(expected, Exception):
        assert type(actual) is type(expected), f"numpy raised {expected!r}, got {actual!r}"
        return
    assert_same(actual, expected, rtol=1e-12, atol=1e-12)


def test_an_unlisted_function_whose_sizes_follow_the_values():
    """``np.polydiv`` and ``np.trim_zeros``-like helpers size their result by the values:
    the stand-ins with other data find that and the size moves with each call."""
    jitted = numfuse.jit(lambda p, q: np.polydiv(p * 1, q)[0])
    for p, q in (([1.0, 2, 3, 4], [1.0, 2]), ([0.0, 0, 3, 4], [1.0, 2]), ([1.0, 5], [2.0])):
        assert_same(jitted(np.array(p), np.array(q)), np.polydiv(np.array(p), np.array(q))[0])


def test_an_unlisted_function_returning_one_value_per_row_compiles_per_shape():
    jitted = numfuse.jit(lambda x: np.unstack(x * 2))
    for rows in (4, 2, 4):
        assert_same(jitted(M[:rows]), np.unstack(M[:rows] * 2))


def test_writers_into_an_argument_are_refused():
    with pytest.raises(UnsupportedOperationError, match=r"in-place np\.put on an argument"):
        numfuse.jit(lambda x: np.put(x, [0], 1.0))(V.copy())
    buffer = np.zeros(6)
    with pytest.raises(UnsupportedOperationError, match=r"np\.copyto into an array"):
        numfuse.jit(lambda x: np.copyto(buffer, x))(V)
    assert not buffer.any()


def test_writing_methods_on_an_argument_are_refused():
    for write in (lambda x: x.sort(), lambda x: x.fill(0.0), lambda x: x.flat.__setitem__(0, 1)):
        with pytest.raises(UnsupportedOperationError, match="in-place"):
            numfuse.jit(write)(V.copy())


def test_unlisted_functions_that_cannot_run_on_stand_ins_are_refused(tmp_path):
    with pytest.raises(UnsupportedOperationError, match=r"(?s)np\.savetxt .*writes a file"):
        numfuse.jit(lambda x: np.savetxt(tmp_path / "x.txt", x))(M)
    assert not (tmp_path / "x.txt").exists()
    with pytest.raises(UnsupportedOperationError, match=r"np\.shares_memory"):
        numfuse.jit(lambda x: np.shares_memory(x, x))(M)
    with pytest.raises(UnsupportedOperationError, match=r"(?s)np\.linalg\.tensorinv failed on "
                       r"stand-in arrays \(.*\).*if the arguments are right"):
        numfuse.jit(lambda x: np.linalg.tensorinv(x, ind=1))(M)


def test_libraries_printing_on_stand_ins_are_silenced(capfd):
    """LAPACK prints to stdout when ``np.polyfit`` fits the zeros of a stand-in."""
    v = np.linspace(-2.0, 3.0, 12)
    assert_same(numfuse.jit(lambda v: np.polyfit(v, v ** 2, 2))(v), np.polyfit(v, v ** 2, 2),
                rtol=1e-10, atol=1e-12)
    print("after")
    captured = capfd.readouterr()
    assert captured.out == "after\n" and captured.err == ""


def test_the_numpy_names_of_functions():
    from numfuse.registry import numpy_name
    assert numpy_name(np.choose) == "choose"
    assert numpy_name(np.linalg.eigvals) == "linalg.eigvals"
    assert numpy_name(np.fft.rfftn) == "fft.rfftn"
    assert numpy_name(np.lib.stride_tricks.sliding_window_view) == \
        "lib.stride_tricks.sliding_window_view"


def test_the_supported_functions_are_listed():
    names = numfuse.supported_functions()
    assert {"np.sum", "np.unique", "np.where", "np.linalg.solve"} <= set(names)
    assert names == sorted(names)


def test_value_dependent_dtypes_stay_unsupported():
    with pytest.raises(UnsupportedOperationError, match=r"np\.real_if_close"):
        numfuse.jit(lambda z: np.real_if_close(z))(M + 0j)
    with pytest.raises(UnsupportedOperationError, match=r"(?s)np\.linalg\.eigvals with these "
                       "arguments.*dtype of its result depends on the values"):
        numfuse.jit(lambda s: np.linalg.eigvals(s))(SPD)


def test_unknown_method_names_what_is_supported():
    with pytest.raises(AttributeError, match="supports the array methods"):
        numfuse.jit(lambda x: x.tofile("nowhere"))(M)


def test_call_errors_are_numpys():
    with pytest.raises(np.exceptions.AxisError):
        numfuse.jit(lambda x: x.sum(axis=5))(M)


def test_a_call_whose_result_shape_depends_on_the_values_fails_clearly():
    """Tracing runs numpy on stand-in values; a result shape that depends on the real values
    (``bins="auto"``) is caught when the call runs, not returned wrong."""
    with pytest.raises(ValueError, match="depends on the values"):
        numfuse.jit(lambda v: np.histogram(v * 10, bins="auto")[0] + 1)(V)


def _diff_written(x, n):
    y = x * 2
    d = np.diff(y, n=n)
    d += 1
    return y, d


def _grid_written(x):
    y = x * 2
    grid, _ = np.meshgrid(y, y, sparse=True, copy=False)
    y += 1
    return grid * 2


def test_options_making_a_numpy_function_return_a_view_make_writes_reach_its_operand():
    """Found by a conformance hunt: ``np.diff(y, n=0)`` is ``y`` itself and
    ``np.meshgrid(..., copy=False)`` gives views, but both were taken for new arrays:
    a write through one did not reach the other."""
    x = np.array([1.0, 2.0, 4.0])
    check(_diff_written, x, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", numfuse.NumpyFallbackWarning)  # (a view written)
        for fn, args in ((_diff_written, (x, 0)), (_grid_written, (x,))):
            expected, got = fn(*args), numfuse.jit(fn)(*args)
            if not isinstance(expected, tuple):
                expected, got = (expected,), (got,)
            for one, other in zip(got, expected, strict=True):
                assert_same(one, other)


def test_concatenate_of_one_traced_array_joins_its_rows():
    """Found by a conformance hunt: numpy's C code iterating the traced array for
    ``np.concatenate(x)`` turned numfuse's "compile per shape" into a bare TypeError."""
    x = np.arange(6.0).reshape(2, 3)
    check(lambda v: np.concatenate(v) * 2, x)
    assert_same(numfuse.compile(lambda v: np.concatenate(v), x)(x), x.ravel())


def test_views_of_big_endian_arguments_keep_their_byte_order():
    """A view of a big-endian argument is big-endian, as numpy's (found by the fuzzer)."""
    big = np.arange(9.0).reshape(3, 3).astype(">f8")
    check(lambda x: (x[:, ::2], x[::2] * 2), big)


def test_a_call_giving_a_size_1_axis_for_these_sizes_compiles_per_shape():
    """``x[..., ::2]`` of a 2-column matrix has one column: broadcasting needs to know it is
    1, so the function compiles per shape (found by the fuzzer)."""
    jitted = numfuse.jit(lambda x: np.abs(x) + x[..., ::2])
    for rows, columns in ((5, 2), (7, 2), (5, 1), (5, 2)):
        x = RNG.standard_normal((rows, columns))
        assert_same(jitted(x), np.abs(x) + x[..., ::2])


def test_a_size_decided_by_a_traced_array_beside_the_data_is_learnt_from_its_values():
    """Found by a conformance hunt: np.repeat's counts and np.split's indices, traced,
    were probed with zeros only, so the sizes they give were taken for fixed."""
    x = np.array([1.0, 2.0, 3.0])
    repeated = numfuse.jit(lambda x, k: np.repeat(x, k) * 2)
    for counts in ([2, 0, 1], [3, 1, 1], [0, 0, 0]):
        assert_same(repeated(x, np.array(counts)), np.repeat(x, counts) * 2)
    assert_same(numfuse.jit(lambda x: np.repeat(x, x > 1))(x), np.repeat(x, x > 1))
    split = numfuse.jit(lambda x, i: [part + 1 for part in np.split(x, i)])
    for indices in ([2, 5], [1, 3]):
        assert_same(split(np.arange(6.0), np.array(indices)),
                    [part + 1 for part in np.split(np.arange(6.0), indices)])


def test_the_results_of_reductions_run_as_numpy_calls_may_be_written():
    """Found by a conformance hunt: scipy's logsumexp writes into np.amax(..., initial=)."""
    def logsumexp(x):
        m = np.amax(x, axis=-1, keepdims=True, initial=-np.inf)
        m[~np.isfinite(m)] = 0
        return np.log(np.sum(np.exp(x - m), axis=-1)) + m[..., 0]

    check(logsumexp, np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]]))

    def positive_sums(x):
        total = np.sum(x, where=x > 0, axis=0)
        total += 1
        return total

    check(positive_sums, np.array([[1.0, -2.0], [3.0, 4.0]]))


def test_bincount_with_minlength_learns_its_size_from_large_values():
    """Found by a conformance hunt: every stand-in value stayed below minlength, so the
    size was taken for fixed at it."""
    jitted = numfuse.jit(lambda i: np.bincount(i, minlength=5) * 2)
    for indices in ([2, 7], [0, 1], [3, 3, 9, 1]):
        assert_same(jitted(np.array(indices)), np.bincount(np.array(indices), minlength=5) * 2)


def test_nested_results_of_a_numpy_call_keep_their_structure():
    """np.histogramdd's edges are a list of arrays, even when they have one shape."""
    sample = np.random.default_rng(0).random((100, 2))

    def histogram(s, bins):
        return np.histogramdd(s, bins=bins)

    for bins in (4, (2, 3)):
        jitted = numfuse.jit(histogram, static_argnums=1)
        for _ in range(2):
            counts, edges = jitted(sample, bins)
            want_counts, want_edges = histogram(sample, bins)
            assert type(edges) is list and len(edges) == len(want_edges)
            assert_same(counts, want_counts)
            for got, want in zip(edges, want_edges, strict=True):
                assert_same(got, want)
