// GEMV with a 4096x4096 weight (bf16 and f32) against this machine's measured memory read
// bandwidth, in one run. Decode streams every layer's weights once per token, so the weights
// rotate through 16 distinct matrices (512 MiB in bf16): each GEMV reads cold memory, as in a
// model, not a copy left in the last-level cache; the same for 2 to 12 rows of A. Also: GEMMs
// of 32, 128 and 512 rows against the same weight shape (prefill, compute-bound) and
// attention's probabilities × values, in GFLOP/s, the median of the reps after one warm-up call;
// and one softmax row, unmasked and causal-masked. Where weights are packed at load
// (backends/cpu/weight_panels.h), the bf16 cases also run on the packed panels.
//
//   ./build/benchmarks/gemv_bench [--threads N] [--reps R] [--bandwidth-only]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/row_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "runtime/huge_page_arena.h"
#include "backends/cpu/amx_gemm.h"
#include "backends/cpu/packed_gemm.h"
#include "backends/cpu/weight_gemm.h"
#include "backends/cpu/weight_panels.h"
#include "core/dtype.h"

using namespace luminal;
using namespace luminal::cpu;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

__attribute__((target("avx2"))) float sum_block(const float* p, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
  }
  float out[8];
  _mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

// Read bandwidth: summing a 1 GiB buffer, split over the pool's threads.
double read_bandwidth(ThreadPool& pool, int reps) {
  const int64_t n = int64_t(1) << 28;  // 1 GiB of floats
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  std::vector<double> times;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    std::vector<float> part(static_cast<size_t>(pool.size()), 0);
    pool.parallel_for(n / 32, [&](int64_t b, int64_t e) { part[static_cast<size_t>(b * pool.size() / (n / 32))] += sum_block(buf.data() + b * 32, (e - b) * 32); });
    times.push_back(now_s() - t0);
    for (float p : part) sink = sink + p;
  }
  return static_cast<double>(n) * 4 / median(times) / 1e9;
}

struct Result {
  double ms, gbps;
  double of_read = 0;  // gemv(): the median over reps of GB/s against a summing read right after
};

// Integer sum of 32-bit words (any bit pattern: no denormal slow paths), for a read of W's bytes.
__attribute__((target("avx2"))) uint32_t sum_words(const uint32_t* p, int64_t n) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_epi32(s0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    s1 = _mm256_add_epi32(s1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    s2 = _mm256_add_epi32(s2, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 16)));
    s3 = _mm256_add_epi32(s3, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 24)));
  }
  alignas(32) uint32_t out[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(out), _mm256_add_epi32(_mm256_add_epi32(s0, s1), _mm256_add_epi32(s2, s3)));
  uint32_t t = 0;
  for (uint32_t x : out) t += x;
  for (; i < n; ++i) t += p[i];
  return t;
}

// Seconds to read `bytes` from `p` with the pool's threads, each a contiguous part.
double timed_read(ThreadPool& pool, const void* p, size_t bytes) {
  const int64_t words = static_cast<int64_t>(bytes / 4);
  std::vector<uint32_t> part(static_cast<size_t>(pool.size()), 0);
  const double t0 = now_s();
  pool.parallel_for(pool.size(), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      part[static_cast<size_t>(t)] = sum_words(static_cast<const uint32_t*>(p) + t * words / pool.size(), words / pool.size());
  });
  const double s = now_s() - t0;
  static volatile uint32_t sink = 0;
  for (uint32_t x : part) sink = sink + x;
  return s;
}

// `panels`: bf16 W packed as at load (backends/cpu/weight_panels.h), its rows then freed.
Result gemv(ThreadPool& pool, DType t, int64_t m, int reps, bool panels = false) {
  const int64_t N = 4096, K = 4096, copies = 16;
  size_t es = t == DType::BF16 ? 2 : 4;
  std::vector<uint8_t> w(static_cast<size_t>(copies * N * K) * es);
  for (size_t i = 0; i < w.size(); i += 2) {
    uint16_t v = f32_to_bf16(static_cast<float>((i / 2) % 97) * 0.01f - 0.5f);
    std::memcpy(&w[i], &v, 2);
  }
  std::vector<WeightPanels> packed;
  if (panels) {
    for (int64_t i = 0; i < copies; ++i)
      packed.push_back(WeightPanels::pack(reinterpret_cast<const uint16_t*>(w.data()) + i * N * K, N, K, K, &pool));
    w = std::vector<uint8_t>(static_cast<size_t>(N * K) * es);  // rows no longer read: one copy's room for `w`
  }
  std::vector<float> a(static_cast<size_t>(m * K), 0.5f), c(static_cast<size_t>(m * N));
  std::vector<double> times, of_read;
  const size_t bytes = static_cast<size_t>(N * K) * es;
  auto copy_bytes = [&](int64_t i) -> const void* {
    return panels ? static_cast<const void*>(packed[static_cast<size_t>(i)].words()) : w.data() + static_cast<size_t>(i) * bytes;
  };
  for (int r = 0; r < reps * static_cast<int>(copies); ++r) {
    const uint8_t* wr = panels ? w.data() : w.data() + static_cast<size_t>((r % copies) * N * K) * es;
    WeightGemm g{a.data(), K, wr, K, t, c.data(), N, m, N, K};
    if (panels) g.panels = packed[static_cast<size_t>(r % copies)].words();
    double t0 = now_s();
    weight_gemm(g, &pool);
    times.push_back(now_s() - t0);
    // The same number of bytes summed right after (another copy, also out of cache): this
    // VM's read bandwidth moves by half within seconds, so each call is set against its moment.
    of_read.push_back(timed_read(pool, copy_bytes((r + copies / 2) % copies), bytes) / times.back());
  }
  double s = median(times);
  return {s * 1e3, static_cast<double>(bytes) / s / 1e9, median(of_read)};
}

