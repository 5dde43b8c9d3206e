"""Notebook display: HTML for graphs, compiled functions and explain() reports, and graph
drawings (SVG) through graphviz.

A drawing needs the ``graphviz`` Python package *and* Graphviz's ``dot`` program; without
them every object still renders as HTML text, with a note saying how to enable drawings.
``to_dot(graph)`` always works: it returns the DOT source (regions as coloured clusters,
each titled by a node ``kernel k <layout>`` at its top; materialised region outputs with
a double border; each returned value linked by a dashed edge to a marker ``out k``).

``graph.py`` stays free of presentation code: importing this module gives ``Graph`` its
``_repr_html_`` (``numfuse`` imports it).
"""

from __future__ import annotations

import html
import shutil
from typing import TYPE_CHECKING, Any

from .graph import CONST, ELEMENTWISE, INPUT, Graph, Node, node_names

if TYPE_CHECKING:
    from .api import Compiled
    from .inspection import Explanation

PALETTE = ("#cfe2ff", "#d1e7dd", "#fff3cd", "#f8d7da", "#e2d9f3", "#d2f4ea", "#fde2c8",
           "#e0e0e0")

ENABLE_DRAWINGS = ("graph drawings need Graphviz: `pip install graphviz` (or "
                   "`pip install numfuse[draw]`) and the `dot` program (`apt-get install "
                   "graphviz`, `brew install graphviz` or `conda install graphviz`)")


