#pragma once
// Where a model's tensors come from, under their Hugging Face names: a safetensors folder, or a
// GGUF file whose names, layouts and quantized blocks are translated on load.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/buffer.h"

namespace luminal {

class WeightStore {
 public:
  virtual ~WeightStore() = default;
  virtual bool has(const std::string& name) const = 0;
  // The tensor in its stored dtype (f32, f16 or bf16; quantized tensors come back as f32).
  // Error naming the tensor if it is missing or its shape is not `shape`.
  virtual Buffer load(const std::string& name, const std::vector<int64_t>& shape) const = 0;
  virtual DType natural_dtype() const = 0;  // the dtype most weights are stored in
  virtual std::string where() const = 0;
};

std::unique_ptr<WeightStore> open_safetensors_weights(const std::string& path);

}  // namespace luminal
