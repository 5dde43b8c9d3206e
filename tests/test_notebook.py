"""examples/walkthrough.ipynb runs, and its prose says what its outputs show.

A markdown cell states the facts it claims in comments, ``<!-- expect: text -->``; each
must appear in the output of the code cells between it and the next markdown cell. The
timing cell's closing verdicts must agree with its own table, and the text around it
claims no speed-up of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "walkthrough.ipynb"
EXPECT = re.compile(r"<!--\s*expect:\s*(.*?)\s*-->", re.S)


def _text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.data.get("text/plain", ""))
        elif output.output_type == "error":
            parts.append("\n".join(output.traceback))
    return "".join(parts)


@pytest.fixture(scope="module")
def executed():
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    return notebook


def _sections(notebook) -> list[tuple[str, str]]:
    """Each markdown cell's source and the joined output of the code cells after it."""
    sections: list[tuple[str, list[str]]] = []
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            sections.append((cell.source, []))
        elif sections:
            sections[-1][1].append(_text(cell))
    return [(source, "\n".join(outputs)) for source, outputs in sections]


def test_every_claim_of_the_prose_is_in_the_outputs_that_follow_it(executed):
    checked = 0
    for source, output in _sections(executed):
        for claim in EXPECT.findall(source):
            assert claim in output, f"the notebook says {claim!r} but its cells print:\n{output}"
            checked += 1
    assert checked >= 15


def test_the_ir_shown_is_the_loop_function_not_the_module(executed):
    cell = next(cell for cell in executed.cells if cell.get("id") == "ir")
    text = _text(cell)
    assert text.startswith("define ") and ".row(" in text.splitlines()[0]
    assert "declare" not in text and "; ModuleID" not in text


def test_the_timing_verdicts_match_the_timing_table(executed):
    cell = next(cell for cell in executed.cells if cell.get("id") == "timing")
    assert "statistics.median" in cell.source and "reversed(order)" in cell.source
    text = _text(cell)
    rows = re.findall(r"^\s*([\d,]+) .*?([\d.]+)x\s+([\d.]+)x$", text, re.M)
    assert len(rows) == 3
    for column, name in ((1, "numfuse"), (2, "1 thread")):
        verdict = re.search(rf"^{name} vs numpy: (.*)$", text, re.M)
        assert verdict is not None
        for row in rows:
            ratio = float(row[column])
            word = "faster" if ratio > 1.1 else "slower" if ratio < 0.9 else "within 10%"
            assert f"{word} at n={row[0]}" in verdict.group(1)
    assert "results identical to numpy's" in text
    prose = next(cell.source for cell in executed.cells if cell.get("id") == "timing-md")
    assert not re.search(r"faster|speed-?up|\d+(\.\d+)?x\b", prose)
