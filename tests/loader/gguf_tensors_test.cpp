// GGUF tensor infos: names, torch-order shapes, types, sizes and data placement match what the
// gguf Python package wrote (scripts/make_gguf_testdata.py).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "loader/gguf.h"

namespace luminal {
namespace {

const std::string kData = std::string(LUMINAL_TEST_DATA) + "/gguf/";

TEST(GgufTensors, NamesTypesShapesInFileOrder) {
  GgufFile f = GgufFile::open(kData + "all_types.gguf");
  struct Expected {
    const char* name;
    GgmlType type;
    std::vector<int64_t> shape;
    size_t nbytes;
  };
  const std::vector<Expected> expected = {
      {"t.f32", GgmlType::F32, {2, 3, 8}, 192},       {"t.f16", GgmlType::F16, {4, 64}, 512},
      {"t.bf16", GgmlType::BF16, {4, 256}, 2048},     {"t.q4_0", GgmlType::Q4_0, {4, 256}, 4 * 8 * 18},
      {"t.q4_1", GgmlType::Q4_1, {4, 256}, 4 * 8 * 20}, {"t.q5_0", GgmlType::Q5_0, {4, 256}, 4 * 8 * 22},
      {"t.q5_1", GgmlType::Q5_1, {4, 256}, 4 * 8 * 24}, {"t.q8_0", GgmlType::Q8_0, {4, 256}, 4 * 8 * 34},
      {"t.q2_k", GgmlType::Q2_K, {3, 512}, 6 * 84},   {"t.q3_k", GgmlType::Q3_K, {3, 512}, 6 * 110},
      {"t.q4_k", GgmlType::Q4_K, {3, 512}, 6 * 144},  {"t.q5_k", GgmlType::Q5_K, {3, 512}, 6 * 176},
      {"t.q6_k", GgmlType::Q6_K, {3, 512}, 6 * 210},
  };
  ASSERT_EQ(f.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(t.name, expected[i].name);
    EXPECT_EQ(t.type, expected[i].type);
    EXPECT_EQ(t.shape, expected[i].shape);
    EXPECT_EQ(t.nbytes, expected[i].nbytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % f.alignment(), 0u);  // mapping is page-aligned
  }
  EXPECT_EQ(f.tensors()[0].numel(), 48);
}

TEST(GgufTensors, FindTensor) {
  GgufFile f = GgufFile::open(kData + "all_types.gguf");
  const GgufTensor* t = f.find_tensor("t.q6_k");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, GgmlType::Q6_K);
  EXPECT_EQ(f.find_tensor("t.nope"), nullptr);
}

TEST(GgufTensors, DataPointsAtTheTensorBytes) {
  // aligned64.gguf holds a = arange(5) and b = -arange(6).reshape(2, 3) as f32, 64-byte aligned.
  GgufFile f = GgufFile::open(kData + "aligned64.gguf");
  const GgufTensor* a = f.find_tensor("a");
  const GgufTensor* b = f.find_tensor("b");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{5}));
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->data - a->data, 64);  // a's 20 bytes padded to the 64-byte alignment
  float va[5], vb[6];
  std::memcpy(va, a->data, sizeof va);
  std::memcpy(vb, b->data, sizeof vb);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(va[i], static_cast<float>(i));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(vb[i], -static_cast<float>(i));
}

TEST(GgufTensors, MovedFileKeepsDataValid) {
  GgufFile f = GgufFile::open(kData + "aligned64.gguf");
  const uint8_t* data = f.find_tensor("b")->data;
  GgufFile g = std::move(f);
  EXPECT_EQ(g.find_tensor("b")->data, data);
  float v;
  std::memcpy(&v, data + 4, 4);
  EXPECT_EQ(v, -1.0f);
}

TEST(GgufTensors, TypeNames) {
  EXPECT_EQ(ggml_type_name(GgmlType::Q4_K), "q4_K");
  EXPECT_EQ(ggml_type_name(GgmlType::BF16), "bf16");
  EXPECT_EQ(ggml_type_name(static_cast<GgmlType>(4)), "type4");
  EXPECT_FALSE(is_known_ggml_type(4));
  EXPECT_TRUE(is_known_ggml_type(30));
}

}  // namespace
}  // namespace luminal
