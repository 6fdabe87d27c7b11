// How long the CUDA backend takes to generate a decoder plan's kernels (no GPU, no NVRTC), with
// and without the forms whose codegen does real work (top-k ranks' proofs). Medians of N.
//
//   python3 scripts/make_random_model.py --arch qwen3-30b-a3b --out /tmp/cfg --config-only
//   build/benchmarks/cuda_codegen_time /tmp/cfg/config.json [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/cuda/cuda_executor.h"
#include "compiler/compile.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"

using namespace luminal;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG.json [reps]\n", argv[0]);
    return 2;
  }
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  Graph plan;
  try {
    const ModelConfig cfg = ModelConfig::from_json_file(argv[1]);
    Graph g;
    DecoderGraphOptions o;
    o.context = 1024;
    build_decoder(g, cfg, o);
    plan = compile(g, CompileOptions{}).plan;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_codegen_time: %s\n", e.what());
    return 1;
  }
  for (bool top_ranks : {false, true}) {
    std::vector<double> ms;
    size_t functions = 0;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      const cuda::PlanKernels k = cuda::generate_plan_kernels(plan, cuda::CodegenOptions{.top_ranks_in_groups = top_ranks});
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      functions = k.functions.names.size();
    }
    const double first = ms[0];  // with top-k ranks, the one run that proves the count (later runs find it kept)
    std::sort(ms.begin(), ms.end());
    std::printf("top-k ranks %s: %.1f ms (median of %d; the first %.1f), %zu functions\n", top_ranks ? "on " : "off", ms[ms.size() / 2], reps,
                first, functions);
  }
}
