"""Gradients: ``numfuse.value_and_grad`` against ``jax.jit(jax.value_and_grad(...))``.

Workloads (float64):

* ``normal``: ``np.sum(-0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma))``, value and the
  gradients in the scalars ``mu`` and ``sigma``, x of n elements;
* ``normal_arrays``: the same with ``mu`` and ``sigma`` arrays of n elements (the
  gradients are arrays);
* ``logistic``: ``mean(logaddexp(0, X @ w) - y * (X @ w))``, value and gradient in ``w``,
  X of shape (n / 16, 16).

Implementations, all in this one process: ``numpy`` (the value and the gradients written
out by hand: the reference every other result is checked against, rtol 1e-9);
``numfuse`` (``numfuse.value_and_grad``); ``numfuse forward`` (``numfuse.jit`` of the
function alone: what the gradients cost on top of the value); ``jax`` (``jax.jit`` of
``jax.value_and_grad``, 64-bit, inputs converted once outside the timing, results
waited for).  Timing is ``suite.measure``: interleaved round-robin repetitions with a
rotating start, medians; sizes are interleaved too (every workload at one size, then the
next size).

    python benchmarks/bench_grad.py [--sizes 1e5,1e6,1e7] [--repeats 15] [--quick]

Writes benchmarks/results/grad.md.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
# numpy's OpenBLAS, threaded, took 12 ms for the (62500, 16) @ (16,) product on this shared
# 2-core machine (0.3 ms on one thread): matrix products run on one thread unless the
# caller chose otherwise (numpy and numfuse both call numpy's matmul; read at numpy import).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from suite import (
    Cell,
    Implementation,
    environment,
    format_time,
    measure,
    seconds_per_call,
    size_label,
)

import numfuse

try:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
except ImportError:
    jax = None

SIZES = (10**5, 10**6, 10**7)
QUICK_SIZES = (10**5, 10**6)
FEATURES = 16
RESULTS = Path(__file__).parent / "results"
ORDER = ("numpy", "numfuse", "numfuse_forward", "jax")
LABELS = {"numpy": "numpy (by hand)", "numfuse": "numfuse value_and_grad",
          "numfuse_forward": "numfuse forward only", "jax": "jax.jit(value_and_grad)"}


# --------------------------------------------------------------------------- workloads

def normal_logpdf(xp: object) -> Callable:
    def logpdf(x, mu, sigma):
        return xp.sum(-0.5 * ((x - mu) / sigma) ** 2 - xp.log(sigma))
    return logpdf


def normal_by_hand(x, mu, sigma):
    z = (x - mu) / sigma
    value = np.sum(-0.5 * z * z - np.log(sigma))
    d_mu, d_sigma = z / sigma, (z * z - 1.0) / sigma
    if np.ndim(mu) == 0:
        return value, (np.sum(d_mu), np.sum(d_sigma))
    return value, (d_mu, d_sigma)


def logistic_loss(xp: object) -> Callable:
    def loss(w, X, y):
        z = X @ w
        return xp.mean(xp.logaddexp(0.0, z) - y * z)
    return loss


def logistic_by_hand(w, X, y):
    z = X @ w
    value = np.mean(np.logaddexp(0.0, z) - y * z)
    return value, (((0.5 * (1.0 + np.tanh(0.5 * z))) - y) / len(y)) @ X


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    build: Callable  # build(xp) -> the function
    by_hand: Callable  # numpy value and gradients
    argnums: tuple[int, ...]
    make_args: Callable[[int, np.random.Generator], tuple]


CASES = (
    Case("normal", "`np.sum(-0.5 * ((x - mu) / sigma) ** 2 - np.log(sigma))`, d/d(mu, sigma),"
         " scalars mu, sigma, x of n elements", normal_logpdf, normal_by_hand, (1, 2),
         lambda n, rng: (rng.standard_normal(n), 0.25, 1.5)),
    Case("normal_arrays", "the same with mu and sigma arrays of n elements",
         normal_logpdf, normal_by_hand, (1, 2),
         lambda n, rng: (rng.standard_normal(n), rng.standard_normal(n),
                         rng.uniform(0.5, 2.0, n))),
    Case("logistic", f"`mean(logaddexp(0, X @ w) - y * (X @ w))`, d/dw, X of shape "
         f"(n/{FEATURES}, {FEATURES})", logistic_loss, logistic_by_hand, (0,),
         lambda n, rng: (rng.standard_normal(FEATURES) * 0.3,
                         rng.standard_normal((max(1, n // FEATURES), FEATURES)),
                         (rng.random(max(1, n // FEATURES)) < 0.5).astype(np.float64))),
)


def implementations(case: Case) -> dict[str, Implementation]:
    argnums = case.argnums if len(case.argnums) > 1 else case.argnums[0]
    found = {
        "numpy": Implementation("numpy", case.by_hand),
        "numfuse": Implementation("numfuse", numfuse.value_and_grad(case.build(np), argnums)),
        "numfuse_forward": Implementation("numfuse_forward", numfuse.jit(case.build(np))),
    }
    if jax is not None:
        traced = jax.jit(jax.value_and_grad(case.build(jnp), argnums))

        def call(*args):
            return jax.block_until_ready(traced(*args))

        found["jax"] = Implementation("jax", call, lambda args: tuple(
            jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args))
    return found


# --------------------------------------------------------------------------- measure

def check(name: str, got, want) -> None:
    """The value (and, but for the forward pass alone, the gradients) agree with numpy's."""
    value, grads = (got, None) if name == "numfuse_forward" else got
    np.testing.assert_allclose(np.asarray(value), want[0], rtol=1e-9)
    if grads is None:
        return
    grads = grads if isinstance(grads, tuple) else (grads,)
    wanted = want[1] if isinstance(want[1], tuple) else (want[1],)
    for got_grad, want_grad in zip(grads, wanted, strict=True):
        scale = float(np.max(np.abs(want_grad)))
        np.testing.assert_allclose(np.asarray(got_grad), want_grad, rtol=1e-9,
                                   atol=1e-12 * scale)