// GEMVs one after the other as decode runs them, over `copies` of distinct bf16 weights of
// `shapes` ([n, k] each, so nothing stays in cache): GB/s over all of them. Small matrices pay
// the per-call overhead (thread wake-up, row split) that one 4096x4096 GEMV hides.
// `scattered`: the matrices laid out in memory in a shuffled order (as a safetensors file holds
// them, by name), still multiplied in the model's order, so that each GEMV starts its stream
// somewhere the one before did not lead.
// `panels`: each matrix packed as at load instead (its own allocation, as the loader makes them).
Result stream_gemvs(ThreadPool& pool, const std::vector<std::pair<int64_t, int64_t>>& shapes, int copies, int reps, bool huge_pages,
                    bool scattered = false, bool panels = false) {
  size_t per_copy = 0;
  int64_t widest = 0;
  for (auto [n, k] : shapes) per_copy += static_cast<size_t>(n * k), widest = std::max({widest, n, k});
  Buffer w(DType::BF16, {static_cast<int64_t>(per_copy * copies)});
  uint16_t* wd = reinterpret_cast<uint16_t*>(w.bytes());
  for (size_t i = 0; i < w.numel(); ++i) wd[i] = f32_to_bf16(static_cast<float>(i % 97) * 0.01f - 0.5f);
  // As models load on this backend: copied into transparent huge pages (runtime/huge_page_arena.h).
  if (huge_pages) w = HugePageArena::create(w.nbytes())->adopt(w);
  // Each matrix's offset: in call order, or a fixed shuffle of the slots of call order.
  std::vector<size_t> order(shapes.size() * static_cast<size_t>(copies)), offset(order.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (scattered)
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[(i * 2654435761u) % i]);
  {
    size_t at = 0;
    for (size_t slot : order) {
      offset[slot] = at;
      auto [n, k] = shapes[slot % shapes.size()];
      at += static_cast<size_t>(n * k);
    }
  }
  std::vector<WeightPanels> packed;
  if (panels) {
    const uint16_t* base = reinterpret_cast<const uint16_t*>(std::as_const(w).bytes());
    for (size_t call = 0; call < order.size(); ++call) {
      auto [n, k] = shapes[call % shapes.size()];
      packed.push_back(WeightPanels::pack(base + offset[call], n, k, k, &pool, huge_pages));
    }
    w = Buffer(DType::BF16, {1});
  }
  std::vector<float> a(static_cast<size_t>(widest), 0.5f), c(static_cast<size_t>(widest));
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    const uint16_t* base = reinterpret_cast<const uint16_t*>(std::as_const(w).bytes());
    size_t call = 0;
    for (int l = 0; l < copies; ++l)
      for (auto [n, k] : shapes) {
        WeightGemm g{a.data(), k, panels ? base : base + offset[call], k, DType::BF16, c.data(), n, 1, n, k};
        if (panels) g.panels = packed[call].words();
        ++call;
        weight_gemm(g, &pool);
      }
    times.push_back(now_s() - t0);
  }
  double s = median(times);
  return {s * 1e3, static_cast<double>(per_copy * copies * 2) / s / 1e9};
}

// A Qwen3-0.6B-shaped decode layer's projections (q, k, v, o, gate, up, down), and its
// vocabulary head (151936 x 1024: 311 MB, a quarter of a decode step's reads).
const std::vector<std::pair<int64_t, int64_t>> kQwen3Layer = {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048},
                                                              {3072, 1024}, {3072, 1024}, {1024, 3072}};
const std::vector<std::pair<int64_t, int64_t>> kQwen3Head = {{151936, 1024}};

