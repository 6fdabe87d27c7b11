// Schedule choices kept on disk between processes (ScheduleCache, CudaOptions::schedule_cache).
#include "backends/cuda/schedule_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "cuda/cuda_cases.h"
#include "egraph/moe_experts_case.h"
#include "frontend/ops.h"
#include "frontend/tensor.h"
#include "runtime/interpreter.h"

namespace luminal::cuda {
namespace {

// A folder of its own under the system's temporary one, removed after the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("luminal-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(ScheduleCache, ChoicesComeBackInAnotherInstanceForTheSameDevice) {
  TempDir dir("schedules");
  {
    ScheduleCache c(dir.path.string(), "GPU A sm_90, driver 13000");
    EXPECT_TRUE(c.enabled());
    EXPECT_EQ(c.find("lm_Matmul_1", 4096), nullptr);
    c.put("lm_Matmul_1", 4096, {"lm_Matmul_7", false});
    c.put("lm_Matmul_1", 8192, {"lm_Matmul_9", true});
    c.put("lm_Matmul_1", 4096, {"lm_Matmul_8", true});  // refined later: replaces the first
    c.save();
  }
  ScheduleCache again(dir.path.string(), "GPU A sm_90, driver 13000");
  ASSERT_EQ(again.size(), 2u);
  ASSERT_NE(again.find("lm_Matmul_1", 4096), nullptr);
  EXPECT_EQ(again.find("lm_Matmul_1", 4096)->variant, "lm_Matmul_8");
  EXPECT_TRUE(again.find("lm_Matmul_1", 4096)->refined);
  EXPECT_EQ(again.find("lm_Matmul_1", 8192)->variant, "lm_Matmul_9");
  EXPECT_EQ(again.find("lm_Matmul_2", 4096), nullptr);
  // Another device or driver reads nothing of it.
  EXPECT_EQ(ScheduleCache(dir.path.string(), "GPU A sm_90, driver 13010").size(), 0u);
  EXPECT_EQ(ScheduleCache(dir.path.string(), "GPU B sm_90, driver 13000").size(), 0u);
}

TEST(ScheduleCache, AFileItCannotParseIsIgnoredWhole) {
  TempDir dir("schedules-bad");
  const std::string device = "GPU A sm_90, driver 13000";
  ScheduleCache c(dir.path.string(), device);
  c.put("lm_Matmul_1", 4096, {"lm_Matmul_7", false});
  c.save();
  for (const char* bad : {"lm_Matmul_2 notanumber lm_Matmul_3 0\n", "lm_Matmul_2 4096 lm_Matmul_3 2\n", "lm_Matmul_2 4096 lm_Matmul_3 0 extra\n",
                          "lm_Matmul_2 4096\n"}) {
    {
      std::ofstream out(c.path(), std::ios::trunc);
      out << "luminal schedule choices 1 " << device << "\nlm_Matmul_1 4096 lm_Matmul_7 0\n" << bad;
    }
    EXPECT_EQ(ScheduleCache(dir.path.string(), device).size(), 0u) << bad;
  }
  {
    std::ofstream out(c.path(), std::ios::trunc);
    out << "some other file\nlm_Matmul_1 4096 lm_Matmul_7 0\n";
  }
  EXPECT_EQ(ScheduleCache(dir.path.string(), device).size(), 0u);
  // Without a folder nothing is kept or written.
  ScheduleCache none;
  EXPECT_FALSE(none.enabled());
  none.put("lm_Matmul_1", 1, {"lm_Matmul_2", false});
  none.save();
  EXPECT_EQ(none.find("lm_Matmul_1", 1), nullptr);
}

// The environment's LUMINAL_CUDA_SCHEDULE_CACHE cleared for one test, restored after it (the
// device script sets it to 0 so that its A/B runs time their own schedules; session 37's first
// run of this test on the H200 failed under it).
struct ScheduleCacheEnvCleared {
  std::optional<std::string> saved;
  ScheduleCacheEnvCleared() {
    if (const char* v = std::getenv("LUMINAL_CUDA_SCHEDULE_CACHE")) saved = v;
    unsetenv("LUMINAL_CUDA_SCHEDULE_CACHE");
  }
  ~ScheduleCacheEnvCleared() {
    if (saved) setenv("LUMINAL_CUDA_SCHEDULE_CACHE", saved->c_str(), 1);
  }
};

// A second executor with the same cache folder runs the first one's choices without timing
// them, and computes the same values.
TEST(CudaBackend, ASecondExecutorRunsTheSchedulesTheFirstChose) {
  if (!nvrtc_unavailable_reason().empty() || !unavailable_reason().empty()) GTEST_SKIP() << unavailable_reason() << nvrtc_unavailable_reason();
  const ScheduleCacheEnvCleared env;
  TempDir dir("schedule-executors");
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, 256});
  Tensor w = input(g, "w", DType::BF16, {384, 256});
  linear(x, cast(w, DType::F32), std::nullopt).output("y");
  CompileOptions o;
  const Graph plan = compile(g, o).plan;
  const Buffer xb = testing::random_buffer(DType::F32, {1, 256}, 1), wb = testing::random_buffer(DType::BF16, {384, 256}, 2);
  Interpreter ref(g);
  ref.set_input("x", xb), ref.set_input("w", wb);
  ref.run();
  std::vector<int64_t> timed, from_cache;
  for (int e = 0; e < 2; ++e) {
    CudaExecutor cuda(plan, dir.path.string());
    cuda.set_input("x", xb), cuda.set_input("w", wb);
    for (int run = 0; run < 3; ++run) cuda.run();
    timed.push_back(cuda.schedules_timed());
    from_cache.push_back(cuda.schedules_from_cache());
    const Buffer want = ref.output("y"), got = cuda.output("y");
    for (size_t i = 0; i < want.numel(); ++i) ASSERT_NEAR(got.get(i), want.get(i), 1e-4 * (1 + std::abs(want.get(i)))) << "executor " << e;
  }
  EXPECT_GT(timed[0], 0);
  EXPECT_EQ(from_cache[0], 0);
  EXPECT_EQ(timed[1], 0);
  EXPECT_EQ(from_cache[1], timed[0]);
}

