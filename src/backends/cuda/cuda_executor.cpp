#include "backends/cuda/cuda_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <set>
#include <thread>

#include "backends/cuda/cublaslt.h"
#include "backends/cuda/nvrtc.h"
#include "core/error.h"

namespace luminal::cuda {

namespace {

size_t bytes_of(DType t, const std::vector<int64_t>& shape) {
  size_t bytes = dtype_size(t);
  for (int64_t d : shape) bytes *= static_cast<size_t>(std::max<int64_t>(0, d));
  return bytes;
}

// An allocation of `have` bytes serves `want` when it is not more than about twice as large.
bool fits(size_t have, size_t want) { return have >= want && have <= 2 * want + 4096; }

// More than twice the H100's and H200's L2 (50 MB): filling it evicts what a launch read.
constexpr size_t kL2FlushBytes = size_t(128) << 20;

// A scratch of kL2FlushBytes whose fill (evict()) empties L2 before a timed launch, so weights
// are timed cold, as a step reads them. Where the device has no room for it, evict() does
// nothing (timing must not fail a run).
class L2Flush {
 public:
  explicit L2Flush(Context& ctx) : ctx_(ctx) {
    if (ctx_.free_memory() <= 2 * kL2FlushBytes) return;
    try {
      p_ = ctx_.alloc(kL2FlushBytes);
    } catch (const Error&) {
      p_ = 0;
    }
  }
  ~L2Flush() {
    if (p_) ctx_.free(p_);
  }
  L2Flush(const L2Flush&) = delete;
  L2Flush& operator=(const L2Flush&) = delete;
  void evict() {
    if (p_) ctx_.fill_zero(p_, kL2FlushBytes);
  }
  // The same eviction by a kernel that reads the scratch (lm_evict_read) and lets the next
  // launch overlap its tail: the neighbour a decode's GEMV has in a step.
  void evict_by_read(void* function, bool overlap) {
    if (!p_) return;
    if (!filled_) ctx_.fill_zero(p_, kL2FlushBytes), filled_ = true;
    DevicePtr words = p_;
    long long n = static_cast<long long>(kL2FlushBytes / 16) - 1;
    DevicePtr sink = p_ + kL2FlushBytes - 16;  // past the words read
    void* args[] = {&words, &n, &sink};
    ctx_.launch(function, static_cast<unsigned>(ctx_.info().multiprocessors * 8), 1, 1, 256, 0, args, overlap);
  }

 private:
  Context& ctx_;
  DevicePtr p_ = 0;
  bool filled_ = false;
};

}  // namespace

bool tune_log() {
  static const bool on = [] {
    const char* e = std::getenv("LUMINAL_CUDA_TUNE_LOG");
    return e && std::string(e) == "1";
  }();
  return on;
}

PlanKernels generate_plan_kernels(const Graph& plan, const CodegenOptions& options) {
  PlanKernels k;
  k.per_node.resize(plan.size());
  const std::vector<std::string> dims = plan.dims();
  for (NodeId id : plan.topo_order()) {
    if (plan.node(id).op == OpKind::Input) continue;
    k.per_node[id] = emit_node_kernels(plan, id, dims, k.functions, options);
  }
  k.small_groups = small_groups(plan, dims, k.functions, options);
  // The routers through o first: the other folds then take the groups as those leave them.
  if (options.routers_through_o) fold_routers_through_o(plan, k.small_groups, k.per_node, k.functions, dims, options.routing_in_o);
  if (options.fold_groups) fold_small_groups(plan, k.small_groups, k.per_node, dims, k.functions);
  if (options.groups_in_producers) fold_groups_into_producers(plan, k.small_groups, k.per_node, dims, k.functions);
  return k;
}

void require_usable() {
  std::string why = unavailable_reason();
  if (why.empty()) why = nvrtc_unavailable_reason();
  if (!why.empty()) throw Error("the cuda backend cannot run here: " + why);
}

size_t PlanKernels::part_of(const std::string& function, size_t parts) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the same part on every machine and run
  for (unsigned char ch : function) h = (h ^ ch) * 1099511628211ull;
  return static_cast<size_t>(h % std::max<size_t>(1, parts));
}

void PlanKernels::drop_alternatives(std::vector<NodeKernels*> extra) {
  for (auto& k : per_node)
    if (k) extra.push_back(&*k);
  // A linear layer's or group's other forms (normed, gated) and an expert sum's schedules keep
  // their first schedules too.
  for (size_t i = 0; i < extra.size(); ++i)
    for (NodeKernels* form : {extra[i]->normed.get(), extra[i]->gated.get(), extra[i]->expert_sum.get(), extra[i]->expert_sum_early.get(), extra[i]->experts_in_one.get(),
                              extra[i]->routed.get(), extra[i]->group_tail.get(), extra[i]->router_logits.get()})
      if (form) extra.push_back(form);
  std::set<std::string> used;
  for (NodeKernels* k : extra) {
    k->alternatives.clear();
    for (const Launch& l : k->launches) used.insert(l.function);
    if (k->tiled) used.insert(k->tiled->function);
    if (k->tiled_mma) used.insert(k->tiled_mma->function);
    if (k->tiled_mma_prep) used.insert(k->tiled_mma_prep->function);
    if (k->once) used.insert(k->once->function);
    if (k->once_folded) used.insert(k->once_folded->function);
    if (k->words) used.insert(k->words->function);
    if (k->words_narrow) used.insert(k->words_narrow->function);
    if (k->softmax_fold) used.insert(k->softmax_fold->launches[0].function);
  }
  for (const SmallGroup& g : small_groups) {
    used.insert(g.launch.function);
    if (g.router_through_o) used.insert(g.router_through_o->group_function), used.insert(g.router_through_o->prep_function);
  }
  FunctionSet kept;
  for (size_t i = 0; i < functions.names.size(); ++i)
    if (used.count(functions.names[i])) {
      kept.names.push_back(functions.names[i]);
      kept.texts.push_back(functions.texts[i]);
    }
  functions = std::move(kept);
}

std::vector<std::string> PlanKernels::module_sources(size_t parts) const {
  parts = std::max<size_t>(1, parts);
  std::vector<std::string> out(parts, cuda_prelude());
  for (size_t i = 0; i < functions.texts.size(); ++i) out[part_of(functions.names[i], parts)] += functions.texts[i];
  return out;
}

