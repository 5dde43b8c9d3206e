"""The workloads of ``suite.py``: each one written once against an array namespace.

A workload's ``build(xp)`` returns its function written with ``xp`` standing for the array
module: ``build(np)`` is the numpy reference (and what numfuse and numba's ``@njit``
compile), ``build(jax.numpy)`` is what ``jax.jit`` compiles.  ``numexpr`` gets the same
arithmetic as strings (one ``evaluate`` per array it produces), and ``loop`` is the same
computation written as an explicit ``@njit`` loop over the elements into preallocated
outputs -- the practical limit of a single-threaded compiled loop -- and ``parallel_loop``
the same source compiled with ``@njit(parallel=True)``, its outer loop a ``numba.prange``
(which the serial compilation runs as ``range``).

The hand-written loops use ``error_model="numpy"`` (division by zero gives inf/nan, as in
numpy, instead of raising ZeroDivisionError); that is what lets LLVM vectorise them, and it
is the semantics every other implementation has.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numba
import numpy as np

Args = tuple  # the positional arguments of a workload function


def hand(source: Callable, outputs: Callable | None = None) -> tuple[Callable, Callable]:
    """A hand-written loop compiled twice, serial (``numba.prange`` runs as ``range``) and
    ``parallel=True`` (its prange split over numba's threads); each called through
    ``outputs(kernel, *args)`` (which allocates the outputs it writes) when given."""
    kernels = (numba.njit(error_model="numpy")(source),
               numba.njit(parallel=True, error_model="numpy")(source))
    if outputs is None:
        return kernels
    return tuple(functools.partial(outputs, kernel) for kernel in kernels)  # type: ignore


@dataclass(frozen=True)
class Workload:
    name: str
    title: str  # the code, for the report
    dtype: str
    build: Callable  # build(xp) -> function of the arguments
    make_args: Callable[[int, np.random.Generator], Args]
    loop: Callable[..., object] | None  # hand-written loop: loop(*args) -> outputs
    parallel_loop: Callable[..., object] | None  # the same loop, prange on all threads
    numexpr: Callable[..., object] | None  # numexpr version: numexpr_fn(ne, *args)
    rtol: float
    note: str = ""
    # Element count actually used for a nominal size (the outer kernel rounds to n*m).
    elements: Callable[[int], int] = field(default=lambda size: size)


# --------------------------------------------------------------------------- logp/grad

def logp_grad(xp):
    def logp_grad(x, mu):
        d = x - mu
        return -(d**2) / 2, -d
    return logp_grad


def _logp_grad_kernel(x, mu, logp, grad):
    for i in numba.prange(x.shape[0]):
        d = x[i] - mu
        logp[i] = -(d * d) / 2
        grad[i] = -d


def logp_grad_loop(kernel, x, mu):
    logp = np.empty_like(x)
    grad = np.empty_like(x)
    kernel(x, mu, logp, grad)
    return logp, grad


def logp_grad_numexpr(ne, x, mu):
    return (ne.evaluate("-((x - mu) ** 2) / 2", local_dict={"x": x, "mu": mu}),
            ne.evaluate("-(x - mu)", local_dict={"x": x, "mu": mu}))


def logp_grad_args(size, rng):
    return rng.standard_normal(size), 0.25


# --------------------------------------------------------------------------- Black-Scholes
# The normal CDF is Abramowitz & Stegun 26.2.17 (absolute error < 7.5e-8), which needs only
# abs/exp/where: every implementation computes the same formula, so results agree to ulps.

A1, A2, A3, A4, A5 = 0.319381530, -0.356563782, 1.781477937, -1.821255978, 1.330274429
INV_SQRT_2PI = 0.3989422804014327
R, SIGMA = 0.02, 0.30


def black_scholes(xp):
    def black_scholes(S, K, T, r, sigma):
        def cnd(d):
            k = 1.0 / (1.0 + 0.2316419 * xp.abs(d))
            poly = k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5))))
            w = 1.0 - INV_SQRT_2PI * xp.exp(-0.5 * d * d) * poly
            return xp.where(d < 0, 1.0 - w, w)

        sig_sqrt_t = sigma * xp.sqrt(T)
        d1 = (xp.log(S / K) + (r + 0.5 * sigma * sigma) * T) / sig_sqrt_t
        d2 = d1 - sig_sqrt_t
        disc = K * xp.exp(-r * T)
        nd1 = cnd(d1)
        nd2 = cnd(d2)
        call = S * nd1 - disc * nd2
        put = disc * (1.0 - nd2) - S * (1.0 - nd1)
        return call, put
    return black_scholes


@numba.njit(error_model="numpy", inline="always")
def _cnd(d):
    k = 1.0 / (1.0 + 0.2316419 * abs(d))
    poly = k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5))))
    w = 1.0 - INV_SQRT_2PI * math.exp(-0.5 * d * d) * poly
    return 1.0 - w if d < 0 else w


def _black_scholes_kernel(S, K, T, r, sigma, call, put):
    for i in numba.prange(S.shape[0]):
        sig_sqrt_t = sigma * math.sqrt(T[i])
        d1 = (math.log(S[i] / K[i]) + (r + 0.5 * sigma * sigma) * T[i]) / sig_sqrt_t
        d2 = d1 - sig_sqrt_t
        disc = K[i] * math.exp(-r * T[i])
        nd1 = _cnd(d1)
        nd2 = _cnd(d2)
        call[i] = S[i] * nd1 - disc * nd2
        put[i] = disc * (1.0 - nd2) - S[i] * (1.0 - nd1)


def black_scholes_loop(kernel, S, K, T, r, sigma):
    call = np.empty_like(S)
    put = np.empty_like(S)
    kernel(S, K, T, r, sigma, call, put)
    return call, put


def _cnd_expr(d):
    k = f"(1.0 / (1.0 + 0.2316419 * abs({d})))"
    poly = f"{k} * ({A1} + {k} * ({A2} + {k} * ({A3} + {k} * ({A4} + {k} * {A5}))))"
    w = f"(1.0 - {INV_SQRT_2PI} * exp(-0.5 * {d} * {d}) * {poly})"
    return f"where({d} < 0, 1.0 - {w}, {w})"


def black_scholes_numexpr(ne, S, K, T, r, sigma):
    # numexpr evaluates one expression per call: the intermediates a user would keep
    # (d1, d2, the discount factor and both CDFs) are materialised.
    v = {"S": S, "K": K, "T": T, "r": r, "sigma": sigma}
    v["sig_sqrt_t"] = ne.evaluate("sigma * sqrt(T)", local_dict=v)
    v["d1"] = ne.evaluate("(log(S / K) + (r + 0.5 * sigma * sigma) * T) / sig_sqrt_t",
                          local_dict=v)
    v["d2"] = ne.evaluate("d1 - sig_sqrt_t", local_dict=v)
    v["disc"] = ne.evaluate("K * exp(-r * T)", local_dict=v)
    v["nd1"] = ne.evaluate(_cnd_expr("d1"), local_dict=v)
    v["nd2"] = ne.evaluate(_cnd_expr("d2"), local_dict=v)
    return (ne.evaluate("S * nd1 - disc * nd2", local_dict=v),
            ne.evaluate("disc * (1.0 - nd2) - S * (1.0 - nd1)", local_dict=v))


def black_scholes_args(size, rng):
    return (rng.uniform(5.0, 30.0, size), rng.uniform(1.0, 100.0, size),
            rng.uniform(0.25, 10.0, size), R, SIGMA)


# --------------------------------------------------------------------------- softplus+sigmoid

def softplus_sigmoid(xp):
    def softplus_sigmoid(x):
        e = xp.exp(-xp.abs(x))
        softplus = xp.log1p(e) + xp.maximum(x, 0.0)
        sigmoid = xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        return softplus, sigmoid
    return softplus_sigmoid


def _softplus_sigmoid_kernel(x, softplus, sigmoid):
    for i in numba.prange(x.shape[0]):
        xi = x[i]
        e = math.exp(-abs(xi))
        softplus[i] = math.log1p(e) + max(xi, 0.0)
        sigmoid[i] = 1.0 / (1.0 + e) if xi >= 0 else e / (1.0 + e)


def softplus_sigmoid_loop(kernel, x):
    softplus = np.empty_like(x)
    sigmoid = np.empty_like(x)
    kernel(x, softplus, sigmoid)
    return softplus, sigmoid


def softplus_sigmoid_numexpr(ne, x):
    v = {"x": x, "e": ne.evaluate("exp(-abs(x))", local_dict={"x": x})}
    return (ne.evaluate("log1p(e) + where(x > 0, x, 0.0)", local_dict=v),
            ne.evaluate("where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))", local_dict=v))


def softplus_sigmoid_args(size, rng):
    return (4.0 * rng.standard_normal(size),)


# --------------------------------------------------------------------------- outer broadcast

def outer_shape(size: int) -> tuple[int, int]:
    """(rows, columns) for about ``size`` elements: rows = 10**floor(log10(size)/2)."""
    rows = 10 ** (round(math.log10(size)) // 2)
    return rows, max(1, size // rows)


def outer_rbf(xp):
    def outer_rbf(a, b):
        d = a - b
        k = xp.exp(-0.5 * d * d)
        return k, -d * k
    return outer_rbf


def _outer_rbf_kernel(a, b, k, dk):
    for i in numba.prange(k.shape[0]):
        ai = a[i, 0]
        for j in range(k.shape[1]):
            d = ai - b[0, j]
            kij = math.exp(-0.5 * d * d)
            k[i, j] = kij
            dk[i, j] = -d * kij


def outer_rbf_loop(kernel, a, b):
    shape = (a.shape[0], b.shape[1])
    k = np.empty(shape)
    dk = np.empty(shape)
    kernel(a, b, k, dk)
    return k, dk


def outer_rbf_numexpr(ne, a, b):
    k = ne.evaluate("exp(-0.5 * (a - b) ** 2)", local_dict={"a": a, "b": b})
    return k, ne.evaluate("-(a - b) * k", local_dict={"a": a, "b": b, "k": k})


def outer_rbf_args(size, rng):
    rows, columns = outer_shape(size)
    return rng.standard_normal((rows, 1)), rng.standard_normal((1, columns))


# --------------------------------------------------------------------------- GELU float32
# float32 constants: numba's @njit would promote float32 * Python float to float64.

G_HALF, G_ONE = np.float32(0.5), np.float32(1.0)
G_C0, G_C1 = np.float32(0.7978845608028654), np.float32(0.044715)  # sqrt(2/pi), 0.044715


def gelu(xp):
    def gelu(x):
        return G_HALF * x * (G_ONE + xp.tanh(G_C0 * (x + G_C1 * (x * x * x))))
    return gelu


def _gelu_kernel(x, out):
    for i in numba.prange(x.shape[0]):
        xi = x[i]
        out[i] = G_HALF * xi * (G_ONE + math.tanh(G_C0 * (xi + G_C1 * (xi * xi * xi))))


def gelu_loop(kernel, x):
    out = np.empty_like(x)
    kernel(x, out)
    return out


def gelu_numexpr(ne, x):
    # numexpr makes float literals float64; float32 scalars keep the expression in float32.
    return ne.evaluate("h * x * (one + tanh(c0 * (x + c1 * (x * x * x))))",
                       local_dict={"x": x, "h": G_HALF, "one": G_ONE, "c0": G_C0, "c1": G_C1})


def gelu_args(size, rng):
    return (rng.standard_normal(size, dtype=np.float32) * np.float32(3.0),)


# --------------------------------------------------------------------------- sum of squares

def sum_squares(xp):
    def sum_squares(x, mu):
        return xp.sum((x - mu) ** 2)
    return sum_squares


def sum_squares_kernel(x, mu):
    total = 0.0
    for i in numba.prange(x.shape[0]):
        d = x[i] - mu
        total += d * d
    return total


def sum_squares_numexpr(ne, x, mu):
    return ne.evaluate("sum((x - mu) ** 2)", local_dict={"x": x, "mu": mu})


# --------------------------------------------------------------------------- the list

WORKLOADS: tuple[Workload, ...] = (
    Workload("logp_grad", "`d = x - mu; return -(d**2)/2, -d`", "float64",
             logp_grad, logp_grad_args, *hand(_logp_grad_kernel, logp_grad_loop),
             logp_grad_numexpr, rtol=1e-12),
    Workload("black_scholes", "Black-Scholes call and put (log, sqrt, exp, where; "
             "A&S normal CDF)", "float64",
             black_scholes, black_scholes_args,
             *hand(_black_scholes_kernel, black_scholes_loop), black_scholes_numexpr,
             rtol=1e-12),
    Workload("softplus_sigmoid", "`e = exp(-|x|)`; softplus `log1p(e) + maximum(x, 0)` and "
             "sigmoid `where(x >= 0, 1/(1+e), e/(1+e))`", "float64",
             softplus_sigmoid, softplus_sigmoid_args,
             *hand(_softplus_sigmoid_kernel, softplus_sigmoid_loop),
             softplus_sigmoid_numexpr, rtol=1e-12),
    Workload("outer_rbf", "`d = a - b` with a `(n,1)` and b `(1,m)`; `k = exp(-d*d/2)`; "
             "returns `k, -d*k`", "float64",
             outer_rbf, outer_rbf_args, *hand(_outer_rbf_kernel, outer_rbf_loop),
             outer_rbf_numexpr, rtol=1e-12,
             elements=lambda size: math.prod(outer_shape(size))),
    Workload("gelu_f32", "GELU, tanh approximation, float32", "float32",
             gelu, gelu_args, *hand(_gelu_kernel, gelu_loop), gelu_numexpr, rtol=1e-6),
    Workload("sum_squares", "`np.sum((x - mu) ** 2)` (a reduction)", "float64",
             sum_squares, logp_grad_args, *hand(sum_squares_kernel), sum_squares_numexpr,
             rtol=1e-10,
             note="rtol 1e-10: summation order differs between implementations "
                  "(numpy is pairwise, loops are sequential)."),
)
