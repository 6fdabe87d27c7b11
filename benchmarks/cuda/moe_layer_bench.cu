// An MoE block's decode (Qwen3-30B-A3B shape: hidden 2048, 128 experts, 8 a token, 768 wide)
// as four kernels, as the generated code runs it, or as one persistent kernel whose phases meet
// at grid-wide barriers instead of kernel boundaries. A design study, not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/moe_layer_bench.cu -o /tmp/moe -lcuda && /tmp/moe [layers] [replays] [cubin kernel]...
// Each cubin-and-kernel pair adds a way that runs a compiler-generated experts-in-one kernel
// after the router and top-k kernels, as way 3 runs the study's own (benchmarks/cuda/
// cut_experts_kernel.py's header gives the commands that make the cubin); where the cubin has an
// `lm_trace` array (stamps added by hand, as lm_stamp in way 3's kernel), its stamps are printed.
// ROUTING_CUBIN=path adds one more way: the compiler's routing group (lm_routing, cut by
// cut_experts_kernel.py --routing) in place of the study's top-k before the first generated
// experts kernel, so the two routings compare in the same chain (session 46).
// Each layer: r = x + Wo a (a dense GEMV standing in for the attention's o projection), then
// x' = r + sum over the token's 8 experts e of p_e * Wd_e (silu(Wg_e n) * (Wu_e n)), n = rmsnorm(r),
// the experts and p from softmax(Wr n), its top 8, renormalized.
// - four kernels: router (128 blocks, one row each), top-k (one warp), gate/up (a warp per
//   gate row and its up row), down and residual (a warp per output row); each releases its
//   dependents at its start and waits for the kernel before (programmatic dependent launch).
// - fused: one block an SM. Router rows, a grid barrier, top-k in every block, then each
//   block's down rows of the 8 chosen experts copied into shared memory by the tensor memory
//   accelerator while the blocks run the gate/up pairs; a second barrier, and the down rows
//   multiply from shared memory.
// - router, top-k, experts: the router and top-k kernels as in the four, then gate/up and down
//   as the fused kernel's second half (k_fused<false>).
// - router, top-k, experts by columns (16, 32 or 48), reduce: the router and top-k kernels, then
//   a block per (slot, column chunk) computing its gated products and their share of the down
//   product over all rows into partial rows (k_cols: no barrier, no shared-memory stage, two
//   blocks an SM), and a small kernel adding the partial rows and the residual (session 44).
// Layers have distinct weights (the chosen experts' 75 MB a layer come from HBM); the chain
// of layers is one CUDA graph; medians of its replays; each way's output is compared with the
// four kernels', and ways 2 and 3 report one launch's phases (%globaltimer stamps). Sessions 38
// and 40 on the H200: see docs/cuda_backend.md ("Staged weights and one-kernel MoE", "The
// generated experts-in-one kernel in the study").
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "study_parts.h"

constexpr int kH = 2048, kE = 128, kTop = 8, kI = 768, kA = 4096;
constexpr int kDownRows = 16;  // output rows of the down product a fused block takes, at most
constexpr int kOwn = 7;  // the study's own ways; the generated kernels' follow

// Phase times of one traced fused launch (block 0's, and slot 9 the last block's gate/up end).
__device__ unsigned long long* g_trace;
__device__ __forceinline__ void stamp(bool on, int slot) {
  if (!on || !g_trace || threadIdx.x != 0) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  if (slot == 9) atomicMax(g_trace + 9, t);
  else if (blockIdx.x == 0) g_trace[slot] = t;
}

__device__ float block_sum(float v, float* scratch) {  // scratch: 8 floats; 256 threads
  v = warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < 8; ++w) s += scratch[w];
  return s;
}

// n = rmsnorm(x) into shared memory (every block its own copy; x from L2).
__device__ void norm_into(const float* __restrict__ x, float* s_n, float* scratch) {
  float q = 0.0f;
  for (int i = threadIdx.x; i < kH; i += 256) {
    const float v = __ldcg(x + i);
    s_n[i] = v;
    q = __fmaf_rn(v, v, q);
  }
  const float scale = rsqrtf(block_sum(q, scratch) / kH + 1e-6f);
  for (int i = threadIdx.x; i < kH; i += 256) s_n[i] *= scale;
  __syncthreads();
}

