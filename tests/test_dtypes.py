"""numfuse.dtypes: facts about numbers and dtypes, checked against numpy."""
import warnings

import numpy as np
import pytest

from numfuse.dtypes import overflows_in_cast

NUMBERS = [1.0, -2.5, 1e300, -1e300, 3.4028235e38, 3.4028236e38, 3.5e38, 65504.0, 65520.0,
           np.inf, -np.inf, np.nan, 1e300j, complex(1.0, 1e39), complex(np.inf, 1e300)]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64",
                                   "complex128"])
@pytest.mark.parametrize("value", NUMBERS)
def test_overflows_in_cast_is_numpys_overflow_warning(value, dtype):
    dtype = np.dtype(dtype)
    if isinstance(value, complex) and dtype.kind == "f":
        pytest.skip("a complex number is not cast to a real loop")
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        np.asarray(value).astype(dtype)
    warned = any("overflow" in str(warning.message) for warning in caught)
    assert overflows_in_cast(value, dtype) == warned


def test_overflows_in_cast_only_between_floats():
    assert not overflows_in_cast(10**6, np.dtype(np.int8))
    assert not overflows_in_cast(1e300, np.dtype(np.int32))
