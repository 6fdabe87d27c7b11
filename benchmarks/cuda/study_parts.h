// Pieces the standalone GPU design studies share (gemv_bench.cu, staged_gemv_bench.cu,
// moe_layer_bench.cu, chain_wait_bench.cu, l2_ahead_bench.cu, layer_persistent_bench.cu): the bf16 dot product, a warp's
// GEMV row, streaming loads, warp sums, the MoE's top 8 of 128, a grid barrier, random bf16
// weights, programmatic dependent launch, the tensor memory accelerator's bulk copies, and timing
// a chain of launches as a CUDA graph.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda_check.h"

// Eight bf16 weights (a 16-byte load) times eight f32 values, added to acc in order.
__device__ __forceinline__ float dot8(uint4 w, float4 a, float4 b, float acc) {
  acc = __fmaf_rn(a.x, __uint_as_float(w.x << 16), acc);
  acc = __fmaf_rn(a.y, __uint_as_float(w.x & 0xffff0000u), acc);
  acc = __fmaf_rn(a.z, __uint_as_float(w.y << 16), acc);
  acc = __fmaf_rn(a.w, __uint_as_float(w.y & 0xffff0000u), acc);
  acc = __fmaf_rn(b.x, __uint_as_float(w.z << 16), acc);
  acc = __fmaf_rn(b.y, __uint_as_float(w.z & 0xffff0000u), acc);
  acc = __fmaf_rn(b.z, __uint_as_float(w.w << 16), acc);
  acc = __fmaf_rn(b.w, __uint_as_float(w.w & 0xffff0000u), acc);
  return acc;
}

// One W row (kv 16-byte words of bf16) times x in shared memory, summed over the warp: lanes
// over the row, eight loads in flight, weights read once (__ldcs). Every lane gets the sum.
__device__ __forceinline__ float warp_row_dot(const uint4* __restrict__ w, const float4* s_x, int kv, int lane) {
  float acc = 0.0f;
  for (int p = lane; p < kv; p += 32 * 8) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = p + 32 * u < kv ? __ldcs(w + p + 32 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int q = p + 32 * u;
      if (q < kv) acc = dot8(v[u], s_x[2 * q], s_x[2 * q + 1], acc);
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

// A streaming 16-byte load the compiler keeps in program order (volatile), so that a loop's
// loads all go out before the products that use them.
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// silu(g . n) * (u . n) for a gate row and its up row of 2048 bf16 weights, by one warp (eight
// loads of each row in flight a lane; n as float4s); every lane gets the value.
__device__ __forceinline__ float gated_pair_2048(const uint4* __restrict__ g, const uint4* __restrict__ u, const float4* n4, int lane) {
  uint4 wg[8], wu[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) wg[i] = ld_stream(g + lane + 32 * i), wu[i] = ld_stream(u + lane + 32 * i);
  float sg = 0.0f, su = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int q = lane + 32 * i;
    const float4 a = n4[2 * q], b = n4[2 * q + 1];
    sg = dot8(wg[i], a, b, sg);
    su = dot8(wu[i], a, b, su);
  }
  sg = warp_sum(sg), su = warp_sum(su);
  return sg / (1.0f + __expf(-sg)) * su;
}

// A grid-wide barrier for co-resident blocks: count wraps to 0 at the last arrival (atom.inc),
// which then advances the generation the others wait on. The arrival is acq_rel and the wait an
// acquire at GPU scope, so what a block wrote before the barrier (ordered by the bar.sync before
// the arrival) is seen by every block after it, without full fences. The spin is bounded, so
// that a fault traps instead of hanging the device.
__device__ void grid_sync(unsigned* count, unsigned* gen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned g, old, cur;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(g) : "l"(gen) : "memory");
    asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(count), "r"(gridDim.x - 1) : "memory");
    if (old == gridDim.x - 1) {
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(gen), "r"(g + 1) : "memory");
    } else {
      unsigned spins = 0;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(gen) : "memory");
        if (++spins > (1u << 22)) __trap();  // seconds: a fault, not a wait
      } while (cur == g);
    }
  }
  __syncthreads();
}

