// Dequantization matches the gguf Python package's (scripts/make_gguf_testdata.py stored its
// output in tests/data/gguf/ref/) bit for bit, for every supported type.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/dequant.h"
#include "loader/gguf.h"

namespace luminal {
namespace {

const std::string kData = std::string(LUMINAL_TEST_DATA) + "/gguf/";

std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_FALSE(bytes.empty()) << "missing " << path;
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

class DequantMatchesGguf : public ::testing::TestWithParam<const char*> {};

TEST_P(DequantMatchesGguf, Bitwise) {
  GgufFile f = GgufFile::open(kData + "all_types.gguf");
  const std::string name = GetParam();
  const GgufTensor* t = f.find_tensor(name);
  ASSERT_NE(t, nullptr);
  std::vector<float> ref = read_f32(kData + "ref/" + name + ".f32");
  std::vector<float> got = dequantize(*t);
  ASSERT_EQ(got.size(), ref.size());
  int mismatches = 0;
  for (size_t i = 0; i < ref.size() && mismatches < 5; ++i)
    if (bits(got[i]) != bits(ref[i])) {
      ++mismatches;
      ADD_FAILURE() << name << "[" << i << "]: got " << got[i] << " (0x" << std::hex << bits(got[i])
                    << "), gguf says " << ref[i] << " (0x" << bits(ref[i]) << std::dec << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantMatchesGguf,
                         ::testing::Values("t.f32", "t.f16", "t.bf16", "t.q4_0", "t.q4_1", "t.q5_0", "t.q5_1",
                                           "t.q8_0", "t.q2_k", "t.q3_k", "t.q4_k", "t.q5_k", "t.q6_k"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s.substr(2);
                         });

TEST(Dequant, RowsOfATensorDecodeIndependently) {
  // dequantize_row on one row at an arbitrary (odd) address gives that row of the whole tensor.
  GgufFile f = GgufFile::open(kData + "all_types.gguf");
  for (const GgufTensor& t : f.tensors()) {
    SCOPED_TRACE(t.name);
    std::vector<float> whole = dequantize(t);
    int64_t row_len = t.shape.back();
    size_t row_bytes = ggml_row_bytes(t.type, row_len);
    std::vector<uint8_t> unaligned(row_bytes + 1);
    std::memcpy(unaligned.data() + 1, t.data + row_bytes, row_bytes);  // second row
    std::vector<float> row(static_cast<size_t>(row_len));
    dequantize_row(t.type, unaligned.data() + 1, row.data(), row_len);
    for (int64_t i = 0; i < row_len; ++i) ASSERT_EQ(bits(row[i]), bits(whole[row_len + i])) << i;
  }
}

TEST(Dequant, SizesMatchGgml) {
  EXPECT_EQ(ggml_block_size(GgmlType::Q4_0), 32);
  EXPECT_EQ(ggml_block_size(GgmlType::Q6_K), 256);
  EXPECT_EQ(ggml_type_size(GgmlType::Q4_K), 144u);
  EXPECT_EQ(ggml_type_size(GgmlType::Q8_K), 292u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F16, 7), 14u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q5_1, 64), 48u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q3_K, 512), 220u);
}

TEST(Dequant, PartialBlockIsAnError) {
  std::vector<uint8_t> src(256);
  std::vector<float> dst(64);
  try {
    dequantize_row(GgmlType::Q4_0, src.data(), dst.data(), 48);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ggml_row_bytes(GgmlType::Q4_K, 100), Error);
}

TEST(Dequant, UnsupportedTypeNamesIt) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(256);
  EXPECT_FALSE(can_dequantize(GgmlType::IQ2_XXS));
  EXPECT_TRUE(can_dequantize(GgmlType::Q6_K));
  try {
    dequantize_row(GgmlType::IQ2_XXS, src.data(), dst.data(), 256);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iq2_xxs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace luminal
