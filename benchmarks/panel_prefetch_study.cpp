// A design study, not part of the build: how far ahead, if at all, should decode's panel GEMV
// (src/backends/cpu/panel_gemv.cpp) ask for its stream in software? The variants run
// interleaved, one sweep over 28 Qwen3-0.6B-shaped layers' bf16 panels each in turn, 60 times:
// this VM's read bandwidth moves between about 34 and 58 GB/s within seconds, so variants timed
// one after the other compare moments, not variants. Reported: each variant's median and its
// median ratio to the 1 KB variant over the rounds.
//   g++ -O2 -std=c++17 benchmarks/panel_prefetch_study.cpp -o /tmp/panel_prefetch -lpthread && /tmp/panel_prefetch
// Session 41, Zen 4 VM, two threads: no prefetch 0.942-0.959x the 1 KB variant's time, 256 B
// 0.963x, 2 KB 0.962-0.975x, 4 KB 0.949-0.972x, 8 KB 0.991x, 4 KB to L2 1.032x, 4 KB
// non-temporal 0.972x. So the GEMV has none.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// One row of A against one panel ([k / 2][32] words), every line prefetched `kAhead` bytes on.
template <int kAhead, int kHint = _MM_HINT_T0>
__attribute__((target("avx512f"))) void panel_row(const uint32_t* panel, int64_t k, const float* a, float* c) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512 e0 = _mm512_setzero_ps(), e1 = e0, o0 = e0, o1 = e0;
  const uint32_t* pw = panel;
  for (int64_t q = 0; q < k / 2; ++q, pw += 32) {
    if (kAhead) {
      _mm_prefetch(reinterpret_cast<const char*>(pw) + kAhead, static_cast<_mm_hint>(kHint));
      _mm_prefetch(reinterpret_cast<const char*>(pw) + kAhead + 64, static_cast<_mm_hint>(kHint));
    }
    const __m512i w0 = _mm512_load_si512(pw), w1 = _mm512_load_si512(pw + 16);
    const __m512 xe = _mm512_set1_ps(a[2 * q]), xo = _mm512_set1_ps(a[2 * q + 1]);
    e0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w0, 16)), xe, e0);
    e1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w1, 16)), xe, e1);
    o0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w0, high)), xo, o0);
    o1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w1, high)), xo, o1);
  }
  _mm512_storeu_ps(c, _mm512_add_ps(e0, o0));
  _mm512_storeu_ps(c + 16, _mm512_add_ps(e1, o1));
}

using PanelRow = void (*)(const uint32_t*, int64_t, const float*, float*);

struct Variant {
  const char* name;
  PanelRow fn;
};

const Variant kVariants[] = {{"none", panel_row<0>},          {"256 B", panel_row<256>},  {"1 KB", panel_row<1024>},
                             {"2 KB", panel_row<2048>},       {"4 KB", panel_row<4096>},  {"8 KB", panel_row<8192>},
                             {"4 KB to L2", panel_row<4096, _MM_HINT_T1>}, {"4 KB nta", panel_row<4096, _MM_HINT_NTA>}};
constexpr int kVariantCount = sizeof(kVariants) / sizeof(kVariants[0]);
constexpr int kBaseline = 2;  // 1 KB: what the GEMV did first

}  // namespace

int main() {
  if (!__builtin_cpu_supports("avx512f")) {
    std::printf("this study needs AVX-512\n");
    return 1;
  }
  // A Qwen3-0.6B layer's projections [n, k] (q, k, v, o, gate, up, down), 28 layers, each its own allocation.
  const std::vector<std::pair<int64_t, int64_t>> layer = {{2048, 1024}, {1024, 1024}, {1024, 1024}, {1024, 2048},
                                                          {3072, 1024}, {3072, 1024}, {1024, 3072}};
  std::vector<uint32_t*> mats;
  std::vector<std::pair<int64_t, int64_t>> shapes;
  double bytes = 0;
  for (int l = 0; l < 28; ++l)
    for (auto [n, k] : layer) {
      const size_t words = static_cast<size_t>(n * k / 2);
      auto* p = static_cast<uint32_t*>(std::aligned_alloc(64, words * 4));
      for (size_t i = 0; i < words; ++i) p[i] = static_cast<uint32_t>(i * 2654435761u) & 0x3f7f3f7fu;  // finite bf16 pairs
      mats.push_back(p);
      shapes.push_back({n, k});
      bytes += static_cast<double>(words) * 4;
    }
  std::vector<float> a(4096, 0.01f), c(4096);
  // Two threads, each half of every matrix's panels; the second spins on a counter between calls.
  size_t cur = 0;
  PanelRow fn = nullptr;
  auto half = [&](int which) {
    const auto [n, k] = shapes[cur];
    const int64_t panels = n / 32, mid = panels / 2;
    for (int64_t p = which ? mid : 0; p < (which ? panels : mid); ++p) fn(mats[cur] + p * 32 * (k / 2), k, a.data(), c.data() + p * 32);
  };
  std::atomic<int> go{0}, done{0};
  std::atomic<bool> stop{false};
  std::thread other([&] {
    int seen = 0;
    while (!stop) {
      const int g = go.load();
      if (g == seen) continue;
      seen = g;
      if (!stop) half(1);
      done.fetch_add(1);
    }
  });
  std::vector<std::vector<double>> times(kVariantCount);
  for (int round = 0; round < 60; ++round)
    for (int v = 0; v < kVariantCount; ++v) {
      fn = kVariants[v].fn;
      const double t0 = now_s();
      for (cur = 0; cur < mats.size(); ++cur) {
        const int before = done.load();
        go.fetch_add(1);
        half(0);
        while (done.load() == before) {
        }
      }
      times[static_cast<size_t>(v)].push_back(now_s() - t0);
    }
  stop = true;
  go.fetch_add(1);
  other.join();
  auto median = [](std::vector<double> x) {
    std::sort(x.begin(), x.end());
    return x[x.size() / 2];
  };
  for (int v = 0; v < kVariantCount; ++v) {
    std::vector<double> ratio;
    for (size_t r = 0; r < times[static_cast<size_t>(v)].size(); ++r) ratio.push_back(times[static_cast<size_t>(v)][r] / times[kBaseline][r]);
    const double m = median(times[static_cast<size_t>(v)]);
    std::printf("prefetch %-10s median %.2f ms (%.1f GB/s), %.3fx the 1 KB variant's time (median over rounds)\n", kVariants[v].name, m * 1e3,
                bytes / m / 1e9, median(ratio));
  }
  return 0;
}
