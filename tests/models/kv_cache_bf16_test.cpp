// A bf16 KV cache (ModelOptions::kv_dtype, --kv-cache bf16): the cpu backend's kernels read the
// cache's bf16 rows in place, so they are checked against the reference interpreter running the
// same graph (which rounds the same keys and values), step by step through prefill and decode;
// the rounding itself keeps the logits near the f32 cache's; it takes half the memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/fixture.h"
#include "models/language_model.h"

namespace luminal {
namespace {

LanguageModel load(const std::string& name, const std::string& backend, DType kv) {
  ModelOptions o;
  o.context = 64;
  o.backend = backend;
  o.kv_dtype = kv;
  return LanguageModel::load(fixtures::model_dir(name), o);
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst;
}

// Prefill (the prompt's rows: the GEMM paths) and then single tokens (decode's short rows), each
// step's last logits from the cpu backend against the reference, both with the bf16 cache. Within
// the fixtures' 1e-3, not the f32 cache's 1e-4: the two compute each key in a different order,
// and a key within 1e-7 of a bf16 rounding boundary then rounds one bf16 step apart (gemma3-tiny:
// 3.4e-4; 1e-4 with the f32 cache).

class KvCacheBf16 : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCacheBf16, CpuMatchesTheReferenceStepByStep) {
  fixtures::Reference ref = fixtures::load_reference(GetParam());
  LanguageModel cpu = load(GetParam(), "cpu", DType::BF16), exact = load(GetParam(), "reference", DType::BF16);
  std::vector<int32_t> ids = ref.input_ids;
  for (int step = 0; step < 6; ++step) {
    std::vector<float> a = cpu.step(ids), b = exact.step(ids);
    EXPECT_LE(max_difference(a, b), 1e-3) << GetParam() << " step " << step;
    ids = {fixtures::argmax(b.data(), b.size())};
  }
}

// The rounding keeps the logits near the f32 cache's (bf16 keeps 8 bits: about 4e-3 of each key
// and value) and actually happens (the two caches differ).
TEST_P(KvCacheBf16, StaysNearTheF32Cache) {
  fixtures::Reference ref = fixtures::load_reference(GetParam());
  LanguageModel narrow = load(GetParam(), "cpu", DType::BF16), wide = load(GetParam(), "cpu", DType::F32);
  EXPECT_EQ(narrow.cache_bytes() * 2, wide.cache_bytes());
  std::vector<int32_t> ids = ref.input_ids;
  double worst = 0;
  for (int step = 0; step < 6; ++step) {
    std::vector<float> a = narrow.step(ids), b = wide.step(ids);
    worst = std::max(worst, max_difference(a, b));
    ids = {fixtures::argmax(b.data(), b.size())};
  }
  EXPECT_GT(worst, 0.0) << GetParam();
  EXPECT_LE(worst, 5e-2) << GetParam();
  RecordProperty("max_abs_difference", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Families, KvCacheBf16, ::testing::Values("llama-tiny", "qwen3-tiny", "gemma3-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// A cache type other than f32 or bf16 is an error naming both; so is a bf16 cache on cuda.
TEST(KvCacheBf16Errors, NamedTypesOnly) {
  try {
    ModelOptions::kv_dtype_named("f16");
    FAIL() << "f16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the KV cache must be f32 or bf16, got 'f16'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ModelOptions::kv_dtype_named("bf16"), DType::BF16);
  try {
    load("llama-tiny", "cuda", DType::BF16);
    FAIL() << "a bf16 cache loaded on cuda";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache f32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace luminal
