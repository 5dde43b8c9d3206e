"""Fused reductions: numfuse against its peers on four reduction workloads, 1e5 ... 1e7.

Workloads (float64): ``sum((x - mu) ** 2)``; ``softmax`` along the last axis; ``logsumexp``
along the last axis in the stable form (``m = max; m + log(sum(exp(x - m)))``); and a
normalise-then-scale chain ``(x - x.mean()) / x.std() * g + b`` with scalars ``g, b``.
The 2-d workloads use rows of 1000 elements, shape ``(n // 1000, 1000)``.

Implementations, all in this one process: numpy; ``numfuse.jit`` with its default threads
and with ``threads=1``; numexpr (``sum(...)`` inside one ``evaluate`` where it can, else
several ``evaluate`` calls with numpy reshapes between them); ``numba.njit(parallel=True)``
of the numpy code; a hand-written ``njit(parallel=True)`` ``prange`` loop (rows in
parallel for the 2-d workloads) and, where a float sum is the bottleneck, the same loop
with ``fastmath={"reassoc"}`` so LLVM may vectorise the sum as numfuse's kernels do.
``OMP_WAIT_POLICY`` is set to ``passive`` unless already set (see below).

Every implementation is checked against numpy (``suite.check``: same dtype and shape,
``assert_allclose`` rtol 1e-10) before it is timed; timing is ``suite.run_one``: interleaved
round-robin repetitions, medians.  Sizes are interleaved too: every workload at one size,
then the next size.  After the timing, the peak memory of one call (tracemalloc) is taken
for numpy and numfuse: "temporaries" is the peak minus the size of the results.

    python benchmarks/bench_reductions.py [--sizes 1e5,1e6,1e7] [--repeats 15] [--quick]

Writes benchmarks/results/reductions.md (tables) and benchmarks/results/reductions.png.
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

# numba's OpenMP threading layer (libgomp) keeps its workers spinning after every parallel
# loop by default.  On this shared 2-core machine that made each 1e5-element prange call take
# 8 ms instead of 0.06 ms and slowed whatever was timed after it; wait passively unless the
# caller chose otherwise (read when numba first starts its threads).
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
    numexpr,
    numfuse_plan,
    ratio,
    run_one,
    size_label,
    speedup,
    time_cells,
)

import numfuse

SIZES = (10**5, 10**6, 10**7)
QUICK_SIZES = (10**5, 10**6)
ROW = 1000  # row length of the 2-d workloads
RESULTS = Path(__file__).parent / "results"
ORDER = ("numpy", "numfuse", "numfuse_1t", "numexpr", "numba_par", "prange", "prange_fm")
LABELS = {"numpy": "numpy", "numfuse": "numfuse", "numfuse_1t": "numfuse threads=1",
          "numexpr": "numexpr", "numba_par": "njit(parallel)", "prange": "hand prange",
          "prange_fm": "prange fastmath"}
STYLES = {"numpy": ("black", ":"), "numfuse": ("tab:red", "-"),
          "numfuse_1t": ("tab:pink", "-"), "numexpr": ("tab:green", "--"),
          "numba_par": ("tab:purple", "--"), "prange": ("tab:gray", "-."),
          "prange_fm": ("tab:brown", "-.")}
# Sum of squares at 1e7: at least this speed-up over numpy, and numfuse's time at most
# this multiple of the hand prange loop's.
TARGET_SIZE, TARGET_OVER_NUMPY, TARGET_VS_PRANGE = 10**7, 5.0, 1.2


@dataclass(frozen=True)
class Case:
    """One workload: what ``suite.run_one`` needs (``make_args``, ``rtol``) plus its peers."""
    name: str
    title: str
    reference: Callable  # the numpy code (also what numfuse and njit(parallel) compile)
    make_args: Callable[[int, np.random.Generator], tuple]
    numexpr: Callable | None  # numexpr_fn(ne, *args)
    prange: Callable  # hand-written njit(parallel=True) loop
    prange_fastmath: Callable | None = None
    rtol: float = 1e-10  # summation orders differ between implementations


def rows(size: int) -> tuple[int, int]:
    return max(1, size // ROW), ROW


# --------------------------------------------------------------------------- sum of squares

def sum_squares(x, mu):
    return np.sum((x - mu) ** 2)


def _sum_squares_prange(x, mu):
    total = 0.0
    for i in prange(x.shape[0]):
        d = x[i] - mu
        total += d * d
    return total


sum_squares_prange = numba.njit(parallel=True, error_model="numpy")(_sum_squares_prange)
sum_squares_prange_fm = numba.njit(parallel=True, error_model="numpy",
                                   fastmath={"reassoc"})(_sum_squares_prange)


def sum_squares_numexpr(ne, x, mu):
    return ne.evaluate("sum((x - mu) ** 2)", local_dict={"x": x, "mu": mu})


def vector_args(size, rng):
    return rng.standard_normal(size), 0.25


# --------------------------------------------------------------------------- softmax

def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@numba.njit(parallel=True, error_model="numpy")
def _softmax_prange(x, out):
    for i in prange(x.shape[0]):
        m = x[i, 0]
        for j in range(1, x.shape[1]):
            if x[i, j] > m:
                m = x[i, j]
        total = 0.0
        for j in range(x.shape[1]):
            e = math.exp(x[i, j] - m)
            out[i, j] = e
            total += e
        for j in range(x.shape[1]):
            out[i, j] = out[i, j] / total


def softmax_prange(x):
    out = np.empty_like(x)
    _softmax_prange(x, out)
    return out


def softmax_numexpr(ne, x):
    m = ne.evaluate("max(x, axis=1)", local_dict={"x": x})[:, None]
    e = ne.evaluate("exp(x - m)", local_dict={"x": x, "m": m})
    total = ne.evaluate("sum(e, axis=1)", local_dict={"e": e})[:, None]
    return ne.evaluate("e / total", local_dict={"e": e, "total": total})


def matrix_args(size, rng):
    return (rng.standard_normal(rows(size)),)


# --------------------------------------------------------------------------- logsumexp

def logsumexp(x):
    m = x.max(axis=-1, keepdims=True)
    return m[..., 0] + np.log(np.sum(np.exp(x - m), axis=-1))


@numba.njit(parallel=True, error_model="numpy")
def _logsumexp_prange(x, out):
    for i in prange(x.shape[0]):
        m = x[i, 0]
        for j in range(1, x.shape[1]):
            if x[i, j] > m:
                m = x[i, j]
        total = 0.0
        for j in range(x.shape[1]):
            total += math.exp(x[i, j] - m)
        out[i] = m + math.log(total)


def logsumexp_prange(x):
    out = np.empty(x.shape[0])
    _logsumexp_prange(x, out)
    return out


def logsumexp_numexpr(ne, x):
    m = ne.evaluate("max(x, axis=1)", local_dict={"x": x})
    total = ne.evaluate("sum(exp(x - m), axis=1)", local_dict={"x": x, "m": m[:, None]})
    return ne.evaluate("m + log(total)", local_dict={"m": m, "total": total})


# --------------------------------------------------------------------------- normalise, scale

def normalise(x, g, b):
    return (x - x.mean()) / x.std() * g + b


def _moments(x):
    total = 0.0
    for i in prange(x.shape[0]):
        total += x[i]
    mean = total / x.shape[0]
    squares = 0.0
    for i in prange(x.shape[0]):
        d = x[i] - mean
        squares += d * d
    return mean, math.sqrt(squares / x.shape[0])


@numba.njit(parallel=True, error_model="numpy")
def _scale(x, mean, std, g, b, out):
    for i in prange(x.shape[0]):
        out[i] = (x[i] - mean) / std * g + b


_moments_plain = numba.njit(parallel=True, error_model="numpy")(_moments)
_moments_fm = numba.njit(parallel=True, error_model="numpy", fastmath={"reassoc"})(_moments)


def _normalise_with(moments):
    def normalise_prange(x, g, b):
        mean, std = moments(x)
        out = np.empty_like(x)
        _scale(x, mean, std, g, b, out)
        return out
    return normalise_prange


def normalise_numexpr(ne, x, g, b):
    v = {"x": x, "g": g, "b": b}
    v["mean"] = ne.evaluate("sum(x)", local_dict=v) / x.size
    v["std"] = np.sqrt(ne.evaluate("sum((x - mean) ** 2)", local_dict=v) / x.size)
    return ne.evaluate("(x - mean) / std * g + b", local_dict=v)


def normalise_args(size, rng):
    return rng.standard_normal(size) * 3.0 + 1.0, 1.5, -0.5


CASES: tuple[Case, ...] = (
    Case("sum_squares", "`np.sum((x - mu) ** 2)`, x of n elements", sum_squares, vector_args,
         sum_squares_numexpr, sum_squares_prange, sum_squares_prange_fm),
    Case("softmax", "`e = exp(x - x.max(-1, keepdims)); e / e.sum(-1, keepdims)`, "
         "x of shape (n/1000, 1000)", softmax, matrix_args, softmax_numexpr, softmax_prange),
    Case("logsumexp", "`m = x.max(-1, keepdims); m[..., 0] + log(sum(exp(x - m), -1))`, "
         "x of shape (n/1000, 1000)", logsumexp, matrix_args, logsumexp_numexpr,
         logsumexp_prange),
    Case("normalise", "`(x - x.mean()) / x.std() * g + b`, scalars g, b, x of n elements",
         normalise, normalise_args, normalise_numexpr, _normalise_with(_moments_plain),
         _normalise_with(_moments_fm)),
)


def implementations(case: Case) -> dict[str, Implementation]:
    found = {"numpy": Implementation("numpy", case.reference),
             "numfuse": Implementation("numfuse", numfuse.jit(case.reference)),
             "numfuse_1t": Implementation("numfuse_1t", numfuse.jit(case.reference, threads=1))}
    if numexpr is not None and case.numexpr is not None:
        ne_fn = case.numexpr
        found["numexpr"] = Implementation("numexpr", lambda *args: ne_fn(numexpr, *args))
    found["numba_par"] = Implementation("numba_par", numba.njit(parallel=True)(case.reference))
    found["prange"] = Implementation("prange", case.prange)
    if case.prange_fastmath is not None:
        found["prange_fm"] = Implementation("prange_fm", case.prange_fastmath)
    return found


# --------------------------------------------------------------------------- measure

@dataclass
class Measured:
    """One workload at one size: the timing cells, the load, and numpy's and numfuse's
    temporaries (peak bytes of one call minus the bytes of its results)."""
    cells: dict[str, Cell]
    load: float
    temporaries: dict[str, int]
    results_bytes: int


def temporaries(case: Case, impls, size: int, rng) -> tuple[dict[str, int], int]:
    args = case.make_args(size, rng)
    found, kept = {}, 0
    for name in ("numpy", "numfuse"):
        peak, kept = peak_bytes(impls[name].call, *args)
        found[name] = peak - kept
    return found, kept


# --------------------------------------------------------------------------- report

def megabytes(count: int) -> str:
    return f"{count / 1e6:.1f}"


def case_table(by_size: dict[int, Measured]) -> list[str]:
    names = [n for n in ORDER if any(n in m.cells for m in by_size.values())]
    header = ["n", "load", *(LABELS[n] for n in names), "numfuse time ÷ hand prange",
              "temporaries MB numpy / numfuse (results MB)"]
    lines = ["| " + " | ".join(header) + " |", "|---:|" + "---:|" * (len(header) - 1)]
    notes: list[str] = []
    for size, measured in by_size.items():
        cells = measured.cells
        row = [f"{size_label(size)}", f"{measured.load:.1f}",
               *time_cells(cells, names, LABELS, notes)]
        row.append(fixed(ratio(cells, "numfuse", "prange")))
        temps = measured.temporaries
        row.append(f"{megabytes(temps['numpy'])} / {megabytes(temps['numfuse'])} "
                   f"({megabytes(measured.results_bytes)})")
        lines.append("| " + " | ".join(row) + " |")
    lines += [line for note in notes for line in ("", f"* {note}")]
    return lines


def target_lines(results: dict[str, dict[int, Measured]]) -> list[str]:
    measured = results.get("sum_squares", {}).get(TARGET_SIZE)
    if measured is None:
        return [f"Target (sum of squares at {size_label(TARGET_SIZE)}): not measured in this "
                "run."]
    over_numpy = speedup(measured.cells, "numfuse")
    vs_prange = ratio(measured.cells, "numfuse", "prange")
    vs_fastmath = ratio(measured.cells, "numfuse", "prange_fm")
    met = over_numpy >= TARGET_OVER_NUMPY and vs_prange <= TARGET_VS_PRANGE
    return [f"**Target** (sum of squares at {size_label(TARGET_SIZE)}: at least "
            f"{TARGET_OVER_NUMPY:g}x numpy, time within {TARGET_VS_PRANGE:g}x of the hand "
            f"prange loop): **{'met' if met else 'not met'}** — {fixed(over_numpy, 'x')} "
            f"numpy; numfuse time ÷ hand prange {fixed(vs_prange)}, ÷ prange fastmath "
            f"{fixed(vs_fastmath)} (load {measured.load:.1f})."]


def threading_layer() -> str:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel function has run
        return "(not started)"


def report(results: dict[str, dict[int, Measured]], plans: dict[str, str], options,
           loads: tuple[float, float], seconds: float) -> str:
    lines = [
        "# Fused reductions: numfuse against its peers",
        "",
        *environment(),
        f"* load average (1 min) {loads[0]:.2f} at start, {loads[1]:.2f} at end, on "
        f"{os.cpu_count()} logical cores (shared); run took {seconds:.0f} s",
        f"* numba threading layer {threading_layer()}, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}",
        "",
        *target_lines(results),
        "",
        "Median time per call over interleaved repetitions (each repetition times every "
        "implementation once, round-robin; every workload at one size before the next size); "
        "in brackets the speed-up over numpy (numpy's median ÷ the implementation's; above "
        "1 = faster). \"numfuse time ÷ hand prange\" is numfuse's median ÷ the hand-written "
        "`njit(parallel=True)` prange loop's (below 1 = numfuse faster). numfuse, numexpr, "
        "njit(parallel) and the prange loops use both cores; numpy and numfuse threads=1 "
        "one. \"load\" is the 1-minute load average when that size was timed. Before "
        "timing, every result is checked against numpy's (dtype, shape, rtol 1e-10); "
        "\"mismatch\" and \"error\" cells were not timed (reasons below each table).",
        f"Repetitions: up to {options.repeats}, at least {options.min_repeats}, capped at "
        f"about {options.budget:g} s per workload and size; calls shorter than "
        f"{options.min_sample * 1e3:g} ms are batched.",
        "",
        "Temporaries: tracemalloc peak of one call minus the bytes of its results (numpy's "
        "allocations only; numba's are not traced), for numpy and numfuse (default "
        "threads); the results' size in brackets.",
        "",
    ]
    for case in CASES:
        if case.name not in results:
            continue
        lines += [f"## {case.name}: {case.title} (float64)", "",
                  *case_table(results[case.name]), ""]
        if plans.get(case.name):
            lines += ["<details><summary>numfuse's compiled graph</summary>", "", "```",
                      plans[case.name], "```", "</details>", ""]
    return "\n".join(lines)


def plot(results: dict[str, dict[int, Measured]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(2, len(results))
    grid_rows = math.ceil(len(results) / columns)
    fig, axes = plt.subplots(grid_rows, columns, figsize=(5.2 * columns, 3.9 * grid_rows),
                             squeeze=False)
    for ax, (name, by_size) in zip(axes.flat, results.items(), strict=False):
        for impl in ORDER:
            points = [(size, speedup(m.cells, impl)) for size, m in by_size.items()
                      if not math.isnan(speedup(m.cells, impl))]
            if points:
                color, style = STYLES[impl]
                ax.plot(*zip(*points, strict=True), style, color=color, marker="o",
                        markersize=3.5, linewidth=2.4 if impl == "numfuse" else 1.3,
                        label=LABELS[impl])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("speed-up over numpy")
        ax.grid(True, which="major", alpha=0.4)
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    handles: dict = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4,
               frameon=False)
    fig.suptitle("Fused reductions: speed-up over numpy (median, higher is better)")
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help="comma-separated element counts (default 1e5,1e6,1e7)")
    parser.add_argument("--quick", action="store_true",
                        help="sizes 1e5, 1e6; 5 repetitions; about 1 s per workload and size")
    parser.add_argument("--repeats", type=int, default=15, help="most repetitions (default 15)")
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--budget", type=float, default=4.0,
                        help="about this many seconds of timing per workload and size")
    parser.add_argument("--min-sample", type=float, default=2e-3,
                        help="batch calls so one sample lasts at least this (seconds)")
    parser.add_argument("--output", type=Path, default=RESULTS,
                        help="directory for reductions.md and reductions.png")
    parser.add_argument("--no-plot", action="store_true")
    options = parser.parse_args()
    sizes = [int(float(s)) for s in options.sizes.split(",")] if options.sizes else list(SIZES)
    if options.quick:
        sizes = sizes if options.sizes else list(QUICK_SIZES)
        options.repeats, options.budget = 5, min(options.budget, 1.0)

    loads_start = os.getloadavg()[0]
    began = time.perf_counter()
    rng = np.random.default_rng(0)
    impls = {case.name: implementations(case) for case in CASES}
    results: dict[str, dict[int, Measured]] = {case.name: {} for case in CASES}
    for size in sizes:
        for case in CASES:
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            cells = run_one(case, impls[case.name], size, options, rng)
            temps, kept = temporaries(case, impls[case.name], size, rng)
            results[case.name][size] = Measured(cells, load, temps, kept)
            shown = ", ".join(f"{LABELS[n]} " + (c.status[:40] if c.status
                                                 else f"{speedup(cells, n):.2f}x")
                              for n, c in cells.items() if n != "numpy")
            print(f"{case.name} n={size_label(size)} (load {load:.1f}, "
                  f"{time.perf_counter() - t0:.1f} s, {len(cells['numpy'].samples)} reps): "
                  f"{shown}", flush=True)
    plans = {name: numfuse_plan(found["numfuse"].call) for name, found in impls.items()}

    text = report(results, plans, options, (loads_start, os.getloadavg()[0]),
                  time.perf_counter() - began)
    print()
    print(text)
    options.output.mkdir(parents=True, exist_ok=True)
    (options.output / "reductions.md").write_text(text + "\n")
    print(f"written to {options.output / 'reductions.md'}")
    if not options.no_plot:
        try:
            plot(results, options.output / "reductions.png")
            print(f"written to {options.output / 'reductions.png'}")
        except ImportError:
            print("matplotlib not installed: no plot (pip install -e '.[bench]')")


if __name__ == "__main__":
    main()
