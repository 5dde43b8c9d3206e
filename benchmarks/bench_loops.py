"""Programs of many small steps: loops a jitted function runs while it is traced.

A time-stepping loop over a small array is unrolled when numfuse traces it: the program
is hundreds of steps (kernels, and numpy's indexing between them), each over a few
hundred elements, so what each step costs beyond its arithmetic decides whether numfuse
is faster than numpy there at all.  Three programs, each timed interleaved with numpy
running the same function (``suite.measure``: round-robin repetitions, medians), and its
first call (trace and compile) timed once:

* ``heat`` -- a 1-d heat equation, ``u[1:-1] = u[1:-1] + c * (u[2:] - 2 * u[1:-1] +
  u[:-2])``, 200 steps on 101 points;
* ``life`` -- Conway's game of life on a 32 x 32 board, 20 generations (neighbour counts
  from eight shifted slices, written into a bordered board);
* ``rk4`` -- 100 classical Runge-Kutta steps of a damped oscillator system of 64 states.

Reported: numpy's time ÷ numfuse's (above 1: numfuse faster), and the first call.

Run:  python benchmarks/bench_loops.py [--repeats 21]
Writes benchmarks/results/loops.md (``--output`` for another file).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from suite import Cell, Implementation, environment, format_time, measure, seconds_per_call

import numfuse

RESULTS = Path(__file__).parent / "results"


def heat(u, c, steps):
    u = u.copy()
    for _ in range(steps):
        u[1:-1] = u[1:-1] + c * (u[2:] - 2 * u[1:-1] + u[:-2])
    return u


def life(board, generations):
    padded = np.zeros((board.shape[0] + 2, board.shape[1] + 2), board.dtype)
    for _ in range(generations):
        padded[1:-1, 1:-1] = board
        neighbours = (padded[:-2, :-2] + padded[:-2, 1:-1] + padded[:-2, 2:] +
                      padded[1:-1, :-2] + padded[1:-1, 2:] +
                      padded[2:, :-2] + padded[2:, 1:-1] + padded[2:, 2:])
        board = ((neighbours == 3) | ((board == 1) & (neighbours == 2))).astype(board.dtype)
    return board


def rk4(state, damping, dt, steps):
    def rate(y):
        position, velocity = y[:32], y[32:]
        return np.concatenate([velocity, -position - damping * velocity])

    for _ in range(steps):
        k1 = rate(state)
        k2 = rate(state + dt / 2 * k1)
        k3 = rate(state + dt / 2 * k2)
        k4 = rate(state + dt * k3)
        state = state + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return state


def programs(rng: np.random.Generator) -> dict[str, tuple[Callable, tuple, tuple[int, ...]]]:
    """name: (function, arguments, static argument positions)."""
    return {
        "heat": (heat, (np.sin(np.linspace(0.0, 3.0, 101)), 0.1, 200), (2,)),
        "life": (life, ((rng.random((32, 32)) < 0.3).astype(np.int64), 20), (1,)),
        "rk4": (rk4, (rng.standard_normal(64), 0.1, 0.01, 100), (3,)),
    }


def run_one(name: str, fn: Callable, args: tuple, static: tuple[int, ...],
            repeats: int, min_sample: float) -> tuple[dict[str, Cell], float]:
    jitted = numfuse.jit(fn, static_argnums=static)
    start = time.perf_counter()
    got = jitted(*args)
    first = time.perf_counter() - start
    np.testing.assert_allclose(got, fn(*args), rtol=1e-12, atol=0)
    impls = {"numpy": Implementation("numpy", fn), "numfuse": Implementation("numfuse", jitted)}
    converted = {"numpy": args, "numfuse": args}
    cells = {key: Cell() for key in impls}
    batch = {key: max(1, math.ceil(min_sample / seconds_per_call(impl.call, args)))
             for key, impl in impls.items()}
    measure(impls, converted, cells, batch, repeats)
    return cells, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--min-sample", type=float, default=0.005)
    parser.add_argument("--output", default=str(RESULTS / "loops.md"))
    options = parser.parse_args()
    rows = []
    started = time.perf_counter()
    for name, (fn, args, static) in programs(np.random.default_rng(0)).items():
        cells, first = run_one(name, fn, args, static, options.repeats, options.min_sample)
        numpy_time, numfuse_time = cells["numpy"].median, cells["numfuse"].median
        rows.append(f"| {name} | {format_time(numpy_time)} | {format_time(numfuse_time)} | "
                    f"{numpy_time / numfuse_time:.2f} | {format_time(first)} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    text = "\n".join([
        "# Loops: programs of many small steps", "",
        f"Median time per call over {options.repeats} interleaved repetitions "
        f"(`python benchmarks/bench_loops.py`); took {time.perf_counter() - started:.0f} s, "
        f"load average (1 min) {load:.2f} at the end.", "",
        *environment(), "",
        "| program | numpy | numfuse | numpy ÷ numfuse | first call (trace, compile) |",
        "|---|---:|---:|---:|---:|", *rows, ""])
    Path(options.output).parent.mkdir(exist_ok=True)
    Path(options.output).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
