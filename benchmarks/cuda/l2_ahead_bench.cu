// The next weights asked of L2 while latency-bound kernels run: a design study for MoE decode
// (src/backends/cuda), not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/l2_ahead_bench.cu -o /tmp/l2ahead
//   /tmp/l2ahead [layers=48] [replays=21]
// In a Qwen3-30B-A3B decode layer about 15 us of 58 go to kernels that read almost nothing
// (q/k norms and rotaries, attention, the router, the routing), while the memory system idles;
// the attention weights of the layer (q/k/v 21 MB, o 16.8 MB) are known ahead, the experts are
// not. Here those windows ask L2 for weights a later kernel reads, with the tensor memory
// accelerator's bulk prefetch (cp.async.bulk.prefetch.L2, 64 KB a request, issued by one thread
// a block), optionally with an evict-last policy so that the experts' stream (75 MB a layer,
// loaded evict-first) does not push them out first.
// The chain, PDL launches as the executor's, replayed as one CUDA graph, distinct weights each
// layer: q/k/v GEMV [5120 x 2048] -> attention stand-in (200 blocks, spin 6 us) -> o [2048 x
// 4096] -> router [128 x 2048] -> routing stand-in (16 blocks, spin 3 us) -> gate/up [12288 x
// 2048] -> down [2048 x 6144].
// Modes: none; qkv (the routing stand-in asks for the next layer's q/k/v); qkv-last (the same,
// evict-last); o-last (the attention stand-in asks for o, evict-last); both-last; both-last-drop
// (both, and the GEMVs that read the prefetched weights put them back to evict-normal after,
// by applypriority, so evict-last lines do not pile up).
// Session 39 on the H200: see docs/cuda_backend.md ("Launch waits, block placement and weights
// ahead").
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"
#include "study_parts.h"

struct Ahead {
  const char* p;  // bytes to ask of L2 (null: none)
  long long bytes;
  bool last;  // evict-last
};

// One thread a block issues the block's share of `a` in 64 KB requests.
__device__ __forceinline__ void prefetch_share(const Ahead& a) {
  if (!a.p || threadIdx.x != 0) return;
  const long long chunk = 65536, chunks = (a.bytes + chunk - 1) / chunk;
  unsigned long long policy = 0;
  if (a.last) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  for (long long c = blockIdx.x; c < chunks; c += gridDim.x) {
    const unsigned n = (unsigned)(a.bytes - c * chunk < chunk ? a.bytes - c * chunk : chunk);
    if (a.last)
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(a.p + c * chunk), "r"(n), "l"(policy) : "memory");
    else
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a.p + c * chunk), "r"(n) : "memory");
  }
}

// y = W x (x into shared memory first, then a warp a row: warp_row_dot).
// `normal`: after the rows, each block puts its rows' lines back to evict-normal.
__global__ void __launch_bounds__(256) gemv(const uint4* __restrict__ W, const float* x, float* y, int n, int k, bool normal) {
  extern __shared__ float4 s_x[];
  grid_release();
  grid_wait();
  for (int j = threadIdx.x; j < k / 4; j += blockDim.x) s_x[j] = __ldcg(reinterpret_cast<const float4*>(x) + j);
  __syncthreads();
  const int kv = k / 8, lane = threadIdx.x & 31;
  const int warps = gridDim.x * (blockDim.x / 32), gw = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  for (int r = gw; r < n; r += warps) {
    const uint4* w = W + (long long)r * kv;
    const float acc = warp_row_dot(w, s_x, kv, lane);
    if (lane == 0) y[r] = acc;
    if (normal)
      for (int q = lane * 8; q < kv; q += 32 * 8) asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(w + q) : "memory");
  }
}

// Attention's / the routing's stand-in: spins `cycles`, asks L2 for `ahead`, then
// x[j] = 1 + 1e-3 * y[j % n_prev].
__global__ void busy(const float* y, int n_prev, float* x, int n_x, long long cycles, Ahead ahead) {
  grid_release();
  prefetch_share(ahead);
  grid_wait();
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n_x; j += gridDim.x * blockDim.x) x[j] = 1.0f + 1e-3f * __ldcg(y + j % n_prev);
}

