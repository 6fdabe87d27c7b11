#pragma once
// Writes small GGUF files (metadata only, no tensors) for tokenizer tests, in the layout
// llama.cpp's gguf writer produces: header, key/value pairs, no tensor infos.
#include <cstdint>
#include <string>
#include <vector>

namespace luminal::test {

class GgufWriter {
 public:
  void add_string(const std::string& key, const std::string& v) {
    this->key(key, kString);
    str(v);
    ++count_;
  }
  void add_u32(const std::string& key, uint32_t v) {
    this->key(key, kU32);
    pod(v);
    ++count_;
  }
  void add_bool(const std::string& key, bool v) {
    this->key(key, kBool);
    pod(static_cast<uint8_t>(v));
    ++count_;
  }
  void add_strings(const std::string& key, const std::vector<std::string>& v) {
    array_header(key, kString, v.size());
    for (const auto& s : v) str(s);
  }
  void add_i32s(const std::string& key, const std::vector<int32_t>& v) {
    array_header(key, kI32, v.size());
    for (int32_t x : v) pod(x);
  }
  void add_f32s(const std::string& key, const std::vector<float>& v) {
    array_header(key, kF32, v.size());
    for (float x : v) pod(x);
  }

  // The whole file.
  std::string bytes() const {
    std::string out = "GGUF";
    auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
    put(uint32_t{3});       // version
    put(uint64_t{0});       // tensors
    put(uint64_t{count_});  // key/value pairs
    out += body_;
    return out;
  }

 private:
  static constexpr uint32_t kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9;
  template <typename T>
  void pod(T v) {
    body_.append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void str(const std::string& s) {
    pod(static_cast<uint64_t>(s.size()));
    body_ += s;
  }
  void key(const std::string& k, uint32_t type) {
    str(k);
    pod(type);
  }
  void array_header(const std::string& k, uint32_t elem, size_t n) {
    key(k, kArray);
    pod(elem);
    pod(static_cast<uint64_t>(n));
    ++count_;
  }
  std::string body_;
  uint64_t count_ = 0;
};

}  // namespace luminal::test
