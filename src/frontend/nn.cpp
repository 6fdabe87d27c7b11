// Neural-network math: softmax, norms, matmul, linear. The compiler recognises these shapes
// (broadcast Mul + SumReduce is a matmul) and maps them to kernels.
#include "core/error.h"
#include "frontend/internal.h"

namespace luminal {

Tensor softmax(const Tensor& x, int axis) {
  Tensor xf = fe::to_float(x);
  Tensor e = exp(xf - max(xf, {axis}, true));
  return e / sum(e, {axis}, true);
}

Tensor log_softmax(const Tensor& x, int axis) {
  Tensor xf = fe::to_float(x);
  Tensor shifted = xf - max(xf, {axis}, true);
  return shifted - log(sum(exp(shifted), {axis}, true));
}

Tensor layer_norm(const Tensor& x, int normalized_dims, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps) {
  if (normalized_dims < 1 || static_cast<size_t>(normalized_dims) > x.rank())
    throw Error("layer_norm: cannot normalise over " + std::to_string(normalized_dims) + " dims of " + to_string(x.shape()));
  std::vector<int> axes;
  for (int i = 1; i <= normalized_dims; ++i) axes.push_back(-i);
  Tensor mu = mean(x, axes, true);
  Tensor centered = x - mu;
  Tensor r = centered * rsqrt(mean(centered * centered, axes, true) + eps);
  if (weight) r = r * *weight;
  if (bias) r = r + *bias;
  return r;
}

Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps) {
  Tensor r = x * rsqrt(mean(x * x, {-1}, true) + eps);
  return weight ? r * *weight : r;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  fe::graph_of(a, b, "matmul");
  if (a.rank() == 0 || b.rank() == 0) throw Error("matmul: operands must have at least one dim");
  if (a.rank() == 1 && b.rank() == 1) {
    if (!provably_equal(a.dim(0), b.dim(0)))
      throw Error("matmul: shape mismatch: " + to_string(a.shape()) + " and " + to_string(b.shape()));
    return sum(a * b, {0});
  }
  if (a.rank() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.rank() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);
  if (!provably_equal(a.dim(-1), b.dim(-2)))
    throw Error("matmul: shape mismatch: " + to_string(a.shape()) + " @ " + to_string(b.shape()) +
                " (inner dims " + a.dim(-1).to_string() + " and " + b.dim(-2).to_string() + ")");
  Shape batch_a(a.shape().begin(), a.shape().end() - 2), batch_b(b.shape().begin(), b.shape().end() - 2);
  try {
    fe::broadcast_shapes(batch_a, batch_b, "matmul");
  } catch (const Error&) {
    throw Error("matmul: shape mismatch: the batch dims of " + to_string(a.shape()) + " and " + to_string(b.shape()) +
                " cannot be broadcast together");
  }
  // [..., m, k, 1] * [..., 1, k, n] summed over k.
  return sum(unsqueeze(a, -1) * unsqueeze(b, -3), {-2});
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (weight.rank() != 2) throw Error("linear: weight must be [out, in], got " + to_string(weight.shape()));
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias ? y + *bias : y;
}

}  // namespace luminal
