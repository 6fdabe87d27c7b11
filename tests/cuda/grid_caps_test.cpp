// The grid caps one generated function is offered on (gen::grid_caps): the gated gate/up
// experts' and the expert sums' schedules, each function on several caps.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cuda/cuda_executor.h"
#include "core/error.h"
#include "cuda/cuda_cases.h"
#include "egraph/moe_experts_case.h"

namespace luminal::cuda {
namespace {

constexpr const char* kEnv = "LUMINAL_TEST_GRID_CAPS";

std::vector<int> caps_of(const char* value) {
  setenv(kEnv, value, 1);
  std::vector<int> caps = gen::grid_caps(kEnv, {7});
  unsetenv(kEnv);
  return caps;
}

TEST(CudaCodegen, GridCapsComeFromTheirSwitchOrTheDefaults) {
  unsetenv(kEnv);
  EXPECT_EQ(gen::grid_caps(kEnv, {1, 2, 4}), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(caps_of("4,2"), (std::vector<int>{4, 2}));
  EXPECT_EQ(caps_of("0"), (std::vector<int>{0}));
  for (const char* bad : {"", "a", "1,,2", "1,-2", "2 ,1", "1,2,3,4,5", "1.5", "99"}) {
    setenv(kEnv, bad, 1);
    try {
      gen::grid_caps(kEnv, {7});
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(kEnv), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("such as"), std::string::npos) << e.what();
    }
    unsetenv(kEnv);
  }
}

// A decode's expert sum offers each schedule's function again on every cap of
// gen::expert_sum_caps() (after the schedules on their own caps, whose order the forced
// variants of the tests count on), and no (function, cap) twice. None by default; ctest runs
// it again with LUMINAL_CUDA_EXPERT_SUM_CAPS=1,2 (tests/CMakeLists.txt).
TEST(CudaCodegen, ExpertSumsOfferTheirSchedulesOnEachGridCap) {
  moetest::MoeExperts c;
  const Graph plan = testing::compiled(c.graph());
  const PlanKernels k = generate_plan_kernels(plan);
  int forms = 0;
  for (const std::optional<NodeKernels>& n : k.per_node) {
    if (!n || !n->expert_sum) continue;
    ++forms;
    const NodeKernels& sum = *n->expert_sum;
    std::vector<Launch> all = sum.launches;
    all.insert(all.end(), sum.alternatives.begin(), sum.alternatives.end());
    const size_t own = std::size(gen::kExpertSumVariants);
    size_t want = own;
    for (int cap : gen::expert_sum_caps())
      for (const gen::ExpertSumVariant& v : gen::kExpertSumVariants) want += cap && cap != v.min_blocks;
    ASSERT_EQ(all.size(), want);
    for (size_t i = 0; i < own; ++i) EXPECT_EQ(all[i].blocks_per_sm, gen::kExpertSumVariants[i].min_blocks) << i;
    std::set<std::pair<std::string, int>> seen;
    for (const Launch& l : all) EXPECT_TRUE(seen.insert({l.function, l.blocks_per_sm}).second) << l.function << " on " << l.blocks_per_sm;
    for (int cap : gen::expert_sum_caps())
      for (size_t i = 0; i < own; ++i)
        if (cap) {
          EXPECT_TRUE(seen.count({all[i].function, cap})) << "schedule " << i << " not on cap " << cap;
        }
  }
  EXPECT_EQ(forms, 1);
}

}  // namespace
}  // namespace luminal::cuda
