// Weights staged into shared memory before a GEMV's wait: a design study for the decode GEMVs
// (src/backends/cuda/cuda_linear_codegen.cpp), not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/staged_gemv_bench.cu -o /tmp/staged
//   /tmp/staged [layers=48] [replays=21] [carveout %, -1: the driver's] [trace: 1]
// With programmatic dependent launch a GEMV's blocks start while the kernel before it runs and
// wait (griddepcontrol.wait) for its output. Its weight does not depend on that kernel, so a
// block may copy its share of the weight into shared memory before the wait; after the wait it
// multiplies from shared memory. Where the kernel before leaves memory idle (decode attention,
// an MoE's routing) the copy would be hidden; after a GEMV it overlaps that one's tail.
// Two chains, each over layers of distinct weights (more than L2 holds), launched with PDL and
// replayed as a CUDA graph:
//   q/k/v GEMV [5120 x 2048] -> busy (a stand-in for decode attention: 136 blocks that spin for
//     0, 3 or 5 us, then write x) -> o-projection GEMV [2048 x 4096] bf16, the Qwen3-30B-A3B shape;
//   gate/up experts as one [12288 x 2048] GEMV -> down [2048 x 6144] (eight experts' rows end to
//     end), staged or not.
// Modes of the second GEMV: plain (weights read after the wait, __ldcs; one or four blocks an
// SM), l2 (prefetch.global.L2 of the block's rows before the wait), smem (all of a block's rows
// copied by cp.async before the wait, one block an SM), half (half of them), tma (one bulk copy
// by the tensor memory accelerator), tma-x (tma, then each thread keeps its columns of x in
// registers and the block sums each row's partial sums). With tracing, one layer's launches
// report %globaltimer stamps (block 0's start and wait, the last block's end).
// Session 38 on the H200: see docs/cuda_backend.md ("Staged weights and one-kernel MoE").
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"
#include "study_parts.h"

enum Mode { kPlain = 0, kL2 = 1, kSmem = 2, kHalf = 3, kTma = 4, kTmaX = 5 };
static const char* kModeNames[] = {"plain", "l2", "smem", "half", "tma", "tma-x"};
constexpr int kModes = 6;

// Tracing (main's fourth argument 1): a traced launch's block 0 writes %globaltimer at its start,
// after its wait into g_trace[launch * 8 + 0..1] (and for gemv_x, after its sums and after the
// block's sum into 4..5); slots 2 and 3 are the last block's end of the stage and its end.
__device__ unsigned long long* g_trace;
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void trace(int launch, int slot) {
  if (!g_trace || launch < 0 || threadIdx.x != 0) return;
  if (slot == 2 || slot == 3) atomicMax(g_trace + launch * 8 + slot, now_ns());  // the last block's
  else if (blockIdx.x == 0) g_trace[launch * 8 + slot] = now_ns();
}

// The stand-in for attention: releases its dependents, waits for the kernel before, spins for
// `cycles`, then writes x[j] = f(y[j % n_prev]).
__global__ void busy(const float* __restrict__ y, int n_prev, float* __restrict__ x, int n_x, long long cycles, int launch) {
  trace(launch, 0);
  grid_release();
  grid_wait();
  trace(launch, 1);
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n_x; j += gridDim.x * blockDim.x) x[j] = 1.0f + 1e-3f * y[j % n_prev];
  trace(launch, 3);
}

