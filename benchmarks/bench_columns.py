"""Standardising columns, ``(x - x.mean(axis=0)) / x.std(axis=0)``: numfuse against its peers.

Shapes (float64): 1000 x 1000 and 100 x 10000 (``--shapes`` for others, ``--dtype float32``).
numfuse runs the line as one kernel of three passes over the rows of each block of columns
(the means, the variances, the standardised values), accumulating the column statistics in
numpy's order, so its result is numpy's bit for bit.

Implementations, all in this one process: numpy; ``numfuse.jit`` with its default threads
and with ``threads=1``; numexpr (the column sums as ``sum(..., axis=0)`` reductions, then
the standardised values, three ``evaluate`` calls); ``numba.njit`` and
``njit(parallel=True)`` of the numpy code; ``jax.jit`` of the same line in ``jax.numpy``
(64-bit); a hand-written ``@njit`` loop (two passes accumulating per column, row by row,
then the output) and the same loop with its rows split over threads by column blocks
(``prange``).  numexpr, njit(parallel), the prange loop and numfuse's default use both
cores.

Every implementation is checked against numpy (``suite.check``: same dtype and shape,
``assert_allclose`` rtol 1e-10; 1e-4 for float32) before it is timed; numfuse is also
checked bit for bit.  Timing is ``suite.run_one``: interleaved round-robin repetitions,
medians.  After the timing, the peak memory of one call (tracemalloc) is taken for numpy
and numfuse: "temporaries" is the peak minus the size of the results.

    python benchmarks/bench_columns.py [--shapes 1000x1000,100x10000] [--quick]
    python benchmarks/bench_columns.py --retain-memory   # fresh arrays without page faults

Writes benchmarks/results/columns.md (columns-retain-memory.md with --retain-memory).
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

# numba's OpenMP workers spin after each parallel loop unless told otherwise (see
# bench_reductions.py); wait passively unless the caller chose otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numba
import numpy as np
from numba import prange

sys.path.insert(0, str(Path(__file__).parent))

from bench_memory import peak_bytes
from suite import (
    Cell,
    Implementation,
    environment,
    fixed,
    jax,
    numexpr,
    ratio,
    run_one,
    time_cells,
)

import numfuse

if jax is not None:
    import jax.numpy as jnp

SHAPES = ((1000, 1000), (100, 10000))
RESULTS = Path(__file__).parent / "results"
ORDER = ("numpy", "numfuse", "numfuse_1t", "numexpr", "numba", "numba_par", "jax", "loop",
         "prange")
LABELS = {"numpy": "numpy", "numfuse": "numfuse", "numfuse_1t": "numfuse threads=1",
          "numexpr": "numexpr", "numba": "njit", "numba_par": "njit(parallel)",
          "jax": "jax.jit", "loop": "hand loop", "prange": "hand prange"}
# At 1000 x 1000 float64: at least this speed-up over numpy, in at most this many kernels.
TARGET_SHAPE, TARGET_OVER_NUMPY, TARGET_KERNELS = (1000, 1000), 3.0, 2


def standardise(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def standardise_jax(x):
    return (x - jnp.mean(x, axis=0)) / jnp.std(x, axis=0)


def standardise_numexpr(ne, x):
    rows = x.shape[0]
    v = {"x": x}
    v["mean"] = ne.evaluate("sum(x, axis=0)", local_dict=v) / rows
    v["std"] = np.sqrt(ne.evaluate("sum((x - mean) ** 2, axis=0)", local_dict=v) / rows)
    return ne.evaluate("(x - mean) / std", local_dict=v)


def _standardise_columns(x, out, first, last):
    """Columns ``first`` to ``last`` of ``x``: the means and variances accumulated row by
    row (each row adds into one accumulator per column), then the output."""
    rows = x.shape[0]
    width = last - first
    mean = np.zeros(width, x.dtype)
    for i in range(rows):
        for j in range(width):
            mean[j] += x[i, first + j]
    for j in range(width):
        mean[j] /= rows
    var = np.zeros(width, x.dtype)
    for i in range(rows):
        for j in range(width):
            d = x[i, first + j] - mean[j]
            var[j] += d * d
    for j in range(width):
        var[j] = math.sqrt(var[j] / rows)
    for i in range(rows):
        for j in range(width):
            out[i, first + j] = (x[i, first + j] - mean[j]) / var[j]


_columns = numba.njit(error_model="numpy")(_standardise_columns)


@numba.njit(error_model="numpy")
def _loop(x, out):
    _columns(x, out, 0, x.shape[1])


@numba.njit(parallel=True, error_model="numpy")
def _prange(x, out, block):
    blocks = (x.shape[1] + block - 1) // block
    for b in prange(blocks):
        _columns(x, out, b * block, min(x.shape[1], (b + 1) * block))


def standardise_loop(x):
    out = np.empty_like(x)
    _loop(x, out)
    return out


def standardise_prange(x):
    out = np.empty_like(x)
    _prange(x, out, 256)
    return out


@dataclass(frozen=True)
class Case:
    """What ``suite.run_one`` needs of a workload: ``make_args`` and ``rtol``."""
    name: str
    make_args: Callable[[int, np.random.Generator], tuple]
    rtol: float


def case_of(shape: tuple[int, int], dtype: np.dtype) -> Case:
    def make_args(size, rng):
        return ((rng.standard_normal(shape) * 3.0 + 1.0).astype(dtype),)

    return Case(f"{shape[0]}x{shape[1]}", make_args, 1e-4 if dtype == np.float32 else 1e-10)


def implementations() -> dict[str, Implementation]:
    found = {"numpy": Implementation("numpy", standardise),
             "numfuse": Implementation("numfuse", numfuse.jit(standardise)),
             "numfuse_1t": Implementation("numfuse_1t", numfuse.jit(standardise, threads=1))}
    if numexpr is not None:
        found["numexpr"] = Implementation("numexpr",
                                          lambda x: standardise_numexpr(numexpr, x))
    found["numba"] = Implementation("numba", numba.njit(standardise))
    found["numba_par"] = Implementation("numba_par", numba.njit(parallel=True)(standardise))
    if jax is not None:
        compiled = jax.jit(standardise_jax)
        found["jax"] = Implementation("jax", lambda x: jax.block_until_ready(compiled(x)),
                                      lambda args: tuple(jnp.asarray(a) for a in args))
    found["loop"] = Implementation("loop", standardise_loop)
    found["prange"] = Implementation("prange", standardise_prange)
    return found


@dataclass
class Measured:
    cells: dict[str, Cell]
    load: float
    temporaries: dict[str, int]
    results_bytes: int
    exact: bool
    kernels: int


def measure(case: Case, impls: dict[str, Implementation], options, rng) -> Measured:
    load = os.getloadavg()[0]
    cells = run_one(case, impls, 0, options, rng)
    (x,) = case.make_args(0, rng)
    exact = np.array_equal(impls["numfuse"].call(x), standardise(x))
    temporaries, kept = {}, 0
    for name in ("numpy", "numfuse"):
        peak, kept = peak_bytes(impls[name].call, x)
        temporaries[name] = peak - kept
    (compiled,) = impls["numfuse"].call.compiled.values()
    return Measured(cells, load, temporaries, kept, exact, len(compiled.kernels))


def table(results: dict[str, Measured]) -> list[str]:
    names = [n for n in ORDER if any(n in m.cells for m in results.values())]
    header = ["shape", "load", *(LABELS[n] for n in names), "numfuse kernels",
              "numfuse == numpy bit for bit", "temporaries MB numpy / numfuse (results MB)"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    notes: list[str] = []
    for shape, measured in results.items():
        cells = measured.cells
        row = [shape, f"{measured.load:.1f}", *time_cells(cells, names, LABELS, notes)]
        temps = measured.temporaries
        row += [str(measured.kernels), "yes" if measured.exact else "no",
                f"{temps['numpy'] / 1e6:.1f} / {temps['numfuse'] / 1e6:.1f} "
                f"({measured.results_bytes / 1e6:.1f})"]
        lines.append("| " + " | ".join(row) + " |")
    lines += [line for note in notes for line in ("", f"* {note[:300]}")]
    return lines


def target_lines(results: dict[str, Measured], dtype: np.dtype) -> list[str]:
    key = f"{TARGET_SHAPE[0]}x{TARGET_SHAPE[1]}"
    measured = results.get(key)
    if measured is None or dtype != np.float64:
        return [f"Target ({key} float64): not measured in this run."]
    over_numpy = ratio(measured.cells, "numpy", "numfuse")
    met = over_numpy >= TARGET_OVER_NUMPY and measured.kernels <= TARGET_KERNELS
    return [f"**Target** ({key} float64: at least {TARGET_OVER_NUMPY:g}x numpy in at most "
            f"{TARGET_KERNELS} kernels, no temporaries of the input's size): "
            f"**{'met' if met else 'not met'}** — {fixed(over_numpy, 'x')} numpy "
            f"({fixed(ratio(measured.cells, 'numpy', 'numfuse_1t'), 'x')} with threads=1), "
            f"{measured.kernels} kernel(s), temporaries "
            f"{measured.temporaries['numfuse'] / 1e6:.1f} MB (load {measured.load:.1f})."]


def report(results: dict[str, Measured], plan: str, options, dtype: np.dtype,
           loads: tuple[float, float], seconds: float) -> str:
    lines = [
        "# Standardising columns: numfuse against its peers",
        "",
        *environment(),
        f"* load average (1 min) {loads[0]:.2f} at start, {loads[1]:.2f} at end, on "
        f"{os.cpu_count()} logical cores (shared); run took {seconds:.0f} s",
        "* freed memory retained for reuse (numfuse.retain_freed_memory(), all peers): "
        f"{'yes' if options.retain_memory else 'no'}",
        "",
        *target_lines(results, dtype),
        "",
        f"`(x - x.mean(axis=0)) / x.std(axis=0)`, x {np.dtype(dtype).name}. Median time per "
        "call over interleaved repetitions (each repetition times every implementation "
        "once, round-robin); in brackets the speed-up over numpy (numpy's median ÷ the "
        "implementation's; above 1 = faster). numfuse (default), numexpr, njit(parallel), "
        "jax.jit and the prange loop may use both cores; numpy, numfuse threads=1, njit and "
        "the hand loop one. Before timing, every result is checked against numpy's; "
        "\"error\" and \"mismatch\" cells were not timed (reasons below the table). "
        "Temporaries: tracemalloc peak of one call minus the bytes of its result (numpy's "
        "allocations only).",
        f"Repetitions: up to {options.repeats}, at least {options.min_repeats}, capped at "
        f"about {options.budget:g} s per shape; calls shorter than "
        f"{options.min_sample * 1e3:g} ms are batched.",
        "",
        *table(results),
        "",
    ]
    if plan:
        lines += ["<details><summary>numfuse's compiled graph</summary>", "", "```", plan,
                  "```", "</details>", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", help="comma-separated shapes (default 1000x1000,100x10000)")
    parser.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    parser.add_argument("--quick", action="store_true", help="5 repetitions, about 1 s each")
    parser.add_argument("--repeats", type=int, default=21, help="most repetitions (default 21)")
    parser.add_argument("--min-repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=6.0,
                        help="about this many seconds of timing per shape")
    parser.add_argument("--min-sample", type=float, default=2e-3,
                        help="batch calls so one sample lasts at least this (seconds)")
    parser.add_argument("--output", type=Path, default=RESULTS,
                        help="directory for columns.md")
    parser.add_argument("--retain-memory", action="store_true",
                        help="call numfuse.retain_freed_memory() first (glibc keeps freed "
                             "blocks, so no implementation page-faults in fresh arrays); "
                             "writes columns-retain-memory.md")
    options = parser.parse_args()
    if options.retain_memory:
        numfuse.retain_freed_memory()
    shapes = [tuple(int(n) for n in text.split("x")) for text in options.shapes.split(",")] \
        if options.shapes else list(SHAPES)
    if options.quick:
        options.repeats, options.budget = 5, min(options.budget, 1.0)
    dtype = np.dtype(options.dtype)

    loads_start = os.getloadavg()[0]
    began = time.perf_counter()
    rng = np.random.default_rng(0)
    impls = implementations()
    results: dict[str, Measured] = {}
    for shape in shapes:
        case = case_of(shape, dtype)  # type: ignore[arg-type]
        started = time.perf_counter()
        measured = results[case.name] = measure(case, impls, options, rng)
        shown = ", ".join(f"{LABELS[n]} " + (c.status[:40] if c.status else
                                             f"{ratio(measured.cells, 'numpy', n):.2f}x")
                          for n, c in measured.cells.items() if n != "numpy")
        print(f"{case.name} (load {measured.load:.1f}, {time.perf_counter() - started:.1f} s, "
              f"{len(measured.cells['numpy'].samples)} reps, {measured.kernels} kernel(s)): "
              f"{shown}", flush=True)
    plan = "\n".join(str(compiled.graph)
                     for compiled in impls["numfuse"].call.compiled.values())
    text = report(results, plan, options, dtype, (loads_start, os.getloadavg()[0]),
                  time.perf_counter() - began)
    print()
    print(text)
    options.output.mkdir(parents=True, exist_ok=True)
    name = "columns-retain-memory.md" if options.retain_memory else "columns.md"
    (options.output / name).write_text(text + "\n")
    print(f"written to {options.output / name}")


if __name__ == "__main__":
    main()
