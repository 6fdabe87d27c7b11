#include "cli/model_session.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "compiler/plan_cache.h"
#include "core/error.h"
#include "loader/gguf.h"
#include "models/model_files.h"

namespace luminal::cli {

namespace fs = std::filesystem;

void add_model_options(Args& a) {
  a.option("--model", "PATH", "a Hugging Face model folder (config.json + safetensors) or a .gguf file")
      .option("--context", "N", "KV cache length in tokens (default: max_position_embeddings, at most 4096)")
      .option("--search", "N", "candidate plans to profile when compiling", "0")
      .option("--backend", "NAME", "where to run: cpu (native kernels, threads), cuda (the GPU) or reference (the exact interpreter)", "cpu")
      .option("--threads", "N", "cpu backend threads (default: $LUMINAL_THREADS or all)")
      .option("--cache", "DIR", "plan cache folder (default: $LUMINAL_CACHE_DIR or ~/.cache/luminal)")
      .option("--activations", "DTYPE",
              "f32 (the default: f32-faithful logits) or bf16 (prefill's matrix products on bf16 activations, as PyTorch and "
              "llama.cpp run a bf16 model: up to twice as fast where the tensor cores or AMX run them)",
              "f32")
      .option("--kv-cache", "DTYPE",
              "f32 (the default: exact) or bf16 (keys and values rounded to bf16 as they are cached, as llama.cpp's f16 cache: half "
              "the cache's memory and half the bytes a long decode reads; cpu and reference backends)",
              "f32")
      .flag("--no-cache", "do not read or write the plan cache")
      .flag("--no-jit", "cpu backend: run fused kernels on the kernel interpreter instead of generated C++ (also LUMINAL_JIT=0)")
      .flag("--huge-pages", "cpu backend: copy the weights into transparent huge pages at load (also LUMINAL_HUGEPAGES=1): "
                            "decode a few percent faster, load seconds slower")
      .flag("--no-huge-pages", "cpu backend: read weights that are not packed at load in place from the mapped file (the default; "
                               "LUMINAL_HUGEPAGES=0 also keeps the packed ones' panels off huge pages)")
      .flag("--packed-weights", "cpu backend: pack bf16 linear-layer weights at load into the GEMM's panels, in place of the mapped file's "
                                "pages (the default where the CPU has AVX-512 and no AMX; also LUMINAL_CPU_PACKED_WEIGHTS=1)")
      .flag("--no-packed-weights", "cpu backend: read bf16 weights' rows in place from the mapped file (faster load, slower prefill and "
                                   "decode; also LUMINAL_CPU_PACKED_WEIGHTS=0)");
}

ModelOptions model_options(const Args& a, bool all_logits) {
  if (!a.has("--model")) throw Error("--model PATH is required (a Hugging Face model folder or a .gguf file)");
  ModelOptions o;
  o.backend = a.str("--backend");
  if (a.has("--threads")) o.threads = static_cast<int>(a.integer("--threads"));
  o.all_logits = all_logits;
  if (a.has("--context")) o.context = a.integer("--context");
  o.search = static_cast<int>(a.integer("--search"));
  o.jit = !a.has("--no-jit");
  o.huge_pages = a.has("--huge-pages") && !a.has("--no-huge-pages");
  o.packed_weights = !a.has("--no-packed-weights");
  o.bf16_activations = ModelOptions::bf16_activations_named(a.str("--activations"));
  o.kv_dtype = ModelOptions::kv_dtype_named(a.str("--kv-cache"));
  if (!a.has("--no-cache")) o.cache_dir = a.has("--cache") ? a.str("--cache") : default_cache_dir();
  if (isatty(2)) {
    o.progress = [](const std::string& what, double f) {
      std::fprintf(stderr, "\r\033[K%s %3.0f%%", what.c_str(), 100 * f);
      if (f >= 1) std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    };
  }
  return o;
}

LanguageModel load_model(const Args& a, bool all_logits) {
  return LanguageModel::load(a.str("--model"), model_options(a, all_logits));
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::string s = text;
  for (char& c : s)
    if (c == ',' || c == '[' || c == ']') c = ' ';
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {
    try {
      size_t used = 0;
      long long v = std::stoll(tok, &used);
      if (used != tok.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(tok);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw Error("--ids expects token ids separated by spaces or commas, got '" + tok + "'");
    }
  }
  if (ids.empty()) throw Error("--ids holds no token ids");
  return ids;
}

std::string json_ids(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

size_t peak_rss_bytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace luminal::cli
