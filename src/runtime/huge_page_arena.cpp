#include "runtime/huge_page_arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "runtime/mapped_pages.h"

namespace luminal {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

bool HugePageArena::available() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  return std::getline(f, line) && line.find("[never]") == std::string::npos;
}

std::shared_ptr<HugePageArena> HugePageArena::create(size_t bytes) {
  std::shared_ptr<HugePageArena> a(new HugePageArena());
  // Over-allocate by one huge page so the usable range starts on a huge-page boundary.
  a->size_ = round_up(std::max<size_t>(bytes, 1), kHugePage) + kHugePage;
  void* p = mmap(nullptr, a->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error("cannot map " + std::to_string(a->size_ >> 20) + " MB for the model's weights: " + std::strerror(errno));
  a->base_ = static_cast<uint8_t*>(p);
  madvise(a->base_, a->size_, MADV_HUGEPAGE);  // a hint: no huge pages just means 4 KB ones
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
  madvise(a->base_, a->size_, MADV_POPULATE_WRITE);  // fault it all in at once (Linux >= 5.14)
  a->used_ = round_up(reinterpret_cast<uintptr_t>(a->base_), kHugePage) - reinterpret_cast<uintptr_t>(a->base_);
  return a;
}

HugePageArena::~HugePageArena() {
  if (base_) munmap(base_, size_);
}

Buffer HugePageArena::adopt(const Buffer& b) {
  const size_t n = b.nbytes(), at = round_up(used_, kAlign);
  if (at + n > size_)
    throw Error("weight arena full: " + std::to_string(at + n) + " bytes needed, " + std::to_string(size_) + " mapped");
  // In chunks, dropping a memory-mapped source's pages behind each one: the copy replaces
  // them, and peak RSS never holds a whole tensor (an embedding can be a quarter of a model)
  // twice.
  const size_t chunk = size_t(32) << 20;
  const uint8_t* src = b.bytes();
  for (size_t done = 0; done < n; done += chunk) {
    const size_t len = std::min(chunk, n - done);
    std::memcpy(base_ + at + done, src + done, len);
    if (b.borrowed()) drop_mapped_pages(src + done, len);
  }
  used_ = at + n;
  return Buffer::borrow(b.dtype(), b.shape(), base_ + at, shared_from_this());
}

}  // namespace luminal
