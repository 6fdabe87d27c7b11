// Removes the folder where the tests unpacked tokenizer files (tens of MB) when the test binary ends.
#include <gtest/gtest.h>

#include "tokenizer_test_util.h"

namespace luminal::test {
namespace {

class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};

const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

}  // namespace
}  // namespace luminal::test
