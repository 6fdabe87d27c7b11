#pragma once
// bf16 weights laid out once, at load, as the prefill GEMM's pair panels: W [n, k] becomes
// [ceil(n / 32)][ceil(k / 2)][32] 32-bit words, word (p, q, c) holding W[32p + c, 2q] in its low
// half and W[32p + c, 2q + 1] in its high half (the layout VDPBF16PS reads; columns past n and
// an odd k's last partner are zero). The bf16-pair GEMM then reads its B panels in place instead
// of packing them on every call (15% of a bf16-activation prefill), the f32 tiles widen them
// without a transpose, and decode's GEMV streams them (panel_gemv.h): the panels replace W's
// rows, so memory stays what it was.
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace luminal::cpu {

class ThreadPool;

constexpr int kPanelWidth = 32;  // W rows (outputs) a panel

class WeightPanels {
 public:
  // Packs W (bf16, row-major [n, k], row stride ldw elements) on `pool` (nullptr: this thread),
  // asking for transparent huge pages first where `huge_pages` (a hint; see huge_page_arena.h).
  static WeightPanels pack(const uint16_t* w, int64_t n, int64_t k, int64_t ldw, ThreadPool* pool, bool huge_pages = false);
  const uint32_t* words() const { return words_.get(); }
  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  size_t bytes() const { return bytes_; }
  // The word of W[j, 2q] and W[j, 2q + 1] (for tests and edge loops).
  uint32_t word(int64_t j, int64_t q) const;

 private:
  struct Free {
    void operator()(uint32_t* p) const;
  };
  std::unique_ptr<uint32_t[], Free> words_;
  int64_t n_ = 0, k_ = 0;
  size_t bytes_ = 0;
};

inline int64_t panel_words(int64_t k) { return (k + 1) / 2; }  // words a panel row (one k pair each)

// The f32 bit pattern of one value of a panel word: its low half (the even k) shifted up, or its
// high half (the odd k) with the low half cleared.
inline uint32_t panel_value_bits(uint32_t word, bool odd) { return odd ? word & 0xffff0000u : word << 16; }

// The weights of a model that were packed, found by the address of W's bytes (the loaded weight
// buffer, which lives as long as the model): a Matmul whose B is that whole matrix reads them.
class PackedWeights {
 public:
  void add(const void* w, WeightPanels panels);
  const WeightPanels* find(const void* w) const;
  size_t count() const { return panels_.size(); }
  size_t bytes() const;

 private:
  std::unordered_map<const void*, WeightPanels> panels_;
};

// Whether packing weights at load pays on this machine: it has AVX-512 (the panel GEMV's
// kernel; other CPUs run a portable loop) and no AMX (whose GEMM reads W's rows).
bool packed_weights_supported();

}  // namespace luminal::cpu
