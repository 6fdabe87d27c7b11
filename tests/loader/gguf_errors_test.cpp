// Broken GGUF files: each failure is a luminal::Error whose message says what is wrong, and no
// corrupt input makes the parser read outside the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "loader/gguf.h"

namespace luminal {
namespace {

const std::string kAllTypes = std::string(LUMINAL_TEST_DATA) + "/gguf/all_types.gguf";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file in the test temp dir holding `bytes`, deleted when this goes out of scope.
struct TempFile {
  std::string path;
  TempFile(const std::vector<uint8_t>& bytes, const std::string& name)
      : path(::testing::TempDir() + "luminal_gguf_" + name + "_" + std::to_string(::getpid()) + ".gguf") {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// Opens `bytes` as a GGUF file and returns the Error message ("" if it opened fine).
std::string open_error(const std::vector<uint8_t>& bytes, const std::string& name) {
  TempFile file(bytes, name);
  try {
    GgufFile::open(file.path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

template <typename T>
void poke(std::vector<uint8_t>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Byte offset of the n_dims field of the tensor info named `name`.
size_t tensor_info_dims_offset(const std::vector<uint8_t>& bytes, const std::string& name) {
  std::vector<uint8_t> needle(8);  // GGUF string: u64 length, then the bytes
  uint64_t len = name.size();
  std::memcpy(needle.data(), &len, 8);
  needle.insert(needle.end(), name.begin(), name.end());
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end()) << name;
  return static_cast<size_t>(it - bytes.begin()) + needle.size();
}

// Where the tensor data section starts: found by locating the first tensor's (random) bytes.
size_t first_tensor_offset(const std::vector<uint8_t>& bytes) {
  GgufFile f = GgufFile::open(kAllTypes);
  const GgufTensor& t = f.tensors().front();
  auto it = std::search(bytes.begin(), bytes.end(), t.data, t.data + t.nbytes);
  EXPECT_NE(it, bytes.end());
  return static_cast<size_t>(it - bytes.begin());
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(GgufErrors, MissingFileNamesThePath) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "/nonexistent/model.gguf")) << e.what();
  }
}

TEST(GgufErrors, BadMagicSaysNotAGgufFile) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  bytes[0] = 'X';
  EXPECT_TRUE(contains(open_error(bytes, "badmagic"), "is not a GGUF file"));
  EXPECT_TRUE(contains(open_error({'{', '"', 'a'}, "tiny"), "is not a GGUF file"));
  EXPECT_TRUE(contains(open_error({}, "empty"), "is not a GGUF file"));
}

TEST(GgufErrors, Version2IsReadLikeVersion3) {
  // v3 only added big-endian support, so a little-endian v2 file has the same layout.
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  poke<uint32_t>(bytes, 4, 2);
  TempFile file(bytes, "v2");
  GgufFile f = GgufFile::open(file.path);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.get_string("general.name"), "luminal gguf test");
  EXPECT_EQ(f.tensors().size(), 13u);
}

TEST(GgufErrors, UnsupportedVersions) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  poke<uint32_t>(bytes, 4, 1);
  EXPECT_TRUE(contains(open_error(bytes, "v1"), "version 1")) << open_error(bytes, "v1");
  poke<uint32_t>(bytes, 4, 4);
  EXPECT_TRUE(contains(open_error(bytes, "v4"), "version 4"));
  poke<uint32_t>(bytes, 4, 0x03000000u);
  EXPECT_TRUE(contains(open_error(bytes, "be"), "big-endian"));
}

TEST(GgufErrors, TensorDataPastEndOfFileNamesTheTensor) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  bytes.resize(bytes.size() - 100);  // cuts into the last tensor, t.q6_k
  std::string msg = open_error(bytes, "truncated_data");
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
  EXPECT_TRUE(contains(msg, "'t.q6_k'")) << msg;
}

TEST(GgufErrors, TensorOffsetPastEndOfFileNamesTheTensor) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  size_t dims = tensor_info_dims_offset(bytes, "t.q4_1");  // n_dims, ne[2], type, offset
  poke<uint64_t>(bytes, dims + 4 + 16 + 4, uint64_t{1} << 40);
  std::string msg = open_error(bytes, "far_offset");
  EXPECT_TRUE(contains(msg, "'t.q4_1'")) << msg;
  EXPECT_TRUE(contains(msg, "past the end")) << msg;
}

