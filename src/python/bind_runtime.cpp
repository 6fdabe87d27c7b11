// compile() and the compiled graph for Python: inputs from anything with the buffer protocol
// (numpy arrays, torch CPU tensors through .numpy()), read in place where dtype and layout
// allow; outputs as numpy arrays. On the cuda backend, inputs may also be device memory given
// by address (torch CUDA tensors' data_ptr(), read in place) and outputs copied into it.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <map>
#include <set>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_plan_timer.h"
#include "backends/cpu/fused_jit.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_plan_timer.h"
#include "compiler/compile.h"
#include "core/cache_paths.h"
#include "core/error.h"
#include "python/bindings.h"

namespace luminal::python {

namespace {

// The inputs a run writes in place: each one's lone reader is a Scatter into the whole of it.
std::set<std::string> inputs_updated_in_place(const Graph& plan) {
  std::map<NodeId, int> readers;
  std::set<NodeId> scattered;
  for (const Node& n : plan.nodes())
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      ++readers[n.inputs[k].src];
      if (k == 0 && scatter_can_update_input(plan, n)) scattered.insert(n.inputs[0].src);
    }
  std::set<std::string> names;
  for (NodeId id : scattered)
    if (readers[id] == 1) names.insert(plan.node(id).name);
  return names;
}

// numpy's element type for a dtype; bf16 has none, so its bits travel as uint16.
py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::F32: return py::dtype::of<float>();
    case DType::F16: return py::dtype("float16");
    case DType::BF16: return py::dtype::of<uint16_t>();
    case DType::I32: return py::dtype::of<int32_t>();
    case DType::Bool: return py::dtype::of<bool>();
  }
  return py::dtype::of<float>();
}

// The dtype numpy's array holds; `declared` names bf16 for uint16 bits.
DType array_dtype(const py::array& a, const std::string& declared) {
  if (!declared.empty()) {
    DType t = dtype_arg(declared);
    if (static_cast<size_t>(a.itemsize()) != dtype_size(t))
      throw Error("an array of " + std::to_string(a.itemsize()) + "-byte elements given as " + declared);
    return t;
  }
  const char kind = a.dtype().kind();
  const auto size = a.itemsize();
  if (kind == 'f' && size == 4) return DType::F32;
  if (kind == 'f' && size == 2) return DType::F16;
  if (kind == 'i' && size == 4) return DType::I32;
  if (kind == 'b') return DType::Bool;
  throw Error("arrays of numpy dtype " + std::string(py::str(a.dtype())) +
              " are not supported: use float32, float16, int32 or bool (int64 -> int32 first; bf16 as uint16 with dtype='bf16')");
}

// Keeps the caller's array (and so its memory) alive while the runtime reads it in place.
std::shared_ptr<const void> array_owner(const py::array& a) {
  return std::shared_ptr<const void>(new py::object(a), [](const void* p) {
    py::gil_scoped_acquire gil;
    delete static_cast<const py::object*>(p);
  });
}

py::array to_numpy(const Buffer& b) {  // a copy
  py::array a(numpy_dtype(b.dtype()), b.shape());
  std::memcpy(a.mutable_data(), b.bytes(), b.nbytes());
  return a;
}

class CompiledGraph {
 public:
  CompiledGraph(const PyGraph& g, const std::string& backend, int search, const std::string& cache_dir, int threads)
      : backend_(backend) {
    if (backend != "cpu" && backend != "reference" && backend != "cuda")
      throw Error("backend '" + backend + "' is not one luminal has: use 'cpu', 'cuda' or 'reference'");
    CompileOptions co;
    co.search.limit = search;
    co.cache_dir = cache_dir;
    co.backend = backend;
    const std::string kernels = default_cache_dir();
    if (backend == "cpu") {
      pool_ = std::make_unique<cpu::ThreadPool>(threads);
      if (search > 0) cpu::search_on_cpu(co, *pool_, true, kernels);
    }
    if (backend == "cuda" && search > 0) cuda::search_on_cuda(co, kernels);  // candidates timed on the GPU
    result_ = compile(*g.g, co);
    in_place_ = inputs_updated_in_place(result_.plan);
    if (backend == "cuda") {  // throws, saying why, where there is no usable GPU
      cuda_ = std::make_unique<cuda::CudaExecutor>(result_.plan, kernels);
      return;
    }
    runtime_ = std::make_unique<Interpreter>(result_.plan);
    if (backend == "cpu") {
      jit_ = std::make_unique<cpu::FusedJit>();
      jit_->prepare(runtime_->graph(), kernels);
      runtime_->set_kernel_hook(cpu::cpu_kernels(*pool_, jit_.get()));
    }
    const Graph& plan = runtime_->graph();
    for (const Node& n : plan.nodes())
      if (n.op == OpKind::Scatter && plan.node(n.inputs[0].src).op == OpKind::Input) updated_.insert(plan.node(n.inputs[0].src).name);
  }