struct Gemv {
  int n, k, grid;
  std::vector<uint4*> w;
  long long bytes() const { return (long long)n * k * 2; }
};

static Gemv make_gemv(int n, int k, int grid, int layers, unsigned seed) {
  Gemv g{n, k, grid, {}};
  for (int l = 0; l < layers; ++l) g.w.push_back(random_bf16((long long)n * k, seed + l));
  return g;
}

static void run_gemv(cudaStream_t st, const Gemv& g, int layer, const float* x, float* y, bool normal) {
  launch_pdl(st, gemv, g.grid, 256, (size_t)g.k * 4, true, (const uint4*)g.w[layer], x, y, g.n, g.k, normal);
}

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 48, reps = argc > 2 ? std::atoi(argv[2]) : 21;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int khz = 0;
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  std::printf("%s, %d SMs, L2 %d MB; %d layers, medians of %d replays\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, layers,
              reps);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* buf[2];
  for (float*& b : buf) {
    CK(cudaMalloc(&b, 16384 * 4));
    CK(cudaMemset(b, 0, 16384 * 4));
  }
  const Gemv qkv = make_gemv(5120, 2048, 396, layers, 1), o = make_gemv(2048, 4096, 256, layers, 2), router = make_gemv(128, 2048, 64, layers, 3),
             gate_up = make_gemv(12288, 2048, 528, layers, 4), down = make_gemv(2048, 6144, 512, layers, 5);
  const long long attention_cycles = 6000LL * khz / 1000000LL, routing_cycles = 3000LL * khz / 1000000LL;
  struct Mode {
    const char* name;
    bool ask_qkv, ask_o, last, drop;  // what the stand-ins ask for, evict-last, back to normal after
  };
  const Mode modes[] = {{"none", false, false, false, false},   {"qkv", true, false, false, false},
                        {"qkv-last", true, false, true, false}, {"o-last", false, true, true, false},
                        {"both-last", true, true, true, false}, {"both-last-drop", true, true, true, true}};
  std::vector<float> ref;
  for (int turn = 0; turn < 12; ++turn) {
    const Mode& m = modes[turn % 6];
    CK(cudaMemset(buf[0], 0, 16384 * 4));
    CK(cudaMemset(buf[1], 0, 16384 * 4));
    const double us = time_chain(st, [&] {
      for (int l = 0; l < layers; ++l) {
        const int next = (l + 1) % layers;
        run_gemv(st, qkv, l, buf[0], buf[1], m.drop);
        const Ahead a_o{m.ask_o ? (const char*)o.w[l] : nullptr, o.bytes(), m.last};
        launch_pdl(st, busy, 200, 256, 0, true, (const float*)buf[1], 5120, buf[0], 4096, attention_cycles, a_o);
        run_gemv(st, o, l, buf[0], buf[1], m.drop && m.ask_o);
        run_gemv(st, router, l, buf[1], buf[0], false);
        const Ahead a_qkv{m.ask_qkv ? (const char*)qkv.w[next] : nullptr, qkv.bytes(), m.last};
        launch_pdl(st, busy, 16, 256, 0, true, (const float*)buf[0], 128, buf[1], 2048, routing_cycles, a_qkv);
        run_gemv(st, gate_up, l, buf[1], buf[0], false);
        run_gemv(st, down, l, buf[0], buf[1], false);
        launch_pdl(st, busy, 16, 256, 0, true, (const float*)buf[1], 2048, buf[0], 2048, 0LL, Ahead{nullptr, 0, false});
      }
    }, reps) / layers;
    std::vector<float> out(2048);
    CK(cudaMemcpy(out.data(), buf[0], out.size() * 4, cudaMemcpyDeviceToHost));
    if (&m == modes) ref = out;
    float d = 0.0f;
    for (size_t i = 0; i < out.size(); ++i) d = std::max(d, std::fabs(out[i] - ref[i]));
    std::printf("%-15s %7.2f us a layer; max diff to none %.1e\n", m.name, us, d);
  }
  return 0;
}
