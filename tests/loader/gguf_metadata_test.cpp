// GGUF metadata round-trips: values written by the gguf Python package
// (scripts/make_gguf_testdata.py) read back with the right values through every getter.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "loader/gguf.h"

namespace luminal {
namespace {

const std::string kAllTypes = std::string(LUMINAL_TEST_DATA) + "/gguf/all_types.gguf";

TEST(GgufMetadata, HeaderFields) {
  GgufFile f = GgufFile::open(kAllTypes);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.path(), kAllTypes);
}

TEST(GgufMetadata, KeysInFileOrder) {
  GgufFile f = GgufFile::open(kAllTypes);
  std::vector<std::string> keys = f.keys();
  ASSERT_EQ(keys.size(), 25u);
  EXPECT_EQ(keys.front(), "general.architecture");
  EXPECT_EQ(keys[1], "general.name");
  EXPECT_EQ(keys.back(), "test.array_bool");
  EXPECT_TRUE(f.has("test.u8"));
  EXPECT_FALSE(f.has("test.missing"));
}

TEST(GgufMetadata, Strings) {
  GgufFile f = GgufFile::open(kAllTypes);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_string("general.name"), "luminal gguf test");
  EXPECT_EQ(f.get_string("test.string"), "h\u00e9llo w\u00f6rld \u2713");
  EXPECT_EQ(f.get_string("test.empty_string"), "");
  EXPECT_EQ(f.get_string("test.missing"), std::nullopt);
}

TEST(GgufMetadata, IntegersOfEveryWidth) {
  GgufFile f = GgufFile::open(kAllTypes);
  EXPECT_EQ(f.get_int("test.u8"), 200);
  EXPECT_EQ(f.get_int("test.i8"), -100);
  EXPECT_EQ(f.get_int("test.u16"), 60000);
  EXPECT_EQ(f.get_int("test.i16"), -30000);
  EXPECT_EQ(f.get_int("test.u32"), 4000000000LL);
  EXPECT_EQ(f.get_int("test.i32"), -2000000000LL);
  EXPECT_EQ(f.get_int("test.u64"), (1LL << 40) + 3);
  EXPECT_EQ(f.get_int("test.i64"), -(1LL << 62) - 7);
  EXPECT_EQ(f.get_int("test.bool_true"), 1);
  EXPECT_EQ(f.get_int("test.missing"), std::nullopt);
}

TEST(GgufMetadata, U64BeyondInt64IsAnErrorForGetIntButReadsAsFloat) {
  GgufFile f = GgufFile::open(kAllTypes);
  try {
    f.get_int("test.u64_huge");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test.u64_huge"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f.get_float("test.u64_huge"), 9223372036854775813.0);
}

TEST(GgufMetadata, FloatsAndBools) {
  GgufFile f = GgufFile::open(kAllTypes);
  EXPECT_EQ(f.get_float("test.f32"), static_cast<double>(3.14159f));
  EXPECT_EQ(f.get_float("test.f64"), 2.718281828459045);
  EXPECT_EQ(f.get_float("test.i16"), -30000.0);  // integers widen to float
  EXPECT_EQ(f.get_bool("test.bool_true"), true);
  EXPECT_EQ(f.get_bool("test.bool_false"), false);
  EXPECT_EQ(f.get_bool("test.missing"), std::nullopt);
}

TEST(GgufMetadata, Arrays) {
  GgufFile f = GgufFile::open(kAllTypes);
  EXPECT_EQ(f.get_string_array("test.array_str"), (std::vector<std::string>{"a", "bc", "", "\u00fcn\u00ef"}));
  EXPECT_EQ(f.get_int_array("test.array_i32"), (std::vector<int64_t>{1, -2, 2147483647}));
  EXPECT_EQ(f.get_int_array("test.array_u8"), (std::vector<int64_t>{0, 7, 255}));
  EXPECT_EQ(f.get_int_array("test.array_u64"), (std::vector<int64_t>{0, 1LL << 40}));
  EXPECT_EQ(f.get_int_array("test.array_i64"), (std::vector<int64_t>{-(1LL << 50), 5}));
  EXPECT_EQ(f.get_int_array("test.array_bool"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f.get_float_array("test.array_f32"),
            (std::vector<double>{0.5, -1.25, static_cast<double>(1e-3f)}));
  EXPECT_EQ(f.get_float_array("test.array_f64"), (std::vector<double>{1e300, -0.1}));
  EXPECT_EQ(f.get_float_array("test.array_i32"), (std::vector<double>{1, -2, 2147483647}));
  EXPECT_TRUE(f.get_string_array("test.missing").empty());
  EXPECT_TRUE(f.get_int_array("test.missing").empty());
  EXPECT_TRUE(f.get_float_array("test.missing").empty());
}

TEST(GgufMetadata, TypeNames) {
  GgufFile f = GgufFile::open(kAllTypes);
  EXPECT_EQ(f.type_name("test.u32"), "u32");
  EXPECT_EQ(f.type_name("test.f64"), "f64");
  EXPECT_EQ(f.type_name("test.array_str"), "array[string]");
  EXPECT_EQ(f.type_name("test.missing"), std::nullopt);
}

// Reading a key with the wrong getter must fail loudly (naming the key and the right getter),
// never reinterpret the bytes.
void expect_type_error(const std::function<void()>& read, const std::string& key, const std::string& hint) {
  try {
    read();
    FAIL() << "expected Error reading " << key;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
    EXPECT_NE(msg.find(hint), std::string::npos) << msg;
  }
}

TEST(GgufMetadata, WrongTypeIsAnError) {
  GgufFile f = GgufFile::open(kAllTypes);
  expect_type_error([&] { f.get_string_array("test.array_i32"); }, "test.array_i32", "get_int_array");
  expect_type_error([&] { f.get_int_array("test.array_str"); }, "test.array_str", "get_string_array");
  expect_type_error([&] { f.get_int_array("test.array_f32"); }, "test.array_f32", "get_float_array");
  expect_type_error([&] { f.get_float_array("test.array_str"); }, "test.array_str", "get_string_array");
  expect_type_error([&] { f.get_string_array("test.string"); }, "test.string", "get_string");
  expect_type_error([&] { f.get_string("test.u32"); }, "test.u32", "get_int");
  expect_type_error([&] { f.get_int("test.f32"); }, "test.f32", "get_float");
  expect_type_error([&] { f.get_int("test.array_i32"); }, "test.array_i32", "get_int_array");
  expect_type_error([&] { f.get_float("test.string"); }, "test.string", "get_string");
  expect_type_error([&] { f.get_bool("test.f64"); }, "test.f64", "get_float");
}

TEST(GgufMetadata, CustomAlignment) {
  GgufFile f = GgufFile::open(std::string(LUMINAL_TEST_DATA) + "/gguf/aligned64.gguf");
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.get_int("general.alignment"), 64);
}

}  // namespace
}  // namespace luminal
