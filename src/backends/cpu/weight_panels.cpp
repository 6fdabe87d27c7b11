#include "backends/cpu/weight_panels.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "backends/cpu/amx_gemm.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/thread_pool.h"

namespace luminal::cpu {

void WeightPanels::Free::operator()(uint32_t* p) const { std::free(p); }

WeightPanels WeightPanels::pack(const uint16_t* w, int64_t n, int64_t k, int64_t ldw, ThreadPool* pool, bool huge_pages) {
  WeightPanels out;
  out.n_ = n;
  out.k_ = k;
  const int64_t panels = (n + kPanelWidth - 1) / kPanelWidth, kq = panel_words(k);
  // Whole 2 MB pages where the allocation is large, so transparent huge pages can back it.
  const size_t bytes = static_cast<size_t>(panels * kq * kPanelWidth) * 4;
  const size_t align = bytes >= (size_t(2) << 20) ? (size_t(2) << 20) : 64;
  out.bytes_ = (bytes + align - 1) / align * align;
  out.words_.reset(static_cast<uint32_t*>(std::aligned_alloc(align, out.bytes_ == 0 ? align : out.bytes_)));
  if (!out.words_) throw std::bad_alloc();
  if (huge_pages && align > 64) madvise(out.words_.get(), out.bytes_, MADV_HUGEPAGE);
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int nr = static_cast<int>(std::min<int64_t>(kPanelWidth, n - p * kPanelWidth));
      pack_b_pairs(w + p * kPanelWidth * ldw, ldw, nr, k, out.words_.get() + p * kq * kPanelWidth, kPanelWidth);
    }
  };
  if (pool) pool->parallel_for(panels, run, 1);
  else run(0, panels);
  return out;
}

uint32_t WeightPanels::word(int64_t j, int64_t q) const {
  return words_[(j / kPanelWidth) * panel_words(k_) * kPanelWidth + q * kPanelWidth + j % kPanelWidth];
}

void PackedWeights::add(const void* w, WeightPanels panels) { panels_.insert_or_assign(w, std::move(panels)); }

const WeightPanels* PackedWeights::find(const void* w) const {
  auto it = panels_.find(w);
  return it == panels_.end() ? nullptr : &it->second;
}

size_t PackedWeights::bytes() const {
  size_t b = 0;
  for (const auto& [w, p] : panels_) b += p.bytes();
  return b;
}

bool packed_weights_supported() {
  static const bool ok = __builtin_cpu_supports("avx512f") && !amx_available();
  return ok;
}

}  // namespace luminal::cpu
