"""Lowering: a generated kernel becomes LLVM IR, with no compiler front end in between.

``codegen`` writes each kernel as Python statements (``KernelProgram``); this stage turns
them into LLVM IR directly with llvmlite: ``loops`` makes numpy's gufunc inner-loop
function, ``scalars`` compiles the statements and the helpers of ``kernel_lib`` they call
(typed as numba types the same Python), ``types`` holds the dtype rules.  Nothing here
imports numba: the backend optimises, links and loads the IR.
"""

from __future__ import annotations

from .loops import GRANULE, LoweredKernel, lower, row_symbol
from .scalars import HELPERS, RARE_PREFIX, VECTOR_VARIANT_PREFIX, Fallback, LoweringError

__all__ = ["GRANULE", "HELPERS", "RARE_PREFIX", "VECTOR_VARIANT_PREFIX", "Fallback",
           "LoweredKernel", "LoweringError", "lower", "row_symbol"]
