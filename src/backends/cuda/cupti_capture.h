#pragma once
// The GPU's own record of every kernel it ran (start, end, name), through CUPTI's activity API,
// loaded with dlopen like the driver: nothing of CUPTI is needed to build. Kernels replayed from
// CUDA graphs are recorded too, which the executor's own events cannot see.
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernel_timeline.h"

namespace luminal::cuda {

class CuptiCapture {
 public:
  // Loads CUPTI (LUMINAL_CUPTI names the library file; otherwise libcupti.so.13/.12 on the
  // loader's path, then the toolkit's folders) and starts recording kernels. Throws Error naming
  // what was tried where it cannot.
  static std::unique_ptr<CuptiCapture> start();
  ~CuptiCapture();
  uint64_t now_ns() const;  // CUPTI's clock, the one kernel records use
  // Stops recording and returns every kernel recorded since start().
  std::vector<KernelRecord> stop();

 private:
  CuptiCapture() = default;
  bool running_ = false;
};

}  // namespace luminal::cuda
