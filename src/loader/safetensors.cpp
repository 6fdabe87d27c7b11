#include "loader/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace luminal {

using nlohmann::json;

int64_t SafeTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static std::optional<DType> compute_dtype(const std::string& s) {
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "I32") return DType::I32;
  if (s == "BOOL") return DType::Bool;
  return std::nullopt;
}

static size_t element_size(const std::string& s, const std::string& where) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(s);
  if (it == sizes.end()) throw Error(where + ": unknown safetensors dtype '" + s + "'");
  return it->second;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.file_ = MappedFile::open(path);
  const uint8_t* p = f.file_.data();
  size_t size = f.file_.size();
  if (size < 8) throw Error("'" + path + "' is not a safetensors file: it is only " + std::to_string(size) + " bytes");
  uint64_t header_len = 0;
  std::memcpy(&header_len, p, 8);  // little-endian on every machine luminal runs on
  if (header_len > size - 8)
    throw Error("'" + path + "' is truncated or not a safetensors file: its header claims " +
                std::to_string(header_len) + " bytes but the file has " + std::to_string(size - 8) + " after the length");
  json header;
  try {
    header = json::parse(p + 8, p + 8 + header_len);
  } catch (const json::exception& e) {
    throw Error("'" + path + "': the safetensors header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error("'" + path + "': the safetensors header is not a JSON object");
  const uint8_t* data = p + 8 + header_len;
  size_t data_size = size - 8 - header_len;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (info.is_object())
        for (auto& [k, v] : info.items())
          if (v.is_string()) f.metadata_[k] = v.get<std::string>();
      continue;
    }
    std::string where = "'" + path + "', tensor '" + name + "'";
    try {
      SafeTensor t;
      t.name = name;
      t.file = path;
      t.dtype_name = info.at("dtype").get<std::string>();
      t.dtype = compute_dtype(t.dtype_name);
      t.shape = info.at("shape").get<std::vector<int64_t>>();
      auto offsets = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1]) throw Error(where + ": bad data_offsets");
      if (offsets[1] > data_size)
        throw Error(where + ": data ends at byte " + std::to_string(offsets[1]) + " but the file holds only " +
                    std::to_string(data_size) + " data bytes (the file is truncated: download it again)");
      size_t want = static_cast<size_t>(t.numel()) * element_size(t.dtype_name, where);
      if (offsets[1] - offsets[0] != want)
        throw Error(where + ": " + std::to_string(offsets[1] - offsets[0]) + " bytes for shape of " +
                    std::to_string(t.numel()) + " " + t.dtype_name + " elements (expected " + std::to_string(want) + ")");
      t.data = data + offsets[0];
      t.nbytes = want;
      f.tensors_.push_back(std::move(t));
    } catch (const json::exception& e) {
      throw Error(where + ": malformed header entry (" + e.what() + ")");
    }
  }
  return f;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& path) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint c;
  c.where_ = path;
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    fs::path index = fs::path(path) / "model.safetensors.index.json";
    fs::path single = fs::path(path) / "model.safetensors";
    if (fs::exists(index)) {
      std::ifstream in(index);
      json j;
      try {
        j = json::parse(in);
      } catch (const json::exception& e) {
        throw Error("'" + index.string() + "' is not valid JSON (" + e.what() + ")");
      }
      if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw Error("'" + index.string() + "' has no \"weight_map\" object");
      std::map<std::string, bool> seen;
      for (auto& [name, file] : j["weight_map"].items()) {
        std::string f = file.get<std::string>();
        if (!seen[f]) files.push_back((fs::path(path) / f).string());
        seen[f] = true;
      }
      for (const std::string& f : files)
        if (!fs::exists(f)) throw Error("shard '" + f + "' listed in '" + index.string() + "' is missing");
    } else if (fs::exists(single)) {
      files.push_back(single.string());
    } else {
      throw Error("'" + path + "' holds no model.safetensors or model.safetensors.index.json");
    }
  } else if (fs::exists(path)) {
    files.push_back(path);
  } else {
    throw Error("checkpoint '" + path + "' does not exist");
  }
  for (const std::string& f : files) c.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(f)));
  for (const auto& file : c.files_)
    for (const SafeTensor& t : file->tensors()) c.by_name_[t.name] = &t;
  return c;
}

const SafeTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const SafeTensor& SafetensorsCheckpoint::get(const std::string& name) const {
  const SafeTensor* t = find(name);
  if (!t) throw Error("tensor '" + name + "' is missing from the checkpoint '" + where_ + "'");
  return *t;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> r;
  for (auto& [k, v] : by_name_) r.push_back(k);
  return r;
}

size_t SafetensorsCheckpoint::total_bytes() const {
  size_t n = 0;
  for (auto& [k, v] : by_name_) n += v->nbytes;
  return n;
}

}  // namespace luminal
