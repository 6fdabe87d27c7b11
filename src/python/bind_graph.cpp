// Expr, Graph, Tensor and the frontend ops (frontend/ops.h) for Python. Ops are module-level
// functions taking tensors (and Python numbers where the frontend has a scalar form); every
// result shares its inputs' graph.
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include "core/error.h"
#include "frontend/ops.h"
#include "graph/serialize.h"
#include "python/bindings.h"

namespace luminal::python {

namespace {

PyTensor wrap(const std::shared_ptr<Graph>& g, const Tensor& t) { return {g, t}; }

// Shapes from Python: ints, dim names (str) or Expr.
Expr expr_arg(const py::handle& h) {
  if (py::isinstance<Expr>(h)) return h.cast<Expr>();
  if (py::isinstance<py::str>(h)) return Expr::var(h.cast<std::string>());
  if (py::isinstance<py::int_>(h)) return Expr(h.cast<int64_t>());
  throw Error("a shape entry must be an int, a dim name (str) or a luminal.Expr, got " + std::string(py::str(py::type::of(h))));
}

Shape shape_arg(const py::iterable& xs) {
  Shape s;
  for (const py::handle& h : xs) s.push_back(expr_arg(h));
  return s;
}

std::vector<int> axes_arg(const py::object& o) {
  if (py::isinstance<py::int_>(o)) return {o.cast<int>()};
  return o.cast<std::vector<int>>();
}

const std::shared_ptr<Graph>& same_graph(const PyTensor& a, const PyTensor& b) {
  if (a.graph != b.graph) throw Error("tensors of two different graphs meet in one op: build them on one luminal.Graph");
  return a.graph;
}

// A Python number or tensor as a tensor of `like`'s graph (numbers take like's dtype, as torch
// treats Python scalars).
PyTensor operand(const PyTensor& like, const py::handle& x) {
  if (py::isinstance<PyTensor>(x)) return x.cast<PyTensor>();
  if (py::isinstance<py::bool_>(x) || py::isinstance<py::int_>(x) || py::isinstance<py::float_>(x))
    return wrap(like.graph, scalar_like(like.t, x.cast<double>()));
  throw Error("expected a luminal.Tensor or a number, got " + std::string(py::str(py::type::of(x))));
}

using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);

}  // namespace

DType dtype_arg(const std::string& name) {
  static const std::map<std::string, DType> aliases = {
      {"float32", DType::F32}, {"float", DType::F32}, {"float16", DType::F16}, {"half", DType::F16},
      {"bfloat16", DType::BF16}, {"int32", DType::I32}, {"bool", DType::Bool}};
  if (auto it = aliases.find(name); it != aliases.end()) return it->second;
  return dtype_from_name(name);
}

