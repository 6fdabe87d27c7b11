// The CPU emulator itself (tests/cuda_emulator): a warp's collectives give each lane the value
// of the lane CUDA says, and a block whose threads wait on each other forever is reported, not
// hung. Kernels are compiled and launched through the backend's own NVRTC and driver wrappers,
// with the emulator library named in their place.
#include <gtest/gtest.h>

#include <cstdlib>
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
  Context& ctx = Context::get();
  const DevicePtr out = ctx.alloc(320 * sizeof(int));
  void* args[] = {const_cast<DevicePtr*>(&out)};
  ctx.launch(f, 1, 1, 1, 64, 0, args);
  std::vector<int> got(320);
  ctx.download(got.data(), out, got.size() * sizeof(int));
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
  ctx.free(out);
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
        Context& ctx = Context::get();
        const DevicePtr out = ctx.alloc(32 * sizeof(int));
        void* args[] = {const_cast<DevicePtr*>(&out)};
        ctx.launch(f, 1, 1, 1, 32, 0, args);
        ctx.synchronize();
      },
      "deadlock.*kernel stuck");
}

}  // namespace
}  // namespace luminal::cuda
