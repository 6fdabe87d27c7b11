#include "cli/example.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "compiler/compile.h"
#include "core/error.h"
#include "frontend/ops.h"
#include "runtime/interpreter.h"

namespace luminal::cli {

static std::vector<float> ramp(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7) % 11) + shift;
  return v;
}

int run_example(int argc, char** argv) {
  bool dump = false;
  int search = 8;
  std::string dot_path;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dump") dump = true;
    else if (a == "--dot" && i + 1 < argc) dot_path = argv[++i];
    else if (a == "--search" && i + 1 < argc) search = std::atoi(argv[++i]);
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: luminal example [--search N] [--dump] [--dot FILE]\n"
                   "  Builds a 2-layer MLP (4 -> 8 -> 3, GELU, softmax) over a dynamic batch 'batch',\n"
                   "  compiles it and runs it on the reference runtime for batch sizes 2 and 3.\n"
                   "  --search N  profile up to N candidate plans on the reference runtime (default 8)\n"
                   "  --dump      print the rule statistics and the compiled plan\n"
                   "  --dot FILE  write the graph as Graphviz\n";
      return 0;
    } else {
      throw Error("example: unknown option '" + a + "' (see luminal example --help)");
    }
  }

  Graph g;
  Expr batch = Expr::var("batch");
  Tensor x = input(g, "x", DType::F32, {batch, 4});
  Tensor w1 = input(g, "w1", DType::F32, {8, 4});
  Tensor b1 = input(g, "b1", DType::F32, {8});
  Tensor w2 = input(g, "w2", DType::F32, {3, 8});
  Tensor h = gelu(linear(x, w1, b1));
  softmax(linear(h, w2, std::nullopt), -1).output("probs");

  CompileOptions opts;
  opts.search.limit = search;
  opts.search.profile_dims = {{"batch", 4}};
  CompileResult compiled = compile(g, opts);
  std::printf("graph: %zu primitive nodes -> plan of %zu nodes (compiled in %.1f ms)\n", compiled.graph_nodes,
              compiled.plan_nodes, compiled.compile_ms);
  if (search > 0) std::cout << compiled.search.to_string();
  if (dump) {
    std::cout << compiled.report.to_string() << "plan:\n" << compiled.plan.dump();
  }
  if (!dot_path.empty()) {
    std::ofstream(dot_path) << compiled.plan.to_dot();
    std::printf("wrote %s\n", dot_path.c_str());
  }
  Interpreter rt(compiled.plan);

  rt.set_input("w1", Buffer::f32(ramp(32, 0.1f, -0.5f), {8, 4}));
  rt.set_input("b1", Buffer::f32(ramp(8, 0.05f, 0.0f), {8}));
  rt.set_input("w2", Buffer::f32(ramp(24, -0.2f, 0.6f), {3, 8}));
  for (int64_t n : {2, 3}) {
    rt.set_input("x", Buffer::f32(ramp(static_cast<size_t>(n) * 4, 0.3f, -1.0f), {n, 4}));
    rt.run();
    std::vector<float> p = rt.output_f32("probs");
    std::printf("batch=%lld probs:\n", static_cast<long long>(n));
    for (int64_t r = 0; r < n; ++r)
      std::printf("  [%.6f, %.6f, %.6f]\n", p[r * 3], p[r * 3 + 1], p[r * 3 + 2]);
  }
  return 0;
}

}  // namespace luminal::cli
