// The CPU Attention kernel against the reference (matmul, scale, where, softmax, matmul step by
// step): prefill- and decode-shaped problems, keys read transposed out of a longer cache, a
// causal mask broadcast over heads and reshaped flat, fully masked rows (NaN in both), bf16 keys
// and values.
#include "backends/cpu/attention.h"

#include <cmath>

#include <limits>

#include "backends/cpu/amx_gemm.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/thread_pool.h"
#include "kernel_compare.h"

namespace luminal::cpu::testing {
namespace {

const Tolerance kSums{2e-5, 2e-5};  // outputs are sums of p*v with |v| <= 3: rounding is absolute

// q [b, m, k]; the keys and values are the first n rows of caches of `context` rows, as a
// decoder reads them ([b, k, n] transposed and [b, n, d]); the mask is [m, n] causal with
// `past` cached rows, broadcast over b and read flat.
void check(int64_t b, int64_t m, int64_t k, int64_t d, int64_t past, int64_t context) {
  const int64_t n = past + m;
  uint32_t seed = static_cast<uint32_t>(b * 7 + m * 131 + k + d * 3 + past);
  KernelInput q = whole(random_f32({b, m, k}, seed));
  KernelInput kt{random_f32({b, context, k}, seed + 1),
                 View::contiguous(exprs({b, context, k})).slice(1, Expr(0), Expr(n)).permute({0, 2, 1})};
  KernelInput v{random_f32({b, context, d}, seed + 2), View::contiguous(exprs({b, context, d})).slice(1, Expr(0), Expr(n))};
  std::vector<bool> causal(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) causal[static_cast<size_t>(i * n + j)] = j <= past + i;
  Buffer mbuf = Buffer::boolean(causal, {m, n});
  KernelInput mask{mbuf, View::contiguous(exprs({m, n})).reshape(exprs({1, m, n})).expand(0, Expr(b)).reshape(exprs({b * m * n}))};
  SCOPED_TRACE("b=" + std::to_string(b) + " m=" + std::to_string(m) + " k=" + std::to_string(k) + " past=" + std::to_string(past));
  compare(kernel_node("Attention", 2, 0.125f), {q, kt, v, mask}, {b, m, d}, kSums);
}

TEST(CpuAttention, PrefillAndDecodeShapesMatchTheReference) {
  check(1, 1, 8, 8, 0, 4);      // one query, one key
  check(2, 5, 16, 16, 0, 9);    // prefill, odd sizes
  check(8, 2, 128, 128, 37, 64);  // decode with grouped queries over a cache
  check(3, 7, 17, 9, 3, 12);    // nothing a multiple of 8
  check(4, 33, 64, 64, 0, 40);  // enough rows for every thread
  check(2, 130, 64, 32, 5, 140);  // packed GEMMs for scores and values
  check(1, 40, 16, 8, 8200, 8300);  // 8240 keys: blocks of 31 rows (1 MB of scores), the last of 9
}

// An int32 mask read flat (as the decoder's is) over more elements than one task converts
// (16384): the flat mask is split over the threads, eight elements at a time.
TEST(CpuAttention, IntMaskReadFlatInPieces) {
  const int64_t b = 2, m = 130, k = 32, d = 32, past = 5, n = past + m;
  std::vector<float> causal(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) causal[static_cast<size_t>(i * n + j)] = j <= past + i;
  Buffer mbuf = Buffer::f32(causal, {m, n}).cast(DType::I32);
  KernelInput mask{mbuf, View::contiguous(exprs({m, n})).reshape(exprs({1, m, n})).expand(0, Expr(b)).reshape(exprs({b * m * n}))};
  KernelInput q = whole(random_f32({b, m, k}, 71));
  KernelInput kt{random_f32({b, n, k}, 72), View::contiguous(exprs({b, n, k})).permute({0, 2, 1})};
  KernelInput v = whole(random_f32({b, n, d}, 73));
  compare(kernel_node("Attention", 2, 0.125f), {q, kt, v, mask}, {b, m, d}, kSums);
}

// A mask whose top layer is itself the broadcast over heads (not a reshape of it): the stored
// elements are a transposed [n, m] copy merged into rows of m·n, then broadcast, so the view is
// stacked and not flat, and the mask is converted by runs of the few elements below it.
TEST(CpuAttention, MaskBroadcastInItsTopLayerReadByRunsBelow) {
  const int64_t b = 3, m = 20, k = 16, d = 16, past = 4, n = past + m;
  std::vector<bool> causal_t(static_cast<size_t>(n * m));  // [n, m]: key-major
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) causal_t[static_cast<size_t>(j * m + i)] = j <= past + i;
  const View view = View::contiguous(exprs({n, m})).permute({1, 0}).reshape(exprs({1, m * n})).expand(0, Expr(b));
  const Buffer mbuf = Buffer::boolean(causal_t, {n, m});
  ASSERT_TRUE(Reader(mbuf, view, DimMap{}).stacked().has_value());
  ASSERT_FALSE(Reader(mbuf, view, DimMap{}).flat().has_value());
  KernelInput mask{mbuf, view};
  KernelInput q = whole(random_f32({b, m, k}, 81));
  KernelInput kt{random_f32({b, n, k}, 82), View::contiguous(exprs({b, n, k})).permute({0, 2, 1})};
  KernelInput v = whole(random_f32({b, n, d}, 83));
  compare(kernel_node("Attention", 2, 0.125f), {q, kt, v, mask}, {b, m, d}, kSums);
}

// Fewer heads than twice the threads over at least 1024 keys: decode splits the keys into
// slices and merges them (the pool here has two threads).
TEST(CpuAttention, DecodeOverALongCacheSplitsTheKeys) {
  check(1, 1, 64, 64, 3000, 3100);  // one head: 5 slices of 601 keys
  check(1, 4, 16, 8, 1100, 1200);   // four rows, 2 slices, the last shorter
  check(2, 2, 32, 16, 1500, 1600);  // two heads: 2 slices each
}

// q [b, m, k], keys stored [b, n, k] and read transposed, v [b, n, d], and a flat mask of
// b * m * n bits (seeds seed, seed + 1, seed + 2), against the reference.
void check_masked(int64_t b, int64_t m, int64_t k, int64_t n, int64_t d, uint32_t seed, float scale, const std::vector<bool>& bits) {
  KernelInput q = whole(random_f32({b, m, k}, seed));
  KernelInput kt{random_f32({b, n, k}, seed + 1), View::contiguous(exprs({b, n, k})).permute({0, 2, 1})};
  KernelInput v = whole(random_f32({b, n, d}, seed + 2));
  KernelInput mask = whole(Buffer::boolean(bits, {b * m * n}));
  compare(kernel_node("Attention", 2, scale), {q, kt, v, mask}, {b, m, d}, kSums);
}

// The slices' merge where a row's keys are masked in whole slices, or everywhere (NaN in both).
TEST(CpuAttention, SlicesMaskedWholeMergeAsTheReference) {
  const int64_t m = 2, n = 2048;
  std::vector<bool> bits(static_cast<size_t>(m * n), false);
  for (int64_t j = 1500; j < n; ++j) bits[static_cast<size_t>(j)] = true;  // row 0: only its last keys; row 1: none
  check_masked(1, m, 16, n, 8, 41, 0.3f, bits);
}

// Grouped-query attention as decoders write it: q [seq, kv_heads * group, k] read as
// [kv_heads, group * seq, k], a view one stride per dim cannot express (the kernel copies it).
TEST(CpuAttention, GroupedQueriesThroughAMergedView) {
  const int64_t seq = 3, kvh = 2, group = 2, k = 16, n = 5, d = 8;
  Buffer qb = random_f32({seq, kvh, group, k}, 11);
  KernelInput q{qb, View::contiguous(exprs({seq, kvh, group, k})).permute({1, 2, 0, 3}).reshape(exprs({kvh, group * seq, k}))};
  KernelInput kt{random_f32({kvh, n, k}, 12), View::contiguous(exprs({kvh, n, k})).permute({0, 2, 1})};
  KernelInput v = whole(random_f32({kvh, n, d}, 13));
  KernelInput mask = whole(Buffer::boolean(std::vector<bool>(static_cast<size_t>(kvh * group * seq * n), true), {kvh * group * seq * n}));
  compare(kernel_node("Attention", 2, 0.25f), {q, kt, v, mask}, {kvh, group * seq, d}, kSums);
}

// Keys stored [b, k, n] (unit stride along the keys): the row-at-a-time path.
TEST(CpuAttention, KeysWithoutUnitInnerStrideTakeTheRowPath) {
  const int64_t b = 2, m = 5, k = 12, n = 7, d = 8;
  KernelInput q = whole(random_f32({b, m, k}, 21));
  KernelInput kt = whole(random_f32({b, k, n}, 22));
  KernelInput v = whole(random_f32({b, n, d}, 23));
  KernelInput mask = whole(Buffer::boolean(std::vector<bool>(static_cast<size_t>(b * m * n), true), {b * m * n}));
  compare(kernel_node("Attention", 2, 0.5f), {q, kt, v, mask}, {b, m, d}, kSums);
}

TEST(CpuAttention, FullyMaskedRowsAreNaNAsInTheReference) {
  const int64_t b = 2, m = 3, n = 4;
  std::vector<bool> bits(static_cast<size_t>(b * m * n), true);
  for (int64_t j = 0; j < n; ++j) bits[static_cast<size_t>(1 * n + j)] = false;  // row 1 of batch 0
  check_masked(b, m, 8, n, 8, 1, 0.3f, bits);
}

// A causal prefill, then an infinite or NaN value at a key the early rows do not see: the
// reference's 0 * inf is NaN, so those rows are NaN too (a kernel that skips hidden keys must
// not skip past such a value; a 32-row-block skipping version was measured and not kept).
TEST(CpuAttention, InfiniteValuesAtHiddenKeysPropagateAsInTheReference) {
  const int64_t m = 96, n = 96, k = 16, d = 8;
  std::vector<bool> causal(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) causal[static_cast<size_t>(i * n + j)] = j <= i;
  check_masked(1, m, k, n, d, 51, 0.25f, causal);
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<float> vals(static_cast<size_t>(n * d));
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<float>(i % 7) - 3.0f;
    vals[static_cast<size_t>(70 * d + 3)] = bad;  // key 70: hidden from rows 0-69
    KernelInput q = whole(random_f32({1, m, k}, 52));
    KernelInput kt{random_f32({1, n, k}, 53), View::contiguous(exprs({1, n, k})).permute({0, 2, 1})};
    KernelInput v = whole(Buffer::f32(vals, {1, n, d}));
    KernelInput mask = whole(Buffer::boolean(causal, {m * n}));
    compare(kernel_node("Attention", 2, 0.25f), {q, kt, v, mask}, {1, m, d}, kSums);
  }
}

