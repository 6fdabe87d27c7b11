#include "models/language_model.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_plan_timer.h"
#include "backends/cpu/fused_jit.h"
#include "core/cache_paths.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_panels.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_plan_timer.h"
#include "core/error.h"
#include "models/decoder_graph.h"
#include "models/model_files.h"
#include "models/weight_store.h"
#include "runtime/huge_page_arena.h"
#include "runtime/mapped_pages.h"

namespace luminal {

namespace {
// LUMINAL_HUGEPAGES=1 or 0 overrides the option.
bool huge_pages_wanted(bool option) {
  const char* v = std::getenv("LUMINAL_HUGEPAGES");
  if (v && std::string(v) == "1") return true;
  if (v && std::string(v) == "0") return false;
  return option;
}

// Inputs that hold the checkpoint's tensors (not the KV cache, rope tables or tokens).
bool is_weight(const std::string& name) {
  return name != "tokens" && name.rfind("cache.", 0) != 0 && name.rfind("rope.", 0) != 0;
}

// LUMINAL_CPU_PACKED_WEIGHTS=1 or 0 overrides the option; either way only where it pays.
bool packed_weights_wanted(bool option) {
  const char* v = std::getenv("LUMINAL_CPU_PACKED_WEIGHTS");
  if (v && *v && std::string(v) != "0" && std::string(v) != "1")
    throw Error(std::string("LUMINAL_CPU_PACKED_WEIGHTS must be 0 or 1, got '") + v + "'");
  const bool on = v && *v ? std::string(v) == "1" : option;
  return on && cpu::packed_weights_supported();
}

// The weights that only linear layers read, as a Matmul's W (input 1), or a Gather as its data
// (an embedding: a tied one is also the head's W): those can be replaced by their panels. Not an
// embedding that no Matmul reads (a Gather of rows reads them best as they are).
std::vector<bool> read_as_linear_weights(const Graph& plan) {
  std::vector<bool> ok(plan.size(), true), by_matmul(plan.size(), false);
  for (const Node& n : plan.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const bool w = n.op == OpKind::Kernel && n.kernel == "Matmul" && i == 1;
      if (w) by_matmul[n.inputs[i].src] = true;
      if (!w && !(n.op == OpKind::Gather && i == 1)) ok[n.inputs[i].src] = false;
    }
  for (size_t i = 0; i < ok.size(); ++i) ok[i] = ok[i] && by_matmul[i];
  return ok;
}

// LUMINAL_JIT=0 turns kernel generation off (to compare, or where compiling is unwanted).
bool jit_disabled_by_env() {
  const char* v = std::getenv("LUMINAL_JIT");
  return v && std::string(v) == "0";
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;
LanguageModel& LanguageModel::operator=(LanguageModel&&) noexcept = default;
LanguageModel::~LanguageModel() = default;

bool ModelOptions::bf16_activations_named(const std::string& activations) {
  if (activations != "f32" && activations != "bf16") throw Error("activations must be f32 or bf16, got '" + activations + "'");
  return activations == "bf16";
}

DType ModelOptions::kv_dtype_named(const std::string& kv_cache) {
  if (kv_cache != "f32" && kv_cache != "bf16") throw Error("the KV cache must be f32 or bf16, got '" + kv_cache + "'");
  return kv_cache == "bf16" ? DType::BF16 : DType::F32;
}

LanguageModel LanguageModel::load(const std::string& path, const ModelOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto report = [&](const std::string& what, double f) {
    if (opts.progress) opts.progress(what, f);
  };
  LanguageModel m;
  ModelFiles files = open_model_files(path);
  m.config_ = files.config;
  const ModelConfig& c = m.config_;
  m.context_ = opts.context > 0 ? opts.context : std::min<int64_t>(c.max_position > 0 ? c.max_position : 4096, 4096);
  if (c.max_position > 0 && m.context_ > c.max_position)
    throw Error("context " + std::to_string(m.context_) + " is longer than the model's max_position_embeddings (" +
                std::to_string(c.max_position) + ")");
  m.all_logits_ = opts.all_logits;

  Graph g;
  DecoderGraphOptions go;
  go.context = m.context_;
  go.all_logits = opts.all_logits;
  go.weight_dtype = files.weights->natural_dtype();
  go.kv_dtype = m.kv_dtype_ = opts.kv_dtype;
  // Not yet measured on a GPU: the CUDA attention's bf16 cache reads are untested there.
  if (opts.backend == "cuda" && opts.kv_dtype != DType::F32)
    throw Error("a bf16 KV cache runs on the cpu and reference backends; on cuda use the f32 cache (--kv-cache f32)");
  build_decoder(g, c, go);

  report("compiling", 0);
  if (opts.backend != "cpu" && opts.backend != "reference" && opts.backend != "cuda")
    throw Error("backend '" + opts.backend + "' is not available (available: cpu, cuda, reference)");
  if (opts.backend == "cuda") cuda::require_usable();  // before any work: say at once why the GPU cannot be used
  const bool jit = opts.backend == "cpu" && opts.jit && !jit_disabled_by_env();
  const std::string kernel_dir = opts.kernel_cache_dir.empty() ? default_cache_dir() : opts.kernel_cache_dir;
  if (opts.backend == "cpu") m.pool_ = std::make_unique<cpu::ThreadPool>(opts.threads);
  CompileOptions co;
  co.search.limit = opts.search;
  co.search.profile_dims = {{"seq", 4}, {"past", 4}};
  co.cache_dir = opts.cache_dir;
  co.backend = opts.backend;
  if (opts.backend == "cpu") cpu::search_on_cpu(co, *m.pool_, jit, kernel_dir);  // timed on this backend's kernels
  if (opts.backend == "cuda") cuda::search_on_cuda(co, kernel_dir);               // timed on the GPU
  m.compiled_ = compile(g, co);
  m.compile_ms_ = m.compiled_.compile_ms;
  report("compiling", 1);

  m.backend_ = opts.backend;
  if (opts.backend == "cuda") {
    report("compiling CUDA kernels", 0);
    m.cuda_ = std::make_unique<cuda::CudaExecutor>(m.compiled_.plan, kernel_dir, cuda::CudaOptions{.bf16_activations = opts.bf16_activations});
  } else {
    m.runtime_ = std::make_unique<Interpreter>(m.compiled_.plan);
  }
  if (opts.backend == "cpu") {
    if (jit) {
      report("generating kernels", 0);
      m.jit_ = std::make_unique<cpu::FusedJit>();
      m.jit_->prepare(m.runtime_->graph(), kernel_dir);
    }
    if (packed_weights_wanted(opts.packed_weights)) m.packed_ = std::make_unique<cpu::PackedWeights>();
    m.runtime_->set_kernel_hook(
        cpu::cpu_kernels(*m.pool_, m.jit_.get(), {.bf16_activations = opts.bf16_activations, .packed_weights = m.packed_.get()}));
  }
  // The inputs packed below: 2-D bf16 weights only linear layers (and a tied embedding's Gather) read.
  std::vector<bool> to_pack(m.compiled_.plan.size(), false);
  if (m.packed_) {
    to_pack = read_as_linear_weights(m.compiled_.plan);
    for (NodeId id = 0; id < to_pack.size(); ++id) {
      const Node& n = m.compiled_.plan.node(id);
      to_pack[id] = to_pack[id] && n.op == OpKind::Input && n.dtype == DType::BF16 && n.shape.size() == 2;
    }
  }
  // The panels are fresh memory either way, so they ask for huge pages unless LUMINAL_HUGEPAGES=0:
  // decode 5-10% faster for a load 0.3-0.8 s longer on the Zen 4 VM (docs/cpu_backend.md).
  const char* huge_env = std::getenv("LUMINAL_HUGEPAGES");
  const bool panels_on_huge_pages = !(huge_env && std::string(huge_env) == "0");
  std::vector<NodeId> inputs = m.compiled_.plan.inputs();
  // On the CPU backend weights may be copied into huge pages (see runtime/huge_page_arena.h).
  std::shared_ptr<HugePageArena> arena;
  if (opts.backend == "cpu" && huge_pages_wanted(opts.huge_pages) && HugePageArena::available()) {
    size_t bytes = 0;
    for (NodeId id : inputs) {
      const Node& n = m.compiled_.plan.node(id);
      if (!is_weight(n.name) || to_pack[id]) continue;
      size_t count = dtype_size(n.dtype);
      for (const Expr& e : n.shape) count *= e.is_const() ? static_cast<size_t>(e.value()) : 0;
      bytes += count + 64;
    }
    arena = HugePageArena::create(bytes);
  }
  size_t done = 0;
  for (NodeId id : inputs) {
    const Node& n = m.compiled_.plan.node(id);
    report("loading weights", static_cast<double>(done++) / static_cast<double>(inputs.size()));
    if (n.name == "tokens") continue;
    std::vector<int64_t> shape;
    for (const Expr& e : n.shape) {
      if (!e.is_const()) throw Error("input '" + n.name + "' has a symbolic shape; only tokens may");
      shape.push_back(e.value());
    }
    if (n.name.rfind("cache.", 0) == 0) {
      m.set_input(n.name, Buffer(n.dtype, shape));
    } else if (n.name.rfind("rope.", 0) == 0) {
      std::string rest = n.name.substr(5);
      std::string key = rest.substr(0, rest.rfind('.'));
      int64_t head_dim = std::stoll(rest.substr(rest.rfind('.') + 1));
      m.set_input(n.name, Buffer::f32(c.rope(key).inv_freq(head_dim), shape));
    } else {
      Buffer w = files.weights->load(n.name, shape);
      if (w.dtype() != n.dtype) w = w.cast(n.dtype);
      m.weight_bytes_ += w.nbytes();
      if (to_pack[id]) {  // w is bf16 [n, k]: the input's dtype and shape
        // The panels replace the mapped file's pages; the buffer stays the input (the panels'
        // key), its bytes read back from the file only if something else ever reads them. (A
        // weight cast at load owns its bytes, which then stay beside the panels.)
        const uint8_t* bytes = std::as_const(w).bytes();
        cpu::WeightPanels panels =
            cpu::WeightPanels::pack(reinterpret_cast<const uint16_t*>(bytes), shape[0], shape[1], shape[1], m.pool_.get(), panels_on_huge_pages);
        if (w.borrowed()) drop_mapped_pages(bytes, w.nbytes());  // never heap memory: MADV_DONTNEED would zero it
        m.packed_->add(bytes, std::move(panels));
        m.set_input(n.name, std::move(w));
        continue;
      }
      m.set_input(n.name, arena ? arena->adopt(w) : std::move(w));
    }
  }
  report("loading weights", 1);
  m.load_ms_ = ms_since(t0) - m.compile_ms_;
  return m;
}

size_t LanguageModel::packed_weights() const { return packed_ ? packed_->count() : 0; }

std::string LanguageModel::jit_status() const {
  if (cuda_) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f", cuda_->compile_ms());
    const cuda::CudaExecutor::GraphStats& g = cuda_->graph_stats();
    return std::to_string(cuda_->kernel_functions()) + " CUDA functions, " +
           (cuda_->compiled_from_cache() ? std::string("loaded from the CUBIN cache in ") : std::string("compiled with NVRTC in ")) + ms +
           " ms; runs: " + std::to_string(g.launched) + " launched, " + std::to_string(g.recorded) + " recorded as CUDA graphs, " +
           std::to_string(g.replayed) + " replayed; " + std::to_string(g.dropped) + " graph drops; in launched runs, " +
           std::to_string(cuda_->launches_paired()) + " joined launches, " + std::to_string(cuda_->scatters_folded()) +
           " cache writes by their producers, " + std::to_string(cuda_->experts_in_one_run()) + " MoE experts in one kernel, " + std::to_string(cuda_->small_groups_folded()) + " routing groups in their gate/up GEMV, " +
           std::to_string(cuda_->small_groups_in_producers()) + " in their router's last block, " +
           std::to_string(cuda_->routers_through_o()) + " routers in their o projection's launch (" +
           std::to_string(cuda_->routing_groups_in_o()) + " with their routing in its last block), " +
           std::to_string(cuda_->expert_sums_early()) + " expert sums loading weights before their wait, " +
           std::to_string(cuda_->attention_norms_folded()) + " attentions computing their q/k norms and cache writes; schedules: " + std::to_string(cuda_->schedules_timed()) + " timed, " +
           std::to_string(cuda_->schedules_from_cache()) + " from the schedule cache, " + std::to_string(cuda_->refinements_tried()) +
           " tried in the recorded step, " + std::to_string(cuda_->refinements_kept()) + " kept";
  }
  if (backend_ != "cpu") return "no kernel generation on the " + backend_ + " backend";
  return jit_ ? jit_->status() : "kernel generation off";
}

size_t LanguageModel::cache_bytes() const {
  size_t n = 0;
  for (const LayerConfig& l : config_.layer)
    if (l.kv_shared_from < 0) n += 2 * static_cast<size_t>(l.kv_heads * context_ * l.head_dim) * dtype_size(kv_dtype_);
  return n;
}

int32_t LanguageModel::step_greedy(const std::vector<int32_t>& ids) {
  if (!cuda_) {
    const std::vector<float> logits = step(ids);
    const size_t last = logits.size() - static_cast<size_t>(config_.vocab);  // all_logits: the last row
    return static_cast<int32_t>(std::max_element(logits.begin() + static_cast<std::ptrdiff_t>(last), logits.end()) - logits.begin() -
                                static_cast<std::ptrdiff_t>(last));
  }
  check_step(ids);
  run_cuda(ids);
  const int64_t at = cuda_->output_argmax("logits");
  if (at < 0) throw Error("every logit of the step is NaN");
  return static_cast<int32_t>(at);
}

void LanguageModel::queue_greedy(const std::vector<int32_t>& ids) {
  if (!cuda_) throw Error("queue_greedy: only the cuda backend queues steps (use step_greedy)");
  if (queued_.size() >= 2) throw Error("queue_greedy: two steps are queued already (take one first)");
  check_step(ids);
  run_cuda(ids, false);
  queue_choice(static_cast<int64_t>(ids.size()));
}

void LanguageModel::queue_greedy() {
  if (!cuda_) throw Error("queue_greedy: only the cuda backend queues steps (use step_greedy)");
  if (!choice_on_device_) throw Error("queue_greedy(): the last step was not a queued greedy one, so there is no choice to continue from");
  if (queued_.size() >= 2) throw Error("queue_greedy: two steps are queued already (take one first)");
  if (position_ + 1 > context_)
    throw Error("a new token after " + std::to_string(position_) + " cached ones exceeds the context length " + std::to_string(context_));
  cuda_->set_dim("seq", 1);
  cuda_->set_dim("past", position_);
  cuda_->run(false);  // its token is the last step's choice, which that step's argmax wrote as the input
  position_ += 1;
  queue_choice(1);
}

void LanguageModel::queue_choice(int64_t tokens) {
  cuda_->argmax_to_input("logits", "tokens", next_slot_);
  queued_.push_back({next_slot_, tokens});
  next_slot_ ^= 1;
  choice_on_device_ = true;
}

int32_t LanguageModel::take_greedy() {
  if (queued_.empty()) throw Error("take_greedy: no step is queued");
  const QueuedStep q = queued_.front();
  queued_.erase(queued_.begin());
  const int64_t at = cuda_->take_argmax(q.slot);
  if (at < 0) throw Error("every logit of the step is NaN");
  return static_cast<int32_t>(at);
}

void LanguageModel::drop_greedy() {
  if (queued_.empty()) return;
  for (const QueuedStep& q : queued_) position_ -= q.tokens;
  queued_.clear();
  choice_on_device_ = false;  // the device's token is a dropped step's choice
}

void LanguageModel::check_step(const std::vector<int32_t>& ids) const {
  if (ids.empty()) throw Error("step: no tokens given");
  int64_t n = static_cast<int64_t>(ids.size());
  if (position_ + n > context_)
    throw Error(std::to_string(n) + " new tokens after " + std::to_string(position_) +
                " cached ones exceed the context length " + std::to_string(context_) +
                " (use a shorter prompt, fewer new tokens, or a longer --context up to the model's " +
                std::to_string(config_.max_position) + ")");
  for (int32_t id : ids)
    if (id < 0 || id >= config_.vocab)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(config_.vocab - 1) + ")");
}

void LanguageModel::run_cuda(const std::vector<int32_t>& ids, bool wait) {
  const int64_t n = static_cast<int64_t>(ids.size());
  choice_on_device_ = false;
  cuda_->set_input("tokens", Buffer::i32(ids, {n}));
  cuda_->set_dim("seq", n);
  cuda_->set_dim("past", position_);
  cuda_->run(wait);
  position_ += n;
}

std::vector<float> LanguageModel::step(const std::vector<int32_t>& ids) {
  check_step(ids);
  const int64_t n = static_cast<int64_t>(ids.size());
  if (cuda_) {
    run_cuda(ids);
    return cuda_->output_f32("logits");
  }
  Interpreter& rt = *runtime_;
  rt.set_input("tokens", Buffer::i32(ids, {n}));
  rt.set_dim("seq", n);
  rt.set_dim("past", position_);
  rt.run();
  position_ += n;
  return rt.output_f32("logits");
}

void LanguageModel::set_input(const std::string& name, Buffer data) {
  if (cuda_) cuda_->set_input(name, data);  // uploaded; the host copy goes when `data` does
  else runtime_->set_input(name, std::move(data));
}

void LanguageModel::set_profiling(bool on) {
  if (cuda_) cuda_->set_profiling(on);
  else runtime_->set_profiling(on);
}

void LanguageModel::clear_profile() {
  if (cuda_) cuda_->clear_profile();
  else runtime_->clear_profile();
}

std::vector<Interpreter::ProfileEntry> LanguageModel::profile() const {
  if (!cuda_) return runtime_->profile();
  std::vector<Interpreter::ProfileEntry> r;
  for (const auto& e : cuda_->profile()) r.push_back({"cuda " + e.label, e.calls, e.ms});
  return r;
}

Interpreter& LanguageModel::runtime() {
  if (!runtime_) throw Error("the " + backend_ + " backend has no kernel-by-kernel profile yet (use --backend cpu)");
  return *runtime_;
}

void LanguageModel::rewind(int64_t n) {
  drop_greedy();
  if (n < 0 || n > position_)
    throw Error("rewind(" + std::to_string(n) + "): the cache holds " + std::to_string(position_) + " tokens");
  position_ = n;
  choice_on_device_ = false;
}

}  // namespace luminal