__device__ __forceinline__ unsigned order_key(float f) {
  const unsigned u = __float_as_uint(f);
  return u & 0x80000000u ? ~u : u | 0x80000000u;
}

// The 8 largest of 128 logits (ties: the lower lane; random weights have none) and their softmax
// renormalized over the 8, exp(l - max) / sum over the 8 of exp(l_j - max): the full softmax's
// denominator cancels. One warp; each round a max over orderable keys (redux.sync) and a ballot.
__device__ void top8_of_128(const float* logits, int* experts, float* weights) {
  const int lane = threadIdx.x & 31;
  float v[4];
  unsigned key[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = __ldcg(logits + lane + 32 * i), key[i] = order_key(v[i]);
  float top = 0.0f, mine = 0.0f, sum = 0.0f;
  for (int k = 0; k < 8; ++k) {
    unsigned best = 0;
    int at = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (key[i] > best) best = key[i], at = i;
    const unsigned m = __reduce_max_sync(0xffffffffu, best);
    const int winner = __ffs(__ballot_sync(0xffffffffu, best == m)) - 1;
    const int slot = __shfl_sync(0xffffffffu, at, winner);
    const float l = __shfl_sync(0xffffffffu, slot == 0 ? v[0] : slot == 1 ? v[1] : slot == 2 ? v[2] : v[3], winner);
    if (k == 0) top = l;
    const float p = __expf(l - top);
    sum += p;
    if (lane == k) mine = p;
    if (lane == winner) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (i == slot) key[i] = 0;
    }
    if (lane == 0) experts[k] = winner + 32 * slot;
  }
  if (lane < 8) weights[lane] = mine / sum;
  __syncwarp();
}

// bf16 values in [-scale / 2, scale / 2) from a hash of the index and `seed`.
__global__ void fill_bf16(uint16_t* p, long long count, unsigned seed, float scale = 0.05f) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = (uint16_t)(__float_as_uint(((h & 0xffff) / 65536.0f - 0.5f) * scale) >> 16);
  }
}

// `count` such values in new device memory.
inline uint4* random_bf16(long long count, unsigned seed, float scale = 0.05f) {
  uint4* p;
  CK(cudaMalloc(&p, count * 2));
  fill_bf16<<<2048, 256>>>((uint16_t*)p, count, seed, scale);
  CK(cudaDeviceSynchronize());
  return p;
}

__device__ __forceinline__ void grid_release() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void grid_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// Bulk copies global -> shared counted by the mbarrier at `bar` (sm_90): one thread expects the
// bytes and issues the copies (16-byte multiples); every reader waits. One use a launch.
__device__ __forceinline__ void bulk_expect(unsigned long long* bar, unsigned bytes) {
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   (unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(bytes), "r"((unsigned)__cvta_generic_to_shared(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_wait(unsigned long long* bar) {
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}

// A launch that may start before the kernel before it ends (`pdl`: the programmatic stream
// serialization attribute; the kernels then order themselves with grid_release / grid_wait).
template <typename F, typename... Args>
void launch_pdl(cudaStream_t st, F kernel, int grid, int threads, size_t smem, bool pdl, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

// Replays `exec` `reps` times after two untimed replays; the median, in microseconds.
inline double median_replay_us(cudaGraphExec_t exec, cudaStream_t st, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int i = 0; i < reps + 2; ++i) {
    CK(cudaEventRecord(a, st));
    CK(cudaGraphLaunch(exec, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) t.push_back(ms * 1000.0f);
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return t[t.size() / 2];
}

// The launches `body` makes on `st`, captured as one CUDA graph: the median replay, in microseconds.
template <typename Body>
double time_chain(cudaStream_t st, Body body, int reps) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  body();
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  const double us = median_replay_us(exec, st, reps);
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  return us;
}