TEST(GgufErrors, UnknownTensorTypeNamesTheTensorAndType) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  size_t dims = tensor_info_dims_offset(bytes, "t.q5_0");
  poke<uint32_t>(bytes, dims + 4 + 16, 4);  // type 4 (the retired q4_2)
  std::string msg = open_error(bytes, "unknown_type");
  EXPECT_TRUE(contains(msg, "'t.q5_0'")) << msg;
  EXPECT_TRUE(contains(msg, "unknown ggml type 4")) << msg;
}

TEST(GgufErrors, InnermostDimNotAWholeNumberOfBlocks) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  size_t dims = tensor_info_dims_offset(bytes, "t.q8_0");
  poke<uint64_t>(bytes, dims + 4, 250);  // ne[0]
  std::string msg = open_error(bytes, "bad_ne0");
  EXPECT_TRUE(contains(msg, "'t.q8_0'")) << msg;
  EXPECT_TRUE(contains(msg, "block size 32")) << msg;
}

TEST(GgufErrors, HugeCountsAndLengthsFailCleanly) {
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  std::vector<uint8_t> many_kvs = bytes;
  poke<uint64_t>(many_kvs, 16, uint64_t{1} << 60);
  EXPECT_TRUE(contains(open_error(many_kvs, "many_kvs"), "corrupt"));
  std::vector<uint8_t> long_key = bytes;
  poke<uint64_t>(long_key, 24, ~uint64_t{0});  // length of the first key
  EXPECT_TRUE(contains(open_error(long_key, "long_key"), "truncated or corrupt"));
  std::vector<uint8_t> many_dims = bytes;
  poke<uint32_t>(many_dims, tensor_info_dims_offset(bytes, "t.f32"), 5);
  EXPECT_TRUE(contains(open_error(many_dims, "many_dims"), "dimensions"));
}

TEST(GgufErrors, EveryTruncationIsAnError) {
  // Every prefix that ends before the last tensor's last byte cuts the header, the tensor infos
  // or some tensor's data. (Only the writer's trailing padding may be cut without harm.)
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  GgufFile whole = GgufFile::open(kAllTypes);
  const GgufTensor& first = whole.tensors().front();
  const GgufTensor& last = whole.tensors().back();
  const size_t data_start = first_tensor_offset(bytes);
  const size_t data_end = data_start + static_cast<size_t>(last.data + last.nbytes - first.data);
  ASSERT_LE(data_end, bytes.size());
  for (size_t len = 0; len < data_end; len += (len < data_start ? 1 : 97)) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_NE(open_error(prefix, "prefix"), "") << "a prefix of " << len << " bytes opened";
  }
  std::vector<uint8_t> exact(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(data_end));
  EXPECT_EQ(open_error(exact, "exact"), "");
}

// Reads every metadata value and every tensor byte the file claims to have.
void touch_everything(const GgufFile& f) {
  for (const std::string& key : f.keys()) {
    try {
      std::string type = *f.type_name(key);
      if (type == "string") f.get_string(key);
      else if (type == "array[string]") f.get_string_array(key);
      else if (type.rfind("array[", 0) == 0) f.get_float_array(key);
      else f.get_float(key);
    } catch (const Error&) {
    }
  }
  unsigned sum = 0;
  for (const GgufTensor& t : f.tensors())
    for (size_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
  volatile unsigned sink = sum;  // keeps the reads from being optimized away
  (void)sink;
}

TEST(GgufErrors, RandomCorruptionNeverCrashes) {
  // Overwrite bytes of the header and tensor infos: opening must either succeed or throw Error,
  // and whatever it reports must be readable.
  std::vector<uint8_t> bytes = read_bytes(kAllTypes);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> pos(0, first_tensor_offset(bytes) - 1);
  std::uniform_int_distribution<int> val(0, 255);
  int opened = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> corrupt = bytes;
    for (int k = 0; k < 3; ++k) corrupt[pos(rng)] = static_cast<uint8_t>(val(rng));
    try {
      TempFile file(corrupt, "fuzz");
      GgufFile f = GgufFile::open(file.path);
      touch_everything(f);
      ++opened;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(opened, 0);  // some flips land in values (e.g. tensor bytes' names) and are harmless
}

}  // namespace
}  // namespace luminal