def run_one(case: Case, impls: dict[str, Implementation], size: int, options,
            rng: np.random.Generator) -> dict[str, Cell]:
    args = case.make_args(size, rng)
    want = impls["numpy"].call(*args)
    converted, cells, batch = {}, {}, {}
    for name, impl in impls.items():
        cells[name] = Cell()
        try:
            converted[name] = impl.convert(args)
            impl.call(*converted[name])  # compile
            check(name, impl.call(*converted[name]), want)
        except Exception as error:  # reported, not fatal
            cells[name].status = f"error: {type(error).__name__}: {error}"[:200]
            continue
        per_call = seconds_per_call(impl.call, converted[name], at_least=0.02)
        batch[name] = max(1, math.ceil(options.min_sample / per_call))
    measure(impls, converted, cells, batch, options.repeats)
    return cells


# --------------------------------------------------------------------------- report

def ratio(cells: dict[str, Cell], top: str, bottom: str) -> str:
    a, b = cells.get(top), cells.get(bottom)
    if a is None or b is None or a.status or b.status:
        return "—"
    return f"{a.median / b.median:.2f}"


def table(case: Case, by_size: dict[int, dict[str, Cell]]) -> list[str]:
    names = [name for name in ORDER if any(name in cells for cells in by_size.values())]
    lines = [f"### {case.name}: {case.title}", "",
             "| n | " + " | ".join(LABELS[name] for name in names)
             + " | jax ÷ numfuse | numfuse ÷ its forward | numpy ÷ numfuse |",
             "|---:|" + "---:|" * (len(names) + 3)]
    for size, cells in by_size.items():
        row = [cells[name].status.split(":")[0] if cells[name].status
               else format_time(cells[name].median) for name in names]
        lines.append(f"| {size_label(size)} | " + " | ".join(row) + " | "
                     + " | ".join([ratio(cells, "jax", "numfuse"),
                                   ratio(cells, "numfuse", "numfuse_forward"),
                                   ratio(cells, "numpy", "numfuse")]) + " |")
    errors = {f"{name}: {cells[name].status}" for cells in by_size.values()
              for name in cells if cells[name].status}
    return lines + [""] + [f"* {error}" for error in sorted(errors)] + ([""] if errors else [])


def report(results: dict[str, dict[int, dict[str, Cell]]], options, seconds: float) -> str:
    lines = ["# Gradients: numfuse.value_and_grad against jax.jit(jax.value_and_grad)", "",
             f"Median seconds per call of {options.repeats} interleaved repetitions "
             f"(`python benchmarks/bench_grad.py`, {seconds:.0f} s). Ratios above 1 mean "
             "numfuse is faster, but for \"numfuse ÷ its forward\", the cost of the "
             "gradients on top of the value. numpy's OpenBLAS runs on "
             f"{os.environ.get('OPENBLAS_NUM_THREADS')} thread(s) (`OPENBLAS_NUM_THREADS`).",
             "", *environment(), ""]
    for case in CASES:
        if case.name in results:
            lines += table(case, results[case.name])
    for case in CASES:
        if case.name in results:
            compiled = numfuse.compile(numfuse.value_and_grad(case.build(np), case.argnums),
                                       *case.make_args(1000, np.random.default_rng(0)))
            lines += [f"numfuse's program for {case.name}: {len(compiled.kernels)} "
                      "kernel(s)", "", "```", str(compiled.graph), "```", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=None, help="comma-separated, e.g. 1e5,1e6")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--min-sample", type=float, default=0.02)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cases", default=",".join(case.name for case in CASES))
    options = parser.parse_args()
    sizes = QUICK_SIZES if options.quick else SIZES
    if options.sizes:
        sizes = tuple(int(float(size)) for size in options.sizes.split(","))
    if options.quick:
        options.repeats = min(options.repeats, 5)
    chosen = [case for case in CASES if case.name in options.cases.split(",")]
    impls = {case.name: implementations(case) for case in chosen}
    results: dict[str, dict[int, dict[str, Cell]]] = {case.name: {} for case in chosen}
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for size in sizes:
        for case in chosen:
            cells = run_one(case, impls[case.name], size, options, rng)
            results[case.name][size] = cells
            print(f"{case.name} {size_label(size)}: " + ", ".join(
                f"{name} {format_time(cell.median) if not cell.status else cell.status}"
                for name, cell in cells.items()), flush=True)
    text = report(results, options, time.perf_counter() - start)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "grad.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
