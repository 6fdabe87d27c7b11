#pragma once
// A loaded LLM ready to run: config, weights, compiled plan and KV cache. One step appends
// tokens after the cached ones: a whole prompt at once (prefill) or one token (decode). The
// tokenizer is loaded on its own (models/model_files.h).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "models/model_config.h"
#include "runtime/interpreter.h"

namespace luminal::cpu {
class ThreadPool;
class FusedJit;
class PackedWeights;
}
namespace luminal::cuda {
class CudaExecutor;
}

namespace luminal {

struct ModelOptions {
  int64_t context = 0;      // KV cache length; 0: max_position_embeddings capped at 4096
  bool all_logits = false;  // step() returns logits for every position, not just the last
  int search = 0;           // candidate plans to profile (0: the cost model's plan)
  std::string backend = "cpu";  // cpu (native kernels, threads), cuda (the GPU) or reference (the exact interpreter)
  int threads = 0;          // cpu backend threads; 0: $LUMINAL_THREADS or all hardware threads
  std::string cache_dir;    // plan cache folder; empty: no cache
  bool jit = true;          // cpu backend: generate and compile fused kernels at load
  std::string kernel_cache_dir;  // compiled kernels; empty: default_cache_dir()
  // cpu backend: weights copied into transparent huge pages at load. Decode streams them a few
  // percent faster than the memory-mapped file, but faulting in fresh memory can take seconds
  // per GB (a virtual machine measured 3 s/GB), so it is opt-in. LUMINAL_HUGEPAGES=1 turns it
  // on, =0 off, whatever this says.
  bool huge_pages = false;
  // cpu backend: bf16 weights that only linear layers read are packed at load into the GEMM's
  // pair panels (backends/cpu/weight_panels.h), in place of the mapped file's pages: prefill
  // skips packing them on every call, decode streams the panels (on a Zen 4 VM, 10-15% off a
  // bf16 prefill and 15-25% off decode, for a load about 0.6 s/GB longer; the panels ask for
  // transparent huge pages unless LUMINAL_HUGEPAGES=0). Only where it pays
  // (cpu::packed_weights_supported: AVX-512, no AMX). LUMINAL_CPU_PACKED_WEIGHTS=1 or 0
  // overrides this.
  bool packed_weights = true;
  // Matrix products on the tensor cores (cuda) or AMX (cpu) take the activations as bf16, as
  // PyTorch and llama.cpp run a bf16 model: prefill up to twice as fast, activations rounded to
  // 2^-8 of themselves there. Off (the default): f32-faithful logits (each activation as two bf16 parts).
  bool bf16_activations = false;
  // "f32" or "bf16" (the CLI's --activations, Python's activations=) as bf16_activations; Error
  // naming both for anything else.
  static bool bf16_activations_named(const std::string& activations);
  // The KV cache's element type (DecoderGraphOptions::kv_dtype): f32, or bf16 for half its
  // memory and half the bytes a long decode reads (cpu and reference backends; cuda: an Error).
  DType kv_dtype = DType::F32;
  // "f32" or "bf16" (the CLI's --kv-cache, Python's kv_cache=) as kv_dtype; Error otherwise.
  static DType kv_dtype_named(const std::string& kv_cache);
  // Called with what is happening ("loading weights", "compiling") and a fraction done.
  std::function<void(const std::string&, double)> progress;
};

class LanguageModel {
 public:
  // A Hugging Face folder (config.json, *.safetensors, tokenizer.json) or a .gguf file.
  static LanguageModel load(const std::string& path, const ModelOptions& opts = {});
  LanguageModel(LanguageModel&&) noexcept;
  LanguageModel& operator=(LanguageModel&&) noexcept;
  ~LanguageModel();

  const ModelConfig& config() const { return config_; }
  int64_t context() const { return context_; }
  int64_t position() const { return position_; }  // tokens in the KV cache

  // Runs `ids` after the cached tokens; returns [ids.size() x vocab] logits with all_logits,
  // else the last position's [vocab]. Error if the tokens would overflow the context.
  std::vector<float> step(const std::vector<int32_t>& ids);
  // The same step's greedy choice: the index of the last position's largest logit (the first of
  // equals). On cuda it is found on the device, and only it crosses to the host.
  int32_t step_greedy(const std::vector<int32_t>& ids);
  // Greedy steps queued on the device (cuda only: queues_greedy). Each step's choice is found
  // there and becomes the next step's token there, so the next step is queued before the host
  // reads this one's and the device never waits for the host. At most two steps are queued.
  bool queues_greedy() const { return cuda_ != nullptr; }
  void queue_greedy(const std::vector<int32_t>& ids);  // a step over ids
  void queue_greedy();                                 // a step over the last queued step's choice
  int32_t take_greedy();                               // the oldest queued step's choice, waiting for it alone
  size_t greedy_queued() const { return queued_.size(); }
  // Forgets the queued steps not taken: the cache holds what the taken ones saw.
  void drop_greedy();
  void reset() { rewind(0); }  // forget the cached tokens (the cache is overwritten, not cleared)
  void rewind(int64_t n);       // keep only the first n cached tokens (a shared prompt prefix)

  double load_ms() const { return load_ms_; }
  double compile_ms() const { return compile_ms_; }
  size_t weight_bytes() const { return weight_bytes_; }
  size_t packed_weights() const;  // weights packed at load (cpu backend; ModelOptions::packed_weights)
  size_t cache_bytes() const;
  const CompileResult& compiled() const { return compiled_; }
  const std::string& backend() const { return backend_; }
  // The plan runner on the cpu and reference backends (profiling, inspection); Error on cuda.
  Interpreter& runtime();
  std::string jit_status() const;

  // Kernel-by-kernel timing on any backend (see Interpreter::set_profiling).
  void set_profiling(bool on);
  void clear_profile();
  std::vector<Interpreter::ProfileEntry> profile() const;  // what the cpu backend's kernel generator did

 private:
  LanguageModel() = default;
  ModelConfig config_;
  std::unique_ptr<cpu::ThreadPool> pool_;  // before runtime_: the runtime's kernels use it
  std::unique_ptr<cpu::FusedJit> jit_;
  std::unique_ptr<cpu::PackedWeights> packed_;   // before runtime_: its kernels read them
  std::unique_ptr<Interpreter> runtime_;         // cpu and reference backends
  std::unique_ptr<cuda::CudaExecutor> cuda_;     // cuda backend
  void set_input(const std::string& name, Buffer data);
  void check_step(const std::vector<int32_t>& ids) const;  // throws for tokens a step cannot take
  void run_cuda(const std::vector<int32_t>& ids, bool wait = true);  // a step on the cuda backend, to its outputs
  void queue_choice(int64_t tokens);  // the queued step's choice (of a step of `tokens` tokens) as the next token
  CompileResult compiled_;
  int64_t context_ = 0, position_ = 0;
  DType kv_dtype_ = DType::F32;
  struct QueuedStep {
    int slot;        // of the executor's two choice slots
    int64_t tokens;  // the step's, in position_ already
  };
  std::vector<QueuedStep> queued_;  // oldest first
  int next_slot_ = 0;
  bool choice_on_device_ = false;  // the last run was a queued greedy step: its choice is the next token
  bool all_logits_ = false;
  std::string backend_;
  double load_ms_ = 0, compile_ms_ = 0;
  size_t weight_bytes_ = 0;
};

}  // namespace luminal