  void set_input(const std::string& name, const py::array& a, const std::string& declared, bool in_place) {
    const DType t = array_dtype(a, declared);
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    const bool contiguous = (a.flags() & py::array::c_style) != 0;
    if (cuda_) {  // uploaded now: the array may change afterwards
      if (in_place) throw Error("input '" + name + "': in place on the cuda backend means device memory (set_input_device)");
      py::array c = py::array::ensure(a, py::array::c_style);
      cuda_->set_input(name, Buffer::borrow(t, shape, static_cast<const uint8_t*>(c.data()), nullptr));
      return;
    }
    if (in_place) {  // the caller's array is the input's memory: the plan's in-place update lands there
      if (!updates_in_place(name))
        throw Error("input '" + name + "' is not updated in place by the plan (no lone Scatter into it): set it without in_place");
      if (!contiguous || !a.writeable() || t != runtime_->graph().node(runtime_->graph().find_input(name)).dtype)
        throw Error("input '" + name + "' in place needs a writable C-contiguous array of the input's dtype");
      runtime_->set_input(name, Buffer::borrow_writable(t, shape, static_cast<uint8_t*>(const_cast<void*>(a.data())), array_owner(a)));
      return;
    }
    // In place: a contiguous array that the plan never writes (a KV cache updated in place is
    // copied, so the caller's array is not changed behind its back).
    if (contiguous && !updated_.count(name)) {
      runtime_->set_input(name, Buffer::borrow(t, shape, static_cast<const uint8_t*>(a.data()), array_owner(a)));
      return;
    }
    py::array c = py::array::ensure(a, py::array::c_style);
    Buffer b(t, shape);
    std::memcpy(b.bytes(), c.data(), b.nbytes());
    runtime_->set_input(name, std::move(b));
  }

  // Device memory at `ptr` (this process's CUDA context, as torch's tensors are) read in place;
  // an input the plan updates in place (a KV cache) is written there.
  void set_input_device(const std::string& name, uint64_t ptr, const std::string& dtype, const std::vector<int64_t>& shape) {
    cuda_executor().set_input_device(name, ptr, dtype_arg(dtype), shape);
  }

  // Device memory at `ptr` copied, on the device, into the input's own buffer (a fixed address
  // for the CUDA graph that replays a run); the caller may reuse its memory at once.
  void copy_input_device(const std::string& name, uint64_t ptr, const std::string& dtype, const std::vector<int64_t>& shape) {
    cuda_executor().copy_input_device(name, ptr, dtype_arg(dtype), shape);
  }

  // The output copied into device memory at `ptr` of `bytes` bytes; returns when it is there.
  void copy_output_to(const std::string& name, uint64_t ptr, size_t bytes) {
    cuda::CudaExecutor::DeviceTensor t = cuda_executor().output_device(name);
    size_t have = dtype_size(t.dtype);
    for (int64_t d : t.shape) have *= static_cast<size_t>(d);
    if (have != bytes)
      throw Error("output '" + name + "' holds " + std::to_string(have) + " bytes; the destination has " + std::to_string(bytes));
    py::gil_scoped_release nogil;
    cuda::Context& ctx = cuda::Context::get();
    ctx.copy(ptr, t.ptr, bytes);
    ctx.synchronize();
  }

  std::vector<int64_t> output_shape(const std::string& name) const {
    if (cuda_) return cuda_->output_device(name).shape;
    return runtime_->output(name).shape();
  }

  cuda::CudaExecutor& cuda_executor() {
    if (!cuda_) throw Error("device memory needs the cuda backend (compile(..., backend='cuda')); this graph runs on " + backend_);
    return *cuda_;
  }

  const Graph& plan() const { return cuda_ ? cuda_->graph() : runtime_->graph(); }

  // Whether a run writes this input in place (computed once: set_input asks on every call).
  bool updates_in_place(const std::string& name) const {
    plan().find_input(name);  // throws, listing the inputs, for an unknown name
    return in_place_.count(name) != 0;
  }

  void run() {
    py::gil_scoped_release nogil;
    if (cuda_) cuda_->run();
    else runtime_->run();
  }

  void set_dim(const std::string& name, int64_t v) {
    if (cuda_) cuda_->set_dim(name, v);
    else runtime_->set_dim(name, v);
  }

  py::array output(const std::string& name) const { return cuda_ ? to_numpy(cuda_->output(name)) : to_numpy(runtime_->output(name)); }

  // The output's own buffer as a numpy array (no copy): the array owns it from now on.
  py::array take_output(const std::string& name) {
    if (cuda_) return output(name);  // downloaded: already a copy of its own
    auto* b = new Buffer(runtime_->take_output(name));
    py::capsule owner(b, [](void* p) { delete static_cast<Buffer*>(p); });
    std::vector<py::ssize_t> strides(b->shape().size());
    py::ssize_t stride = static_cast<py::ssize_t>(dtype_size(b->dtype()));
    for (size_t d = strides.size(); d-- > 0;) {
      strides[d] = stride;
      stride *= static_cast<py::ssize_t>(b->shape()[d]);
    }
    return py::array(numpy_dtype(b->dtype()), b->shape(), strides, b->bytes(), owner);
  }
  std::string output_dtype(const std::string& name) const { return dtype_name(plan().node(plan().find_output(name)).dtype); }

