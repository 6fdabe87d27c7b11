"""luminal: a search-based inference compiler.

Build graphs of primitive ops (``luminal.Graph``, ``luminal.Tensor`` and the op functions),
compile them for a backend (``luminal.compile``) and run them; load and run language models
(``luminal.LanguageModel``, ``luminal.generate``); or hand PyTorch modules to
``torch.compile(model, backend="luminal")`` (see ``luminal.torch_backend``).
"""
from ._luminal import *  # noqa: F401,F403  the C++ core: Graph, Tensor, ops, compile, LanguageModel
from ._luminal import Error, Graph, LanguageModel
from ._luminal import compile as _compile_graph

__all__ = ["Error", "Graph", "LanguageModel", "compile", "generate"]


def compile(graph_or_model, *args, **kwargs):
    """``compile(graph, backend="cpu", search=0, ...)``: a luminal Graph's plan, ready to run.

    ``compile(model, example_inputs, dynamic_shapes=None, **options)``: a PyTorch module (or
    ExportedProgram) through torch.export, as a callable (see luminal.export)."""
    if isinstance(graph_or_model, Graph):
        return _compile_graph(graph_or_model, *args, **kwargs)
    from .export import compile_module

    return compile_module(graph_or_model, *args, **kwargs)

import sys as _sys

# torch.compile(model, backend="luminal"): registered here when torch is already loaded (and
# through the torch_dynamo_backends entry point when the package is installed).
if "torch" in _sys.modules:
    from . import torch_backend  # noqa: F401


def generate(model, prompt, max_new_tokens=128, backend="cpu", **sampling):
    """The CLI's generate job: load `model` (a path, or a loaded LanguageModel), generate from
    `prompt` (text or token ids) and return a dict with tokens, text, stop_reason, ttft_ms and
    tpot_ms. Sampling options: temperature, top_k, top_p, seed, ignore_eos."""
    if isinstance(model, str):
        model = LanguageModel.load(model, backend=backend)
    return model.generate(prompt, max_new_tokens=max_new_tokens, **sampling)
