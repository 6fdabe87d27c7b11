// Decode attention over an f32 KV cache, two ways of splitting the keys, measured cold (the
// caches rotate through more memory than L2 holds) at the Llama-3-8B shape: 8 KV heads, 4 query
// rows a head (grouped-query), head dim 128. A design study for the generated one-launch decode
// attention (src/backends/cuda/cuda_attention_decode_codegen.cpp), not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/attention_decode_bench.cu -o /tmp/attention_decode_bench
//   /tmp/attention_decode_bench
// - "split": the generated kernel's structure. A block per (row group, 32-key slice); each
//   writes its slice's [max, sum, unnormalised rows] to a scratch and counts itself; the last
//   block of a group merges the slices (fence, atomic and a read of the scratch from L2).
// - "cluster C": a thread-block cluster of C blocks per row group, each taking 1/C of the keys
//   (64 a pass), every warp keeping its own online softmax; the blocks' results meet through
//   distributed shared memory (no scratch, no fence, no counter).
// Each kernel is checked against a plain reference and timed as a CUDA graph of back-to-back
// launches; medians of several graph runs, in µs a launch, beside an empty kernel's.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.h"

namespace cg = cooperative_groups;

constexpr int kGroups = 8, kRows = 4, kDim = 128, kSlice = 32;
constexpr float kNegInf = -INFINITY;

// The caches are [group][max_keys][dim]; q and out are [group][row][dim].
struct Problem {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  int keys, max_keys;
  float scale;
};

__device__ __forceinline__ float ex2(float x) { return exp2f(x * 1.4426950408889634f); }

// (m, l, o) merged with (m2, l2, o2), both rescaled to the larger max; -inf weighs nothing.
__device__ __forceinline__ void merge(float& m, float& l, float4& o, float m2, float l2, float4 o2) {
  const float mn = fmaxf(m, m2);
  const float p = m == kNegInf ? 0.0f : ex2(m - mn), r = m2 == kNegInf ? 0.0f : ex2(m2 - mn);
  l = l * p + l2 * r;
  o.x = o.x * p + o2.x * r; o.y = o.y * p + o2.y * r; o.z = o.z * p + o2.z * r; o.w = o.w * p + o2.w * r;
  m = mn;
}

// A warp's four keys' scores for the four rows, summed across the warp: lane 2i ends with the
// sum of (key i / 4, row i % 4) (the generated kernel's 16-shuffle tree).
__device__ __forceinline__ float warp_scores(const float (&qr)[kRows][4], const float (&kr)[4][4], int lane) {
  float a[16];
#pragma unroll
  for (int u = 0; u < 4; ++u)
#pragma unroll
    for (int rr = 0; rr < kRows; ++rr) a[4 * u + rr] = qr[rr][0] * kr[u][0] + qr[rr][1] * kr[u][1] + qr[rr][2] * kr[u][2] + qr[rr][3] * kr[u][3];
#pragma unroll
  for (int h = 8, off = 16; h >= 1; h >>= 1, off >>= 1) {
    const bool up = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const float send = up ? a[i] : a[i + h], keep = up ? a[i + h] : a[i];
      a[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
  }
  return a[0] + __shfl_xor_sync(0xffffffffu, a[0], 1);
}

__device__ __forceinline__ void load_rows(const Problem& p, int grp, long long key, bool here, int lane, float (&kr)[4], float (&vr)[4]) {
  if (here) {
    const long long at = ((long long)grp * p.max_keys + key) * kDim + lane * 4;
    const float4 k4 = *(const float4*)(p.k + at), v4 = *(const float4*)(p.v + at);
    kr[0] = k4.x; kr[1] = k4.y; kr[2] = k4.z; kr[3] = k4.w;
    vr[0] = v4.x; vr[1] = v4.y; vr[2] = v4.z; vr[3] = v4.w;
  } else {
    kr[0] = kr[1] = kr[2] = kr[3] = vr[0] = vr[1] = vr[2] = vr[3] = 0.0f;
  }
}

__device__ __forceinline__ void load_q(const Problem& p, int grp, int lane, float (&qr)[kRows][4]) {
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    const float4 q4 = *(const float4*)(p.q + ((long long)grp * kRows + rr) * kDim + lane * 4);
    qr[rr][0] = q4.x; qr[rr][1] = q4.y; qr[rr][2] = q4.z; qr[rr][3] = q4.w;
  }
}