// logits[row] = Wr[row] . n for one row, by the whole block (one 16-byte load a thread).
__device__ void router_row(const uint4* __restrict__ Wr, const float* s_n, int row, float* logits, float* scratch) {
  const float4* n4 = reinterpret_cast<const float4*>(s_n);
  const float v = dot8(__ldcs(Wr + (long long)row * (kH / 8) + threadIdx.x), n4[2 * threadIdx.x], n4[2 * threadIdx.x + 1], 0.0f);
  const float s = block_sum(v, scratch);
  if (threadIdx.x == 0) logits[row] = s;
}

// *out = silu(Wg_e[j] . n) * (Wu_e[j] . n), by one warp (lane 0 stores).
__device__ __forceinline__ void gate_up_pair(const uint4* __restrict__ Wgu, const float* n, int e, int j, float* out) {
  const uint4* g = Wgu + ((long long)e * 2 * kI + j) * (kH / 8);
  const float v = gated_pair_2048(g, g + (long long)kI * (kH / 8), reinterpret_cast<const float4*>(n), threadIdx.x & 31);
  if ((threadIdx.x & 31) == 0) *out = v;
}

// ---- the four kernels ----
__global__ void __launch_bounds__(256) k_router(const float* __restrict__ x, const uint4* __restrict__ Wr, float* logits, float* n_out) {
  __shared__ __align__(16) float s_n[kH];
  __shared__ float scratch[8];
  grid_release();
  grid_wait();
  norm_into(x, s_n, scratch);
  if (blockIdx.x == 0)
    for (int i = threadIdx.x; i < kH; i += 256) n_out[i] = s_n[i];
  router_row(Wr, s_n, blockIdx.x, logits, scratch);
}

// gs, ds (when given): the choice as the compiler's graph has it, dense over the experts: the
// gate/up scale 1 and the down scale p at a chosen expert, 0 at the others.
__global__ void k_top_k(const float* logits, int* experts, float* weights, float* gs, float* ds) {
  grid_release();
  grid_wait();
  top8_of_128(logits, experts, weights);
  if (!gs) return;
  for (int i = threadIdx.x; i < kE; i += 32) gs[i] = 0.0f, ds[i] = 0.0f;
  __syncwarp();
  if (threadIdx.x < kTop) gs[experts[threadIdx.x]] = 1.0f, ds[experts[threadIdx.x]] = weights[threadIdx.x];
}

__global__ void __launch_bounds__(256, 2) k_gate_up(const float* __restrict__ n, const int* experts, const uint4* __restrict__ Wgu, float* h) {
  grid_release();
  grid_wait();
  const int warps = gridDim.x * 8;
  for (int p = blockIdx.x * 8 + (threadIdx.x >> 5); p < kTop * kI; p += warps) gate_up_pair(Wgu, n, __ldcg(experts + p / kI), p % kI, h + p);
}

// out[row] = r[row] + sum over slots of p_slot * (Wd_e[row] . h[slot]): a warp per row.
__global__ void __launch_bounds__(256, 2) k_down(const float* __restrict__ r, const int* experts, const float* weights, const float* h,
                                               const uint4* __restrict__ Wd, float* out) {
  grid_release();
  grid_wait();
  const int lane = threadIdx.x & 31, row = blockIdx.x * 8 + (threadIdx.x >> 5);
  if (row >= kH) return;
  uint4 v[kTop][3];
#pragma unroll
  for (int s = 0; s < kTop; ++s) {
    const uint4* w = Wd + ((long long)__ldcg(experts + s) * kH + row) * (kI / 8);
#pragma unroll
    for (int i = 0; i < 3; ++i) v[s][i] = ld_stream(w + lane + 32 * i);
  }
  float acc = 0.0f;
#pragma unroll
  for (int s = 0; s < kTop; ++s) {
    const float4* h4 = reinterpret_cast<const float4*>(h + s * kI);
    float part = 0.0f;
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const int q = lane + 32 * i;
      part = dot8(v[s][i], __ldcg(h4 + 2 * q), __ldcg(h4 + 2 * q + 1), part);
    }
    acc = __fmaf_rn(__ldcg(weights + s), part, acc);
  }
  acc = warp_sum(acc);
  if (lane == 0) out[row] = __ldcg(r + row) + acc;
}

