"""The numpy functions tracing knows by name, and what each does (a non-fusible call,
a data-dependent size, a writer, refused...)."""

from __future__ import annotations

from typing import Any

import numpy as np


def _calls(*names: str) -> dict[Any, str]:
    found = {}
    for name in names:
        target: Any = np
        for part in name.split("."):
            target = getattr(target, part, None)
        if target is not None:
            found[target] = name
    return found


# numpy functions traced as non-fusible calls: each returns one array whose shape depends
# only on its inputs' shapes (never on their values).
CALLS: dict[Any, str] = _calls(
    "sum", "prod", "mean", "min", "max", "amin", "amax", "any", "all", "std", "var",
    "argmin", "argmax", "cumsum", "cumprod", "nansum", "nanprod", "nanmean", "nanmin",
    "nanmax", "nanstd", "nanvar", "median", "percentile", "quantile", "average", "ptp",
    "dot", "vdot", "inner", "outer", "tensordot", "einsum", "kron", "cross", "trace",
    "reshape", "ravel", "transpose", "swapaxes", "moveaxis", "expand_dims", "squeeze",
    "broadcast_to", "atleast_1d", "atleast_2d", "atleast_3d", "concatenate", "stack",
    "hstack", "vstack", "dstack", "column_stack", "zeros_like", "ones_like", "full_like",
    "empty_like", "flip", "fliplr", "flipud", "roll", "rot90", "tile", "repeat", "sort",
    "diff", "diagonal", "diag", "triu", "tril", "take", "pad", "nan_to_num", "interp",
    "linalg.norm", "linalg.det", "linalg.inv", "linalg.solve", "linalg.pinv",
    "linalg.matrix_power", "matrix_transpose", "isclose", "sinc", "angle",
    "i0", "convolve", "correlate", "searchsorted", "digitize", "cov", "corrcoef", "argsort",
    "partition", "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian",
    "nanpercentile", "nanquantile", "cumulative_sum", "cumulative_prod", "unwrap", "trapezoid",
    "polyval", "select", "fft.fft", "fft.ifft", "fft.rfft", "fft.irfft", "fft.fft2",
    "fft.ifft2", "fft.fftn", "fft.ifftn", "fft.fftshift", "fft.ifftshift", "append",
    "insert", "delete", "resize", "rollaxis", "block", "take_along_axis", "count_nonzero",
    "isin", "ediff1d", "piecewise", "apply_along_axis", "linalg.cholesky",
    "linalg.eigvalsh", "linalg.matrix_rank", "linalg.cond", "argpartition", "lexsort",
    "sort_complex", "vander", "packbits", "unpackbits", "allclose", "array_equal",
    "array_equiv", "linalg.tensorsolve", "linalg.multi_dot", "linalg.vector_norm",
    "linalg.matrix_norm", "linspace", "logspace", "geomspace",
    # several results, traced as one call per item
    "meshgrid", "broadcast_arrays", "split", "array_split", "hsplit", "vsplit", "dsplit",
    "gradient", "histogram", "histogram2d", "linalg.eigh", "linalg.qr", "linalg.svd",
    "linalg.slogdet", "linalg.lstsq",
)

# numpy functions whose result sizes depend on the values (``np.nonzero``, ``np.unique``,
# and ``x[mask]``): an axis whose size changes with the data is free at any size, 0 and 1
# included, and the runtime takes the size each call returns.
DATA_DEPENDENT: dict[Any, str] = _calls(
    "nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
    "unique_inverse", "unique_all", "compress", "extract", "trim_zeros", "bincount",
    "union1d", "intersect1d", "setdiff1d", "setxor1d",
)

# numpy functions that write into their first argument: traced as writes into a copy,
# into arrays the function made (as ``x[key] = v`` is).
WRITERS: dict[Any, str] = _calls(
    "copyto", "put", "putmask", "place", "fill_diagonal", "put_along_axis")

# numpy functions numfuse refuses to run on stand-ins, and why.
REFUSED: dict[Any, str] = {
    **dict.fromkeys(_calls("save", "savez", "savez_compressed", "savetxt"),
                    "it writes a file, which a traced function does once, while tracing"),
    **dict.fromkeys(_calls("shares_memory", "may_share_memory"),
                    "a traced value has no memory to compare until it runs"),
}


def numpy_name(func: Any) -> str:
    """``func``'s name under ``np`` (``linalg.eig``, ``lib.stride_tricks.as_strided``)."""
    name = getattr(func, "__name__", repr(func))
    for prefix, namespace in (("", np), ("linalg.", np.linalg), ("fft.", np.fft),
                              ("lib.stride_tricks.", np.lib.stride_tricks)):
        if getattr(namespace, name, None) is func:
            return prefix + name
    module = getattr(func, "__module__", None) or ""
    return f"{module.removeprefix('numpy.')}.{name}" if module else name


# Calls whose result never shares memory with an operand (reductions count too): their
# operands and results may still be written in place.
FRESH_CALLS: frozenset[Any] = frozenset(_calls(
    "cumsum", "cumprod", "argmin", "argmax", "nansum", "nanprod", "nanmean", "nanmin", "nanmax",
    "nanstd", "nanvar", "median", "percentile", "quantile", "average", "ptp", "dot", "vdot",
    "inner", "outer", "tensordot", "kron", "cross", "concatenate", "stack", "hstack",
    "vstack", "dstack", "column_stack", "zeros_like", "ones_like", "full_like", "empty_like",
    "roll", "tile", "repeat", "sort", "diff", "pad", "interp", "linalg.norm", "linalg.det",
    "linalg.inv", "linalg.solve", "linalg.pinv", "isclose", "sinc", "angle", "i0",
    "convolve", "correlate", "searchsorted", "digitize", "cov", "corrcoef", "argsort",
    "nanargmax", "nanargmin", "nancumsum", "nancumprod", "nanmedian", "nanpercentile",
    "nanquantile", "cumulative_sum", "cumulative_prod", "trapezoid", "polyval", "append",
    "insert", "delete", "matmul", "take_along_axis", "count_nonzero", "isin", "ediff1d",
    "piecewise", "apply_along_axis", "linalg.cholesky", "linalg.eigvalsh", "linalg.matrix_rank",
    "linalg.cond", "meshgrid", "gradient", "histogram", "histogram2d", "linalg.eigh",
    "linalg.qr", "linalg.svd", "linalg.slogdet", "linalg.lstsq", "linspace", "logspace",
    "geomspace", *(
        name for name in DATA_DEPENDENT.values() if name != "trim_zeros"),
))

# Array methods traced as calls of these numpy functions.
METHODS: dict[str, Any] = {
    name: getattr(np, name) for name in (
        "sum", "prod", "mean", "min", "max", "any", "all", "std", "var", "argmin", "argmax",
        "cumsum", "cumprod", "ravel", "swapaxes", "squeeze", "repeat", "dot", "trace",
        "diagonal", "take", "argsort", "argpartition", "choose", "searchsorted",
    ) if hasattr(np.ndarray, name)
} | {"byteswap": np.ndarray.byteswap}

# Array methods writing into the array: traced as writes into a copy.
WRITING_METHODS: dict[str, Any] = {
    name: getattr(np.ndarray, name) for name in ("sort", "fill", "partition", "put")}
