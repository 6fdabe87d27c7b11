#pragma once
// Linear layers with many rows (prefill) through cuBLASLt, loaded at run time (dlopen of
// libcublasLt), on the tensor cores. Few rows (decode) stay on the generated GEMV, which is
// bandwidth-bound and needs no library.
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_driver.h"
#include "core/dtype.h"

namespace luminal::cuda {

// Empty when cuBLASLt can be loaded; otherwise why not.
std::string cublaslt_unavailable_reason();

// C[m, n] (+)= A[m, k] · Wᵀ for W [n, k]; all row-major with the given row strides (elements).
// A and W share dtype `t`: bf16 (f32 accumulation) or f32 (full f32 math, no TF32). C is f32,
// or with `c_type` bf16 (bf16 operands only, not accumulating) the f32 sums rounded to bf16;
// `accumulate` adds to it. Runs on the context's stream, or with `side` on its side stream
// (with its own workspace) once the shape's algorithm is chosen; algorithms come from cuBLASLt's
// heuristic, cached per shape; from 64 rows, the fastest of its first eight, timed on the first
// call of a shape (which synchronizes: never while a CUDA graph records), on the main stream.
void cublaslt_linear(Context& ctx, DType t, DevicePtr a, int64_t lda, DevicePtr w, int64_t ldw, DevicePtr c, int64_t ldc,
                     int64_t m, int64_t n, int64_t k, bool accumulate = false, bool side = false, DType c_type = DType::F32);
// Whether cublaslt_linear has chosen the algorithm for this shape (a call may then go to the
// side stream).
bool cublaslt_ready(DType t, int64_t lda, int64_t ldw, int64_t ldc, int64_t m, int64_t n, int64_t k, DType c_type = DType::F32);

}  // namespace luminal::cuda
