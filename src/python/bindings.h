#pragma once
// The Python extension luminal._luminal (pybind11): the graph frontend, compile and run, and the
// language models. One bind_* function per part, each in its own file.
#include <pybind11/pybind11.h>

#include <memory>

#include "frontend/tensor.h"

namespace luminal::python {

namespace py = pybind11;

// A tensor handle that keeps its graph alive: Python may drop the Graph object while tensors
// built on it are still in use.
struct PyTensor {
  std::shared_ptr<Graph> graph;
  Tensor t;
};

struct PyGraph {
  std::shared_ptr<Graph> g = std::make_shared<Graph>();
};

DType dtype_arg(const std::string& name);  // "f32", "float32", "bf16", ...: Error otherwise

void bind_graph(py::module_& m);    // Expr, Graph, Tensor and every frontend op
void bind_runtime(py::module_& m);  // compile, CompiledGraph (run on cpu / reference)
void bind_models(py::module_& m);   // LanguageModel, generate

}  // namespace luminal::python
