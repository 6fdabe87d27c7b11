#include "runtime/strided_operand.h"

#include <algorithm>

namespace luminal {

F32Operand::F32Operand(const Reader& r, const std::vector<int64_t>& shape, bool unit_inner) {
  const auto& s = r.strided();
  if (s && r.dtype() == DType::F32 && (!unit_inner || shape.empty() || s->strides.back() == 1)) {
    data = reinterpret_cast<const float*>(r.buffer().bytes());
    offset = s->offset;
    strides = s->strides;
    return;
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  copy.resize(static_cast<size_t>(n));
  if (r.flat() && r.dtype() == DType::F32 && !r.flat()->shape.empty()) {
    // A reshape of a strided f32 view (attention's heads merged or split): copied run by run
    // along the layout's last axis instead of element by element through index programs.
    const Reader::Flat& f = *r.flat();
    const float* src = reinterpret_cast<const float*>(r.buffer().bytes());
    const int64_t run = f.shape.back(), step = f.layout.strides.back();
    Reader::Flat rows{std::vector<int64_t>(f.shape.begin(), f.shape.end() - 1), {f.layout.offset, {}}};
    rows.layout.strides.assign(f.layout.strides.begin(), f.layout.strides.end() - 1);
    FlatCursor c(rows);
    for (int64_t z = 0; z + run <= n && run > 0; z += run, c.next()) {
      const float* p = src + c.index();
      float* out = copy.data() + z;
      if (step == 1) std::copy(p, p + run, out);
      else for (int64_t j = 0; j < run; ++j) out[j] = p[j * step];
    }
  } else {
    for (int64_t z = 0; z < n; ++z) copy[static_cast<size_t>(z)] = static_cast<float>(r(z));
  }
  data = copy.data();
  strides.assign(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
}

void add_batch_offsets(int64_t bi, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides_a,
                       const std::vector<int64_t>& strides_b, int64_t& base_a, int64_t& base_b) {
  int64_t rem = bi;
  for (size_t d = shape.size() - 2; d-- > 0;) {
    int64_t c = rem % shape[d];
    rem /= shape[d];
    base_a += c * strides_a[d];
    base_b += c * strides_b[d];
  }
}

}  // namespace luminal
