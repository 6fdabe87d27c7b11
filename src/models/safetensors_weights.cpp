// Weights from safetensors, including the older per-expert MoE layouts, which are stacked into
// the fused [E, 2I, H] / [E, H, I] tensors transformers 5 uses.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "core/error.h"
#include "loader/safetensors.h"
#include "models/weight_store.h"
#include "symbolic/expr.h"

namespace luminal {
namespace {

class SafetensorsWeights : public WeightStore {
 public:
  explicit SafetensorsWeights(const std::string& path)
      : ckpt_(std::make_shared<SafetensorsCheckpoint>(SafetensorsCheckpoint::open(path))), path_(path) {
    std::map<DType, size_t> bytes;
    for (const std::string& n : ckpt_->names()) {
      const SafeTensor& t = ckpt_->get(n);
      if (t.dtype) bytes[*t.dtype] += t.nbytes;
    }
    size_t best = 0;
    for (auto& [d, b] : bytes)
      if (b > best) best = b, natural_ = d;
  }

  bool has(const std::string& name) const override {
    return ckpt_->find(name) || ckpt_->find(alias(name)) || legacy_experts(name).size() > 0;
  }
  DType natural_dtype() const override { return natural_; }
  std::string where() const override { return path_; }

  Buffer load(const std::string& name, const std::vector<int64_t>& shape) const override {
    if (const SafeTensor* t = ckpt_->find(name)) return to_buffer(*t, shape);
    if (const SafeTensor* t = ckpt_->find(alias(name))) return to_buffer(*t, shape);
    std::vector<std::vector<std::string>> parts = legacy_experts(name);
    if (parts.empty()) ckpt_->get(name);  // throws: missing tensor, named
    return stack_experts(name, parts, shape);
  }

 private:
  Buffer to_buffer(const SafeTensor& t, const std::vector<int64_t>& shape) const {
    if (!t.dtype || *t.dtype == DType::I32 || *t.dtype == DType::Bool)
      throw Error("tensor '" + t.name + "' in '" + t.file + "' has dtype " + t.dtype_name +
                  "; model weights must be F32, F16 or BF16");
    if (t.shape != shape)
      throw Error("tensor '" + t.name + "' in '" + t.file + "' has shape " + shape_string(t.shape) + " but the config.json implies " +
                  shape_string(shape) + " (is config.json from the same model?)");
    // Used in place from the mapped file when aligned for its dtype (the usual case): weights
    // are then paged in from the page cache, never copied, and RSS holds them once.
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(*t.dtype) == 0) return Buffer::borrow(*t.dtype, t.shape, t.data, ckpt_);
    Buffer b(*t.dtype, t.shape);
    std::memcpy(b.bytes(), t.data, t.nbytes);
    return b;
  }

  // Mixtral checkpoints name the router "block_sparse_moe.gate".
  static std::string alias(const std::string& name) {
    size_t at = name.find(".mlp.gate.weight");
    return at == std::string::npos ? name : name.substr(0, at) + ".block_sparse_moe.gate.weight";
  }

  // For "<p>experts.gate_up_proj" / "<p>experts.down_proj": the per-expert tensors of the older
  // layouts, outer list per expert, inner list concatenated along dim 0. Empty if not there.
  std::vector<std::vector<std::string>> legacy_experts(const std::string& name) const {
    std::vector<std::vector<std::string>> r;
    auto ends = [&](const std::string& s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
    bool gate_up = ends("experts.gate_up_proj"), down = ends("experts.down_proj");
    if (!gate_up && !down) return r;
    std::string prefix = name.substr(0, name.rfind("experts."));  // "model.layers.N.mlp."
    std::string mixtral = prefix.substr(0, prefix.rfind("mlp.")) + "block_sparse_moe.experts.";
    for (int e = 0;; ++e) {
      std::string qe = prefix + "experts." + std::to_string(e) + ".", me = mixtral + std::to_string(e) + ".";
      if (ckpt_->find(qe + "down_proj.weight"))
        r.push_back(gate_up ? std::vector<std::string>{qe + "gate_proj.weight", qe + "up_proj.weight"}
                            : std::vector<std::string>{qe + "down_proj.weight"});
      else if (ckpt_->find(me + "w2.weight"))
        r.push_back(gate_up ? std::vector<std::string>{me + "w1.weight", me + "w3.weight"}
                            : std::vector<std::string>{me + "w2.weight"});
      else
        break;
    }
    return r;
  }

  Buffer stack_experts(const std::string& name, const std::vector<std::vector<std::string>>& parts,
                       const std::vector<int64_t>& shape) const {
    if (shape.size() != 3 || static_cast<int64_t>(parts.size()) != shape[0])
      throw Error("'" + path_ + "': " + std::to_string(parts.size()) + " experts found for '" + name + "' of shape " +
                  shape_string(shape) + " (check num_experts in config.json)");
    const SafeTensor& first = ckpt_->get(parts[0][0]);
    if (!first.dtype) throw Error("tensor '" + first.name + "' has unsupported dtype " + first.dtype_name);
    Buffer b(*first.dtype, shape);
    std::vector<std::pair<const SafeTensor*, size_t>> copies;  // each part and where it goes
    size_t offset = 0;
    for (const auto& expert : parts) {
      for (const std::string& n : expert) {
        const SafeTensor& t = ckpt_->get(n);
        if (t.dtype != first.dtype) throw Error("tensor '" + n + "' has dtype " + t.dtype_name + ", unlike '" + first.name + "'");
        std::vector<int64_t> want = {shape[1] / static_cast<int64_t>(expert.size()), shape[2]};
        if (t.shape != want)
          throw Error("tensor '" + n + "' has shape " + shape_string(t.shape) + " but the config.json implies " + shape_string(want));
        if (offset + t.nbytes > b.nbytes()) throw Error("experts of '" + name + "' do not fit its shape " + shape_string(shape));
        copies.push_back({&t, offset});
        offset += t.nbytes;
      }
    }
    // The copies read the mapped file, page faults included: threads take every n-th part.
    // (Qwen3-30B-A3B stacks 48 GB of experts this way.)
    const size_t n = std::min<size_t>({copies.size(), std::max(1u, std::thread::hardware_concurrency()), 16});
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        for (size_t c = i; c < copies.size(); c += n) std::memcpy(b.bytes() + copies[c].second, copies[c].first->data, copies[c].first->nbytes);
      });
    for (std::thread& t : threads) t.join();
    return b;
  }

  std::shared_ptr<SafetensorsCheckpoint> ckpt_;  // shared with the weights borrowed from it
  std::string path_;
  DType natural_ = DType::BF16;
};

}  // namespace

std::unique_ptr<WeightStore> open_safetensors_weights(const std::string& path) {
  return std::make_unique<SafetensorsWeights>(path);
}

}  // namespace luminal
