"""Notebook display: DOT source, SVG drawings when Graphviz is present, HTML fallbacks."""

from __future__ import annotations

import re

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
    assert 'title_0 [label="kernel 0 (n)->(n)"' in dot
    assert f'fillcolor="{display.PALETTE[0]}"' in dot
    assert f'fillcolor="{display.PALETTE[1]}"' in dot
    # a is returned and read by the other kernel; the sum is returned
    assert dot.count("peripheries=2") == 2
    assert "a -> d;" in dot and "d -> e;" in dot and "b -> e;" in dot  # c is the constant 2.0
    assert "shape=ellipse" in dot  # arguments
    assert "xlabel" not in dot  # floating labels land beside whichever edge is nearby


def _edges(dot: str) -> set[tuple[str, str]]:
    pairs = set()
    for line in dot.splitlines():
        line = line.strip()
        if " -> " in line and "style=invis" not in line:
            source, target = line.split(" -> ")
            pairs.add((source, target.split(" ")[0].rstrip(";")))
    return pairs


def _blocks(dot: str) -> dict[str, str]:
    """Each cluster's body, by cluster name."""
    blocks, name = {}, None
    for line in dot.splitlines():
        if line.strip().startswith("subgraph cluster_"):
            name = line.split()[1]
            blocks[name] = ""
        elif line.strip() == "}":
            name = None
        elif name is not None:
            blocks[name] += line + "\n"
    return blocks


def test_each_returned_value_has_its_own_marker_linked_to_its_node():
    dot = display.to_dot(numfuse.trace(logp_and_grad, X, 0.5))
    # logp is g = true_divide (out 0), grad is h = negative (out 1)
    assert 'g [label="g = true_divide' in dot and 'h [label="h = negative' in dot
    assert ("g", "out_0") in _edges(dot) and ("h", "out_1") in _edges(dot)
    assert {target for _, target in _edges(dot) if target.startswith("out_")} == {"out_0",
                                                                                "out_1"}
    assert 'out_0 [label="out 0"' in dot and 'out_1 [label="out 1"' in dot
    assert all("out_" not in block for block in _blocks(dot).values())  # markers outside

    def same_twice_and_an_argument(x):
        y = x + 1.0
        return y, x, y

    dot = display.to_dot(numfuse.trace(same_twice_and_an_argument, X))
    marked = sorted((target, source) for source, target in _edges(dot)
                    if target.startswith("out_"))
    assert marked == [("out_0", "c"), ("out_1", "a"), ("out_2", "c")]


def test_kernel_titles_are_nodes_inside_their_clusters_not_cluster_labels():
    def three(x, y, z):
        return (x * y + z).sum(), x - z

    graph = numfuse.trace(three, X, X, 2.0)
    dot = display.to_dot(graph)
    blocks = _blocks(dot)
    assert blocks
    for name, block in blocks.items():
        region = name.removeprefix("cluster_")
        assert 'label="";' in block  # no cluster label for edges to run through
        assert f'title_{region} [label="kernel {region} {graph.layouts[int(region)]}"' in block
        # the title is placed above every node of the kernel that reads no other member
        assert f"title_{region} -> " in block and "style=invis" in block


def test_without_graphviz_html_falls_back_to_text_and_says_how(monkeypatch):
    monkeypatch.setattr(display.shutil, "which", lambda name: None)
    graph = numfuse.trace(logp_and_grad, X, 0.5)
    assert display.svg(graph) is None
    message = display.drawing_unavailable()
    assert message is not None and "dot" in message and "apt-get install graphviz" in message
    html = graph._repr_html_()
    assert "<pre " in html and "subtract a b" in html
    assert "No drawing" in html and "pip install graphviz" in html


DRAWINGS = pytest.mark.skipif(display.drawing_unavailable() is not None,
                              reason="Graphviz (python package and dot) not installed")


@DRAWINGS
def test_with_graphviz_graphs_render_as_svg():
    graph = numfuse.trace(logp_and_grad, X, 0.5)
    drawing = display.svg(graph)
    assert drawing is not None and drawing.startswith("<svg")
    assert "kernel 0" in drawing and "true_divide" in drawing and "out 1" in drawing
    assert "<svg" in graph._repr_html_()


def _svg_points(path: str) -> list[tuple[float, float]]:
    numbers = [float(value) for value in re.findall(r"-?\d+(?:\.\d+)?", path)]
    return list(zip(numbers[::2], numbers[1::2], strict=False))


