// A whole Qwen3-30B-A3B decode layer (attention and MoE) as phases of one persistent kernel,
// against simple reference kernels. A design study, not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/layer_persistent_bench.cu -o /tmp/layer
//   /tmp/layer [layers=16] [replays=21] [pos=527]
// The question: how far below the generated step's 57-60 us a layer (the per-kernel timeline of
// docs/cuda_backend.md, eight launches a layer) can one kernel take a layer, when kernel
// boundaries become grid barriers and the dense weights are copied into shared memory while
// latency-bound phases run. The HBM floor for the ~116 MB a layer reads is 27.4 us.
//
// One block an SM (512 threads), the grid's blocks meeting at grid-wide barriers. A layer:
//  1. x normed in every block; the block's rows of the q/k/v weight (already in shared memory,
//     copied by the tensor memory accelerator during the layer before) times it -> raw q/k/v.
//     Then the block's o rows are copied into the same shared memory while 2-3 run.
//  2. attention partials: (kv head, slice of the context) a block; each block norms and rotates
//     its 8 q heads and the new k itself (the last slice writes k and v into the cache).
//  3. the slices combined (a block a quarter head) -> a.
//  4. r = x + Wo a from shared memory; the block's router row loaded into registers; the next
//     layer's q/k/v rows copied into shared memory, to arrive while the MoE streams.
//  5. r normed in every block, a router row a block -> logits.
//  6. top-8 in every block; block (slot, 48-column chunk) computes its 48 gated products of the
//     slot's expert and their part of the down product over all 2048 rows, times the routing
//     weight; partial sums written (or added into x' with vector atomics: ATOMIC).
//  7. (partials) x' = r + the 128 partial sums, 16 rows a block.
// Barriers: 7 a layer with partial sums, 6 with atomics. Ways timed (the layers' chain as one
// CUDA graph, medians of its replays): the reference kernels (simple, 11 launches a layer, a
// check rather than a peer), the same phases as a kernel each (7 launches a layer chained with
// programmatic dependent launch, nothing staged: what the persistent form saves over the same
// code as ordinary kernels), the persistent kernel for all layers in one launch (partials,
// atomics), one launch a layer (no copies across layers), and the kernel without the copies
// (rows read from memory in their phases). Each way's x after every layer
// and its cache entries are compared with the reference's. One middle layer's phases are
// stamped (%globaltimer, block 0, ns from the layer's start).
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

constexpr int kH = 2048, kQ = 4096, kKV = 512, kQKV = kQ + 2 * kKV, kD = 128, kKvHeads = 4, kGroup = 8;
constexpr int kE = 128, kTop = 8, kI = 768, kChunk = 48, kChunks = kI / kChunk, kUnits = kTop * kChunks;  // 128 expert units
constexpr int kCtx = 1024, kMaxSlice = 128;
constexpr float kEps = 1e-6f, kTheta = 1e6f;
constexpr int kThreads = 512, kWarps = kThreads / 32;

struct LayerWeights {
  const uint4 *qkv, *o, *router, *gate_up, *down;  // bf16 rows: [5120][2048], [2048][4096], [128][2048], [128][2][768][2048], [128][2048][768]
  const float *g1, *g2, *qn, *kn;                   // the two norms' gains, the q and k norms' (128)
};

// Cross-block scratch of the persistent kernel (read with ld.cg: written inside the launch).
struct Scratch {
  float *qkv, *pm, *pl, *pacc, *a, *r, *logits, *part;
  unsigned* sync;
};

__device__ unsigned long long* g_trace;  // [40]: the traced layer's stamps (block 0)
__device__ __forceinline__ void stamp(bool on, int& slot) {
  if (!on) return;
  if (threadIdx.x == 0 && blockIdx.x == 0 && g_trace) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    g_trace[slot] = t;
  }
  ++slot;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum over the block (every thread gets it); red: kWarps floats of shared memory.
__device__ float block_sum(float v, float* red) {
  v = warp_sum(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) s += red[w];
  return s;
}

// Rotary angle of pair i (dims i and i + 64, rotate-half form) at position pos; one function
// for both ways so that their angles agree to the bit.
__device__ __forceinline__ void rope_cs(int pos, int i, float* c, float* s) {
  const float inv = powf(kTheta, -2.0f * (float)i / (float)kD);
  sincosf((float)pos * inv, s, c);
}

// Bulk copies into shared memory counted by an mbarrier that is used once a layer.
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(bar)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Thread 0, after a __syncthreads that ends every read of the region: the copies of `bytes` from
// src (16-byte multiples) into dst, in pieces of at most 32 KB.
__device__ void copy_rows(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // our generic reads before the async writes
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(bar)), "r"(bytes) : "memory");
  for (unsigned at = 0; at < bytes; at += 32768u)
    bulk_copy((char*)dst + at, (const char*)src + at, min(32768u, bytes - at), bar);
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done = 0, spins = 0;
  while (!done) {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(done) : "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(parity) : "memory");
    if (++spins > (1u << 22)) __trap();  // seconds: a fault, not a wait
  }
}

// s = rmsnorm(x) * g over kH values (x read with ld.cg), into shared memory; ends synced.
__device__ void norm_into(const float* x, const float* __restrict__ g, float* s, float* red) {
  const int t = threadIdx.x;  // kThreads * 4 == kH
  const float4 v = __ldcg(reinterpret_cast<const float4*>(x) + t);
  const float rs = rsqrtf(block_sum(v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w, red) / kH + kEps);
  const float4 gv = __ldg(reinterpret_cast<const float4*>(g) + t);
  reinterpret_cast<float4*>(s)[t] = make_float4(v.x * rs * gv.x, v.y * rs * gv.y, v.z * rs * gv.z, v.w * rs * gv.w);
  __syncthreads();
}