// ---- split: the generated kernel's structure ------------------------------------------------
__global__ void __launch_bounds__(256) attention_split(Problem p, float* scratch, unsigned* counter) {
  const int slices = (p.keys + kSlice - 1) / kSlice;
  const int grp = blockIdx.x / slices, slice = blockIdx.x - grp * slices;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int k0 = slice * kSlice, k1 = min(k0 + kSlice, p.keys);
  __shared__ float sc[kRows][kSlice], part[8][kRows][kDim], stat[kRows][2];
  __shared__ int last;
  float kr[4][4], vr[4][4], qr[kRows][4];
#pragma unroll
  for (int u = 0; u < 4; ++u) load_rows(p, grp, k0 + warp * 4 + u, k0 + warp * 4 + u < k1, lane, kr[u], vr[u]);
  load_q(p, grp, lane, qr);
  const float s = warp_scores(qr, kr, lane);
  const int si = (lane >> 1) & 15, su = si >> 2, srr = si & 3;
  if ((lane & 1) == 0) sc[srr][warp * 4 + su] = k0 + warp * 4 + su < k1 ? s * p.scale : kNegInf;
  __syncthreads();
  if (warp < kRows) {
    const float x = sc[warp][lane];
    float mx = x;
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    const float e = mx == kNegInf ? 0.0f : ex2(x - mx);
    sc[warp][lane] = e;
    float sum = e;
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) stat[warp][0] = mx, stat[warp][1] = sum;
  }
  __syncthreads();
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float pr = sc[rr][warp * 4 + u];
#pragma unroll
      for (int e = 0; e < 4; ++e) o[e] += pr * vr[u][e];
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) part[warp][rr][lane * 4 + e] = o[e];
  }
  __syncthreads();
  float* stats = scratch + (long long)kGroups * kRows * slices * kDim;
  for (int x = threadIdx.x; x < kRows * kDim; x += blockDim.x) {
    const int rr = x / kDim, j = x - rr * kDim;
    float acc = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) acc += part[w][rr][j];
    const long long at = ((long long)grp * kRows + rr) * slices + slice;
    scratch[at * kDim + j] = acc;
    if (j == 0) stats[2 * at] = stat[rr][0], stats[2 * at + 1] = stat[rr][1];
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter + grp, 1u) == (unsigned)(slices - 1);
    if (last) counter[grp] = 0u;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  constexpr int O4 = kRows * kDim / 4, P = 256 / O4;
  __shared__ float mm[P][O4], ll[P][O4];
  __shared__ float4 oo[P][O4];
  const int x = threadIdx.x % O4, pt = threadIdx.x / O4, rr = x / (kDim / 4), c = (x - rr * (kDim / 4)) * 4;
  float m = kNegInf, l = 0.0f;
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const long long at0 = ((long long)grp * kRows + rr) * slices;
#pragma unroll 8
  for (int t = pt; t < slices; t += P)
    merge(m, l, o, __ldcg(stats + 2 * (at0 + t)), __ldcg(stats + 2 * (at0 + t) + 1), __ldcg((const float4*)(scratch + (at0 + t) * kDim + c)));
  mm[pt][x] = m, ll[pt][x] = l, oo[pt][x] = o;
  __syncthreads();
  if (pt != 0) return;
#pragma unroll
  for (int q = 1; q < P; ++q) merge(m, l, o, mm[q][x], ll[q][x], oo[q][x]);
  float* y = p.out + ((long long)grp * kRows + rr) * kDim + c;
  y[0] = o.x / l, y[1] = o.y / l, y[2] = o.z / l, y[3] = o.w / l;
}