def _bezier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points along an SVG path ``M p0 C p1 p2 p3 C ...`` (cubic segments), densely."""
    samples = []
    for start in range(0, len(points) - 3, 3):
        p0, p1, p2, p3 = points[start:start + 4]
        for step in range(21):
            t = step / 20
            samples.append(tuple(
                (1 - t) ** 3 * a + 3 * (1 - t) ** 2 * t * b + 3 * (1 - t) * t**2 * c + t**3 * d
                for a, b, c, d in zip(p0, p1, p2, p3, strict=True)))
    return samples


@DRAWINGS
@pytest.mark.parametrize("case", ["logp", "two_kernels", "black_scholes"])
def test_drawn_edges_keep_clear_of_kernel_titles(case):
    def black_scholes(s, k, t, r, v):
        d1 = (np.log(s / k) + (r + 0.5 * v**2) * t) / (v * np.sqrt(t))
        d2 = d1 - v * np.sqrt(t)
        return s * d1 - k * np.exp(-r * t) * d2, d1.sum()

    graph = {"logp": lambda: numfuse.trace(logp_and_grad, X, 0.5),
             "two_kernels": lambda: numfuse.trace(two_kernels, X, np.ones((8, 8))),
             "black_scholes": lambda: numfuse.trace(black_scholes, X, X, X, 0.1, X)}[case]()
    drawing = display.svg(graph)
    assert drawing is not None
    groups = re.findall(r'<g id="\w+" class="(node|edge)">\s*<title>(.*?)</title>(.*?)</g>',
                        drawing, re.S)
    boxes = []
    for kind, title, body in groups:
        if kind == "node" and title.startswith("title_"):
            x, y, size = (float(value) for value in re.search(
                r'<text[^>]* x="([-\d.]+)" y="([-\d.]+)"[^>]*font-size="([\d.]+)"',
                body).groups())
            text = re.search(r">([^<]*)</text>", body).group(1)
            half = len(text) * size * 0.3  # about 0.6 em per character, centred
            boxes.append((x - half, y - size, x + half, y + 2))
    assert len(boxes) == len(set(graph.region_of.values()))
    edges = [body for kind, title, body in groups if kind == "edge"]
    assert edges
    for body in edges:
        path = re.search(r'<path[^>]* d="([^"]+)"', body)
        if path is None:
            continue
        for px, py in _bezier(_svg_points(path.group(1))):
            for left, top, right, bottom in boxes:
                assert not (left <= px <= right and top <= py <= bottom), \
                    f"an edge runs through a kernel title in {case}"


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


def _unstyled(html: str) -> str:
    return re.sub(r' style="[^"]*"', "", html)


def test_explanation_html_tabulates_boundaries_with_the_partitioners_reasons():
    def softmax(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def scaled(x, h):
        return x * (-h), x + h

    x = np.ones((4, 5))
    report = _unstyled(numfuse.compile(softmax, x).explain(x, vectorisation=False)._repr_html_())
    assert "<th>between</th><th>reason</th><th>why</th>" in report
    assert "<td>region 0 -&gt; region 1 at d:f64[n,n]</td>" in report
    assert "<td>reduction read inside its own loop</td>" in report
    assert "sum e is complete only after the loop that computes it" in report
    report = _unstyled(numfuse.compile(scaled, X, 0.5).explain(X, 0.5)._repr_html_())
    assert "c:f64[] = negative b  (before the loop)" in report
    assert "Fusion boundaries: none." in report


def test_explanation_html_sets_equations_left_aligned_in_monospace():
    report = numfuse.compile(logp_and_grad, X, 0.5).explain(X, 0.5)._repr_html_()
    cells = re.findall(r"<t([dh])( style=\"[^\"]*\")?>", report)
    assert cells and all("text-align:left" in style for _, style in cells)
    assert all("vertical-align:top" in style for _, style in cells)
    listings = re.findall(r'<pre style="([^"]*)">(.*?)</pre>', report, re.S)
    assert len(listings) == 1
    style, text = listings[0]
    assert "font-family:monospace" in style and "text-align:left" in style
    assert "white-space:pre" in style and "margin:0" in style
    # one equation a line, each starting at the left edge, in running order
    lines = text.split("\n")
    assert lines[0] == "c:f64[n] = subtract a b" and len(lines) == 5
    assert all(not line.startswith(" ") for line in lines)


def test_explanation_html_says_how_a_kernel_of_passes_runs():
    def standardise(x):
        return (x - x.mean(axis=0)) / x.std(axis=0)

    page = numfuse.compile(standardise, np.ones((6, 4))).explain()._repr_html_()
    assert "3 passes over the rows (axis 0)" in page
    assert "(accumulated in pass 1)" in page and "(per column, after pass 2)" in page
