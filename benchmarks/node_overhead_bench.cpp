// What the runtime costs per node beyond the kernel's own work: a chain of 800 small adds
// ([1, 1024] f32, a decode step's typical elementwise size) run through the CPU backend's hook
// and generated kernels, the median over repetitions. Two cases: the input changes every run
// (a fixed-shape graph's activations) and nothing changes (every value is kept from the first
// run: runtime/run_invariants.h). Decode steps run about 800 kernel calls, so 1 us per node is
// about 1% of a Qwen3-0.6B step here.
//
//   ./build/benchmarks/node_overhead_bench [--reps R] [--nodes N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/fused_jit.h"
#include "backends/cpu/thread_pool.h"
#include "core/cache_paths.h"
#include "frontend/ops.h"
#include "runtime/interpreter.h"

using namespace luminal;

int main(int argc, char** argv) {
  int reps = 30, nodes = 800;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--nodes") && i + 1 < argc) nodes = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: node_overhead_bench [--reps R] [--nodes N]\n");
      return 2;
    }
  }
  Graph g;
  Tensor x = input(g, "x", DType::F32, {1, 1024});
  Tensor y = input(g, "y", DType::F32, {1, 1024});
  Tensor t = x;
  for (int i = 0; i < nodes; ++i) t = t + y;
  t.output("out");

  cpu::ThreadPool pool(2);
  Interpreter it(g);
  cpu::FusedJit jit;
  jit.prepare(it.graph(), default_cache_dir());
  std::printf("%s\n", jit.status().c_str());
  it.set_kernel_hook(cpu::cpu_kernels(pool, &jit));
  const std::vector<float> ones(1024, 1.0f);
  it.set_input("y", Buffer::f32(ones, {1, 1024}));
  for (bool changing : {false, true}) {  // in this order: once a value changes every run it is not kept again
    std::vector<double> us;
    it.set_input("x", Buffer::f32(ones, {1, 1024}));
    for (int r = 0; r < reps + 2; ++r) {
      if (changing) it.set_input("x", Buffer::f32(ones, {1, 1024}));
      auto t0 = std::chrono::steady_clock::now();
      it.run();
      double per = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / nodes;
      if (r >= 2) us.push_back(per);  // the first runs compile nothing but settle the kept values
    }
    std::sort(us.begin(), us.end());
    float last = it.output_f32("out")[0];
    std::printf("%-28s %.2f us per node (median of %d runs; out[0] = %g)\n",
                changing ? "input changes every run:" : "nothing changes:", us[us.size() / 2], reps, static_cast<double>(last));
  }
  return 0;
}