// ---- cluster: C blocks a row group, merged through distributed shared memory ----------------
template <int C>
__global__ void __launch_bounds__(256) attention_cluster(Problem p) {
  cg::cluster_group cluster = cg::this_cluster();
  const int grp = blockIdx.x / C, rank = (int)cluster.block_rank();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int per = (p.keys + C - 1) / C, kb = rank * per, ke = min(kb + per, p.keys);
  __shared__ float wm[8][kRows], wl[8][kRows], wo[8][kRows][kDim];
  __shared__ float bm[kRows], bl[kRows], bo[kRows][kDim];
  float qr[kRows][4];
  load_q(p, grp, lane, qr);
  // Each warp's running softmax over its keys: 8 a pass (two sets of four, loads together).
  float m[kRows], l[kRows], o[kRows][4];
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) m[rr] = kNegInf, l[rr] = 0.0f, o[rr][0] = o[rr][1] = o[rr][2] = o[rr][3] = 0.0f;
  for (int base = kb; base < ke; base += 64) {
    float kr[2][4][4], vr[2][4][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int key = base + h * 32 + warp * 4 + u;
        load_rows(p, grp, key, key < ke, lane, kr[h][u], vr[h][u]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float s = warp_scores(qr, kr[h], lane);
      float sv[4][kRows];  // every lane gets the 16 scores (key u, row rr) from lane 2(4u + rr)
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int rr = 0; rr < kRows; ++rr) {
          const float x = __shfl_sync(0xffffffffu, s, 2 * (4 * u + rr));
          sv[u][rr] = base + h * 32 + warp * 4 + u < ke ? x * p.scale : kNegInf;
        }
#pragma unroll
      for (int rr = 0; rr < kRows; ++rr) {
        const float mn = fmaxf(fmaxf(fmaxf(m[rr], sv[0][rr]), fmaxf(sv[1][rr], sv[2][rr])), sv[3][rr]);
        if (mn == kNegInf) continue;  // nothing seen yet in this row
        const float alpha = m[rr] == kNegInf ? 0.0f : ex2(m[rr] - mn);
        float pu[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) pu[u] = sv[u][rr] == kNegInf ? 0.0f : ex2(sv[u][rr] - mn);
        l[rr] = l[rr] * alpha + pu[0] + pu[1] + pu[2] + pu[3];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[rr][e] = o[rr][e] * alpha + pu[0] * vr[h][0][e] + pu[1] * vr[h][1][e] + pu[2] * vr[h][2][e] + pu[3] * vr[h][3][e];
        m[rr] = mn;
      }
    }
  }
#pragma unroll
  for (int rr = 0; rr < kRows; ++rr) {
    if (lane == 0) wm[warp][rr] = m[rr], wl[warp][rr] = l[rr];
#pragma unroll
    for (int e = 0; e < 4; ++e) wo[warp][rr][lane * 4 + e] = o[rr][e];
  }
  __syncthreads();
  for (int x = threadIdx.x; x < kRows * kDim; x += blockDim.x) {  // the block's result
    const int rr = x / kDim, j = x - rr * kDim;
    float mx = kNegInf;
#pragma unroll
    for (int w = 0; w < 8; ++w) mx = fmaxf(mx, wm[w][rr]);
    float lsum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const float f = wm[w][rr] == kNegInf ? 0.0f : ex2(wm[w][rr] - mx);
      lsum += wl[w][rr] * f;
      acc += wo[w][rr][j] * f;
    }
    bo[rr][j] = acc;
    if (j == 0) bm[rr] = mx, bl[rr] = lsum;
  }
  cluster.sync();
  // Block `rank` writes outputs [rank * n, (rank + 1) * n) of the group's rows.
  constexpr int n = kRows * kDim / C;
  if (threadIdx.x < n) {
    const int x = rank * n + threadIdx.x, rr = x / kDim, j = x - rr * kDim;
    float ms[C], mx = kNegInf;
#pragma unroll
    for (int b = 0; b < C; ++b) ms[b] = cluster.map_shared_rank(&bm[0], b)[rr], mx = fmaxf(mx, ms[b]);
    float lsum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int b = 0; b < C; ++b) {
      const float f = ms[b] == kNegInf ? 0.0f : ex2(ms[b] - mx);
      lsum += cluster.map_shared_rank(&bl[0], b)[rr] * f;
      acc += cluster.map_shared_rank(&bo[0][0], b)[rr * kDim + j] * f;
    }
    p.out[((long long)grp * kRows + rr) * kDim + j] = acc / lsum;
  }
  cluster.sync();  // no block leaves while another still reads its shared memory
}

// ---- reference and timing -------------------------------------------------------------------
__global__ void attention_reference(Problem p) {  // a block per (group, row)
  const int grp = blockIdx.x / kRows, rr = blockIdx.x % kRows;
  extern __shared__ float s[];
  const float* q = p.q + ((long long)grp * kRows + rr) * kDim;
  for (int key = threadIdx.x; key < p.keys; key += blockDim.x) {
    float d = 0.0f;
    for (int j = 0; j < kDim; ++j) d += q[j] * p.k[((long long)grp * p.max_keys + key) * kDim + j];
    s[key] = d * p.scale;
  }
  __syncthreads();
  if (threadIdx.x >= kDim) return;
  float mx = kNegInf;
  for (int key = 0; key < p.keys; ++key) mx = fmaxf(mx, s[key]);
  double sum = 0.0, acc = 0.0;
  for (int key = 0; key < p.keys; ++key) {
    const double e = exp((double)s[key] - mx);
    sum += e;
    acc += e * p.v[((long long)grp * p.max_keys + key) * kDim + threadIdx.x];
  }
  p.out[((long long)grp * kRows + rr) * kDim + threadIdx.x] = (float)(acc / sum);
}