// r = x + Wo a: the o projection's stand-in (a warp per 8 KB row, 16 loads a lane in flight).
__global__ void __launch_bounds__(256) k_dense(const float* __restrict__ x, const float* __restrict__ a, const uint4* __restrict__ Wo,
                                               float* r) {
  grid_release();
  grid_wait();
  const int lane = threadIdx.x & 31;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  for (int row = blockIdx.x * 8 + (threadIdx.x >> 5); row < kH; row += gridDim.x * 8) {
    const uint4* w = Wo + (long long)row * (kA / 8);
    uint4 v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = ld_stream(w + lane + 32 * i);
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int q = lane + 32 * i;
      acc = dot8(v[i], __ldg(a4 + 2 * q), __ldg(a4 + 2 * q + 1), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) r[row] = __ldcg(x + row) + acc;
  }
}

// ---- experts by columns: gate/up and down of one (slot, C-column chunk) a block ----
// A block computes the C gated products h_j of its slot's expert (a warp a pair) and then those
// columns' share of the down product for all 2048 rows (a thread a row at a time: C bf16, one
// or more 32-byte sectors), times the routing weight, into part[unit][row]; k_cols_reduce adds
// the 8 * 768 / C partial rows and the residual. No barrier or shared-memory stage between
// gate/up and down, so the blocks stay small enough to share SMs with the next kernel.
template <int C>
__global__ void __launch_bounds__(256, 2) k_cols(const float* __restrict__ n, const int* experts, const float* weights,
                                                const uint4* __restrict__ Wgu, const uint4* __restrict__ Wd, float* part) {
  __shared__ __align__(16) float s_n[kH];
  __shared__ __align__(16) float s_h[C];
  grid_release();
  grid_wait();
  const int unit = blockIdx.x, slot = unit / (kI / C), j0 = unit % (kI / C) * C, warp = threadIdx.x >> 5;
  const int e = __ldcg(experts + slot);
  for (int i = threadIdx.x; i < kH / 4; i += 256) reinterpret_cast<float4*>(s_n)[i] = __ldcg(reinterpret_cast<const float4*>(n) + i);
  __syncthreads();
  for (int jj = warp; jj < C; jj += 8) gate_up_pair(Wgu, s_n, e, j0 + jj, s_h + jj);
  __syncthreads();
  const float p = __ldcg(weights + slot);
  const float4* h4 = reinterpret_cast<const float4*>(s_h);
  const uint4* dn = Wd + (long long)e * kH * (kI / 8) + j0 / 8;
  constexpr int kWords = C / 8, kRows = kH / 256, kBatch = 16 / kWords;  // 16 loads in flight a thread
#pragma unroll
  for (int r0 = 0; r0 < kRows; r0 += kBatch) {
    uint4 v[kBatch][kWords];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
#pragma unroll
      for (int k = 0; k < kWords; ++k) v[i][k] = ld_stream(dn + (long long)(threadIdx.x + 256 * (r0 + i)) * (kI / 8) + k);
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < kWords; ++k) acc = dot8(v[i][k], h4[2 * k], h4[2 * k + 1], acc);
      part[(long long)unit * kH + threadIdx.x + 256 * (r0 + i)] = p * acc;
    }
  }
}

// out[row] = r[row] + the `units` partial rows; 16 rows a block of 256 (16 threads a row).
__global__ void __launch_bounds__(256) k_cols_reduce(const float* __restrict__ r, const float* part, int units, float* out) {
  __shared__ float s_sum[16][17];
  grid_release();
  grid_wait();
  const int row = threadIdx.x & 15, grp = threadIdx.x >> 4, at = blockIdx.x * 16 + row;
  float acc = 0.0f;
  for (int u = grp; u < units; u += 16) acc += __ldcg(part + (long long)u * kH + at);
  s_sum[grp][row] = acc;
  __syncthreads();
  if (threadIdx.x < 16) {
    float t = __ldcg(r + blockIdx.x * 16 + threadIdx.x);
    for (int g = 0; g < 16; ++g) t += s_sum[g][threadIdx.x];
    out[blockIdx.x * 16 + threadIdx.x] = t;
  }
}

// ---- the fused kernel ----
// One step of summing many values over a warp: a lane keeps `half` of its 2 * half partial
// sums (the upper ones where its lane has `bit`) and adds its partner's of the same rows.
template <int half>
__device__ __forceinline__ void halve_rows(float* part, int lane, int bit) {
  const bool upper = lane & bit;
#pragma unroll
  for (int i = 0; i < half; ++i) {
    const float recv = __shfl_xor_sync(0xffffffffu, upper ? part[i] : part[i + half], bit);
    part[i] = (upper ? part[i + half] : part[i]) + recv;
  }
}

