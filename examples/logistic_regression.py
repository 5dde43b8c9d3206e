"""Fit a logistic regression by gradient descent with ``numfuse.value_and_grad``.

The loss is plain numpy.  ``numfuse.value_and_grad`` traces it, derives the backward pass
from the traced graph and compiles both together: the loss, the derivative of every
sample's term and what they share are computed in one kernel between the two matrix
products (``X @ w`` forward, ``residual @ X`` backward).  The parameters are a dict, and
so is their gradient.  The gradient is checked against the one written by hand in numpy,
and both are timed.

Run:  python examples/logistic_regression.py
"""

from __future__ import annotations

import time

import numpy as np

import numfuse


def loss(params, X, y, penalty):
    z = X @ params["w"] + params["b"]
    # log(1 + exp(z)) - y z: the negative log-likelihood of y in {0, 1}, written stably
    return np.mean(np.logaddexp(0.0, z) - y * z) + penalty * np.sum(params["w"] ** 2)


def numpy_loss_and_grad(params, X, y, penalty):
    """The same loss and its gradient derived by hand: d/dz of log(1 + e^z) - y z is
    sigmoid(z) - y."""
    z = X @ params["w"] + params["b"]
    residual = (1.0 / (1.0 + np.exp(-z)) - y) / len(y)
    value = np.mean(np.logaddexp(0.0, z) - y * z) + penalty * np.sum(params["w"] ** 2)
    return value, {"w": residual @ X + 2.0 * penalty * params["w"], "b": np.sum(residual)}


def make_data(rng, samples=20_000, features=8):
    true_w = rng.standard_normal(features)
    X = rng.standard_normal((samples, features))
    y = (rng.random(samples) < 1.0 / (1.0 + np.exp(-(X @ true_w - 0.5)))).astype(np.float64)
    return X, y, true_w


def fit(X, y, steps=300, rate=0.5, penalty=1e-4):
    """Plain gradient descent; the first call compiles, the others run the kernels."""
    value_and_grad = numfuse.value_and_grad(loss)
    params = {"w": np.zeros(X.shape[1]), "b": 0.0}
    for step in range(steps):
        value, grad = value_and_grad(params, X, y, penalty)
        params = {name: params[name] - rate * grad[name] for name in params}
        if step % 50 == 0:
            print(f"  step {step:3d}: loss {value:.5f}")
    return params


def main() -> None:
    rng = np.random.default_rng(0)
    X, y, true_w = make_data(rng)
    print("Gradient descent on a logistic regression (20,000 samples, 8 features):")
    params = fit(X, y)
    accuracy = np.mean((X @ params["w"] + params["b"] > 0) == (y > 0.5))
    print(f"fitted w: {np.round(params['w'], 2)}, b: {params['b']:.2f}")
    print(f"true   w: {np.round(true_w, 2)}, b: -0.50")
    print(f"training accuracy: {accuracy:.3f}")
    value_and_grad = numfuse.value_and_grad(loss)
    value, grad = value_and_grad(params, X, y, 1e-4)
    by_hand, grad_by_hand = numpy_loss_and_grad(params, X, y, 1e-4)
    for name in params:
        np.testing.assert_allclose(grad[name], grad_by_hand[name], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(value, by_hand, rtol=1e-12)
    print("gradient equals numpy's hand-written gradient (rtol 1e-9)")
    seconds = {"numfuse.value_and_grad": [], "numpy by hand": []}
    for _ in range(15):  # interleaved, medians
        for name, run in (("numfuse.value_and_grad", value_and_grad),
                          ("numpy by hand", numpy_loss_and_grad)):
            start = time.perf_counter()
            run(params, X, y, 1e-4)
            seconds[name].append(time.perf_counter() - start)
    for name, samples in seconds.items():
        print(f"  {name}: {np.median(samples) * 1e6:.0f} µs per loss and gradient")
    # The same program with the parameters as separate arguments, to look at it:
    flat = numfuse.value_and_grad(lambda w, b, X, y: loss({"w": w, "b": b}, X, y, 1e-4),
                                  argnums=(0, 1))
    compiled = numfuse.compile(flat, params["w"], params["b"], X, y)
    print(f"\nThe compiled loss and gradient: {len(compiled.kernels)} kernel(s)")
    print(compiled.graph)


if __name__ == "__main__":
    main()
