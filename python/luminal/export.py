"""``luminal.compile(model, example_inputs)`` for torch.export users.

The model (or an ExportedProgram) is exported, decomposed to core aten and lowered by the same
walk as the torch.compile backend (torch_backend.LuminalGraph). Parameters, buffers and
constants are the program's own and are set once; calls take the user inputs only. Buffer and
input mutations that the program returns are copied back into their tensors after each run.
"""
import torch
import torch.utils._pytree as pytree
from torch.export.graph_signature import InputKind, OutputKind

from .torch_backend import LuminalGraph, backend_for, check_options, math_attention


class ExportedModule:
    """A compiled ExportedProgram: call it like the model."""

    def __init__(self, program, options):
        from torch._decomp import core_aten_decompositions

        with math_attention():
            self.program = program.run_decompositions(core_aten_decompositions())
        sig = self.program.graph_signature
        self.input_specs = sig.input_specs
        self.output_specs = sig.output_specs
        state = dict(self.program.state_dict)
        state.update(self.program.constants)
        self.state = state
        placeholders = [n for n in self.program.graph_module.graph.nodes if n.op == "placeholder"]
        examples = [n.meta.get("val") for n in placeholders]
        opts = {**options, "backend": backend_for(examples, options["backend"])}
        self.graph = LuminalGraph(self.program.graph_module, opts)

    def _flat_inputs(self, args, kwargs):
        user = pytree.tree_leaves((args, kwargs))
        flat, k = [], 0
        for spec in self.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                if k >= len(user):
                    raise TypeError(f"luminal: the exported model takes {sum(s.kind == InputKind.USER_INPUT for s in self.input_specs)} inputs")
                flat.append(user[k])
                k += 1
            else:
                flat.append(self.state[spec.target])
        return flat

    def __call__(self, *args, **kwargs):
        flat = self._flat_inputs(args, kwargs)
        outs = self.graph(*flat)
        user_outputs = []
        for spec, value in zip(self.output_specs, outs):
            if spec.kind == OutputKind.BUFFER_MUTATION:
                self.state[spec.target].copy_(value)
            elif spec.kind == OutputKind.USER_INPUT_MUTATION:
                names = [s.arg.name for s in self.input_specs]
                flat[names.index(spec.target)].copy_(value)
            else:
                user_outputs.append(value)
        return pytree.tree_unflatten(user_outputs, self.program.call_spec.out_spec)


def compile_module(model, example_inputs=(), dynamic_shapes=None, **options):
    """Export `model` with `example_inputs` (an nn.Module; or pass an ExportedProgram) and
    compile it with luminal. Options as torch.compile's: backend, search, threads."""
    opts = check_options(options)
    if isinstance(model, torch.export.ExportedProgram):
        program = model
    else:
        with torch.no_grad(), math_attention():
            program = torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes)
    return ExportedModule(program, opts)
