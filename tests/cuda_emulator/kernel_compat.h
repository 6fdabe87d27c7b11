#pragma once
// Included first in every kernel module the emulator's NVRTC compiles with g++: CUDA's keywords,
// vector types and intrinsics in host C++, and the prelude's helpers that are PTX on the GPU
// (cuda_prelude() leaves those out under LM_EMULATED). Kernel code runs unchanged: each CUDA
// thread is a fiber (block_runner.cpp); __shared__ variables are thread_local, which every fiber
// of a block shares because a block runs on one host thread.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#include "emulator.h"

#define LM_EMULATED 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static thread_local
#define __constant__ static
#define __restrict__ __restrict

// threadIdx is the fiber's; blockIdx, blockDim and gridDim are the block's, so they are variables
// of the worker thread, set before the block's fibers start (code may shadow them with macros,
// as the joined launches do).
#define threadIdx (lm_emu_self()->thread_idx)
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }
thread_local uint3 blockIdx;
thread_local dim3 blockDim, gridDim;
thread_local unsigned char* lm_emu_dynamic_smem;  // what `extern __shared__ T x[];` becomes (nvrtc.cpp)
thread_local unsigned lm_emu_dynamic_smem_bytes;
// (A module is one translation unit, so these definitions appear once in it.)
extern "C" __attribute__((visibility("default"))) void lm_emu_set_block(const struct lm_emu_block* b) {
  blockIdx = {b->block_idx.x, b->block_idx.y, b->block_idx.z};
  blockDim = dim3(b->block_dim.x, b->block_dim.y, b->block_dim.z);
  gridDim = dim3(b->grid_dim.x, b->grid_dim.y, b->grid_dim.z);
  lm_emu_dynamic_smem = b->dynamic_smem;
  lm_emu_dynamic_smem_bytes = b->dynamic_smem_bytes;
}

struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(4))) ushort2 { unsigned short x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

// A kernel's arguments copied from cuLaunchKernel's pointers (the emulated driver may run the
// launch later, from a graph), and the kernel called with them.
namespace lm_emu {
template <class... A>
using Args = std::tuple<typename std::decay<A>::type...>;
template <class... A, size_t... I>
void* pack(void (*)(A...), void** a, std::index_sequence<I...>) {
  return new Args<A...>(*static_cast<typename std::decay<A>::type*>(a[I])...);
}
template <class... A>
void* pack(void (*f)(A...), void** a) {
  return pack(f, a, std::index_sequence_for<A...>{});
}
template <class... A>
void run(void (*f)(A...), void* p) {
  std::apply(f, *static_cast<Args<A...>*>(p));
}
template <class... A>
void release(void (*)(A...), void* p) {
  delete static_cast<Args<A...>*>(p);
}
}  // namespace lm_emu

// ---- bit casts and arithmetic with CUDA's rounding (fma is exact on both) ----
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __expf(float x) { return expf(x); }
inline float __exp10f(float x) { return exp10f(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}
// CUDA's min and max take mixed integer and floating arguments; the usual conversions decide.
template <class A, class B>
inline typename std::common_type<A, B>::type min(A a, B b) {
  using T = typename std::common_type<A, B>::type;
  return (T)a < (T)b ? (T)a : (T)b;
}
template <class A, class B>
inline typename std::common_type<A, B>::type max(A a, B b) {
  using T = typename std::common_type<A, B>::type;
  return (T)a > (T)b ? (T)a : (T)b;
}

// ---- loads and stores with cache hints: plain on the host ----
template <class T> inline T __ldg(const T* p) { return *p; }
// __ldcg and __ldcv read what other blocks write: a compiler barrier keeps them from being cached.
template <class T> inline T __ldcg(const T* p) { asm volatile("" ::: "memory"); return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldca(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline T __ldcv(const T* p) { asm volatile("" ::: "memory"); return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
template <class T> inline void __stwb(T* p, T v) { *p = v; }
inline unsigned long long __cvta_generic_to_shared(const void* p) { return (unsigned long long)p; }

// ---- the block and the warp ----
inline void __syncthreads() { lm_emu_syncthreads_count(0); }
inline int __syncthreads_count(int p) { return lm_emu_syncthreads_count(p); }
inline int __syncthreads_or(int p) { return lm_emu_syncthreads_count(p) != 0; }
inline int __syncthreads_and(int p) { return lm_emu_syncthreads_count(!p) == 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) { lm_emu_warp_exchange(mask, 0, 0); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { lm_emu_spin(); }
[[noreturn]] inline void __trap() {
  lm_emu_trap("__trap() in a kernel");
  __builtin_unreachable();
}
inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }
inline int clock() { return (int)__builtin_ia32_rdtsc(); }

template <class T>
inline unsigned long long lm_emu_bits(T v) {
  static_assert(sizeof(T) <= 8, "a warp exchange moves at most 8 bytes a lane");
  unsigned long long b = 0;
  memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
inline T lm_emu_from_bits(unsigned long long b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}
// Lane arithmetic within a shuffle's width (segments of `width` lanes): a source outside the
// lane's segment gives the lane its own value.
inline int lm_emu_in_segment(int lane, int src, int width) { return (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane; }
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  const int lane = (int)lm_emu_self()->lane, base = lane & ~(width - 1);
  return lm_emu_from_bits<T>(lm_emu_warp_exchange(mask, lm_emu_bits(v), base + (src & (width - 1))));
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
  const int lane = (int)lm_emu_self()->lane, src = lane ^ m;
  return lm_emu_from_bits<T>(lm_emu_warp_exchange(mask, lm_emu_bits(v), lm_emu_in_segment(lane, src, width)));
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  const int lane = (int)lm_emu_self()->lane, src = lane + (int)d;
  return lm_emu_from_bits<T>(lm_emu_warp_exchange(mask, lm_emu_bits(v), lm_emu_in_segment(lane, src, width)));
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
  const int lane = (int)lm_emu_self()->lane, src = lane - (int)d;
  return lm_emu_from_bits<T>(lm_emu_warp_exchange(mask, lm_emu_bits(v), src >= (lane & ~(width - 1)) ? src : lane));
}
inline unsigned __ballot_sync(unsigned mask, int p) { return lm_emu_warp_ballot(mask, p); }
inline int __any_sync(unsigned mask, int p) { return lm_emu_warp_ballot(mask, p) != 0; }
inline int __all_sync(unsigned mask, int p) { return (lm_emu_warp_ballot(mask, p) & mask) == mask; }
inline unsigned __activemask() { return lm_emu_warp_ballot(0xffffffffu, 1); }
// The reductions over the lanes of `mask` (every lane of the mask takes part, as the GPU needs):
// each lane folds the others' values into its own, so every lane gets the same result.
template <class T, class F>
inline T lm_emu_warp_reduce(unsigned mask, T v, F f) {
  const unsigned lane = lm_emu_self()->lane;
  const unsigned long long mine = lm_emu_bits(v);
  for (int src = 0; src < 32; ++src) {
    const T o = lm_emu_from_bits<T>(lm_emu_warp_exchange(mask, mine, src));
    if ((mask >> src & 1u) && (unsigned)src != lane) v = f(v, o);
  }
  return v;
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) { return lm_emu_warp_reduce(mask, v, [](unsigned a, unsigned b) { return a > b ? a : b; }); }
inline int __reduce_max_sync(unsigned mask, int v) { return lm_emu_warp_reduce(mask, v, [](int a, int b) { return a > b ? a : b; }); }
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) { return lm_emu_warp_reduce(mask, v, [](unsigned a, unsigned b) { return a < b ? a : b; }); }
inline int __reduce_min_sync(unsigned mask, int v) { return lm_emu_warp_reduce(mask, v, [](int a, int b) { return a < b ? a : b; }); }
inline unsigned __reduce_add_sync(unsigned mask, unsigned v) { return lm_emu_warp_reduce(mask, v, [](unsigned a, unsigned b) { return a + b; }); }
inline int __reduce_add_sync(unsigned mask, int v) { return lm_emu_warp_reduce(mask, v, [](int a, int b) { return a + b; }); }

// ---- atomics: blocks run on several host threads, so these are real ones ----
template <class T>
inline T lm_emu_atomic_update(T* p, T (*f)(T, T), T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old, v), true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return old;
}
inline float atomicAdd(float* p, float v) {
  unsigned* u = (unsigned*)p;
  unsigned old = __atomic_load_n(u, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(u, &old, __float_as_uint(__uint_as_float(old) + v), true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
  }
  return __uint_as_float(old);
}
inline double atomicAdd(double* p, double v) {
  unsigned long long* u = (unsigned long long*)p;
  unsigned long long old = __atomic_load_n(u, __ATOMIC_RELAXED);
  for (;;) {
    double o;
    memcpy(&o, &old, 8);
    const double n = o + v;
    unsigned long long nb;
    memcpy(&nb, &n, 8);
    if (__atomic_compare_exchange_n(u, &old, nb, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) return o;
  }
}
inline float4 atomicAdd(float4* p, float4 v) {
  return make_float4(atomicAdd(&p->x, v.x), atomicAdd(&p->y, v.y), atomicAdd(&p->z, v.z), atomicAdd(&p->w, v.w));
}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicSub(int* p, int v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
inline int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicExch(unsigned* p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline float atomicExch(float* p, float v) { return __uint_as_float(__atomic_exchange_n((unsigned*)p, __float_as_uint(v), __ATOMIC_SEQ_CST)); }
inline int atomicCAS(int* p, int cmp, int v) { __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) { __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long cmp, unsigned long long v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return cmp;
}
inline int atomicMax(int* p, int v) { return lm_emu_atomic_update<int>(p, [](int a, int b) { return a > b ? a : b; }, v); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return lm_emu_atomic_update<unsigned>(p, [](unsigned a, unsigned b) { return a > b ? a : b; }, v); }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  return lm_emu_atomic_update<unsigned long long>(p, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; }, v);
}
inline long long atomicMax(long long* p, long long v) { return lm_emu_atomic_update<long long>(p, [](long long a, long long b) { return a > b ? a : b; }, v); }
inline int atomicMin(int* p, int v) { return lm_emu_atomic_update<int>(p, [](int a, int b) { return a < b ? a : b; }, v); }
inline unsigned atomicMin(unsigned* p, unsigned v) { return lm_emu_atomic_update<unsigned>(p, [](unsigned a, unsigned b) { return a < b ? a : b; }, v); }
inline long long atomicMin(long long* p, long long v) { return lm_emu_atomic_update<long long>(p, [](long long a, long long b) { return a < b ? a : b; }, v); }
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return lm_emu_atomic_update<unsigned>(p, [](unsigned a, unsigned l) { return a >= l ? 0u : a + 1; }, limit);
}
inline int atomicAnd(int* p, int v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAnd(unsigned* p, unsigned v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
inline int atomicOr(int* p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicOr(unsigned long long* p, unsigned long long v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline int atomicXor(int* p, int v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicXor(unsigned* p, unsigned v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }

// ---- the prelude's PTX helpers (cuda_prelude() leaves them out under LM_EMULATED) ----
inline void lm_grid_release() {}
inline void lm_grid_wait() {}  // launches run one after another here
inline unsigned lm_dynamic_smem_size() { return lm_emu_dynamic_smem_bytes; }
inline void lm_prefetch_l2(const void*) {}
// No cache to fill here; the request must still be one the hardware takes (16-byte aligned, a
// multiple of 16 bytes) and name memory that exists: both ends are read.
inline void lm_prefetch_l2_bulk(const void* p, unsigned bytes) {
  if (bytes == 0 || bytes % 16 != 0 || reinterpret_cast<uintptr_t>(p) % 16 != 0) __builtin_trap();
  const volatile char* c = static_cast<const volatile char*>(p);
  (void)c[0];
  (void)c[bytes - 1];
}
inline unsigned lm_ld_relaxed_gpu(const unsigned* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
inline unsigned lm_ld_acquire_gpu(const unsigned* p) {
  const unsigned v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
  lm_emu_spin();  // callers spin on it until another block writes
  return v;
}
inline void lm_st_release_gpu(unsigned* p, unsigned v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline unsigned lm_atom_inc_acq_rel_gpu(unsigned* p, unsigned limit) { return atomicInc(p, limit); }  // seq_cst: at least acq_rel
inline unsigned lm_atom_add1_acq_rel_gpu(unsigned* p) { return __atomic_fetch_add(p, 1u, __ATOMIC_ACQ_REL); }

// IEEE half conversions (round to nearest even; subnormals, infinities and NaN kept).
inline float lm_f16_f32(uint16_t h) {
  const unsigned s = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return __uint_as_float(s) + (s ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;  // m * 2^-24
  if (e == 31) return __uint_as_float(s | 0x7f800000u | (m << 13));
  return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
}
inline uint16_t lm_f32_f16(float f) {
  const unsigned u = __float_as_uint(f), s = (u >> 16) & 0x8000u;
  const unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u);  // rounds past 65504: infinity
  if (a < 0x38800000u) {                                 // below 2^-14: a subnormal half
    const float v = __uint_as_float(a) * 16777216.0f;     // in units of 2^-24
    return (uint16_t)(s | (unsigned)nearbyintf(v));
  }
  unsigned r = a - 0x38000000u;  // rebias the exponent
  r += 0xfffu + ((r >> 13) & 1u);
  return (uint16_t)(s | (r >> 13));
}
// 16 bytes global -> shared: done at once here (the waits that follow have nothing to wait for).
inline void lm_cp_async16(void* dst, const void* src, bool full) {
  if (full) memcpy(dst, src, 16);
  else memset(dst, 0, 16);
}
inline void lm_cp_async_commit() {}
template <int N>
inline void lm_cp_async_wait() {}
// The mbarrier of the bulk copies: its word holds the bytes still to come (low 32 bits) and a
// completed phase (bit 32). Copies are done at once; waiters spin until the expected bytes are in.
inline void lm_bulk_expect(unsigned long long* bar, unsigned bytes) { __atomic_store_n(bar, (unsigned long long)bytes, __ATOMIC_RELEASE); }
inline void lm_bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  memcpy(dst, src, bytes);
  const unsigned long long left = (__atomic_load_n(bar, __ATOMIC_ACQUIRE) & 0xffffffffull) - bytes;
  __atomic_store_n(bar, left == 0 ? (1ull << 32) : left, __ATOMIC_RELEASE);
}
inline void lm_bulk_wait(unsigned long long* bar) {
  while (!(__atomic_load_n(bar, __ATOMIC_ACQUIRE) >> 32)) lm_emu_spin();
}
// The tensor-core instructions, as collectives of the warp (block_runner.cpp computes them from
// every lane's fragment, by the PTX ISA's layouts for mma.m16n8k16 .row.col .bf16 with f32
// accumulators, and ldmatrix .x4 of b16 8x8 matrices).
inline void lm_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  unsigned in[LM_EMU_WORDS] = {a[0], a[1], a[2], a[3], b[0], b[1], __float_as_uint(d[0]), __float_as_uint(d[1]), __float_as_uint(d[2]),
                               __float_as_uint(d[3])};
  unsigned out[LM_EMU_WORDS];
  lm_emu_warp_all(in, out, lm_emu_mma_bf16_warp);
  for (int i = 0; i < 4; ++i) d[i] = __uint_as_float(out[i]);
}
inline void lm_ldmatrix_x4(unsigned* r, const void* p) {
  const unsigned long long a = (unsigned long long)p;
  unsigned in[LM_EMU_WORDS] = {(unsigned)a, (unsigned)(a >> 32)};
  unsigned out[LM_EMU_WORDS];
  lm_emu_warp_all(in, out, lm_emu_ldmatrix_x4_warp);
  for (int i = 0; i < 4; ++i) r[i] = out[i];
}
