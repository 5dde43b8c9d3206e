"""The derivative rules of the op table, checked against central finite differences.

Each row's ``vjp`` is plain numpy code, so hypothesis runs it on arrays directly (fast),
float64 and float32, against central differences of the row's numpy reference (computed
in float64).  Then the rules are checked again through ``numfuse.grad``, compiled, one
kernel per group of rows, where each row reads arguments of its own (so a wrong gradient
names its row).  At kinks, ties, zeros and infinities the rules follow JAX; that is
checked against ``jax.grad`` when jax is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numfuse
from numfuse.ops import INTERNAL, OPS

# ---------------------------------------------------------------------- domains

Maker = Callable[[np.random.Generator, int], tuple[np.ndarray, ...]]


def _uniform(low: float, high: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.uniform(low, high, n)


def _away_from_zero(rng: np.random.Generator, n: int, low: float = 0.2,
                    high: float = 3.0) -> np.ndarray:
    return rng.uniform(low, high, n) * rng.choice([-1.0, 1.0], n)


def _fractional(rng: np.random.Generator, n: int) -> np.ndarray:
    """Away from the jumps of rounding: integers and halves."""
    return rng.integers(-3, 3, n) + rng.uniform(0.1, 0.4, n)


def _quotient(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) with x / y away from an integer (remainder and floor division jump there)."""
    y = _away_from_zero(rng, n, 0.5, 2.0)
    return (rng.integers(-3, 3, n) + rng.uniform(0.1, 0.9, n)) * y, y


