#include "runtime/kernels.h"
#include "runtime/strided_matmul.h"

#include <cmath>
#include <optional>
#include <limits>

#include "core/error.h"
#include "runtime/scalar_ops.h"

namespace luminal {

double eval_fused(const FusedProgram& p, const std::function<double(int)>& load) {
  double vals[64];
  std::vector<double> heap;
  double* v = vals;
  if (p.instrs.size() > 64) {
    heap.resize(p.instrs.size());
    v = heap.data();
  }
  auto operand = [&](int i) { return i < p.n_inputs ? load(i) : v[i - p.n_inputs]; };
  for (size_t k = 0; k < p.instrs.size(); ++k) {
    const FusedInstr& in = p.instrs[k];
    OpKind op = static_cast<OpKind>(in.op);
    double r;
    if (in.op == FusedInstr::kConst) r = in.value;
    else if (op == OpKind::Cast) r = convert_value(operand(in.a), in.dtype);
    else if (is_unary(op)) r = unary_op(op, static_cast<float>(operand(in.a)));
    else r = binary_op(op, in.in_dtype, operand(in.a), operand(in.b));
    v[k] = convert_value(r, in.dtype);
  }
  return v[p.instrs.size() - 1];
}


namespace {

// A reduction axis split into outer x len x inner, so element (o, k, i) has flat index
// (o*len + k)*inner + i.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
  AxisSplit(const std::vector<int64_t>& shape, size_t axis) {
    for (size_t d = 0; d < shape.size(); ++d) (d < axis ? outer : d == axis ? len : inner) *= shape[d];
  }
};

// Mul + SumReduce over k: the product rounded to A's dtype, summed in f32 in k order.
void matmul(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  const std::vector<int64_t>& a = s[0];
  size_t r = a.size();
  LM_ASSERT(r >= 2 && s[1].size() == r, "Matmul needs [.., m, k] and [.., k, n] of one rank");
  int64_t m = a[r - 2], k = a[r - 1], nn = s[1][r - 1];
  if (strided_matmul_f32(in[0], in[1], s, out)) return;
  int64_t batch = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, m * nn);
  DType t = in[0].dtype();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nn; ++j) {
        ReduceAcc acc(true, t);
        for (int64_t p = 0; p < k; ++p)  // the product as the Mul node computes it, then summed
          acc.add(convert_value(binary_op(OpKind::Mul, t, in[0]((b * m + i) * k + p), in[1]((b * k + p) * nn + j)), t));
        out.set(static_cast<size_t>((b * m + i) * nn + j), acc.result());
      }
}

// Matmul(a * s, b) with s one value per row of a: rows whose scale is zero are zero, without
// reading b (an MoE expert a token did not choose). Other rows as the Mul then the Matmul.
void scaled_matmul(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  const std::vector<int64_t>& a = s[0];
  size_t r = a.size();
  LM_ASSERT(r >= 2 && s[1].size() == r && s[2] == a, "ScaledMatmul needs a [.., m, k], b [.., k, n] and s shaped as a");
  int64_t m = a[r - 2], k = a[r - 1], nn = s[1][r - 1];
  int64_t batch = static_cast<int64_t>(out.numel()) / std::max<int64_t>(1, m * nn);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i) {
      double scale = in[2]((b * m + i) * k);
      for (int64_t j = 0; j < nn; ++j) {
        ReduceAcc acc(true, DType::F32);
        if (scale != 0)
          for (int64_t p = 0; p < k; ++p) {
            double x = convert_value(binary_op(OpKind::Mul, DType::F32, in[0]((b * m + i) * k + p), scale), DType::F32);
            acc.add(convert_value(binary_op(OpKind::Mul, DType::F32, x, in[1]((b * k + p) * nn + j)), DType::F32));
          }
        out.set(static_cast<size_t>((b * m + i) * nn + j), acc.result());
      }
    }
}

// exp(x - max) / sum, with exp as exp2(v * log2e) and division as a * (1/b), all in f32.
void softmax(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  AxisSplit ax(s[0], n.axis);
  const float log2e = static_cast<float>(1.4426950408889634);
  std::vector<float> e(static_cast<size_t>(ax.len));
  for (int64_t o = 0; o < ax.outer; ++o)
    for (int64_t i = 0; i < ax.inner; ++i) {
      auto at = [&](int64_t k) { return (o * ax.len + k) * ax.inner + i; };
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < ax.len; ++k) {
        float v = static_cast<float>(in[0](at(k)));
        if (std::isnan(v) || v > mx) mx = v;
        if (std::isnan(mx)) break;
      }
      float sum = 0;
      for (int64_t k = 0; k < ax.len; ++k) {
        float d = static_cast<float>(in[0](at(k))) + mx * -1.0f;
        e[k] = std::exp2(d * log2e);
        sum += e[k];
      }
      float inv = 1.0f / sum;
      for (int64_t k = 0; k < ax.len; ++k) out.set(static_cast<size_t>(at(k)), e[k] * inv);
    }
}