// Row word q of a weight row: from shared memory where staged, else streamed from memory.
template <bool Stage>
__device__ __forceinline__ uint4 row_word(const uint4* row, int q) {
  return Stage ? row[q] : __ldcs(row + q);
}

// A warp's product of one weight row (32 * Loads words of 8 bf16) with x (float4s in shared
// memory): a lane's loads all in flight before its products; every lane gets the sum.
template <bool Stage, int Loads>
__device__ __forceinline__ float row_dot(const uint4* row, const float4* x4, int lane) {
  uint4 v[Loads];
#pragma unroll
  for (int u = 0; u < Loads; ++u) v[u] = row_word<Stage>(row, lane + 32 * u);
  float acc = 0.0f;
#pragma unroll
  for (int u = 0; u < Loads; ++u) {
    const int q = lane + 32 * u;
    acc = dot8(v[u], x4[2 * q], x4[2 * q + 1], acc);
  }
  return warp_sum(acc);
}

// ---- the layer's phases, shared by the persistent kernel and the kernel-a-phase chain ----
// A block's shared memory (one block an SM, kThreads threads).
struct Shared {
  uint4* w;                    // the block's staged q/k/v rows, then its o rows (dynamic)
  float* vec;                  // [kQ]: normed x, the q heads, a, normed r
  float (*kv)[kD];             // the new k and v of the block's kv head
  float *h, *out;              // a unit's gated products [kChunk], its down product [kH]
  float (*score)[kMaxSlice];   // [kGroup][..]
  float *m, *l, *red, *p;
  float (*comb)[32][2];        // [kWarps][32][2]
  float (*sum)[16];            // [32][16]
  int* e;
  unsigned long long* bars;    // [2]: q/k/v rows in, o rows in
};

// One layer's operands and this block's share of each phase's work.
struct Layer {
  const LayerWeights* W;  // all layers (the staged copies read the next one's rows)
  int l, pos, atomic_sum;
  const float* x;
  float *xo, *kc, *vc;
  Scratch s;
  int b, G, tid, lane, warp, q0, q1, o0, o1, S, L;
};

__device__ Layer layer_at(const LayerWeights* W, float* kcache, float* vcache, float* xs, const Scratch& s, int l, int pos, int atomic_sum) {
  Layer c;
  c.W = W, c.l = l, c.pos = pos, c.atomic_sum = atomic_sum, c.s = s;
  c.x = xs + (long long)l * kH, c.xo = xs + (long long)(l + 1) * kH;
  c.kc = kcache + (long long)l * kKvHeads * kCtx * kD, c.vc = vcache + (long long)l * kKvHeads * kCtx * kD;
  c.b = blockIdx.x, c.G = gridDim.x, c.tid = threadIdx.x, c.lane = threadIdx.x & 31, c.warp = threadIdx.x >> 5;
  c.q0 = kQKV * c.b / c.G, c.q1 = kQKV * (c.b + 1) / c.G, c.o0 = kH * c.b / c.G, c.o1 = kH * (c.b + 1) / c.G;
  c.S = c.G / kKvHeads, c.L = pos + 1;
  return c;
}

// 1. raw q/k/v = Wqkv rmsnorm(x): the block's rows, from shared memory where staged (then its o
// rows' copy is issued into the same memory).
template <bool Stage>
__device__ void phase_qkv(const Layer& c, const Shared& sh, unsigned parity) {
  const LayerWeights& w = c.W[c.l];
  norm_into(c.x, w.g1, sh.vec, sh.red);
  if (Stage) mbar_wait(&sh.bars[0], parity);
  const float4* n4 = reinterpret_cast<const float4*>(sh.vec);
  for (int row = c.q0 + c.warp; row < c.q1; row += kWarps) {
    const uint4* wr = Stage ? sh.w + (row - c.q0) * (kH / 8) : w.qkv + (long long)row * (kH / 8);
    const float acc = row_dot<Stage, kH / 256>(wr, n4, c.lane);
    if (c.lane == 0) c.s.qkv[row] = acc;
  }
  __syncthreads();
  if (Stage && c.tid == 0) copy_rows(sh.w, w.o + (long long)c.o0 * (kQ / 8), (unsigned)(c.o1 - c.o0) * kQ * 2, &sh.bars[1]);
}

