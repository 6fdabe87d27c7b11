#pragma once
// One block of anonymous memory for a model's weights, backed by transparent huge pages where
// the kernel offers them (madvise mode included). Decode streams every weight once per token;
// through 2 MB pages instead of 4 KB ones that stream misses the TLB far less (gemv_bench: a
// Qwen3-0.6B decode's GEMVs in 62.3 ms against 72.1 ms from 4 KB pages).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/buffer.h"

namespace luminal {

class HugePageArena : public std::enable_shared_from_this<HugePageArena> {
 public:
  // Room for `bytes` of buffers (each starts 64-byte aligned). Throws Error if the memory
  // cannot be mapped.
  static std::shared_ptr<HugePageArena> create(size_t bytes);
  // Whether this machine backs madvised memory with huge pages (transparent_hugepage not
  // "never"); without them an arena is just a copy.
  static bool available();
  ~HugePageArena();
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // Copies `b` into the arena and returns a read-only buffer over the copy (keeping the arena
  // alive). When `b` borrows a memory-mapped file, the file's pages are dropped from this
  // process once copied, so loading never holds a weight twice. Throws Error when full.
  Buffer adopt(const Buffer& b);
  size_t used() const { return used_; }

 private:
  HugePageArena() = default;
  uint8_t* base_ = nullptr;
  size_t size_ = 0, used_ = 0;
};

}  // namespace luminal
