"""The registry of numpy functions: one record per function, every fact consistent."""

from __future__ import annotations

import numpy as np
import pytest

import numfuse
from numfuse.registry import FRESH_FUNCTIONS, METHODS, REGISTRY, Kind, lookup, numpy_name


@pytest.mark.parametrize("record", list(REGISTRY.values()), ids=lambda record: record.name)
def test_every_record_is_consistent(record):
    assert lookup(record.function) is record
    assert (record.refused is not None) == (record.kind is Kind.REFUSED)
    if record.reduces is not None:
        assert record.reduction and isinstance(getattr(np, record.reduces), np.ufunc)
    if record.fresh:
        assert record.kind in (Kind.CALL, Kind.DATA_DEPENDENT)
    if not record.name.startswith("ndarray."):
        assert numpy_name(record.function) == record.name


def test_every_method_is_an_ndarray_method_traced_as_a_numpy_function():
    for name, record in METHODS.items():
        assert hasattr(np.ndarray, name) and record.method
    assert METHODS["sum"] is lookup(np.sum)
    assert METHODS["sort"].kind is Kind.WRITER        # x.sort() writes into a copy


def test_reductions_and_fresh_results():
    assert lookup(np.sum).reduces == "add" and lookup(np.max).reduces == "maximum"
    assert lookup(np.cumsum).reduction and lookup(np.cumsum).reduces is None
    assert np.matmul in FRESH_FUNCTIONS and np.reshape not in FRESH_FUNCTIONS


def test_refused_functions_say_why():
    with pytest.raises(numfuse.UnsupportedOperationError, match="writes a file"):
        numfuse.jit(lambda x: np.save("x.npy", x))(np.ones(3))


def test_the_listed_functions_are_the_supported_ones():
    supported = set(numfuse.supported_functions())
    listed = {f"np.{record.name}" for record in REGISTRY.values()
              if record.kind in (Kind.CALL, Kind.DATA_DEPENDENT)
              and not record.name.startswith("ndarray.")}
    assert listed <= supported
