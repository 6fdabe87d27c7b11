#include "backends/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "backends/cpu/amx_gemm.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/scratch.h"
#include "backends/cpu/simd8.h"
#include "backends/cpu/thread_pool.h"
#include "backends/cpu/weight_gemm.h"
#include "runtime/flat_read.h"
#include "runtime/strided_operand.h"

namespace luminal::cpu {

namespace {

// sum_p a[p] * b[p * step]
LM_SIMD_CLONES float dot(const float* a, const float* b, int64_t step, int64_t k) {
  if (step != 1) {
    float s = 0;
    for (int64_t p = 0; p < k; ++p) s += a[p] * b[p * step];
    return s;
  }
  using namespace simd8;
  f8 acc = {};
  int64_t p = 0;
  for (; p + 8 <= k; p += 8) acc += load(a + p) * load(b + p);
  float s = hsum(acc);
  for (; p < k; ++p) s += a[p] * b[p];
  return s;
}

// out[e] += w * v[e * step]
LM_SIMD_CLONES void axpy(float w, const float* v, int64_t step, float* out, int64_t d) {
  if (step != 1) {
    for (int64_t e = 0; e < d; ++e) out[e] += w * v[e * step];
    return;
  }
  using namespace simd8;
  const f8 ws = splat(w);
  int64_t e = 0;
  for (; e + 8 <= d; e += 8) store(out + e, load(out + e) + ws * load(v + e));
  for (; e < d; ++e) out[e] += w * v[e];
}

// out[j] = (b[j] != 0) for n bytes, eight at a time (-O2 left the byte loop scalar).
LM_SIMD_CLONES void bytes_to_mask(const uint8_t* b, int64_t n, float* out) {
  using namespace simd8;
  typedef uint8_t b8 __attribute__((vector_size(8)));
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    b8 v;
    std::memcpy(&v, b + j, sizeof v);
    store(out + j, __builtin_convertvector(v, i8) != 0 ? splat(1.0f) : splat(0.0f));
  }
  for (; j < n; ++j) out[j] = b[j] != 0;
}

// out[j] = (x[j] != 0) for n int32 values, eight at a time.
LM_SIMD_CLONES void ints_to_mask(const int32_t* x, int64_t n, float* out) {
  using namespace simd8;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    i8 v;
    std::memcpy(&v, x + j, sizeof v);
    store(out + j, v != 0 ? splat(1.0f) : splat(0.0f));
  }
  for (; j < n; ++j) out[j] = x[j] != 0;
}

// row[j] = mask[j] != 0 ? row[j] * scale : -inf, eight at a time: the scores' mask and scale
// (scalar at -O2, it had taken as long as the softmax after it).
LM_SIMD_CLONES void mask_and_scale(float* row, const float* mask, int64_t n, float scale) {
  using namespace simd8;
  const f8 s = splat(scale), ninf = splat(-__builtin_inff());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) store(row + j, load(mask + j) != 0 ? load(row + j) * s : ninf);
  for (; j < n; ++j) row[j] = mask[j] != 0 ? row[j] * scale : -__builtin_inff();
}

// out[j] = (mask element at base + j * step != 0) for j < n, from a buffer of any dtype.
void mask_row(const Buffer& src, int64_t base, int64_t step, int64_t n, float* out) {
  const uint8_t* b = src.bytes();
  switch (src.dtype()) {
    case DType::I32:
      if (step == 1) return ints_to_mask(reinterpret_cast<const int32_t*>(b) + base, n, out);
      for (int64_t j = 0; j < n; ++j) out[j] = reinterpret_cast<const int32_t*>(b)[base + j * step] != 0;
      return;
    case DType::Bool:
      if (step == 1) return bytes_to_mask(b + base, n, out);
      for (int64_t j = 0; j < n; ++j) out[j] = b[base + j * step] != 0;
      return;
    case DType::F32:
      for (int64_t j = 0; j < n; ++j) out[j] = reinterpret_cast<const float*>(b)[base + j * step] != 0.0f;
      return;
    default:
      for (int64_t j = 0; j < n; ++j) out[j] = src.get(static_cast<size_t>(base + j * step)) != 0.0;
  }
}

