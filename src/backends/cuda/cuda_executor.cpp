#include "backends/cuda/cuda_executor.h"

#include <algorithm>
#include <cstring>

#include "backends/cuda/nvrtc.h"
#include "core/error.h"

namespace luminal::cuda {

PlanKernels generate_plan_kernels(const Graph& plan) {
  PlanKernels k;
  k.source = cuda_prelude();
  k.per_node.resize(plan.size());
  std::vector<std::string> defined;
  for (NodeId id : plan.topo_order()) {
    if (plan.node(id).op == OpKind::Input) continue;
    k.per_node[id] = emit_node_kernels(plan, id, k.source, defined);
  }
  k.functions = defined.size();
  return k;
}

CudaExecutor::CudaExecutor(Graph plan, const std::string& cache_dir) : graph_(std::move(plan)), ctx_(Context::get()) {
  kernels_ = generate_plan_kernels(graph_);
  CompiledKernels compiled = nvrtc_compile(kernels_.source, ctx_.arch(), cache_dir);
  compile_ms_ = compiled.compile_ms;
  from_cache_ = compiled.from_cache;
  module_ = std::make_unique<Module>(ctx_, compiled.cubin);
  functions_ = kernels_.functions;
  functions_by_node_.resize(graph_.size());
  std::map<std::string, void*> by_name;
  for (size_t id = 0; id < graph_.size(); ++id) {
    if (!kernels_.per_node[id]) continue;
    for (const Launch& l : kernels_.per_node[id]->launches) {
      void*& f = by_name[l.function];
      if (!f) f = module_->function(l.function);
      functions_by_node_[id].push_back(f);
    }
  }
}

CudaExecutor::~CudaExecutor() {
  for (auto& [id, b] : inputs_) ctx_.free(b.ptr);
  for (auto& [name, b] : outputs_) ctx_.free(b.ptr);
  for (auto& [size, b] : free_) ctx_.free(b.ptr);
}

size_t CudaExecutor::device_bytes() const {
  size_t n = 0;
  for (const auto& [id, b] : inputs_) n += b.bytes;
  for (const auto& [name, b] : outputs_) n += b.bytes;
  for (const auto& [size, b] : free_) n += b.bytes;
  return n;
}

void CudaExecutor::set_input(const std::string& name, const Buffer& data) {
  NodeId id = graph_.find_input(name);
  const Node& n = graph_.node(id);
  if (data.shape().size() != n.shape.size())
    throw Error("input '" + name + "': expected shape " + to_string(n.shape) + " (rank " + std::to_string(n.shape.size()) +
                "), got " + data.shape_string());
  Buffer converted;
  const Buffer* src = &data;
  if (data.dtype() != n.dtype) {
    converted = data.cast(n.dtype);
    src = &converted;
  }
  auto it = inputs_.find(id);
  if (it != inputs_.end() && it->second.bytes >= src->nbytes() && it->second.bytes <= 2 * src->nbytes() + 4096) {
    it->second.shape = src->shape();  // reuse the allocation (a new token id each step)
  } else {
    if (it != inputs_.end()) ctx_.free(it->second.ptr);
    DeviceBuffer d;
    d.bytes = src->nbytes();
    d.ptr = ctx_.alloc(d.bytes);
    d.dtype = n.dtype;
    d.shape = src->shape();
    it = inputs_.insert_or_assign(id, d).first;
  }
  ctx_.upload(it->second.ptr, src->bytes(), src->nbytes());
}

void CudaExecutor::set_dim(const std::string& name, int64_t value) {
  if (value < 0) throw Error("dim '" + name + "': a dynamic dim cannot be negative (got " + std::to_string(value) + ")");
  explicit_dims_[name] = value;
}

void CudaExecutor::bind_dims() {
  dims_.clear();
  for (const auto& [k, v] : explicit_dims_) dims_[k] = v;
  for (NodeId id : graph_.inputs()) {
    const Node& n = graph_.node(id);
    auto it = inputs_.find(id);
    if (it == inputs_.end()) throw Error("input '" + n.name + "' was not set: call set_input(\"" + n.name + "\", buffer)");
    for (size_t d = 0; d < n.shape.size(); ++d)
      if (n.shape[d].kind() == ExprKind::Var && !dims_.count(n.shape[d].name())) dims_[n.shape[d].name()] = it->second.shape[d];
  }
  if (graph_dims_.empty()) graph_dims_ = graph_.dims();  // walks every expression: once
  for (const std::string& d : graph_dims_)
    if (!dims_.count(d))
      throw Error("dynamic dim '" + d + "' is not bound: call set_dim(\"" + d + "\", value) or set an input whose shape has it");
  for (NodeId id : graph_.inputs()) {
    const Node& n = graph_.node(id);
    std::vector<int64_t> want = concrete(n.shape);
    if (want != inputs_.at(id).shape)
      throw Error("input '" + n.name + "': shape mismatch: declared " + to_string(n.shape) + " = " + shape_string(want) +
                  " with the bound dims, but the buffer has shape " + shape_string(inputs_.at(id).shape));
  }
}

std::vector<int64_t> CudaExecutor::concrete(const std::vector<Expr>& shape) const {
  std::vector<int64_t> r;
  for (const Expr& e : shape) r.push_back(e.eval(dims_));
  return r;
}

CudaExecutor::DeviceBuffer CudaExecutor::take(DType t, const std::vector<int64_t>& shape) {
  size_t want = dtype_size(t);
  for (int64_t d : shape) want *= static_cast<size_t>(std::max<int64_t>(0, d));
  auto it = free_.lower_bound(want);
  DeviceBuffer b;
  if (it != free_.end() && it->first <= 2 * want + 4096) {
    b = it->second;
    free_.erase(it);
  } else {
    b.bytes = want;
    b.ptr = ctx_.alloc(want);
  }
  b.dtype = t;
  b.shape = shape;
  return b;
}

void CudaExecutor::give_back(DeviceBuffer b) {
  if (b.ptr) free_.emplace(b.bytes, b);
}

void CudaExecutor::launch(const Launch& l, const NodeKernels& k, void* function, DevicePtr out, const std::vector<DevicePtr>& in) {
  struct {
    int64_t v[kMaxKernelDims];
  } dims{};
  for (size_t i = 0; i < k.dims.size(); ++i) dims.v[i] = dims_.at(k.dims[i]);
  std::vector<void*> args;
  args.push_back(&out);
  for (const DevicePtr& p : in) args.push_back(const_cast<DevicePtr*>(&p));
  args.push_back(&dims);
  const int64_t work = l.work.eval(dims_);
  if (work <= 0) return;
  int64_t blocks = work;
  if (l.grid == Launch::Grid::Elements)
    blocks = std::min<int64_t>((work + kBlockThreads - 1) / kBlockThreads, int64_t(ctx_.info().multiprocessors) * 16);
  const int64_t shared = l.shared_bytes.eval(dims_);
  if (shared > ctx_.info().max_shared_per_block)
    throw Error("CUDA backend: a kernel needs " + std::to_string(shared) + " bytes of shared memory, more than the device's " +
                std::to_string(ctx_.info().max_shared_per_block) + " (attention over too many keys: use a smaller --context)");
  if (blocks > 0x7fffffff) throw Error("CUDA backend: too many blocks for one launch");
  ctx_.launch(function, static_cast<unsigned>(blocks), 1, 1, kBlockThreads, static_cast<size_t>(shared), args.data());
}

bool CudaExecutor::scatter_in_place(const Node& n, const std::vector<int>& uses) const {
  if (n.op != OpKind::Scatter) return false;
  const Edge& dest = n.inputs[0];
  const Node& src = graph_.node(dest.src);
  return src.op == OpKind::Input && uses[dest.src] == 1 && dest.view.is_contiguous() && src.dtype == n.dtype &&
         provably_equal(dest.view.shape(), src.shape);
}

void CudaExecutor::run() {
  for (auto& [name, b] : outputs_) give_back(b);
  outputs_.clear();
  bind_dims();
  if (order_.empty()) {
    order_ = graph_.topo_order();
    readers_.assign(graph_.size(), 0);
    for (NodeId id : order_)
      for (const Edge& e : graph_.node(id).inputs) ++readers_[e.src];
  }
  std::vector<int> uses = readers_;
  std::vector<std::optional<DeviceBuffer>> live(graph_.size());
  std::map<NodeId, NodeId> in_place;  // a Scatter whose result is this input's buffer
  auto ptr_of = [&](NodeId src) -> DevicePtr {
    if (auto a = in_place.find(src); a != in_place.end()) return inputs_.at(a->second).ptr;
    if (graph_.node(src).op == OpKind::Input) return inputs_.at(src).ptr;
    LM_ASSERT(live[src].has_value(), "node " + std::to_string(src) + " read before it ran or after it was freed");
    return live[src]->ptr;
  };
  auto release_inputs = [&](const Node& n, size_t from) {
    for (size_t k = from; k < n.inputs.size(); ++k) {
      NodeId s = n.inputs[k].src;
      if (--uses[s] == 0 && live[s]) {
        give_back(*live[s]);
        live[s].reset();
      }
    }
  };
  for (NodeId id : order_) {
    const Node& n = graph_.node(id);
    if (n.op == OpKind::Input) continue;
    const NodeKernels& k = *kernels_.per_node[id];
    std::vector<DevicePtr> in;
    for (const Edge& e : n.inputs) in.push_back(ptr_of(e.src));
    if (scatter_in_place(n, uses)) {
      launch(k.launches[1], k, functions_by_node_[id][1], in[0], in);
      in_place[id] = n.inputs[0].src;
      --uses[n.inputs[0].src];
      release_inputs(n, 1);
      continue;
    }
    DeviceBuffer out = take(n.dtype, concrete(n.shape));
    for (size_t i = 0; i < k.launches.size(); ++i) launch(k.launches[i], k, functions_by_node_[id][i], out.ptr, in);
    release_inputs(n, 0);
    if (n.op == OpKind::Output) outputs_[n.name] = out;
    else live[id] = out;
  }
  for (auto& b : live)
    if (b) give_back(*b);
  ctx_.synchronize();  // a failing kernel reports here, not in a later call
}

Buffer CudaExecutor::output(const std::string& name) const {
  auto it = outputs_.find(name);
  if (it == outputs_.end()) {
    graph_.find_output(name);  // throws, listing the outputs, if the name is wrong
    throw Error("output '" + name + "' has not been computed yet: call run() first");
  }
  Buffer b(it->second.dtype, it->second.shape);
  ctx_.download(b.bytes(), it->second.ptr, b.nbytes());
  return b;
}

}  // namespace luminal::cuda
