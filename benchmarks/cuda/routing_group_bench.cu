// Where an MoE decode's routing group spends its time: a design study for the generated small
// groups (src/backends/cuda/cuda_small_group_codegen.cpp), not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/routing_group_bench.cu -o /tmp/rgroup
//   /tmp/rgroup [launches=2000] [ties]
// The Qwen3-30B-A3B routing of one token as the executor runs it with the router through the o
// projection (lm_RoutedGroup_*): the 128 logits come unscaled, h (2048 floats) gives their
// norm's scale, then softmax, the top 8 (8 rounds of warp maxima over order-preserving keys),
// the chosen probabilities' sum and the scales (chosen / sum). One block of 256 threads.
// Forms:
//   generated  the generated code's phases, each through shared memory between __syncthreads
//   warp       the same phases after the scale, warp 0 alone, __syncwarp between them
//   registers  the same arithmetic in warp 0's registers (no shared arrays after the scale)
//   unrolled   the generated phases with their row loops' bounds known at compile time
//   counted    unrolled, and the top 8 by counting, for each value, those before it (E² / 256
//              comparisons a thread) instead of 8 rounds of warp maxima
//   h-known    unrolled, and h's loads in a loop of known trips (all in flight)
//   ballot     h-known, and each round's one lane with the largest key found by a ballot
// Each form's outputs must equal the generated form's bit for bit. Printed per form: the time a
// launch takes in a chain of launches (no overlap, one graph) less an empty kernel's, and the
// phase stamps (clock64 of thread 0, from the block's start) of one launch.
// Session 53 on the H100 (us over an empty launch of 0.77): generated 2.63, warp 2.67,
// registers 1.84, unrolled 2.04, counted 1.97, h-known 1.88, ballot 2.17; the same with ties.
// See docs/cuda_backend.md ("The routing group's loops of known bounds").
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_check.h"

constexpr int E = 128, N = 2048, K = 8, kThreads = 256, kStamps = 8;
constexpr float kEps = 1e-6f;

struct Out {
  float* probs;   // [E] softmax
  float* chosen;  // [E] 1 where chosen
  float* sum;     // [1]
  float* scales;  // [E]
  long long* stamps;
};

__device__ __forceinline__ float fmax_nan(float a, float b) { return (a != a) ? a : ((b != b || b > a) ? b : a); }
__device__ __forceinline__ void stamp(const Out& o, int i, long long t0) {
  if (threadIdx.x == 0 && o.stamps) o.stamps[i] = clock64() - t0;
}

template <typename F>
__device__ float block_reduce(float v, F f) {
  __shared__ float red[32];
  for (int s = 16; s > 0; s >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, s));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = red[0];
#pragma unroll
  for (int w = 1; w < 32; ++w)
    if (w < warps) v = f(v, red[w]);
  return v;
}

__device__ __forceinline__ unsigned order_key(float f) {
  const unsigned b = __float_as_uint(f == 0.0f ? 0.0f : f);
  return f != f ? 0u : (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The scaled logits into `rsl` (the generated router_scaled_logits_code, every thread).
// kKnownTrips: h's loads in a loop of known trips for blocks of kThreads (all in flight).
template <bool kKnownTrips = false>
__device__ void scaled_logits(const float* logits, const float* h, float* rsl) {
  float raw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = threadIdx.x + i * blockDim.x;
    raw[i] = e < E ? logits[e] : 0.0f;
  }
  const float4* hh = (const float4*)h;
  float q = 0.0f;
  if (kKnownTrips && blockDim.x == kThreads) {
    constexpr int T = (N / 4 + kThreads - 1) / kThreads;
    float4 x[T];
#pragma unroll
    for (int i = 0; i < T; ++i) x[i] = hh[threadIdx.x + i * kThreads];
#pragma unroll
    for (int i = 0; i < T; ++i) {
      q = __fmaf_rn(x[i].x, x[i].x, q); q = __fmaf_rn(x[i].y, x[i].y, q);
      q = __fmaf_rn(x[i].z, x[i].z, q); q = __fmaf_rn(x[i].w, x[i].w, q);
    }
  } else {
#pragma unroll 4
    for (int p = threadIdx.x; p < N / 4; p += blockDim.x) {
      const float4 x = hh[p];
      q = __fmaf_rn(x.x, x.x, q); q = __fmaf_rn(x.y, x.y, q);
      q = __fmaf_rn(x.z, x.z, q); q = __fmaf_rn(x.w, x.w, q);
    }
  }
  q = block_reduce(q, [](float a, float b) { return a + b; });
  const float sc = 1.0f / sqrtf(q * (1.0f / (float)N) + kEps);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int e = threadIdx.x + i * blockDim.x;
    if (e < E) rsl[e] = raw[i] * sc;
  }
  __syncthreads();
}