// The elements of a layout (`shape` row-major, `strides` from `offset`) over src, as 0/1 into
// dst: runs along the last axis converted straight from the buffer, pieces of runs split over
// the threads (a decoder's mask is one long run).
void mask_runs(const Buffer& src, int64_t offset, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t count,
               float* dst, ThreadPool& pool) {
  const size_t rank = shape.size();
  const int64_t len = shape[rank - 1], step = strides[rank - 1];
  if (len <= 0) return;
  pool.parallel_for(count, [&](int64_t b, int64_t e) {
    for (int64_t z = b; z < e;) {
      const int64_t run = z / len, j = z - run * len, n = std::min(len - j, e - z);
      int64_t base = offset, rem = run;
      for (size_t d = rank - 1; d-- > 0;) {
        base += (rem % shape[d]) * strides[d];
        rem /= shape[d];
      }
      mask_row(src, base + j * step, step, n, dst + z);
      z += n;
    }
  }, 16384);
}

// The mask as 0/1 in the scores' flat order, `shape` its logical shape. A flat layout (a strided
// view, or a reshape of one such as the decoder's causal mask broadcast over heads and read
// flat) is converted by runs straight from its buffer; a broadcast over a reshape
// (Reader::Stacked) by runs of its few stored elements, copied first (for a mask that is also
// flat, that copy had cost an allocation and a second pass: 0.4 ms a Qwen3 layer); anything
// else element by element through the view's index program.
void load_mask(const Reader& r, const std::vector<int64_t>& shape, int64_t count, float* dst, ThreadPool& pool) {
  if (const auto& f = r.flat(); f && !f->shape.empty() && flat_in_bounds(r))
    return mask_runs(r.buffer(), f->layout.offset, f->shape, f->layout.strides, count, dst, pool);
  if (const auto& st = r.stacked(); !shape.empty() && st && st->top.strides.size() == shape.size() && stacked_in_bounds(r))
    return mask_runs(copy_below_top(r), st->top.offset, shape, st->top.strides, count, dst, pool);
  const bool flat = flat_in_bounds(r);
  pool.parallel_for(count, [&](int64_t b, int64_t e) { load_floats(r, flat, b, e - b, dst + b); }, 16384);
}

// Keys or values as the products read them: f32 in place or copied (F32Operand), or a bf16 KV
// cache's rows in place (--kv-cache bf16; weight_gemm and gemm_nn widen them in registers).
struct KvOperand {
  std::optional<F32Operand> f32;
  const uint16_t* bf16 = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;

  KvOperand(const Reader& r, const std::vector<int64_t>& shape) {
    if (const auto& st = r.strided(); st && r.dtype() == DType::BF16) {
      bf16 = reinterpret_cast<const uint16_t*>(r.buffer().bytes());
      offset = st->offset;
      strides = st->strides;
    } else {
      widen(r, shape);
    }
  }
  KvOperand(const KvOperand&) = delete;
  KvOperand& operator=(const KvOperand&) = delete;
  // An f32 copy instead (for the paths that read f32 only).
  void widen(const Reader& r, const std::vector<int64_t>& shape) {
    if (f32) return;
    f32.emplace(r, shape);
    bf16 = nullptr;
    offset = f32->offset;
    strides = f32->strides;
  }
  DType dtype() const { return bf16 ? DType::BF16 : DType::F32; }
  const void* at(int64_t i) const { return bf16 ? static_cast<const void*>(bf16 + i) : static_cast<const void*>(f32->data + i); }
  const float* f32_at(int64_t i) const { return f32->data + i; }  // after widen
};

