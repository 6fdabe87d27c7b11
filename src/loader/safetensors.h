#pragma once
// safetensors checkpoints (https://github.com/huggingface/safetensors): an 8-byte header length,
// a JSON header of {name: {dtype, shape, data_offsets}}, then the raw little-endian data. Files
// are memory-mapped; a folder may hold one file or shards listed in model.safetensors.index.json.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "loader/mapped_file.h"

namespace luminal {

struct SafeTensor {
  std::string name;
  std::string dtype_name;        // as written in the file: "BF16", "F32", "I64", ...
  std::optional<DType> dtype;    // set for the dtypes luminal computes with (F32, F16, BF16, I32, BOOL)
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;              // the file it lives in, for error messages
  int64_t numel() const;
};

class SafetensorsFile {
 public:
  // Errors name the file: missing, too short, bad header JSON, offsets past the end (truncated).
  static SafetensorsFile open(const std::string& path);
  const std::vector<SafeTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile file_;
  std::vector<SafeTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a model folder (or of one .safetensors file), by name.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open(const std::string& path);  // a folder or a .safetensors file
  const SafeTensor* find(const std::string& name) const;
  const SafeTensor& get(const std::string& name) const;  // Error naming the tensor and the folder
  std::vector<std::string> names() const;
  size_t total_bytes() const;

 private:
  std::string where_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafeTensor*> by_name_;
};

}  // namespace luminal