def _apart(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two operands that never tie."""
    x = rng.uniform(-3, 3, n)
    return x, x + _away_from_zero(rng, n, 0.1, 2.0)


def _clip_operands(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    low = rng.uniform(-2, 0, n)
    high = low + rng.uniform(0.5, 2, n)
    x = np.where(rng.random(n) < 0.5, rng.uniform(-3, 3, n), (low + high) / 2)
    x = np.where(np.minimum(abs(x - low), abs(x - high)) < 0.1, (low + high) / 2, x)
    return x, low, high


UNARY_DOMAINS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "sqrt": _uniform(0.2, 4), "log": _uniform(0.2, 4), "log2": _uniform(0.2, 4),
    "log10": _uniform(0.2, 4), "log1p": _uniform(-0.8, 3), "cbrt": _away_from_zero,
    "reciprocal": _away_from_zero, "arcsin": _uniform(-0.9, 0.9),
    "arccos": _uniform(-0.9, 0.9), "arctanh": _uniform(-0.9, 0.9),
    "arccosh": _uniform(1.2, 4), "tan": _uniform(-1.3, 1.3), "absolute": _away_from_zero,
    "fabs": _away_from_zero, "sign": _away_from_zero, "floor": _fractional,
    "ceil": _fractional, "trunc": _fractional, "rint": _fractional,
}
BINARY_DOMAINS: dict[str, Maker] = {
    "true_divide": lambda rng, n: (rng.uniform(-3, 3, n), _away_from_zero(rng, n)),
    "power": lambda rng, n: (rng.uniform(0.2, 3, n), rng.uniform(-2, 2, n)),
    "float_power": lambda rng, n: (rng.uniform(0.2, 3, n), rng.uniform(-2, 2, n)),
    "remainder": _quotient, "fmod": _quotient, "floor_divide": _quotient,
    "maximum": _apart, "minimum": _apart, "fmax": _apart, "fmin": _apart,
    "heaviside": lambda rng, n: (_away_from_zero(rng, n), rng.uniform(0, 1, n)),
    "copysign": lambda rng, n: (_away_from_zero(rng, n), _away_from_zero(rng, n)),
    "hypot": lambda rng, n: (_away_from_zero(rng, n), rng.uniform(-3, 3, n)),
    "arctan2": lambda rng, n: (_away_from_zero(rng, n), _away_from_zero(rng, n)),
}
TERNARY_DOMAINS: dict[str, Maker] = {
    "clip": _clip_operands,
    "where": lambda rng, n: (rng.random(n) < 0.5, rng.uniform(-3, 3, n),
                             rng.uniform(-3, 3, n)),
}
# Rows with a float loop that have no derivative rule, and why.
NOT_DIFFERENTIABLE = {
    "nextafter": "the next representable number: no derivative JAX defines either",
    "spacing": "the distance to the next representable number",
}


def _float_rows() -> list[str]:
    """Rows that compute on floats and return floats (the ones gradients flow through)."""
    names = []
    for name, row in OPS.items():
        if name in ("astype", "real", "imag", "where", "clip") or name in INTERNAL:
            names.append(name)
            continue
        ufunc = row.reference
        if not isinstance(ufunc, np.ufunc) or ("f" not in row.code and "*" not in row.code):
            continue
        try:
            _, out = row.loop_dtypes([np.dtype(np.float64)] * row.arity)
        except Exception:
            continue
        if out.kind == "f":
            names.append(name)
    return names


FLOAT_ROWS = _float_rows()
DIFFERENTIABLE = [name for name in FLOAT_ROWS if name not in NOT_DIFFERENTIABLE]


def operands(name: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    row = OPS[name]
    if row.arity == 1:
        return (UNARY_DOMAINS.get(name, _uniform(-3, 3))(rng, n),)
    if row.arity == 2:
        maker = BINARY_DOMAINS.get(name)
        return maker(rng, n) if maker else (rng.uniform(-3, 3, n), rng.uniform(-3, 3, n))
    return TERNARY_DOMAINS[name](rng, n)


def reference(name: str) -> Callable[..., Any]:
    if name == "astype":
        return lambda x: x.astype(np.float64)
    return OPS[name].reference


def differences(name: str, values: tuple[np.ndarray, ...]) -> list[np.ndarray | None]:
    """Central differences of the row's reference in float64, element by element (the
    operation is elementwise, so every element moves at once); None for a bool operand."""
    fn = reference(name)
    result: list[np.ndarray | None] = []
    for position, value in enumerate(values):
        if value.dtype == bool:
            result.append(None)
            continue
        step = 1e-6 * np.maximum(1.0, np.abs(value))
        up = list(values)
        down = list(values)
        up[position] = value + step
        down[position] = value - step
        with np.errstate(all="ignore"):
            result.append((fn(*up) - fn(*down)) / (2 * step))
    return result


def check_rule(name: str, seed: int, dtype: type, n: int = 7) -> None:
    rng = np.random.default_rng(seed)
    values = operands(name, rng, n)
    g = rng.uniform(-2, 2, n)
    expected = [None if fd is None else g * fd for fd in differences(name, values)]
    cast = tuple(value if value.dtype == bool else value.astype(dtype) for value in values)
    fn = reference(name)
    with np.errstate(all="ignore"):
        ans = np.asarray(fn(*cast))
        if name == "astype":
            ans = ans.astype(dtype)
        got = OPS[name].vjp(g.astype(dtype), ans, *cast)  # type: ignore[misc]
    tolerance = dict(rtol=1e-5, atol=1e-7) if dtype is np.float64 else dict(rtol=3e-3,
                                                                           atol=3e-4)
    for position, (value, want) in enumerate(zip(got, expected, strict=True)):
        if want is None:
            assert value is None, f"{name}: a cotangent for a boolean operand"
            continue
        if value is None:
            np.testing.assert_allclose(want, 0.0, atol=1e-6, err_msg=f"{name} operand "
                                       f"{position}: no cotangent, differences say otherwise")
            continue
        value = np.broadcast_to(value, want.shape)
        np.testing.assert_allclose(value, want, **tolerance,  # type: ignore[arg-type]
                                   err_msg=f"{name} operand {position} ({dtype.__name__})")


def test_every_float_row_has_a_rule_or_a_reason():
    assert {"add", "exp", "arctan2", "hypot", "clip", "where", "astype"} <= set(DIFFERENTIABLE)
    for name in FLOAT_ROWS:
        assert OPS[name].vjp is not None or name in NOT_DIFFERENTIABLE, name
    for name in NOT_DIFFERENTIABLE:
        assert OPS[name].vjp is None


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rule_matches_central_differences_float64(name, seed):
    check_rule(name, seed, np.float64)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rule_matches_central_differences_float32(name, seed):
    check_rule(name, seed, np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("name", DIFFERENTIABLE)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_rule_matches_central_differences_exhaustive(name, dtype, seed):
    check_rule(name, seed, dtype, n=31)


# ------------------------------------------------------- the rules through the engine


GROUPS = {
    "unary": [name for name in DIFFERENTIABLE if OPS[name].arity == 1],
    "binary and ternary": [name for name in DIFFERENTIABLE if OPS[name].arity > 1],
}


def _grouped(names: list[str]) -> Callable[..., Any]:
    """sum(sum over rows of weight_k * row_k(arguments of row k)): every row reads
    arguments of its own and has its own weight, and all of it is one loop."""
    arities = [OPS[name].arity for name in names]

    def combined(*values: Any) -> Any:
        total = 0.0
        position = 0
        for index, (name, arity) in enumerate(zip(names, arities, strict=True)):
            operands = values[position:position + arity]
            position += arity
            if name == "astype":
                result = operands[0].astype(np.float64)
            elif name == "where":
                result = np.where(*operands)
            elif name == "clip":
                result = np.clip(*operands)
            else:
                result = OPS[name].reference(*operands)
            total = total + weight(index) * result
        return np.sum(total)

    return combined


def weight(index: int) -> float:
    return 0.5 + 0.25 * (index % 7) - 0.1 * index


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_rules_through_numfuse_grad(group, dtype):
    names = GROUPS[group]
    rng = np.random.default_rng(7)
    values = [operands(name, rng, 9) for name in names]
    flat = [value if value.dtype == bool else value.astype(dtype)
            for group_values in values for value in group_values]
    positions = [index for index, value in enumerate(flat) if value.dtype != bool]
    compiled = numfuse.compile(numfuse.grad(_grouped(names), argnums=tuple(positions)), *flat)
    found = dict(zip(positions, compiled(*flat), strict=True))
    tolerance = dict(rtol=1e-6, atol=1e-8) if dtype is np.float64 else dict(rtol=3e-3,
                                                                           atol=3e-4)
    position = 0
    for index, (name, group_values) in enumerate(zip(names, values, strict=True)):
        for fd in differences(name, group_values):
            if fd is not None:
                got = found[position]
                assert got.dtype == dtype, name
                np.testing.assert_allclose(got, weight(index) * fd,
                                           **tolerance,  # type: ignore[arg-type]
                                           err_msg=f"{name} ({dtype.__name__})")
            position += 1


# ---------------------------------------------------------- special values, as JAX


INF, NAN = np.inf, np.nan
# (row, point, the gradient jax.grad gives there): kinks, ties, zeros and infinities.
# test_special_value_table_is_jax's checks the third column against JAX itself.
SPECIAL = [
    ('absolute', (0.0,), (1.0,)),
    ('absolute', (-0.0,), (1.0,)),
    ('sign', (0.0,), (0.0,)),
    ('sqrt', (0.0,), (INF,)),
    ('cbrt', (0.0,), (INF,)),
    ('log', (0.0,), (INF,)),
    ('reciprocal', (0.0,), (-INF,)),
    ('arcsin', (1.0,), (INF,)),
    ('arctanh', (1.0,), (INF,)),
    ('power', (0.0, 2.0), (0.0, 0.0)),
    ('power', (0.0, 0.5), (INF, 0.0)),
    ('power', (0.0, 0.0), (NAN, 0.0)),
    ('power', (-2.0, 2.0), (-4.0, NAN)),
    ('maximum', (1.0, 1.0), (0.5, 0.5)),
    ('maximum', (NAN, 1.0), (0.0, 0.0)),
    ('minimum', (2.0, 2.0), (0.5, 0.5)),
    ('fmax', (1.0, 1.0), (0.0, 1.0)),
    ('fmax', (NAN, 1.0), (0.0, 1.0)),
    ('fmax', (1.0, NAN), (1.0, 0.0)),
    ('fmin', (1.0, 1.0), (0.0, 1.0)),
    ('fmin', (NAN, 1.0), (0.0, 1.0)),
    ('hypot', (0.0, 0.0), (0.5, 0.5)),
    ('hypot', (INF, 1.0), (NAN, NAN)),
    ('heaviside', (0.0, 0.25), (0.0, 1.0)),  # h0 is the value at 0
    ('heaviside', (-1.0, 0.25), (0.0, 0.0)),
    ('logaddexp', (INF, INF), (1.0, 1.0)),
    ('logaddexp', (-INF, -INF), (NAN, NAN)),
    ('logaddexp', (INF, 1.0), (1.0, 2.7182818284590455)),
    ('logaddexp2', (-INF, -INF), (NAN, NAN)),
    ('logaddexp', (1.0, INF), (2.7182818284590455, 1.0)),
    ('logaddexp', (-INF, 1.0), (0.0, 1.0)),
    ('logaddexp', (INF, -INF), (1.0, 0.0)),
    ('logaddexp', (1.0, 1.0), (0.49999999999999994, 0.49999999999999994)),
    ('logaddexp', (NAN, 1.0), (NAN, NAN)),
    ('logaddexp', (INF, NAN), (NAN, NAN)),
    ('logaddexp', (1e308, -1e308), (1.0, 0.0)),
    ('logaddexp2', (INF, INF), (1.0, 1.0)),
    ('logaddexp2', (INF, 1.0), (1.0, 2.0)),
    ('logaddexp2', (1.0, NAN), (NAN, NAN)),
    ('copysign', (2.0, -1.0), (-1.0, 0.0)),
    ('copysign', (0.0, 1.0), (1.0, 0.0)),
    ('arctan2', (0.0, 0.0), (NAN, NAN)),
    ('true_divide', (1.0, 0.0), (INF, -INF)),
    ('true_divide', (0.0, 0.0), (INF, NAN)),
    ('clip', (0.0, 0.0, 1.0), (0.5, 0.5, 0.0)),
    ('clip', (1.0, 0.0, 1.0), (0.5, 0.0, 0.5)),
    ('clip', (0.5, 0.0, 1.0), (1.0, 0.0, 0.0)),
    ('exp', (INF,), (INF,)),
    ('tanh', (INF,), (0.0,)),
    ('remainder', (5.5, 2.0), (1.0, -2.0)),
    ('fmod', (-5.5, 2.0), (1.0, 2.0)),
]


def _special_cases(xp: Any, clip: Callable[..., Any],
                   functions: dict[str, Callable[..., Any]]) -> Callable[..., Any]:
    """The sum of every case of ``SPECIAL``, each reading arguments of its own."""
    def cases(*values: Any) -> Any:
        total = 0.0
        position = 0
        for name, point, _ in SPECIAL:
            operands = values[position:position + len(point)]
            position += len(point)
            total = total + (clip(*operands) if name == "clip" else functions[name](*operands))
        return xp.sum(total)
    return cases


def test_special_values_as_jax():
    """One compiled function holds every case (1-element arrays, so it is one loop)."""
    args = [np.array([value], np.float64) for _, point, _ in SPECIAL for value in point]
    ours = _special_cases(np, np.clip, {name: OPS[name].reference for name, _, _ in SPECIAL})
    with np.errstate(all="ignore"):
        got = iter(numfuse.grad(ours, argnums=tuple(range(len(args))))(*args))
    for name, point, expected in SPECIAL:
        for index, want in enumerate(expected):
            value = next(got)
            if np.isfinite(want) and want * 4 != round(want * 4):  # e, not 1 or 0.5: an ulp
                np.testing.assert_array_max_ulp(value, np.array([want]), maxulp=1)
                continue
            np.testing.assert_array_equal(value, np.array([want]),
                                          err_msg=f"{name}{point} operand {index}")


def test_hypot_derivative_at_zero_raises_no_flag():
    """At hypot(0, 0) the share of each operand is taken without computing 0 / 0."""
    with np.errstate(all="raise"):
        dx, dy = numfuse.grad(lambda x, y: np.sum(np.hypot(x, y)), argnums=(0, 1))(
            np.array([0.0, 3.0, -0.0]), np.array([0.0, 4.0, 0.0]))
    np.testing.assert_array_equal(dx, [0.5, 0.6, 0.5])
    np.testing.assert_array_equal(dy, [0.5, 0.8, 0.5])


@pytest.mark.slow
def test_special_value_table_is_jaxs():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    for name, point, expected in SPECIAL:
        function = jnp.clip if name == "clip" else getattr(
            jnp, {"absolute": "abs", "true_divide": "divide"}.get(name, name))
        found = [float(jax.grad(function, argnums=index)(*map(np.float64, point)))
                 for index in range(len(point))]
        np.testing.assert_array_equal(found, expected, err_msg=f"{name}{point}")


# ------------------------------------------ logaddexp's derivative: one fused weight


def test_logaddexp_derivative_is_one_weight_with_one_exponential():
    """The backward pass of ``logaddexp`` computes the logistic weight by the internal
    rows (one exponential per element), not as exp(x - ans)."""
    def loss(z):
        return np.sum(np.logaddexp(0.0, z) + np.logaddexp2(z, 0.5 * z))

    z = np.linspace(-30.0, 30.0, 101)
    compiled = numfuse.compile(numfuse.grad(loss), z)
    source = "".join(kernel.source for kernel in compiled.kernels)
    assert "logaddexp_weight" in source and "logaddexp2_weight" in source
    assert "exp_f64(" not in source and "np.exp(" not in source
    weight, weight2 = 1.0 / (1.0 + np.exp(-z)), 1.0 / (1.0 + np.exp2(-0.5 * z))
    np.testing.assert_allclose(compiled(z), weight + weight2 + 0.5 * (1.0 - weight2),
                               rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logaddexp_gradient_at_infinities_raises_no_flag(dtype):
    """(inf, inf), (inf, x) and (x, -inf): JAX's values, computed without forming
    inf - inf (no "invalid value" under np.errstate(all="raise"))."""
    x = np.array([INF, INF, 2.0, -INF, 3.0, 0.0], dtype)
    y = np.array([INF, 2.0, -INF, 1.0, 3.0, 0.0], dtype)
    for function in (np.logaddexp, np.logaddexp2):
        grad = numfuse.grad(lambda a, b, f=function: np.sum(f(a, b)), argnums=(0, 1))
        with np.errstate(all="raise", under="ignore"):  # numfuse does not track underflow
            dx, dy = grad(x, y)
        base = 2.0 if function is np.logaddexp2 else np.e
        np.testing.assert_array_equal(dx, np.array([1, 1, 1, 0, 0.5, 0.5], dtype))
        np.testing.assert_allclose(dy, np.array([1, base ** 2, 0, 1, 0.5, 0.5], dtype),
                                   rtol=1e-6)
        assert dx.dtype == dtype and dy.dtype == dtype


def test_internal_rows_apply_to_arrays_and_traced_values():
    """An internal row is numpy's formula on arrays and one node when traced."""
    x, y = np.array([0.0, 2.0, -40.0]), np.array([0.0, -1.0, 3.0])
    row = OPS["logaddexp_dx"]
    np.testing.assert_allclose(row.reference(x, y), 1.0 / (1.0 + np.exp(y - x)), rtol=1e-15)
    compiled = numfuse.compile(lambda a, b: row.reference(a, b) + OPS["logaddexp_dy"]
                               .reference(a, b), x, y)
    assert [node.op for node in compiled.graph.nodes if node.op.startswith("logaddexp")] == \
        ["logaddexp_dx", "logaddexp_dy"]
    np.testing.assert_allclose(compiled(x, y), np.ones(3), rtol=1e-15)
