"""The founding case: a Gaussian log-density and its gradient in one fused kernel.

``d = x - mu`` feeds both results.  numpy makes one pass over memory per operation and
materialises ``d``, ``d**2`` and ``-(d**2)``; numfuse compiles the whole function to ONE
kernel that reads ``x`` once and writes both outputs, keeping ``d`` in a register.

Run:  python examples/logp_grad.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import numfuse

SIZES = (1_000, 100_000, 1_000_000)


def logp_and_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


fused = numfuse.jit(logp_and_grad)


def show_compiled(x: np.ndarray, mu: float) -> None:
    compiled = numfuse.compile(logp_and_grad, x, mu)
    print("Fused graph:")
    print(compiled.graph)
    kernels = compiled.kernels
    print(f"\nKernels: {len(kernels)}")
    for kernel in kernels:
        print(f"  {kernel.name}: layout {kernel.layout}, {kernel.n_inputs} inputs, "
              f"{kernel.n_outputs} outputs, {len(kernel.nodes)} ops")
    assert len(kernels) == 1, "the founding case should compile to one kernel"
    assert kernels[0].n_outputs == 2, "the one kernel should write both outputs"
    print("\nGenerated kernel source:")
    print(kernels[0].source)


def check_against_numpy(x: np.ndarray, mu: float) -> None:
    logp, grad = fused(x, mu)
    expected_logp, expected_grad = logp_and_grad(x, mu)
    # The kernel performs numpy's operations in numpy's order: the results are bit-equal.
    np.testing.assert_array_equal(logp, expected_logp)
    np.testing.assert_array_equal(grad, expected_grad)
    assert logp.dtype == expected_logp.dtype and grad.dtype == expected_grad.dtype


def time_interleaved(x: np.ndarray, mu: float, repeats: int = 15) -> dict[str, float]:
    """Median seconds per call of each implementation, alternating them every repeat."""
    implementations = {"numpy": logp_and_grad, "numfuse": fused}
    calls = max(1, 100_000 // x.size)  # batch tiny calls so the timer resolution is moot
    samples: dict[str, list[float]] = {name: [] for name in implementations}
    for _ in range(repeats):
        for name, function in implementations.items():
            start = time.perf_counter()
            for _ in range(calls):
                function(x, mu)
            samples[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(times) for name, times in samples.items()}


def main() -> None:
    rng = np.random.default_rng(0)
    mu = 0.25
    show_compiled(rng.standard_normal(SIZES[0]), mu)
    print("Timings (median per call, numpy and numfuse interleaved):")
    print(f"  {'n':>9}  {'numpy':>10}  {'numfuse':>10}  {'numpy/numfuse':>13}")
    for size in SIZES:
        x = rng.standard_normal(size)
        check_against_numpy(x, mu)
        medians = time_interleaved(x, mu)
        ratio = medians["numpy"] / medians["numfuse"]
        print(f"  {size:>9,}  {medians['numpy'] * 1e6:>8.1f}us  "
              f"{medians['numfuse'] * 1e6:>8.1f}us  {ratio:>12.2f}x")
    print("\nResults equal numpy's at every size (np.testing).")


if __name__ == "__main__":
    main()
