// Sampling against distributions computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "models/sampler.h"

namespace luminal {
namespace {

std::map<int32_t, int> histogram(SamplingOptions o, const std::vector<float>& logits, int n,
                                 const std::vector<int32_t>& history = {}) {
  Sampler s(o);
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.next(logits, history)];
  return h;
}

TEST(Sampler, GreedyTakesTheArgmax) {
  EXPECT_EQ(Sampler({}).next({0.1f, 3.0f, -1.0f, 2.9f}, {}), 1);
}

TEST(Sampler, TemperatureSamplingFollowsTheSoftmax) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.seed = 7;
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  auto h = histogram(o, logits, 20000);
  EXPECT_NEAR(h[1] / 20000.0, 0.75, 0.015);
}

TEST(Sampler, TopKKeepsOnlyTheKBest) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_k = 2;
  auto h = histogram(o, {1.0f, 5.0f, 4.9f, 0.5f}, 2000);
  EXPECT_EQ(h.count(0) + h.count(3), 0u);
  EXPECT_GT(h[1], 0);
  EXPECT_GT(h[2], 0);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_p = 0.7;
  // p = 0.6, 0.3, 0.1: 0.6 < 0.7 so the second token is needed too; the third never appears.
  auto h = histogram(o, {std::log(0.6f), std::log(0.3f), std::log(0.1f)}, 5000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_NEAR(h[0] / 5000.0, 2.0 / 3.0, 0.03);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingOptions o;
  o.temperature = 1.0;
  o.min_p = 0.2;
  // p = 0.7, 0.2, 0.1; the cut is 0.2 * 0.7 = 0.14, so only the last token goes.
  auto h = histogram(o, {std::log(0.7f), std::log(0.2f), std::log(0.1f)}, 3000);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_GT(h[1], 0);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingOptions o;
  o.repetition_penalty = 2.0;
  // Token 0 (logit 3) seen: 1.5 < 2.0, so greedy moves to token 1.
  EXPECT_EQ(Sampler(o).next({3.0f, 2.0f}, {0}), 1);
  // Token 1 negative and seen: -0.2 -> -0.4, token 0 at -0.3 wins.
  EXPECT_EQ(Sampler(o).next({-0.3f, -0.2f}, {1}), 0);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingOptions o;
  o.temperature = 0.8;
  o.seed = 42;
  std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  Sampler a(o), b(o);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.next(logits, {}), b.next(logits, {}));
}

TEST(Sampler, BadOptionsAreErrors) {
  SamplingOptions o;
  o.top_p = 0;
  EXPECT_THROW(Sampler{o}, Error);
  o = {};
  o.temperature = -1;
  EXPECT_THROW(Sampler{o}, Error);
}

}  // namespace
}  // namespace luminal
