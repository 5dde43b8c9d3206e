"""numfuse: fuse numpy code into multi-output numba kernels.

>>> import numfuse, numpy as np
>>> @numfuse.jit
... def logp_and_grad(x, mu):
...     d = x - mu
...     return -(d ** 2) / 2, -d
"""

from . import cache, display, hooks, memory
from .api import Compiled, Jitted, compile, jit, trace
from .autodiff import NotDifferentiableError, grad, value_and_grad, vjp
from .errors import (
    CallShapeError,
    ConcretizationError,
    NumfuseError,
    NumpyFallbackWarning,
    SignatureMismatchError,
    TracingError,
    UnsupportedDtypeError,
    UnsupportedOperationError,
)
from .graph import Graph, Node
from .hooks import CompileEvent, HookWarning
from .inspection import Explanation, VectorReport
from .kernel import Kernel
from .memory import retain_freed_memory
from .trace import supported_functions
from .version import __version__ as __version__

memory._from_environment()  # NUMFUSE_RETAIN_MEMORY=1: keep freed blocks (see memory.py)

__all__ = [
    "CallShapeError",
    "CompileEvent",
    "Compiled",
    "ConcretizationError",
    "Explanation",
    "Graph",
    "HookWarning",
    "Jitted",
    "Kernel",
    "Node",
    "NotDifferentiableError",
    "NumfuseError",
    "NumpyFallbackWarning",
    "SignatureMismatchError",
    "TracingError",
    "UnsupportedDtypeError",
    "UnsupportedOperationError",
    "VectorReport",
    "cache",
    "compile",
    "display",
    "grad",
    "hooks",
    "jit",
    "memory",
    "retain_freed_memory",
    "supported_functions",
    "trace",
    "value_and_grad",
    "vjp",
]
