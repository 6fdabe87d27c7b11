// The timeline's accounting, on records made by hand (no GPU needed).
#include <gtest/gtest.h>

#include "backends/cuda/kernel_timeline.h"

namespace luminal::cuda {
namespace {

KernelRecord k(const std::string& name, uint64_t start, uint64_t end) {
  KernelRecord r;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  return r;
}

TEST(KernelTimeline, KindIsTheGeneratedNameWithoutPrefixAndHash) {
  EXPECT_EQ(kernel_kind("lm_linear_group_3fa9c2"), "linear_group");
  EXPECT_EQ(kernel_kind("lm_Add_17"), "Add");
  EXPECT_EQ(kernel_kind("sm90_xmma_gemm_bf16bf16"), "sm90_xmma_gemm_bf16bf16");
}

TEST(KernelTimeline, OverlappedKernelsAddOnlyWhatEndsLater) {
  // A 0-10, B 8-15 (overlaps A by 2: adds 5), C 12-14 (inside B: adds 0), gap, D 20-30 (adds 10).
  // Given out of order: the analysis sorts by start.
  std::vector<std::vector<KernelRecord>> steps{
      {k("lm_gemv_1", 20000, 30000), k("lm_norm_2", 0, 10000), k("lm_gemv_3", 8000, 15000), k("lm_add_4", 12000, 14000)}};
  const TimelineReport r = analyse_timeline(steps);
  ASSERT_EQ(r.steps.size(), 1u);
  EXPECT_EQ(r.steps[0].kernels, 4);
  EXPECT_DOUBLE_EQ(r.steps[0].span_us, 30.0);
  EXPECT_DOUBLE_EQ(r.steps[0].busy_us, 25.0);
  EXPECT_DOUBLE_EQ(r.steps[0].idle_us, 5.0);
  ASSERT_EQ(r.sequence.size(), 4u);
  EXPECT_EQ(r.sequence[0].kind, "norm");
  EXPECT_DOUBLE_EQ(r.sequence[0].adds_us, 10.0);
  EXPECT_DOUBLE_EQ(r.sequence[1].adds_us, 5.0);
  EXPECT_DOUBLE_EQ(r.sequence[1].us, 7.0);
  EXPECT_DOUBLE_EQ(r.sequence[2].adds_us, 0.0);
  EXPECT_DOUBLE_EQ(r.sequence[3].adds_us, 10.0);
  // Kinds: gemv adds 15 over two kernels, norm 10, add 0; most first.
  ASSERT_EQ(r.kinds.size(), 3u);
  EXPECT_EQ(r.kinds[0].kind, "gemv");
  EXPECT_DOUBLE_EQ(r.kinds[0].count, 2.0);
  EXPECT_DOUBLE_EQ(r.kinds[0].adds_us, 15.0);
  EXPECT_EQ(r.kinds[2].kind, "add");
}

TEST(KernelTimeline, KindsAreAveragedOverStepsAndTheListingIsTheMedianStep) {
  std::vector<std::vector<KernelRecord>> steps{
      {k("lm_a_1", 0, 10000)},                          // span 10
      {},                                               // skipped
      {k("lm_a_1", 0, 30000)},                          // span 30
      {k("lm_a_1", 0, 20000), k("lm_b_1", 20000, 21000)}  // span 21: the median
  };
  const TimelineReport r = analyse_timeline(steps);
  ASSERT_EQ(r.steps.size(), 3u);
  ASSERT_EQ(r.kinds.size(), 2u);
  EXPECT_DOUBLE_EQ(r.kinds[0].adds_us, 20.0);
  EXPECT_NEAR(r.kinds[1].count, 1.0 / 3.0, 1e-12);
  ASSERT_EQ(r.sequence.size(), 2u);
  EXPECT_DOUBLE_EQ(r.sequence[0].us, 20.0);
  EXPECT_NE(format_timeline(r, 1).find("a "), std::string::npos);
}

}  // namespace
}  // namespace luminal::cuda