// Decode over a long cache with few heads: each task takes one head's rows and one slice of its
// keys (flash-decoding): scores by weight_gemm, exp(score - the slice's max), their sum, and
// the weighted values by gemm_nn; then each row merges its slices, weighted by
// exp(slice max - row max). A row masked everywhere is NaN, as the reference's 0/0.
constexpr int64_t kMinSliceKeys = 512;

void attention_by_key_slices(const F32Operand* q_whole, const Reader& q_in, bool q_flat, const KvOperand& kt, const KvOperand& v,
                             const float* mask, int64_t batch, int64_t m, int64_t k, int64_t nk, int64_t d,
                             const std::vector<int64_t>& q_shape, int64_t slices, float scale, float* o, ThreadPool& pool) {
  const size_t r = q_shape.size();
  const int64_t span = (nk + slices - 1) / slices;
  const float ninf = -std::numeric_limits<float>::infinity();
  // Per (head, slice): each row's max and sum, then its unnormalised output row.
  std::vector<float> stats(static_cast<size_t>(batch * slices * m * 2)), parts(static_cast<size_t>(batch * slices * m * d));
  pool.parallel_for(batch * slices, [&](int64_t t0, int64_t t1) {
    std::vector<float> scores, q_block;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bi = t / slices, j0 = (t % slices) * span, nj = std::min(span, nk - j0);
      float* st = stats.data() + t * m * 2;
      float* part = parts.data() + t * m * d;
      if (nj <= 0) {  // an empty slice weighs nothing
        for (int64_t i = 0; i < m; ++i) st[2 * i] = ninf, st[2 * i + 1] = 0;
        std::fill(part, part + m * d, 0.0f);
        continue;
      }
      int64_t kb = kt.offset, vb = v.offset;
      add_batch_offsets(bi, q_shape, kt.strides, v.strides, kb, vb);
      const float* qa;
      int64_t lda;
      if (q_whole) {
        int64_t qb = q_whole->offset, unused = 0;
        add_batch_offsets(bi, q_shape, q_whole->strides, q_whole->strides, qb, unused);
        qa = q_whole->data + qb;
        lda = q_whole->strides[r - 2];
      } else {
        q_block.resize(static_cast<size_t>(m * k));
        load_floats(q_in, q_flat, bi * m * k, m * k, q_block.data());
        qa = q_block.data();
        lda = k;
      }
      scores.resize(static_cast<size_t>(m * nj));
      weight_gemm({qa, lda, kt.at(kb + j0 * kt.strides[r - 1]), kt.strides[r - 1], kt.dtype(), scores.data(), nj, m, nj, k}, nullptr);
      for (int64_t i = 0; i < m; ++i) {
        float* row = scores.data() + i * nj;
        const float* mr = mask + (bi * m + i) * nk + j0;
        float mx = ninf;
        for (int64_t j = 0; j < nj; ++j) {
          row[j] = mr[j] != 0 ? row[j] * scale : ninf;
          mx = std::max(mx, row[j]);
        }
        float sum = 0;
        for (int64_t j = 0; j < nj; ++j) sum += (row[j] = mx == ninf ? 0.0f : std::exp(row[j] - mx));
        st[2 * i] = mx, st[2 * i + 1] = sum;
      }
      // Masked keys (probability 0) are not skipped: 0 * inf must stay NaN, as in the reference.
      gemm_nn({scores.data(), nj, v.at(vb + j0 * v.strides[r - 2]), v.strides[r - 2], v.dtype(), part, d, m, d, nj}, nullptr);
    }
  });
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i) {
      float mx = ninf;
      for (int64_t c = 0; c < slices; ++c) mx = std::max(mx, stats[static_cast<size_t>(((bi * slices + c) * m + i) * 2)]);
      float* orow = o + (bi * m + i) * d;
      std::fill(orow, orow + d, 0.0f);
      float sum = 0;
      for (int64_t c = 0; c < slices; ++c) {
        const float* st = stats.data() + ((bi * slices + c) * m + i) * 2;
        const float w = st[0] == ninf ? 0.0f : std::exp(st[0] - mx);
        sum += w * st[1];
        axpy(w, parts.data() + ((bi * slices + c) * m + i) * d, 1, orow, d);
      }
      const float rcp = 1.0f / sum;  // a row masked everywhere: 0 * inf, NaN
      for (int64_t e = 0; e < d; ++e) orow[e] *= rcp;
    }
}

}  // namespace