// 2. attention partials: kv head b / S, context slice b % S; each block norms and rotates its
// eight q heads and the new k itself, and the last slice writes k and v into the cache.
__device__ void phase_attention(const Layer& c, const Shared& sh) {
  if (c.b >= kKvHeads * c.S) return;
  const LayerWeights& w = c.W[c.l];
  const int kv = c.b / c.S, sl = c.b % c.S, t0 = c.L * sl / c.S, t1 = c.L * (sl + 1) / c.S, T = t1 - t0, pos = c.pos, lane = c.lane, warp = c.warp;
  if (warp < kGroup + 2) {
    const float* src = warp < kGroup ? c.s.qkv + (kv * kGroup + warp) * kD : c.s.qkv + kQ + (warp - kGroup) * kKV + kv * kD;
    float v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcg(src + lane + 32 * u);
    if (warp <= kGroup) {  // q heads and k: rms norm and rotary
      const float* g = warp < kGroup ? w.qn : w.kn;
      const float rs = rsqrtf(warp_sum(v[0] * v[0] + v[1] * v[1] + v[2] * v[2] + v[3] * v[3]) / kD + kEps);
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] *= rs * __ldg(g + lane + 32 * u);
#pragma unroll
      for (int u = 0; u < 2; ++u) {  // pairs (lane + 32u, lane + 32u + 64)
        float cs, sn;
        rope_cs(pos, lane + 32 * u, &cs, &sn);
        const float lo = v[u], hi = v[u + 2];
        v[u] = lo * cs - hi * sn;
        v[u + 2] = hi * cs + lo * sn;
      }
    }
    float* dst = warp < kGroup ? sh.vec + warp * kD : sh.kv[warp - kGroup];
#pragma unroll
    for (int u = 0; u < 4; ++u) dst[lane + 32 * u] = v[u];
    if (warp >= kGroup && sl == c.S - 1) {
      float* cache = (warp == kGroup ? c.kc : c.vc) + ((long long)kv * kCtx + pos) * kD;
#pragma unroll
      for (int u = 0; u < 4; ++u) cache[lane + 32 * u] = v[u];
    }
  }
  __syncthreads();
  const float scale = rsqrtf((float)kD);
  for (int t = t0 + warp; t < t1; t += kWarps) {
    const float4 k4 = t == pos ? reinterpret_cast<const float4*>(sh.kv[0])[lane]
                               : __ldg(reinterpret_cast<const float4*>(c.kc + ((long long)kv * kCtx + t) * kD) + lane);
    float mine = 0.0f;
#pragma unroll
    for (int h = 0; h < kGroup; ++h) {
      const float4 q4 = reinterpret_cast<const float4*>(sh.vec + h * kD)[lane];
      const float d = warp_sum(q4.x * k4.x + q4.y * k4.y + q4.z * k4.z + q4.w * k4.w);
      if (lane == h) mine = d;
    }
    if (lane < kGroup) sh.score[lane][t - t0] = mine * scale;
  }
  __syncthreads();
  if (warp < kGroup) {
    float m = -INFINITY;
    for (int t = lane; t < T; t += 32) m = fmaxf(m, sh.score[warp][t]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int t = lane; t < T; t += 32) {
      const float p = __expf(sh.score[warp][t] - m);
      sh.score[warp][t] = p;
      sum += p;
    }
    sum = warp_sum(sum);
    if (lane == 0) sh.m[warp] = m, sh.l[warp] = sum;
  }
  __syncthreads();
  const int d = c.tid & (kD - 1), h0 = c.tid >> 7;  // heads h0 and h0 + 4
  float a0 = 0.0f, a1 = 0.0f;
  const int cached = min(t1, pos);  // the new token (the last slice's last) comes from sh.kv
  for (int t = t0; t < cached; t += 8) {  // eight rows' loads in flight
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = t + u < cached ? __ldg(c.vc + ((long long)kv * kCtx + t + u) * kD + d) : 0.0f;
#pragma unroll
    for (int u = 0; u < 8; ++u)
      if (t + u < cached) a0 = __fmaf_rn(sh.score[h0][t + u - t0], v[u], a0), a1 = __fmaf_rn(sh.score[h0 + 4][t + u - t0], v[u], a1);
  }
  if (t1 > pos) {
    a0 = __fmaf_rn(sh.score[h0][pos - t0], sh.kv[1][d], a0);
    a1 = __fmaf_rn(sh.score[h0 + 4][pos - t0], sh.kv[1][d], a1);
  }
  const int hq0 = kv * kGroup + h0, hq1 = hq0 + 4, S = c.S;
  c.s.pacc[((long long)hq0 * S + sl) * kD + d] = a0;
  c.s.pacc[((long long)hq1 * S + sl) * kD + d] = a1;
  if (d == 0) {
    c.s.pm[hq0 * S + sl] = sh.m[h0], c.s.pl[hq0 * S + sl] = sh.l[h0];
    c.s.pm[hq1 * S + sl] = sh.m[h0 + 4], c.s.pl[hq1 * S + sl] = sh.l[h0 + 4];
  }
}

// 3. the slices combined: block b < 128 takes head b / 4, dims (b % 4) * 32 ..
__device__ void phase_combine(const Layer& c, const Shared& sh) {
  if (c.b >= 128) return;
  const int hq = c.b >> 2, d = ((c.b & 3) << 5) + c.lane, S = c.S;
  float M = -INFINITY;
  for (int sl = 0; sl < S; ++sl) M = fmaxf(M, __ldcg(c.s.pm + hq * S + sl));
  float num = 0.0f, den = 0.0f;
  for (int sl = c.warp; sl < S; sl += kWarps) {
    const float m = __ldcg(c.s.pm + hq * S + sl);
    const float f = m == -INFINITY ? 0.0f : __expf(m - M);
    num = __fmaf_rn(f, __ldcg(c.s.pacc + ((long long)hq * S + sl) * kD + d), num);
    den = __fmaf_rn(f, __ldcg(c.s.pl + hq * S + sl), den);
  }
  sh.comb[c.warp][c.lane][0] = num, sh.comb[c.warp][c.lane][1] = den;
  __syncthreads();
  if (c.warp == 0) {
    float n = 0.0f, e = 0.0f;
    for (int g = 0; g < kWarps; ++g) n += sh.comb[g][c.lane][0], e += sh.comb[g][c.lane][1];
    c.s.a[hq * kD + d] = n / e;
  }
}

// The block's router row (b < kE) into registers: a weight, so it may load before any wait.
__device__ uint4 router_row(const Layer& c) {
  return c.b < kE && c.tid < kH / 8 ? __ldg(c.W[c.l].router + (long long)c.b * (kH / 8) + c.tid) : make_uint4(0, 0, 0, 0);
}

