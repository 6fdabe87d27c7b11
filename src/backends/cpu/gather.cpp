#include "backends/cpu/gather.h"

#include <cstring>

#include "backends/cpu/weight_panels.h"
#include "runtime/flat_read.h"

namespace luminal::cpu {

namespace {

// The buffer element holding logical element 0 when the reader's logical order is its buffer's
// order from there on (a flat layout with row-major strides, inside the buffer); else -1.
int64_t contiguous_offset(const Reader& r) {
  if (!r.flat() || !flat_in_bounds(r)) return -1;
  const Reader::Flat& f = *r.flat();
  int64_t stride = 1;
  for (size_t d = f.shape.size(); d-- > 0;) {
    if (f.shape[d] != 1 && f.layout.strides[d] != stride) return -1;
    stride *= f.shape[d];
  }
  return f.layout.offset;
}

}  // namespace

bool gather(const std::vector<Reader>& in, Buffer& out, const PackedWeights* packed) {
  if (in.size() != 2 || in[0].dtype() != DType::I32 || !in[0].flat() || !flat_in_bounds(in[0]) || out.dtype() != in[1].dtype()) return false;
  const int64_t base = contiguous_offset(in[1]);
  if (base < 0) return false;
  int64_t data_count = 1;
  for (int64_t d : in[1].flat()->shape) data_count *= d;
  const int64_t count = static_cast<int64_t>(out.numel());
  int64_t idx_count = 1;
  for (int64_t d : in[0].flat()->shape) idx_count *= d;
  if (idx_count != count) return false;
  std::vector<int32_t> idx(static_cast<size_t>(count));
  copy_flat(*in[0].flat(), in[0].buffer().bytes(), sizeof(int32_t), reinterpret_cast<uint8_t*>(idx.data()));
  const size_t es = dtype_size(out.dtype());
  const uint8_t* src = in[1].buffer().bytes() + static_cast<size_t>(base) * es;
  uint8_t* dst = out.bytes();
  // A tied embedding packed at load (the head's W): each value from its panel word's half.
  const WeightPanels* panels = packed && base == 0 ? packed->find(in[1].buffer().bytes()) : nullptr;
  if (panels && out.dtype() == DType::BF16 && data_count == panels->n() * panels->k()) {
    uint16_t* o = reinterpret_cast<uint16_t*>(dst);
    const int64_t k = panels->k();
    for (int64_t i = 0; i < count; ++i) {
      const int64_t e = idx[static_cast<size_t>(i)];
      if (e < 0 || e >= data_count) {
        o[i] = 0;
        continue;
      }
      o[i] = static_cast<uint16_t>(panel_value_bits(panels->word(e / k, (e % k) / 2), (e % k) % 2 != 0) >> 16);
    }
    return true;
  }
  for (int64_t i = 0; i < count;) {
    const int64_t k = idx[static_cast<size_t>(i)];
    if (k < 0 || k >= data_count) {  // the reference's 0: all-zero bytes in every dtype
      std::memset(dst + static_cast<size_t>(i) * es, 0, es);
      ++i;
      continue;
    }
    int64_t run = 1;
    while (i + run < count && k + run < data_count && idx[static_cast<size_t>(i + run)] == k + run) ++run;
    std::memcpy(dst + static_cast<size_t>(i) * es, src + static_cast<size_t>(k) * es, static_cast<size_t>(run) * es);
    i += run;
  }
  return true;
}

}  // namespace luminal::cpu
