"""Aten ops as luminal graph ops: one function per aten overload, each taking luminal Tensors
(where the FX graph has tensors), luminal Exprs (symbolic sizes) and Python values.

``LOWERINGS`` maps an aten OpOverload (or an OpOverloadPacket, covering all its overloads) to
its function, ``NAMED_LOWERINGS`` other libraries' ops by name. torch_backend.py walks the FX
graph and calls them; an op missing here fails at compile time with its name and the line of
the model that made it. One module per family of ops; importing them registers their lowerings.
"""
from . import convolution, creation, elementwise, indexing, linalg, movement, reductions, sorting  # noqa: F401
from .common import DTYPES, LOWERINGS, Lowering, luminal_dtype
from .linalg import NAMED_LOWERINGS

__all__ = ["DTYPES", "LOWERINGS", "NAMED_LOWERINGS", "Lowering", "luminal_dtype"]