def drawing_unavailable() -> str | None:
    """None when graphs can be drawn here, else what is missing and how to get it."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return f"the graphviz Python package is not installed; {ENABLE_DRAWINGS}"
    if shutil.which("dot") is None:
        return f"Graphviz's `dot` program is not on PATH; {ENABLE_DRAWINGS}"
    return None


def _names(graph: Graph) -> dict[Node, str]:
    return node_names(graph.nodes)


def _label(node: Node, names: dict[Node, str]) -> str:
    if node.kind == INPUT:
        return f"{names[node]}: arg {node.index}\\n{node.type_str()}"
    if node.kind == CONST:
        return f"{names[node]}: const\\n{node.type_str()}"
    call = node.call
    op = getattr(call, "name", node.op)
    return f"{names[node]} = {op}\\n{node.type_str()}"


def _quote(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def to_dot(graph: Graph) -> str:
    """The graph as Graphviz DOT source (see the module docstring for the conventions).

    A kernel's title is a node of its own at the top of its cluster (``title_k``), not
    the cluster's label: edges are routed around nodes but straight through cluster
    labels.  Each returned value gets a marker node ``out_k`` outside every cluster and an
    edge from the node holding it, so the marker cannot be mistaken for another edge's.
    """
    names = _names(graph)
    returned = set(graph.outputs)
    drawn = [node for node in graph.nodes
             if not (node.kind == CONST and node.ndim == 0) or node in returned]
    members: dict[int, list[Node]] = {}
    for node in drawn:
        region = graph.region_of.get(node)
        if region is not None:
            members.setdefault(region, []).append(node)
    stored = {source for node in drawn for source in node.inputs
              if source in graph.region_of and graph.region_of.get(node) != graph.region_of[source]}
    lines = ["digraph numfuse {", "  rankdir=TB;", "  graph [fontname=Helvetica];",
             '  node [shape=box, style="rounded,filled", fillcolor=white, fontname=Helvetica];']

    def node_line(node: Node) -> str:
        attributes = [f"label={_quote(_label(node, names))}"]
        if node.kind == INPUT:
            attributes.append("shape=ellipse")
        elif node.kind not in (CONST, ELEMENTWISE):
            attributes += ["shape=box3d", "fillcolor=\"#eeeeee\""]
        if node in stored or node in returned:
            attributes.append("peripheries=2")
        if node in returned:
            attributes.append("penwidth=2")
        return f"  {names[node]} [{', '.join(attributes)}];"

    for region, nodes in sorted(members.items()):
        colour = PALETTE[region % len(PALETTE)]
        layout = graph.layouts.get(region, "")
        inside = set(nodes)
        # the title sits above the nodes that read nothing computed in the same kernel
        first = [node for node in nodes if not any(source in inside for source in node.inputs)]
        lines += [f"  subgraph cluster_{region} {{",
                  f'    label=""; style=filled; color="{colour}"; fillcolor="{colour}";',
                  f"    title_{region} [label={_quote(f'kernel {region} {layout}'.rstrip())}, "
                  'shape=plaintext, style="", fontsize=12];']
        lines += ["  " + node_line(node) for node in nodes]
        lines += [f"    title_{region} -> {names[node]} [style=invis];" for node in first]
        lines.append("  }")
    lines += [node_line(node) for node in drawn if node not in graph.region_of]
    for node in drawn:
        for source in node.inputs:
            if source in names and not (source.kind == CONST and source.ndim == 0):
                lines.append(f"  {names[source]} -> {names[node]};")
    for index, node in enumerate(graph.outputs):
        lines += [f'  out_{index} [label="out {index}", shape=plaintext, style=""];',
                  f"  {names[node]} -> out_{index} [style=dashed];"]
    lines.append("}")
    return "\n".join(lines)


def svg(graph: Graph) -> str | None:
    """The graph drawn as SVG text, or None when drawings are unavailable here."""
    if drawing_unavailable() is not None:
        return None
    import graphviz

    drawing = str(graphviz.Source(to_dot(graph)).pipe(format="svg", encoding="utf-8"))
    return drawing[drawing.find("<svg"):]  # without the XML prolog, to embed in HTML


# Inline styles: notebook front ends right-align table cells and may restyle <pre>; a
# report reads best left-aligned, in monospace, top-aligned and without stray margins.
CELL_STYLE = "text-align:left; vertical-align:top; padding:2px 8px"
PRE_STYLE = ("text-align:left; font-family:monospace; white-space:pre; margin:0; "
             "padding:0; background:none; line-height:1.35")


def _pre(text: str) -> str:
    return f'<pre style="{PRE_STYLE}">{html.escape(text)}</pre>'


def graph_html(graph: Graph) -> str:
    """A drawing of the graph when possible; the printed graph (and why) otherwise."""
    drawing = svg(graph)
    if drawing is not None:
        return f"<div class='numfuse-graph'>{drawing}</div>"
    missing = drawing_unavailable() or ""
    return (f"<div class='numfuse-graph'>{_pre(str(graph))}"
            f"<p><small>No drawing: {html.escape(missing)}.</small></p></div>")


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f'<th style="{CELL_STYLE}">{html.escape(cell)}</th>' for cell in header)
    body = "".join("<tr>" + "".join(f'<td style="{CELL_STYLE}">{cell}</td>' for cell in row)
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def compiled_html(compiled: Compiled) -> str:
    """The compiled function: its signature, graph and kernels."""
    rows = [[str(index), f"<code>{html.escape(kernel.name)}</code>",
             f"<code>{html.escape(kernel.layout)}</code>", str(len(kernel.nodes)),
             str(kernel.n_inputs), str(kernel.n_outputs)]
            for index, kernel in enumerate(compiled.kernels)]
    return (f"<div class='numfuse-compiled'><p><b>{html.escape(repr(compiled))}</b></p>"
            + graph_html(compiled.graph)
            + _table(["kernel", "name", "layout", "ops", "inputs", "outputs"], rows)
            + "<p><small>compiled.explain() tells why fusion stopped where it did; "
              "compiled.kernels[k].llvm_ir() shows a kernel's LLVM IR.</small></p></div>")


def explanation_html(explanation: Explanation) -> str:
    """The explain() report as HTML: one table row per region, then a table of the
    boundaries (between which steps, the partitioner's reason, why in words)."""
    e = explanation
    rows = []
    for region in e.regions:
        outputs = "<br>".join(f"<code>{html.escape(name)}</code>: {html.escape('; '.join(why))}"
                              for name, why in region.outputs)
        vector = html.escape(region.vector.summary()) if region.vector is not None else ""
        listing = (region.passes, *region.listing) if region.passes else region.listing
        rows.append([str(region.index), f"<code>{html.escape(region.layout)}</code>",
                     _pre("\n".join(listing)), outputs, vector])
    parts = [f"<div class='numfuse-explain'><p><b>{html.escape(e.function)}"
             f"({html.escape(e.signature)})</b>: {e.numpy_loops} numpy loop(s) &rarr; "
             f"{len(e.regions)} kernel(s)</p>",
             _table(["region", "layout", "nodes", "outputs (why stored)", "vectorisation"],
                    rows)]
    if e.boundaries:
        boundaries = [[html.escape(boundary.steps), html.escape(boundary.reason.value),
                       html.escape(boundary.detail)] for boundary in e.boundaries]
        parts.append("<p>Fusion boundaries:</p>"
                     + _table(["between", "reason", "why"], boundaries))
    else:
        parts.append("<p>Fusion boundaries: none.</p>")
    memory = "<br>".join(html.escape(line.strip()) for line in e.memory_lines())
    parts.append(f"<p>{memory}</p></div>")
    return "".join(parts)


def _graph_repr_html(graph: Graph) -> str:
    return graph_html(graph)


def install() -> None:
    """Give ``Graph`` a ``_repr_html_`` (Jupyter looks the method up on the class)."""
    graph_class: Any = Graph
    graph_class._repr_html_ = _graph_repr_html


install()
