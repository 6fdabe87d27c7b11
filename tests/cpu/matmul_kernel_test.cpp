// The CPU backend's Matmul kernel against the reference kernel, on the operand views that
// traced models hand it.
#include "cpu/kernel_compare.h"

namespace luminal::cpu::testing {
namespace {

// Grouped-query attention as torch.compile traces it: the values [kv, s, d] repeated per group
// (expand, then a reshape to [kv * group, s, d]) make a two-layer view, no single stride per
// dim. The kernel copies such a B to contiguous rows rather than leave it to the reference.
TEST(MatmulKernel, RepeatedKeysOrValuesAsATwoLayerView) {
  const int64_t kv = 2, group = 3, s = 5, d = 4;
  View values = View::contiguous(exprs({kv, s, d})).reshape(exprs({kv, 1, s, d})).expand(1, Expr(group)).reshape(exprs({kv * group, s, d}));
  ASSERT_GT(values.layers().size(), 1u);
  KernelInput probs = whole(random_f32({kv * group, 1, s}, 1));
  KernelInput v{random_f32({kv, s, d}, 2), values};
  compare(kernel_node("Matmul"), {probs, v}, {kv * group, 1, d}, {1e-6, 1e-6});
  // Two query rows per head, and the keys transposed through the same kind of view.
  View keys_t = values.permute({0, 2, 1});
  compare(kernel_node("Matmul"), {whole(random_f32({kv * group, 2, d}, 3)), {random_f32({kv, s, d}, 4), keys_t}},
          {kv * group, 2, s}, {1e-6, 1e-6});
}

}  // namespace
}  // namespace luminal::cpu::testing
