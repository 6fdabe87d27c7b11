"""The ``torch.compile`` backend: ``torch.compile(model, backend="luminal")``.

Dynamo hands the backend a captured graph; AOTAutograd (with PyTorch's core-aten
decompositions) turns it into an aten-level FX graph with parameters lifted to inputs and
in-place updates made functional. That graph is walked node by node into a luminal Graph
(the lowering package), compiled once for its symbolic shapes, and run on every call:

* symbolic sizes (SymInts) become luminal dims, so new sequence lengths reuse the plan;
* tensors go in by pointer where dtype and layout allow (numpy views of CPU tensors), and an
  input that has not changed since the last call (same storage, same version) is not set again,
  so weights are set once;
* an unsupported op fails at compile time with its name and the model line that made it.

Options (``torch.compile(..., options={...})``): ``backend`` ("cpu", "cuda" or "reference";
by default the inputs' device decides: CUDA tensors run on the cuda backend, by pointer),
``search`` (candidate plans to time, 0: the cost model's plan), ``threads``.
"""
import math
import threading

import numpy as np
import torch

from . import _luminal as L
from .lowering import LOWERINGS, NAMED_LOWERINGS, Lowering, luminal_dtype

OPTIONS = {"backend": None, "search": 0, "threads": 0}
_IGNORED_KWARGS = {"device", "layout", "pin_memory", "memory_format", "non_blocking", "requires_grad"}

# The torch dtype of each luminal dtype a value is held in.
_HELD = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32, "bool": torch.bool}


def held_dtype(dt):
    """The torch dtype luminal holds a torch dtype in (int64 as int32, float64 as float32)."""
    return _HELD[luminal_dtype(dt)]

# How many graphs this process compiled, and the last one (tests count recompiles with them).
compile_count = 0
last_graph = None


class LoweringError(NotImplementedError):
    """An op or value the luminal lowering does not cover, named with where it came from."""


def check_options(options):
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"luminal: unknown option(s) {unknown}; known: {sorted(OPTIONS)}")
    merged = {**OPTIONS, **options}
    if merged["backend"] not in (None, "cpu", "cuda", "reference"):
        raise ValueError(f"luminal: backend {merged['backend']!r} is not one luminal has: use 'cpu', 'cuda' or 'reference'")
    if not isinstance(merged["search"], int) or merged["search"] < 0:
        raise ValueError(f"luminal: option search must be an int >= 0, got {merged['search']!r}")
    return merged


