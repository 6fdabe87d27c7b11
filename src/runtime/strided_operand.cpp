#include "runtime/strided_operand.h"

#include "runtime/flat_read.h"

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
  // Reshapes of a strided view (attention's heads merged or split) copy run by run.
  load_floats(r, flat_in_bounds(r), 0, n, copy.data());
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