// One function offered on several grid caps (gen::grid_caps: an MoE decode's expert sum, with
// LUMINAL_CUDA_EXPERT_SUM_CAPS=1,2 as ctest runs it) is cached under its function and its cap:
// a cache naming each chosen schedule's function on cap 2 is taken as written by a second
// executor, which then computes the same values.
TEST(CudaBackend, CachedSchedulesKeepTheirGridCap) {
  if (!nvrtc_unavailable_reason().empty() || !unavailable_reason().empty()) GTEST_SKIP() << unavailable_reason() << nvrtc_unavailable_reason();
  const std::vector<int>& caps = gen::expert_sum_caps();
  if (std::find(caps.begin(), caps.end(), 2) == caps.end()) GTEST_SKIP() << "needs LUMINAL_CUDA_EXPERT_SUM_CAPS=1,2 (read once a process)";
  const ScheduleCacheEnvCleared env;
  TempDir dir("schedule-caps");
  moetest::MoeExperts c;
  const Graph plan = compile(c.graph(), CompileOptions{}).plan;
  const std::map<std::string, Buffer> in = c.inputs(1);
  const std::vector<double> want = c.expected(in, 1);
  std::string cache_path;
  {
    CudaExecutor first(plan, dir.path.string());
    for (const auto& [name, b] : in) first.set_input(name, b);
    for (int run = 0; run < 3; ++run) first.run();
    ASSERT_GT(first.experts_summed(), 0) << "the decode's experts were not summed by the expert-sum GEMV";
    ASSERT_GT(first.schedules_timed(), 0);
  }
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path))
    if (f.path().filename().string().rfind("schedules-", 0) == 0) cache_path = f.path().string();
  ASSERT_FALSE(cache_path.empty()) << "no schedule cache under " << dir.path;
  // Every choice moved to its function on cap 2.
  std::ifstream read(cache_path);
  std::string header, line, written = "";
  std::getline(read, header);
  std::map<std::string, std::string> moved;
  while (std::getline(read, line)) {
    std::istringstream fields(line);
    std::string function, variant;
    int64_t work = 0;
    int refined = 0;
    ASSERT_TRUE(fields >> function >> work >> variant >> refined) << line;
    variant = variant.substr(0, variant.find('@')) + "@2";
    moved[function + " " + std::to_string(work)] = variant;
    written += function + " " + std::to_string(work) + " " + variant + " 0\n";
  }
  read.close();
  std::ofstream(cache_path, std::ios::trunc) << header << "\n" << written;
  CudaExecutor second(plan, dir.path.string());
  for (const auto& [name, b] : in) second.set_input(name, b);
  for (int run = 0; run < 3; ++run) second.run();
  ASSERT_GT(second.experts_summed(), 0);
  EXPECT_GT(second.schedules_from_cache(), 0);
  int kept = 0;
  for (const auto& [key, name] : second.chosen_schedules())
    if (moved.count(key) && name == moved.at(key)) ++kept;
  EXPECT_GT(kept, 0) << "no choice ran on the cached cap";
  const Buffer got = second.output("out");
  ASSERT_EQ(got.numel(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got.get(i), want[i], 1e-3 * (1 + std::abs(want[i]))) << i;
}

}  // namespace
}  // namespace luminal::cuda
