#pragma once
// Every frontend op, as free functions over Tensor. See docs/frontend.md for the semantics and
// how each op is composed from primitives.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "frontend/tensor.h"

namespace luminal {

// ---- creation -------------------------------------------------------------------------------
Tensor input(Graph& g, const std::string& name, DType dtype, const Shape& shape);
Tensor constant(Graph& g, double value, DType dtype = DType::F32);  // a scalar (rank 0)
Tensor full(Graph& g, const Shape& shape, double value, DType dtype = DType::F32);
Tensor zeros(Graph& g, const Shape& shape, DType dtype = DType::F32);
Tensor ones(Graph& g, const Shape& shape, DType dtype = DType::F32);
Tensor full_like(const Tensor& x, double value);
// start, start+step, ... < end (i32 unless dtype says otherwise; float dtypes compute
// start + i*step in f32). The count may be symbolic: arange(g, 0, Expr::var("s")).
Tensor arange(Graph& g, Expr start, Expr end, int64_t step = 1, DType dtype = DType::I32);
Tensor iota(Graph& g, Expr expr, Expr n);  // i32 [n], element i = expr with the index bound to i
// Boolean [n, m] masks: tril keeps j <= i + k, triu keeps j >= i + k.
Tensor tril_mask(Graph& g, Expr n, Expr m, int64_t k = 0);
Tensor triu_mask(Graph& g, Expr n, Expr m, int64_t k = 0);
Tensor tril(const Tensor& x, int64_t k = 0);  // zero above the k-th diagonal of the last two dims
Tensor triu(const Tensor& x, int64_t k = 0);
Tensor cast(const Tensor& x, DType to);

// ---- unary (integer inputs are cast to f32 first, as torch does) ----------------------------
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor exp2(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor expm1(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tan(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);  // half to even
Tensor trunc(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double slope = 0.01);
Tensor sigmoid(const Tensor& x);
Tensor silu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x);       // erf form
Tensor gelu_tanh(const Tensor& x);  // tanh approximation
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor erf(const Tensor& x);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);

// ---- binary: numpy broadcasting and dtype promotion (bool < i32 < f16/bf16 < f32) -------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);           // true division (integers give f32)
Tensor floor_divide(const Tensor& a, const Tensor& b);  // floor(a / b), in the promoted dtype
Tensor mod(const Tensor& a, const Tensor& b);           // remainder with the divisor's sign (torch.remainder)
Tensor fmod(const Tensor& a, const Tensor& b);          // remainder with the dividend's sign
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond ? a : b, exact (no 0*inf)
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);
Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi);
// Tensor-scalar forms: the scalar takes the tensor's dtype (a non-integral scalar with an integer
// tensor promotes to f32).
Tensor scalar_like(const Tensor& like, double value);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// ---- movement (views: no data is copied unless noted) ---------------------------------------
// reshape: at most one dim may be -1 (inferred).
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const std::vector<int>& axes);
Tensor transpose(const Tensor& x, int a, int b);
Tensor unsqueeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x, int axis);
Tensor squeeze(const Tensor& x);  // every size-1 dim
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a dim; new dims in front
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int start = 0, int end = -1);
// Python-style: constant negative start/end count from the end and are clamped to the axis.
Tensor slice(const Tensor& x, int axis, Expr start, Expr end, int64_t step = 1);
Tensor narrow(const Tensor& x, int axis, Expr start, Expr length);
Tensor select(const Tensor& x, int axis, Expr index);  // removes the axis
// pads[i] = {before, after} for axis i (fewer entries pad the leading axes only).
Tensor pad(const Tensor& x, const std::vector<std::pair<Expr, Expr>>& pads, double value = 0.0);
Tensor concat(const std::vector<Tensor>& xs, int axis);  // one Add per extra input
Tensor stack(const std::vector<Tensor>& xs, int axis);
std::vector<Tensor> split(const Tensor& x, const std::vector<Expr>& sizes, int axis);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int axis);
Tensor repeat(const Tensor& x, const std::vector<int64_t>& reps);  // torch.Tensor.repeat
Tensor flip(const Tensor& x, const std::vector<int>& axes);
Tensor unfold(const Tensor& x, int axis, Expr size, int64_t step);  // torch.Tensor.unfold
// torch.gather: out[..i..] = x[.. index[..i..] on `axis` ..]; index is i32 with x's rank.
Tensor gather(const Tensor& x, int axis, const Tensor& index);
// torch.scatter: a copy of x with x[.. index[..j..] on axis ..] = src[..j..] (last write wins).
Tensor scatter(const Tensor& x, int axis, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& x, int axis, const Tensor& index);  // index: i32 [k]
Tensor embedding(const Tensor& weight, const Tensor& ids);  // weight [v, d], ids i32 [...] -> [..., d]
Tensor contiguous(const Tensor& x);  // materialises the view into a new buffer

// ---- reductions over any set of axes --------------------------------------------------------
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor prod(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<int>& axes, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const std::vector<int>& axes, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor any(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor all(const Tensor& x, const std::vector<int>& axes, bool keepdim = false);
Tensor argmax(const Tensor& x, int axis, bool keepdim = false);  // first index of the max; i32
Tensor argmin(const Tensor& x, int axis, bool keepdim = false);
Tensor cumsum(const Tensor& x, int axis);
Tensor cumprod(const Tensor& x, int axis);
Tensor cummax(const Tensor& x, int axis);  // running max values

// ---- nn math ---------------------------------------------------------------------------------
Tensor softmax(const Tensor& x, int axis);
Tensor log_softmax(const Tensor& x, int axis);
// Normalises over the last `normalized_dims` dims; weight/bias have that trailing shape.
Tensor layer_norm(const Tensor& x, int normalized_dims, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const std::optional<Tensor>& weight, double eps = 1e-6);  // last dim
Tensor matmul(const Tensor& a, const Tensor& b);  // numpy matmul: vectors, matrices, batches
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias);  // x @ W^T + b

// ---- sorting (O(n^2) comparisons along the axis; stable) -------------------------------------
Tensor argsort(const Tensor& x, int axis = -1, bool descending = false);  // i32
std::pair<Tensor, Tensor> sort(const Tensor& x, int axis = -1, bool descending = false);  // values, indices
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int axis = -1, bool largest = true);

}  // namespace luminal