// Prefill: m rows against one 4096×4096 weight (compute-bound, so no rotation).
double gemm_gflops(ThreadPool& pool, DType t, int64_t m, int reps, bool bf16_activations = false, bool panels = false) {
  const int64_t N = 4096, K = 4096;
  std::vector<float> wf(static_cast<size_t>(N * K));
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) {
    wf[i] = static_cast<float>(i % 97) * 0.01f - 0.5f;
    wb[i] = f32_to_bf16(wf[i]);
  }
  const void* w = t == DType::BF16 ? static_cast<const void*>(wb.data()) : wf.data();
  std::vector<float> a(static_cast<size_t>(m * K), 0.5f), c(static_cast<size_t>(m * N));
  std::vector<double> times;
  WeightGemm g{a.data(), K, w, K, t, c.data(), N, m, N, K, bf16_activations};
  std::optional<WeightPanels> packed;
  if (panels) g.panels = packed.emplace(WeightPanels::pack(wb.data(), N, K, K, &pool)).words();
  for (int r = 0; r <= reps; ++r) {
    double t0 = now_s();
    weight_gemm(g, &pool);
    if (r > 0) times.push_back(now_s() - t0);
  }
  return 2.0 * static_cast<double>(m * N * K) / median(times) / 1e9;
}

// Attention's probabilities [s, s] × values [s, 64] for `heads` heads (gemm_nn).
double attention_values_gflops(ThreadPool& pool, int64_t s, int64_t heads, int reps) {
  const int64_t d = 64;
  std::vector<float> p(static_cast<size_t>(heads * s * s), 1.0f / static_cast<float>(s)), v(static_cast<size_t>(heads * s * d), 0.25f),
      c(static_cast<size_t>(heads * s * d));
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    double t0 = now_s();
    for (int64_t h = 0; h < heads; ++h)
      gemm_nn({p.data() + h * s * s, s, v.data() + h * s * d, d, DType::F32, c.data() + h * s * d, d, s, d, s}, &pool);
    if (r > 0) times.push_back(now_s() - t0);
  }
  return 2.0 * static_cast<double>(heads * s * s * d) / median(times) / 1e9;
}

}  // namespace

// One softmax row of 128 scores, on one thread: unmasked, and causal-masked (keys past the
// row's position -inf, as in a prefill's attention), in ns per row.
std::pair<double, double> softmax_row_ns(int reps) {
  std::vector<float> row(128);
  double ns[2];
  for (int masked = 0; masked < 2; ++masked) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const int rows = 20000;
      const double t0 = now_s();
      for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < 128; ++j) row[j] = masked && j > i % 128 ? -__builtin_inff() : 0.01f * static_cast<float>(j);
        softmax_row(row.data(), row.data(), 128);
      }
      t.push_back((now_s() - t0) / rows * 1e9);
    }
    std::sort(t.begin(), t.end());
    ns[masked] = t[t.size() / 2];
  }
  return {ns[0], ns[1]};
}

