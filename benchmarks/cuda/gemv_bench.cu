// Decode GEMV schedules on the GPU, measured cold (weights rotate through more memory than L2
// holds), at the Llama-3-8B layer shapes: which layout of warps and loads streams a bf16 weight
// closest to the memory's read bandwidth. A design study for the generated GEMV
// (src/backends/cuda/cuda_linear_codegen.cpp), not part of the build:
//   nvcc -O3 -arch=sm_90 -std=c++17 benchmarks/cuda/gemv_bench.cu -o /tmp/gemv_bench && /tmp/gemv_bench
// Each schedule computes y[n] = W[n, k] x[k] with W bf16 row-major, x and y f32, and is checked
// against a plain reference kernel. "pipe" schedules stream the weights through shared memory
// with cp.async (not yet tried on the device; a candidate for the generated GEMV).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "study_parts.h"

template <bool Stream>
__device__ __forceinline__ uint4 load_w(const uint4* p) {
  if constexpr (Stream) return __ldcs(p);  // evict-first: weights are read once a step
  else return __ldg(p);
}

// Warps over rows (R rows per warp at once), lanes over k, U 16-byte loads per lane per row in
// flight; a grid-stride loop when the grid is capped.
template <int U, int R, bool Stream>
__global__ void __launch_bounds__(256) gemv_warp(const uint4* __restrict__ W, const float* __restrict__ x, float* __restrict__ y,
                                                 int n, int k) {
  const int lane = threadIdx.x & 31;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const int kv = k / 8;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (long long row0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * R; row0 < n; row0 += warps * R) {
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    for (int p = lane; p < kv; p += 32 * U) {
      uint4 w[R][U];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int q = p + u * 32;
          w[r][u] = q < kv && row0 + r < n ? load_w<Stream>(W + (row0 + r) * kv + q) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int q = p + u * 32;
        if (q >= kv) break;
        const float4 a = __ldg(x4 + 2 * q), b = __ldg(x4 + 2 * q + 1);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = dot8(w[r][u], a, b, acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[r];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0 && row0 + r < n) y[row0 + r] = v;
    }
  }
}

// A block of 256 threads per group of G rows; all threads split k (each row's k spread over
// 256/G threads, 16-byte loads, U in flight), partial sums meet in shared memory.
template <int U, int G, bool Stream>
__global__ void __launch_bounds__(256) gemv_block(const uint4* __restrict__ W, const float* __restrict__ x, float* __restrict__ y, int n,
                                                  int k) {
  constexpr int T = 256 / G;  // threads per row
  __shared__ float part[256];
  const int kv = k / 8, sub = threadIdx.x % T, g = threadIdx.x / T;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  for (long long row0 = (long long)blockIdx.x * G; row0 < n; row0 += (long long)gridDim.x * G) {
    const long long row = row0 + g;
    float acc = 0.0f;
    if (row < n) {
      for (int p = sub; p < kv; p += T * U) {
        uint4 w[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int q = p + u * T;
          w[u] = q < kv ? load_w<Stream>(W + row * kv + q) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int q = p + u * T;
          if (q >= kv) break;
          acc = dot8(w[u], __ldg(x4 + 2 * q), __ldg(x4 + 2 * q + 1), acc);
        }
      }
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < G && row0 + threadIdx.x < n) {
      constexpr int WPR = T / 32 > 0 ? T / 32 : 1;  // warps per row
      float s = 0.0f;
      for (int w = 0; w < WPR; ++w) s += part[threadIdx.x * WPR + w];
      y[row0 + threadIdx.x] = s;
    }
    __syncthreads();
  }
}