// y[i] = W[i, :] . x for the block's rows [n * b / G, n * (b + 1) / G): warps over rows, lanes
// over k in 16-byte loads (4 in flight), a shuffle sum. In smem/half modes the first `staged`
// rows of the block come from shared memory, copied there before the wait.
template <int M>
__global__ void __launch_bounds__(256) gemv(const uint4* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int n, int k,
                                            int launch) {
  extern __shared__ __align__(16) uint4 s_w[];
  trace(launch, 0);
  grid_release();
  const int kv = k / 8, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r0 = (int)((long long)n * blockIdx.x / gridDim.x), r1 = (int)((long long)n * (blockIdx.x + 1) / gridDim.x);
  const int rows = r1 - r0, staged = M == kSmem || M == kTma ? rows : M == kHalf ? rows / 2 : 0;
  const uint4* Wb = W + (long long)r0 * kv;
  if (M == kL2) {
    for (long long q = threadIdx.x * 8; q < (long long)rows * kv; q += blockDim.x * 8)  // one 128-byte line a prefetch
      asm volatile("prefetch.global.L2 [%0];" ::"l"(Wb + q));
  }
  if (M == kSmem || M == kHalf) {
    const unsigned base = (unsigned)__cvta_generic_to_shared(s_w);
    for (long long q = threadIdx.x; q < (long long)staged * kv; q += blockDim.x)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(base + (unsigned)(q * 16)), "l"(Wb + q));
    asm volatile("cp.async.commit_group;");
  }
  // kTma: one bulk copy of the block's rows (contiguous in W) by the tensor memory accelerator,
  // its bytes counted by an mbarrier.
  __shared__ __align__(8) unsigned long long s_bar;
  if (M == kTma && threadIdx.x == 0) {
    const unsigned bytes = (unsigned)staged * kv * 16;
    bulk_expect(&s_bar, bytes);
    for (unsigned off = 0; off < bytes; off += 65536)
      bulk_copy((char*)s_w + off, (const char*)Wb + off, bytes - off < 65536 ? bytes - off : 65536, &s_bar);
  }
  grid_wait();
  trace(launch, 1);
  if (M == kTma) {
    __syncthreads();  // the barrier's init, before anyone waits on it
    bulk_wait(&s_bar);
  }
  if (M == kSmem || M == kHalf) {
    asm volatile("cp.async.wait_all;" ::: "memory");
    __syncthreads();
  }
  if (M != kPlain && M != kL2) trace(launch, 2);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (int r = warp; r < rows; r += blockDim.x / 32) {
    float acc = 0.0f;
    const bool from_smem = r < staged;
    const uint4* w = from_smem ? s_w + (long long)r * kv : Wb + (long long)r * kv;
    for (int p = lane; p < kv; p += 32 * 4) {
      uint4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int q = p + 32 * u;
        v[u] = q < kv ? (from_smem ? w[q] : __ldcs(w + q)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int q = p + 32 * u;
        if (q < kv) acc = dot8(v[u], __ldg(x4 + 2 * q), __ldg(x4 + 2 * q + 1), acc);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[r0 + r] = acc;
  }
  trace(launch, 3);
}

// kTmaX: the block's rows staged by one bulk copy before the wait (as kTma); after it, each
// thread keeps its KT values of x in registers (k = 256 * KT) and multiplies them with the same
// KT columns of every staged row, then the block sums each row's 256 partial sums. So x is read
// once a block from L2 and the weights once from shared memory, with no dependent chain longer
// than KT FMAs.
template <int KT>
__global__ void __launch_bounds__(256) gemv_x(const uint4* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int n, int k,
                                              int launch) {
  extern __shared__ __align__(16) uint4 s_w[];
  __shared__ __align__(8) unsigned long long s_bar;
  __shared__ float s_part[8][16];
  trace(launch, 0);
  grid_release();
  const int kv = k / 8, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r0 = (int)((long long)n * blockIdx.x / gridDim.x), r1 = (int)((long long)n * (blockIdx.x + 1) / gridDim.x);
  const int rows = r1 - r0;  // at most 16
  const uint4* Wb = W + (long long)r0 * kv;
  if (threadIdx.x == 0) {
    const unsigned bytes = (unsigned)rows * kv * 16;
    bulk_expect(&s_bar, bytes);
    for (unsigned off = 0; off < bytes; off += 65536)
      bulk_copy((char*)s_w + off, (const char*)Wb + off, bytes - off < 65536 ? bytes - off : 65536, &s_bar);
  }
  grid_wait();
  trace(launch, 1);
  // Thread t takes the 8 columns of uint4 i * 256 + t for each i (16-byte shared loads
  // without bank conflicts).
  float xr[KT];
  const float4* x4 = reinterpret_cast<const float4*>(x);
#pragma unroll
  for (int i = 0; i < KT / 8; ++i) {
    const float4 a = __ldcg(x4 + 2 * (i * 256 + threadIdx.x)), b = __ldcg(x4 + 2 * (i * 256 + threadIdx.x) + 1);
    xr[8 * i] = a.x, xr[8 * i + 1] = a.y, xr[8 * i + 2] = a.z, xr[8 * i + 3] = a.w;
    xr[8 * i + 4] = b.x, xr[8 * i + 5] = b.y, xr[8 * i + 6] = b.z, xr[8 * i + 7] = b.w;
  }
  __syncthreads();  // the barrier's init, before anyone waits on it
  bulk_wait(&s_bar);
  trace(launch, 2);
  float acc[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    acc[r] = 0.0f;
    if (r < rows) {
      const uint4* w = s_w + (long long)r * kv + threadIdx.x;
#pragma unroll
      for (int i = 0; i < KT / 8; ++i)
        acc[r] = dot8(w[i * 256], make_float4(xr[8 * i], xr[8 * i + 1], xr[8 * i + 2], xr[8 * i + 3]),
                      make_float4(xr[8 * i + 4], xr[8 * i + 5], xr[8 * i + 6], xr[8 * i + 7]), acc[r]);
    }
  }
  if (acc[0] == 123.0f) trace(launch, 4);  // (never true: keeps the sums before the stamp)
  trace(launch, 4);
#pragma unroll
  for (int r = 0; r < 16; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < 16; ++r) s_part[warp][r] = acc[r];
  __syncthreads();
  trace(launch, 5);
  if (threadIdx.x < rows) {
    float sum = 0.0f;
    for (int w = 0; w < 8; ++w) sum += s_part[w][threadIdx.x];
    y[r0 + threadIdx.x] = sum;
  }
  trace(launch, 3);
}

using GemvFn = void (*)(const uint4*, const float*, float*, int, int, int);
static GemvFn gemv_fn(int mode, int k = 4096) {
  switch (mode) {
    case kTmaX: return k == 6144 ? gemv_x<24> : gemv_x<16>;
    case kL2: return gemv<kL2>;
    case kSmem: return gemv<kSmem>;
    case kHalf: return gemv<kHalf>;
    case kTma: return gemv<kTma>;
    default: return gemv<kPlain>;
  }
}

static int g_sms = 0;
static bool tracing = false;
static unsigned long long* g_trace_host = nullptr;  // the device buffer g_trace points to

// The traced launches' times in ns from the first one's start: start, after the wait, after the
// stage (staged GEMVs), end.
static void print_trace(const std::vector<const char*>& names) {
  std::vector<unsigned long long> t(names.size() * 8);
  CK(cudaMemcpy(t.data(), g_trace_host, t.size() * 8, cudaMemcpyDeviceToHost));
  CK(cudaMemset(g_trace_host, 0, 128 * 8));
  const unsigned long long t0 = t[0];
  for (size_t i = 0; i < names.size(); ++i) {
    const unsigned long long* e = &t[i * 8];
    std::printf("    %-7s start %6.0f  waited %6.0f", names[i], (double)(e[0] - t0), (double)(e[1] - t0));
    if (e[2]) std::printf("  staged (last block) %6.0f", (double)(e[2] - t0));
    if (e[4]) std::printf("  summed %6.0f  block sum %6.0f", (double)(e[4] - t0), (double)(e[5] - t0));
    std::printf("  end (last block) %6.0f ns\n", (double)(e[3] - t0));
  }
}

struct Gemv {
  int n, k, grid;
  std::vector<uint4*> w;  // one weight a layer
};

static size_t staged_bytes(const Gemv& g, int mode) {
  const int rows = (g.n + g.grid - 1) / g.grid;
  return mode == kSmem || mode == kTma || mode == kTmaX ? (size_t)rows * g.k * 2 : mode == kHalf ? (size_t)(rows / 2) * g.k * 2 : 0;
}

// Modes that stage run one block an SM (the most shared memory); the others `plain_grid` blocks.
static int g_plain_grid = 0;
static void launch_gemv(cudaStream_t st, const Gemv& g, int layer, int mode, const float* x, float* y, int launch = -1) {
  const bool stages = mode == kSmem || mode == kHalf || mode == kTma || mode == kTmaX;
  launch_pdl(st, gemv_fn(mode, g.k), stages || g_plain_grid == 0 ? g.grid : g_plain_grid, 256, staged_bytes(g, mode), true, (const uint4*)g.w[layer], x, y, g.n, g.k, launch);
}

static Gemv make_gemv(int n, int k, int grid, int layers, unsigned seed) {
  Gemv g{n, k, grid, {}};
  for (int l = 0; l < layers; ++l) g.w.push_back(random_bf16((long long)n * k, seed + l));
  return g;
}

static void allow_smem(const Gemv& g) {
  for (int m = 0; m < kModes; ++m) CK(cudaFuncSetAttribute(gemv_fn(m, g.k), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)staged_bytes(g, kSmem) + 16));
}