// Route: the router and top-k inside (the fused way); else the experts and their weights come
// from k_top_k (in `experts`, `weights`) and the normed input from k_router (in `n`), and the
// kernel is gate/up and down alone (the experts' way).
template <bool Route>
__global__ void __launch_bounds__(256, 1) k_fused(const float* __restrict__ r, const uint4* __restrict__ Wr, const uint4* __restrict__ Wgu,
                                               const uint4* __restrict__ Wd, float* logits, float* h, float* out, unsigned* sync, int traced,
                                               const float* n, const int* experts, const float* weights) {
  extern __shared__ __align__(128) uint4 s_down[];  // [slot][row][768 bf16]
  __shared__ __align__(16) float s_n[kH];
  __shared__ float scratch[8], s_w[kTop], s_part[kTop][kDownRows];
  __shared__ int s_e[kTop];
  __shared__ __align__(8) unsigned long long s_bar;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r0 = kH * blockIdx.x / gridDim.x, rows = kH * (blockIdx.x + 1) / gridDim.x - r0;
  const bool on = traced != 0;
  stamp(on, 0);
  grid_wait();
  stamp(on, 1);
  if (Route) {
    norm_into(r, s_n, scratch);
    for (int row = blockIdx.x; row < kE; row += gridDim.x) router_row(Wr, s_n, row, logits, scratch);
    stamp(on, 2);
    grid_sync(sync, sync + 1);
    stamp(on, 3);
    // Every block is resident now, so the next kernel's blocks cannot take an SM one of ours needs.
    grid_release();
    if (warp == 0) top8_of_128(logits, s_e, s_w);
  } else {
    for (int i = threadIdx.x; i < kH; i += 256) s_n[i] = __ldcg(n + i);
    if (threadIdx.x < kTop) s_e[threadIdx.x] = __ldcg(experts + threadIdx.x), s_w[threadIdx.x] = __ldcg(weights + threadIdx.x);
  }
  __syncthreads();
  stamp(on, 10);
  if (threadIdx.x == 0) {
    const unsigned bytes = (unsigned)rows * kI * 2;
    bulk_expect(&s_bar, bytes * kTop);
    stamp(on, 11);
    for (int s = 0; s < kTop; ++s)
      bulk_copy(s_down + s * kDownRows * (kI / 8), Wd + ((long long)s_e[s] * kH + r0) * (kI / 8), bytes, &s_bar);
  }
  stamp(on, 4);
  const int warps = gridDim.x * 8;
  for (int p = blockIdx.x * 8 + warp; p < kTop * kI; p += warps) gate_up_pair(Wgu, s_n, s_e[p / kI], p % kI, h + p);
  __syncthreads();
  stamp(on, 5);
  stamp(on, 9);
  grid_sync(sync, sync + 1);
  if (!Route) grid_release();  // every block has been resident since the barrier
  stamp(on, 6);
  // Down: warp w takes slot w's 768 columns (3 uint4 a lane) for every row of the block.
  float hv[24];
  const float4* h4 = reinterpret_cast<const float4*>(h + warp * kI);
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const int q = lane + 32 * i;
    const float4 a = __ldcg(h4 + 2 * q), b = __ldcg(h4 + 2 * q + 1);
    hv[8 * i] = a.x, hv[8 * i + 1] = a.y, hv[8 * i + 2] = a.z, hv[8 * i + 3] = a.w;
    hv[8 * i + 4] = b.x, hv[8 * i + 5] = b.y, hv[8 * i + 6] = b.z, hv[8 * i + 7] = b.w;
  }
  bulk_wait(&s_bar);
  stamp(on, 7);
  float part[kDownRows];