def sym_expr(value):
    """An int, SymInt or sympy expression as an int or luminal.Expr."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, torch.SymInt):
        hint = value.node.maybe_as_int()
        if hint is not None:
            return hint
        return sympy_expr(value.node.expr)
    return sympy_expr(value)


def sympy_expr(e):
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

    if isinstance(e, sympy.Integer) or (hasattr(e, "is_Integer") and e.is_Integer):
        return int(e)
    if isinstance(e, sympy.Symbol):
        return L.Expr.var(str(e))
    args = [sympy_expr(a) for a in e.args]
    if isinstance(e, sympy.Add):
        out = args[0]
        for a in args[1:]:
            out = a + out if isinstance(out, int) else out + a
        return out
    if isinstance(e, sympy.Mul):
        out = args[0]
        for a in args[1:]:
            out = a * out if isinstance(out, int) else out * a
        return out
    if isinstance(e, FloorDiv):
        return _expr(args[0]) // args[1]
    if isinstance(e, (Mod, PythonMod, sympy.Mod)):
        return _expr(args[0]) % args[1]
    if isinstance(e, sympy.Max):
        out = args[0]
        for a in args[1:]:
            out = L.max(out, a)
        return out
    if isinstance(e, sympy.Min):
        out = args[0]
        for a in args[1:]:
            out = L.min(out, a)
        return out
    raise LoweringError(f"luminal: symbolic size {e} ({type(e).__name__}) has no luminal form")


def _expr(x):
    return L.Expr(x) if isinstance(x, int) else x


def where_from(node):
    """The model line that made an FX node, for error messages."""
    trace = node.meta.get("stack_trace")
    if trace:
        # The innermost frame: its 'File "...", line N, in f' line and its code, without the
        # '^^^^' markers that Python 3.11 and later add under the code.
        lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip() and set(ln.strip()) - set("^~ ")]
        files = [i for i, ln in enumerate(lines) if ln.startswith("File ")]
        return " at " + " / ".join(lines[files[-1]:files[-1] + 2] if files else lines[-2:])
    return ""


class LuminalGraph:
    """An aten FX graph compiled by luminal; called with the graph's inputs, returns its outputs."""

    def __init__(self, gm, options):
        self.options = options
        self.graph = L.Graph()
        self.inputs = []  # per placeholder: ("tensor", name, torch dtype) | ("dim", name or None) | ("none",)
        self.outputs = []  # per output: ("tensor", name, torch dtype) | ("input", index) | ("value", v) | ("dim", expr)
        self.constants = {}  # input name -> the tensor a get_attr node reads (set once)
        self.mutations = []  # (placeholder index, input name, luminal value, in place?) per copy_ into an input
        self.counters = []  # (placeholder index, input name, c, read by the graph?) per copy_(x, x + c) torch does itself
        self._placeholder_nodes = []
        env = {}
        placeholders = 0
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                env[node] = self._placeholder(node, placeholders)
                placeholders += 1
            elif node.op == "call_function":
                env[node] = self._call(node, env)
            elif node.op == "get_attr":
                env[node] = self._constant(gm, node)
            elif node.op == "output":
                self._outputs(node, env)
        self.cuda = options["backend"] == "cuda"
        self._keep = {}  # converted copies of device inputs (int64 -> int32), alive while set
        self.compiled = self._compile()
        self._in_place = {m[1] for m in self.mutations if m[3]}  # inputs the runs update in the caller's memory
        self._counted = {name for _, name, _, read in self.counters if not read}
        self._last = {}  # input name -> (tensor, version, data_ptr, shape, stride, dtype) of what was set
        self._copied = set()  # cuda inputs copied into luminal's buffers rather than read in place
        self._to_copy = []  # this call's (name, tensor) of those, copied after one synchronisation
        # Counters the graph reads: the value each run was given (host), and the next one torch's
        # increment makes, with the version that increment leaves (see _set).
        self._read_counters = {name for _, name, _, read in self.counters if read}
        self._counter_shapes = {spec[1]: tuple(int(d) for d in self._placeholder_nodes[p].meta["val"].shape)
                                for p, spec in enumerate(self.inputs) if spec[0] == "tensor" and spec[1] in self._read_counters
                                and all(isinstance(d, int) for d in self._placeholder_nodes[p].meta["val"].shape)}
        self._given, self._shadow, self._unchecked = {}, {}, {}
        self._counter_bumps = None  # version steps a counter takes between calls, once checked
        self._range_checks = []  # this call's (input name, device [min, max]) of changed int64 inputs on CUDA
        self.sets = 0  # inputs handed to the runtime so far
        self._lock = threading.Lock()

    def _compile(self):
        """Compiles; an input update planned in place that the plan cannot make in place becomes
        an output copied back after each run instead (and the graph is compiled again)."""
        for k, m in enumerate(self.mutations):
            if not m[3]:
                m[2].output(f"mut{k}")
        opts = self.options
        compiled = L.compile(self.graph, backend=opts["backend"], search=opts["search"], threads=opts["threads"])
        demoted = [k for k, m in enumerate(self.mutations) if m[3] and not compiled.updates_in_place(m[1])]
        if not demoted:
            return compiled
        for k in demoted:
            p, name, value, _ = self.mutations[k]
            self.mutations[k] = (p, name, value, False)
            value.output(f"mut{k}")
        return L.compile(self.graph, backend=opts["backend"], search=opts["search"], threads=opts["threads"])

    def _mutation(self, node, env):
        """copy_(input, value) at the end of the graph: the caller's tensor takes the value. In
        place when the value is a put into that same input (a KV cache update) and nothing else
        reads the input: the run writes straight into the caller's memory."""
        dst, src = node.args[0], node.args[1]
        value = env[src]
        if dst.op != "placeholder":
            return value
        p = self._placeholder_nodes.index(dst)
        spec = self.inputs[p]
        if self._counter(node, dst, src):  # x += c: done by torch after each run
            read = any(u is not src and u is not node for u in dst.users)
            self.counters.append((p, spec[1], src.args[1], read))
            return value
        native = spec[0] == "tensor" and held_dtype(spec[2]) == spec[2]
        put = isinstance(src, torch.fx.Node) and src.target in (torch.ops.aten.index_put.default, torch.ops.aten._unsafe_index_put.default)
        only_put = put and src.args[0] is dst and all(u is src or u.target == torch.ops.aten.copy_.default for u in dst.users)
        if not isinstance(value, L.Tensor):
            raise LoweringError(f"luminal: copy_ into an input of a non-tensor value{where_from(node)}")
        self.mutations.append((p, spec[1], value, bool(native and only_put)))
        return value

    @staticmethod
    def _counter(node, dst, src):
        """copy_(x, x + c) where x + c feeds nothing else: a counter (transformers' static cache
        keeps a position per layer). The graph's reads of x see its old value, which the runtime
        was given before the run, so torch can increment x itself after the run: one op a call,
        where the runtime's way cost an output, a conversion and a copy back."""
        if not isinstance(src, torch.fx.Node) or src.target not in (torch.ops.aten.add.Tensor, torch.ops.aten.add.Scalar):
            return False
        c = src.args[1] if len(src.args) > 1 else None
        if src.args[0] is not dst or isinstance(c, bool) or not isinstance(c, (int, float)) or src.kwargs.get("alpha", 1) != 1:
            return False
        val = dst.meta.get("val")
        if not isinstance(val, torch.Tensor) or (isinstance(c, float) and not val.dtype.is_floating_point):
            return False  # x + 0.5 into an integer x rounds in the copy; add_ would refuse
        return all(u is node for u in src.users)

    def _placeholder(self, node, i):
        self._placeholder_nodes.append(node)
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            name = f"in{i}"
            self.inputs.append(("tensor", name, val.dtype))
            return self.graph.input(name, luminal_dtype(val.dtype), [sym_expr(s) for s in val.shape])
        if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
            e = sym_expr(val)
            name = e.dims()[0] if isinstance(e, L.Expr) and len(e.dims()) == 1 and repr(e) == e.dims()[0] else None
            self.inputs.append(("dim", name))
            return e
        self.inputs.append(("none",))
        return val

    def _constant(self, gm, node):
        t = gm
        for part in node.target.split("."):
            t = getattr(t, part)
        if not isinstance(t, torch.Tensor):
            raise LoweringError(f"luminal: the graph reads attribute {node.target!r}, which is not a tensor")
        name = f"const{len(self.constants)}"
        self.constants[name] = t
        return self.graph.input(name, luminal_dtype(t.dtype), list(t.shape))

    def _call(self, node, env):
        if node.target == torch.ops.aten.copy_.default:
            return self._mutation(node, env)
        val = node.meta.get("val")
        if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return sym_expr(val) if isinstance(val, torch.SymInt) else val
        fn = LOWERINGS.get(node.target)
        if fn is None and hasattr(node.target, "overloadpacket"):
            fn = LOWERINGS.get(node.target.overloadpacket)
        if fn is None:
            fn = NAMED_LOWERINGS.get(str(node.target))
        if fn is None:
            raise LoweringError(f"luminal: no lowering for {node.target}{where_from(node)}")
        args = torch.fx.node.map_arg(node.args, lambda n: env[n])
        kwargs = {k: v for k, v in torch.fx.node.map_arg(node.kwargs, lambda n: env[n]).items() if k not in _IGNORED_KWARGS}
        args = _syms(args)
        kwargs = _syms(kwargs)
        try:
            return fn(Lowering(self.graph, node, sym_expr), *args, **kwargs)
        except (L.Error, NotImplementedError, TypeError, ValueError) as e:
            raise LoweringError(f"luminal: lowering {node.target} failed{where_from(node)}: {e}") from e

    def _outputs(self, node, env):
        placeholders = self._placeholder_nodes
        for j, out in enumerate(node.args[0]):
            if out is None:
                self.outputs.append(("value", None))
                continue
            if isinstance(out, torch.fx.Node) and out in placeholders:
                self.outputs.append(("input", placeholders.index(out)))
                continue
            v = env[out] if isinstance(out, torch.fx.Node) else out
            if isinstance(v, L.Tensor):
                name = f"out{j}"
                v.output(name)
                self.outputs.append(("tensor", name, out.meta["val"].dtype))
            elif isinstance(v, L.Expr):
                self.outputs.append(("dim", v))
            else:
                self.outputs.append(("value", v))

    def _set(self, name, t, in_place=False):
        last = self._last.get(name)
        if last is not None and last[0] is t and last[1] == t._version and last[2] == t.data_ptr():
            return  # the same tensor, unchanged (weights, every call): checked first, cheaply
        # A CPU scalar mixes with CUDA tensors in PyTorch too (a torch.tensor(0.0) in a model).
        cpu_scalar = self.cuda and t.device.type == "cpu" and t.dim() == 0 and not in_place
        if (t.device.type == "cuda") != self.cuda and not cpu_scalar:
            raise RuntimeError(f"luminal: input {name} is on {t.device}, but this graph was compiled for the "
                               f"{'cuda' if self.cuda else 'cpu'} backend (no silent copies between devices)")
        key = (t, t._version, t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if last is not None and last[1:] == key[1:]:
            self._last[name] = key
            return  # unchanged since the last call: the runtime still holds (and may have kept work on) it
        if in_place and last is not None and last[0] is t and last[2:] == key[2:]:
            # A KV cache: the runtime reads and writes it where it is, and nothing it keeps from
            # run to run derives from it, so a new version (torch counts the graph's own update
            # as one each call) needs no new set.
            self._last[name] = key
            return
        shadow = self._shadow.pop(name, None)
        if shadow is not None and (shadow[0] is not t or shadow[2] != t.data_ptr()):
            shadow = None
        if shadow is not None and t._version - shadow[1] == self._counter_bumps:
            # A counter that torch incremented after the last run and nothing touched since (its
            # version moved by exactly the bumps a call makes, see _check_shadow): its value is
            # known here, so it is handed over from the host (no conversion, no device work).
            self.compiled.set_input(name, shadow[3])
            self._given[name] = shadow[3]
            self._last[name] = key
            self.sets += 1
            return
        self._given.pop(name, None)
        if shadow is not None:
            self._unchecked[name] = (shadow[3], t._version - shadow[1])
        t = t.detach().to("cuda") if cpu_scalar else t.detach()
        held = held_dtype(t.dtype)
        if in_place:  # the runtime updates the caller's tensor itself: no copy may stand between
            if held != t.dtype:
                raise RuntimeError(f"luminal: input {name} ({t.dtype}) is updated in place but luminal holds it as a 32-bit type")
            if not t.is_contiguous():
                raise RuntimeError(f"luminal: input {name} is updated in place and must be contiguous")
        elif held != t.dtype:
            if t.dtype == torch.int64 and t.numel():  # one reduction per changed input
                if self.cuda:  # read back with the others after the call's one sync (see __call__)
                    self._range_checks.append((name, torch.stack(torch.aminmax(t))))
                else:
                    _check_int32_range(name, *(int(x) for x in torch.aminmax(t)))
            t = t.to(held)
        if self.cuda:
            t = t.contiguous()
            self._keep[name] = t  # alive while set (and until the next call, when copied)
            if t.data_ptr() != key[2] or (last is not None and last[2] != key[2] and not in_place):
                self._copied.add(name)  # a converted copy, or at a new address each call (a token, a position)
            if name in self._copied:  # into luminal's own buffer (the replayed CUDA graph reads a fixed
                self._to_copy.append((name, t))  # address), once torch's stream has made t: see __call__
            else:  # by pointer: weights and caches, read and updated where they are
                self.compiled.set_input_device(name, t.data_ptr(), luminal_dtype(t.dtype), list(t.shape))
        elif t.dtype == torch.bfloat16:  # numpy has no bf16: its bits
            self.compiled.set_input(name, t.view(torch.int16).numpy().view(np.uint16), "bf16", in_place=in_place)
        else:
            self.compiled.set_input(name, t.numpy(), in_place=in_place)
            if name in self._read_counters:
                self._given[name] = t.numpy().copy()  # what this run sees, for the counter's next value
                self._check_shadow(name)
        self._last[name] = key
        self.sets += 1

    def __call__(self, *args):
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("luminal: a compiled graph was called from two threads at once; call it from one thread at a time")
        try:
            for name, t in self.constants.items():  # set on the first call (compiling runs under fake tensors)
                self._set(name, t)
            dims = {}
            in_place, last = self._in_place, self._last
            for spec, a in zip(self.inputs, args):
                if spec[0] == "tensor":
                    seen = last.get(spec[1])
                    if seen is not None and seen[0] is a and seen[1] == a._version and seen[2] == a.data_ptr():
                        continue  # _set's first check, here: most inputs are weights, unchanged every call
                    if spec[1] in self._counted and seen is not None:
                        continue  # read by nothing but its increment: set once, as every input must be
                    self._set(spec[1], a, spec[1] in in_place)
                elif spec[0] == "dim" and spec[1] is not None:
                    dims[spec[1]] = int(a)
                    self.compiled.set_dim(spec[1], int(a))
            if self.cuda:  # torch's pending work on the inputs (and conversions just made) on its own stream
                torch.cuda.current_stream().synchronize()
                if self._range_checks:  # the int64 inputs' ranges, all in one small copy
                    ranges = torch.stack([r for _, r in self._range_checks]).tolist()
                    for (name, _), (lo, hi) in zip(self._range_checks, ranges):
                        _check_int32_range(name, lo, hi)
                        if name in self._read_counters and lo == hi and name in self._counter_shapes:
                            self._given[name] = np.full(self._counter_shapes[name], lo, dtype=np.int32)
                            self._check_shadow(name)
                for name, t in self._to_copy:
                    self.compiled.copy_input_device(name, t.data_ptr(), luminal_dtype(t.dtype), list(t.shape))
                self._to_copy.clear()
            self.compiled.run()
            for k, (p, name, _, done) in enumerate(self.mutations):
                if not done:  # copied back; the in-place ones are written already
                    args[p].copy_(self._result(("tensor", f"mut{k}", args[p].dtype), args, dims))
            self._increment_counters(args)
            return tuple(self._result(spec, args, dims) for spec in self.outputs)
        finally:
            self._range_checks.clear()
            for name, _ in self._to_copy:  # a call that failed before copying: set them again next time
                self._last.pop(name, None)
            self._to_copy.clear()
            self._lock.release()

    def _check_shadow(self, name):
        """The first counter set the checked way after a prediction: if the value it holds is
        the predicted one, the version steps between (torch's increment, and AOT autograd's
        count of the graph's own write) are what a call makes, and later calls trust them."""
        unchecked = self._unchecked.pop(name, None)
        if unchecked is not None and self._counter_bumps is None and np.array_equal(unchecked[0], self._given[name]):
            self._counter_bumps = unchecked[1]

    def _increment_counters(self, args):
        """x += c for each counter, one foreach op per increment (a launch each on a GPU); for the
        counters the graph reads, their next value is kept on the host (see _set)."""
        by_c = {}
        for p, _, c, _ in self.counters:
            by_c.setdefault((c, args[p].device), []).append(args[p])
        for (c, _), ts in by_c.items():
            torch._foreach_add_(ts, c)
        for p, name, c, read in self.counters:
            given = self._given.get(name)
            if not read or given is None:
                continue
            if given.ndim == 0:  # the usual counter: a scalar, in Python numbers
                v = given.item() + c
                if isinstance(v, int) and not -2**31 <= v < 2**31:
                    continue  # past the 32-bit range: the next call takes the checked path
                nxt = np.array(v, dtype=given.dtype)
            else:
                if np.issubdtype(given.dtype, np.integer) and not (-2**31 <= int(given.min()) + c and int(given.max()) + c < 2**31):
                    continue
                nxt = np.asarray(given + c).astype(given.dtype)
            t = args[p]
            self._shadow[name] = (t, t._version, t.data_ptr(), nxt)

    def _result(self, spec, args, dims):
        kind = spec[0]
        if kind == "input":
            return args[spec[1]]
        if kind == "value":
            return spec[1]
        if kind == "dim":
            return spec[1].eval(dims)
        if self.cuda:
            out = torch.empty(self.compiled.output_shape(spec[1]), dtype=_HELD[self.compiled.output_dtype(spec[1])], device="cuda")
            self.compiled.copy_output_to(spec[1], out.data_ptr(), out.numel() * out.element_size())
            return out if out.dtype == spec[2] else out.to(spec[2])
        a = self.compiled.take_output(spec[1])  # the runtime's buffer itself: no copy
        if spec[2] == torch.bfloat16:
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        t = torch.from_numpy(a)
        return t if t.dtype == spec[2] else t.to(spec[2])


def _check_int32_range(name, lo, hi):
    if lo < -2**31 or hi >= 2**31:
        raise RuntimeError(f"luminal: input {name} (int64) holds values outside the 32-bit range luminal computes "
                           f"integers in ({lo}..{hi}); they would wrap, so the graph is not run")


def _syms(x):
    """SymInts that reach a lowering as plain arguments (sizes in a list) as luminal values."""
    if isinstance(x, torch.SymInt):
        return sym_expr(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_syms(v) for v in x)
    if isinstance(x, dict):
        return {k: _syms(v) for k, v in x.items()}
    return x


def backend_for(example_inputs, requested):
    """The backend follows the inputs' device; a request that does not match them is an error,
    never a silent copy or fallback."""
    devices = {x.device.type for x in example_inputs if isinstance(x, torch.Tensor)}
    if len(devices) > 1:
        raise RuntimeError(f"luminal: the graph's inputs are on several devices ({sorted(devices)}); put them on one")
    device = devices.pop() if devices else "cpu"
    if device not in ("cpu", "cuda"):
        raise RuntimeError(f"luminal: inputs on {device}: luminal runs on the CPU and on NVIDIA GPUs (cuda)")
    if device == "cuda":
        if requested not in (None, "cuda"):
            raise RuntimeError(f"luminal: the inputs are on cuda but options ask for backend {requested!r}")
        why = L.cuda_unavailable_reason()
        if why:
            raise RuntimeError(f"luminal: the inputs are on cuda but luminal's cuda backend cannot run here: {why}")
        return "cuda"
    if requested == "cuda":
        raise RuntimeError("luminal: options ask for the cuda backend but the inputs are on the CPU; move the model "
                           "and inputs to the GPU (no silent fallback to the CPU)")
    return requested or "cpu"


def compile_fx(gm, example_inputs, options):
    global compile_count, last_graph
    compile_count += 1
    options = {**options, "backend": backend_for(example_inputs, options["backend"])}
    from torch._functorch.aot_autograd import make_boxed_func

    last_graph = LuminalGraph(gm, options)
    return make_boxed_func(last_graph)


def luminal_backend(gm, example_inputs, options=None):
    """The backend function Dynamo calls (registered as "luminal")."""
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd

    opts = check_options(options)

    def no_backward(gm, example_inputs):
        raise RuntimeError("luminal compiles inference only: run the model under torch.no_grad() or torch.inference_mode()")

    decomps = core_aten_decompositions()
    attention_as_rules_read_it(gm)
    # In-place updates of inputs (a KV cache) stay in the graph as copy_ nodes, so the backend
    # can make them in the caller's memory rather than return new values to copy back.
    with math_attention():
        return aot_autograd(fw_compiler=lambda g, ex: compile_fx(g, ex, opts), bw_compiler=no_backward,
                            decompositions=decomps, keep_inference_input_mutations=True)(gm, example_inputs)


_SDPA = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


def _repeated_heads(node):
    """The tensor whose heads `node` repeats, when it is transformers' repeat_kv of it:
    x[:, :, None].expand(b, kv, g, t, d).reshape(b, kv * g, t, d); else None."""
    import operator

    full = slice(None, None, None)
    if not (isinstance(node, torch.fx.Node) and node.op == "call_method" and node.target == "reshape" and len(node.args) == 5):
        return None
    expand = node.args[0]
    if not (isinstance(expand, torch.fx.Node) and expand.op == "call_method" and expand.target == "expand" and len(expand.args) == 6):
        return None
    get = expand.args[0]
    if not (isinstance(get, torch.fx.Node) and get.op == "call_function" and get.target is operator.getitem):
        return None
    if get.args[1] != (full, full, None, full, full):
        return None
    b, kv, g, t, d = expand.args[1:]
    if not all(isinstance(x, int) for x in (kv, g)) or node.args[1:] != (b, kv * g, t, d):
        return None
    return get.args[0]


def attention_as_rules_read_it(gm):
    """Points Dynamo's scaled_dot_product_attention calls at `_attention` before AOT traces them.
    PyTorch's own math form scales q and k by the square root of the scale each (a product over
    the whole KV cache per call) and softmaxes through `_safe_softmax`; luminal's attention rule
    reads scores scaled once, masked by where, softmaxed, times the values. Keys and values that
    transformers repeated per query head (repeat_kv) are given unrepeated, the query heads of a
    group then stacked along the rows, as luminal's own decoder graph has them: the kernels read
    the cache in place rather than through a broadcast."""
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _SDPA:
            continue
        node.target = _attention
        changed = True
        if len(node.args) >= 3:
            k, v = _repeated_heads(node.args[1]), _repeated_heads(node.args[2])
            if k is not None and v is not None and not node.kwargs.get("enable_gqa", False):
                node.args = (node.args[0], k, v) + tuple(node.args[3:])
                node.kwargs = {**node.kwargs, "enable_gqa": True}
    if changed:  # no dead-code pass here: FX counts in-place methods (the cache's index_copy_) as dead
        gm.recompile()


def _attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention in f32: (q kᵀ) * scale, where(mask, ., -inf), softmax, times
    v, the result in q's dtype; a row whose keys are all masked gives zeros, as PyTorch's does
    (not 0/0). PyTorch's form is kept for dropout, an additive float mask, or a mask together
    with is_causal."""
    heads, kv_heads = query.shape[-3], key.shape[-3]
    if (dropout_p != 0.0 or (attn_mask is not None and attn_mask.dtype != torch.bool) or (is_causal and attn_mask is not None)
            or (heads != kv_heads and (not enable_gqa or heads % kv_heads != 0))):
        return torch._C._nn.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                                         enable_gqa=enable_gqa)
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    batch, rows, keys, dv = query.shape[:-3], query.shape[-2], key.shape[-2], value.shape[-1]
    group = heads // kv_heads
    # Three-dimensional products with the scale on the product itself, as the rule reads them;
    # a group's query heads stacked along the rows of their kv head.
    q3 = query.float().reshape(-1, group * rows, query.shape[-1])
    k3 = key.float().reshape(-1, keys, key.shape[-1])
    v3 = value.float().reshape(-1, keys, dv)
    scores = (torch.bmm(q3, k3.transpose(1, 2)) * scale).reshape(*batch, heads, rows, keys)
    if is_causal:
        attn_mask = torch.ones(rows, keys, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        scores = torch.where(attn_mask, scores, float("-inf"))
    probs = torch.softmax(scores, dim=-1).reshape(-1, group * rows, keys)
    out = torch.bmm(probs, v3).reshape(*batch, heads, rows, dv)
    if attn_mask is not None and not is_causal:  # (a causal row always sees its first key)
        out = torch.where(attn_mask.any(dim=-1, keepdim=True), out, 0.0)
    return out.to(query.dtype)


def math_attention():
    """Traces scaled_dot_product_attention in its math form. On CUDA tensors it would otherwise be
    traced into one of PyTorch's fused kernels (flash, cuDNN, memory-efficient): opaque ops with
    no lowering. The math form is matmuls and a softmax, which luminal's compiler fuses itself."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.MATH])


def compile(model, example_inputs=None, **options):
    """``torch.compile(model, backend="luminal", options=options)``, for callers that prefer a
    function; `example_inputs`, when given, are run once so the compile happens here."""
    check_options(options)
    compiled = torch.compile(model, backend=luminal_backend, options=options or None)
    if example_inputs is not None:
        with torch.no_grad():
            compiled(*example_inputs)
    return compiled


def register():
    from torch._dynamo import list_backends, register_backend

    if "luminal" not in list_backends(exclude_tags=()):
        register_backend(name="luminal")(luminal_backend)


register()
