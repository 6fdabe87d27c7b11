#pragma once
// Test data for tokenizer tests: the xz-compressed tokenizer files in tests/data/tokenizers are
// unpacked once per test process into a temporary folder.
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "tokenizer/tokenizer.h"

namespace luminal::test {

inline std::string tokenizer_data_dir() { return std::string(LUMINAL_TEST_DATA) + "/tokenizers"; }

// Output of a shell command (used for `xz -dc`, so tests need no liblzma).
inline std::string run_command(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), pipe)) > 0;) out.append(buf, n);
  if (pclose(pipe) != 0) throw std::runtime_error("command failed: " + command);
  return out;
}

inline std::string xz_decompress(const std::string& path) { return run_command("xz -dc '" + path + "'"); }

// Per process, so that tests running in parallel do not collide; removed when the process ends
// (temp_dir_cleanup.cpp).
inline std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() / ("luminal_tokenizer_test_" + std::to_string(getpid()));
}

inline std::string write_temp_file(const std::string& name, const std::string& contents) {
  const auto path = temp_dir() / name;
  std::filesystem::create_directories(path.parent_path());
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path.string());
  fwrite(contents.data(), 1, contents.size(), f);
  fclose(f);
  return path.string();
}

// tests/data/tokenizers/<name>/{tokenizer,tokenizer_config}.json.xz unpacked side by side; returns
// the tokenizer.json path.
inline std::string unpacked_tokenizer_json(const std::string& name) {
  const std::string src = tokenizer_data_dir() + "/" + name + "/";
  write_temp_file(name + "/tokenizer_config.json", xz_decompress(src + "tokenizer_config.json.xz"));
  return write_temp_file(name + "/tokenizer.json", xz_decompress(src + "tokenizer.json.xz"));
}

// Loading Gemma's tokenizer takes about a second: tests share one instance per model.
inline const Tokenizer& real_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> loaded;
  auto& slot = loaded[name];
  if (!slot) slot = std::make_unique<Tokenizer>(Tokenizer::from_json_file(unpacked_tokenizer_json(name)));
  return *slot;
}

}  // namespace luminal::test