#pragma unroll
  for (int row = 0; row < kDownRows; ++row) {
    part[row] = 0.0f;
    if (row < rows) {
      const uint4* w = s_down + (warp * kDownRows + row) * (kI / 8);
#pragma unroll
      for (int i = 0; i < 3; ++i)
        part[row] = dot8(w[lane + 32 * i], make_float4(hv[8 * i], hv[8 * i + 1], hv[8 * i + 2], hv[8 * i + 3]),
                         make_float4(hv[8 * i + 4], hv[8 * i + 5], hv[8 * i + 6], hv[8 * i + 7]), part[row]);
    }
  }
  // The 16 rows' sums over the lanes in 16 shuffles, not 80: at each step a lane keeps half of
  // its rows and adds its partner's share of them.
  halve_rows<8>(part, lane, 16);
  halve_rows<4>(part, lane, 8);
  halve_rows<2>(part, lane, 4);
  halve_rows<1>(part, lane, 2);
  part[0] += __shfl_xor_sync(0xffffffffu, part[0], 1);
  const int my_row = (lane >> 4 & 1) * 8 + (lane >> 3 & 1) * 4 + (lane >> 2 & 1) * 2 + (lane >> 1 & 1);
  if ((lane & 1) == 0) s_part[warp][my_row] = part[0];
  __syncthreads();
  if (threadIdx.x < rows) {
    float acc = 0.0f;
    for (int s = 0; s < kTop; ++s) acc = __fmaf_rn(s_w[s], s_part[s][threadIdx.x], acc);
    out[r0 + threadIdx.x] = __ldcg(r + r0 + threadIdx.x) + acc;
  }
  stamp(on, 8);
}

// ---- host ----
static bool g_pdl = true;  // the first launch after the graph's copy goes without the attribute
template <typename F, typename... Args>
static void launch(cudaStream_t st, F kernel, int grid, int threads, size_t smem, Args... args) {
  const bool pdl = g_pdl;
  g_pdl = true;
  launch_pdl(st, kernel, grid, threads, smem, pdl, args...);
}

// A kernel of the compiler's, compiled to a cubin (see the header), launched through the driver.
struct Generated {
  CUfunction f = nullptr;
  CUdeviceptr trace = 0;  // its lm_trace, where it has one
  std::string name;
  size_t smem = 220 * 1024;  // kExpertsInOneSharedBytes, unless the argument says otherwise
};

