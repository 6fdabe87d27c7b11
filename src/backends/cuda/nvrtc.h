#pragma once
// CUDA C++ compiled to a CUBIN with NVRTC, loaded at run time (dlopen of libnvrtc): NVRTC needs
// no GPU, so kernels are generated and compiled on any machine with the toolkit's library, and
// CI compiles every kernel the generator can emit. CUBINs are cached on disk by a hash of the
// source, the architecture and NVRTC's version.
#include <string>

namespace luminal::cuda {

// Empty when NVRTC can be loaded; otherwise what is missing and the fix.
std::string nvrtc_unavailable_reason();
std::string nvrtc_version();  // "13.0"

struct CompiledKernels {
  std::string cubin;
  bool from_cache = false;
  double compile_ms = 0;
};

// Compiles `source` for `arch` ("sm_90"). Rounding is exact IEEE (no fused multiply-add
// contraction, no fast math), so generated kernels round like the reference interpreter.
// Throws Error with NVRTC's log (and the source's first lines) when compilation fails.
// `cache_dir` empty: no disk cache.
CompiledKernels nvrtc_compile(const std::string& source, const std::string& arch, const std::string& cache_dir);

}  // namespace luminal::cuda
