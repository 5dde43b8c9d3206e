"""numba is used by one module, which checks the numba version it was written for."""

from __future__ import annotations

import ast
from pathlib import Path

import numba
import pytest

import numfuse
from numfuse.backend import numba_private

PACKAGE = Path(numfuse.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_numba_is_imported_by_one_module():
    importers = sorted(
        str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
        if any(name == "numba" or name.startswith("numba.") for name in _imported_modules(path)))
    assert importers == ["backend/numba_private.py"]


def test_the_installed_numba_is_the_one_the_module_was_written_for():
    assert numba_private.version_problem(numba.__version__) is None, (
        numba_private.version_problem(numba.__version__))


@pytest.mark.parametrize("version", [f"{numba_private.WRITTEN_FOR}.0",
                                     f"{numba_private.WRITTEN_FOR}.3",
                                     f"{numba_private.WRITTEN_FOR}.1rc1"])
def test_patch_releases_of_the_written_for_version_pass(version):
    assert numba_private.version_problem(version) is None


@pytest.mark.parametrize("version", ["0.60.0", "0.69.0", "1.0.0", "0.6", "0.680.1"])
def test_other_versions_are_reported_with_what_to_install(version):
    problem = numba_private.version_problem(version)
    assert problem is not None
    assert version in problem and f"numba=={numba_private.WRITTEN_FOR}.*" in problem


def test_thread_count_reads_numba_without_starting_its_pool():
    assert numba_private.thread_count() >= 1


def test_thread_count_follows_numbas_setting_once_its_pool_runs():
    numba.get_num_threads()  # starts numba's pool
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert numba_private.thread_count() == 1
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        assert numba_private.thread_count() == numba.config.NUMBA_NUM_THREADS
    finally:
        numba.set_num_threads(before)
