// Compiler scaling benchmark: build + saturate + extract for Llama-3-8B-shaped graphs of
// 1..32 layers (symbolic seq/past dims). Prints medians over repetitions.
//
//   ./build/benchmarks/bench_compile [--reps N] [--max-layers L]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "models/llama_graph.h"

using namespace luminal;
using Clock = std::chrono::steady_clock;

static double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  int reps = 3, max_layers = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--max-layers")) max_layers = std::atoi(argv[i + 1]);
  }
  std::printf("%7s %10s %10s %10s %12s %12s %10s %10s\n", "layers", "hlir", "enodes", "classes", "build_ms",
              "saturate_ms", "extract_ms", "plan");
  for (int layers = 1; layers <= max_layers; layers *= 2) {
    std::vector<double> build, sat, ext;
    size_t hlir = 0, nodes = 0, classes = 0, plan = 0;
    for (int r = 0; r < reps; ++r) {
      LlamaShape shape = LlamaShape::llama3_8b();
      shape.layers = layers;
      auto t0 = Clock::now();
      Graph g;
      build_llama(g, shape);
      OpTable ops;
      RuleFunctions fns;
      RuleFile rules = builtin_rules(ops, fns);
      EGraph eg(ops);
      Seeded seeded = add_graph(eg, g);
      auto t1 = Clock::now();
      RunReport rep = run_schedule(eg, rules, fns, RunLimits{});
      auto t2 = Clock::now();
      Graph p = choice_to_graph(eg, extract_greedy(eg, CostModel{}), seeded.roots());
      auto t3 = Clock::now();
      build.push_back(ms(t0, t1));
      sat.push_back(ms(t1, t2));
      ext.push_back(ms(t2, t3));
      hlir = g.size();
      nodes = eg.node_count();
      classes = eg.class_count();
      plan = p.size();
    }
    std::printf("%7d %10zu %10zu %10zu %12.1f %12.1f %10.1f %10zu\n", layers, hlir, nodes, classes, median(build),
                median(sat), median(ext), plan);
    std::fflush(stdout);
  }
  // The whole compile (graph -> plan, no search) of the full model with layer dedup on and off.
  for (bool dedup : {true, false}) {
    std::vector<double> t;
    CompileResult r;
    for (int rep = 0; rep < reps; ++rep) {
      LlamaShape shape = LlamaShape::llama3_8b();
      shape.layers = max_layers;
      Graph g;
      build_llama(g, shape);
      CompileOptions opts;
      opts.dedup = dedup;
      auto t0 = Clock::now();
      r = compile(g, opts);
      t.push_back(ms(t0, Clock::now()));
    }
    std::printf("compile %d layers, dedup %-3s: %8.1f ms (median of %d), %zu block copies of %zu nodes, plan %zu nodes\n",
                max_layers, dedup ? "on" : "off", median(t), reps, r.block_copies, r.block_nodes, r.plan_nodes);
  }
  return 0;
}
