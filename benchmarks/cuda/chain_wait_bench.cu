// How a decode step's kernels wait for the one before: a design study for the CUDA executor's
// launch chain (src/backends/cuda), not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/chain_wait_bench.cu -o /tmp/chain
//   /tmp/chain [layers=48] [replays=21]
// Every kernel of a decode step is launched with programmatic dependent launch: it starts while
// the kernel before runs and waits (griddepcontrol.wait) until that grid has ended and its
// memory is flushed; session 38 measured that wait returning 0.6-1.8 us after the last block
// ends. The alternative here: each block of a kernel, after its stores, adds one to the
// kernel's counter in global memory (a fence, then an atomic), and the next kernel's blocks
// spin on that counter until it holds the producer's block count, with no griddepcontrol.wait.
// Modes:
//   hw        griddepcontrol.launch_dependents at the start, griddepcontrol.wait (the executor's way)
//   sw-start  launch_dependents at the start, then the counter spin
//   sw-after  the counter spin, then launch_dependents (at most one kernel waiting ahead)
//   serial    no PDL: each launch starts after the one before has ended
//   hw-end    griddepcontrol.wait at the start, launch_dependents after the block's stores
//   hw-take   as hw, but the GEMVs' warps take rows from an atomic counter (no fixed ranges)
// For one down GEMV mid-chain the program counts its blocks by the SM they ran on (%smid), to
// see where a dependent's blocks land.
// The chain is an MoE decode layer's shape (Qwen3-30B-A3B): q/k/v GEMV [5120 x 2048], a small
// kernel standing in for attention, o [2048 x 4096], router [128 x 2048], a small kernel for
// the routing, gate/up [12288 x 2048], down [2048 x 6144]; distinct weights each layer (5.5 GB
// for 48), replayed as one CUDA graph. A second chain has the small kernels alone (the waits'
// latency with no memory traffic). Every mode's last output is compared with hw's (a wait that
// let a kernel read its input early would show there).
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

enum Mode { kHw = 0, kSwStart = 1, kSwAfter = 2, kSerial = 3, kHwEnd = 4, kHwTake = 5 };
static const char* kModeNames[] = {"hw", "sw-start", "sw-after", "serial", "hw-end", "hw-take"};
constexpr int kModes = 6;

// Blocks of the watched launch (a down GEMV mid-chain) counted by the SM they ran on.
__device__ unsigned g_sm_blocks[1024];
__device__ __forceinline__ void count_sm(bool watched) {
  if (!watched || threadIdx.x != 0) return;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  atomicAdd(&g_sm_blocks[sm & 1023], 1u);
}

// The counter a launch waits on (null for the chain's first) with the block count it must
// reach, and the counter it adds to.
struct Link {
  const unsigned* prev;
  unsigned prev_blocks;
  unsigned* mine;
};

template <int M>
__device__ __forceinline__ void enter(const Link& l) {
  if (M == kHw || M == kSwStart || M == kHwTake) grid_release();
  if (M == kHw || M == kHwEnd || M == kHwTake) {
    grid_wait();
    return;
  }
  if (M == kSerial) return;
  if (l.prev) {
    if (threadIdx.x == 0) {
      while (*(volatile const unsigned*)l.prev < l.prev_blocks) __nanosleep(32);
      __threadfence();
    }
    __syncthreads();
  }
  if (M == kSwAfter) grid_release();
}

template <int M>
__device__ __forceinline__ void leave(const Link& l) {
  if (M == kHwEnd) grid_release();
  if (M == kHw || M == kSerial || M == kHwEnd || M == kHwTake) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(l.mine, 1u);
  }
}

// y[i] = W[i, :] . x: x copied into shared memory through L2 (another kernel wrote it), then a
// warp a row (warp_row_dot).
template <int M>
__global__ void __launch_bounds__(256) gemv(const uint4* __restrict__ W, const float* x, float* y, int n, int k, Link l, bool watched) {
  extern __shared__ float4 s_x[];
  enter<M>(l);
  count_sm(watched);
  for (int j = threadIdx.x; j < k / 4; j += blockDim.x) s_x[j] = __ldcg(reinterpret_cast<const float4*>(x) + j);
  __syncthreads();
  const int kv = k / 8, lane = threadIdx.x & 31;
  const int warps = gridDim.x * (blockDim.x / 32), gw = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  // hw-take: each warp takes its next row from the launch's counter (l.mine), so rows follow
  // the warps that are running, wherever their blocks were placed.
  int r = gw;
  if (M == kHwTake) r = (lane == 0 ? (int)atomicAdd(l.mine, 1u) : 0), r = __shfl_sync(0xffffffffu, r, 0);
  while (r < n) {
    const uint4* w = W + (long long)r * kv;
    const float acc = warp_row_dot(w, s_x, kv, lane);
    if (lane == 0) y[r] = acc;
    if (M == kHwTake) r = (lane == 0 ? (int)atomicAdd(l.mine, 1u) : 0), r = __shfl_sync(0xffffffffu, r, 0);
    else r += warps;
  }
  leave<M>(l);
}

// x[j] = 1 + 1e-3 * y[j % n_prev] (keeps the chain's values near one): attention's and the
// routing's stand-in.
template <int M>
__global__ void small(const float* y, int n_prev, float* x, int n_x, Link l) {
  enter<M>(l);
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n_x; j += gridDim.x * blockDim.x) x[j] = 1.0f + 1e-3f * __ldcg(y + j % n_prev);
  leave<M>(l);
}

struct Step {
  bool is_gemv;
  int n, k, grid;  // small: n values written from k read
  std::vector<uint4*> w;
};