// 4. r = x + Wo a, the block's o rows (from shared memory where staged; then the next layer's
// q/k/v rows are copied into it when `next` has one).
template <bool Stage>
__device__ void phase_o(const Layer& c, const Shared& sh, unsigned parity, bool next) {
  const LayerWeights& w = c.W[c.l];
  for (int t = c.tid; t < kQ / 4; t += kThreads) reinterpret_cast<float4*>(sh.vec)[t] = __ldcg(reinterpret_cast<const float4*>(c.s.a) + t);
  if (Stage) mbar_wait(&sh.bars[1], parity);
  __syncthreads();
  const float4* a4 = reinterpret_cast<const float4*>(sh.vec);
  for (int row = c.o0 + c.warp; row < c.o1; row += kWarps) {
    const uint4* wr = Stage ? sh.w + (row - c.o0) * (kQ / 8) : w.o + (long long)row * (kQ / 8);
    const float acc = row_dot<Stage, kQ / 256>(wr, a4, c.lane);
    if (c.lane == 0) {
      const float rv = __ldcg(c.x + row) + acc;
      c.s.r[row] = rv;
      if (c.atomic_sum) c.xo[row] = rv;
    }
  }
  __syncthreads();
  if (Stage && c.tid == 0 && next)
    copy_rows(sh.w, c.W[c.l + 1].qkv + (long long)c.q0 * (kH / 8), (unsigned)(c.q1 - c.q0) * kH * 2, &sh.bars[0]);
}

// 5. the router's logits, a row a block (b < kE), over rmsnorm(r) (left in sh.vec for phase 6).
__device__ void phase_router(const Layer& c, const Shared& sh, uint4 rw) {
  norm_into(c.s.r, c.W[c.l].g2, sh.vec, sh.red);
  if (c.b < kE) {
    const float4* n4 = reinterpret_cast<const float4*>(sh.vec);
    const float v = c.tid < kH / 8 ? dot8(rw, n4[2 * c.tid], n4[2 * c.tid + 1], 0.0f) : 0.0f;
    const float sum = block_sum(v, sh.red);
    if (c.tid == 0) c.s.logits[c.b] = sum;
  }
}

// 6. top-8 in every block; block b < 128 takes slot b / 16, columns (b % 16) * 48 ..: the gated
// products of those columns and their share of the down product over all rows, times the
// routing weight, into partial rows (or added into x' with float4 atomics). sh.vec: rmsnorm(r).
__device__ void phase_experts(const Layer& c, const Shared& sh, bool on, int& st) {
  const LayerWeights& w = c.W[c.l];
  if (c.warp == 0) top8_of_128(c.s.logits, sh.e, sh.p);
  for (int t = c.tid; t < kH; t += kThreads) sh.out[t] = 0.0f;
  __syncthreads();
  stamp(on, st);
  if (c.b >= kUnits) {
    stamp(on, st);  // keeps the stamp slots aligned with the units'
    return;
  }
  const int slot = c.b / kChunks, j0 = (c.b % kChunks) * kChunk, e = sh.e[slot], lane = c.lane, tid = c.tid;
  const float4* n4 = reinterpret_cast<const float4*>(sh.vec);
  for (int jj = c.warp; jj < kChunk; jj += kWarps) {
    const uint4* g = w.gate_up + ((long long)e * 2 * kI + j0 + jj) * (kH / 8);
    const float v = gated_pair_2048(g, g + (long long)kI * (kH / 8), n4, lane);
    if (lane == 0) sh.h[jj] = v;
  }
  __syncthreads();
  stamp(on, st);
  // The down rows' 48 columns of this chunk: 3 threads a row, 16 columns (two loads) each.
  const uint4* dn = w.down + (long long)e * kH * (kI / 8) + j0 / 8;
  const float4* h4 = reinterpret_cast<const float4*>(sh.h);
#pragma unroll
  for (int batch = 0; batch < 3; ++batch) {
    uint4 v[8];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int k = tid + kThreads * (4 * batch + q), row = k / 3, part = k % 3;
      v[2 * q] = ld_stream(dn + (long long)row * (kI / 8) + 2 * part);
      v[2 * q + 1] = ld_stream(dn + (long long)row * (kI / 8) + 2 * part + 1);
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int k = tid + kThreads * (4 * batch + q), row = k / 3, part = k % 3;
      const float acc = dot8(v[2 * q + 1], h4[4 * part + 2], h4[4 * part + 3], dot8(v[2 * q], h4[4 * part], h4[4 * part + 1], 0.0f));
      atomicAdd(sh.out + row, acc);
    }
  }
  __syncthreads();
  const float p = sh.p[slot];
  for (int t = tid; t < kH / 4; t += kThreads) {
    const float4 o = reinterpret_cast<const float4*>(sh.out)[t];
    const float4 v = make_float4(p * o.x, p * o.y, p * o.z, p * o.w);
    if (c.atomic_sum) atomicAdd(reinterpret_cast<float4*>(c.xo) + t, v);
    else reinterpret_cast<float4*>(c.s.part + (long long)c.b * kH)[t] = v;
  }
}

// 7. x' = r + the units' partial sums (rows o0 .. o1, at most 16).
__device__ void phase_sum(const Layer& c, const Shared& sh) {
  const int row = c.tid & 15, grp = c.tid >> 4;  // 32 groups of 4 units
  float acc = 0.0f;
  if (c.o0 + row < c.o1)
    for (int u = grp; u < kUnits; u += 32) acc += __ldcg(c.s.part + (long long)u * kH + c.o0 + row);
  sh.sum[grp][row] = acc;
  __syncthreads();
  if (c.tid < c.o1 - c.o0) {
    float t = __ldcg(c.s.r + c.o0 + c.tid);
    for (int g = 0; g < 32; ++g) t += sh.sum[g][c.tid];
    c.xo[c.o0 + c.tid] = t;
  }
}

// The block's shared memory, declared once for both kernels below.
#define LM_SHARED                                                                                                            \
  extern __shared__ __align__(128) uint4 s_w[];                                                                            \
  __shared__ __align__(16) float s_vec[kQ], s_kv[2][kD], s_h[kChunk], s_out[kH];                                          \
  __shared__ float s_score[kGroup][kMaxSlice], s_m[kGroup], s_l[kGroup], s_red[kWarps * 2], s_comb[kWarps][32][2], s_sum[32][16], \
      s_p[kTop];                                                                                                           \
  __shared__ int s_e[kTop];                                                                                                \
  __shared__ __align__(8) unsigned long long s_bars[2];                                                                    \
  const Shared sh{s_w, s_vec, s_kv, s_h, s_out, s_score, s_m, s_l, s_red, s_p, s_comb, s_sum, s_e, s_bars};