__global__ void empty_kernel() {}

__global__ void fill(float* x, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    x[i] = ((h & 0xffffff) / 16777216.0f - 0.5f) * 2.0f;
  }
}

template <class Launch>
float time_graph(Launch launch, int reps) {  // µs a launch: a graph of `reps` launches, median of 7 runs
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < reps; ++i) launch(st, i);
  CK(cudaStreamEndCapture(st, &g));
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int t = 0; t < 7; ++t) {
    CK(cudaEventRecord(a, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float x = 0;
    CK(cudaEventElapsedTime(&x, a, b));
    ms.push_back(x);
  }
  std::sort(ms.begin(), ms.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaStreamDestroy(st));
  return ms[ms.size() / 2] * 1000.0f / reps;
}

template <int C>
void launch_cluster(const Problem& p, cudaStream_t st) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kGroups * C);
  cfg.blockDim = dim3(256);
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = C, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, attention_cluster<C>, p));
}

int main() {
  constexpr int kMaxKeys = 4096, kCopies = 16;  // 16 copies of a 4096-key cache: 537 MB, past L2
  const long long cache = (long long)kGroups * kMaxKeys * kDim;
  float *k, *v, *q, *out, *want, *scratch;
  unsigned* counter;
  CK(cudaMalloc(&k, cache * kCopies * sizeof(float)));
  CK(cudaMalloc(&v, cache * kCopies * sizeof(float)));
  CK(cudaMalloc(&q, kGroups * kRows * kDim * sizeof(float)));
  CK(cudaMalloc(&out, kGroups * kRows * kDim * sizeof(float)));
  CK(cudaMalloc(&want, kGroups * kRows * kDim * sizeof(float)));
  CK(cudaMalloc(&scratch, (long long)kGroups * kRows * (kMaxKeys / kSlice) * (kDim + 2) * sizeof(float)));
  CK(cudaMalloc(&counter, kGroups * sizeof(unsigned)));
  CK(cudaMemset(counter, 0, kGroups * sizeof(unsigned)));
  fill<<<1024, 256>>>(k, cache * kCopies, 1u);
  fill<<<1024, 256>>>(v, cache * kCopies, 2u);
  fill<<<16, 256>>>(q, kGroups * kRows * kDim, 3u);
  CK(cudaFuncSetAttribute(attention_cluster<16>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  CK(cudaFuncSetAttribute(attention_reference, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxKeys * 4));
  CK(cudaDeviceSynchronize());
  std::printf("empty kernel: %.2f us a launch\n", time_graph([](cudaStream_t st, int) { empty_kernel<<<1, 32, 0, st>>>(); }, 200));
  std::printf("%6s %10s %12s %12s %12s\n", "keys", "split", "cluster 8", "cluster 16", "max error");
  for (int keys : {544, 800, 1056, 2048, 4096}) {
    auto problem = [&](int i) {
      const long long off = (long long)(i % kCopies) * cache;
      return Problem{q, k + off, v + off, out, keys, kMaxKeys, 1.0f / std::sqrt((float)kDim)};
    };
    Problem p0 = problem(0), pr = p0;
    pr.out = want;
    attention_reference<<<kGroups * kRows, 256, keys * 4>>>(pr);
    double err = 0;
    std::vector<float> got(kGroups * kRows * kDim), ref(got.size());
    CK(cudaMemcpy(ref.data(), want, ref.size() * 4, cudaMemcpyDeviceToHost));
    auto check = [&] {
      CK(cudaMemcpy(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < got.size(); ++i) err = std::max(err, (double)std::fabs(got[i] - ref[i]));
      CK(cudaMemset(out, 0, got.size() * 4));
    };
    const int slices = (keys + kSlice - 1) / kSlice;
    attention_split<<<kGroups * slices, 256>>>(p0, scratch, counter);
    check();
    launch_cluster<8>(p0, 0);
    check();
    launch_cluster<16>(p0, 0);
    check();
    const float split = time_graph([&](cudaStream_t st, int i) { attention_split<<<kGroups * slices, 256, 0, st>>>(problem(i), scratch, counter); }, 200);
    const float c8 = time_graph([&](cudaStream_t st, int i) { launch_cluster<8>(problem(i), st); }, 200);
    const float c16 = time_graph([&](cudaStream_t st, int i) { launch_cluster<16>(problem(i), st); }, 200);
    std::printf("%6d %10.2f %12.2f %12.2f %12.2e\n", keys, split, c8, c16, err);
  }
  return 0;
}
