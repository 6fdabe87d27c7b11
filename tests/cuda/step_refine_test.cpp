// Refining tuned schedules inside a recorded step (CudaOptions::refine_in_step): only where a
// replay repeats the run, and without changing what the runs compute.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"
#include "runtime/interpreter.h"
#include "cuda/cuda_cases.h"

namespace luminal::cuda {
namespace {

constexpr int64_t kIn = 256, kOut = 384, kSlots = 8;

// A decode step's shape: a linear layer (its GEMV has schedules to tune) whose output is
// written into a cache input at position `past` in place, and a sum over the cache. With
// `update_reads_cache` the written row also adds the cache's column sums: a replay then writes
// other values than the run before it did.
Graph step(bool update_reads_cache) {
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, kIn});
  Tensor w = input(g, "w", DType::BF16, {kOut, kIn});
  Tensor cache = input(g, "cache", DType::F32, {kSlots, kOut});
  Tensor y = linear(x, cast(w, DType::F32), std::nullopt);  // [s, kOut]
  if (update_reads_cache) y = y + sum(cache, {0}, true);
  Tensor pos = broadcast_to(reshape(iota(g, Expr::var("past") + Expr::index(), s), {s, 1}), {s, kOut});
  sum(scatter(cache, 0, pos, y), {0}).output("out");
  return g;
}

using testing::compiled;

TEST(CudaCodegen, OnlyPlansWhoseReplaysRepeatTheRunAreRefined) {
  EXPECT_TRUE(refine_safe(step(false)));
  EXPECT_FALSE(refine_safe(step(true)));
  EXPECT_TRUE(refine_safe(compiled(step(false))));
  EXPECT_FALSE(refine_safe(compiled(step(true))));
}

// Every model family's decode writes its caches from values that read the layers before only
// (and Gemma's shared caches are read, not written, by the layers that share them).
TEST(CudaCodegen, EveryFamilysDecodeStepMayBeRefined) {
  for (const char* name : {"llama-tiny", "qwen3-tiny", "gemma3-tiny", "gemma4-tiny", "qwen3-moe-tiny", "mixtral-tiny"}) {
    std::ifstream in(std::string(LUMINAL_TEST_DATA) + "/models/" + name + "/config.json");
    std::stringstream text;
    text << in.rdbuf();
    Graph g;
    DecoderGraphOptions o;
    o.context = 32;
    build_decoder(g, ModelConfig::from_json_text(text.str(), name), o);
    EXPECT_TRUE(refine_safe(compiled(g))) << name;
  }
}

// Every runner-up tried (refine_within large), the step replayed to time each: the outputs match
// the reference's after every run (the cache row written is the same each run, so the in-place
// cache and the reference's unchanged one agree), and nothing is tried where a replay would write
// other values into the cache.
TEST(CudaBackend, RefiningChoicesInTheStepChangesNoResult) {
  if (!nvrtc_unavailable_reason().empty() || !unavailable_reason().empty()) GTEST_SKIP() << unavailable_reason() << nvrtc_unavailable_reason();
  for (bool unsafe : {false, true}) {
    const Graph g = step(unsafe);
    CudaExecutor cuda(compiled(g), "", CudaOptions{.refine_within = 100.0});
    Interpreter ref(g);
    uint32_t seed = 7;
    const Buffer w = testing::random_buffer(DType::BF16, {kOut, kIn}, seed++);
    const Buffer cache = testing::random_buffer(DType::F32, {kSlots, kOut}, seed++);
    ref.set_input("w", w), cuda.set_input("w", w);
    ref.set_input("cache", cache), cuda.set_input("cache", cache);
    // The same dims each run (one graph: recorded on the second run, replayed from the third),
    // a new x each run.
    for (int run = 0; run < 6; ++run) {
      const Buffer x = testing::random_buffer(DType::F32, {1, kIn}, seed++);
      ref.set_dim("s", 1), ref.set_dim("past", 3);
      cuda.set_dim("s", 1), cuda.set_dim("past", 3);
      ref.set_input("x", x), cuda.set_input("x", x);
      ref.run();
      cuda.run();
      if (unsafe && run > 0) continue;  // its cache, updated in place, now differs from the reference's
      const Buffer want = ref.output("out"), got = cuda.output("out");
      ASSERT_EQ(got.numel(), want.numel());
      for (size_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.get(i), want.get(i), 1e-4 * (1 + std::abs(want.get(i)))) << "run " << run << " out[" << i << "]";
    }
    if (unsafe) EXPECT_EQ(cuda.refinements_tried(), 0);
    else EXPECT_GT(cuda.refinements_tried(), 0);
  }
}

}  // namespace
}  // namespace luminal::cuda