CudaExecutor::CudaExecutor(Graph plan, const std::string& cache_dir, CudaOptions options)
    : graph_(std::move(plan)), ctx_(Context::get()), options_(options) {
  cache_dir_ = cache_dir;
  read_env_options();
  if (options_.schedule_cache && options_.tune_variants && options_.force_variant < 0 && !cache_dir_.empty()) {
    const DeviceInfo& d = ctx_.info();
    schedules_ = ScheduleCache(cache_dir_, d.name + " sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + " " +
                                               std::to_string(d.multiprocessors) + " SMs, driver " + std::to_string(d.driver_version) +
                                               ", nvrtc " + nvrtc_version());
  }
  kernels_ = generate_plan_kernels(graph_, CodegenOptions{.bf16_activations = options_.bf16_activations,
                                                                .router_in_group = options_.router_in_group,
                                                                .index_values_in_groups = options_.index_values_in_groups,
                                                                .top_ranks_in_groups = options_.top_ranks_in_groups,
                                                                .warp_groups = options_.warp_groups,
                                                                .group_prefetch = options_.group_prefetch_bytes > 0,
                                                                .fold_groups = options_.fold_groups,
                                                                .groups_in_producers = options_.groups_in_producers,
                                                                .attention_norms = options_.attention_norms,
                                                                .routers_through_o = options_.routers_through_o,
                                                                .routing_in_o = options_.routing_in_o});
  find_linear_groups();
  if (!options_.tune_variants && options_.force_variant < 0) {
    std::vector<NodeKernels*> groups;
    for (LinearGroup& g : groups_) groups.push_back(&g.kernels);
    kernels_.drop_alternatives(groups);
  }
  // Parts compile on their own threads (a model's plan is 3.6-4.8 s of NVRTC as one program on
  // this project's 2-core machine); each is cached on disk on its own. Their number depends on
  // the machine, not on the plan, so that similar plans split alike (module_sources).
  const size_t threads = std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), 8));
  const size_t parts = kernels_.functions.texts.size() >= 12 ? threads : 1;
  const std::vector<std::string> sources = kernels_.module_sources(parts);
  std::vector<CompiledKernels> compiled(parts);
  std::vector<std::string> errors(parts);
  std::vector<std::thread> workers;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < parts; ++i)
    workers.emplace_back([&, i] {
      try {
        compiled[i] = nvrtc_compile(sources[i], ctx_.arch(), cache_dir);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (std::thread& t : workers) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error(e);
  compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  from_cache_ = true;
  for (const CompiledKernels& c : compiled) {
    from_cache_ = from_cache_ && c.from_cache;
    modules_.push_back(std::make_unique<Module>(ctx_, c.cubin));
  }
  functions_ = kernels_.functions.texts.size();
  rows_to_bf16_ = modules_[0]->function(kRowsToBf16);
  argmax_ = modules_[0]->function(kArgmaxF32);
  evict_read_ = modules_[0]->function(kEvictRead);
  functions_by_node_.resize(graph_.size());
  words_functions_.assign(graph_.size(), nullptr);
  words_narrow_functions_.assign(graph_.size(), nullptr);
  softmax_fold_functions_.assign(graph_.size(), nullptr);
  std::map<std::string, void*> by_name;
  for (size_t i = 0; i < kernels_.functions.names.size(); ++i)
    by_name[kernels_.functions.names[i]] = modules_[PlanKernels::part_of(kernels_.functions.names[i], parts)]->function(kernels_.functions.names[i]);
  for (size_t id = 0; id < graph_.size(); ++id) {
    if (!kernels_.per_node[id]) continue;
    for (const Launch& l : kernels_.per_node[id]->launches) functions_by_node_[id].push_back(by_name.at(l.function));
    if (kernels_.per_node[id]->tiled) functions_by_node_[id].push_back(by_name.at(kernels_.per_node[id]->tiled->function));
    if (kernels_.per_node[id]->tiled_mma) functions_by_node_[id].push_back(by_name.at(kernels_.per_node[id]->tiled_mma->function));
    if (kernels_.per_node[id]->tiled_mma_prep) functions_by_node_[id].push_back(by_name.at(kernels_.per_node[id]->tiled_mma_prep->function));
    if (kernels_.per_node[id]->once) functions_by_node_[id].push_back(by_name.at(kernels_.per_node[id]->once->function));  // last
    if (kernels_.per_node[id]->once_folded) once_folded_functions_[static_cast<NodeId>(id)] = by_name.at(kernels_.per_node[id]->once_folded->function);
    for (const Launch& l : kernels_.per_node[id]->alternatives) alternative_functions_[id].push_back(by_name.at(l.function));
    if (kernels_.per_node[id]->words) words_functions_[id] = by_name.at(kernels_.per_node[id]->words->function);
    if (kernels_.per_node[id]->words_narrow) words_narrow_functions_[id] = by_name.at(kernels_.per_node[id]->words_narrow->function);
    if (const auto& normed = kernels_.per_node[id]->normed) {
      normed_forms_[id] = load_form(normed.get(), by_name);
      if (normed->group_tail) tail_forms_[static_cast<NodeId>(id)] = load_form(normed->group_tail.get(), by_name);
    }
    if (const auto& sum = kernels_.per_node[id]->expert_sum) expert_sum_forms_[id] = load_form(sum.get(), by_name);
    if (const auto& early = kernels_.per_node[id]->expert_sum_early) expert_sum_early_forms_[id] = load_form(early.get(), by_name);
    if (const auto& one = kernels_.per_node[id]->experts_in_one) {
      experts_in_one_forms_[static_cast<NodeId>(id)] = load_form(one.get(), by_name);
      if (one->normed) experts_in_one_normed_forms_[static_cast<NodeId>(id)] = load_form(one->normed.get(), by_name);
      experts_sum_of_gate_up_[kernels_.per_node[id]->experts_gate_up] = static_cast<NodeId>(id);
    }
    if (const auto& fold = kernels_.per_node[id]->softmax_fold) softmax_fold_functions_[id] = by_name.at(fold->launches[0].function);
    if (const auto& gated = kernels_.per_node[id]->gated; gated && graph_.node(static_cast<NodeId>(id)).kernel == "ScaledMatmul") {
      gated_expert_forms_[static_cast<NodeId>(id)] = load_form(gated.get(), by_name);
      if (gated->normed) gated_expert_normed_forms_[static_cast<NodeId>(id)] = load_form(gated->normed.get(), by_name);
      if (gated->routed) routed_forms_[static_cast<NodeId>(id)] = load_form(gated->routed.get(), by_name);
      if (gated->normed && gated->normed->routed) routed_normed_forms_[static_cast<NodeId>(id)] = load_form(gated->normed->routed.get(), by_name);
    }
  }
  order_ = graph_.topo_order();
  readers_.assign(graph_.size(), 0);
  reader_lists_.assign(graph_.size(), {});
  for (NodeId id : order_)
    for (const Edge& e : graph_.node(id).inputs) {
      ++readers_[e.src];
      reader_lists_[e.src].push_back(id);
    }
  prepare_small_groups(by_name);
  prepare_router_folds(by_name);
  for (LinearGroup& g : groups_) {
    const NodeKernels* normed = g.kernels.normed.get();
    const NodeKernels* forms[2][2] = {{&g.kernels, g.kernels.gated.get()}, {normed, normed ? normed->gated.get() : nullptr}};
    for (int n = 0; n < 2; ++n)
      for (int gated = 0; gated < 2; ++gated) g.forms[n][gated] = load_form(forms[n][gated], by_name);
  }
  graph_dims_ = graph_.dims();
  dims_dev_ = ctx_.alloc(std::max<size_t>(1, graph_dims_.size()) * sizeof(int64_t));
}

void CudaExecutor::read_env_options() {
  const char* env = std::getenv("LUMINAL_CUBLASLT");
  cublaslt_ = cublaslt_unavailable_reason().empty() && !(env && std::string(env) == "0");
  const char* bf16 = std::getenv("LUMINAL_CUDA_BF16_ACTIVATIONS");
  if (bf16 && std::string(bf16) == "1") options_.bf16_activations = true;
  const char* tune = std::getenv("LUMINAL_CUDA_TUNE");
  if (tune && std::string(tune) == "0") options_.tune_variants = false;
  if (const char* chain = std::getenv("LUMINAL_CUDA_TUNE_CHAIN")) options_.tune_in_chain = std::string(chain) != "0";
  const char* graphs = std::getenv("LUMINAL_CUDA_GRAPHS");
  if (graphs && std::string(graphs) == "0") options_.graphs = false;
  const char* overlap = std::getenv("LUMINAL_CUDA_OVERLAP");
  if (overlap) options_.overlap_launches = std::string(overlap) != "0";
  if (const char* v = std::getenv("LUMINAL_CUDA_VARIANT")) options_.force_variant = std::max(0, std::atoi(v));  // for profiling one
  if (const char* cap = std::getenv("LUMINAL_CUDA_BLOCKS_PER_SM")) options_.blocks_per_sm = std::max(1, std::atoi(cap));
  const char* once = std::getenv("LUMINAL_CUDA_ATTENTION_ONCE");
  if (once && std::string(once) == "0") options_.attention_once = false;
  const char* words = std::getenv("LUMINAL_CUDA_WORDS");
  if (words && std::string(words) == "0") options_.store_words = false;
  const char* fold = std::getenv("LUMINAL_CUDA_FOLD");
  if (fold && std::string(fold) == "0") options_.fold_residuals = false;
  const char* skip = std::getenv("LUMINAL_CUDA_SKIP_COPIES");
  if (skip && std::string(skip) == "0") options_.skip_in_order_copies = false;
  const char* narrow = std::getenv("LUMINAL_CUDA_NARROW");
  if (narrow && std::string(narrow) == "0") options_.narrow_gated_inputs = false;
  const char* norm = std::getenv("LUMINAL_CUDA_NORM_GEMV");
  if (norm && std::string(norm) == "0") options_.norm_in_gemv = false;
  const char* gated = std::getenv("LUMINAL_CUDA_GATED_GEMV");
  if (gated && std::string(gated) == "0") options_.gated_in_gemv = false;
  const char* pairs = std::getenv("LUMINAL_CUDA_PAIRS");
  if (pairs && std::string(pairs) == "0") options_.pair_launches = false;
  const char* experts = std::getenv("LUMINAL_CUDA_EXPERT_SUM");
  if (experts && std::string(experts) == "0") options_.expert_sum_in_gemv = false;
  if (const char* one = std::getenv("LUMINAL_CUDA_EXPERTS_IN_ONE")) options_.experts_in_one = std::string(one) != "0";
  if (const char* kb = std::getenv("LUMINAL_CUDA_EXPERTS_SMEM_KB")) options_.experts_in_one_smem_kb = std::max(0, std::atoi(kb));
  if (const char* small = std::getenv("LUMINAL_CUDA_SMALL_GROUPS")) options_.small_groups = std::string(small) != "0";
  if (const char* router = std::getenv("LUMINAL_CUDA_ROUTER_IN_GROUP")) options_.router_in_group = std::string(router) != "0";
  if (const char* iv = std::getenv("LUMINAL_CUDA_GROUP_INDEX_VALUES")) options_.index_values_in_groups = std::string(iv) != "0";
  if (const char* tr = std::getenv("LUMINAL_CUDA_TOP_RANKS")) options_.top_ranks_in_groups = std::string(tr) != "0";
  if (const char* fg = std::getenv("LUMINAL_CUDA_FOLD_GROUPS")) options_.fold_groups = std::string(fg) != "0";
  if (const char* gp = std::getenv("LUMINAL_CUDA_GROUP_IN_PRODUCER")) options_.groups_in_producers = std::string(gp) != "0";
  if (const char* ro = std::getenv("LUMINAL_CUDA_ROUTER_THROUGH_O")) options_.routers_through_o = std::string(ro) != "0";
  if (const char* ri = std::getenv("LUMINAL_CUDA_ROUTING_IN_O")) options_.routing_in_o = std::string(ri) != "0";
  if (const char* an = std::getenv("LUMINAL_CUDA_ATTENTION_NORMS")) options_.attention_norms = std::string(an) != "0";
  if (const char* gw = std::getenv("LUMINAL_CUDA_GROUP_WARP")) options_.warp_groups = std::string(gw) != "0";
  if (const char* gp = std::getenv("LUMINAL_CUDA_GROUP_PREFETCH_MB")) options_.group_prefetch_bytes = std::max(0LL, std::atoll(gp)) << 20;
  if (const char* refine = std::getenv("LUMINAL_CUDA_REFINE")) options_.refine_in_step = std::string(refine) != "0";
  // For measuring wider refinements: LUMINAL_CUDA_REFINE_WITHIN=0.3 LUMINAL_CUDA_REFINE_RUNNERS_UP=8.
  if (const char* within = std::getenv("LUMINAL_CUDA_REFINE_WITHIN")) options_.refine_within = std::max(0.0, std::atof(within));
  if (const char* up = std::getenv("LUMINAL_CUDA_REFINE_RUNNERS_UP")) options_.refine_runners_up = std::max(0, std::atoi(up));
  if (const char* kept = std::getenv("LUMINAL_CUDA_SCHEDULE_CACHE")) options_.schedule_cache = std::string(kept) != "0";
  if (const char* b = std::getenv("LUMINAL_CUDA_SMALL_GROUP_BLOCKS")) options_.small_group_blocks = std::max(0, std::atoi(b));
  const char* softmax = std::getenv("LUMINAL_CUDA_SOFTMAX_FOLD");
  if (softmax && std::string(softmax) == "0") options_.softmax_in_readers = false;
  const char* scatter = std::getenv("LUMINAL_CUDA_SCATTER_STORE");
  if (scatter && std::string(scatter) == "0") options_.scatter_in_producers = false;
  if (const char* concurrent = std::getenv("LUMINAL_CUDA_CONCURRENT_GEMMS"))  // 0, 1, or anything else: timed
    options_.concurrent_group_gemms = std::string(concurrent) == "0" ? 0 : std::string(concurrent) == "1" ? 1 : -1;
}

void CudaExecutor::clear_graphs() {
  for (const auto& [key, g] : graphs_)
    if (g.exec) {  // counted when a recorded graph goes, not a count of uncaptured runs
      ++graph_stats_.dropped;
      break;
    }
  for (auto& [name, b] : outputs_) give_back(b);  // a graph's own (kept) outputs are freed below
  for (auto& [key, g] : graphs_) {
    ctx_.destroy_graph(g.exec);
    for (auto& [name, b] : g.outputs) ctx_.free(b.ptr);
  }
  graphs_.clear();
  outputs_.clear();  // they pointed into the graphs' buffers
}

CudaExecutor::~CudaExecutor() {
  for (auto& [name, b] : outputs_)
    if (!b.kept) ctx_.free(b.ptr);
  outputs_.clear();
  clear_graphs();
  ctx_.free(dims_dev_);
  if (argmax_out_) ctx_.free(argmax_out_);
  for (auto& [id, k] : kept_) ctx_.free(k.value.ptr);
  for (auto& [id, b] : inputs_)
    if (!group_of_weight_.count(id) && !b.borrowed) ctx_.free(b.ptr);
  for (LinearGroup& g : groups_) ctx_.free(g.base);
  for (auto& [id, b] : counters_) ctx_.free(b.ptr);
  for (DevicePtr p : retired_counters_) ctx_.free(p);
  for (auto& [o, r] : router_folds_)
    if (r.weights) ctx_.free(r.weights);
  for (auto& [size, b] : free_) ctx_.free(b.ptr);
}

size_t CudaExecutor::device_bytes() const {
  size_t n = 0;
  for (const auto& [id, b] : inputs_) n += b.bytes;
  for (const auto& [name, b] : outputs_) n += b.bytes;
  for (const auto& [size, b] : free_) n += b.bytes;
  return n + kept_bytes_;
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
  // Recorded graphs read inputs where they were, and skip the values kept from them.
  new_values(id);
  if (it != inputs_.end() && it->second.borrowed) {  // the caller's memory is the caller's: not reused
    clear_graphs();
    inputs_.erase(it);
    it = inputs_.end();
  }
  if (auto g = group_of_weight_.find(id); g != group_of_weight_.end()) {  // a place in its group's allocation
    LinearGroup& grp = groups_[g->second];
    const size_t i = static_cast<size_t>(std::find(grp.weights.begin(), grp.weights.end(), id) - grp.weights.begin());
    const size_t want = grp.offsets[i + 1] - grp.offsets[i];
    if (src->nbytes() != want)
      throw Error("input '" + name + "': expected shape " + to_string(n.shape) + " (" + std::to_string(want) + " bytes), got " + data.shape_string());
    if (!grp.base) grp.base = ctx_.alloc(grp.offsets.back());
    DeviceBuffer d;
    d.ptr = grp.base + grp.offsets[i];
    d.bytes = want;
    d.dtype = n.dtype;
    d.shape = src->shape();
    d.kept = true;  // part of the group's allocation, freed with it
    inputs_.insert_or_assign(id, d);
    ctx_.upload(d.ptr, src->bytes(), src->nbytes());
    return;
  }
  ctx_.upload(owned_input(id, src->shape(), src->nbytes()).ptr, src->bytes(), src->nbytes());
}

CudaExecutor::DeviceBuffer& CudaExecutor::owned_input(NodeId id, const std::vector<int64_t>& shape, size_t nbytes) {
  auto it = inputs_.find(id);
  if (it != inputs_.end() && !it->second.borrowed && fits(it->second.bytes, nbytes)) {
    it->second.shape = shape;  // reuse the allocation (a new token id each step): recorded graphs stay valid
    return it->second;
  }
  if (it != inputs_.end()) {
    clear_graphs();
    if (!it->second.borrowed) ctx_.free(it->second.ptr);
  }
  DeviceBuffer d;
  d.bytes = nbytes;
  d.ptr = ctx_.alloc(d.bytes);
  d.dtype = graph_.node(id).dtype;
  d.shape = shape;
  return inputs_.insert_or_assign(id, d).first->second;
}

void CudaExecutor::copy_input_device(const std::string& name, DevicePtr ptr, DType dtype, const std::vector<int64_t>& shape) {
  const NodeId id = checked_device_input(name, ptr, dtype, shape);
  if (group_of_weight_.count(id)) {  // a grouped weight's place is in its group's allocation
    set_input_device(name, ptr, dtype, shape);
    return;
  }
  new_values(id);  // recorded graphs skip the values kept from it
  const size_t bytes = bytes_of(dtype, shape);
  ctx_.copy(owned_input(id, shape, bytes).ptr, ptr, bytes);
}

void CudaExecutor::new_values(NodeId id) {
  ++input_versions_[id];
  if (!invariant_inputs_.count(id)) return;
  clear_graphs();
  // Values set again after a run: this input changes between runs (a position, a token: in a
  // graph of static shapes any input can look like a weight). What reads it is computed in every
  // run from now on, inside the recorded graphs, which then need not be dropped on each run.
  invariant_inputs_.erase(id);
  changing_inputs_.insert(id);
  for (auto it = kept_.begin(); it != kept_.end();) it = keeps(it->first) ? std::next(it) : forget_kept(it);
}

std::map<NodeId, CudaExecutor::Kept>::iterator CudaExecutor::forget_kept(std::map<NodeId, Kept>::iterator it) {
  kept_bytes_ -= it->second.value.bytes;
  ctx_.free(it->second.value.ptr);
  return kept_.erase(it);
}

bool CudaExecutor::keeps(NodeId id) const {
  if (!invariants_.invariant(id)) return false;
  for (NodeId r : invariants_.reads(id))
    if (changing_inputs_.count(r)) return false;
  return true;
}

std::vector<uint64_t> CudaExecutor::versions_of(NodeId id) const {
  std::vector<uint64_t> v;
  for (NodeId r : invariants_.reads(id)) {
    auto it = input_versions_.find(r);
    v.push_back(it == input_versions_.end() ? 0 : it->second);
  }
  return v;
}

void CudaExecutor::set_dim(const std::string& name, int64_t value) {
  if (value < 0) throw Error("dim '" + name + "': a dynamic dim cannot be negative (got " + std::to_string(value) + ")");
  explicit_dims_[name] = value;
}

void CudaExecutor::bind_dims() {
  dims_.clear();
  evaluated_.clear();
  evaluated_true_.clear();
  for (const auto& [k, v] : explicit_dims_) dims_[k] = v;
  for (NodeId id : graph_.inputs()) {
    const Node& n = graph_.node(id);
    auto it = inputs_.find(id);
    if (it == inputs_.end()) throw Error("input '" + n.name + "' was not set: call set_input(\"" + n.name + "\", buffer)");
    for (size_t d = 0; d < n.shape.size(); ++d)
      if (n.shape[d].kind() == ExprKind::Var && !dims_.count(n.shape[d].name())) dims_[n.shape[d].name()] = it->second.shape[d];
  }
  for (const std::string& d : graph_dims_)
    if (!dims_.count(d))
      throw Error("dynamic dim '" + d + "' is not bound: call set_dim(\"" + d + "\", value) or set an input whose shape has it");
  plan_dims_ = dims_;
  if (options_.graphs)
    for (const std::string& d : options_.bucketed_dims)
      if (auto it = plan_dims_.find(d); it != plan_dims_.end()) it->second = (it->second + options_.bucket - 1) / options_.bucket * options_.bucket;
  for (NodeId id : graph_.inputs()) {
    const Node& n = graph_.node(id);
    std::vector<int64_t> want;
    for (const Expr& e : n.shape) want.push_back(eval_true(e));
    if (want != inputs_.at(id).shape)
      throw Error("input '" + n.name + "': shape mismatch: declared " + to_string(n.shape) + " = " + shape_string(want) +
                  " with the bound dims, but the buffer has shape " + shape_string(inputs_.at(id).shape));
  }
}

std::vector<int64_t> CudaExecutor::concrete(const std::vector<Expr>& shape) {
  std::vector<int64_t> r;
  for (const Expr& e : shape) r.push_back(eval(e));
  return r;
}

int64_t CudaExecutor::eval(const Expr& e) {
  if (auto v = e.as_const()) return *v;
  auto [it, fresh] = evaluated_.try_emplace(e.node(), 0);
  if (fresh) it->second = e.eval(plan_dims_);
  return it->second;
}

int64_t CudaExecutor::eval_true(const Expr& e) {
  if (auto v = e.as_const()) return *v;
  auto [it, fresh] = evaluated_true_.try_emplace(e.node(), 0);
  if (fresh) it->second = e.eval(dims_);
  return it->second;
}

CudaExecutor::DeviceBuffer CudaExecutor::take(DType t, const std::vector<int64_t>& shape) {
  const size_t want = bytes_of(t, shape);
  auto it = free_.lower_bound(want);
  DeviceBuffer b;
  if (it != free_.end() && fits(it->first, want)) {
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

DevicePtr CudaExecutor::zeroed_counters(NodeId id, int64_t count) {
  const size_t want = static_cast<size_t>(std::max<int64_t>(count, 256)) * sizeof(uint32_t);
  DeviceBuffer& b = counters_[id];
  if (b.bytes < want) {
    // Graphs recorded with the old counters keep them (they stay zero); a dims key's first run
    // is never captured and sizes them for its runs, so this does not happen while recording.
    if (b.ptr) retired_counters_.push_back(b.ptr);
    b.ptr = ctx_.alloc(want);
    b.bytes = want;
    ctx_.fill_zero(b.ptr, want);
  }
  return b.ptr;
}

void CudaExecutor::give_back(DeviceBuffer b) {
  if (!b.ptr || b.kept) return;
  if (!pending_.empty()) held_.push_back(b);  // a held launch may still read it (flush_pending)
  else free_.emplace(b.bytes, b);
}

int64_t CudaExecutor::grid_stride_blocks(int64_t threads, int blocks_per_sm, bool whole_waves) const {
  const int64_t sms = ctx_.info().multiprocessors, cap = sms * (blocks_per_sm > 0 ? blocks_per_sm : options_.blocks_per_sm);
  const int64_t blocks = (threads + kBlockThreads - 1) / kBlockThreads;
  return std::min<int64_t>(whole_waves ? (blocks + sms - 1) / sms * sms : blocks, cap);
}

void CudaExecutor::launch(const Launch& l, const NodeKernels& k, void* function, DevicePtr out, const std::vector<DevicePtr>& in) {
  std::vector<void*> args;
  args.push_back(&out);
  for (const DevicePtr& p : in) args.push_back(const_cast<DevicePtr*>(&p));
  if (l.residual_in) args.push_back(&gemv_residual_);
  if (l.gain_in) args.push_back(&gemv_gain_);
  if (l.softmax_out) args.push_back(&softmax_out_);
  if (l.scatter_out) {  // null: only held launches store a scatter's update (scatter_store_of)
    static DevicePtr none = 0;
    args.push_back(&none);
    args.push_back(&none);
  }
  for (DevicePtr& p : fold_args_) args.push_back(&p);
  args.push_back(&dims_dev_);
  const auto [blocks, threads] = launch_shape(l);
  if (blocks <= 0) return;
  ++launches_, ++launch_serial_;
  const int64_t shared = eval(l.shared_bytes);
  if (shared > ctx_.info().max_shared_per_block)
    throw Error("CUDA backend: a kernel needs " + std::to_string(shared) + " bytes of shared memory, more than the device's " +
                std::to_string(ctx_.info().max_shared_per_block) + " (attention over too many keys: use a smaller --context)");
  if (blocks > 0x7fffffff) throw Error("CUDA backend: too many blocks for one launch");
  ctx_.launch(function, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(threads), static_cast<size_t>(shared), args.data(),
              options_.overlap_launches);
}

std::pair<int64_t, int64_t> CudaExecutor::launch_shape(const Launch& l) {
  const int64_t work = eval(l.work);
  if (work <= 0) return {0, 0};
  const int64_t blocks = (l.grid == Launch::Grid::Elements ? grid_stride_blocks(work, l.blocks_per_sm, l.spread) : work) + l.extra_blocks;
  int64_t threads = kBlockThreads;
  if (l.grid == Launch::Grid::Rows && !l.row_length.is_const(0))  // about four of the row's elements a thread
    threads = std::clamp<int64_t>((eval(l.row_length) + 127) / 128 * 32, 32, kRowMaxThreads);
  return {blocks, threads};
}

const Launch* CudaExecutor::single_launch(NodeId id) const {
  const Node& n = graph_.node(id);
  if (n.op == OpKind::Input || n.op == OpKind::Output || !kernels_.per_node[id] || group_of_member_.count(id)) return nullptr;
  const NodeKernels& k = *kernels_.per_node[id];
  if (!k.alternatives.empty() || k.scratch_f32 || k.linear || k.tiled || k.tiled_mma || k.once || k.normed || k.gated || k.expert_sum ||
      k.words || k.words_narrow || k.launches.size() != (k.scatter ? 2u : 1u))
    return nullptr;
  const Launch& l = k.launches.back();  // a scatter's: the write of its updates, in place
  if (!l.shared_bytes.is_const(0) || l.residual_in || l.gain_in || l.softmax_out || l.tensor_cores) return nullptr;
  return &l;
}

void CudaExecutor::push_args(std::vector<void*>& args, const PendingLaunch& l) {
  args.push_back(const_cast<DevicePtr*>(&l.out));
  for (const DevicePtr& q : l.in) args.push_back(const_cast<DevicePtr*>(&q));
  if (l.launch->scatter_out) {
    args.push_back(const_cast<DevicePtr*>(&l.scatter_dst));
    args.push_back(const_cast<DevicePtr*>(&l.scatter_idx));
  }
  args.push_back(&dims_dev_);
}

void CudaExecutor::end_pending() {
  pending_.clear();
  for (DeviceBuffer& b : held_) free_.emplace(b.bytes, b);
  held_.clear();
}

void CudaExecutor::flush_pending() {
  auto alone = [&](const PendingLaunch& p) {
    std::vector<void*> args;
    push_args(args, p);
    ctx_.launch(p.function, static_cast<unsigned>(p.shape.first), 1, 1, static_cast<unsigned>(p.shape.second), 0, args.data(),
                options_.overlap_launches);
    ++launches_, ++launch_serial_;
  };
  void* f = pending_.size() > 1 ? joined_launch_function() : nullptr;
  if (f) {
    std::vector<void*> args;
    std::vector<unsigned> splits;
    splits.reserve(pending_.size());
    int64_t blocks = 0, threads = 0;
    for (const PendingLaunch& p : pending_) {
      push_args(args, p);
      blocks += p.shape.first;
      threads = std::max(threads, p.shape.second);
      splits.push_back(static_cast<unsigned>(blocks));
    }
    for (size_t i = 0; i + 1 < splits.size(); ++i) args.push_back(&splits[i]);
    ctx_.launch(f, static_cast<unsigned>(blocks), 1, 1, static_cast<unsigned>(threads), 0, args.data(), options_.overlap_launches);
    ++launches_, ++launch_serial_;
    ++launches_paired_;
  } else {  // one held, or their join not compiled (a graph being recorded compiles nothing): in order
    for (const PendingLaunch& p : pending_) alone(p);
  }
  end_pending();
}

void* CudaExecutor::joined_launch_function() {
  std::vector<std::string> key;
  for (const PendingLaunch& p : pending_) key.push_back(p.launch->function);
  if (auto it = joined_functions_.find(key); it != joined_functions_.end()) return it->second;
  if (capturing_) return nullptr;  // compiled in an ordinary run first
  void* f = nullptr;
  std::vector<std::string> texts;
  for (const std::string& name : key)
    if (const std::string* text = kernels_.functions.find(name)) texts.push_back(*text);
  if (auto jf = texts.size() == key.size() ? joined_function(texts) : std::nullopt) {
    try {  // a join that does not compile runs as separate launches
      const CompiledKernels c = nvrtc_compile(cuda_prelude() + jf->text, ctx_.arch(), cache_dir_);
      joined_modules_.push_back(std::make_unique<Module>(ctx_, c.cubin));
      f = joined_modules_.back()->function(jf->name);
      ++joins_compiled_;
    } catch (const Error& e) {
      if (tune_log()) std::fprintf(stderr, "luminal cuda: %s and %zu more do not join: %s\n", key[0].c_str(), key.size() - 1, e.what());
    }
  }
  joined_functions_.emplace(key, f);
  return f;
}

bool CudaExecutor::may_join(const PendingLaunch& x) const {
  if (pending_.empty() || pending_.size() >= kMaxJoined) return false;
  // One block size for all: equal, or the largest where all are at most kBlockThreads (every
  // kernel that may join strides over its block, and sizes its shared arrays for up to that).
  int64_t threads = x.shape.second, blocks = x.shape.first;
  bool equal = true;
  for (const PendingLaunch& p : pending_) {
    threads = std::max(threads, p.shape.second);
    equal = equal && p.shape.second == x.shape.second;
    blocks += p.shape.first;
  }
  if ((!equal && threads > kBlockThreads) || blocks > 0x7fffffff) return false;
  // None reads or writes what another writes (an in-place scatter writes its input 0's buffer;
  // a kernel storing a scatter's update writes its destination too).
  auto writes = [](const PendingLaunch& l, DevicePtr q) { return q && (q == l.out || q == l.scatter_dst); };
  auto reads = [](const PendingLaunch& l) {  // a scatter's index (scatter_store_of) is read too
    std::vector<DevicePtr> r = l.in;
    r.push_back(l.scatter_idx);
    return r;
  };
  const std::vector<DevicePtr> x_reads = reads(x);
  for (const PendingLaunch& p : pending_) {
    for (DevicePtr q : x_reads)
      if (writes(p, q)) return false;
    for (DevicePtr q : reads(p))
      if (writes(x, q)) return false;
    if (writes(p, x.out) || writes(p, x.scatter_dst)) return false;
  }
  return true;
}

void CudaExecutor::hold_launch(const PendingLaunch& x) {
  if (!may_join(x)) flush_pending();
  pending_.push_back(x);
}

bool CudaExecutor::on_library(const LinearOperands& l) {
  if (!cublaslt_) return false;
  // cuBLASLt takes its sizes from the host: the true dims (such a run is never recorded).
  const int64_t m = eval_true(l.m), n = eval_true(l.n), k = eval_true(l.k);
  if (m < kLibraryMinRows || n <= 0 || k <= 0) return false;
  const int64_t lda = eval_true(l.a_row_stride), w_off = eval_true(l.w_offset), ldw = eval_true(l.w_row_stride);
  const size_t ws = dtype_size(l.w_dtype);
  // cuBLASLt's algorithms may assume 256-byte aligned matrices and 16-byte aligned rows.
  if ((w_off * ws) % 256 != 0 || (ldw * ws) % 16 != 0 || lda < k || ldw < k) return false;
  if (l.w_dtype == DType::BF16) return options_.tensor_cores;
  return (eval_true(l.a_offset) * 4) % 256 == 0 && (lda * 4) % 16 == 0;
}

CudaExecutor::Bf16Activations CudaExecutor::take_bf16(int64_t m, int64_t k) {
  Bf16Activations a{take(DType::BF16, {m, k}), std::nullopt};
  if (!options_.bf16_activations) a.lo = take(DType::BF16, {m, k});
  return a;
}

CudaExecutor::Bf16Activations CudaExecutor::store_words(const NodeKernels& k, NodeId id, const std::vector<DevicePtr>& in, int64_t m,
                                                        int64_t cols) {
  Bf16Activations a = take_bf16(m, cols);
  std::vector<DevicePtr> with = in;
  with.push_back(a.lo ? a.lo->ptr : 0);
  if (narrow_readers_.erase(id)) launch(*k.words_narrow, k, words_narrow_functions_[id], a.hi.ptr, with);  // its inputs are bf16
  else launch(*k.words, k, words_functions_[id], a.hi.ptr, with);
  ++words_stored_;
  return a;
}

CudaExecutor::Bf16Activations CudaExecutor::to_bf16(const LinearOperands& l, DevicePtr activations) {
  const int64_t m = eval_true(l.m), k = eval_true(l.k);
  Bf16Activations a = take_bf16(m, k);
  DevicePtr lo_ptr = a.lo ? a.lo->ptr : 0, src = activations + static_cast<DevicePtr>(eval_true(l.a_offset)) * 4;
  long long rows = m, cols = k, ld = eval_true(l.a_row_stride);
  void* args[] = {&a.hi.ptr, &lo_ptr, &src, &rows, &cols, &ld};
  ctx_.launch(rows_to_bf16_, static_cast<unsigned>(grid_stride_blocks(m * k)), 1, 1, kBlockThreads, 0, args);
  return a;
}

void CudaExecutor::bf16_gemm(const LinearOperands& l, const Bf16Activations& a, DevicePtr weight, DevicePtr out, bool accumulate,
                             bool side, DType out_type) {
  const int64_t m = eval_true(l.m), n = eval_true(l.n), k = eval_true(l.k), ldw = eval_true(l.w_row_stride);
  const DevicePtr w = weight + static_cast<DevicePtr>(eval_true(l.w_offset)) * 2;
  // Both parts on one stream (lo adds into what hi wrote): the side one only where the shape's
  // algorithm is chosen already, else its first call would time it on the main stream.
  side = side && cublaslt_ready(DType::BF16, k, ldw, n, m, n, k, out_type);
  cublaslt_linear(ctx_, DType::BF16, a.hi.ptr, k, w, ldw, out, n, m, n, k, accumulate, side, out_type);
  LM_ASSERT(!a.lo || out_type == DType::F32, "a bf16 GEMM output with the activations' lo part");
  if (a.lo) cublaslt_linear(ctx_, DType::BF16, a.lo->ptr, k, w, ldw, out, n, m, n, k, /*accumulate=*/true, side);
}

void CudaExecutor::give_back(Bf16Activations& a) {
  give_back(a.hi);  // the stream orders their reuse after the GEMMs
  if (a.lo) give_back(*a.lo);
}

bool CudaExecutor::run_linear(const LinearOperands& l, DevicePtr out, const std::vector<DevicePtr>& in, NodeId producer, bool accumulate) {
  if (!on_library(l)) return false;
  used_library_ = true;  // only a run that calls the library: the generated fallback can be recorded
  if (l.w_dtype == DType::BF16) {
    if (auto w = words_.find(producer); w != words_.end()) {
      bf16_gemm(l, w->second, in[1], out, accumulate);
      return true;
    }
    Bf16Activations a = to_bf16(l, in[0]);
    bf16_gemm(l, a, in[1], out, accumulate);
    give_back(a);
    return true;
  }
  const int64_t m = eval_true(l.m), n = eval_true(l.n), k = eval_true(l.k);
  const int64_t a_off = eval_true(l.a_offset), lda = eval_true(l.a_row_stride);
  const DevicePtr w = in[1] + static_cast<DevicePtr>(eval_true(l.w_offset)) * 4;
  const int64_t ldw = eval_true(l.w_row_stride);
  cublaslt_linear(ctx_, DType::F32, in[0] + static_cast<DevicePtr>(a_off) * 4, lda, w, ldw, out, n, m, n, k, accumulate);
  return true;
}

std::optional<NodeId> CudaExecutor::residual_of(NodeId id, const std::vector<int>& uses, const std::vector<std::optional<DeviceBuffer>>& live) {
  const NodeKernels& k = *kernels_.per_node[id];
  if (!options_.fold_residuals || !k.linear || graph_.node(id).dtype != DType::F32 || reader_lists_[id].size() != 1) return std::nullopt;
  if (!on_library(*k.linear) && !gemv_adds_residual(k)) return std::nullopt;
  const NodeId add = reader_lists_[id][0];
  const Node& a = graph_.node(add);
  if (a.op != OpKind::Add || a.dtype != DType::F32 || keeps(add) || a.inputs[0].src == a.inputs[1].src) return std::nullopt;
  const NodeId x = a.inputs[0].src == id ? a.inputs[1].src : a.inputs[0].src;
  const Node& xn = graph_.node(x);
  // Both read whole and in order with the sum's shape: the GEMM's [m, n] rows are the sum's.
  if (xn.op == OpKind::Input || xn.dtype != DType::F32 || !live[x] || live[x]->kept || uses[x] != 1) return std::nullopt;
  if (!a.inputs[0].view.is_contiguous() || !a.inputs[1].view.is_contiguous()) return std::nullopt;
  if (!(graph_.node(id).shape == a.shape) || !(xn.shape == a.shape)) return std::nullopt;
  return x;
}

bool CudaExecutor::gemv_adds_residual(const NodeKernels& k) {
  if (k.launches.empty() || !k.launches.back().residual_in) return false;
  for (const Launch& l : k.alternatives)
    if (!l.residual_in) return false;
  return true;
}

bool CudaExecutor::reads_in_order(const View& v) {
  // Every layer contiguous from offset 0 and unmasked at these dims (the plan's and the true
  // ones, which differ in bucketed dims: a recorded graph must hold for its whole bucket) makes
  // the composition the identity.
  for (const ViewLayer& l : v.layers())
    for (bool plan : {true, false}) {
      auto at = [&](const Expr& e) { return plan ? eval(e) : eval_true(e); };
      if (at(l.offset) != 0) return false;
      int64_t want = 1;
      for (size_t d = l.shape.size(); d-- > 0;) {
        const int64_t size = at(l.shape[d]);
        if (l.dim_masked(d) && (at(l.mask_lo[d]) > 0 || at(l.mask_hi[d]) < size)) return false;
        if (size != 1 && at(l.strides[d]) != want) return false;
        want *= size;
      }
    }
  return true;
}

bool CudaExecutor::scatter_in_place(NodeId id, const Node& n, const std::vector<int>& uses) {
  if (n.op != OpKind::Scatter) return false;
  // The symbolic part (a proof over the shapes) is the same on every run: decided once.
  auto [it, fresh] = scatter_plain_.try_emplace(id, false);
  if (fresh) it->second = scatter_can_update_input(graph_, n);
  return it->second && uses[n.inputs[0].src] == 1;
}

std::optional<std::pair<int64_t, int64_t>> CudaExecutor::words_shape(NodeId id) {
  if (!options_.store_words || !words_functions_[id] || reader_lists_[id].empty() || !options_.tensor_cores) return std::nullopt;
  int64_t elements = 1;
  for (const Expr& e : graph_.node(id).shape) elements *= eval_true(e);
  std::optional<std::pair<int64_t, int64_t>> shape;
  for (NodeId r : reader_lists_[id]) {
    const NodeKernels& k = *kernels_.per_node[r];
    if (!k.linear || k.linear->a_from_scratch || k.linear->w_dtype != DType::BF16 || !on_library(*k.linear)) return std::nullopt;
    const LinearOperands& l = *k.linear;
    const int64_t m = eval_true(l.m), kk = eval_true(l.k);
    if (eval_true(l.a_offset) != 0 || eval_true(l.a_row_stride) != kk || m * kk != elements) return std::nullopt;
    if (auto g = group_of_member_.find(r); g != group_of_member_.end() && !(group_usable(groups_[g->second]) && groups_[g->second].on_library))
      return std::nullopt;
    shape = {m, kk};
  }
  return shape;
}

bool CudaExecutor::scratch_words(const std::optional<LinearOperands>& l, DType out_dtype) {
  return options_.store_words && options_.tensor_cores && l && l->a_from_scratch && l->w_dtype == DType::BF16 && out_dtype == DType::F32 &&
         on_library(*l);
}

void CudaExecutor::run(bool wait) {
  for (auto& [name, b] : outputs_) give_back(b);  // a recorded graph's outputs stay its own (kept)
  outputs_.clear();
  bind_dims();
  if (!analysed_) {
    analysed_ = true;
    invariants_.analyse(graph_, order_);
    for (NodeId id : order_)
      if (keeps(id))
        for (NodeId r : invariants_.reads(id)) invariant_inputs_.insert(r);
  }
  std::vector<int64_t> true_dims, key;
  for (const std::string& d : graph_dims_) {
    true_dims.push_back(dims_.at(d));
    key.push_back(plan_dims_.at(d));
  }
  ctx_.upload_async(dims_dev_, true_dims.data(), true_dims.size() * sizeof(int64_t));
  // A recorded graph for these dims: replay it. The second uncaptured run of some dims records
  // one (the first computes the kept values and sizes the free list).
  RecordedGraph* graph = nullptr;
  bool capture = false;
  if (options_.graphs && !profiling_) {
    graph = &graphs_[key];
    if (graph->exec && ++graph->replays == kRefineAtReplay && options_.refine_in_step && options_.tune_variants && options_.force_variant < 0)
      refine_graph(key);  // may record the graph again, with other choices
    if (graph->exec) {
      ++graph_stats_.replayed;
      ctx_.launch_graph(graph->exec);
      for (const auto& [name, b] : graph->outputs) {
        DeviceBuffer o = b;
        o.shape.clear();
        for (const Expr& e : graph_.node(graph_.find_output(name)).shape) o.shape.push_back(eval_true(e));
        outputs_[name] = o;
      }
      if (wait) ctx_.synchronize();
      return;
    }
    capture = graph->runs >= 1 && !graph->library;
    if (capture) ctx_.begin_capture(), capture_choices_.clear();
  }
  used_library_ = false;
  folded_.clear();
  narrow_readers_.clear();
  deferred_norms_.clear();
  deferred_products_.clear();
  folded_softmaxes_.clear();
  folded_scatters_.clear();
  plan_attention_folds();
  routers_in_o_.clear();
  capturing_ = capture;
  end_pending();  // none held (a run that threw may have left one)
  gated_outputs_.clear();
  experts_outputs_.clear();
  experts_fused_products_.clear();
  std::vector<int> uses = readers_;
  std::vector<std::optional<DeviceBuffer>> live(graph_.size());
  std::map<NodeId, NodeId> in_place;  // a Scatter whose result is this input's buffer
  auto ptr_of = [&](NodeId src) -> DevicePtr {
    if (deferred_norms_.count(src)) src = graph_.node(src).inputs[0].src;  // its readers norm its input
    if (deferred_products_.count(src)) return 0;                             // its sum reads its inputs
    if (norms_in_attention_.count(src)) return 0;                            // its attention reads its inputs
    if (auto a = in_place.find(src); a != in_place.end()) return inputs_.at(a->second).ptr;
    if (graph_.node(src).op == OpKind::Input) return inputs_.at(src).ptr;
    LM_ASSERT(live[src].has_value(), "node " + std::to_string(src) + " read before it ran or after it was freed");
    return live[src]->ptr;
  };
  // Whether `src`'s value is there now (a deferred norm's: its input's).
  auto ready_now = [&](NodeId src) {
    if (deferred_norms_.count(src)) src = graph_.node(src).inputs[0].src;
    return graph_.node(src).op == OpKind::Input || in_place.count(src) > 0 || live[src].has_value();
  };
  std::function<void(const Node&, size_t)> release_inputs = [&](const Node& n, size_t from) {
    for (size_t k = from; k < n.inputs.size(); ++k) {
      NodeId s = n.inputs[k].src;
      if (--uses[s] == 0 && (deferred_norms_.count(s) || deferred_products_.count(s) || norms_in_attention_.count(s)))
        release_inputs(graph_.node(s), 0);  // its readers are done with its inputs
      if (uses[s] == 0 && live[s]) {
        give_back(*live[s]);
        live[s].reset();
        if (auto w = words_.find(s); w != words_.end()) {  // hi was the live buffer
          if (w->second.lo) give_back(*w->second.lo);
          words_.erase(w);
        }
      }
    }
  };
  // A scatter that wrote its destination's buffer: its value is that buffer, whose input changed.
  // Its index and update are let go unless `keep_inputs` (a write its attention does, which reads
  // them later: plan_attention_folds).
  auto wrote_in_place = [&](NodeId id, const Node& n, bool keep_inputs = false) {
    in_place[id] = n.inputs[0].src;
    ++input_versions_[n.inputs[0].src];
    --uses[n.inputs[0].src];
    if (!keep_inputs) release_inputs(n, 1);
  };
  std::optional<Context::Timer> timer;
  if (profiling_) timer.emplace(ctx_);
  // Small groups deferred to their fold reader (SmallGroupRun::deferred), by that reader.
  std::map<NodeId, size_t> deferred_groups;
  // Whether gate/up node `id` runs its group inside its gated GEMV this run (fold_small_groups).
  auto folds_group_here = [&](NodeId id) {
    if (!options_.fold_groups || options_.experts_in_one || keeps(id) || !gates_experts(id)) return false;
    // A twin that scales the logits itself runs only where the router ran in the o projection.
    if (const auto fg = fold_group_of_.find(id); fg != fold_group_of_.end()) {
      const std::optional<RouterThroughO>& f = kernels_.small_groups[fg->second].router_through_o;
      if (f && f->routed_takes_h && !routers_in_o_.count(f->router)) return false;
    }
    const bool normed_in = deferred_norms_.count(graph_.node(id).inputs[0].src) > 0;
    return (normed_in ? routed_normed_forms_ : routed_forms_).count(id) > 0;
  };
  // The group that router `id` runs in its last block this run (groups_in_producers), if any.
  auto group_in_producer = [&](NodeId id) -> std::optional<size_t> {
    if (!options_.groups_in_producers) return std::nullopt;
    const auto t = tail_group_of_.find(id);
    if (t == tail_group_of_.end() || keeps(id)) return std::nullopt;
    const SmallGroup& grp = kernels_.small_groups[t->second];
    if (!runs_small_group(t->second) || !small_group_norms_deferred(grp) || (grp.fold_reader && folds_group_here(*grp.fold_reader)))
      return std::nullopt;
    return t->second;
  };
  // Group g has run (launched, or inside its reader's GEMV) at node `at`: the members up to it
  // let their inputs go; the later ones will as they come.
  auto group_ran = [&](size_t g, NodeId at) {
    for (NodeId m : kernels_.small_groups[g].nodes)
      if (position_[m] <= position_[at]) release_inputs(graph_.node(m), 0);
    small_group_runs_[g].deferred = false;
    ++small_groups_run_;
  };
  // Group g runs in the last block of node `at`'s launch, which computes its leaf `leaf`
  // (gen::last_block_group): its members' buffers are taken now, and their pointers, its other
  // leaves' and a zeroed counter go to fold_args_.
  auto group_in_last_block = [&](size_t g, NodeId leaf, NodeId at) {
    const SmallGroup& grp = kernels_.small_groups[g];
    for (NodeId m : grp.nodes) {
      live[m] = take(graph_.node(m).dtype, concrete(graph_.node(m).shape));
      fold_args_.push_back(live[m]->ptr);
    }
    for (NodeId l : grp.leaves)
      if (l != leaf) fold_args_.push_back(ptr_of(l));
    fold_args_.push_back(zeroed_counters(at, 1));
    small_group_runs_[g].in_producer = true;
  };
  auto launch_group = [&](size_t g, NodeId at) {
    const SmallGroup& grp = kernels_.small_groups[g];
    flush_pending();
    std::vector<DevicePtr> in;
    for (size_t j = 1; j < grp.nodes.size(); ++j) in.push_back(live[grp.nodes[j]]->ptr);
    for (NodeId l : grp.leaves) in.push_back(ptr_of(l));
    if (grp.counter) in.push_back(zeroed_counters(grp.nodes[0], 1));
    if (grp.prefetch) {
      const auto [weights, bytes] = weights_after(at);
      in.push_back(weights);
      in.push_back(bytes);  // (a 64-bit value: the parameter is an unsigned long long)
    }
    void* function = small_group_runs_[g].function;
    if (grp.router_through_o && routers_in_o_.erase(grp.router_through_o->router)) {
      // Its router's logits came unscaled with the o projection: the twin scales them, from h.
      function = router_folds_.at(grp.router_through_o->o).group_function;
      fold_args_.push_back(ptr_of(grp.router_through_o->sum));
    }
    if (timer) timer->start();
    Launch l = grp.launch;
    // (At most a block a multiprocessor: a group's grid barrier needs them all resident.)
    if (grp.counter && options_.small_group_blocks > 0) l.work = Expr(std::min(options_.small_group_blocks, ctx_.info().multiprocessors));
    launch(l, *kernels_.per_node[grp.nodes[0]], function, live[grp.nodes[0]]->ptr, in);
    fold_args_.clear();
    if (timer) {
      ProfileEntry& p = profile_["SmallGroup"];
      p.label = "SmallGroup";
      ++p.calls;
      p.ms += timer->stop_ms();
    }
    group_ran(g, at);
  };
  for (NodeId id : order_) {
    const Node& n = graph_.node(id);
    if (n.op == OpKind::Input) continue;
    const NodeKernels& k = *kernels_.per_node[id];
    if (auto f = attention_fold_of_.find(id); f != attention_fold_of_.end() && f->second != id) {
      // Computed by its attention (plan_attention_folds): a norm launches nothing and keeps its
      // inputs live for it; a cache write is its cache's buffer from here on (its index and
      // update are let go when the attention has run).
      if (n.op == OpKind::Scatter) {
        wrote_in_place(id, n, true);
      } else {
        norms_in_attention_.insert(id);
      }
      continue;
    }
    if (routers_in_o_.count(id)) {  // its o projection's launch computed it (router_fold_at)
      release_inputs(n, 0);
      continue;
    }
    if (folded_scatters_.erase(id)) {  // the kernel computing its update stored it (scatter_store_of)
      wrote_in_place(id, n);
      ++scatters_folded_;
      continue;
    }
    if (experts_fused_products_.count(id)) {  // a gated product the experts' one kernel kept to itself
      deferred_products_.insert(id);
      continue;
    }
    if (auto o = experts_outputs_.find(id); o != experts_outputs_.end()) {  // the experts' one kernel stored it
      live[id] = o->second;
      experts_outputs_.erase(o);
      release_inputs(n, 0);
      continue;
    }
    // A group deferred to this node, which will not run it inside its GEMV: launched first.
    if (auto d = deferred_groups.find(id); d != deferred_groups.end() && !folds_group_here(id)) {
      launch_group(d->second, id);
      deferred_groups.erase(d);
    }
    if (auto sg = small_group_of_.find(id); sg != small_group_of_.end()) {
      SmallGroupRun& r = small_group_runs_[sg->second];
      const SmallGroup& grp = kernels_.small_groups[sg->second];
      if (id == grp.nodes[0]) r.active = r.in_producer || (runs_small_group(sg->second) && small_group_norms_deferred(grp));
      if (r.active) {  // one launch at launch_at computes every member (the ones before it wait for it)
        if (id == r.launch_at && r.in_producer) {  // its producer's last block computed them
          r.in_producer = false;
          group_ran(sg->second, id);
        } else if (id == r.launch_at) {
          flush_pending();
          for (NodeId m : grp.nodes) live[m] = take(graph_.node(m).dtype, concrete(graph_.node(m).shape));
          r.deferred = grp.fold_reader && folds_group_here(*grp.fold_reader);
          if (r.deferred)
            deferred_groups[*grp.fold_reader] = sg->second;
          else
            launch_group(sg->second, id);
        } else if (position_[id] > position_[r.launch_at] && !r.deferred) {
          release_inputs(n, 0);  // its value came with the group's launch
        }
        continue;
      }
    }
    const bool in_place_scatter = scatter_in_place(id, n, uses);
    const bool invariant = !in_place_scatter && n.op != OpKind::Output && keeps(id);
    if (invariant) {
      auto it = kept_.find(id);
      if (it != kept_.end() && it->second.versions == versions_of(id)) {
        // Where it was computed it launched alone, ending the held launches' join: ending it
        // here too keeps every run's joins the same, so a later run meets no new join to
        // compile (the second 512-token prefill had waited 0.5-0.8 s on NVRTC for one).
        flush_pending();
        release_inputs(n, 0);
        live[id] = it->second.value;
        continue;
      }
    }
    if (!invariant && defers_norm(id)) {  // its readers norm as they load; its inputs stay live for them
      deferred_norms_.insert(id);
      ++norms_folded_;
      continue;
    }
    if (!invariant && sums_experts(id)) {  // its sum over the experts computes it; its inputs stay live
      deferred_products_.insert(id);
      ++experts_summed_;
      continue;
    }
    if (!invariant && folds_softmax(id)) {  // its first reader computes and stores it; its inputs stay live
      live[id] = take(n.dtype, concrete(n.shape));
      folded_softmaxes_.insert(id);
      ++softmaxes_folded_;
      continue;
    }
    if (timer) timer->start();
    struct Record {  // adds the node's device time to its label when profiling
      CudaExecutor& e;
      std::optional<Context::Timer>& t;
      const Node& n;
      ~Record() {
        if (!t) return;
        std::string label = n.op == OpKind::Kernel ? n.kernel : op_name(n.op);
        ProfileEntry& p = e.profile_[label];
        p.label = label;
        ++p.calls;
        try {
          p.ms += t->stop_ms();
        } catch (...) {  // a failing kernel is reported by the run's own synchronize
        }
      }
    } record{*this, timer, n};
    if (auto p = gated_outputs_.find(id); p != gated_outputs_.end()) {  // its linear group's GEMV stored it
      live[id] = p->second;
      gated_outputs_.erase(p);
      release_inputs(n, 0);
      continue;
    }
    if (auto f = folded_.find(id); f != folded_.end()) {  // its GEMM already added the two (its other operand's buffer is the GEMM's)
      live[id] = live[f->second];
      live[f->second].reset();
      folded_.erase(f);
      release_inputs(n, 0);
      continue;
    }
    std::vector<DevicePtr> in;
    for (const Edge& e : n.inputs) in.push_back(ptr_of(e.src));
    if (!invariant && gates_experts(id)) {  // the gated product over the chosen experts, in one GEMV
      flush_pending();
      const NodeId p = k.gated_node;
      // Reading a deferred norm: in[0] is its input (ptr_of), its gain goes alongside.
      const bool normed_in = deferred_norms_.count(n.inputs[0].src) > 0;
      if (normed_in) {
        const Node& norm = graph_.node(n.inputs[0].src);
        gemv_gain_ = norm.inputs.size() > 1 ? ptr_of(norm.inputs[1].src) : 0;
      }
      if (const std::optional<NodeId> sum = experts_in_one_sum(id, normed_in, ready_now)) {
        // The down experts' sum too: its output now, its other inputs after the product's three.
        const Node& sn = graph_.node(*sum);
        const Node& dn = graph_.node(kernels_.per_node[*sum]->expert_product);
        DeviceBuffer out = take(sn.dtype, concrete(sn.shape));
        std::vector<DevicePtr> args = {0};  // the sum's input 0, the down product, is never read
        for (size_t i = 1; i < sn.inputs.size(); ++i) args.push_back(ptr_of(sn.inputs[i].src));
        for (const DevicePtr q : in) args.push_back(q);  // lm_ga, lm_gb, lm_gs
        args.push_back(ptr_of(dn.inputs[1].src));
        args.push_back(ptr_of(dn.inputs[2].src));
        args.push_back(zeroed_counters(p, eval(n.shape[0]) * eval(n.shape[2])));  // lm_out1: the gated products
        args.push_back(zeroed_counters(*sum, 2));                                // lm_out2: the barrier
        const GemvForm& f = (normed_in ? experts_in_one_normed_forms_ : experts_in_one_forms_).at(*sum);
        Launch l = f.kernels->launches[0];
        l.work = Expr(ctx_.info().multiprocessors);
        // (At least 32 KB: x, up to 8192 values, comes first in it.)
        if (options_.experts_in_one_smem_kb > 0) l.shared_bytes = Expr(int64_t{std::max(options_.experts_in_one_smem_kb, 32)} * 1024);
        launch(l, *f.kernels, f.function, out.ptr, args);
        experts_outputs_[*sum] = out;
        experts_fused_products_.insert(p);
        ++experts_in_one_run_;
      } else {
        const DeviceBuffer& b = gated_outputs_[p] = take(graph_.node(p).dtype, concrete(graph_.node(p).shape));
        if (auto d = deferred_groups.find(id); d != deferred_groups.end()) {
          // Its scales' group runs inside it: the group's outputs and leaves go before the dims.
          const SmallGroup& grp = kernels_.small_groups[d->second];
          for (NodeId m : grp.nodes) fold_args_.push_back(live[m]->ptr);
          for (NodeId l : grp.leaves) fold_args_.push_back(ptr_of(l));
          if (grp.router_through_o && grp.router_through_o->routed_takes_h) {  // the logits came unscaled with o: h scales them
            fold_args_.push_back(ptr_of(grp.router_through_o->sum));
            routers_in_o_.erase(grp.router_through_o->router);
          }
          run_form(normed_in ? routed_normed_forms_.at(id) : routed_forms_.at(id), b.ptr, in, capture);
          fold_args_.clear();
          group_ran(d->second, id);
          deferred_groups.erase(d);
          ++small_groups_folded_;
        } else {
          run_form(normed_in ? gated_expert_normed_forms_.at(id) : gated_expert_forms_.at(id), b.ptr, in, capture);
          gated_experts_at_ = launch_serial_;  // released its dependents after its wait (expert_sum_early)
        }
        ++products_folded_;
      }
      gemv_gain_ = 0;
      release_inputs(n, 0);
      continue;  // its one reader, the product, takes gated_outputs_[p] (or is the one kernel's)
    }
    if (k.softmax_fold && folded_softmaxes_.count(k.softmax_node) && reader_lists_[k.softmax_node][0] == id) {
      // The softmax's first reader: it reads the softmax's input, and its block 0 stores the value.
      const Node& sm = graph_.node(k.softmax_node);
      const DevicePtr logits = ptr_of(sm.inputs[0].src);
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (n.inputs[i].src == k.softmax_node) in[i] = logits;
      flush_pending();
      DeviceBuffer out = take(n.dtype, concrete(n.shape));
      softmax_out_ = live[k.softmax_node]->ptr;
      launch(k.softmax_fold->launches[0], *k.softmax_fold, softmax_fold_functions_[id], out.ptr, in);
      softmax_out_ = 0;
      release_inputs(sm, 0);  // the softmax is done with its input
      release_inputs(n, 0);
      live[id] = out;
      continue;
    }
    // A linear layer reading a deferred norm: in[0] is the norm's input; its gain goes alongside.
    const bool normed = !n.inputs.empty() && deferred_norms_.count(n.inputs[0].src);
    if (normed) {
      const Node& norm = graph_.node(n.inputs[0].src);
      gemv_gain_ = norm.inputs.size() > 1 ? ptr_of(norm.inputs[1].src) : 0;
    }
    if (!n.inputs.empty() && deferred_products_.count(n.inputs[0].src)) {  // the sum over the experts, of their products
      const Node& product = graph_.node(n.inputs[0].src);
      for (const Edge& e : product.inputs) in.push_back(ptr_of(e.src));
      flush_pending();
      DeviceBuffer out = take(n.dtype, concrete(n.shape));
      // Right after the gated gate/up experts (no launch between): the form that lists its
      // experts and loads its first weights before its wait.
      const auto early = expert_sum_early_forms_.find(id);
      const bool after_gated = early != expert_sum_early_forms_.end() && gated_experts_at_ == launch_serial_;
      run_form(after_gated ? early->second : expert_sum_forms_.at(id), out.ptr, in, capture);
      if (after_gated) ++expert_sums_early_;
      release_inputs(n, 0);
      live[id] = out;
      continue;
    }
    // A node whose one launch may go with the next node's (pair_launches).
    if (const Launch* single = !invariant && !profiling_ && options_.pair_launches && (n.op != OpKind::Scatter || in_place_scatter)
                                   ? single_launch(id) : nullptr) {
      PendingLaunch x{single, functions_by_node_[id][k.launches.size() - 1], 0, in, launch_shape(*single)};
      if (x.shape.first > 0) {
        DeviceBuffer out;
        if (n.op == OpKind::Scatter) x.out = in[0];
        else x.out = (out = take(n.dtype, concrete(n.shape))).ptr;
        if (single->scatter_out && k.scatter_node)
          if (auto to = scatter_store_of(id, k, uses, [&](NodeId s) -> std::optional<DevicePtr> {
                if (graph_.node(s).op != OpKind::Input && !live[s] && !in_place.count(s)) return std::nullopt;
                return ptr_of(s);
              })) {
            std::tie(x.scatter_dst, x.scatter_idx) = *to;
            folded_scatters_.insert(*k.scatter_node);
          }
        hold_launch(x);
        if (n.op == OpKind::Scatter) {
          wrote_in_place(id, n);
        } else {
          release_inputs(n, 0);
          live[id] = out;
        }
        continue;
      }
    }
    // Anything else that reaches the stream goes after the held launch (a linear group's other
    // members reach nothing: their group ran at its first).
    if (auto g = group_of_member_.find(id); g == group_of_member_.end() || !groups_[g->second].active || id == groups_[g->second].members[0])
      flush_pending();
    if (in_place_scatter) {
      launch(k.launches[1], k, functions_by_node_[id][1], in[0], in);
      wrote_in_place(id, n);
      continue;
    }
    if (auto g = group_of_member_.find(id); g != group_of_member_.end()) {
      LinearGroup& grp = groups_[g->second];
      if (id == grp.members[0]) grp.active = group_usable(grp);
      if (grp.active) {
        if (id == grp.members[0]) run_group(grp, in[0], n.inputs[0].src, capture);
        gemv_gain_ = 0;
        const size_t i = static_cast<size_t>(std::find(grp.members.begin(), grp.members.end(), id) - grp.members.begin());
        release_inputs(n, 0);
        if (!grp.gated) live[id] = grp.pending[i];  // else only its gated product has a value
        continue;
      }
    }
    if (!invariant && n.op == OpKind::Kernel && !k.linear && words_functions_[id]) {
      if (auto shape = words_shape(id)) {  // a prefill's norm or gated product, for the library's GEMMs
        Bf16Activations a = store_words(k, id, in, shape->first, shape->second);
        release_inputs(n, 0);
        live[id] = a.hi;
        words_[id] = a;
        continue;
      }
    }
    // A residual sum of this linear layer, folded into its GEMM or GEMV (the Add then runs nothing).
    const std::optional<NodeId> residual = invariant ? std::nullopt : residual_of(id, uses, live);
    DeviceBuffer out;
    // On the library the GEMM adds into the other operand's buffer; a GEMV reads it (lm_res)
    // and writes its own, which the Add takes on, leaving the other operand to the Add's release.
    const bool residual_on_library = residual && on_library(*k.linear);
    if (residual_on_library) {
      out = *live[*residual];
      live[*residual].reset();  // now the GEMM's; the Add takes it on (run releases nothing twice)
    } else {
      out = take(n.dtype, concrete(n.shape));
    }
    if (residual) {
      folded_[reader_lists_[id][0]] = id;
      ++residuals_folded_;
    }
    gemv_residual_ = residual && !residual_on_library ? live[*residual]->ptr : 0;
    if (k.tiled && use_tiled(k)) {  // a prefill's attention: one launch
      const size_t tiled_at = k.launches.size();  // functions_by_node_: launches, tiled, tiled_mma, tiled_mma_prep
      if (k.tiled_mma && offered(*k.tiled_mma)) {
        DeviceBuffer words = take(DType::F32, {eval(k.tiled_mma_words)});
        launch(*k.tiled_mma_prep, k, functions_by_node_[id][tiled_at + 2], words.ptr, in);
        std::vector<DevicePtr> with = in;
        with.push_back(words.ptr);
        launch(*k.tiled_mma, k, functions_by_node_[id][tiled_at + 1], out.ptr, with);
        give_back(words);
      } else {
        launch(*k.tiled, k, functions_by_node_[id][tiled_at], out.ptr, in);
      }
    } else if (attention_fold_of_.count(id)) {  // one launch that also computes the q norms and the new rows
      const AttentionNorms& f = *k.norms;
      DeviceBuffer scratch = take(DType::F32, {eval(*k.scratch_f32)});
      std::vector<DevicePtr> with = in;
      for (NodeId m : {f.q_norm, f.k_norm})
        for (const Edge& e : graph_.node(m).inputs) with.push_back(ptr_of(e.src));
      with.push_back(ptr_of(graph_.node(f.v_write).inputs[2].src));
      with.push_back(scratch.ptr);
      with.push_back(zeroed_counters(id, eval(k.once_counters)));
      with.push_back(ptr_of(f.k_write));  // the caches' buffers
      with.push_back(ptr_of(f.v_write));
      launch(*k.once_folded, k, once_folded_functions_.at(id), out.ptr, with);
      give_back(scratch);
      release_inputs(graph_.node(f.k_write), 1);  // the writes' indices and updates
      release_inputs(graph_.node(f.v_write), 1);
      ++attention_norms_folded_;
    } else if (k.once && options_.attention_once && eval(k.once_slices) <= k.once_max_slices) {  // the split and the merge in one launch
      DeviceBuffer scratch = take(DType::F32, {eval(*k.scratch_f32)});
      std::vector<DevicePtr> with = in;
      with.push_back(scratch.ptr);
      with.push_back(zeroed_counters(id, eval(k.once_counters)));
      launch(*k.once, k, functions_by_node_[id].back(), out.ptr, with);
      give_back(scratch);
    } else if (k.scratch_f32 && words_functions_[id] && scratch_words(k.linear, n.dtype)) {
      // The activations' copy as the library's words (attention's heads merged into rows).
      Bf16Activations a = store_words(k, id, in, eval_true(k.linear->m), eval_true(k.linear->k));
      used_library_ = true;
      bf16_gemm(*k.linear, a, in[1], out.ptr, residual_on_library);
      give_back(a);
    } else {
      size_t first = 0;
      std::optional<DeviceBuffer> scratch;  // launches[0] writes it; the rest read it as input 0
      if (k.scratch_f32) {
        // A decode's attention heads merged back into one row read in order already: the copy's
        // launch is left out (first stays past it), and the rest read the source as input 0.
        if (options_.skip_in_order_copies && k.linear && k.linear->a_from_scratch && reads_in_order(n.inputs[0].view)) {
          ++scratch_copies_skipped_;
        } else {
          scratch = take(DType::F32, {eval(*k.scratch_f32)});
          launch(k.launches[0], k, functions_by_node_[id][0], scratch->ptr, in);
          in[0] = scratch->ptr;
        }
        first = 1;
      }
      const std::optional<size_t> router_fold =
          normed || residual_on_library ? std::nullopt : router_fold_at(id, residual.has_value(), capture);
      if (router_fold) {
        // The router's logits too, unscaled, in blocks ahead of the GEMV's (M, A, the router's buffer).
        const RouterThroughO& f = *kernels_.small_groups[*router_fold].router_through_o;
        const RouterFold& r = router_folds_.at(id);
        live[f.router] = take(DType::F32, concrete(graph_.node(f.router).shape));
        fold_args_ = {r.weights, r.weights + static_cast<DevicePtr>(f.experts * f.attention_width * 4), live[f.router]->ptr};
        if (f.group_in_last_block) {
          // Its routing group runs in the launch's last block (its arguments after the logits').
          group_in_last_block(*router_fold, f.router, id);
          ++routing_groups_in_o_;
        }
        run_form(r.form, out.ptr, in, capture);
        fold_args_.clear();
        routers_in_o_[f.router] = *router_fold;
        ++routers_through_o_;
      } else if (normed) {  // defers_norm saw to it that this is the GEMV
        if (const std::optional<size_t> t = group_in_producer(id)) {
          // The group reading it runs in its last block.
          group_in_last_block(*t, id, id);
          run_form(tail_forms_.at(id), out.ptr, in, capture);
          fold_args_.clear();
          ++small_groups_in_producers_;
        } else {
          run_form(normed_forms_.at(id), out.ptr, in, capture);
        }
      } else if (!(k.linear && n.dtype == DType::F32 && run_linear(*k.linear, out.ptr, in, n.inputs[0].src, residual_on_library))) {
        LM_ASSERT(!residual_on_library, "a residual sum folded for the library went to the GEMV");
        for (size_t i = first; i + 1 < k.launches.size(); ++i) launch(k.launches[i], k, functions_by_node_[id][i], out.ptr, in);
        const size_t last = k.launches.empty() ? 0 : k.launches.size() - 1;
        if (!k.launches.empty() && last >= first) {
          const size_t v = k.alternatives.empty() ? 0 : variant(k, functions_by_node_[id][last], alternative_functions_.at(id), out.ptr, in, capture);
          if (v == 0) launch(k.launches[last], k, functions_by_node_[id][last], out.ptr, in);
          else launch(k.alternatives[v - 1], k, alternative_functions_.at(id)[v - 1], out.ptr, in);
        }
      }
      if (scratch) give_back(*scratch);
    }
    gemv_residual_ = 0;
    gemv_gain_ = 0;
    release_inputs(n, 0);
    if (invariant && !capture) {  // no frees while recording (kept values exist by then)
      auto it = kept_.find(id);
      if (it != kept_.end()) forget_kept(it);  // its inputs changed: the new value replaces the old one
      if (kept_bytes_ + out.bytes <= kMaxKeptBytes) {
        out.kept = true;
        kept_bytes_ += out.bytes;
        kept_[id] = Kept{out, versions_of(id)};
      }
    }
    if (n.op == OpKind::Output) {
      out.shape.clear();
      for (const Expr& e : n.shape) out.shape.push_back(eval_true(e));
      outputs_[n.name] = out;
    } else {
      live[id] = out;
    }
  }
  flush_pending();
  for (auto& b : live)
    if (b) give_back(*b);
  for (auto& [id, w] : words_)
    if (w.lo) give_back(*w.lo);
  words_.clear();
  ++(capture ? graph_stats_.recorded : graph_stats_.launched);
  if (capture) {
    graph->exec = ctx_.end_capture();
    graph->choices = capture_choices_;
    for (auto& [name, b] : outputs_) {
      b.kept = true;  // the graph writes there on every replay: never back to the free list
      graph->outputs[name] = b;
    }
    ctx_.launch_graph(graph->exec);  // captured launches were recorded, not run
  } else if (graph) {
    ++graph->runs;
    graph->library = graph->library || used_library_;
  }
  if (wait) ctx_.synchronize();  // a failing kernel reports here, not in a later call
}

void CudaExecutor::find_linear_groups() {
  const char* env = std::getenv("LUMINAL_CUDA_GROUP_LINEAR");
  if (env && std::string(env) == "0") return;
  // Candidates: linear layers on the GEMV (no scratch copy) whose weight is a whole input of
  // constant shape, bucketed by what they read as activations.
  std::map<std::pair<NodeId, uint64_t>, std::vector<NodeId>> by_activations;
  std::set<NodeId> weights;
  for (NodeId id = 0; id < graph_.size(); ++id) {
    const Node& n = graph_.node(id);
    const auto& k = kernels_.per_node[id];
    if (n.op != OpKind::Kernel || n.kernel != "Matmul" || !k || !k->linear || k->linear->a_from_scratch || k->launches.size() != 1) continue;
    const Node& w = graph_.node(n.inputs[1].src);
    bool constant = w.op == OpKind::Input;
    for (const Expr& e : w.shape) constant = constant && e.as_const().has_value();
    if (!constant || !weights.insert(n.inputs[1].src).second) continue;
    by_activations[{n.inputs[0].src, n.inputs[0].view.hash()}].push_back(id);
  }
  const std::vector<std::string> dims = graph_.dims();
  for (auto& [key, members] : by_activations) {
    if (members.size() < 2) continue;
    std::optional<NodeKernels> k = emit_grouped_linear(graph_, members, dims, kernels_.functions);
    if (!k) continue;
    LinearGroup g;
    g.members = members;
    g.kernels = std::move(*k);
    g.offsets.push_back(0);
    // Laid end to end, the weights must be one matrix: no padding between them, so each is a
    // whole number of the 256-byte steps the group's allocation places them at.
    bool dense = true;
    for (NodeId m : members) {
      const Node& w = graph_.node(graph_.node(m).inputs[1].src);
      size_t bytes = dtype_size(w.dtype);
      for (const Expr& e : w.shape) bytes *= static_cast<size_t>(*e.as_const());
      dense = dense && bytes % 256 == 0;
      g.weights.push_back(graph_.node(m).inputs[1].src);
      g.offsets.push_back(g.offsets.back() + bytes);
    }
    if (!dense) continue;
    for (NodeId m : members) group_of_member_[m] = groups_.size();
    for (NodeId w : g.weights) group_of_weight_[w] = groups_.size();
    groups_.push_back(std::move(g));
  }
}

bool CudaExecutor::weights_in_place(const LinearGroup& g) const {
  for (size_t i = 0; i < g.weights.size(); ++i) {
    auto it = inputs_.find(g.weights[i]);
    if (it == inputs_.end() || !g.base || it->second.ptr != g.base + g.offsets[i]) return false;
  }
  return true;
}

bool CudaExecutor::group_usable(LinearGroup& g) {
  if (!weights_in_place(g)) return false;
  // Many rows go to the library (tensor cores): every member there, or none grouped.
  g.on_library = on_library(*kernels_.per_node[g.members[0]]->linear);
  if (!g.on_library) return true;
  for (NodeId m : g.members) {
    const LinearOperands& l = *kernels_.per_node[m]->linear;
    if (l.w_dtype != DType::BF16 || !on_library(l)) return false;
  }
  return true;
}

void CudaExecutor::run_group(LinearGroup& g, DevicePtr activations, NodeId producer, bool capturing) {
  g.pending.clear();
  g.gated = false;
  if (g.on_library) {
    // The members read the same activations: converted to bf16 once (it was once a member,
    // 8-29 MB read each for the 8B's q/k/v and gate/up), or stored so by their producer, then
    // each member's GEMM.
    used_library_ = true;
    auto stored = words_.find(producer);
    Bf16Activations a = stored != words_.end() ? stored->second : to_bf16(*kernels_.per_node[g.members[0]]->linear, activations);
    const std::optional<NodeId> narrow = narrow_group(g);
    g.out_type = narrow ? DType::BF16 : DType::F32;
    if (narrow) narrow_readers_.insert(*narrow), ++narrowed_groups_;
    for (NodeId m : g.members) g.pending.push_back(take(g.out_type, concrete(graph_.node(m).shape)));
    group_gemms(g, a, group_concurrent(g, a, capturing));
    if (stored == words_.end()) give_back(a);
    return;
  }
  // `activations` is a deferred norm's input (ptr_of) where its GEMV norms as it loads.
  const bool normed = deferred_norms_.count(producer) > 0;
  g.gated = gated_run(g, normed);
  const GemvForm& f = g.forms[normed][g.gated];
  std::vector<DevicePtr> in = {activations, g.base};
  DevicePtr out = 0;
  if (g.gated) {  // one output, the product's; the members' output pointers stay null
    const NodeId p = g.kernels.gated_node;
    const DeviceBuffer& b = gated_outputs_[p] = take(graph_.node(p).dtype, concrete(graph_.node(p).shape));
    out = b.ptr;
    in.resize(in.size() + g.members.size() - 1, 0);
    ++products_folded_;
  } else {
    for (NodeId m : g.members) {
      g.pending.push_back(take(DType::F32, concrete(graph_.node(m).shape)));
      if (m != g.members[0]) in.push_back(g.pending.back().ptr);
    }
    out = g.pending[0].ptr;
  }
  run_form(f, out, in, capturing);
}

CudaExecutor::GemvForm CudaExecutor::load_form(const NodeKernels* kernels, const std::map<std::string, void*>& by_name) const {
  GemvForm f;
  if (!(f.kernels = kernels)) return f;
  f.function = by_name.at(kernels->launches[0].function);
  for (const Launch& l : kernels->alternatives) f.alternatives.push_back(by_name.at(l.function));
  return f;
}

void CudaExecutor::run_form(const GemvForm& f, DevicePtr out, const std::vector<DevicePtr>& in, bool capturing) {
  const NodeKernels& k = *f.kernels;
  const size_t v = k.alternatives.empty() ? 0 : variant(k, f.function, f.alternatives, out, in, capturing);
  launch(v == 0 ? k.launches[0] : k.alternatives[v - 1], k, v == 0 ? f.function : f.alternatives[v - 1], out, in);
}

bool CudaExecutor::gated_run(const LinearGroup& g, bool normed) {
  if (!options_.gated_in_gemv || !g.forms[normed][1].kernels) return false;
  const NodeId p = g.kernels.gated_node;
  if (keeps(p)) return false;
  for (NodeId m : g.members)
    if (reader_lists_[m].size() != 1 || reader_lists_[m][0] != p) return false;
  return true;
}

bool CudaExecutor::sums_experts(NodeId id) {
  const Node& n = graph_.node(id);
  if (!options_.expert_sum_in_gemv || n.op != OpKind::Kernel || n.kernel != "ScaledMatmul" || reader_lists_[id].size() != 1) return false;
  const NodeId sum = reader_lists_[id][0];
  const NodeKernels* k = kernels_.per_node[sum] ? &*kernels_.per_node[sum] : nullptr;
  if (!k || !k->expert_sum || k->expert_product != id || keeps(sum)) return false;
  // A decode's few rows: each unit's team streams every chosen expert's rows for them, where a
  // prefill's many rows choose most experts and take the products' own schedules.
  return eval(n.shape[1]) <= kExpertSumMaxRows;
}

std::optional<NodeId> CudaExecutor::experts_in_one_sum(NodeId id, bool normed, const std::function<bool(NodeId)>& ready) {
  if (!options_.experts_in_one) return std::nullopt;
  const auto it = experts_sum_of_gate_up_.find(id);
  if (it == experts_sum_of_gate_up_.end()) return std::nullopt;
  const NodeId sum = it->second;
  const DeviceInfo& info = ctx_.info();
  if (info.cc_major < 9 || info.max_shared_per_block < kExpertsInOneSharedBytes || info.multiprocessors < 1) return std::nullopt;
  if (!(normed ? experts_in_one_normed_forms_ : experts_in_one_forms_).count(sum)) return std::nullopt;
  const NodeId down = kernels_.per_node[sum]->expert_product;
  const Node& dn = graph_.node(down);
  const NodeId product = dn.inputs[0].src;
  if (keeps(sum) || keeps(down) || keeps(product) || !sums_experts(down)) return std::nullopt;
  if (reader_lists_[product].size() != 1 || reader_lists_[product][0] != down) return std::nullopt;
  // One token's row at every dim value this run's plan stands for (a recorded graph replays for its bucket).
  const Expr& rows = graph_.node(id).shape[1];
  if (eval(rows) != 1 || eval_true(rows) != 1) return std::nullopt;
  const Node& sn = graph_.node(sum);
  for (size_t i = 1; i < sn.inputs.size(); ++i)
    if (!ready(sn.inputs[i].src)) return std::nullopt;
  for (size_t i = 1; i < dn.inputs.size(); ++i)
    if (!ready(dn.inputs[i].src)) return std::nullopt;
  return sum;
}

bool CudaExecutor::gates_experts(NodeId id) {
  const auto f = gated_expert_forms_.find(id);
  if (!options_.gated_in_gemv || f == gated_expert_forms_.end() || !f->second.kernels) return false;
  const NodeKernels& k = *kernels_.per_node[id];
  const NodeId p = k.gated_node;
  if (keeps(p) || reader_lists_[id].empty()) return false;
  for (NodeId r : reader_lists_[id])
    if (r != p) return false;
  // A decode's few rows with the experts listed (the form's lm_compact; it has no path for a
  // prefill's many listed rows), at every dim value this run's plan stands for.
  const std::vector<Expr>& shape = graph_.node(id).shape;
  for (bool plan : {true, false}) {
    auto at = [&](const Expr& e) { return plan ? eval(e) : eval_true(e); };
    int64_t batches = 1;
    for (size_t d = 0; d + 2 < shape.size(); ++d) batches *= at(shape[d]);
    const int64_t rows = at(shape[shape.size() - 2]);
    if (rows > kExpertSumMaxRows || batches > kMaxListedBatches || batches * rows > kMaxListedBatchRows) return false;
  }
  return true;
}

bool CudaExecutor::folds_softmax(NodeId id) {
  const Node& n = graph_.node(id);
  if (!options_.softmax_in_readers || n.op != OpKind::Kernel || n.kernel != "Softmax" || reader_lists_[id].empty()) return false;
  const NodeId r = reader_lists_[id][0];
  const NodeKernels* k = kernels_.per_node[r] ? &*kernels_.per_node[r] : nullptr;
  if (!k || !k->softmax_fold || k->softmax_node != id || !softmax_fold_functions_[r] || keeps(r) || k->launches.size() != 1) return false;
  // One row at every value of the dims this run's plan stands for (a recorded graph replays
  // for its whole bucket): the reader computes row 0 alone.
  for (size_t d = 0; d + 1 < n.shape.size(); ++d)
    if (eval(n.shape[d]) != 1 || eval_true(n.shape[d]) != 1) return false;
  return true;
}

std::optional<std::pair<DevicePtr, DevicePtr>> CudaExecutor::scatter_store_of(NodeId id, const NodeKernels& k, const std::vector<int>& uses,
                                                                              const std::function<std::optional<DevicePtr>(NodeId)>& ready) {
  if (!options_.scatter_in_producers || !k.scatter_node || readers_[id] != 1) return std::nullopt;
  const NodeId sid = *k.scatter_node;
  const Node& s = graph_.node(sid);
  // In place (nothing else reads its destination from here on), and z of this node's value is
  // z of the update and of the index, at every value of the dims this run's plan stands for.
  if (!scatter_in_place(sid, s, uses) || !reads_in_order(s.inputs[1].view) || !reads_in_order(s.inputs[2].view)) return std::nullopt;
  for (bool plan : {true, false}) {
    auto at = [&](const Expr& e) { return plan ? eval(e) : eval_true(e); };
    int64_t mine = 1, update = 1, index = 1;
    for (const Expr& e : graph_.node(id).shape) mine *= at(e);
    for (const Expr& e : s.inputs[2].view.shape()) update *= at(e);
    for (const Expr& e : s.inputs[1].view.shape()) index *= at(e);
    if (mine != update || index != update) return std::nullopt;
  }
  const std::optional<DevicePtr> dst = ready(s.inputs[0].src), idx = ready(s.inputs[1].src);
  if (!dst || !idx) return std::nullopt;  // the index is computed later in the plan (the first layer's)
  return std::pair{*dst, *idx};
}

bool CudaExecutor::defers_norm(NodeId id) {
  const Node& n = graph_.node(id);
  if (!options_.norm_in_gemv || n.op != OpKind::Kernel || (n.kernel != "RMSNormMul" && n.kernel != "RMSNorm") || reader_lists_[id].empty())
    return false;
  for (NodeId r : reader_lists_[id]) {
    const Node& rn = graph_.node(r);
    const NodeKernels* k = kernels_.per_node[r] ? &*kernels_.per_node[r] : nullptr;
    if (rn.op == OpKind::Kernel && rn.kernel == "ScaledMatmul") {  // an MoE decode's gate/up experts, in their gated form
      if (!k || !gated_expert_normed_forms_.count(r) || rn.inputs[0].src != id || rn.inputs[1].src == id || rn.inputs[2].src == id || keeps(r) ||
          !gates_experts(r))
        return false;
      continue;
    }
    if (!k || !k->linear || rn.inputs[0].src != id || rn.inputs[1].src == id || keeps(r)) return false;
    if (auto g = group_of_member_.find(r); g != group_of_member_.end() && group_usable(groups_[g->second])) {
      if (!groups_[g->second].kernels.normed || groups_[g->second].on_library) return false;
      continue;
    }
    if (!k->normed || on_library(*k->linear)) return false;
  }
  return true;
}

std::optional<NodeId> CudaExecutor::narrow_group(const LinearGroup& g) {
  if (!options_.narrow_gated_inputs || !options_.bf16_activations || !options_.tensor_cores || !g.on_library || g.members.empty())
    return std::nullopt;
  if (reader_lists_[g.members[0]].size() != 1) return std::nullopt;
  const NodeId r = reader_lists_[g.members[0]][0];
  const NodeKernels* k = kernels_.per_node[r] ? &*kernels_.per_node[r] : nullptr;
  if (!k || !k->words_narrow || keeps(r) || !words_shape(r)) return std::nullopt;
  const Node& rn = graph_.node(r);
  for (NodeId m : g.members)
    if (reader_lists_[m].size() != 1 || reader_lists_[m][0] != r) return std::nullopt;
  // Its narrow inputs are exactly the members: every member read as bf16, nothing else.
  for (size_t i = 0; i < rn.inputs.size(); ++i) {
    const bool member = std::find(g.members.begin(), g.members.end(), rn.inputs[i].src) != g.members.end();
    if (member != (i < k->narrow_inputs.size() && k->narrow_inputs[i])) return std::nullopt;
  }
  return r;
}

void CudaExecutor::group_gemms(LinearGroup& g, const Bf16Activations& a, bool side) {
  if (side) ctx_.fork();
  for (size_t i = 0; i < g.members.size(); ++i)
    bf16_gemm(*kernels_.per_node[g.members[i]]->linear, a, g.base + g.offsets[i], g.pending[i].ptr, false, side && i > 0, g.out_type);
  if (side) ctx_.join();  // before the activations go back to the pool
}

bool CudaExecutor::group_concurrent(LinearGroup& g, const Bf16Activations& a, bool capturing) {
  if (options_.concurrent_group_gemms >= 0) return options_.concurrent_group_gemms == 1 && !profiling_;
  if (profiling_) return false;  // launches timed one by one
  std::vector<int64_t> key;
  for (NodeId m : g.members) {
    const LinearOperands& l = *kernels_.per_node[m]->linear;
    const int64_t rows = eval_true(l.m), n = eval_true(l.n), k = eval_true(l.k);
    // Until every member's algorithm is chosen (their first, timed, calls), side by side would
    // put those timings on the main stream anyway: serial, and no decision yet.
    if (!cublaslt_ready(DType::BF16, k, eval_true(l.w_row_stride), n, rows, n, k, g.out_type)) return false;
    if (key.empty()) key.push_back(rows);
    key.push_back(k);
    key.push_back(n);
  }
  if (auto it = concurrent_chosen_.find(key); it != concurrent_chosen_.end()) return it->second;
  if (capturing) return false;  // no timing while a graph is recorded
  // Both ways, alternated after a warm-up each, five times; the medians decide. The weights
  // are evicted from L2 before each (a prefill reads them cold). Every run writes the same
  // outputs, so the last one leaves the right values.
  Context::Timer timer(ctx_);
  L2Flush flush(ctx_);
  std::vector<double> ms[2];
  group_gemms(g, a, false);
  group_gemms(g, a, true);
  for (int t = 0; t < 5; ++t)
    for (int side = 0; side < 2; ++side) {
      flush.evict();
      timer.start();
      group_gemms(g, a, side == 1);
      ms[side].push_back(timer.stop_ms());
    }
  for (auto& v : ms) std::sort(v.begin(), v.end());
  const bool side = ms[1][2] < ms[0][2];
  if (tune_log())
    std::fprintf(stderr, "luminal cuda: linear group of %zu (rows %lld): serial %d us, side by side %d us -> %s\n", g.members.size(),
                 static_cast<long long>(key[0]), static_cast<int>(ms[0][2] * 1000 + 0.5), static_cast<int>(ms[1][2] * 1000 + 0.5),
                 side ? "side by side" : "serial");
  concurrent_chosen_[key] = side;
  return side;
}

bool CudaExecutor::use_tiled(const NodeKernels& k) {
  const int64_t rows = eval(k.tiled_rows);
  return rows >= k.tiled_min_rows && (rows >= eval(k.tiled_keys) || eval(k.tiled->work) >= ctx_.info().multiprocessors);
}

bool CudaExecutor::offered(const Launch& l) const { return !l.tensor_cores || (options_.tensor_cores && ctx_.info().cc_major >= 8); }

size_t CudaExecutor::variant(const NodeKernels& k, void* first, const std::vector<void*>& alternatives, DevicePtr out,
                             const std::vector<DevicePtr>& in, bool capturing) {
  if (options_.force_variant >= 0) {
    const size_t v = std::min<size_t>(static_cast<size_t>(options_.force_variant), k.alternatives.size());
    return v > 0 && !offered(k.alternatives[v - 1]) ? 0 : v;
  }
  const Choice key{k.launches.back().function, eval(k.launches.back().work)};
  if (capturing) capture_choices_.insert(key);
  if (auto it = chosen_.find(key); it != chosen_.end()) return it->second;
  // Each schedule's name (its function and grid cap), as the cache and the refinement name them.
  std::vector<std::string>& names = variant_functions_[key];
  if (names.empty())
    for (size_t v = 0; v <= k.alternatives.size(); ++v) names.push_back(schedule_name(variant_launch(k, v)));
  if (const ScheduleCache::Entry* e = schedules_.find(key.first, key.second))  // chosen by an earlier process here
    for (size_t v = 0; v <= k.alternatives.size(); ++v) {
      if (names[v] != e->variant || !offered(variant_launch(k, v))) continue;
      chosen_[key] = v;
      if (e->refined) refined_.insert(key);
      ++schedules_from_cache_;
      return v;
    }
  // Not while a graph is recorded or a profile taken (launches there are not run, or are timed
  // one by one): the first launch stands in until an ordinary run has timed them.
  if (capturing || profiling_ || !options_.tune_variants) return 0;
  // Each variant once to warm up, then seven timed samples; the median decides. Identical
  // layers share functions and sizes, so a model times each of its shapes once.
  Context::Timer timer(ctx_);
  size_t best = 0;
  double best_ms = 0;
  std::vector<std::pair<double, size_t>>& timed = timings_[key];
  const bool log = tune_log();
  std::string line = "luminal cuda: " + key.first + " (work " + std::to_string(key.second) + "):";
  // A weight that fits in L2 (50 MB on the H200) would stay there from one timed launch to the
  // next and favour the schedule best at L2 hits, while a decode step reads it cold: a read of
  // a scratch larger than L2 evicts it before each launch. A sample times three (read, launch)
  // pairs with launches overlapped as in a step: a schedule's cost there is what it adds after
  // a stream over memory, and a lone launch timed by events had favoured fewer, larger blocks
  // (q/k/v of Llama-3-8B: 192 blocks won alone and added 19.5 us in the step against 16.4 for a
  // 384-block one). Where the device has no room for the scratch, the schedules are timed
  // without it (tuning must not fail a run).
  L2Flush flush(ctx_);
  // A chain pays off where ramp and tail are a real part of the time (a decode's GEMVs, tens of
  // microseconds); a prefill's schedules take milliseconds, and there it only triples the
  // tuning time: whether to chain is decided by the first schedule's lone time.
  bool chain = options_.tune_in_chain, decided = false;
  constexpr double kChainBelowMs = 0.25;
  for (size_t v = 0; v <= k.alternatives.size(); ++v) {
    const Launch& l = variant_launch(k, v);
    void* f = v == 0 ? first : alternatives[v - 1];
    if (!offered(l)) {
      line += " -";
      continue;
    }
    launch(l, k, f, out, in);
    auto alone_ms = [&] {
      flush.evict();
      timer.start();
      launch(l, k, f, out, in);
      return timer.stop_ms();
    };
    if (chain && !decided) {
      decided = true;
      if (alone_ms() > kChainBelowMs) chain = false, line += " (alone)";
    }
    std::vector<double> ms;
    for (int t = 0; t < 7; ++t) {  // schedules differ by a few us: seven samples, the median
      if (!chain) {
        ms.push_back(alone_ms());
        continue;
      }
      timer.start();
      for (int j = 0; j < 3; ++j) {
        flush.evict_by_read(evict_read_, options_.overlap_launches);
        launch(l, k, f, out, in);
      }
      ms.push_back(timer.stop_ms() / 3);
    }
    std::sort(ms.begin(), ms.end());
    timed.emplace_back(ms[3], v);
    if (v == 0 || ms[3] < best_ms) best = v, best_ms = ms[3];
    line += " " + std::to_string(static_cast<int>(ms[3] * 1000 + 0.5)) + " us";
  }
  if (log) std::fprintf(stderr, "%s -> variant %zu\n", line.c_str(), best);
  std::sort(timed.begin(), timed.end());
  chosen_[key] = best;
  ++schedules_timed_;
  schedules_.put(key.first, key.second, {names[best], false});
  schedules_.save();
  return best;
}

std::map<std::string, std::string> CudaExecutor::chosen_schedules() const {
  std::map<std::string, std::string> out;
  for (const auto& [key, v] : chosen_)
    if (auto it = variant_functions_.find(key); it != variant_functions_.end() && v < it->second.size())
      out[key.first + " " + std::to_string(key.second)] = it->second[v];
  return out;
}

std::vector<CudaExecutor::ProfileEntry> CudaExecutor::profile() const { return slowest_first(profile_); }

NodeId CudaExecutor::checked_device_input(const std::string& name, DevicePtr ptr, DType dtype, const std::vector<int64_t>& shape) const {
  NodeId id = graph_.find_input(name);
  const Node& n = graph_.node(id);
  if (dtype != n.dtype)
    throw Error("input '" + name + "': device memory must hold the input's dtype " + dtype_name(n.dtype) + " (got " + dtype_name(dtype) +
                "); use set_input to convert on the host");
  if (shape.size() != n.shape.size())
    throw Error("input '" + name + "': expected shape " + to_string(n.shape) + " (rank " + std::to_string(n.shape.size()) + "), got " +
                shape_string(shape));
  if (!ptr) throw Error("input '" + name + "': null device pointer");
  return id;
}

void CudaExecutor::set_input_device(const std::string& name, DevicePtr ptr, DType dtype, const std::vector<int64_t>& shape) {
  const NodeId id = checked_device_input(name, ptr, dtype, shape);
  auto it = inputs_.find(id);
  if (it != inputs_.end() && it->second.borrowed && it->second.ptr == ptr && it->second.shape == shape) {
    new_values(id);  // same memory, new values: only kept values change
    return;
  }
  clear_graphs();  // recorded graphs read inputs where they were
  if (it != inputs_.end() && !it->second.borrowed && !group_of_weight_.count(id)) ctx_.free(it->second.ptr);
  DeviceBuffer d;
  d.ptr = ptr;
  d.dtype = dtype;
  d.shape = shape;
  d.bytes = bytes_of(dtype, shape);
  d.borrowed = true;
  inputs_.insert_or_assign(id, d);
  new_values(id);
}

const CudaExecutor::DeviceBuffer& CudaExecutor::computed_output(const std::string& name) const {
  auto it = outputs_.find(name);
  if (it == outputs_.end()) {
    graph_.find_output(name);  // throws, listing the outputs, if the name is wrong
    throw Error("output '" + name + "' has not been computed yet: call run() first");
  }
  return it->second;
}

CudaExecutor::DeviceTensor CudaExecutor::output_device(const std::string& name) const {
  const DeviceBuffer& o = computed_output(name);
  return DeviceTensor{o.ptr, o.dtype, o.shape};
}

std::vector<float> CudaExecutor::output_f32(const std::string& name) const {
  const DeviceBuffer& o = computed_output(name);
  if (o.dtype != DType::F32) return output(name).to_f32();
  const size_t bytes = bytes_of(o.dtype, o.shape);
  std::vector<float> r(bytes / sizeof(float));
  ctx_.download(r.data(), o.ptr, bytes);
  return r;
}

// The last row of f32 output `name`: where it starts and its length.
std::pair<DevicePtr, int64_t> CudaExecutor::last_row(const std::string& name) const {
  const DeviceBuffer& o = computed_output(name);
  if (o.dtype != DType::F32 || o.shape.empty()) throw Error("argmax: output '" + name + "' is not an f32 tensor");
  int64_t elements = 1;
  for (int64_t d : o.shape) elements *= d;
  const int64_t row = o.shape.back();
  if (row <= 0 || elements <= 0) throw Error("argmax: output '" + name + "' is empty");
  return {o.ptr + static_cast<DevicePtr>((elements - row) * sizeof(float)), row};
}

void CudaExecutor::launch_argmax(const std::string& output, int slot, DevicePtr token) {
  auto [last, row] = last_row(output);
  // Two int64 slots, the blocks' count, then each block's best value and index.
  constexpr unsigned kMaxBlocks = 128;
  constexpr size_t kCountAt = 2 * sizeof(int64_t), kValuesAt = kCountAt + sizeof(int64_t), kIndicesAt = kValuesAt + kMaxBlocks * sizeof(float);
  if (!argmax_out_) {
    const std::vector<uint8_t> zeros(kIndicesAt + kMaxBlocks * sizeof(int64_t), 0);
    argmax_out_ = ctx_.alloc(zeros.size());
    ctx_.upload(argmax_out_, zeros.data(), zeros.size());  // the count starts at 0; the last block resets it
  }
  DevicePtr at = argmax_out_ + static_cast<DevicePtr>((slot & 1) * sizeof(int64_t));
  DevicePtr values = argmax_out_ + kValuesAt, indices = argmax_out_ + kIndicesAt, count = argmax_out_ + kCountAt;
  long long n = row;
  // About 4096 values a block (a 128256-entry vocabulary: 32 blocks).
  const unsigned blocks = static_cast<unsigned>(std::clamp<long long>((n + 4095) / 4096, 1, kMaxBlocks));
  void* args[] = {&last, &n, &at, &token, &values, &indices, &count};
  ctx_.launch(argmax_, blocks, 1, 1, 1024, 0, args);
}

int64_t CudaExecutor::output_argmax(const std::string& name) {
  launch_argmax(name, 0, 0);
  int64_t at = -1;
  ctx_.download(&at, argmax_out_, sizeof(at));
  return at;
}

void CudaExecutor::argmax_to_input(const std::string& output, const std::string& input, int slot) {
  const NodeId id = graph_.find_input(input);
  if (graph_.node(id).dtype != DType::I32 || graph_.node(id).shape.size() != 1)
    throw Error("argmax_to_input: input '" + input + "' is not a rank-1 i32 tensor (a step's token ids)");
  last_row(output);  // checked before the input changes
  DevicePtr token = owned_input(id, {1}, sizeof(int32_t)).ptr;
  new_values(id);
  launch_argmax(output, slot, token);
  ctx_.mark(slot);
}

int64_t CudaExecutor::take_argmax(int slot) {
  if (!argmax_out_) throw Error("take_argmax: no choice was queued");
  int64_t at = -1;
  ctx_.download_marked(&at, argmax_out_ + static_cast<DevicePtr>((slot & 1) * sizeof(int64_t)), sizeof(at), slot);
  return at;
}

Buffer CudaExecutor::output(const std::string& name) const {
  const DeviceBuffer& o = computed_output(name);
  Buffer b(o.dtype, o.shape);
  ctx_.download(b.bytes(), o.ptr, b.nbytes());
  return b;
}

}  // namespace luminal::cuda