// x * 1/sqrt(sum(x*x) * (1/n) + eps), in f32.
void rms_norm(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  AxisSplit ax(s[0], n.axis);
  float inv_n = 1.0f / static_cast<float>(ax.len);
  for (int64_t o = 0; o < ax.outer; ++o)
    for (int64_t i = 0; i < ax.inner; ++i) {
      auto at = [&](int64_t k) { return (o * ax.len + k) * ax.inner + i; };
      float ss = 0;
      for (int64_t k = 0; k < ax.len; ++k) {
        float v = static_cast<float>(in[0](at(k)));
        ss += v * v;
      }
      float scale = 1.0f / std::sqrt(ss * inv_n + n.constant);
      for (int64_t k = 0; k < ax.len; ++k) out.set(static_cast<size_t>(at(k)), static_cast<float>(in[0](at(k))) * scale);
    }
}

// The norm, rounded to f32, times w (input 1) in f32, as the Mul it replaced.
void rms_norm_mul(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  rms_norm(n, in, s, out);
  for (size_t z = 0; z < out.numel(); ++z) out.set(z, binary_op(OpKind::Mul, DType::F32, out.get(z), in[1](static_cast<int64_t>(z))));
}

// Elementwise: the program at every output element.
void fused(const Node& n, const std::vector<Reader>& in, Buffer& out) {
  FusedProgram p = FusedProgram::decode(n.code);
  for (size_t z = 0; z < out.numel(); ++z)
    out.set(z, eval_fused(p, [&](int i) { return in[i](static_cast<int64_t>(z)); }));
}

// A reduction whose input is the prologue program (its inputs are viewed with the reduction's
// input shape), accumulated exactly like SumReduce / MaxReduce, then optionally an epilogue
// program whose input 0 is the reduced value and whose other inputs follow the prologue's
// (viewed with the output shape).
void fused_reduce(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s,
                  Buffer& out, bool is_sum) {
  size_t pos = 0;
  FusedProgram p = FusedProgram::decode(n.code, pos);
  std::optional<FusedProgram> epilogue;
  if (pos < n.code.size()) epilogue = FusedProgram::decode(n.code, pos);
  AxisSplit ax(s.at(0), n.axis);
  DType t = p.instrs.back().dtype;  // the reduction runs in the prologue's result dtype
  for (int64_t o = 0; o < ax.outer; ++o)
    for (int64_t i = 0; i < ax.inner; ++i) {
      ReduceAcc acc(is_sum, t);
      for (int64_t k = 0; k < ax.len; ++k) {
        int64_t z = (o * ax.len + k) * ax.inner + i;
        acc.add(eval_fused(p, [&](int slot) { return in[slot](z); }));
      }
      double r = acc.result();
      int64_t at = o * ax.inner + i;
      if (epilogue)
        r = eval_fused(*epilogue, [&](int slot) { return slot == 0 ? r : in[p.n_inputs + slot - 1](at); });
      out.set(static_cast<size_t>(at), r);
    }
}

// x * cos + rotate_half(x) * sin on the last axis, rounding like the unfused ops: rotate_half
// is exact (-x2 + -0 and -0 + x1), the products and the sum round to f32.
void rotary(const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  int64_t d = s.at(0).back(), half = d / 2;
  for (size_t z = 0; z < out.numel(); ++z) {
    int64_t j = static_cast<int64_t>(z) % d, row = static_cast<int64_t>(z) - j;
    float x = static_cast<float>(in[0](static_cast<int64_t>(z)));
    float rot = j < d - half ? -static_cast<float>(in[0](row + j + half)) : static_cast<float>(in[0](row + j - (d - half)));
    float a = x * static_cast<float>(in[1](static_cast<int64_t>(z)));
    float b = rot * static_cast<float>(in[2](static_cast<int64_t>(z)));
    out.set(z, a + b);
  }
}

