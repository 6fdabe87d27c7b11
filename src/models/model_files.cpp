#include "models/model_files.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loader/gguf.h"
#include "models/gguf_model.h"

namespace luminal {

namespace fs = std::filesystem;

bool is_gguf_path(const std::string& path) {
  return fs::is_regular_file(path) && path.size() > 5 && path.substr(path.size() - 5) == ".gguf";
}

std::optional<Tokenizer> open_tokenizer(const std::string& path) {
  if (is_gguf_path(path)) return Tokenizer::from_gguf(GgufFile::open(path));
  if (fs::is_directory(path)) {
    fs::path t = fs::path(path) / "tokenizer.json";
    if (!fs::exists(t)) return std::nullopt;
    return Tokenizer::from_json_file(t.string());
  }
  if (!fs::exists(path)) throw Error("tokenizer '" + path + "' does not exist");
  return Tokenizer::from_json_file(path);
}

// generation_config.json's eos ids are the ones generate() stops on.
static void read_generation_config(const fs::path& dir, ModelConfig& c) {
  fs::path p = dir / "generation_config.json";
  if (!fs::exists(p)) return;
  std::ifstream in(p);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error("'" + p.string() + "' is not valid JSON");
  if (j.contains("eos_token_id")) {
    const auto& e = j["eos_token_id"];
    std::vector<int32_t> ids;
    if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
    if (e.is_array())
      for (const auto& x : e)
        if (x.is_number_integer()) ids.push_back(x.get<int32_t>());
    if (!ids.empty()) c.eos_ids = ids;
  }
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int32_t>();
}

ModelFiles open_model_files(const std::string& path) {
  ModelFiles f;
  if (!fs::exists(path)) throw Error("model path '" + path + "' does not exist");
  if (is_gguf_path(path)) {
    GgufFile g = GgufFile::open(path);
    f.config = config_from_gguf(g);
    f.weights = open_gguf_weights(path, f.config);
    f.is_gguf = true;
    return f;
  }
  if (!fs::is_directory(path))
    throw Error("model path '" + path + "' is neither a folder (config.json + safetensors) nor a .gguf file");
  fs::path config = fs::path(path) / "config.json";
  if (!fs::exists(config))
    throw Error("'" + path + "' has no config.json: a Hugging Face model folder needs config.json next to its safetensors");
  f.config = ModelConfig::from_json_file(config.string());
  read_generation_config(path, f.config);
  f.weights = open_safetensors_weights(path);
  return f;
}

}  // namespace luminal