constexpr float kLog2e = 0x1.715476p+0f;

// The top-k ranks' K rounds in warp 0 (the generated code's): lane holds keys lane + 32 i; each
// round takes the largest key left at its lowest index and gives it the round as its rank.
// kBallot: the winner's lane found by a ballot where one lane holds the largest key.
template <bool kBallot>
__device__ __forceinline__ void rank_rounds(unsigned (&key)[4], int (&tr)[4], int lane) {
  for (int r = 0; r < K; ++r) {
    unsigned bk = 0u;
    int be = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (key[i] > bk) { bk = key[i]; be = lane + 32 * i; }
    const unsigned mk = __reduce_max_sync(0xffffffffu, bk);
    if (mk == 0u) break;
    int me;
    if (kBallot) {  // one lane holds the largest key (a tie needs the second reduction)
      const unsigned b = __ballot_sync(0xffffffffu, bk == mk);
      me = (b & (b - 1)) == 0 ? __shfl_sync(0xffffffffu, be, __ffs(b) - 1) : __reduce_min_sync(0xffffffffu, bk == mk ? be : 0x7fffffff);
    } else {
      me = __reduce_min_sync(0xffffffffu, bk == mk ? be : 0x7fffffff);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (lane + 32 * i == me) { key[i] = 0u; tr[i] = r; }
  }
}

// Warp 0: the probabilities in s0 ranked by rank_rounds, 1 into s1 (and o.chosen) where chosen.
template <bool kBallot>
__device__ void chosen_by_rounds(const float* s0, float* s1, const Out& o) {
  const int lane = threadIdx.x;
  unsigned key[4];
  int tr[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float f = s0[lane + 32 * i];
    key[i] = order_key(f);
    tr[i] = f != f ? 0 : K;
  }
  rank_rounds<kBallot>(key, tr, lane);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float v = (float)(int)((float)tr[i] < (float)K);
    s1[lane + 32 * i] = v;
    o.chosen[lane + 32 * i] = v;
  }
}

// The generated phases, through shared memory; kWarpOnly: warp 0 alone after the scale,
// __syncwarp between phases.
template <bool kWarpOnly>
__global__ void __launch_bounds__(kThreads) group_phases(const float* logits, const float* h, Out o) {
  const long long t0 = clock64();
  __shared__ float rsl[E], s0[E], s1[E], s2[1], s3[E];
  scaled_logits(logits, h, rsl);
  stamp(o, 0, t0);
  if (kWarpOnly && threadIdx.x >= 32) return;
  auto sync = [] { if (kWarpOnly) __syncwarp(); else __syncthreads(); };
  if (threadIdx.x < 32) {  // softmax, one row, 32 threads a row
    const int t = threadIdx.x;
    float m = __int_as_float((int)0xff800000u);
    for (int k = t; k < E; k += 32) m = fmax_nan(m, rsl[k]);
    for (int x = 16; x > 0; x >>= 1) m = fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, x));
    float sum = 0.0f;
    for (int k = t; k < E; k += 32) sum += exp2f((rsl[k] + m * -1.0f) * kLog2e);
    for (int x = 16; x > 0; x >>= 1) sum = sum + __shfl_xor_sync(0xffffffffu, sum, x);
    const float rcp = 1.0f / sum;
    for (int k = t; k < E; k += 32) { const float v = exp2f((rsl[k] + m * -1.0f) * kLog2e) * rcp; s0[k] = v; o.probs[k] = v; }
  }
  sync();
  stamp(o, 1, t0);
  if (threadIdx.x < 32) chosen_by_rounds<false>(s0, s1, o);  // top-k ranks
  sync();
  stamp(o, 2, t0);
  if (threadIdx.x < 32) {  // the chosen probabilities' sum
    float acc = 0.0f;
    for (int k = threadIdx.x; k < E; k += 32) acc = acc + s0[k] * s1[k];
    for (int x = 16; x > 0; x >>= 1) acc = acc + __shfl_xor_sync(0xffffffffu, acc, x);
    if (threadIdx.x == 0) { s2[0] = acc; o.sum[0] = acc; }
  }
  sync();
  stamp(o, 3, t0);
  for (int z = threadIdx.x; z < E; z += kWarpOnly ? 32 : blockDim.x) {  // the scales
    const float v = (s0[z] * s1[z]) * (1.0f / s2[0]);
    s3[z] = v;
    o.scales[z] = v;
  }
  sync();
  stamp(o, 4, t0);
}

