// Bad model input gives an Error that names the problem, never a crash or a wrong answer.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/fixture.h"
#include "models/generate.h"
#include "models/language_model.h"

namespace luminal {
namespace {

namespace fs = std::filesystem;

// A scratch copy of the llama fixture that a test may break.
class BrokenModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("luminal_broken_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const char* f : {"config.json", "model.safetensors"})
      fs::copy_file(fixtures::model_dir("llama-tiny") + "/" + f, dir_ / f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void edit_config(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(dir_ / "config.json"));
    edit(j);
    std::ofstream(dir_ / "config.json") << j.dump();
  }

  std::string load_error() {
    try {
      ModelOptions o;
      o.context = 32;
      LanguageModel::load(dir_.string(), o);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }

  fs::path dir_;
};

TEST_F(BrokenModel, MissingConfigSaysWhatIsNeeded) {
  fs::remove(dir_ / "config.json");
  EXPECT_NE(load_error().find("has no config.json"), std::string::npos) << load_error();
}

TEST_F(BrokenModel, UnknownArchitectureListsTheSupportedOnes) {
  edit_config([](nlohmann::json& j) { j["model_type"] = "gpt_neox"; });
  std::string e = load_error();
  EXPECT_NE(e.find("'gpt_neox' is not supported"), std::string::npos) << e;
  EXPECT_NE(e.find("llama, qwen3, gemma3_text, qwen3_moe, mixtral, gemma4_text"), std::string::npos) << e;
}

TEST_F(BrokenModel, WrongShapeNamesTheTensor) {
  edit_config([](nlohmann::json& j) { j["intermediate_size"] = 96; });
  std::string e = load_error();
  EXPECT_NE(e.find("mlp.gate_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[128, 64]"), std::string::npos) << e;
}

TEST_F(BrokenModel, MissingTensorIsNamed) {
  edit_config([](nlohmann::json& j) { j["num_hidden_layers"] = 3; });  // the file has 2 layers
  std::string e = load_error();
  EXPECT_NE(e.find("'model.layers.2."), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST_F(BrokenModel, TruncatedWeightsFileIsReported) {
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 1000);
  std::string e = load_error();
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
}

TEST_F(BrokenModel, MalformedConfigIsReported) {
  std::ofstream(dir_ / "config.json") << "{\"model_type\": \"llama\",";
  EXPECT_NE(load_error().find("not valid JSON"), std::string::npos) << load_error();
}

TEST(ModelInput, PromptOverTheContextIsAnError) {
  ModelOptions o;
  o.context = 8;
  LanguageModel m = LanguageModel::load(fixtures::model_dir("llama-tiny"), o);
  std::vector<int32_t> prompt(9, 5);
  try {
    generate(m, prompt, GenerateOptions{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.step({600}), Error);  // outside the 512-token vocabulary
}

TEST(ModelInput, ContextLongerThanTheModelAllowsIsAnError) {
  ModelOptions o;
  o.context = 100000;
  EXPECT_THROW(LanguageModel::load(fixtures::model_dir("llama-tiny"), o), Error);
}

}  // namespace
}  // namespace luminal