// ---- the persistent kernel: layers [l0, l1), the phases meeting at grid barriers ----
// Stage: the q/k/v and o rows copied into shared memory ahead of their phases (else read in them).
template <bool Stage>
__global__ void __launch_bounds__(kThreads, 1) k_layers(const LayerWeights* __restrict__ W, float* kcache, float* vcache, float* xs, Scratch s,
                                                       int l0, int l1, int pos, int atomic_sum, int traced) {
  LM_SHARED
  unsigned* const cnt = s.sync;
  unsigned* const gen = s.sync + 1;
  if (Stage && threadIdx.x == 0) {
    const int q0 = kQKV * blockIdx.x / gridDim.x, q1 = kQKV * (blockIdx.x + 1) / gridDim.x;
    mbar_init(&s_bars[0]);
    mbar_init(&s_bars[1]);
    copy_rows(s_w, W[l0].qkv + (long long)q0 * (kH / 8), (unsigned)(q1 - q0) * kH * 2, &s_bars[0]);
  }
  __syncthreads();
  for (int l = l0; l < l1; ++l) {
    const Layer c = layer_at(W, kcache, vcache, xs, s, l, pos, atomic_sum);
    const unsigned parity = (unsigned)(l - l0) & 1u;
    const bool on = l == traced;
    int st = 0;
    stamp(on, st);
    phase_qkv<Stage>(c, sh, parity);
    stamp(on, st);
    grid_sync(cnt, gen);
    stamp(on, st);
    phase_attention(c, sh);
    stamp(on, st);
    grid_sync(cnt, gen);
    stamp(on, st);
    phase_combine(c, sh);
    stamp(on, st);
    grid_sync(cnt, gen);
    stamp(on, st);
    const uint4 rw = router_row(c);
    phase_o<Stage>(c, sh, parity, l + 1 < l1);
    stamp(on, st);
    grid_sync(cnt, gen);
    stamp(on, st);
    phase_router(c, sh, rw);
    stamp(on, st);
    grid_sync(cnt, gen);
    stamp(on, st);
    phase_experts(c, sh, on, st);
    stamp(on, st);
    grid_sync(cnt, gen);
    stamp(on, st);
    if (!atomic_sum) {
      phase_sum(c, sh);
      stamp(on, st);
      grid_sync(cnt, gen);
      stamp(on, st);
    }
  }
}

// ---- a kernel a phase (partial sums, nothing staged): the same code, kernel boundaries with
// programmatic dependent launch instead of grid barriers. Each releases its dependents at its
// start and waits for the kernel before (their blocks need 36-96 registers a thread, not the
// persistent kernel's 128, so the next kernel's blocks may wait beside them); the router row
// loads before that wait.
template <int Phase>
__global__ void __launch_bounds__(kThreads, 1) k_phase(const LayerWeights* __restrict__ W, float* kcache, float* vcache, float* xs, Scratch s,
                                                      int l, int pos) {
  LM_SHARED
  const Layer c = layer_at(W, kcache, vcache, xs, s, l, pos, 0);
  uint4 rw = make_uint4(0, 0, 0, 0);
  if (Phase == 5) rw = router_row(c);
  grid_release();
  grid_wait();
  int st = 0;
  if (Phase == 1) phase_qkv<false>(c, sh, 0);
  if (Phase == 2) phase_attention(c, sh);
  if (Phase == 3) phase_combine(c, sh);
  if (Phase == 4) phase_o<false>(c, sh, 0, false);
  if (Phase == 5) phase_router(c, sh, rw);
  if (Phase == 6) {
    norm_into(c.s.r, W[l].g2, s_vec, s_red);  // phase 5 left it in its own blocks' shared memory
    phase_experts(c, sh, false, st);
  }
  if (Phase == 7) phase_sum(c, sh);
}

// ---- the reference kernels (plain launches; simple, not tuned) ----
__global__ void ref_norm(const float* x, const float* g, float* n) {  // one block of 256
  __shared__ float red[8];
  float q = 0.0f;
  for (int i = threadIdx.x; i < kH; i += 256) q += x[i] * x[i];
  const float rs = rsqrtf(block_sum(q, red) / kH + kEps);
  for (int i = threadIdx.x; i < kH; i += 256) n[i] = x[i] * rs * g[i];
}

// out[row] = (res ? res[row] : 0) + W[row] . v; a block of 128 a row.
__global__ void ref_gemv(const uint4* W, const float* v, const float* res, float* out, int cols) {
  __shared__ float red[4];
  const int row = blockIdx.x, kv = cols / 8;
  const float4* v4 = reinterpret_cast<const float4*>(v);
  float acc = 0.0f;
  for (int q = threadIdx.x; q < kv; q += 128) acc = dot8(W[(long long)row * kv + q], v4[2 * q], v4[2 * q + 1], acc);
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) out[row] = (res ? res[row] : 0.0f) + acc;
}

// Block h < 32: q head h normed and rotated into q; 32..35: k heads into the cache; 36..39: v.
__global__ void ref_qk(const float* qkv, const float* qn, const float* kn, int pos, float* q, float* kc, float* vc) {
  __shared__ float buf[kD], red[4];
  const int h = blockIdx.x, d = threadIdx.x;
  const float* src = h < 32 ? qkv + h * kD : qkv + kQ + (h - 32) * kD;  // k heads then v heads follow q
  float v = src[d];
  if (h < 36) {
    const float rs = rsqrtf(block_sum(v * v, red) / kD + kEps);
    buf[d] = v * rs * (h < 32 ? qn : kn)[d];
    __syncthreads();
    float c, s;
    rope_cs(pos, d & 63, &c, &s);
    v = d < 64 ? buf[d] * c - buf[d + 64] * s : buf[d] * c + buf[d - 64] * s;
  }
  if (h < 32) q[h * kD + d] = v;
  else if (h < 36) kc[((long long)(h - 32) * kCtx + pos) * kD + d] = v;
  else vc[((long long)(h - 36) * kCtx + pos) * kD + d] = v;
}