// The same arithmetic, warp 0's registers: lane holds experts lane + 32 i.
__global__ void __launch_bounds__(kThreads) group_registers(const float* logits, const float* h, Out o) {
  const long long t0 = clock64();
  __shared__ float rsl[E];
  scaled_logits(logits, h, rsl);
  stamp(o, 0, t0);
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  float l[4], p[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) l[i] = rsl[lane + 32 * i];
  float m = __int_as_float((int)0xff800000u);
#pragma unroll
  for (int i = 0; i < 4; ++i) m = fmax_nan(m, l[i]);
  for (int x = 16; x > 0; x >>= 1) m = fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, x));
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) sum += exp2f((l[i] + m * -1.0f) * kLog2e);
  for (int x = 16; x > 0; x >>= 1) sum = sum + __shfl_xor_sync(0xffffffffu, sum, x);
  const float rcp = 1.0f / sum;
#pragma unroll
  for (int i = 0; i < 4; ++i) { p[i] = exp2f((l[i] + m * -1.0f) * kLog2e) * rcp; o.probs[lane + 32 * i] = p[i]; }
  stamp(o, 1, t0);
  unsigned key[4];
  int tr[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) { key[i] = order_key(p[i]); tr[i] = p[i] != p[i] ? 0 : K; }
  rank_rounds<false>(key, tr, lane);
  float c[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) { c[i] = (float)(int)((float)tr[i] < (float)K); o.chosen[lane + 32 * i] = c[i]; }
  stamp(o, 2, t0);
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) acc = acc + p[i] * c[i];
  for (int x = 16; x > 0; x >>= 1) acc = acc + __shfl_xor_sync(0xffffffffu, acc, x);
  if (lane == 0) o.sum[0] = acc;
  stamp(o, 3, t0);
#pragma unroll
  for (int i = 0; i < 4; ++i) o.scales[lane + 32 * i] = (p[i] * c[i]) * (1.0f / acc);
  stamp(o, 4, t0);
}


// The generated phases with the row loops' bounds known (one row of 128, a warp a row, as the
// group runs for one token in blocks of 256): unrolled, each value loaded once.
template <int kTopK, bool kKnownTrips>
__global__ void __launch_bounds__(kThreads) group_unrolled(const float* logits, const float* h, Out o) {
  constexpr bool kCounted = kTopK == 1, kBallot = kTopK == 2;
  const long long t0 = clock64();
  __shared__ float rsl[E], s0[E], s1[E], s2[1], s3[E];
  __shared__ unsigned keys[E];
  __shared__ int half_count[E];
  scaled_logits<kKnownTrips>(logits, h, rsl);
  stamp(o, 0, t0);
  if (threadIdx.x < 32) {  // softmax
    const int t = threadIdx.x;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = rsl[t + 32 * i];
    float m = __int_as_float((int)0xff800000u);
#pragma unroll
    for (int i = 0; i < 4; ++i) m = fmax_nan(m, v[i]);
    for (int x = 16; x > 0; x >>= 1) m = fmax_nan(m, __shfl_xor_sync(0xffffffffu, m, x));
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) sum += exp2f((v[i] + m * -1.0f) * kLog2e);
    for (int x = 16; x > 0; x >>= 1) sum = sum + __shfl_xor_sync(0xffffffffu, sum, x);
    const float rcp = 1.0f / sum;
#pragma unroll
    for (int i = 0; i < 4; ++i) { const float p = exp2f((v[i] + m * -1.0f) * kLog2e) * rcp; s0[t + 32 * i] = p; o.probs[t + 32 * i] = p; }
  }
  __syncthreads();
  stamp(o, 1, t0);
  if (!kCounted) {
    if (threadIdx.x < 32) chosen_by_rounds<kBallot>(s0, s1, o);  // top-k ranks: rounds
  } else {
    // Counted: the values before each in top-k order, every thread half a row of comparisons.
    if (threadIdx.x < E) keys[threadIdx.x] = order_key(s0[threadIdx.x]);
    __syncthreads();
    const int e = threadIdx.x & (E - 1), half = threadIdx.x >> 7;
    const unsigned ke = keys[e];
    int c = 0;
#pragma unroll
    for (int q = 0; q < E / 2; q += 4) {
      const uint4 kk = *(const uint4*)&keys[half * (E / 2) + q];
      const int k0 = half * (E / 2) + q;
      c += (kk.x > ke) | ((kk.x == ke) & (k0 + 0 < e));
      c += (kk.y > ke) | ((kk.y == ke) & (k0 + 1 < e));
      c += (kk.z > ke) | ((kk.z == ke) & (k0 + 2 < e));
      c += (kk.w > ke) | ((kk.w == ke) & (k0 + 3 < e));
    }
    if (half == 1) half_count[e] = c;
    __syncthreads();
    if (half == 0) {
      const int count = ke == 0u ? 0 : c + half_count[e];
      const float v = (float)(int)((float)(count < K ? count : K) < (float)K);
      s1[e] = v;
      o.chosen[e] = v;
    }
  }
  __syncthreads();
  stamp(o, 2, t0);
  if (threadIdx.x < 32) {  // the chosen probabilities' sum
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) acc = acc + s0[threadIdx.x + 32 * i] * s1[threadIdx.x + 32 * i];
    for (int x = 16; x > 0; x >>= 1) acc = acc + __shfl_xor_sync(0xffffffffu, acc, x);
    if (threadIdx.x == 0) { s2[0] = acc; o.sum[0] = acc; }
  }
  __syncthreads();
  stamp(o, 3, t0);
  if (threadIdx.x < E) {  // the scales
    const int z = threadIdx.x;
    const float v = (s0[z] * s1[z]) * (1.0f / s2[0]);
    s3[z] = v;
    o.scales[z] = v;
  }
  __syncthreads();
  stamp(o, 4, t0);
}

