// A design study, not part of the build: would decode's GEMV stream as fast from weights laid out
// once as the prefill GEMM's bf16-pair panels ([n / 32][k / 2][32] words, a word holding W[c, 2q]
// and W[c, 2q + 1]) as from W's rows? If so, weights packed at load would serve both, and the
// prefill would skip packing B (15% of a bf16-activation prefill, docs/cpu_backend.md).
//   g++ -O2 -march=native -std=c++17 benchmarks/panel_gemv_study.cpp -o /tmp/panel_gemv -lpthread && /tmp/panel_gemv
// Two threads, a 4096 x 4096 bf16 weight in 16 copies read in turn (so from memory), f32 x;
// each round also sums the same bytes (the read bandwidth of that moment). Compare with
// `build/benchmarks/gemv_bench --threads 2` run right after (its 4096² bf16 GEMV on W's rows).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int64_t kN = 4096, kK = 4096, kCopies = 16;

// y[p * 32 + c] = sum over k of W[p * 32 + c, k] x[k] for panels [p0, p1): per two words of k,
// four 64-byte loads, the even values by a shift and the odd by a mask, eight FMA chains.
__attribute__((target("avx512f"))) void panel_gemv(const uint32_t* w, const float* x, float* y, int64_t p0, int64_t p1) {
  const __m512i hi = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int64_t p = p0; p < p1; ++p) {
    const uint32_t* pw = w + p * (kK / 2) * 32;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    for (int64_t q = 0; q < kK / 2; q += 2, pw += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(pw + 1024), _MM_HINT_T0);  // 4 KB ahead
      _mm_prefetch(reinterpret_cast<const char*>(pw + 1024 + 16), _MM_HINT_T0);
      const __m512i w0 = _mm512_load_si512(pw), w1 = _mm512_load_si512(pw + 16);
      const __m512i w2 = _mm512_load_si512(pw + 32), w3 = _mm512_load_si512(pw + 48);
      const __m512 xe = _mm512_set1_ps(x[2 * q]), xo = _mm512_set1_ps(x[2 * q + 1]);
      const __m512 ye = _mm512_set1_ps(x[2 * q + 2]), yo = _mm512_set1_ps(x[2 * q + 3]);
      a0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), xe, a0);
      b0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w0, hi)), xo, b0);
      a1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), xe, a1);
      b1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w1, hi)), xo, b1);
      c0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w2, 16)), ye, c0);
      d0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w2, hi)), yo, d0);
      c1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w3, 16)), ye, c1);
      d1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w3, hi)), yo, d1);
    }
    _mm512_storeu_ps(y + p * 32, _mm512_add_ps(_mm512_add_ps(a0, b0), _mm512_add_ps(c0, d0)));
    _mm512_storeu_ps(y + p * 32 + 16, _mm512_add_ps(_mm512_add_ps(a1, b1), _mm512_add_ps(c1, d1)));
  }
}

__attribute__((target("avx512f"))) int sum_words(const uint32_t* w, int64_t words) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
  for (int64_t i = 0; i < words; i += 64) {
    a = _mm512_add_epi32(a, _mm512_load_si512(w + i));
    b = _mm512_add_epi32(b, _mm512_load_si512(w + i + 16));
    c = _mm512_add_epi32(c, _mm512_load_si512(w + i + 32));
    d = _mm512_add_epi32(d, _mm512_load_si512(w + i + 48));
  }
  return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d)));
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx512f")) {
    std::printf("this study needs AVX-512\n");
    return 1;
  }
  const int64_t words = kN * kK / 2;
  std::vector<uint32_t*> copies;
  for (int c = 0; c < kCopies; ++c) {
    auto* w = static_cast<uint32_t*>(std::aligned_alloc(64, words * 4));
    for (int64_t i = 0; i < words; ++i) w[i] = static_cast<uint32_t>(i * 2654435761u) & 0x3f7f3f7fu;  // finite bf16 pairs
    copies.push_back(w);
  }
  // Checked once: panel_gemv against the same sums taken one value at a time.
  std::vector<float> x(kK), y(kN);
  for (int64_t k = 0; k < kK; ++k) x[k] = 0.001f * static_cast<float>(k % 97) - 0.05f;
  panel_gemv(copies[0], x.data(), y.data(), 0, kN / 32);
  double worst = 0;
  for (int64_t n : {0L, 31L, 32L, 1000L, kN - 1}) {
    double s = 0;
    for (int64_t k = 0; k < kK; ++k) {
      const uint32_t word = copies[0][(n / 32) * (kK / 2) * 32 + (k / 2) * 32 + n % 32];
      const uint32_t bits = k % 2 == 0 ? word << 16 : word & 0xffff0000u;
      float v;
      std::memcpy(&v, &bits, 4);
      s += static_cast<double>(v) * x[k];
    }
    worst = std::max(worst, std::abs(s - y[n]) / (1e-6 + std::abs(s)));
  }
  std::printf("panel GEMV against one-at-a-time sums: worst relative difference %.2e\n", worst);
  for (int round = 0; round < 5; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < kCopies; ++c) {
      std::thread other([&] { panel_gemv(copies[c], x.data(), y.data(), kN / 64, kN / 32); });
      panel_gemv(copies[c], x.data(), y.data(), 0, kN / 64);
      other.join();
    }
    const double gemv_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    int sink = 0;
    for (int c = 0; c < kCopies; ++c) {
      int half = 0;
      std::thread other([&] { half = sum_words(copies[c] + words / 2, words / 2); });
      sink += sum_words(copies[c], words / 2);
      other.join();
      sink += half;
    }
    const double sum_s = seconds_since(t0);
    std::printf("panel GEMV %.1f GB/s, summing read %.1f GB/s (%d)\n", kCopies * words * 4 / gemv_s / 1e9, kCopies * words * 4 / sum_s / 1e9,
                sink & 1);
  }
  return 0;
}
