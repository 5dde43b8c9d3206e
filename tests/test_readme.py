"""The README's code runs, and the output it shows is the output it gives.

Every ```python block of README.md is executed, in order, in one namespace (the README
reads as one session). A ```text block right after a python block is that block's
expected standard output, compared line by line (trailing spaces ignored); a line ``...``
stands for any lines and ``...`` inside a line for any text (doctest's ELLIPSIS).

What legitimately differs from one machine or build to the next is normalised on both
sides before comparing: kernel names (a hash of the kernel's source), SIMD widths
(``<4 x double>``, ``4 x double lanes``) and LLVM's numbered value names (``%12``,
``%sunkaddr28``).

A comment ``<!-- readme-test: needs dask, xarray -->`` on the line before a block skips it
when those modules are missing; ``<!-- readme-test: skip (why) -->`` never runs it.  Shell
blocks are not run, except that the README must open with the two commands that install
and run the demo and the tests.
"""

from __future__ import annotations

import contextlib
import doctest
import importlib.util
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(skip|needs)\b([^>]*)-->")
NORMALISE = [
    (re.compile(r"\bkernel_[0-9a-f]{16}\b"), "kernel_<hash>"),
    (re.compile(r"<\d+ x "), "<N x "),
    (re.compile(r"\b\d+ x (double|float|i\d+) lanes"), r"N x \1 lanes"),
    (re.compile(r"\bto \d+ lanes\b"), "to N lanes"),
    (re.compile(r"%([A-Za-z_.]*?)\d+\b"), r"%\1N"),
]


@dataclass
class Block:
    line: int  # where the block's code starts in README.md (1-based)
    code: str
    expected: str | None  # the text block right after it, if any
    skip: str | None  # why the block is not run here


def _blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    fences = []  # (language, first line of the body, body)
    index = 0
    while index < len(lines):
        match = re.match(r"^```(\w*)\s*$", lines[index])
        if match:
            end = index + 1
            while not lines[end].startswith("```"):
                end += 1
            fences.append((match.group(1), index, "\n".join(lines[index + 1:end]) + "\n", end))
            index = end
        index += 1
    blocks = []
    for number, (language, start, body, end) in enumerate(fences):
        if language != "python":
            continue
        following = fences[number + 1] if number + 1 < len(fences) else None
        expected = following[2] if following and following[0] == "text" and \
            following[1] == end + 1 else None
        before = lines[start - 1] if start else ""
        marker = MARKER.search(before)
        skip = None
        if marker and marker.group(1) == "skip":
            skip = marker.group(2).strip() or "marked skip in README.md"
        elif marker:
            missing = [name.strip() for name in marker.group(2).split(",")
                       if importlib.util.find_spec(name.strip()) is None]
            skip = f"needs {', '.join(missing)}" if missing else None
        blocks.append(Block(start + 2, body, expected, skip))
    return blocks


BLOCKS = _blocks(README.read_text())


def _normalised(text: str) -> str:
    for pattern, replacement in NORMALISE:
        text = pattern.sub(replacement, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


@pytest.fixture(scope="module")
def session():
    """Runs every block once, in order, in one namespace: each block's output or error."""
    namespace: dict[str, object] = {"__name__": "readme"}
    results: dict[int, tuple[str, BaseException | None]] = {}
    for block in BLOCKS:
        if block.skip:
            continue
        output = io.StringIO()
        error = None
        try:
            with contextlib.redirect_stdout(output):
                exec(compile(block.code, f"README.md:{block.line}", "exec"), namespace)
        except Exception as raised:
            error = raised
        results[block.line] = (output.getvalue(), error)
    return results


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{block.line}" for block in BLOCKS])
def test_readme_block_runs_and_prints_what_the_readme_shows(block, session):
    if block.skip:
        pytest.skip(block.skip)
    assert ">>>" not in block.code, "write output as a ```text block after the code"
    output, error = session[block.line]
    if error is not None:
        raise AssertionError(f"README.md line {block.line} raised") from error
    if block.expected is None:
        return
    want, got = _normalised(block.expected), _normalised(output)
    checker = doctest.OutputChecker()
    if not checker.check_output(want, got, doctest.ELLIPSIS):
        shown = re.sub(r"(?m)^$", "<BLANKLINE>", want.rstrip("\n")) + "\n"
        difference = checker.output_difference(doctest.Example("", shown), got,
                                                doctest.ELLIPSIS | doctest.REPORT_UDIFF)
        pytest.fail(f"README.md line {block.line}: the output shown is not what the code "
                    f"prints now:\n{difference}", pytrace=False)


def test_readme_opens_with_the_demo_and_the_test_commands():
    text = README.read_text()
    assert text.startswith(
        "```bash\n"
        "pip install -e . && python examples/logp_grad.py\n"
        "pip install -e '.[test]' && python -m pytest -q\n"
        "```\n")


def test_python_blocks_are_found_and_outputs_paired():
    assert len(BLOCKS) >= 8
    assert sum(block.expected is not None for block in BLOCKS) >= 5
    assert all(block.skip is None or block.skip.startswith("needs") for block in BLOCKS)


def test_the_normalised_output_comparison_catches_a_stale_listing():
    shown = "def kernel(in0, out0):\n    for i in range(out0.shape[0]):\n...\n"
    printed = "def kernel(in0, out0):\n    n = in0.shape[0]\n    for i in range(n):\n"
    checker = doctest.OutputChecker()
    assert not checker.check_output(_normalised(shown), _normalised(printed), doctest.ELLIPSIS)
    assert checker.check_output(_normalised("  %0 = fsub <4 x double> %wide.load\n...\n"),
                                _normalised("  %3 = fsub <8 x double> %wide.load\n  ret\n"),
                                doctest.ELLIPSIS)