static float max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float scale = 0.0f, d = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) scale = std::max(scale, std::fabs(a[i])), d = std::max(d, std::fabs(a[i] - b[i]));
  return d / std::max(scale, 1e-30f);
}

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 48, reps = argc > 2 ? std::atoi(argv[2]) : 21;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  int khz = 0;  // the SM clock, for the busy kernel's spin
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  // The third argument: every kernel's preferred shared-memory carveout in percent (-1: the
  // driver's choice). An SM holds blocks of one carveout at a time, so kernels whose choices
  // differ do not share SMs, whatever PDL allows.
  const int carveout = argc > 3 ? std::atoi(argv[3]) : -1;
  tracing = argc > 4 && std::atoi(argv[4]) > 0;
  if (tracing) {
    unsigned long long* tr;
    CK(cudaMalloc(&tr, 128 * 8));
    CK(cudaMemset(tr, 0, 128 * 8));
    CK(cudaMemcpyToSymbol(g_trace, &tr, sizeof tr));
    g_trace_host = tr;
  }
  std::printf("%s, %d SMs, %d KB shared a block at most; %d layers, medians of %d replays, carveout %d\n", prop.name, g_sms,
              (int)(prop.sharedMemPerBlockOptin / 1024), layers, reps, carveout);
  if (carveout >= 0) {
    CK(cudaFuncSetAttribute(busy, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
    for (int m = 0; m < kModes; ++m) CK(cudaFuncSetAttribute(gemv_fn(m), cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
  }
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *x, *y, *h;
  CK(cudaMalloc(&x, 16384 * 4));
  CK(cudaMalloc(&y, 16384 * 4));
  CK(cudaMalloc(&h, 16384 * 4));
  CK(cudaMemset(y, 0, 16384 * 4));

  // Chain 1: q/k/v [5120 x 2048] (plain, 4 blocks an SM) -> busy (attention's stand-in) -> o
  // projection, plain (1 or 4 blocks an SM) or staged (1 block an SM).
  struct Config {
    int mode, plain_grid;
  };
  const Config configs[] = {{kPlain, g_sms}, {kPlain, 4 * g_sms}, {kL2, 4 * g_sms}, {kSmem, 0}, {kHalf, 0}, {kTma, 0}, {kTmaX, 0}};
  Gemv qkv = make_gemv(5120, 2048, 4 * g_sms, layers, 7);
  Gemv o = make_gemv(2048, 4096, g_sms, layers, 1);
  allow_smem(o);
  std::vector<float> ref;
  for (long long spin_ns : {0LL, 3000LL, 5000LL}) {
    const long long cycles = spin_ns * (long long)khz / 1000000LL;
    g_plain_grid = 0;
    const double before = time_chain(st, [&] {
      for (int l = 0; l < layers; ++l) {
        launch_gemv(st, qkv, l, kPlain, y, h);
        launch_pdl(st, busy, 136, 256, 0, true, (const float*)h, 5120, x, 4096, cycles, -1);
      }
    }, reps) / layers;
    std::printf("q/k/v -> busy %lld ns: %.2f us a layer\n", spin_ns, before);
    for (const Config& cf : configs) {
      g_plain_grid = cf.plain_grid;
      CK(cudaMemset(y, 0, 16384 * 4));
      const double us = time_chain(st, [&] {
        for (int l = 0; l < layers; ++l) {
          // Traced: one layer in the middle and the next one's q/k/v.
          const bool mid = tracing && l == layers / 2, next = tracing && l == layers / 2 + 1;
          launch_gemv(st, qkv, l, kPlain, y, h, mid ? 0 : next ? 3 : -1);
          launch_pdl(st, busy, 136, 256, 0, true, (const float*)h, 5120, x, 4096, cycles, mid ? 1 : -1);
          launch_gemv(st, o, l, cf.mode, x, y, mid ? 2 : -1);
        }
      }, reps) / layers;
      std::vector<float> out(2048);
      CK(cudaMemcpy(out.data(), y, 2048 * 4, cudaMemcpyDeviceToHost));
      if (&cf == configs) ref = out;
      std::printf("  -> o [2048 x 4096] %-5s %3d blocks (%3zu KB staged a block): %.2f us a layer, o adds %.2f; max diff to the first %.1e\n",
                  kModeNames[cf.mode], cf.plain_grid ? cf.plain_grid : g_sms, staged_bytes(o, cf.mode) / 1024, us, us - before, max_rel_diff(ref, out));
      if (tracing) print_trace({"q/k/v", "busy", "o", "q/k/v'"});
    }
  }
  for (uint4* p : o.w) CK(cudaFree(p));
  for (uint4* p : qkv.w) CK(cudaFree(p));

  // Chain 2: gate/up [12288 x 2048] (plain, 4 blocks an SM) -> down [2048 x 6144], staged or not.
  Gemv gu = make_gemv(12288, 2048, 4 * g_sms, layers, 1000);
  Gemv dn = make_gemv(2048, 6144, g_sms, layers, 2000);
  allow_smem(dn);
  g_plain_grid = 0;
  const double gu_alone = time_chain(st, [&] {
    for (int l = 0; l < layers; ++l) launch_gemv(st, gu, l, kPlain, y, h);
  }, reps) / layers;
  std::printf("gate/up [12288 x 2048] alone: %.2f us a layer (%.0f GB/s)\n", gu_alone, 12288.0 * 2048 * 2 / gu_alone / 1e3);
  for (const Config& cf : configs) {
    g_plain_grid = cf.plain_grid;
    CK(cudaMemset(y, 0, 16384 * 4));
    const double us = time_chain(st, [&] {
      for (int l = 0; l < layers; ++l) {
        const int keep = g_plain_grid;
        g_plain_grid = 0;
        launch_gemv(st, gu, l, kPlain, y, h);
        g_plain_grid = keep;
        launch_gemv(st, dn, l, cf.mode, h, y);
      }
    }, reps) / layers;
    std::vector<float> out(2048);
    CK(cudaMemcpy(out.data(), y, 2048 * 4, cudaMemcpyDeviceToHost));
    if (&cf == configs) ref = out;
    std::printf("  -> down [2048 x 6144] %-5s %3d blocks (%3zu KB staged a block): %.2f us a layer (%.0f GB/s over both), down adds %.2f; max diff to the first %.1e\n",
                kModeNames[cf.mode], cf.plain_grid ? cf.plain_grid : g_sms, staged_bytes(dn, cf.mode) / 1024, us,
                (12288.0 * 2048 + 2048.0 * 6144) * 2 / us / 1e3, us - gu_alone, max_rel_diff(ref, out));
  }
  for (uint4* p : gu.w) CK(cudaFree(p));
  for (uint4* p : dn.w) CK(cudaFree(p));
  return 0;
}