  void set_profiling(bool on) {
    if (cuda_) cuda_->set_profiling(on);
    else runtime_->set_profiling(on);
  }
  std::vector<Interpreter::ProfileEntry> profile() const { return cuda_ ? cuda_->profile() : runtime_->profile(); }

  const CompileResult& result() const { return result_; }
  const std::string& backend() const { return backend_; }

 private:
  std::string backend_;
  std::unique_ptr<cpu::ThreadPool> pool_;  // before runtime_: its kernels use it
  std::unique_ptr<cpu::FusedJit> jit_;
  CompileResult result_;
  std::unique_ptr<Interpreter> runtime_;       // cpu and reference
  std::unique_ptr<cuda::CudaExecutor> cuda_;  // cuda
  std::set<std::string> updated_;   // inputs a Scatter may write in place
  std::set<std::string> in_place_;  // inputs a run does write in place
};

}  // namespace

void bind_runtime(py::module_& m) {
  py::class_<CompiledGraph>(m, "CompiledGraph", "A compiled plan with its runtime; set inputs, run, read outputs")
      .def("set_input", &CompiledGraph::set_input, py::arg("name"), py::arg("array"), py::arg("dtype") = "", py::arg("in_place") = false,
           "an array of the input's shape; read in place when C-contiguous (keep it unchanged until the next set_input); "
           "in_place: the plan's in-place update of this input (a KV cache) writes into the array")
      .def("updates_in_place", &CompiledGraph::updates_in_place, py::arg("name"))
      .def("set_dim", &CompiledGraph::set_dim)
      .def("set_input_device", &CompiledGraph::set_input_device, py::arg("name"), py::arg("ptr"), py::arg("dtype"), py::arg("shape"),
           "cuda backend: device memory at ptr (e.g. a torch CUDA tensor's data_ptr()) read in place, and updated in place where "
           "the plan updates this input (a KV cache); keep it alive and unchanged until the next set_input")
      .def("copy_input_device", &CompiledGraph::copy_input_device, py::arg("name"), py::arg("ptr"), py::arg("dtype"), py::arg("shape"),
           "cuda backend: device memory at ptr copied into the input's own device buffer (for values at a new address each "
           "call: the buffer's address, and the CUDA graph replaying the run, stay the same)")
      .def("copy_output_to", &CompiledGraph::copy_output_to, py::arg("name"), py::arg("ptr"), py::arg("bytes"),
           "cuda backend: the output copied into device memory at ptr; returns when it is there")
      .def("cuda_graph_stats", [](CompiledGraph& c) {
        const cuda::CudaExecutor::GraphStats& g = c.cuda_executor().graph_stats();
        return py::dict(py::arg("recorded") = g.recorded, py::arg("replayed") = g.replayed, py::arg("launched") = g.launched,
                        py::arg("dropped") = g.dropped);
      }, "cuda backend: runs recorded into a CUDA graph, replayed from one, run launch by launch; times the graphs were dropped")
      .def("output_shape", &CompiledGraph::output_shape)
      .def("run", &CompiledGraph::run)
      .def("output", &CompiledGraph::output, py::arg("name"), "a copy, as numpy (bf16 as uint16 bits)")
      .def("take_output", &CompiledGraph::take_output, py::arg("name"),
           "the output's buffer itself as numpy, no copy (once per run: output() no longer has it)")
      .def("output_dtype", &CompiledGraph::output_dtype)
      .def_property_readonly("backend", &CompiledGraph::backend)
      .def_property_readonly("compile_ms", [](const CompiledGraph& c) { return c.result().compile_ms; })
      .def_property_readonly("plan_nodes", [](const CompiledGraph& c) { return c.result().plan_nodes; })
      .def_property_readonly("cache_hit", [](const CompiledGraph& c) { return c.result().cache_hit; })
      .def("plan", [](const CompiledGraph& c) { return c.result().plan.dump(); })
      .def("set_profiling", &CompiledGraph::set_profiling)
      .def("profile", [](CompiledGraph& c) {
        std::vector<std::tuple<std::string, int64_t, double>> r;
        for (const auto& e : c.profile()) r.emplace_back(e.label, e.calls, e.ms);
        return r;
      }, "per kernel kind, slowest first: (label, calls, ms) since profiling was turned on");
  m.def("compile", [](const PyGraph& g, const std::string& backend, int search, const std::string& cache_dir, int threads) {
    return std::make_unique<CompiledGraph>(g, backend, search, cache_dir, threads);
  }, py::arg("graph"), py::arg("backend") = "cpu", py::arg("search") = 0, py::arg("cache_dir") = "", py::arg("threads") = 0,
        "compile a graph's outputs into a plan for a backend ('cpu', 'cuda' or 'reference'); search > 0 profiles that many "
        "candidates (on the cpu backend's own kernels)");
  m.def("cuda_unavailable_reason", &cuda::unavailable_reason, "empty when the cuda backend can run here; otherwise what is missing and what to do");
}

}  // namespace luminal::python
