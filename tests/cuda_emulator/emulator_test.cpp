// The CPU emulator itself (tests/cuda_emulator): a warp's collectives give each lane the value
// of the lane CUDA says, and a block whose threads wait on each other forever is reported, not
// hung. Kernels are compiled and launched through the backend's own NVRTC and driver wrappers,
// with the emulator library named in their place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/nvrtc.h"

namespace luminal::cuda {
namespace {

// Before anything loads the driver or NVRTC (their loaders read these once).
const bool kEmulated = [] {
  for (const char* v : {"LUMINAL_CUDA_DRIVER", "LUMINAL_NVRTC", "LUMINAL_CUBLASLT"}) setenv(v, LM_EMU_LIBRARY, 1);
  return true;
}();

void* kernel(const std::string& source, const std::string& name) {
  static std::vector<std::unique_ptr<Module>> modules;  // loaded for the process's life
  const CompiledKernels c = nvrtc_compile(cuda_prelude() + source, "sm_90", "");
  modules.push_back(std::make_unique<Module>(Context::get(), c.cubin));
  return modules.back()->function(name);
}

// One block of `threads` running f(int* out) over `count` ints, and their values after it.
std::vector<int> run_block(void* f, unsigned threads, size_t count) {
  Context& ctx = Context::get();
  const DevicePtr out = ctx.alloc(count * sizeof(int));
  void* args[] = {const_cast<DevicePtr*>(&out)};
  ctx.launch(f, 1, 1, 1, threads, 0, args);
  std::vector<int> got(count);
  ctx.download(got.data(), out, count * sizeof(int));
  ctx.free(out);
  return got;
}

TEST(CudaEmulator, WarpCollectivesGiveEachLaneTheLaneCudaSays) {
  ASSERT_TRUE(kEmulated);
  ASSERT_EQ(unavailable_reason(), "");
  void* f = kernel(R"(
extern "C" __global__ void lanes(int* out) {
  const int t = threadIdx.x, lane = t & 31;
  out[t] = __shfl_xor_sync(0xffffffffu, t * 10, 5);
  out[64 + t] = __shfl_sync(0xffffffffu, t, 31 - lane);
  out[128 + t] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
  out[192 + t] = __shfl_down_sync(0xffffffffu, t, 4, 8);  // within segments of 8 lanes
  float v = (float)(t + 1);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  out[256 + t] = (int)v;
}
)",
                     "lanes");
  const std::vector<int> got = run_block(f, 64, 320);
  unsigned thirds = 0;
  for (int l = 0; l < 32; l += 3) thirds |= 1u << l;
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32, warp = t / 32 * 32;
    EXPECT_EQ(got[t], (t ^ 5) * 10) << t;
    EXPECT_EQ(got[64 + t], warp + 31 - lane) << t;
    EXPECT_EQ(static_cast<unsigned>(got[128 + t]), thirds) << t;
    EXPECT_EQ(got[192 + t], lane % 8 + 4 < 8 ? t + 4 : t) << t;  // past the segment: its own
    EXPECT_EQ(got[256 + t], (warp + 1 + warp + 32) * 16) << t;     // the warp's sum of t + 1
  }
}

// The prelude's conversions, which are PTX on the GPU and the emulator's own code here: f32 to
// f16 and back against the host's _Float16 (IEEE binary16, round to nearest even), and the bf16
// pair packing against rounding computed in double.
TEST(CudaEmulator, HalfAndBf16ConversionsRoundAsTheGpuDoes) {
  ASSERT_TRUE(kEmulated);
  void* f = kernel(R"(
extern "C" __global__ void convert(const float* in, float* half_back, unsigned* bf16_pairs, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  half_back[i] = lm_f16_f32(lm_f32_f16(in[i]));
  bf16_pairs[i] = lm_pack_bf16(in[i], -in[i]);
}
)",
                   "convert");
  std::vector<float> in;
  for (float v : {0.0f, -0.0f, 1.0f, 65504.0f, 65520.0f, 1e6f, 6.1e-5f, 6.0e-8f, 3.0e-8f, 1e-9f, 0.1f, 1.0009765625f, 1.00048828125f})
    in.push_back(v), in.push_back(-v);
  for (int i = 0; i < 2000; ++i) in.push_back(std::ldexp(static_cast<float>(i % 997) / 997.0f + 1.0f, i % 40 - 25));  // many exponents
  in.push_back(std::numeric_limits<float>::infinity());
  const int n = static_cast<int>(in.size());
  Context& ctx = Context::get();
  const DevicePtr d_in = ctx.alloc(in.size() * 4), d_half = ctx.alloc(in.size() * 4), d_pairs = ctx.alloc(in.size() * 4);
  ctx.upload(d_in, in.data(), in.size() * 4);
  void* args[] = {const_cast<DevicePtr*>(&d_in), const_cast<DevicePtr*>(&d_half), const_cast<DevicePtr*>(&d_pairs), const_cast<int*>(&n)};
  ctx.launch(f, static_cast<unsigned>((n + 127) / 128), 1, 1, 128, 0, args);
  std::vector<float> half_back(in.size());
  std::vector<unsigned> pairs(in.size());
  ctx.download(half_back.data(), d_half, in.size() * 4);
  ctx.download(pairs.data(), d_pairs, in.size() * 4);
  auto bf16 = [](float v) {  // round to nearest even, from the exact value in double
    unsigned u;
    std::memcpy(&u, &v, 4);
    const unsigned down = u & 0xffff0000u, up = down + 0x10000u;
    float lo, hi;
    std::memcpy(&lo, &down, 4);
    std::memcpy(&hi, &up, 4);
    const double dl = std::abs(static_cast<double>(v) - lo), dh = std::abs(static_cast<double>(hi) - v);
    return (dl < dh || (dl == dh && ((down >> 16) & 1u) == 0)) ? down >> 16 : up >> 16;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = static_cast<float>(static_cast<_Float16>(in[i]));
    EXPECT_EQ(std::memcmp(&half_back[i], &want, 4), 0) << in[i] << ": " << half_back[i] << " against " << want;
    if (std::isfinite(in[i])) {
      EXPECT_EQ(pairs[i], bf16(in[i]) | bf16(-in[i]) << 16) << in[i];
    }
  }
  for (DevicePtr p : {d_in, d_half, d_pairs}) ctx.free(p);
}

// Lane 0 waits at __syncthreads while the other lanes of its warp wait for it at a shuffle: on a
// GPU the launch would hang; the emulator names the deadlock and the kernel.
TEST(CudaEmulatorDeathTest, ThreadsWaitingOnEachOtherAreADeadlockNotAHang) {
  ASSERT_TRUE(kEmulated);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* f = kernel(R"(
extern "C" __global__ void stuck(int* out) {
  int v = threadIdx.x;
  if (threadIdx.x == 0) __syncthreads();
  else v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}
)",
                         "stuck");
        run_block(f, 32, 32);
      },
      "deadlock.*kernel stuck");
}

}  // namespace
}  // namespace luminal::cuda
