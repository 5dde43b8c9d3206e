"""Notebook display: DOT source, SVG drawings when Graphviz is present, HTML fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

import numfuse
from numfuse import display


def logp_and_grad(x, mu):
    d = x - mu
    return -(d**2) / 2, -d


def two_kernels(x, y):
    a = x * 2.0
    return a, a + y


X = np.ones(8)


def test_dot_draws_regions_as_clusters_and_marks_outputs():
    graph = numfuse.trace(two_kernels, X, np.ones((8, 8)))
    dot = display.to_dot(graph)
    assert dot.startswith("digraph numfuse {")
    assert dot.count("subgraph cluster_") == 2
    assert 'label="kernel 0 (n)->(n)"' in dot
    assert f'fillcolor="{display.PALETTE[0]}"' in dot
    assert f'fillcolor="{display.PALETTE[1]}"' in dot
    # a is returned and read by the other kernel; the sum is returned
    assert 'xlabel="out 0"' in dot and 'xlabel="out 1"' in dot
    assert dot.count("peripheries=2") == 2
    assert "a -> d;" in dot and "d -> e;" in dot and "b -> e;" in dot  # c is the constant 2.0
    assert "shape=ellipse" in dot  # arguments


def test_without_graphviz_html_falls_back_to_text_and_says_how(monkeypatch):
    monkeypatch.setattr(display.shutil, "which", lambda name: None)
    graph = numfuse.trace(logp_and_grad, X, 0.5)
    assert display.svg(graph) is None
    message = display.drawing_unavailable()
    assert message is not None and "dot" in message and "apt-get install graphviz" in message
    html = graph._repr_html_()
    assert "<pre>" in html and "subtract a b" in html
    assert "No drawing" in html and "pip install graphviz" in html


@pytest.mark.skipif(display.drawing_unavailable() is not None,
                    reason="Graphviz (python package and dot) not installed")
def test_with_graphviz_graphs_render_as_svg():
    graph = numfuse.trace(logp_and_grad, X, 0.5)
    drawing = display.svg(graph)
    assert drawing is not None and drawing.startswith("<svg")
    assert "kernel 0" in drawing and "true_divide" in drawing and "out 1" in drawing
    assert "<svg" in graph._repr_html_()


def test_compiled_and_explanation_render_as_html():
    compiled = numfuse.compile(logp_and_grad, X, 0.5)
    html = compiled._repr_html_()
    assert compiled.kernels[0].name in html
    assert "(n),()-&gt;(n),(n)" in html
    assert "explain()" in html
    report = compiled.explain(X, 0.5)._repr_html_()
    assert "<table>" in report and "subtract a b" in report
    assert "returned" in report and "vectorised" in report
    assert "Fusion boundaries: none." in report
    assert "avoided for these arguments" in report


def test_explanation_html_tabulates_boundaries_with_the_partitioners_reasons():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def scaled(x, h):
        return x * (-h), x + h

    x = np.ones((4, 5))
    report = numfuse.compile(softmax, x).explain(x, vectorisation=False)._repr_html_()
    assert "<th>between</th><th>reason</th><th>why</th>" in report
    assert "<td>region 0 -&gt; region 1 at d:f64[n,n]</td>" in report
    assert "<td>reduction read inside its own loop</td>" in report
    assert "sum e is complete only after the loop that computes it" in report
    report = numfuse.compile(scaled, X, 0.5).explain(X, 0.5)._repr_html_()
    assert "c:f64[] = negative b  (before the loop)" in report
    assert "Fusion boundaries: none." in report


def test_explanation_html_says_how_a_kernel_of_passes_runs():
    def standardise(x):
        return (x - x.mean(axis=0)) / x.std(axis=0)

    page = numfuse.compile(standardise, np.ones((6, 4))).explain()._repr_html_()
    assert "3 passes over the rows (axis 0)" in page
    assert "(accumulated in pass 1)" in page and "(per column, after pass 2)" in page