void bind_graph(py::module_& m) {
  py::class_<Expr>(m, "Expr", "A symbolic dim expression: ints, named dims and + - * // % min max")
      .def(py::init<int64_t>())
      .def_static("var", [](const std::string& name) { return Expr::var(name); }, "a named dynamic dim")
      .def("is_const", [](const Expr& e) { return e.is_const(); })
      .def("value", [](const Expr& e) {
        if (!e.is_const()) throw Error("Expr " + e.to_string() + " is not a constant");
        return e.value();
      })
      .def("eval", [](const Expr& e, const DimMap& dims) { return e.eval(dims); })
      .def("dims", &Expr::dims)
      .def("__add__", [](const Expr& a, const py::handle& b) { return a + expr_arg(b); })
      .def("__radd__", [](const Expr& a, const py::handle& b) { return expr_arg(b) + a; })
      .def("__sub__", [](const Expr& a, const py::handle& b) { return a - expr_arg(b); })
      .def("__rsub__", [](const Expr& a, const py::handle& b) { return expr_arg(b) - a; })
      .def("__mul__", [](const Expr& a, const py::handle& b) { return a * expr_arg(b); })
      .def("__rmul__", [](const Expr& a, const py::handle& b) { return expr_arg(b) * a; })
      .def("__floordiv__", [](const Expr& a, const py::handle& b) { return a / expr_arg(b); })
      .def("__rfloordiv__", [](const Expr& a, const py::handle& b) { return expr_arg(b) / a; })
      .def("__mod__", [](const Expr& a, const py::handle& b) { return a % expr_arg(b); })
      .def("__neg__", [](const Expr& a) { return -a; })
      .def("__eq__", [](const Expr& a, const py::handle& b) { return provably_equal(a, expr_arg(b)); })
      .def("__hash__", [](const Expr& a) { return a.hash(); })
      .def("__repr__", &Expr::to_string);
  m.def("min", [](const py::handle& a, const py::handle& b) { return min(expr_arg(a), expr_arg(b)); });
  m.def("max", [](const py::handle& a, const py::handle& b) { return max(expr_arg(a), expr_arg(b)); });

  py::class_<PyGraph>(m, "Graph", "A graph of primitive ops, built through luminal.Tensor ops")
      .def(py::init<>())
      .def("input", [](PyGraph& g, const std::string& name, const std::string& dtype, const py::iterable& shape) {
        return wrap(g.g, input(*g.g, name, dtype_arg(dtype), shape_arg(shape)));
      }, py::arg("name"), py::arg("dtype"), py::arg("shape"))
      .def("constant", [](PyGraph& g, double v, const std::string& dtype) { return wrap(g.g, constant(*g.g, v, dtype_arg(dtype))); },
           py::arg("value"), py::arg("dtype") = "f32")
      .def("full", [](PyGraph& g, const py::iterable& shape, double v, const std::string& dtype) {
        return wrap(g.g, full(*g.g, shape_arg(shape), v, dtype_arg(dtype)));
      }, py::arg("shape"), py::arg("value"), py::arg("dtype") = "f32")
      .def("arange", [](PyGraph& g, const py::handle& start, const py::handle& end, int64_t step, const std::string& dtype) {
        return wrap(g.g, arange(*g.g, expr_arg(start), expr_arg(end), step, dtype_arg(dtype)));
      }, py::arg("start"), py::arg("end"), py::arg("step") = 1, py::arg("dtype") = "i32")
      .def("tril_mask", [](PyGraph& g, const py::handle& n, const py::handle& mm, int64_t k) {
        return wrap(g.g, tril_mask(*g.g, expr_arg(n), expr_arg(mm), k));
      }, py::arg("n"), py::arg("m"), py::arg("k") = 0)
      .def("dims", [](const PyGraph& g) { return g.g->dims(); })
      .def("__len__", [](const PyGraph& g) { return g.g->size(); })
      .def("dump", [](const PyGraph& g) { return g.g->dump(); })
      .def("serialize", [](const PyGraph& g) { return serialize(*g.g); },
           "the graph as text (luminal's graph format): to save it, or to attach to a bug report")
      .def_static("deserialize", [](const std::string& text) {
        PyGraph g;
        *g.g = deserialize(text);
        return g;
      }, py::arg("text"), "a graph from serialize()'s text; luminal.Error naming the line if it is malformed");

  py::class_<PyTensor> t(m, "Tensor", "A view of one node's output in a luminal.Graph");
  t.def_property_readonly("shape", [](const PyTensor& x) { return x.t.shape(); })
      .def_property_readonly("dtype", [](const PyTensor& x) { return std::string(dtype_name(x.t.dtype())); })
      .def_property_readonly("ndim", [](const PyTensor& x) { return x.t.rank(); })
      .def("output", [](const PyTensor& x, const std::string& name) { return wrap(x.graph, x.t.output(name)); })
      .def("__repr__", [](const PyTensor& x) {
        return "luminal.Tensor(" + std::string(dtype_name(x.t.dtype())) + to_string(x.t.shape()) + ")";
      });
  // Arithmetic operators with tensors or Python numbers on either side.
  auto bin = [&](const char* name, Binary f, bool reflected) {
    t.def(name, [f, reflected](const PyTensor& a, const py::handle& b) {
      PyTensor o = operand(a, b);
      const auto& g = same_graph(a, o);
      return wrap(g, reflected ? f(o.t, a.t) : f(a.t, o.t));
    });
  };
  bin("__add__", add, false), bin("__radd__", add, true), bin("__sub__", sub, false), bin("__rsub__", sub, true);
  bin("__mul__", mul, false), bin("__rmul__", mul, true), bin("__truediv__", div, false), bin("__rtruediv__", div, true);
  bin("__floordiv__", floor_divide, false), bin("__mod__", mod, false), bin("__lt__", lt, false), bin("__le__", le, false);
  bin("__gt__", gt, false), bin("__ge__", ge, false), bin("__matmul__", matmul, false);
  t.def("__neg__", [](const PyTensor& a) { return wrap(a.graph, neg(a.t)); });

  const std::pair<const char*, Unary> unary[] = {
      {"exp", exp}, {"log", log}, {"exp2", exp2}, {"log2", log2}, {"log1p", log1p}, {"expm1", expm1}, {"sin", sin},
      {"cos", cos}, {"tan", tan}, {"sqrt", sqrt}, {"rsqrt", rsqrt}, {"reciprocal", reciprocal}, {"neg", neg}, {"abs", abs},
      {"sign", sign}, {"floor", floor}, {"ceil", ceil}, {"round", round}, {"trunc", trunc}, {"relu", relu},
      {"sigmoid", sigmoid}, {"silu", silu}, {"tanh", tanh}, {"gelu", gelu}, {"gelu_tanh", gelu_tanh}, {"erf", erf},
      {"isnan", isnan}, {"isinf", isinf}, {"logical_not", logical_not}, {"contiguous", contiguous}};
  for (auto [name, f] : unary) m.def(name, [f](const PyTensor& x) { return wrap(x.graph, f(x.t)); });

  const std::pair<const char*, Binary> binary[] = {
      {"add", add}, {"sub", sub}, {"mul", mul}, {"div", div}, {"floor_divide", floor_divide}, {"remainder", mod},
      {"fmod", fmod}, {"minimum", minimum}, {"maximum", maximum}, {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt},
      {"ge", ge}, {"logical_and", logical_and}, {"logical_or", logical_or}, {"logical_xor", logical_xor}, {"matmul", matmul}};
  for (auto [name, f] : binary)
    m.def(name, [f](const PyTensor& a, const py::handle& b) {
      PyTensor o = operand(a, b);
      return wrap(same_graph(a, o), f(a.t, o.t));
    });
  m.def("pow", [](const PyTensor& a, const py::handle& b) {
    if (py::isinstance<PyTensor>(b)) return wrap(same_graph(a, b.cast<PyTensor>()), pow(a.t, b.cast<PyTensor>().t));
    return wrap(a.graph, pow(a.t, b.cast<double>()));
  });
  m.def("where", [](const PyTensor& c, const py::handle& a, const py::handle& b) {
    if (py::isinstance<PyTensor>(a) && py::isinstance<PyTensor>(b))
      return wrap(c.graph, where(c.t, a.cast<PyTensor>().t, b.cast<PyTensor>().t));
    if (py::isinstance<PyTensor>(a)) return wrap(c.graph, where(c.t, a.cast<PyTensor>().t, b.cast<double>()));
    if (py::isinstance<PyTensor>(b)) return wrap(c.graph, where(c.t, a.cast<double>(), b.cast<PyTensor>().t));
    throw Error("where needs a tensor for at least one of its two branches");
  });
  m.def("clamp", [](const PyTensor& x, std::optional<double> lo, std::optional<double> hi) { return wrap(x.graph, clamp(x.t, lo, hi)); },
        py::arg("x"), py::arg("min") = py::none(), py::arg("max") = py::none());
  m.def("leaky_relu", [](const PyTensor& x, double s) { return wrap(x.graph, leaky_relu(x.t, s)); }, py::arg("x"), py::arg("slope") = 0.01);
  m.def("softplus", [](const PyTensor& x, double b, double th) { return wrap(x.graph, softplus(x.t, b, th)); }, py::arg("x"),
        py::arg("beta") = 1.0, py::arg("threshold") = 20.0);
  m.def("cast", [](const PyTensor& x, const std::string& d) { return wrap(x.graph, cast(x.t, dtype_arg(d))); });
  m.def("full_like", [](const PyTensor& x, double v) { return wrap(x.graph, full_like(x.t, v)); });
  m.def("tril", [](const PyTensor& x, int64_t k) { return wrap(x.graph, tril(x.t, k)); }, py::arg("x"), py::arg("k") = 0);
  m.def("triu", [](const PyTensor& x, int64_t k) { return wrap(x.graph, triu(x.t, k)); }, py::arg("x"), py::arg("k") = 0);

  // Movement.
  m.def("reshape", [](const PyTensor& x, const py::iterable& s) { return wrap(x.graph, reshape(x.t, shape_arg(s))); });
  m.def("permute", [](const PyTensor& x, const std::vector<int>& a) { return wrap(x.graph, permute(x.t, a)); });
  m.def("transpose", [](const PyTensor& x, int a, int b) { return wrap(x.graph, transpose(x.t, a, b)); });
  m.def("unsqueeze", [](const PyTensor& x, int a) { return wrap(x.graph, unsqueeze(x.t, a)); });
  m.def("squeeze", [](const PyTensor& x, std::optional<int> a) { return wrap(x.graph, a ? squeeze(x.t, *a) : squeeze(x.t)); },
        py::arg("x"), py::arg("axis") = py::none());
  m.def("expand", [](const PyTensor& x, const py::iterable& s) { return wrap(x.graph, expand(x.t, shape_arg(s))); });
  m.def("flatten", [](const PyTensor& x, int a, int b) { return wrap(x.graph, flatten(x.t, a, b)); }, py::arg("x"), py::arg("start") = 0,
        py::arg("end") = -1);
  m.def("slice", [](const PyTensor& x, int axis, const py::handle& s, const py::handle& e, int64_t step) {
    return wrap(x.graph, slice(x.t, axis, expr_arg(s), expr_arg(e), step));
  }, py::arg("x"), py::arg("axis"), py::arg("start"), py::arg("end"), py::arg("step") = 1);
  m.def("select", [](const PyTensor& x, int axis, const py::handle& i) { return wrap(x.graph, select(x.t, axis, expr_arg(i))); });
  m.def("pad", [](const PyTensor& x, const std::vector<std::pair<py::object, py::object>>& pads, double v) {
    std::vector<std::pair<Expr, Expr>> p;
    for (const auto& [a, b] : pads) p.emplace_back(expr_arg(a), expr_arg(b));
    return wrap(x.graph, pad(x.t, p, v));
  }, py::arg("x"), py::arg("pads"), py::arg("value") = 0.0);
  auto tensors = [](const std::vector<PyTensor>& xs) {
    if (xs.empty()) throw Error("an empty list of tensors");
    std::vector<Tensor> ts;
    for (const PyTensor& x : xs) {
      same_graph(xs[0], x);
      ts.push_back(x.t);
    }
    return ts;
  };
  m.def("cat", [tensors](const std::vector<PyTensor>& xs, int axis) { return wrap(xs.at(0).graph, concat(tensors(xs), axis)); },
        py::arg("xs"), py::arg("axis") = 0);
  m.def("stack", [tensors](const std::vector<PyTensor>& xs, int axis) { return wrap(xs.at(0).graph, stack(tensors(xs), axis)); },
        py::arg("xs"), py::arg("axis") = 0);
  m.def("split", [](const PyTensor& x, const py::iterable& sizes, int axis) {
    std::vector<PyTensor> r;
    for (const Tensor& p : split(x.t, shape_arg(sizes), axis)) r.push_back(wrap(x.graph, p));
    return r;
  });
  m.def("repeat", [](const PyTensor& x, const std::vector<int64_t>& r) { return wrap(x.graph, repeat(x.t, r)); });
  m.def("flip", [](const PyTensor& x, const std::vector<int>& a) { return wrap(x.graph, flip(x.t, a)); });
  m.def("unfold", [](const PyTensor& x, int axis, const py::handle& size, int64_t step) {
    return wrap(x.graph, unfold(x.t, axis, expr_arg(size), step));
  });
  m.def("gather", [](const PyTensor& x, int axis, const PyTensor& i) { return wrap(same_graph(x, i), gather(x.t, axis, i.t)); });
  m.def("scatter", [](const PyTensor& x, int axis, const PyTensor& i, const PyTensor& s) {
    return wrap(same_graph(x, i), scatter(x.t, axis, i.t, s.t));
  });
  m.def("index_select", [](const PyTensor& x, int axis, const PyTensor& i) { return wrap(same_graph(x, i), index_select(x.t, axis, i.t)); });
  m.def("embedding", [](const PyTensor& w, const PyTensor& ids) { return wrap(same_graph(w, ids), embedding(w.t, ids.t)); });

  // Reductions over one axis or a list of axes.
  using Reduce = Tensor (*)(const Tensor&, const std::vector<int>&, bool);
  const std::pair<const char*, Reduce> reductions[] = {{"sum", sum},   {"mean", mean}, {"amax", max}, {"amin", min},
                                                       {"prod", prod}, {"any", any},   {"all", all},  {"logsumexp", logsumexp}};
  for (auto [name, f] : reductions)
    m.def(name, [f](const PyTensor& x, const py::object& axes, bool keepdim) { return wrap(x.graph, f(x.t, axes_arg(axes), keepdim)); },
          py::arg("x"), py::arg("axis"), py::arg("keepdim") = false);
  m.def("var", [](const PyTensor& x, const py::object& axes, int64_t c, bool k) { return wrap(x.graph, var(x.t, axes_arg(axes), c, k)); },
        py::arg("x"), py::arg("axis"), py::arg("correction") = 1, py::arg("keepdim") = false);
  m.def("std", [](const PyTensor& x, const py::object& axes, int64_t c, bool k) { return wrap(x.graph, luminal::std(x.t, axes_arg(axes), c, k)); },
        py::arg("x"), py::arg("axis"), py::arg("correction") = 1, py::arg("keepdim") = false);
  m.def("argmax", [](const PyTensor& x, int a, bool k) { return wrap(x.graph, argmax(x.t, a, k)); }, py::arg("x"), py::arg("axis"),
        py::arg("keepdim") = false);
  m.def("argmin", [](const PyTensor& x, int a, bool k) { return wrap(x.graph, argmin(x.t, a, k)); }, py::arg("x"), py::arg("axis"),
        py::arg("keepdim") = false);
  m.def("cumsum", [](const PyTensor& x, int a) { return wrap(x.graph, cumsum(x.t, a)); });
  m.def("cumprod", [](const PyTensor& x, int a) { return wrap(x.graph, cumprod(x.t, a)); });
  m.def("softmax", [](const PyTensor& x, int a) { return wrap(x.graph, softmax(x.t, a)); });
  m.def("log_softmax", [](const PyTensor& x, int a) { return wrap(x.graph, log_softmax(x.t, a)); });
  m.def("layer_norm", [](const PyTensor& x, int dims, std::optional<PyTensor> w, std::optional<PyTensor> b, double eps) {
    return wrap(x.graph, layer_norm(x.t, dims, w ? std::optional<Tensor>(w->t) : std::nullopt, b ? std::optional<Tensor>(b->t) : std::nullopt, eps));
  }, py::arg("x"), py::arg("normalized_dims"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5);
  m.def("rms_norm", [](const PyTensor& x, std::optional<PyTensor> w, double eps) {
    return wrap(x.graph, rms_norm(x.t, w ? std::optional<Tensor>(w->t) : std::nullopt, eps));
  }, py::arg("x"), py::arg("weight") = py::none(), py::arg("eps") = 1e-6);
  m.def("linear", [](const PyTensor& x, const PyTensor& w, std::optional<PyTensor> b) {
    return wrap(same_graph(x, w), linear(x.t, w.t, b ? std::optional<Tensor>(b->t) : std::nullopt));
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none());
  m.def("sort", [](const PyTensor& x, int a, bool d) {
    auto [v, i] = sort(x.t, a, d);
    return std::make_pair(wrap(x.graph, v), wrap(x.graph, i));
  }, py::arg("x"), py::arg("axis") = -1, py::arg("descending") = false);
  m.def("argsort", [](const PyTensor& x, int a, bool d) { return wrap(x.graph, argsort(x.t, a, d)); }, py::arg("x"), py::arg("axis") = -1,
        py::arg("descending") = false);
  m.def("topk", [](const PyTensor& x, int64_t k, int a, bool largest) {
    auto [v, i] = topk(x.t, k, a, largest);
    return std::make_pair(wrap(x.graph, v), wrap(x.graph, i));
  }, py::arg("x"), py::arg("k"), py::arg("axis") = -1, py::arg("largest") = true);
}

}  // namespace luminal::python