// rms_norm(x - mean(x)) on the axis; the mean is sum * (1/n) and the centring x + mean*(-1),
// all in f32, as the frontend composes them.
void layer_norm(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  AxisSplit ax(s[0], n.axis);
  float inv_n = 1.0f / static_cast<float>(ax.len);
  Buffer centred(DType::F32, s[0]);
  for (int64_t o = 0; o < ax.outer; ++o)
    for (int64_t i = 0; i < ax.inner; ++i) {
      auto at = [&](int64_t k) { return (o * ax.len + k) * ax.inner + i; };
      float sum = 0;
      for (int64_t k = 0; k < ax.len; ++k) sum += static_cast<float>(in[0](at(k)));
      float neg_mean = (sum * inv_n) * -1.0f;
      for (int64_t k = 0; k < ax.len; ++k)
        centred.set(static_cast<size_t>(at(k)), static_cast<float>(in[0](at(k))) + neg_mean);
    }
  std::vector<Expr> shape;
  for (int64_t d : s[0]) shape.push_back(Expr(d));
  rms_norm(n, {Reader(centred, View::contiguous(shape), {})}, s, out);
}

// softmax(where(mask, scale * (q @ kt), -inf)) @ v, step by step with the kernels above, so it
// rounds exactly like the unfused plan.
void attention(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
  std::vector<int64_t> score_shape = s[0];
  score_shape.back() = s[1].back();  // [.., seq, keys]
  Buffer scores(DType::F32, score_shape);
  matmul(n, {in[0], in[1]}, {s[0], s[1]}, scores);
  for (size_t z = 0; z < scores.numel(); ++z) {
    float scaled = static_cast<float>(scores.get(z)) * n.constant;
    scores.set(z, in[3](static_cast<int64_t>(z)) != 0 ? scaled : -std::numeric_limits<float>::infinity());
  }
  std::vector<Expr> shape_exprs;
  for (int64_t d : score_shape) shape_exprs.push_back(Expr(d));
  Buffer probs(DType::F32, score_shape);
  Node soft = n;
  soft.axis = score_shape.size() - 1;
  softmax(soft, {Reader(scores, View::contiguous(shape_exprs), {})}, {score_shape}, probs);
  matmul(n, {Reader(probs, View::contiguous(shape_exprs), {}), in[2]}, {score_shape, s[2]}, out);
}

}  // namespace

void run_reference_kernel(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& in_shapes,
                          Buffer& out) {
  if (n.kernel == "Matmul") return matmul(n, in, in_shapes, out);
  if (n.kernel == "ScaledMatmul") return scaled_matmul(n, in, in_shapes, out);
  if (n.kernel == "Softmax") return softmax(n, in, in_shapes, out);
  if (n.kernel == "RMSNorm") return rms_norm(n, in, in_shapes, out);
  if (n.kernel == "RMSNormMul") return rms_norm_mul(n, in, in_shapes, out);
  if (n.kernel == "Rotary") return rotary(in, in_shapes, out);
  if (n.kernel == "RMSNormRotary") {  // RMSNormMul's f32 result, then Rotary over it
    Buffer normed(DType::F32, out.shape());
    rms_norm_mul(n, in, in_shapes, normed);
    std::vector<Expr> shape;
    for (int64_t d : out.shape()) shape.push_back(Expr(d));
    return rotary({Reader(normed, View::contiguous(shape), {}), in[2], in[3]}, {out.shape(), in_shapes[2], in_shapes[3]}, out);
  }
  if (n.kernel == "Attention") return attention(n, in, in_shapes, out);
  if (n.kernel == "LayerNorm") return layer_norm(n, in, in_shapes, out);
  if (n.kernel == "Where") {
    for (size_t z = 0; z < out.numel(); ++z) {
      int64_t i = static_cast<int64_t>(z);
      out.set(z, in[0](i) != 0 ? in[1](i) : in[2](i));
    }
    return;
  }
  if (n.kernel == "Fused") return fused(n, in, out);
  if (n.kernel == "FusedSum") return fused_reduce(n, in, in_shapes, out, true);
  if (n.kernel == "FusedMax") return fused_reduce(n, in, in_shapes, out, false);
  throw Error("kernel '" + n.kernel +
              "' has no reference implementation (known: Matmul, ScaledMatmul, Softmax, RMSNorm, RMSNormMul, RMSNormRotary, LayerNorm, Rotary, Where, Attention, Fused, FusedSum, FusedMax)");
}

}  // namespace luminal
