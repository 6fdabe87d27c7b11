#pragma once
// The CPU backend's native kernels, plugged into the plan runner as a kernel hook: nodes they
// handle run threaded and vectorised; the others fall back to the reference kernels. Results
// agree with the reference within float rounding (the reference sums in a fixed order; these
// sum in SIMD lanes with fused multiply-adds).
#include "runtime/interpreter.h"

namespace luminal::cpu {

class ThreadPool;
class FusedJit;
class PackedWeights;

// Today: Matmul whose B operand is a row-major [n, k] matrix read transposed (every linear layer
// and the attention scores; f32 or bf16) or a row-major [k, n] f32 matrix (attention's values),
// for any batch of A rows. Fused elementwise nodes run generated code when `jit` (prepared for
// the graph the runner executes) has a kernel for them, else the kernel interpreter.
struct CpuKernelOptions {
  // Linear layers with bf16 weights take their activations as bf16 where they run on AMX or on
  // the packed GEMM's bf16-pair tile (a prefill; packed_gemm_pairs_bf16), as PyTorch runs a bf16
  // model: half the products, activations rounded to 2^-8 of themselves. Off: hi + lo parts on
  // AMX, f32 elsewhere, f32-faithful. Also LUMINAL_CPU_BF16_ACTIVATIONS=1.
  bool bf16_activations = false;
  // bf16 weights packed at load (weight_panels.h), found by their buffers' addresses: a Matmul
  // reading one whole reads its panels. Not owned; must outlive the hook.
  const PackedWeights* packed_weights = nullptr;
};
Interpreter::KernelHook cpu_kernels(ThreadPool& pool, const FusedJit* jit = nullptr, CpuKernelOptions options = {});

}  // namespace luminal::cpu
