"""numfuse on dask against plain dask, on one large chunked float64 array.

Workloads (each written once, run by both on the same persisted array and chunks):

* ``logp_grad`` — ``d = x - mu; return -(d**2)/2, -d``; both outputs are persisted, so
  the time is graph construction plus computing every chunk (no concatenation);
* ``sum_squares`` — ``np.sum((x - mu)**2)`` computed to a number (dask's tree reduction
  in both).  numfuse runs the square and the sum as one kernel loop per chunk, which
  returns the chunk's total; ``sum_squares, reduction by dask`` is the same function
  compiled with ``fuse_reductions=False`` (how numfuse ran reductions on dask before):
  one kernel per chunk writing the chunk of squares, which dask's ``sum`` then reduces.

Plain dask already merges the elementwise operations of one chunk into one task; what
numfuse adds is that the task is one loop over the chunk instead of one numpy pass (and
one temporary) per operation.  All candidates of a workload run round-robin within each
repetition on dask's threaded scheduler (one thread per core); the table reports medians
and the speed-up of each numfuse variant (plain dask's median / its median).  Results are
checked against plain dask before anything is timed.

Run:  python benchmarks/bench_dask.py [--size 1e8] [--chunk 1e7] [--repeats 5]
Writes the table to benchmarks/results/dask.md as well as printing it.
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

import dask
import dask.array as da
import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from machine import revision

import numfuse

MU = 0.25
RESULTS = Path(__file__).parent / "results" / "dask.md"


def logp_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


def sum_squares(x, mu):
    return np.sum((x - mu) ** 2)


WORKLOADS: dict[str, Callable[..., object]] = {"logp_grad": logp_grad,
                                               "sum_squares": sum_squares}


def run_once(function: Callable[..., object], x: da.Array) -> object:
    """Build the graph and compute it: persist array results, compute scalar ones."""
    result = function(x, MU)
    if isinstance(result, tuple):
        persisted = dask.persist(*result)
        del persisted
        return None
    return result.compute()  # type: ignore[attr-defined]


def unfused(function: Callable[..., object], x: da.Array) -> Callable[..., object]:
    """``function`` compiled with its reductions left as numpy calls, which on dask arrays
    become dask's own reductions of the kernel's per-chunk output."""
    compiled = numfuse.compile(function, np.broadcast_to(np.empty((), x.dtype), x.shape), MU)
    return type(compiled)(compiled.fn, compiled.specs, compiled.static, [x.shape, ()],
                          fuse_reductions=False)


def candidates(name: str, x: da.Array) -> dict[str, Callable[..., object]]:
    function = WORKLOADS[name]
    found = {"dask": function, "numfuse": numfuse.jit(function)}
    if name == "sum_squares":
        found["numfuse, reduction by dask"] = unfused(function, x)
    return found


def check(x: da.Array) -> None:
    """numfuse on dask must agree with plain dask before anything is timed."""
    head = x[: min(x.shape[0], 2_000_000)]
    for name in WORKLOADS:
        expected, *others = dask.compute(*(candidate(head, MU) for candidate
                                           in candidates(name, head).values()))
        for got in others:
            if isinstance(expected, tuple):
                for want, have in zip(expected, got, strict=True):
                    np.testing.assert_array_equal(have, want, err_msg=name)
            else:
                np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=name)


def measure(x: da.Array, repeats: int) -> dict[str, dict[str, list[float]]]:
    """Seconds per run, one sample per implementation per repetition, round-robin."""
    samples: dict[str, dict[str, list[float]]] = {}
    for name in WORKLOADS:
        found = candidates(name, x)
        for label, candidate in found.items():
            if label != "dask":
                run_once(candidate, x)  # compile outside the timing
        samples[name] = {label: [] for label in found}
        for _ in range(repeats):
            for label, candidate in found.items():
                start = time.perf_counter()
                run_once(candidate, x)
                samples[name][label].append(time.perf_counter() - start)
    return samples


def table(samples: dict[str, dict[str, list[float]]]) -> list[str]:
    lines = ["| workload | dask (median) | numfuse on dask (median) | speed-up | dask (best) "
             "| numfuse (best) |", "|---|---:|---:|---:|---:|---:|"]
    for name, times in samples.items():
        plain = statistics.median(times["dask"])
        for label, own in times.items():
            if label == "dask":
                continue
            row = name if label == "numfuse" else f"{name}, {label.split(', ', 1)[1]}"
            median = statistics.median(own)
            lines.append(f"| {row} | {plain:.3f} s | {median:.3f} s | {plain / median:.2f}x | "
                         f"{min(times['dask']):.3f} s | {min(own):.3f} s |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=float, default=1e8, help="elements (default 1e8)")
    parser.add_argument("--chunk", type=float, default=1e7, help="elements per chunk")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    size, chunk = int(args.size), int(args.chunk)
    threads = os.cpu_count() or 1
    with dask.config.set(scheduler="threads", num_workers=threads):
        x = da.random.default_rng(0).standard_normal(size, chunks=chunk).persist()
        check(x)
        samples = measure(x, args.repeats)
    header = [
        "# numfuse on dask vs plain dask",
        "",
        f"Python {platform.python_version()} on {platform.machine()}, {threads} CPUs; "
        f"numpy {np.__version__}, numba {numba.__version__}, dask {dask.__version__}, "
        f"numfuse (git {revision()})",
        "",
        f"x: {size:.0e} float64 ({size * 8 / 1e9:.1f} GB) in chunks of {chunk:.0e} "
        f"({-(-size // chunk)} chunks), persisted in memory; threaded scheduler, {threads} "
        f"threads; {args.repeats} interleaved repetitions. `logp_grad` persists both "
        "outputs, `sum_squares` computes the number (the reduction fused into the chunk "
        "kernel; `reduction by dask`: the kernel writes the chunk of squares and dask's sum "
        "reduces it, as numfuse did before). Speed-up = plain dask's median / numfuse's "
        "median.",
        "",
    ]
    text = "\n".join([*header, *table(samples), ""])
    print(text)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