bool attention(const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out,
               ThreadPool& pool, bool bf16_activations) {
  if (in.size() != 4 || out.dtype() != DType::F32) return false;
  // bf16 or f16 operands (a torch model's KV cache) are widened exactly, as the reference reads
  // them: into the f32 copies below.
  for (size_t i = 0; i < 3; ++i)
    if ((in[i].dtype() != DType::F32 && in[i].dtype() != DType::BF16 && in[i].dtype() != DType::F16) || s[i].size() < 2 ||
        s[i].size() != s[0].size())
      return false;
  const size_t r = s[0].size();
  const int64_t m = s[0][r - 2], k = s[0][r - 1], nk = s[1][r - 1], d = s[2][r - 1];
  if (s[1][r - 2] != k || s[2][r - 2] != nk) return false;
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (s[1][i] != s[0][i] || s[2][i] != s[0][i]) return false;
    batch *= s[0][i];
  }
  if (static_cast<int64_t>(out.numel()) != batch * m * d) return false;
  int64_t mask_count = 1;
  for (int64_t x : s[3]) mask_count *= x;
  if (mask_count != batch * m * nk) return false;

  // The cache's keys and values are read in place. A q view that one stride per dim cannot
  // express (grouped-query attention's q merges its group and sequence dims) is read block by
  // block inside the tasks below (its rows are consecutive in q's flat order), or copied whole
  // for the row-at-a-time path.
  KvOperand kt(in[1], s[1]), v(in[2], s[2]);
  const bool rows_in_place = kt.strides[r - 2] == 1 && v.strides[r - 1] == 1;
  if (!rows_in_place) kt.widen(in[1], s[1]), v.widen(in[2], s[2]);  // the row-at-a-time path reads f32
  const auto& q_strided = in[0].strided();
  const bool q_in_place = q_strided && in[0].dtype() == DType::F32 && q_strided->strides.back() == 1;
  std::optional<F32Operand> q_whole;
  if (q_in_place) q_whole.emplace(in[0], s[0], /*unit_inner=*/true);
  const bool q_flat = !q_in_place && flat_in_bounds(in[0]);
  // The mask as 0/1 in the scores' flat order (one pass, split over the threads: it is as large
  // as all the score matrices).
  // Reused from call to call: a fresh megabyte a layer was page faults and zeroing.
  static thread_local std::vector<float> mask_buf;
  float* mask = scratch(mask_buf, static_cast<size_t>(mask_count));
  load_mask(in[3], s[3], mask_count, mask, pool);
  float* o = reinterpret_cast<float*>(out.bytes());
  const float scale = n.constant, ninf = -std::numeric_limits<float>::infinity();

  // Keys as rows of a [nk, k] matrix and values as a [nk, d] one, each with unit inner stride (as
  // a KV cache holds them): blocks of query rows go through the GEMM kernels, scores Q·Kᵀ by
  // weight_gemm and probabilities × V by gemm_nn, one block per task (so decode's few rows per
  // head spread over heads, and prefill's blocks over both).
  if (kt.strides[r - 2] == 1 && v.strides[r - 1] == 1) {
    // Row blocks as tall as a 1 MB score block allows: each block packs its keys and values
    // once, so fewer, taller blocks repack less (prefill's 128 keys: a head's whole sequence).
    const int64_t tall_block = std::max<int64_t>(16, (int64_t(1) << 18) / std::max<int64_t>(1, nk));
    // Fewer heads than threads can share over a long cache (a decode of one or two KV heads):
    // the keys split into slices instead, each slice's rows merged afterwards.
    const int64_t tasks = batch * ((m + tall_block - 1) / tall_block), threads = static_cast<int64_t>(pool.size());
    if (m <= tall_block && tasks < 2 * threads && nk >= 2 * kMinSliceKeys) {
      const int64_t slices = std::min((4 * threads + tasks - 1) / tasks, nk / kMinSliceKeys);
      attention_by_key_slices(q_whole ? &*q_whole : nullptr, in[0], q_flat, kt, v, mask, batch, m, k, nk, d, s[0], slices, scale, o,
                              pool);
      return true;
    }
    // With bf16 activations where bf16 products are fast (AMX, or the packed GEMM's bf16-pair
    // tile on AMD's AVX-512 BF16): the keys as bf16 rows and the values as bf16 columns (both
    // zero past the keys, padded to 32), so both products go to weight_gemm's bf16 path, which
    // takes q and the probabilities as bf16 too. Rows then go in blocks of 32, and a block
    // multiplies only the keys up to the last one any of its rows sees: a causal prefill's early
    // rows see few (those after are masked for the whole block, probability 0, and left out, as
    // the CUDA kernel leaves out hidden key tiles). Not for a decode's few rows: each step would
    // convert the whole cache.
    const bool bf16_tiles = bf16_activations && (amx_available() || packed_gemm_pairs_bf16()) && k % 32 == 0 && d % 32 == 0 && m >= 16;
    if (bf16_tiles) kt.widen(in[1], s[1]), v.widen(in[2], s[2]);  // converted from f32 rows below (a prefill: the copy is small beside it)
    const int64_t row_block = bf16_tiles ? 32 : tall_block;
    // The last block takes what is left; on AMX a remainder under 16 rows joins the block before
    // (smaller blocks would go to the GEMV, which multiplies f32 activations).
    int64_t blocks = (m + row_block - 1) / row_block;
    if (bf16_tiles && blocks > 1 && m - (blocks - 1) * row_block < 16) --blocks;
    const int64_t np = (nk + 31) / 32 * 32;
    pool.parallel_for(batch * blocks, [&](int64_t t0, int64_t t1) {
      std::vector<float> scores, q_block;
      std::vector<uint16_t> keys16, values16, rows16;
      int64_t converted = -1;  // the batch entry keys16 and values16 hold: a task's row blocks share them
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t bi = t / blocks, i0 = (t % blocks) * row_block, rows = t % blocks == blocks - 1 ? m - i0 : row_block;
        int64_t kb = kt.offset, vb = v.offset;
        add_batch_offsets(bi, s[0], kt.strides, v.strides, kb, vb);
        const float* qa;
        int64_t lda;
        if (q_whole) {
          int64_t qb = q_whole->offset, unused = 0;
          add_batch_offsets(bi, s[0], q_whole->strides, q_whole->strides, qb, unused);
          qa = q_whole->data + qb + i0 * q_whole->strides[r - 2];
          lda = q_whole->strides[r - 2];
        } else {
          q_block.resize(static_cast<size_t>(rows * k));
          load_floats(in[0], q_flat, (bi * m + i0) * k, rows * k, q_block.data());
          qa = q_block.data();
          lda = k;
        }
        if (bf16_tiles) {
          if (converted != bi) {
            keys16.assign(static_cast<size_t>(np * k), 0);
            values16.assign(static_cast<size_t>(d * np), 0);
            rows16.resize(static_cast<size_t>(nk * d));
            amx_rows_to_bf16(kt.f32_at(kb), kt.strides[r - 1], nk, k, keys16.data(), k);
            amx_rows_to_bf16(v.f32_at(vb), v.strides[r - 2], nk, d, rows16.data(), d);
            for (int64_t j = 0; j < nk; ++j)
              for (int64_t e = 0; e < d; ++e) values16[static_cast<size_t>(e * np + j)] = rows16[static_cast<size_t>(j * d + e)];
            converted = bi;
          }
          // Keys up to the last one the block sees (at least one: a row masked everywhere stays
          // NaN, as the reference's 0/0), padded to the tiles' 32.
          int64_t seen = 1;
          for (int64_t i = 0; i < rows; ++i) {
            const float* mr = mask + (bi * m + i0 + i) * nk;
            for (int64_t j = nk; j > seen; --j)
              if (mr[j - 1] != 0.0f) {
                seen = j;
                break;
              }
          }
          const int64_t nv = (seen + 31) / 32 * 32;
          scores.resize(static_cast<size_t>(rows * nv));
          weight_gemm({qa, lda, keys16.data(), k, DType::BF16, scores.data(), nv, rows, nv, k, true}, nullptr);
          for (int64_t i = 0; i < rows; ++i) {
            float* row = scores.data() + i * nv;
            const float* mr = mask + (bi * m + i0 + i) * nk;
            mask_and_scale(row, mr, seen, scale);
            softmax_row(row, row, seen);
            std::fill(row + seen, row + nv, 0.0f);  // keys the block does not see, and the padding's: probability 0
          }
          weight_gemm({scores.data(), nv, values16.data(), np, DType::BF16, o + (bi * m + i0) * d, d, rows, d, nv, true}, nullptr);
          continue;
        }
        scores.resize(static_cast<size_t>(rows * nk));
        weight_gemm({qa, lda, kt.at(kb), kt.strides[r - 1], kt.dtype(), scores.data(), nk, rows, nk, k}, nullptr);
        for (int64_t i = 0; i < rows; ++i) {
          float* row = scores.data() + i * nk;
          const float* mr = mask + (bi * m + i0 + i) * nk;
          mask_and_scale(row, mr, nk, scale);
          softmax_row(row, row, nk);
        }
        // Masked keys (probability 0) are not skipped: 0 * inf must stay NaN, as in the reference.
        gemm_nn({scores.data(), nk, v.at(vb), v.strides[r - 2], v.dtype(), o + (bi * m + i0) * d, d, rows, d, nk}, nullptr);
      }
    });
    return true;
  }
  // Any other layout: one query row at a time, dot products with every key.
  if (!q_whole) q_whole.emplace(in[0], s[0], /*unit_inner=*/true);
  const F32Operand& q = *q_whole;
  pool.parallel_for(batch * m, [&](int64_t r0, int64_t r1) {
    std::vector<float> scores(static_cast<size_t>(nk));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t bi = row / m, i = row % m;
      int64_t qb = q.offset, kb = kt.offset, vb = v.offset, unused = 0;
      add_batch_offsets(bi, s[0], q.strides, kt.strides, qb, kb);
      add_batch_offsets(bi, s[0], v.strides, v.strides, vb, unused);
      const float* qr = q.data + qb + i * q.strides[r - 2];
      const float* mr = mask + row * nk;
      for (int64_t j = 0; j < nk; ++j) {
        float sc = dot(qr, kt.f32_at(kb + j * kt.strides[r - 1]), kt.strides[r - 2], k) * scale;
        scores[static_cast<size_t>(j)] = mr[j] != 0 ? sc : ninf;
      }
      softmax_row(scores.data(), scores.data(), nk);
      float* orow = o + row * d;
      for (int64_t e = 0; e < d; ++e) orow[e] = 0;
      // Masked keys (probability 0) are not skipped: 0 * inf must stay NaN, as in the reference.
      for (int64_t j = 0; j < nk; ++j)
        axpy(scores[static_cast<size_t>(j)], v.f32_at(vb + j * v.strides[r - 2]), v.strides[r - 1], orow, d);
    }
  }, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, nk * k)));
  return true;
}

}  // namespace luminal::cpu