__global__ void __launch_bounds__(kThreads) empty_kernel(const float*, const float*, Out) {}

using Kernel = void (*)(const float*, const float*, Out);

float chain_us(Kernel k, const float* logits, const float* h, Out o, int launches, cudaStream_t s) {
  o.stamps = nullptr;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; ++i) k<<<1, kThreads, 0, s>>>(logits, h, o);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  std::vector<float> each;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    each.push_back(ms * 1000.0f / launches);
  }
  std::sort(each.begin(), each.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return each[each.size() / 2];
}

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 2000;
  std::vector<float> hl(E), hh(N);
  uint32_t st = 12345;
  auto rnd = [&] { st = st * 1664525u + 1013904223u; return ((st >> 8) & 0xffff) / 65536.0f - 0.5f; };
  for (float& v : hl) v = rnd() * 8.0f;
  for (float& v : hh) v = rnd() * 2.0f;
  if (argc > 2 && std::strcmp(argv[2], "ties") == 0)  // equal largest logits: the ties break by index
    for (int e : {5, 9, 70, 100, 127}) hl[e] = 9.0f;
  float *logits, *h, *outs;
  long long* stamps;
  CK(cudaMalloc(&logits, E * 4));
  CK(cudaMalloc(&h, N * 4));
  CK(cudaMalloc(&outs, 7 * 4 * (3 * E + 1)));
  CK(cudaMalloc(&stamps, kStamps * 8));
  CK(cudaMemcpy(logits, hl.data(), E * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(h, hh.data(), N * 4, cudaMemcpyHostToDevice));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  struct Form { const char* name; Kernel k; };
  const Form forms[] = {{"generated", group_phases<false>}, {"warp", group_phases<true>}, {"registers", group_registers},
                        {"unrolled", group_unrolled<0, false>}, {"counted", group_unrolled<1, false>},
                        {"h-known", group_unrolled<0, true>}, {"ballot", group_unrolled<2, true>}};
  std::vector<float> first;
  const float empty = chain_us(empty_kernel, logits, h, Out{}, launches, s);
  std::printf("empty kernel: %.3f us a launch in a chain of %d\n", empty, launches);
  for (int f = 0; f < 7; ++f) {
    float* base = outs + f * (3 * E + 1);
    Out o{base, base + E, base + 2 * E, base + 2 * E + 1, stamps};
    CK(cudaMemset(stamps, 0, kStamps * 8));
    forms[f].k<<<1, kThreads, 0, s>>>(logits, h, o);  // warm
    forms[f].k<<<1, kThreads, 0, s>>>(logits, h, o);
    CK(cudaStreamSynchronize(s));
    std::vector<long long> t(kStamps);
    CK(cudaMemcpy(t.data(), stamps, kStamps * 8, cudaMemcpyDeviceToHost));
    std::vector<float> got(3 * E + 1);
    CK(cudaMemcpy(got.data(), base, got.size() * 4, cudaMemcpyDeviceToHost));
    if (f == 0) first = got;
    const bool same = std::memcmp(got.data(), first.data(), got.size() * 4) == 0;
    const float us = chain_us(forms[f].k, logits, h, o, launches, s);
    std::printf("%-10s %.3f us a launch (%.3f over empty); cycles at scale/softmax/top-k/sum/scales: %lld %lld %lld %lld %lld; %s\n", forms[f].name, us,
                us - empty, t[0], t[1], t[2], t[3], t[4], same ? "same outputs" : "OUTPUTS DIFFER");
  }
  int chosen = 0;
  for (int e = 0; e < E; ++e) chosen += first[E + e] != 0.0f;
  std::printf("chosen experts: %d, their probabilities' sum %.6f\n", chosen, first[2 * E]);
  return 0;
}