// a[head] = softmax(q k^T / sqrt(128)) v over positions 0..L-1; a block of 128 a q head.
__global__ void ref_attention(const float* q, const float* kc, const float* vc, int L, float* a) {
  __shared__ float sq[kD], sc[kCtx], red[4];
  const int h = blockIdx.x, kv = h / kGroup, t0 = threadIdx.x;
  sq[t0] = q[h * kD + t0];
  __syncthreads();
  float m = -INFINITY;
  for (int t = t0; t < L; t += 128) {
    const float* k = kc + ((long long)kv * kCtx + t) * kD;
    float d = 0.0f;
    for (int i = 0; i < kD; ++i) d += sq[i] * k[i];
    sc[t] = d * rsqrtf((float)kD);
    m = fmaxf(m, sc[t]);
  }
  __syncthreads();
  const float wm = warp_max(m);
  if ((t0 & 31) == 0) red[t0 >> 5] = wm;
  __syncthreads();
  m = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  __syncthreads();
  float sum = 0.0f;
  for (int t = t0; t < L; t += 128) sc[t] = __expf(sc[t] - m), sum += sc[t];
  sum = block_sum(sum, red);
  float acc = 0.0f;
  for (int t = 0; t < L; ++t) acc += sc[t] * vc[((long long)kv * kCtx + t) * kD + t0];
  a[h * kD + t0] = acc / sum;
}

// Softmax over the 128 logits, the 8 largest (lowest index on ties), renormalized.
__global__ void ref_topk(const float* logits, int* experts, float* weights) {
  float m = -INFINITY, p[kE], sum = 0.0f;
  for (int i = 0; i < kE; ++i) m = fmaxf(m, logits[i]);
  for (int i = 0; i < kE; ++i) p[i] = expf(logits[i] - m), sum += p[i];
  bool taken[kE] = {};
  float chosen = 0.0f;
  for (int k = 0; k < kTop; ++k) {
    int best = -1;
    for (int i = 0; i < kE; ++i)
      if (!taken[i] && (best < 0 || p[i] > p[best])) best = i;
    taken[best] = true;
    experts[k] = best;
    weights[k] = p[best] / sum;
    chosen += weights[k];
  }
  for (int k = 0; k < kTop; ++k) weights[k] /= chosen;
}

// h[slot][j] = silu(Wg_e[j] . n) * (Wu_e[j] . n); grid (768, 8), 128 threads.
__global__ void ref_gate_up(const uint4* Wgu, const float* n, const int* experts, float* h) {
  __shared__ float red[4];
  const int j = blockIdx.x, slot = blockIdx.y, e = experts[slot];
  const uint4* g = Wgu + ((long long)e * 2 * kI + j) * (kH / 8);
  const uint4* u = g + (long long)kI * (kH / 8);
  const float4* n4 = reinterpret_cast<const float4*>(n);
  float sg = 0.0f, su = 0.0f;
  for (int q = threadIdx.x; q < kH / 8; q += 128) sg = dot8(g[q], n4[2 * q], n4[2 * q + 1], sg), su = dot8(u[q], n4[2 * q], n4[2 * q + 1], su);
  sg = block_sum(sg, red);
  su = block_sum(su, red);
  if (threadIdx.x == 0) h[slot * kI + j] = sg / (1.0f + expf(-sg)) * su;
}

// x'[row] = r[row] + sum over slots of p_slot Wd_e[row] . h[slot]; a block of 128 a row.
__global__ void ref_down(const uint4* Wd, const float* h, const int* experts, const float* weights, const float* r, float* xo) {
  __shared__ float red[4];
  const int row = blockIdx.x;
  float acc = 0.0f;
  for (int slot = 0; slot < kTop; ++slot) {
    const uint4* wr = Wd + ((long long)experts[slot] * kH + row) * (kI / 8);
    const float4* h4 = reinterpret_cast<const float4*>(h + slot * kI);
    float part = 0.0f;
    for (int q = threadIdx.x; q < kI / 8; q += 128) part = dot8(wr[q], h4[2 * q], h4[2 * q + 1], part);
    acc = __fmaf_rn(weights[slot], part, acc);
  }
  acc = block_sum(acc, red);
  if (threadIdx.x == 0) xo[row] = r[row] + acc;
}

__global__ void fill_f32(float* p, long long count, unsigned seed, float base, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = base + ((h & 0xffff) / 65536.0f - 0.5f) * scale;
  }
}

