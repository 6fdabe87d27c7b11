#include "backends/cpu/fused_jit.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "backends/cpu/thread_pool.h"
#include "core/cache_paths.h"

namespace luminal::cpu {

namespace {

// The inner-axis stride an edge's view gives, when the view is one strided layer whose last
// stride is a constant; otherwise the input is copied to contiguous memory first (stride 1).
InnerStride inner_stride_of(const View& v) {
  if (v.layers().size() != 1 || v.rank() == 0) return v.rank() == 0 ? InnerStride::Zero : InnerStride::One;
  const Expr& s = v.layers()[0].strides.back();
  if (!s.is_const()) return InnerStride::Any;
  return s.value() == 1 ? InnerStride::One : s.value() == 0 ? InnerStride::Zero : InnerStride::Any;
}

std::optional<FusedProgram> single_op_program(const Graph& g, const Node& n) {
  if (n.op != OpKind::Cast && !is_unary(n.op) && !is_binary(n.op)) return std::nullopt;
  FusedProgram p;
  p.n_inputs = static_cast<int>(n.inputs.size());
  FusedInstr in;
  in.op = static_cast<int>(n.op);
  in.dtype = n.dtype;
  in.in_dtype = g.node(n.inputs[0].src).dtype;
  in.a = 0;
  in.b = n.inputs.size() > 1 ? 1 : -1;
  p.instrs.push_back(in);
  return p;
}

std::string class_letter(InnerStride s) { return s == InnerStride::One ? "1" : s == InnerStride::Zero ? "0" : "n"; }

}  // namespace

FusedKernelFn KernelLibrary::find(const std::string& key) const {
  auto it = fns_.find(key);
  return it == fns_.end() ? nullptr : it->second;
}

std::string KernelLibrary::add(const std::vector<std::pair<std::string, std::string>>& named_sources, const std::string& cache_dir) {
  std::string source = fused_kernel_prelude();
  for (const auto& [name, body] : named_sources) source += body;
  std::string why;
  std::unique_ptr<JitModule> m = JitModule::load(source, cache_dir, &why);
  if (!m) return why;
  for (const auto& [name, body] : named_sources)
    if (void* f = m->symbol(name)) fns_[name] = reinterpret_cast<FusedKernelFn>(f);
  modules_.push_back(std::move(m));
  return "";
}

void FusedJit::prepare(const Graph& plan, const std::string& cache_dir) {
  by_node_.clear();
  if (!library_) library_ = std::make_shared<KernelLibrary>();
  auto t0 = std::chrono::steady_clock::now();
  // Kernels are named by a hash of what decides their code, so identical kernels share one
  // function and a library reused across plans (the search's candidates) compiles only new ones.
  std::map<std::string, std::string> missing;  // name -> source
  std::vector<std::pair<const Node*, std::pair<std::string, std::vector<InnerStride>>>> wanted;
  std::map<std::string, bool> distinct;
  for (NodeId id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(id);
    FusedSignature sig;
    if (n.op == OpKind::Kernel && n.kernel == "Fused") {
      try {
        sig.program = FusedProgram::decode(n.code);
      } catch (const Error&) {
        continue;
      }
    } else if (auto p = single_op_program(plan, n)) {
      sig.program = *p;  // a lone elementwise primitive: a program of one instruction
    } else {
      continue;
    }
    if (static_cast<size_t>(sig.program.n_inputs) != n.inputs.size()) continue;
    for (const Edge& e : n.inputs) {
      sig.input_dtypes.push_back(plan.node(e.src).dtype);
      sig.inner.push_back(inner_stride_of(e.view));
    }
    sig.out_dtype = n.dtype;
    std::string key;
    for (int64_t w : sig.program.encode()) key += std::to_string(w) + ",";
    for (size_t i = 0; i < sig.inner.size(); ++i) key += dtype_name(sig.input_dtypes[i]) + class_letter(sig.inner[i]) + ",";
    key += dtype_name(n.dtype);
    std::string name = "lm_fused_" + hash_key(key);
    if (!library_->find(name) && !missing.count(name)) {
      std::optional<std::string> body = fused_kernel_source(sig, name);
      if (!body) continue;
      missing[name] = *body;
    }
    distinct[name] = true;
    wanted.push_back({&n, {name, sig.inner}});
  }
  if (wanted.empty()) {
    status_ = "no elementwise kernels to generate";
    return;
  }
  std::string how = "all " + std::to_string(distinct.size()) + " already loaded";
  if (!missing.empty()) {
    std::string why = library_->add({missing.begin(), missing.end()}, cache_dir);
    if (!why.empty()) {
      status_ = "generated kernels unavailable (" + why + "); elementwise nodes run on the kernel interpreter";
      return;
    }
    how = (library_->last_from_cache() ? "loaded from " : "compiled into ") + library_->last_path();
  }
  for (auto& [node, bound] : wanted)
    if (FusedKernelFn f = library_->find(bound.first)) by_node_[node] = Bound{f, bound.second};
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  status_ = std::to_string(distinct.size()) + " generated kernels for " + std::to_string(by_node_.size()) + " elementwise nodes, " +
            how + " in " + std::to_string(static_cast<int64_t>(ms)) + " ms";
}

bool FusedJit::run(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& shapes, Buffer& out,
                   ThreadPool& pool) const {
  auto it = by_node_.find(&n);
  if (it == by_node_.end()) return false;
  const Bound& b = it->second;
  std::vector<int64_t> shape = out.shape();
  if (shape.empty()) shape = {1};
  const size_t rank = shape.size(), n_in = in.size();
  std::vector<const void*> ptrs(n_in);
  std::vector<int64_t> off(n_in), st(n_in * rank);
  std::vector<Buffer> copies;  // inputs whose view is not plain strided, made contiguous
  copies.reserve(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const Reader& r = in[i];
    if (r.strided() && r.strided()->strides.size() == shapes[i].size()) {
      const auto& s = *r.strided();
      int64_t inner = s.strides.empty() ? 0 : s.strides.back();
      if ((b.inner[i] == InnerStride::One && inner != 1) || (b.inner[i] == InnerStride::Zero && inner != 0)) return false;
      ptrs[i] = r.buffer().bytes();
      off[i] = s.offset;
      for (size_t d = 0; d < rank; ++d) st[i * rank + d] = s.strides.empty() ? 0 : s.strides[d];
      continue;
    }
    if (b.inner[i] == InnerStride::Zero) return false;
    Buffer& c = copies.emplace_back(r.dtype(), shapes[i]);
    for (size_t z = 0; z < c.numel(); ++z) c.set(z, r(static_cast<int64_t>(z)));
    ptrs[i] = c.bytes();
    off[i] = 0;
    int64_t stride = 1;
    for (size_t d = rank; d-- > 0;) {
      st[i * rank + d] = stride;
      stride *= shape[d];
    }
  }
  // Merge an axis into the next when every input steps through both as one (the output is
  // contiguous): longer inner loops, fewer row starts.
  for (size_t d = rank - 1; d-- > 0;) {
    bool mergeable = true;
    for (size_t i = 0; i < n_in && mergeable; ++i)
      mergeable = st[i * rank + d] == st[i * rank + d + 1] * shape[d + 1];
    if (!mergeable) continue;
    shape[d + 1] *= shape[d];
    shape[d] = 1;
  }
  // Axes of length 1 that merging left behind are harmless: they contribute no offset.
  const int64_t inner = shape.back(), rows = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, inner);
  if (out.numel() == 0) return true;
  auto call = [&](int64_t r0, int64_t r1, int64_t j0, int64_t j1) {
    b.fn(ptrs.data(), off.data(), st.data(), out.bytes(), shape.data(), static_cast<int64_t>(rank), r0, r1, j0, j1);
  };
  const int64_t total = rows * inner, min_chunk = 8192;
  if (total < 2 * min_chunk || pool.size() == 1) {
    call(0, rows, 0, inner);
  } else if (rows >= pool.size()) {
    pool.parallel_for(rows, [&](int64_t r0, int64_t r1) { call(r0, r1, 0, inner); }, std::max<int64_t>(1, min_chunk / inner));
  } else {
    pool.parallel_for(inner, [&](int64_t j0, int64_t j1) { call(0, rows, j0, j1); }, std::max<int64_t>(1, min_chunk / rows));
  }
  return true;
}

}  // namespace luminal::cpu
