"""How long ``numfuse.partition.partition`` takes on large elementwise graphs.

A seeded random program over four arguments with different loop shapes (``(n,)``,
``(n,1)``, ``(1,n)`` and ``(n,n)``) is traced with ``numfuse.trace.trace_graph`` and
simplified with ``numfuse.passes.simplify``, exactly as ``numfuse.compile`` does; then only
``partition`` is timed.  Each new operation mostly extends a recent value of one loop shape
(long chains), sometimes reads an older one (fan-out, sibling fusion) and sometimes mixes
two shapes (broadcasting, which ends a region).  The unused values are returned, so dead
code elimination keeps every node.

``--workload constant-chain`` times instead a chain ``x * c0 * c1 * ...`` with a distinct
Python-float constant per operation (every constant is a node of the graph).

Run:  python benchmarks/bench_partition.py [--sizes 1000,10000,20000] [--check]
``--check`` also verifies the plan's invariants with ``numfuse.partition.check_plan``
(not timed; slow on the largest graphs).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import numpy as np

from numfuse.dtypes import spec_of
from numfuse.graph import ELEMENTWISE, Graph, verify
from numfuse.partition import check_plan, partition
from numfuse.passes import simplify
from numfuse.trace import trace_graph

SIZES = (1_000, 10_000, 20_000)
REPEATS = 5

UNARY: tuple[Callable[..., object], ...] = (np.negative, np.sin, np.exp, np.sqrt,
                                            np.absolute, np.square, np.tanh)
BINARY: tuple[Callable[..., object], ...] = (np.add, np.subtract, np.multiply,
                                             np.true_divide, np.maximum, np.hypot)

# Example arguments, one per loop shape; only their signatures matter.
EXAMPLES = (np.ones(3), np.ones((3, 1)), np.ones((1, 3)), np.ones((3, 3)))


def random_program(n_ops: int, seed: int) -> Callable[..., tuple[object, ...]]:
    """A function of four arrays that applies ``n_ops`` seeded random elementwise ops."""

    def program(*arguments: object) -> tuple[object, ...]:
        rng = random.Random(seed)
        pools: dict[tuple[bool, ...], list[object]] = {}
        used: set[int] = set()
        values: list[object] = []

        def remember(value: object) -> None:
            pools.setdefault(value.node.ones, []).append(value)  # type: ignore[attr-defined]
            values.append(value)

        def pick(pool: list[object]) -> object:
            # Mostly one of the newest values (chains), sometimes any older one (fan-out).
            index = len(pool) - 1 - min(int(rng.expovariate(0.5)), len(pool) - 1)
            if rng.random() < 0.1:
                index = rng.randrange(len(pool))
            used.add(id(pool[index]))
            return pool[index]

        for argument in arguments:
            remember(argument)
        for _ in range(n_ops):
            pool = pools[rng.choice(sorted(pools))]
            first = pick(pool)
            roll = rng.random()
            if roll < 0.3:
                result = rng.choice(UNARY)(first)
            elif roll < 0.4:
                result = rng.choice(BINARY)(first, rng.uniform(0.5, 2.0))
            else:
                other = pool if rng.random() < 0.9 else pools[rng.choice(sorted(pools))]
                result = rng.choice(BINARY)(first, pick(other))
            remember(result)
        return tuple(value for value in values[len(arguments):] if id(value) not in used)

    return program


def constant_chain(n_ops: int, seed: int) -> Callable[..., object]:
    """``x * c0 * c1 * ...``: one long region with a distinct Python-float constant per op."""

    def program(x: object, *_unused: object) -> object:
        for step in range(n_ops):
            x = x * (1.0 + (seed + step) * 1e-9)
        return x

    return program


WORKLOADS: dict[str, Callable[[int, int], Callable[..., object]]] = {
    "random": random_program,
    "constant-chain": constant_chain,
}


def build_graph(n_ops: int, seed: int = 0, workload: str = "random") -> Graph:
    """The simplified graph ``numfuse.compile`` would partition for this workload."""
    specs = [spec_of(example) for example in EXAMPLES]
    program = WORKLOADS[workload](n_ops, seed)
    return simplify(trace_graph(program, specs), check=verify)


def time_partition(graph: Graph, repeats: int) -> tuple[float, int]:
    """Median seconds of ``partition`` and the number of regions it made.

    Each repetition gets a fresh ``Graph`` object, so no cached property is reused across
    repetitions; its topological order is computed before the clock starts, as ``verify``
    has already done in the real pipeline.
    """
    seconds = []
    regions = 0
    for _ in range(repeats):
        fresh = graph.with_outputs(graph.outputs)
        _ = fresh.nodes
        start = time.perf_counter()
        plan = partition(fresh)
        seconds.append(time.perf_counter() - start)
        regions = len(plan.regions)
    return statistics.median(seconds), regions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(str(size) for size in SIZES),
                        help="comma-separated numbers of random operations")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="random",
                        help="random (default) or constant-chain (slow: see README)")
    parser.add_argument("--check", action="store_true",
                        help="also verify each plan with check_plan (not timed)")
    options = parser.parse_args()

    print(f"Workload: {options.workload}\n")
    print(f"| ops traced | graph nodes | elementwise nodes | loop shapes | regions "
          f"| partition (median of {options.repeats}) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in (int(text) for text in options.sizes.split(",")):
        graph = build_graph(size, options.seed, options.workload)
        elementwise = [node for node in graph.nodes if node.kind == ELEMENTWISE]
        shapes = len({node.ones for node in elementwise})
        seconds, regions = time_partition(graph, options.repeats)
        print(f"| {size:,} | {len(graph.nodes):,} | {len(elementwise):,} | {shapes} "
              f"| {regions:,} | {seconds:.3f} s |", flush=True)
        if options.check:
            check_plan(partition(graph))


if __name__ == "__main__":
    main()
