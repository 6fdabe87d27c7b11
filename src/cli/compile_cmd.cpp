#include "cli/compile_cmd.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "backends/cpu/cpu_plan_timer.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cuda/cuda_plan_timer.h"
#include "compiler/compile.h"
#include "core/cache_paths.h"
#include "compiler/plan_cache.h"
#include "core/error.h"
#include "models/decoder_graph.h"
#include "models/llama_graph.h"
#include "models/model_files.h"

namespace luminal::cli {

static const char* kHelp =
    "usage: luminal compile [options]\n"
    "  Compiles a built-in Llama-architecture graph (weights are not needed to compile) and\n"
    "  reports e-graph sizes, rule statistics, the search and the chosen plan.\n\n"
    "  --model PATH         compile a real model's graph (a Hugging Face folder or a .gguf file;\n"
    "                       only its config is read) instead of the built-in one\n"
    "  --context N          KV cache length for --model (default 4096)\n"
    "  --size tiny|8b       model shape (default tiny: 2 layers, hidden 64)\n"
    "  --layers N           number of decoder layers (default: the shape's)\n"
    "  --search N           profile up to N candidate plans (default 0: the cost model's plan)\n"
    "  --backend cpu|cuda|reference  what the search times candidates on (default cpu: the CPU\n"
    "                       backend's kernels; cuda: the GPU's; reference: the exact interpreter)\n"
    "  --threads N          CPU backend threads (default: all cores)\n"
    "  --seq N --past N     dim values to profile and cost at (default 4 and 8)\n"
    "  --no-dedup           compile every layer separately instead of once per distinct block\n"
    "  --cache DIR          plan cache folder (default: $LUMINAL_CACHE_DIR or ~/.cache/luminal)\n"
    "  --no-cache           do not read or write the plan cache\n"
    "  --rules FILE         an extra rule file (repeatable)\n"
    "  --plan               print the chosen plan\n"
    "  --dot-plan FILE      write the plan as Graphviz\n"
    "  --dot-egraph FILE    write the (block's) saturated e-graph as Graphviz\n";

int run_compile(int argc, char** argv) {
  LlamaShape shape = LlamaShape::tiny();
  int64_t layers = -1, seq = 4, past = 8;
  CompileOptions opts;
  opts.cache_dir = default_cache_dir();
  bool print_plan = false;
  std::string dot_plan, dot_egraph, model_path;
  int64_t context = 4096;
  std::string backend = "cpu";
  int threads = 0;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("compile: " + a + " needs a value (see luminal compile --help)");
      return argv[++i];
    };
    auto number = [&]() -> int64_t {
      std::string v = value();
      try {
        return std::stoll(v);
      } catch (...) {
        throw Error("compile: " + a + " expects a number, got '" + v + "'");
      }
    };
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return 0;
    } else if (a == "--size") {
      std::string v = value();
      if (v == "tiny") shape = LlamaShape::tiny();
      else if (v == "8b") shape = LlamaShape::llama3_8b();
      else throw Error("compile: --size must be tiny or 8b, got '" + v + "'");
    } else if (a == "--model") model_path = value();
    else if (a == "--context") context = number();
    else if (a == "--layers") layers = number();
    else if (a == "--search") opts.search.limit = static_cast<int>(number());
    else if (a == "--backend") backend = value();
    else if (a == "--threads") threads = static_cast<int>(number());
    else if (a == "--seq") seq = number();
    else if (a == "--past") past = number();
    else if (a == "--no-dedup") opts.dedup = false;
    else if (a == "--cache") opts.cache_dir = value();
    else if (a == "--no-cache") opts.cache_dir.clear();
    else if (a == "--rules") opts.rule_files.push_back(value());
    else if (a == "--plan") print_plan = true;
    else if (a == "--dot-plan") dot_plan = value();
    else if (a == "--dot-egraph") dot_egraph = value();
    else throw Error("compile: unknown option '" + a + "' (see luminal compile --help)");
  }
  if (backend != "cpu" && backend != "cuda" && backend != "reference")
    throw Error("compile: --backend must be cpu, cuda or reference, got '" + backend + "'");
  opts.backend = backend;
  if (backend == "cuda") cuda::search_on_cuda(opts, opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir);
  std::unique_ptr<cpu::ThreadPool> pool;
  if (backend == "cpu") {
    // Candidates allocate and free the same large buffers (casts of weights, KV-cache copies)
    // run after run: keep freed memory for reuse instead of returning it to the kernel, which
    // made every run fault in and zero fresh pages (a quarter of a search's time).
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    pool = std::make_unique<cpu::ThreadPool>(threads);
    cpu::search_on_cpu(opts, *pool, true, opts.cache_dir.empty() ? default_cache_dir() : opts.cache_dir);
  }
  opts.search.profile_dims = {{"seq", seq}, {"past", past}};
  opts.cost.dims = opts.search.profile_dims;

  Graph g;
  if (!model_path.empty()) {
    ModelFiles files = open_model_files(model_path);
    DecoderGraphOptions go;
    go.context = context;
    go.weight_dtype = files.weights->natural_dtype();
    build_decoder(g, files.config, go);
    std::printf("graph: %s, %lld layers, hidden %lld: %zu HLIR nodes\n", files.config.model_type.c_str(),
                static_cast<long long>(files.config.layers), static_cast<long long>(files.config.hidden), g.size());
  } else {
    if (layers > 0) shape.layers = layers;
    build_llama(g, shape);
    std::printf("graph: llama, %lld layers, hidden %lld: %zu HLIR nodes\n", static_cast<long long>(shape.layers),
                static_cast<long long>(shape.hidden), g.size());
  }
  bool tty = isatty(STDERR_FILENO);
  opts.progress = [&](const SearchReport& r) {
    if (!tty) return;
    int width = 30, done = opts.search.limit > 0 ? r.profiled * width / opts.search.limit : width;
    std::fprintf(stderr, "\rsearch [%-*s] %d/%d candidates, best %.3f ms", width, std::string(done, '#').c_str(),
                 r.profiled, opts.search.limit, r.best_ms);
    std::fflush(stderr);
  };
  opts.on_egraph = [&](const EGraph& eg, const std::string& part) {
    std::printf("e-graph (%s): %zu nodes in %zu classes\n", part.c_str(), eg.node_count(), eg.class_count());
    if (!dot_egraph.empty() && part != "outer") {
      std::ofstream(dot_egraph) << eg.to_dot();
      std::printf("wrote %s\n", dot_egraph.c_str());
    }
  };
  CompileResult r = compile(g, opts);
  if (tty && opts.search.limit > 0 && !r.cache_hit) std::fprintf(stderr, "\n");
  if (r.cache_hit) {
    std::printf("plan cache hit (%s)\n", PlanCache(opts.cache_dir).path(r.cache_key).c_str());
  } else {
    if (r.block_copies) std::printf("layer dedup: %zu copies of a %zu-node block, compiled once\n", r.block_copies, r.block_nodes);
    std::cout << r.report.to_string();
    if (opts.search.limit > 0) {
      std::cout << (r.block_copies ? "block " : "") << r.search.to_string();
      if (r.block_copies) std::cout << "outer " << r.outer_search.to_string();
    }
  }
  std::printf("plan: %zu nodes (from %zu); compile %.1f ms\n", r.plan_nodes, r.graph_nodes, r.compile_ms);
  if (print_plan) std::cout << r.plan.dump();
  if (!dot_plan.empty()) {
    std::ofstream(dot_plan) << r.plan.to_dot();
    std::printf("wrote %s\n", dot_plan.c_str());
  }
  return 0;
}

}  // namespace luminal::cli