static float* random_f32(long long count, unsigned seed, float base, float scale) {
  float* p;
  CK(cudaMalloc(&p, count * 4));
  fill_f32<<<1024, 256>>>(p, count, seed, base, scale);
  CK(cudaDeviceSynchronize());
  return p;
}

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 16, reps = argc > 2 ? std::atoi(argv[2]) : 21, pos = argc > 3 ? std::atoi(argv[3]) : 527;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int G = prop.multiProcessorCount;
  if (G < 128 || pos + 1 > kCtx || (pos + 1 + G / kKvHeads - 1) / (G / kKvHeads) > kMaxSlice) {
    std::fprintf(stderr, "this study needs at least 128 SMs and pos < %d (got %d SMs, pos %d)\n", kCtx, G, pos);
    return 1;
  }
  const size_t smem = (size_t)std::max((kQKV + G - 1) / G * kH * 2, (kH + G - 1) / G * kQ * 2);
  std::printf("%s, %d SMs; %d layers, pos %d, medians of %d replays; %zu KB of weights staged a block\n", prop.name, G, layers, pos, reps,
              smem / 1024);
  std::vector<LayerWeights> hw(layers);
  for (int l = 0; l < layers; ++l) {
    const unsigned sd = 1000u * (l + 1);
    hw[l].qkv = random_bf16((long long)kQKV * kH, sd + 1, 0.08f);
    hw[l].o = random_bf16((long long)kH * kQ, sd + 2, 0.05f);
    hw[l].router = random_bf16((long long)kE * kH, sd + 3, 0.2f);
    hw[l].gate_up = random_bf16((long long)kE * 2 * kI * kH, sd + 4, 0.05f);
    hw[l].down = random_bf16((long long)kE * kH * kI, sd + 5, 0.05f);
    hw[l].g1 = random_f32(kH, sd + 6, 1.0f, 0.2f);
    hw[l].g2 = random_f32(kH, sd + 7, 1.0f, 0.2f);
    hw[l].qn = random_f32(kD, sd + 8, 1.0f, 0.2f);
    hw[l].kn = random_f32(kD, sd + 9, 1.0f, 0.2f);
  }
  LayerWeights* dw;
  CK(cudaMalloc(&dw, layers * sizeof(LayerWeights)));
  CK(cudaMemcpy(dw, hw.data(), layers * sizeof(LayerWeights), cudaMemcpyHostToDevice));
  const long long cache = (long long)layers * kKvHeads * kCtx * kD;
  float* k0 = random_f32(cache, 7, 0.0f, 2.0f);
  float* v0 = random_f32(cache, 8, 0.0f, 2.0f);
  float *kref, *vref, *kp, *vp;  // each way's own cache, copied from k0 / v0
  CK(cudaMalloc(&kref, cache * 4));
  CK(cudaMalloc(&vref, cache * 4));
  CK(cudaMalloc(&kp, cache * 4));
  CK(cudaMalloc(&vp, cache * 4));
  float *xs_ref, *xs_p;
  CK(cudaMalloc(&xs_ref, (layers + 1) * kH * 4));
  CK(cudaMalloc(&xs_p, (layers + 1) * kH * 4));
  {
    std::vector<float> hx(kH);
    for (int i = 0; i < kH; ++i) hx[i] = std::sin(0.37f * i);
    CK(cudaMemcpy(xs_ref, hx.data(), kH * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(xs_p, hx.data(), kH * 4, cudaMemcpyHostToDevice));
  }
  // Reference scratch.
  float *n, *qkv, *q, *a, *r, *logits, *weights, *h;
  int* experts;
  CK(cudaMalloc(&n, kH * 4));
  CK(cudaMalloc(&qkv, kQKV * 4));
  CK(cudaMalloc(&q, kQ * 4));
  CK(cudaMalloc(&a, kQ * 4));
  CK(cudaMalloc(&r, kH * 4));
  CK(cudaMalloc(&logits, kE * 4));
  CK(cudaMalloc(&weights, kTop * 4));
  CK(cudaMalloc(&h, kTop * kI * 4));
  CK(cudaMalloc(&experts, kTop * 4));
  // Persistent scratch.
  const int S = G / kKvHeads;
  Scratch sc;
  CK(cudaMalloc(&sc.qkv, kQKV * 4));
  CK(cudaMalloc(&sc.pm, 32 * S * 4));
  CK(cudaMalloc(&sc.pl, 32 * S * 4));
  CK(cudaMalloc(&sc.pacc, 32 * S * kD * 4));
  CK(cudaMalloc(&sc.a, kQ * 4));
  CK(cudaMalloc(&sc.r, kH * 4));
  CK(cudaMalloc(&sc.logits, kE * 4));
  CK(cudaMalloc(&sc.part, (long long)kUnits * kH * 4));
  CK(cudaMalloc(&sc.sync, 8));
  CK(cudaMemset(sc.sync, 0, 8));
  unsigned long long* trace;
  CK(cudaMalloc(&trace, 40 * 8));
  CK(cudaMemcpyToSymbol(g_trace, &trace, sizeof trace));

  CK(cudaFuncSetAttribute(k_layers<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  for (int staged = 1; staged >= 0; --staged) {
    int resident = 0;
    cudaFuncAttributes fa;
    if (staged) {
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, k_layers<true>, kThreads, smem));
      CK(cudaFuncGetAttributes(&fa, k_layers<true>));
    } else {
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, k_layers<false>, kThreads, 0));
      CK(cudaFuncGetAttributes(&fa, k_layers<false>));
    }
    std::printf("persistent kernel, %s: %d registers, %zu B static shared memory, %d block(s) an SM\n", staged ? "staged" : "unstaged",
                fa.numRegs, fa.sharedSizeBytes, resident);
    if (resident < 1) return 1;  // the grid barriers need every block resident
  }
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  struct Way {
    const char* name;
    bool staged, one_launch;
    int atomic_sum;
    bool phases;  // a kernel a phase
  };
  const Way ways[] = {{"reference kernels (11 launches a layer)", false, false, 0, false},
                      {"a kernel a phase (7 a layer, PDL)", false, false, 0, true},
                      {"persistent, one launch, partial sums", true, true, 0, false},
                      {"persistent, one launch, atomic sums", true, true, 1, false},
                      {"persistent, a launch a layer", true, false, 0, false},
                      {"persistent, unstaged, partial sums", false, true, 0, false},
                      {"persistent, unstaged, atomic sums", false, true, 1, false}};
  const int nways = sizeof ways / sizeof ways[0];
  const int traced = layers / 2;
  auto record = [&](int way) {
    if (way == 0) {
      for (int l = 0; l < layers; ++l) {
        const LayerWeights& w = hw[l];
        const float* x = xs_ref + l * kH;
        float* xo = xs_ref + (l + 1) * kH;
        float* kc = kref + (long long)l * kKvHeads * kCtx * kD;
        float* vc = vref + (long long)l * kKvHeads * kCtx * kD;
        ref_norm<<<1, 256, 0, st>>>(x, w.g1, n);
        ref_gemv<<<kQKV, 128, 0, st>>>(w.qkv, n, nullptr, qkv, kH);
        ref_qk<<<40, 128, 0, st>>>(qkv, w.qn, w.kn, pos, q, kc, vc);
        ref_attention<<<32, 128, 0, st>>>(q, kc, vc, pos + 1, a);
        ref_gemv<<<kH, 128, 0, st>>>(w.o, a, x, r, kQ);
        ref_norm<<<1, 256, 0, st>>>(r, w.g2, n);
        ref_gemv<<<kE, 128, 0, st>>>(w.router, n, nullptr, logits, kH);
        ref_topk<<<1, 1, 0, st>>>(logits, experts, weights);
        ref_gate_up<<<dim3(kI, kTop), 128, 0, st>>>(w.gate_up, n, experts, h);
        ref_down<<<kH, 128, 0, st>>>(w.down, h, experts, weights, r, xo);
      }
      return;
    }
    const Way& y = ways[way];
    if (y.phases) {
      bool pdl = false;  // the graph's first launch has no kernel before it
      for (int l = 0; l < layers; ++l) {
        launch_pdl(st, k_phase<1>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
        pdl = true;
        launch_pdl(st, k_phase<2>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
        launch_pdl(st, k_phase<3>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
        launch_pdl(st, k_phase<4>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
        launch_pdl(st, k_phase<5>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
        launch_pdl(st, k_phase<6>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
        launch_pdl(st, k_phase<7>, G, kThreads, 0, pdl, (const LayerWeights*)dw, kp, vp, xs_p, sc, l, pos);
      }
      return;
    }
    for (int l = 0; l < layers; l += y.one_launch ? layers : 1) {
      const int l1 = y.one_launch ? layers : l + 1;
      if (y.staged) k_layers<true><<<G, kThreads, smem, st>>>(dw, kp, vp, xs_p, sc, l, l1, pos, y.atomic_sum, traced);
      else k_layers<false><<<G, kThreads, 0, st>>>(dw, kp, vp, xs_p, sc, l, l1, pos, y.atomic_sum, traced);
    }
  };
  CK(cudaMemcpy(kref, k0, cache * 4, cudaMemcpyDeviceToDevice));
  CK(cudaMemcpy(vref, v0, cache * 4, cudaMemcpyDeviceToDevice));
  std::vector<float> ref((layers + 1) * kH), got((layers + 1) * kH), kr(cache), vr(cache), kg(cache), vg(cache);
  const double bytes = (double)kQKV * kH * 2 + (double)kH * kQ * 2 + (double)kE * kH * 2 + (double)kTop * 3 * kI * kH * 2 +
                       2.0 * (pos + 1) * kKvHeads * kD * 4;
  std::printf("a layer reads %.1f MB: %.2f us at 4.24 TB/s\n", bytes / 1e6, bytes / 4.24e6);
  const char* phase[] = {"start",  "q/k/v", "barrier 1", "attention partials", "barrier 2", "combined", "barrier 3", "o", "barrier 4", "router",
                         "barrier 5", "top-k", "gate/up", "down", "barrier 6", "summed", "barrier 7"};
  for (int way = 0; way < nways; ++way) {
    CK(cudaMemcpy(kp, k0, cache * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(vp, v0, cache * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemset(trace, 0, 40 * 8));
    const double us = time_chain(st, [&] { record(way); }, reps);
    CK(cudaStreamSynchronize(st));
    CK(cudaGetLastError());
    std::printf("%-44s %8.2f us a layer (%7.1f in all), %.2f TB/s", ways[way].name, us / layers, us, bytes * layers / us / 1e6);
    if (way == 0) {
      CK(cudaMemcpy(ref.data(), xs_ref, ref.size() * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(kr.data(), kref, cache * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(vr.data(), vref, cache * 4, cudaMemcpyDeviceToHost));
      float mx = 0.0f;
      for (float v : ref) mx = std::max(mx, std::fabs(v));
      std::printf("; max |x| %.3g\n", mx);
      continue;
    }
    CK(cudaMemcpy(got.data(), xs_p, got.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(kg.data(), kp, cache * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(vg.data(), vp, cache * 4, cudaMemcpyDeviceToHost));
    float worst = 0.0f, cworst = 0.0f;
    int first_bad = -1;
    for (int l = 1; l <= layers; ++l) {
      float d = 0.0f, m = 0.0f;
      for (int i = 0; i < kH; ++i) d = std::max(d, std::fabs(got[l * kH + i] - ref[l * kH + i])), m = std::max(m, std::fabs(ref[l * kH + i]));
      const float rel = d / std::max(m, 1e-20f);
      worst = std::max(worst, rel);
      if (rel > 1e-3f && first_bad < 0) first_bad = l;
    }
    for (long long i = 0; i < cache; ++i) cworst = std::max({cworst, std::fabs(kg[i] - kr[i]), std::fabs(vg[i] - vr[i])});
    std::printf("; x vs reference, worst layer max|diff|/max|x| %.2e%s; cache max|diff| %.2e\n", worst,
                first_bad < 0 ? "" : (" (over 1e-3 from layer " + std::to_string(first_bad) + ")").c_str(), cworst);
    if (ways[way].one_launch) {
      unsigned long long tr[40];
      CK(cudaMemcpy(tr, trace, sizeof tr, cudaMemcpyDeviceToHost));
      const int slots = ways[way].atomic_sum ? 15 : 17;
      std::printf("  layer %d, block 0 (us from the layer's start):", traced);
      for (int i = 1; i < slots; ++i) std::printf(" %s %.2f;", phase[i], (tr[i] - tr[0]) / 1e3);
      std::printf("\n");
    }
  }
  return 0;
}