// bf16 keys and values (a torch model's KV cache, read through its own heads): widened exactly,
// as the reference reads them, and computed natively.
TEST(CpuAttention, Bf16KeysAndValuesMatchTheReference) {
  const int64_t b = 2, m = 4, k = 16, n = 6, d = 8, context = 9;
  KernelInput q = whole(random_f32({b, m, k}, 31));
  KernelInput kt{random_f32({b, context, k}, 32).cast(DType::BF16),
                 View::contiguous(exprs({b, context, k})).slice(1, Expr(0), Expr(n)).permute({0, 2, 1})};
  KernelInput v{random_f32({b, context, d}, 33).cast(DType::BF16), View::contiguous(exprs({b, context, d})).slice(1, Expr(0), Expr(n))};
  KernelInput mask = whole(Buffer::boolean(std::vector<bool>(static_cast<size_t>(b * m * n), true), {b * m * n}));
  compare(kernel_node("Attention", 2, 0.25f), {q, kt, v, mask}, {b, m, d}, kSums);
}

// --activations bf16 where AMX runs: both products on the tiles, q, the keys, the probabilities
// and the values rounded to bf16. Against the reference on q, k and v rounded to bf16, what
// remains is the probabilities' rounding (at most 2^-8 of each, so 2^-8 of max |v| an output).
// Rows go in blocks of 32, each multiplying only the keys up to the last one its rows see.
// 40 causal rows after 5 cached keys: one block (8 rows left over join the first), keys padded
// from 45 to the tiles' 64; 48 rows: blocks of 32 and 16, the first seeing 37 keys. 64 rows after 8128 cached keys: two blocks a head,
// which share the head's converted keys and values. 96 rows and no cache: blocks that see 32, 64
// and 96 keys.
// Three heads: with two threads one takes a head's both blocks and the next head's first.
void check_bf16_on_amx(int64_t m, int64_t past, int64_t k, int64_t d) {
  const int64_t b = 3, n = past + m;
  Buffer qb = random_f32({b, m, k}, 61), kb = random_f32({b, n, k}, 62), vb = random_f32({b, n, d}, 63);
  std::vector<bool> causal(static_cast<size_t>(b * m * n));
  for (int64_t h = 0; h < b; ++h)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) causal[static_cast<size_t>((h * m + i) * n + j)] = j <= past + i;
  const Buffer mask = Buffer::boolean(causal, {b * m * n});
  const View kt_view = View::contiguous(exprs({b, n, k})).permute({0, 2, 1});
  auto run = [&](const Buffer& q, const Buffer& keys, const Buffer& values, int how) {  // 0: reference, 1: f32, 2: bf16
    std::vector<Reader> in = {Reader(q, View::contiguous(exprs({b, m, k})), DimMap{}), Reader(keys, kt_view, DimMap{}),
                              Reader(values, View::contiguous(exprs({b, n, d})), DimMap{}), Reader(mask, View::contiguous(exprs({b * m * n})), DimMap{})};
    const std::vector<std::vector<int64_t>> shapes = {{b, m, k}, {b, k, n}, {b, n, d}, {b * m * n}};
    Buffer out(DType::F32, {b, m, d});
    static ThreadPool pool(2);
    const Node node = kernel_node("Attention", 2, 0.125f);
    if (how == 0) run_reference_kernel(node, in, shapes, out);
    else EXPECT_TRUE(cpu_kernels(pool, nullptr, {.bf16_activations = how == 2})(node, in, shapes, out));
    return out;
  };
  auto rounded = [](const Buffer& x) { return x.cast(DType::BF16).cast(DType::F32); };
  const Buffer want = run(rounded(qb), rounded(kb), rounded(vb), 0), got = run(qb, kb, vb, 2), faithful = run(qb, kb, vb, 1);
  double worst = 0, moved = 0;
  for (size_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, std::abs(got.get(i) - want.get(i)));
    moved = std::max(moved, std::abs(got.get(i) - faithful.get(i)));
  }
  SCOPED_TRACE("m=" + std::to_string(m) + " past=" + std::to_string(past));
  EXPECT_LE(worst, 3 * 0x1p-8 + 1e-5);  // values within ±3
  EXPECT_GT(moved, 1e-5) << "the bf16 path was not taken";
}

// On AMX tiles, or the packed GEMM's bf16-pair tile (AMD's AVX-512 BF16).
TEST(CpuAttention, Bf16ActivationsOnAmxRoundTheOperands) {
  if (!amx_available() && !packed_gemm_pairs_bf16()) GTEST_SKIP() << "no AMX and no bf16-pair tile here";
  check_bf16_on_amx(40, 5, 64, 64);
  check_bf16_on_amx(48, 5, 64, 64);
  check_bf16_on_amx(64, 8128, 32, 32);
  check_bf16_on_amx(96, 0, 64, 64);
}

TEST(CpuAttention, FallsBackForNonFloatValues) {
  KernelInput q = whole(random_f32({1, 2, 8}, 1));
  KernelInput kt = whole(random_f32({1, 8, 3}, 2));
  Buffer vb(DType::I32, {1, 3, 8});
  KernelInput v = whole(vb);
  KernelInput mask = whole(Buffer::boolean(std::vector<bool>(6, true), {6}));
  compare(kernel_node("Attention", 2, 0.5f), {q, kt, v, mask}, {1, 2, 8}, kSums, false);
}

}  // namespace
}  // namespace luminal::cpu::testing