int main(int argc, char** argv) {
  int threads = 0, reps = 5;
  bool bandwidth_only = false;  // decode_bench's floor, measured in the same run as the engines
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--bandwidth-only") bandwidth_only = true;
    else {
      std::fprintf(stderr, "usage: gemv_bench [--threads N] [--reps R] [--bandwidth-only]\n");
      return 2;
    }
  }
  ThreadPool pool(threads);
  if (bandwidth_only) {
    std::printf("memory read bandwidth (sum of 1 GiB): %.1f GB/s\n", read_bandwidth(pool, 2 * reps + 1));
    return 0;
  }
  std::printf("threads %d, AVX2+FMA %s, AMX %s\n", pool.size(), weight_gemm_has_avx2() ? "yes" : "no",
              amx_available() ? "yes (bf16 GEMMs from 16 rows run on its tiles)" : "no");
  double bw = read_bandwidth(pool, 2 * reps + 1);
  std::printf("memory read bandwidth (sum of 1 GiB): %.1f GB/s\n", bw);
  // "of the read after each": the median over calls of the call's GB/s against a summing read of
  // as many bytes right after it (the read bandwidth of that moment).
  for (DType t : {DType::BF16, DType::F32}) {
    Result r = gemv(pool, t, 1, reps);
    std::printf("GEMV 4096x4096 %-4s: %.3f ms  %.1f GB/s  %.0f%% of read bandwidth, %.0f%% of the read after each\n", dtype_name(t), r.ms,
                r.gbps, 100 * r.gbps / bw, 100 * r.of_read);
  }
  // bf16 weights packed at load (the default where packed_weights_supported): the panel GEMV.
  const bool panels_here = packed_weights_supported();
  if (panels_here) {
    Result r = gemv(pool, DType::BF16, 1, reps, true);
    std::printf("GEMV 4096x4096 bf16 packed at load: %.3f ms  %.1f GB/s  %.0f%% of read bandwidth, %.0f%% of the read after each\n", r.ms,
                r.gbps, 100 * r.gbps / bw, 100 * r.of_read);
  }
  // A few rows (the search profiles at seq = 4; short prompts, speculative steps): a stream over W.
  for (int64_t m : {2, 3, 4, 5, 8, 12})
    for (bool p : {false, true}) {
      if (p && !panels_here) continue;
      Result r = gemv(pool, DType::BF16, m, reps, p);
      std::printf("GEMM %ld rows x 4096x4096 bf16%s: %.3f ms  %.1f GB/s  %.0f%% of read bandwidth, %.0f%% of the read after each\n",
                  static_cast<long>(m), p ? " packed at load" : "", r.ms, r.gbps, 100 * r.gbps / bw, 100 * r.of_read);
    }
  {
    // Three copies, read in turn: one 311 MB head read again every rep ran at 37-39 GB/s here
    // where three in turn ran at 27.6 (the 2-thread sum's figure), so something between the
    // cores and memory keeps much of a buffer read a moment before. A model never re-reads a
    // weight within a step.
    Result h = stream_gemvs(pool, kQwen3Head, 3, reps, false);
    std::printf("GEMV of a Qwen3-0.6B vocabulary head, 151936x1024 bf16 (3 copies in turn): %.2f ms  %.1f GB/s  %.0f%% of read bandwidth\n",
                h.ms / 3, h.gbps, 100 * h.gbps / bw);
  }
  for (bool huge : {false, true}) {
    Result l = stream_gemvs(pool, kQwen3Layer, 28, 2 * reps + 1, huge);
    std::printf("GEMVs of 28 Qwen3-0.6B layers bf16, %s: %.2f ms  %.1f GB/s  %.0f%% of read bandwidth\n",
                huge ? "huge pages" : "4 KB pages", l.ms, l.gbps, 100 * l.gbps / bw);
  }
  if (panels_here)
    for (bool huge : {false, true}) {
      Result l = stream_gemvs(pool, kQwen3Layer, 28, 2 * reps + 1, huge, false, true);
      std::printf("GEMVs of 28 Qwen3-0.6B layers bf16 packed at load, %s: %.2f ms  %.1f GB/s  %.0f%% of read bandwidth\n",
                  huge ? "huge pages" : "4 KB pages", l.ms, l.gbps, 100 * l.gbps / bw);
    }
  {
    Result l = stream_gemvs(pool, kQwen3Layer, 28, 2 * reps + 1, false, true);
    std::printf("GEMVs of 28 Qwen3-0.6B layers bf16, 4 KB pages, matrices in shuffled places: %.2f ms  %.1f GB/s  %.0f%% of read bandwidth\n",
                l.ms, l.gbps, 100 * l.gbps / bw);
  }
  for (int64_t m : {32, 128, 512})
    for (DType t : {DType::BF16, DType::F32}) {
      double gf = gemm_gflops(pool, t, m, reps);
      std::printf("GEMM %ldx4096 x 4096x4096 %-4s: %.2f ms  %.1f GFLOP/s\n", static_cast<long>(m), dtype_name(t),
                  2.0 * static_cast<double>(m) * 4096 * 4096 / gf / 1e6, gf);
    }
  // `--activations bf16`: A rounded to bf16 where the CPU multiplies bf16 pairs (AMX, or AVX-512 BF16 where it pays).
  if (packed_gemm_pairs_bf16() || amx_available())
    for (int64_t m : {32, 128, 512}) {
      double gf = gemm_gflops(pool, DType::BF16, m, reps, true);
      std::printf("GEMM %ldx4096 x 4096x4096 bf16, bf16 activations: %.2f ms  %.1f GFLOP/s\n", static_cast<long>(m),
                  2.0 * static_cast<double>(m) * 4096 * 4096 / gf / 1e6, gf);
    }
  // The same weight packed at load: the GEMM reads (pairs) or widens (f32 tiles) its panels.
  if (panels_here)
    for (bool bf16_act : {false, true}) {
      if (bf16_act && !packed_gemm_pairs_bf16()) continue;
      for (int64_t m : {32, 128, 512}) {
        double gf = gemm_gflops(pool, DType::BF16, m, reps, bf16_act, true);
        std::printf("GEMM %ldx4096 x 4096x4096 bf16 packed at load%s: %.2f ms  %.1f GFLOP/s\n", static_cast<long>(m),
                    bf16_act ? ", bf16 activations" : "", 2.0 * static_cast<double>(m) * 4096 * 4096 / gf / 1e6, gf);
      }
    }
  std::printf("GEMM_NN attention 512x512 x 512x64 f32, 16 heads: %.1f GFLOP/s\n", attention_values_gflops(pool, 512, 16, reps));
  const auto [plain, causal] = softmax_row_ns(reps);
  std::printf("softmax row of 128 (filling it included): %.0f ns, causal-masked: %.0f ns\n", plain, causal);
  return 0;
}
