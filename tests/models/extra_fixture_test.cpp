// The extra Hugging Face fixtures made by scripts/make_model_fixtures.py with transformers: a
// Mixtral model in both tensor layouts, the Qwen3-MoE fixture in the per-expert (Qwen3-30B-A3B)
// layout, a sharded checkpoint with model.safetensors.index.json, and transformers-4 style
// configs (rope_theta / rope_scaling / rope_local_base_freq / sliding_window_pattern /
// torch_dtype). Each must reproduce the logits and greedy tokens transformers produced.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "models/fixture.h"
#include "models/language_model.h"

namespace luminal {
namespace {

using fixtures::Reference;

const std::vector<std::string>& extra_fixture_names() {
  static const std::vector<std::string> names = {
      "mixtral-tiny",        "mixtral-tiny-legacy",  "qwen3-moe-tiny-legacy",
      "llama-tiny-sharded",  "llama-tiny-v4config",  "gemma3-tiny-v4config",
  };
  return names;
}

class ExtraFixtureModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ExtraFixtureModel, PrefillLogitsMatchTransformers) {
  Reference ref = fixtures::load_reference(GetParam());
  ModelOptions o;
  o.all_logits = true;
  o.context = 64;
  LanguageModel m = LanguageModel::load(fixtures::model_dir(GetParam()), o);
  std::vector<float> logits = m.step(ref.input_ids);
  size_t vocab = static_cast<size_t>(m.config().vocab);
  ASSERT_EQ(logits.size(), ref.input_ids.size() * vocab);
  ASSERT_EQ(ref.logits.size(), ref.input_ids.size());
  double worst = 0;
  size_t worst_pos = 0;
  for (size_t p = 0; p < ref.logits.size(); ++p) {
    ASSERT_EQ(ref.logits[p].size(), vocab);
    for (size_t v = 0; v < vocab; ++v) {
      double d = std::abs(double(logits[p * vocab + v]) - ref.logits[p][v]);
      if (d > worst) {
        worst = d;
        worst_pos = p;
      }
    }
  }
  EXPECT_LE(worst, 1e-3) << GetParam() << ": worst at prompt position " << worst_pos;
  RecordProperty("max_abs_error", std::to_string(worst));
}

TEST_P(ExtraFixtureModel, GreedyDecodeWithKvCacheMatchesTransformers) {
  Reference ref = fixtures::load_reference(GetParam());
  ModelOptions o;
  o.context = 64;
  LanguageModel m = LanguageModel::load(fixtures::model_dir(GetParam()), o);
  EXPECT_EQ(fixtures::greedy_decode(m, ref.input_ids, ref.greedy_new_tokens.size()), ref.greedy_new_tokens) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(ExtraFolders, ExtraFixtureModel, ::testing::ValuesIn(extra_fixture_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace luminal