// Warps over rows as gemv_warp (one row per warp at a time, lanes over k), but the weights
// stream through shared memory with cp.async: each lane keeps STAGES 16-byte copies in flight
// (across row boundaries), in shared memory rather than registers, so occupancy no longer
// limits the bytes in flight (the generated GEMV holds its in-flight loads in registers: ncu
// found 68-102 registers a thread and 45-70% of DRAM bandwidth). Each lane reads back only its
// own copies, so no barrier is needed, only cp.async.wait_group.
template <int STAGES>
__global__ void __launch_bounds__(256) gemv_pipe(const uint4* __restrict__ W, const float* __restrict__ x, float* __restrict__ y,
                                                 int n, int k) {
  extern __shared__ uint4 slots[];  // [STAGES][256]: a warp's lanes write consecutive 16 bytes
  const int lane = threadIdx.x & 31;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5, warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const int kv = k / 8, cpr = (kv + 31) / 32;  // 16-byte chunks per row, and per lane per row
  const long long rows = warp < n ? (n - 1 - warp) / warps + 1 : 0, len = rows * cpr;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  // Two cursors over the lane's sequence of chunks (row by row, 32 chunks apart within a row):
  // one issuing copies STAGES - 1 ahead, one consuming; counters, not divisions.
  long long issued = 0, in_row = warp;
  int in_i = 0;
  auto issue = [&]() {
    if (issued < len) {
      const int q = lane + 32 * in_i;
      if (q < kv) {
        const unsigned dst = (unsigned)__cvta_generic_to_shared(slots + (int)(issued % STAGES) * 256 + threadIdx.x);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(W + in_row * kv + q));
      }
      if (++in_i == cpr) in_i = 0, in_row += warps;
    }
    ++issued;
    asm volatile("cp.async.commit_group;\n" ::);  // empty groups keep the count in step
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) issue();
  float acc = 0.0f;
  long long row = warp;
  int i = 0;
  for (long long s = 0; s < len; ++s) {
    issue();
    asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1));
    const int q = lane + 32 * i;
    if (q < kv) acc = dot8(slots[(int)(s % STAGES) * 256 + threadIdx.x], __ldg(x4 + 2 * q), __ldg(x4 + 2 * q + 1), acc);
    if (++i == cpr) {  // the row's last chunk: every lane of the warp is here together
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) y[row] = acc;
      acc = 0.0f, i = 0, row += warps;
    }
  }
  asm volatile("cp.async.wait_all;\n" ::);
}

__global__ void gemv_ref(const __nv_bfloat16* W, const float* x, float* y, int n, int k) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  float s = 0.0f;
  for (int p = 0; p < k; ++p) s += __bfloat162float(W[row * k + p]) * x[p];
  y[row] = s;
}

// Reads every 16 bytes of a buffer once (a sum, so nothing is optimised away): the memory's
// read bandwidth for this access size.
__global__ void read_all(const uint4* __restrict__ p, long long count, unsigned* sink) {
  unsigned s = 0;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    s ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (s == 0x12345678u) *sink = s;
}

__global__ void fill(uint16_t* w, long long count, unsigned seed) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)(i * 2654435761ull) ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    // bf16 in [-1, 1): sign, exponent 126 or below, random mantissa
    w[i] = (uint16_t)(((h & 1u) << 15) | ((120u + (h >> 1) % 7u) << 7) | ((h >> 8) & 0x7fu));
  }
}

struct Schedule {
  std::string name;
  int rows_per_block;  // rows one block covers per grid-stride step
  void (*launch)(int, const uint4*, const float*, float*, int, int);  // (blocks, W, x, y, n, k)
};

template <int U, int R, bool S>
Schedule warp_schedule() {
  return {"warp U" + std::to_string(U) + " R" + std::to_string(R) + (S ? " cs" : ""), 8 * R,
          [](int b, const uint4* W, const float* x, float* y, int n, int k) { gemv_warp<U, R, S><<<b, 256>>>(W, x, y, n, k); }};
}
template <int U, int G, bool S>
Schedule block_schedule() {
  return {"block U" + std::to_string(U) + " G" + std::to_string(G) + (S ? " cs" : ""), G,
          [](int b, const uint4* W, const float* x, float* y, int n, int k) { gemv_block<U, G, S><<<b, 256>>>(W, x, y, n, k); }};
}

