#include "python/bindings.h"

#include "core/error.h"

PYBIND11_MODULE(_luminal, m) {
  namespace py = pybind11;
  m.doc() = "luminal: a search-based inference compiler (the C++ core)";
  // luminal's errors name the bad input and the fix: they reach Python as luminal.Error.
  py::register_exception<luminal::Error>(m, "Error", PyExc_RuntimeError);
  luminal::python::bind_graph(m);
  luminal::python::bind_runtime(m);
  luminal::python::bind_models(m);
}
