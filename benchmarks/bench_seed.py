"""The seed workload, ``d = x - mu; return -(d**2)/2, -d``, against numpy (and numexpr).

Every implementation runs at every size in one process, round-robin within each
repetition, so a busy machine slows them all alike; the table reports medians and the
speed-up of each over numpy (numpy's median time / its median time).  Results are checked
against numpy before anything is timed.

Run:  python benchmarks/bench_seed.py [--repeats N] [--sizes 1e3,1e6]
Writes the table to benchmarks/results/seed.md as well as printing it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from machine import revision

import numfuse

try:
    import numexpr
except ImportError:  # numexpr is optional: pip install -e '.[bench]'
    numexpr = None

SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)
MU = 0.25
RESULTS = Path(__file__).parent / "results" / "seed.md"

Implementation = Callable[[np.ndarray, float], tuple[np.ndarray, np.ndarray]]


def seed_numpy(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


seed_numfuse = numfuse.jit(seed_numpy)


def seed_numexpr(x, mu):
    # numexpr evaluates one expression per call, so d is computed twice.
    return (numexpr.evaluate("-((x - mu) ** 2) / 2", local_dict={"x": x, "mu": mu}),
            numexpr.evaluate("-(x - mu)", local_dict={"x": x, "mu": mu}))


def implementations() -> dict[str, Implementation]:
    found: dict[str, Implementation] = {"numpy": seed_numpy, "numfuse": seed_numfuse}
    if numexpr is not None:
        found["numexpr"] = seed_numexpr
    return found


def check(candidates: dict[str, Implementation], x: np.ndarray) -> None:
    """Every implementation must give numpy's results before it is timed."""
    expected = seed_numpy(x, MU)
    for name, function in candidates.items():
        for got, want in zip(function(x, MU), expected, strict=True):
            if name == "numfuse":  # the same operations in the same order: bit-equal
                np.testing.assert_array_equal(got, want, err_msg=name)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, err_msg=name)
            assert got.dtype == want.dtype, name


def calls_per_sample(size: int) -> int:
    """Batch tiny calls so one sample lasts long enough for the timer to resolve it."""
    return max(1, 200_000 // size)


def measure(candidates: dict[str, Implementation], x: np.ndarray,
            repeats: int) -> dict[str, list[float]]:
    """Seconds per call, one sample per implementation per repetition, round-robin."""
    calls = calls_per_sample(x.size)
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, function in candidates.items():
            start = time.perf_counter()
            for _ in range(calls):
                function(x, MU)
            samples[name].append((time.perf_counter() - start) / calls)
    return samples


def format_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def table(results: dict[int, dict[str, list[float]]], reduce: Callable[[list[float]], float],
          names: list[str]) -> list[str]:
    others = [name for name in names if name != "numpy"]
    header = ["n", *names, *(f"{name} speed-up" for name in others)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for size, samples in results.items():
        values = {name: reduce(samples[name]) for name in names}
        cells = [f"{size:.0e}", *(format_time(values[name]) for name in names),
                 *(f"{values['numpy'] / values[name]:.2f}x" for name in others)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def environment() -> str:
    versions = (f"numpy {np.__version__}, numba {numba.__version__}, "
                f"numfuse {numfuse.__version__} (git {revision()})")
    if numexpr is not None:
        versions += f", numexpr {numexpr.__version__} ({numexpr.get_num_threads()} threads)"
    return (f"Python {platform.python_version()} on {platform.machine()}, "
            f"{os.cpu_count()} CPUs; {versions}")


def report(results: dict[int, dict[str, list[float]]], names: list[str],
           repeats: int) -> str:
    lines = [
        "# Seed workload: `d = x - mu; return -(d**2)/2, -d` (float64)",
        "",
        environment(),
        "",
        f"Median time per call over {repeats} interleaved repetitions; speed-up = numpy's "
        "median / the implementation's median (above 1 means faster than numpy).",
        "",
        *table(results, statistics.median, names),
        "",
        f"Best of {repeats} (less sensitive to other processes and page-fault costs):",
        "",
        *table(results, min, names),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--sizes", default=",".join(f"{size:.0e}" for size in SIZES),
                        help="comma-separated element counts, e.g. 1e3,1e6")
    parser.add_argument("--output", type=Path, default=RESULTS)
    options = parser.parse_args()
    sizes = [int(float(size)) for size in options.sizes.split(",")]

    candidates = implementations()
    names = list(candidates)
    rng = np.random.default_rng(0)
    results: dict[int, dict[str, list[float]]] = {}
    for size in sizes:
        x = rng.standard_normal(size)
        check(candidates, x)  # also compiles numfuse's kernel outside the timings
        results[size] = measure(candidates, x, options.repeats)
        print(f"measured n={size:.0e}", flush=True)

    text = report(results, names, options.repeats)
    print()
    print(text)
    options.output.parent.mkdir(parents=True, exist_ok=True)
    options.output.write_text(text)
    print(f"written to {options.output}")


if __name__ == "__main__":
    main()