template <int STAGES>
Schedule pipe_schedule() {
  return {"pipe S" + std::to_string(STAGES), 8, [](int b, const uint4* W, const float* x, float* y, int n, int k) {
            const int shared = STAGES * 256 * 16;
            static bool set = false;  // once per instantiation: shared memory past 48 KB is opt-in
            if (!set) {
              CK(cudaFuncSetAttribute(gemv_pipe<STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
              set = true;
            }
            gemv_pipe<STAGES><<<b, 256, shared>>>(W, x, y, n, k);
          }};
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto timed = [&](auto&& f) {
    CK(cudaEventRecord(e0));
    f();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  };
  auto median = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };

  // One pool of weights, far larger than L2: each timed launch reads a copy not read recently.
  const size_t pool_bytes = size_t(4) << 30;
  uint16_t* pool;
  CK(cudaMalloc(&pool, pool_bytes));
  fill<<<4 * sms, 256>>>(pool, (long long)(pool_bytes / 2), 7u);
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  float *x, *y, *yref;
  CK(cudaMalloc(&x, 65536 * 4));
  CK(cudaMalloc(&y, 200000 * 4));
  CK(cudaMalloc(&yref, 200000 * 4));
  {
    std::vector<float> hx(65536);
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = (float)((int)(i * 37 % 101) - 50) / 50.0f;
    CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  }
  CK(cudaDeviceSynchronize());

  {
    std::vector<float> ms;
    const long long count = (long long)(size_t(1) << 30) / 16;
    for (int t = 0; t < 7; ++t)
      ms.push_back(timed([&] { read_all<<<sms * 8, 256>>>((const uint4*)((char*)pool + (t % 3) * (size_t(1) << 30)), count, sink); }));
    std::printf("read 1 GiB: %.1f us, %.2f TB/s\n", median(ms) * 1e3, (double)(size_t(1) << 30) / (median(ms) * 1e-3) / 1e12);
  }

  std::vector<Schedule> schedules = {
      warp_schedule<4, 1, false>(),  warp_schedule<8, 1, false>(),  warp_schedule<16, 1, false>(), warp_schedule<8, 1, true>(),
      warp_schedule<16, 1, true>(),  warp_schedule<4, 2, false>(),  warp_schedule<8, 2, true>(),   warp_schedule<4, 4, true>(),
      block_schedule<2, 1, true>(),  block_schedule<4, 2, true>(),  block_schedule<4, 4, true>(),  block_schedule<8, 8, true>(),
      block_schedule<2, 2, true>(),  pipe_schedule<4>(),          pipe_schedule<8>(),          pipe_schedule<16>(),
  };
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {{"qkv 6144x4096", 6144, 4096},   {"o 4096x4096", 4096, 4096},        {"gate/up 28672x4096", 28672, 4096},
                          {"down 4096x14336", 4096, 14336}, {"lm_head 128256x4096", 128256, 4096}};
  const int caps[] = {0, 16, 8, 4, 2};  // blocks per SM at most (0: one block per rows_per_block rows)
  for (const Shape& s : shapes) {
    const size_t bytes = (size_t)s.n * s.k * 2;
    const size_t copies = std::max<size_t>(2, pool_bytes / bytes);
    gemv_ref<<<(s.n + 255) / 256, 256>>>((const __nv_bfloat16*)pool, x, yref, s.n, s.k);
    std::vector<float> ref(s.n), got(s.n);
    CK(cudaMemcpy(ref.data(), yref, s.n * 4, cudaMemcpyDeviceToHost));
    std::printf("\n%s (%.1f MB), cold, back to back: us (TB/s)\n", s.name, bytes / 1e6);
    for (const Schedule& sc : schedules) {
      std::printf("  %-16s", sc.name.c_str());
      for (int cap : caps) {
        const int need = (s.n + sc.rows_per_block - 1) / sc.rows_per_block;
        const int blocks = cap == 0 ? need : std::min(need, cap * sms);
        CK(cudaMemset(y, 0, s.n * 4));
        sc.launch(blocks, (const uint4*)pool, x, y, s.n, s.k);
        CK(cudaGetLastError());
        CK(cudaMemcpy(got.data(), y, s.n * 4, cudaMemcpyDeviceToHost));
        double err = 0;
        for (int i = 0; i < s.n; ++i) err = std::max(err, (double)std::abs(got[i] - ref[i]) / (1.0 + std::abs(ref[i])));
        // 16 launches back to back on different copies (as a decode step's GEMVs follow each
        // other), three times; the median of the three averages.
        std::vector<float> ms;
        for (int t = 0; t < 3; ++t)
          ms.push_back(timed([&] {
                         for (int i = 0; i < 16; ++i)
                           sc.launch(blocks, (const uint4*)((char*)pool + (1 + (t * 16 + i) % (copies - 1)) * bytes), x, y, s.n, s.k);
                       }) / 16);
        const float m = median(ms);
        std::printf(" | cap %2d: %6.1f (%.2f)%s", cap, m * 1e3, bytes / (m * 1e-3) / 1e12, err > 1e-3 ? " WRONG" : "");
      }
      std::printf("\n");
    }
  }
  return 0;
}