// One launch of the chain; `launch` numbers it (its counter).
struct Chain {
  int mode;
  cudaStream_t st;
  unsigned* counters;
  int launch = 0;
  int prev_grid = 0;
  int watch = -1;
  void run(const Step& s, int layer, const float* in, float* out) {
    Link l{launch == 0 ? nullptr : counters + launch - 1, (unsigned)prev_grid, counters + launch};
    const bool pdl = mode != kSerial;
    // Each mode's instance, indexed by Mode.
    using GemvFn = void (*)(const uint4*, const float*, float*, int, int, Link, bool);
    using SmallFn = void (*)(const float*, int, float*, int, Link);
    static const GemvFn kGemv[kModes] = {gemv<0>, gemv<1>, gemv<2>, gemv<3>, gemv<4>, gemv<5>};
    static const SmallFn kSmall[kModes] = {small<0>, small<1>, small<2>, small<3>, small<4>, small<5>};
    if (s.is_gemv)
      launch_pdl(st, kGemv[mode], s.grid, 256, (size_t)s.k * 4, pdl, (const uint4*)s.w[layer], in, out, s.n, s.k, l, watch == launch);
    else
      launch_pdl(st, kSmall[mode], s.grid, 256, 0, pdl, in, s.k, out, s.n, l);
    prev_grid = s.grid;
    ++launch;
  }
};

static Step make_gemv(int n, int k, int grid, int layers, unsigned seed) {
  Step s{true, n, k, grid, {}};
  for (int l = 0; l < layers; ++l) s.w.push_back(random_bf16((long long)n * k, seed + l));
  return s;
}

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 48, reps = argc > 2 ? std::atoi(argv[2]) : 21;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs; %d layers, medians of %d replays\n", prop.name, sms, layers, reps);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* buf[2];
  for (float*& b : buf) {
    CK(cudaMalloc(&b, 16384 * 4));
    CK(cudaMemset(b, 0, 16384 * 4));
  }
  unsigned* counters;
  const int max_launches = layers * 8 + 8;
  CK(cudaMalloc(&counters, max_launches * 4));

  const Step qkv = make_gemv(5120, 2048, 2 * sms, layers, 1), o = make_gemv(2048, 4096, 2 * sms, layers, 2),
             router = make_gemv(128, 2048, 16, layers, 3), gate_up = make_gemv(12288, 2048, 4 * sms, layers, 4),
             down = make_gemv(2048, 6144, 2 * sms, layers, 5);
  const Step attention{false, 4096, 5120, 64, {}}, routing{false, 2048, 128, 16, {}};
  const double bytes = (5120.0 * 2048 + 2048.0 * 4096 + 128.0 * 2048 + 12288.0 * 2048 + 2048.0 * 6144) * 2;

  for (int chain = 0; chain < 2; ++chain) {
    std::vector<float> ref;
    for (int mode = 0; mode < kModes; ++mode) {
      std::vector<unsigned> zero(1024, 0u);
      CK(cudaMemcpyToSymbol(g_sm_blocks, zero.data(), 4096));
      CK(cudaMemset(buf[0], 0, 16384 * 4));
      CK(cudaMemset(buf[1], 0, 16384 * 4));
      const double us = time_chain(st, [&] {
        CK(cudaMemsetAsync(counters, 0, max_launches * 4, st));
        Chain c{mode, st, counters};
        c.watch = chain == 0 ? (layers / 2) * 8 + 6 : -1;
        for (int l = 0; l < layers; ++l) {
          if (chain == 0) {
            c.run(qkv, l, buf[0], buf[1]);
            c.run(attention, l, buf[1], buf[0]);
            c.run(o, l, buf[0], buf[1]);
            c.run(router, l, buf[1], buf[0]);
            c.run(routing, l, buf[0], buf[1]);
            c.run(gate_up, l, buf[1], buf[0]);
            c.run(down, l, buf[0], buf[1]);
            c.run(attention, l, buf[1], buf[0]);  // back to 1 + small values in buf[0]
          } else {
            for (int i = 0; i < 4; ++i) {
              c.run(attention, l, buf[0], buf[1]);
              c.run(routing, l, buf[1], buf[0]);
            }
          }
        }
      }, reps) / layers;
      std::vector<float> out(4096);
      CK(cudaMemcpy(out.data(), buf[0], out.size() * 4, cudaMemcpyDeviceToHost));
      if (mode == 0) ref = out;
      float d = 0.0f;
      for (size_t i = 0; i < out.size(); ++i) d = std::max(d, std::fabs(out[i] - ref[i]));
      if (chain == 0) {
        // The watched down GEMV's blocks counted by SM over all replays: the fewest and the most.
        std::vector<unsigned> per_sm(1024);
        CK(cudaMemcpyFromSymbol(per_sm.data(), g_sm_blocks, 4096));
        unsigned lo = ~0u, hi = 0;
        for (int i = 0; i < sms; ++i) lo = std::min(lo, per_sm[i]), hi = std::max(hi, per_sm[i]);
        std::printf("  down GEMV's blocks an SM over %d replays: %u to %u (%d blocks, %d SMs)\n", reps + 2, lo, hi, down.grid, sms);
      }
      if (chain == 0)
        std::printf("MoE layer chain (8 launches), %-8s: %7.2f us a layer (%.0f GB/s of weights); max diff to hw %.1e\n", kModeNames[mode], us,
                    bytes / us / 1e3, d);
      else
        std::printf("small kernels alone (8 launches), %-8s: %7.2f us a layer, %.2f a launch; max diff to hw %.1e\n", kModeNames[mode], us, us / 8, d);
    }
  }
  return 0;
}
