"""Peak memory of one call, numfuse vs numpy, measured with tracemalloc.

numpy reports its array allocations to tracemalloc, so the peak of one call minus the
size of its results is the memory spent on temporaries.  Workloads: the seed logp/grad
case and a reduction, ``sum((x - mu) ** 2)``.

    python benchmarks/bench_memory.py [--size 1e6]
"""

from __future__ import annotations

import argparse
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

import numfuse


def logp_and_grad(x: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    d = x - mu
    return -(d**2) / 2, -d


def sum_of_squares(x: np.ndarray, mu: float) -> np.floating:
    return np.sum((x - mu) ** 2)


def peak_bytes(function: Callable[..., Any], *args: Any) -> tuple[int, int]:
    """(peak bytes allocated during one call, bytes of what it returned)."""
    function(*args)  # compile / warm up outside the measurement
    tracemalloc.start()
    tracemalloc.reset_peak()
    result = function(*args)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    results = result if isinstance(result, tuple) else (result,)
    kept = sum(np.asarray(item).nbytes for item in results)
    return peak, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=float, default=1e6)
    size = int(parser.parse_args().size)
    x = np.random.default_rng(0).standard_normal(size)
    rows = ["| workload | implementation | peak | results | temporaries (peak - results) |",
            "|---|---|---:|---:|---:|"]
    for workload in (logp_and_grad, sum_of_squares):
        for name, function in (("numpy", workload), ("numfuse", numfuse.jit(workload))):
            peak, kept = peak_bytes(function, x, 0.25)
            rows.append(f"| {workload.__name__} | {name} | {peak / 1e6:.1f} MB | "
                        f"{kept / 1e6:.1f} MB | {(peak - kept) / 1e6:.1f} MB |")
    print(f"n = {size:,} float64 ({x.nbytes / 1e6:.1f} MB per array)\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