static void launch_generated(cudaStream_t st, const Generated& g, int grid, void** args) {
  const bool pdl = g_pdl;
  g_pdl = true;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = grid, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  cfg.sharedMemBytes = (unsigned)g.smem;
  cfg.hStream = st;
  CUlaunchAttribute attr[1];
  attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr[0].value.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  if (cuLaunchKernelEx(&cfg, g.f, args, nullptr) != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuLaunchKernelEx failed for %s\n", g.name.c_str());
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 16, reps = argc > 2 ? std::atoi(argv[2]) : 21;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs; %d layers, medians of %d replays\n", prop.name, sms, layers, reps);
  // Further arguments: pairs of a cubin and the name of its experts-in-one kernel (name:KB for a
  // launch with KB of dynamic shared memory). DENSE_SMEM=KB gives the dense GEMV that much
  // (unused), as the generated q/k/v GEMV holds x in shared memory.
  std::vector<Generated> generated;
  const size_t dense_smem = std::getenv("DENSE_SMEM") ? (size_t)std::atoi(std::getenv("DENSE_SMEM")) * 1024 : 0;
  CK(cudaFree(nullptr));  // the runtime's context, which the driver calls below use
  for (int a = 3; a + 1 < argc; a += 2) {
    CUmodule m;
    Generated g;
    g.name = argv[a + 1];
    const size_t colon = g.name.find(':');
    if (colon != std::string::npos) g.smem = (size_t)std::atoi(g.name.c_str() + colon + 1) * 1024;
    const std::string fn = g.name.substr(0, colon);
    if (cuModuleLoad(&m, argv[a]) != CUDA_SUCCESS || cuModuleGetFunction(&g.f, m, fn.c_str()) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cannot load %s from %s\n", fn.c_str(), argv[a]);
      return 1;
    }
    size_t bytes;
    if (cuModuleGetGlobal(&g.trace, &bytes, m, "lm_trace") != CUDA_SUCCESS) g.trace = 0;
    cuFuncSetAttribute(g.f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)g.smem);
    generated.push_back(g);
  }
  // ROUTING_CUBIN's lm_routing (16 blocks and a count, as the compiler launches it with
  // LUMINAL_CUDA_TOP_RANKS=0) or lm_routing1 (one block: top-k ranks in a warp, the default).
  Generated routing;
  bool routing_counted = true;
  if (const char* rc = std::getenv("ROUTING_CUBIN"); rc && !generated.empty()) {
    CUmodule m;
    routing.smem = 0;
    if (cuModuleLoad(&m, rc) != CUDA_SUCCESS) {
      std::fprintf(stderr, "cannot load %s\n", rc);
      return 1;
    }
    routing.name = "lm_routing";
    if (cuModuleGetFunction(&routing.f, m, "lm_routing") != CUDA_SUCCESS) {
      routing.name = "lm_routing1";
      routing_counted = false;
      if (cuModuleGetFunction(&routing.f, m, "lm_routing1") != CUDA_SUCCESS) {
        std::fprintf(stderr, "neither lm_routing nor lm_routing1 in %s\n", rc);
        return 1;
      }
    }
  }
  std::vector<uint4 *> wo, wr, wgu, wd;
  for (int l = 0; l < layers; ++l) {
    wo.push_back(random_bf16((long long)kH * kA, 10 + l, 0.03f));
    wr.push_back(random_bf16((long long)kE * kH, 100 + l, 0.2f));
    wgu.push_back(random_bf16((long long)kE * 2 * kI * kH, 200 + l, 0.05f));
    wd.push_back(random_bf16((long long)kE * kH * kI, 300 + l, 0.05f));
  }
  float *x0, *a, *x, *r, *n, *logits, *weights, *h, *gs, *ds, *probs, *psum;
  int* experts;
  unsigned *sync, *gen_sync, *route_count;
  long long* dims;  // [2][2]: the generated kernel's dims (seq = 1), the second with the trace on
  CK(cudaMalloc(&x0, kH * 4));
  CK(cudaMalloc(&a, kA * 4));
  CK(cudaMalloc(&x, kH * 4));
  CK(cudaMalloc(&r, kH * 4));
  CK(cudaMalloc(&n, kH * 4));
  CK(cudaMalloc(&logits, kE * 4));
  CK(cudaMalloc(&weights, kTop * 4));
  CK(cudaMalloc(&gs, kE * 4));
  CK(cudaMalloc(&ds, kE * 4));
  CK(cudaMalloc(&probs, kE * 4));
  CK(cudaMalloc(&psum, 4));
  CK(cudaMalloc(&h, kTop * kI * 4));
  CK(cudaMalloc(&experts, kTop * 4));
  float* part;  // the column ways' partial rows, [8 * 768 / 16][2048] at most
  CK(cudaMalloc(&part, (long long)kTop * kI / 16 * kH * 4));
  CK(cudaMalloc(&sync, 8));
  CK(cudaMemset(sync, 0, 8));
  CK(cudaMalloc(&gen_sync, 8));
  CK(cudaMemset(gen_sync, 0, 8));
  CK(cudaMalloc(&route_count, 8));
  CK(cudaMemset(route_count, 0, 8));  // its last block resets it each launch
  CK(cudaMalloc(&dims, 4 * 8));
  {
    const long long hd[4] = {0, 1, 1, 1};
    CK(cudaMemcpy(dims, hd, sizeof hd, cudaMemcpyHostToDevice));
    std::vector<float> hx(kH), ha(kA);
    for (int i = 0; i < kH; ++i) hx[i] = std::sin(0.37f * i);
    for (int i = 0; i < kA; ++i) ha[i] = std::cos(0.11f * i);
    CK(cudaMemcpy(x0, hx.data(), kH * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(a, ha.data(), kA * 4, cudaMemcpyHostToDevice));
  }
  const size_t fused_smem = (size_t)kTop * kDownRows * kI * 2;
  CK(cudaFuncSetAttribute(k_fused<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fused_smem));
  CK(cudaFuncSetAttribute(k_fused<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fused_smem));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  // The generated experts kernel a way runs (ROUTING_CUBIN's way: the first), or null.
  auto experts_of = [&](int way) -> const Generated* {
    if (way < kOwn) return nullptr;
    return way - kOwn < (int)generated.size() ? &generated[way - kOwn] : &generated[0];
  };
  // way 0: dense only; 1: dense + four kernels; 2: dense + fused; 3: dense + router, top-k,
  // fused experts; 4-6: router, top-k, experts by 16 / 32 / 48 columns and their reduce; kOwn
  // on: as 3 with a generated experts kernel. x starts from x0 each replay.
  auto record = [&](int way) {
    CK(cudaMemcpyAsync(x, x0, kH * 4, cudaMemcpyDeviceToDevice, st));
    g_pdl = false;
    for (int l = 0; l < layers; ++l) {
      const int traced = l == layers / 2 ? 1 : 0;
      launch(st, k_dense, 4 * sms, 256, dense_smem, (const float*)x, (const float*)a, (const uint4*)wo[l], r);
      if (way == 0) {
        launch(st, k_dense, 4 * sms, 256, dense_smem, (const float*)r, (const float*)a, (const uint4*)wo[l], x);  // keeps the chain's data flow
        continue;
      }
      if (way == 1) {
        launch(st, k_router, kE, 256, 0, (const float*)r, (const uint4*)wr[l], logits, n);
        launch(st, k_top_k, 1, 32, 0, (const float*)logits, experts, weights, (float*)nullptr, (float*)nullptr);
        launch(st, k_gate_up, 2 * sms, 256, 0, (const float*)n, (const int*)experts, (const uint4*)wgu[l], h);
        launch(st, k_down, kH / 8, 256, 0, (const float*)r, (const int*)experts, (const float*)weights, (const float*)h, (const uint4*)wd[l], x);
      } else if (way == 2) {
        launch(st, k_fused<true>, sms, 256, fused_smem, (const float*)r, (const uint4*)wr[l], (const uint4*)wgu[l], (const uint4*)wd[l], logits, h, x,
               sync, traced, (const float*)nullptr, (const int*)nullptr, (const float*)nullptr);
      } else if (way >= 4 && way < kOwn) {
        launch(st, k_router, kE, 256, 0, (const float*)r, (const uint4*)wr[l], logits, n);
        launch(st, k_top_k, 1, 32, 0, (const float*)logits, experts, weights, (float*)nullptr, (float*)nullptr);
        const int units = way == 4 ? kTop * kI / 16 : way == 5 ? kTop * kI / 32 : kTop * kI / 48;
        if (way == 4) launch(st, k_cols<16>, units, 256, 0, (const float*)n, (const int*)experts, (const float*)weights, (const uint4*)wgu[l], (const uint4*)wd[l], part);
        if (way == 5) launch(st, k_cols<32>, units, 256, 0, (const float*)n, (const int*)experts, (const float*)weights, (const uint4*)wgu[l], (const uint4*)wd[l], part);
        if (way == 6) launch(st, k_cols<48>, units, 256, 0, (const float*)n, (const int*)experts, (const float*)weights, (const uint4*)wgu[l], (const uint4*)wd[l], part);
        launch(st, k_cols_reduce, kH / 16, 256, 0, (const float*)r, (const float*)part, units, x);
      } else if (way == 3) {
        launch(st, k_router, kE, 256, 0, (const float*)r, (const uint4*)wr[l], logits, n);
        launch(st, k_top_k, 1, 32, 0, (const float*)logits, experts, weights, (float*)nullptr, (float*)nullptr);
        launch(st, k_fused<false>, sms, 256, fused_smem, (const float*)r, (const uint4*)wr[l], (const uint4*)wgu[l], (const uint4*)wd[l], logits, h,
               x, sync, traced, (const float*)n, (const int*)experts, (const float*)weights);
      } else {
        const bool own_routing = way >= kOwn + (int)generated.size();  // ROUTING_CUBIN's way
        const Generated& experts_kernel = *experts_of(way);
        launch(st, k_router, kE, 256, 0, (const float*)r, (const uint4*)wr[l], logits, n);
        if (own_routing) {
          // (probabilities, the gate/up scales (the chosen mask), their sum, the down scales,
          // the logits, the count, dims)
          void *o0 = probs, *o1 = gs, *o2 = psum, *o3 = ds, *cnt = route_count;
          const void* l0 = logits;
          const long long* rdp = dims;
          void* rargs[] = {&o0, &o1, &o2, &o3, &l0, &cnt, &rdp};
          void* rargs1[] = {&o0, &o1, &o2, &o3, &l0, &rdp};
          launch_generated(st, routing, routing_counted ? 16 : 1, routing_counted ? rargs : rargs1);
        } else {
          launch(st, k_top_k, 1, 32, 0, (const float*)logits, experts, weights, gs, ds);
        }
        // (out, in0 (unread), in1 (the residual), x, gate/up weights, scale, down weights, scale, h, barrier, dims)
        void* out = x;
        const void *in0 = n, *in1 = r, *ga = n, *gb = wgu[l], *gsp = gs, *db = wd[l], *dsp = ds;
        void *hp = h, *sp = gen_sync;
        const long long* dp = dims + 2 * traced;
        void* args[] = {&out, &in0, &in1, &ga, &gb, &gsp, &db, &dsp, &hp, &sp, &dp};
        launch_generated(st, experts_kernel, sms, args);
      }
    }
  };
  unsigned long long* trace_buf;
  CK(cudaMalloc(&trace_buf, 16 * 8));  // cleared before each way below
  CK(cudaMemcpyToSymbol(g_trace, &trace_buf, sizeof trace_buf));
  const int ways = kOwn + (int)generated.size() + (routing.f ? 1 : 0);
  std::vector<std::string> names = {"two dense GEMVs (no MoE)", "dense + MoE in four kernels", "dense + MoE fused", "dense + router, top-k, experts",
                                    "dense + router, top-k, 16 columns, reduce", "dense + router, top-k, 32 columns, reduce",
                                    "dense + router, top-k, 48 columns, reduce"};
  for (const Generated& g : generated) names.push_back("dense + router, top-k, " + g.name);
  if (routing.f) names.push_back("dense + router, " + routing.name + ", " + generated[0].name);
  std::vector<std::vector<float>> results(ways);
  std::vector<double> per_layer(ways);
  const char* phase[] = {"waited", "router rows", "barrier 1", "top-k and copies issued", "gate/up (block 0)", "barrier 2", "down rows copied",
                         "down and stored"};
  for (int way = 0; way < ways; ++way) {
    CK(cudaMemset(trace_buf, 0, 16 * 8));
    const Generated* gen = experts_of(way);
    if (gen && gen->trace) cuMemsetD8(gen->trace, 0, 16 * 8);
    per_layer[way] = time_chain(st, [&] { record(way); }, reps) / layers;
    results[way].resize(kH);
    CK(cudaMemcpy(results[way].data(), x, kH * 4, cudaMemcpyDeviceToHost));
    unsigned long long tr[16];
    if (way == 2 || way == 3) {
      // The stamps of the last replay's traced layer.
      CK(cudaMemcpy(tr, trace_buf, sizeof tr, cudaMemcpyDeviceToHost));
      std::printf("%s, layer %d, block 0 (ns from its start):", names[way].c_str(), layers / 2);
      for (int i = 1; i <= 8; ++i)
        if (way == 2 || i == 1 || i >= 4) std::printf(" %s %llu;", phase[i - 1], tr[i] - tr[0]);
      std::printf(" inputs read %llu, copies issued %llu; the last block's gate/up end %llu\n", tr[10] - tr[0], tr[11] - tr[0], tr[9] - tr[0]);
    } else if (gen && gen->trace) {
      CK(cudaMemcpy(tr, (const void*)gen->trace, sizeof tr, cudaMemcpyDeviceToHost));
      const char* gphase[] = {"waited", "experts listed", "scales, copies issued", "x read", "gate/up (block 0)", "barrier", "down rows copied",
                              "down and stored"};
      std::printf("%s, layer %d, block 0 (ns from its start):", names[way].c_str(), layers / 2);
      for (int i = 1; i <= 8; ++i) std::printf(" %s %llu;", gphase[i - 1], tr[i] - tr[0]);
      std::printf(" the last block's gate/up end %llu\n", tr[9] - tr[0]);
    }
  }
  // The dense-only chain runs two dense GEMVs a layer; the MoE chains one and the MoE.
  const double dense = per_layer[0] / 2;
  float scale = 0.0f;
  for (int i = 0; i < kH; ++i) scale = std::max(scale, std::fabs(results[1][i]));
  std::printf("a dense GEMV alone %.2f us; what the MoE adds a layer, and the max diff from four kernels after %d layers (max |x| %.2e):\n", dense,
              layers, scale);
  for (int way = 1; way < ways; ++way) {
    float diff = 0.0f;
    for (int i = 0; i < kH; ++i) diff = std::max(diff, std::fabs(results[1][i] - results[way][i]));
    std::printf("  %-48s %7.2f us (a layer in all %7.2f)  diff %.2e\n", names[way].c_str(), per_layer[way] - dense, per_layer[way], diff);
  }
  return 0;
}
