#include "backends/cuda/cublaslt.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace luminal::cuda {

namespace {

// cuBLASLt's C ABI, declared here (values from cublasLt.h / cublas_api.h / library_types.h of
// CUDA 12 and 13), so no toolkit header is needed to build.
using Status = int;
using Handle = void*;
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspace_size;
  Status state;
  float waves;
  int reserved[4];
};
constexpr int kR32F = 0, kR16BF = 14;            // cudaDataType
constexpr int kCompute32F = 68;                  // cublasComputeType_t
constexpr int kOpN = 0, kOpT = 1;                // cublasOperation_t
constexpr int kDescTransA = 3, kDescTransB = 4;  // cublasLtMatmulDescAttributes_t
constexpr int kPrefMaxWorkspace = 1;             // cublasLtMatmulPreferenceAttributes_t
constexpr size_t kWorkspaceBytes = size_t(32) << 20;
// From this many rows a shape's algorithm is the fastest of the heuristic's first kCandidates,
// timed once on the device (its first choice is not always the fastest at a prefill's sizes);
// below, the first choice. LUMINAL_CUBLASLT_TUNE=0 always takes the first.
constexpr int64_t kTuneMinRows = 64;
constexpr int kCandidates = 8;

struct Api {
  Status (*cublasLtCreate)(Handle*);
  Status (*cublasLtMatmulDescCreate)(Handle*, int, int);
  Status (*cublasLtMatmulDescSetAttribute)(Handle, int, const void*, size_t);
  Status (*cublasLtMatrixLayoutCreate)(Handle*, int, uint64_t, uint64_t, int64_t);
  Status (*cublasLtMatmulPreferenceCreate)(Handle*);
  Status (*cublasLtMatmulPreferenceSetAttribute)(Handle, int, const void*, size_t);
  Status (*cublasLtMatmulAlgoGetHeuristic)(Handle, Handle, Handle, Handle, Handle, Handle, Handle, int, HeuristicResult*, int*);
  Status (*cublasLtMatmul)(Handle, Handle, const void*, const void*, Handle, const void*, Handle, const void*, const void*, Handle,
                           void*, Handle, const Algo*, void*, size_t, void*);
};

struct Loaded {
  Api api{};
  std::string error;
};

const Loaded& loaded() {
  static Loaded l = [] {
    Loaded r;
    void* lib = nullptr;
    // LUMINAL_CUBLASLT: another library with the API (the tests' CPU emulator).
    if (const char* other = std::getenv("LUMINAL_CUBLASLT")) lib = dlopen(other, RTLD_NOW | RTLD_LOCAL);
    else
      for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"})
        if ((lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      r.error = "cuBLASLt (libcublasLt.so) was not found: install the CUDA toolkit's cuBLAS";
      return r;
    }
    auto bind = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      if (!f && r.error.empty()) r.error = std::string("cuBLASLt lacks ") + name;
    };
    Api& a = r.api;
    bind(a.cublasLtCreate, "cublasLtCreate"), bind(a.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
    bind(a.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    bind(a.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    bind(a.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
    bind(a.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
    bind(a.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic"), bind(a.cublasLtMatmul, "cublasLtMatmul");
    return r;
  }();
  return l;
}

void check(Status s, const char* what) {
  if (s != 0) throw Error(std::string("cuBLASLt: ") + what + " failed (status " + std::to_string(s) + ")");
}

// One shape's descriptors and algorithm, made once (descriptors are small; a model has a few
// dozen shapes per bucket of rows).
struct Plan {
  Handle desc = nullptr, a = nullptr, b = nullptr, c = nullptr;
  Algo algo{};
  size_t workspace = 0;
};

struct State {
  std::mutex mu;
  Handle handle = nullptr;
  DevicePtr workspace = 0, side_workspace = 0;  // one per stream: concurrent calls must not share one
  std::map<std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, Plan> plans;
};

// A shape's entry in State::plans.
std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t> plan_key(DType t, DType c_type, int64_t lda, int64_t ldw,
                                                                                     int64_t ldc, int64_t m, int64_t n, int64_t k) {
  return std::make_tuple(t == DType::BF16 ? kR16BF : kR32F, c_type == DType::BF16 ? kR16BF : kR32F, m, n, k, lda, ldw, ldc);
}

State& state() {
  static State s;
  return s;
}

}  // namespace

std::string cublaslt_unavailable_reason() { return loaded().error; }

bool cublaslt_ready(DType t, int64_t lda, int64_t ldw, int64_t ldc, int64_t m, int64_t n, int64_t k, DType c_type) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  return st.plans.count(plan_key(t, c_type, lda, ldw, ldc, m, n, k)) > 0;
}

void cublaslt_linear(Context& ctx, DType t, DevicePtr a, int64_t lda, DevicePtr w, int64_t ldw, DevicePtr c, int64_t ldc,
                     int64_t m, int64_t n, int64_t k, bool accumulate, bool side, DType c_type) {
  if (!cublaslt_unavailable_reason().empty()) throw Error("cannot run a matmul on cuBLASLt: " + cublaslt_unavailable_reason());
  if (t != DType::BF16 && t != DType::F32) throw Error("cublaslt_linear: operands must be bf16 or f32");
  if (c_type != DType::F32 && (c_type != DType::BF16 || t != DType::BF16 || accumulate))
    throw Error("cublaslt_linear: C is f32, or bf16 for bf16 operands without accumulating");
  const Api& api = loaded().api;
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  if (!st.handle) {
    check(api.cublasLtCreate(&st.handle), "cublasLtCreate");
    st.workspace = ctx.alloc(kWorkspaceBytes);
  }
  const int type = t == DType::BF16 ? kR16BF : kR32F;
  auto key = plan_key(t, c_type, lda, ldw, ldc, m, n, k);
  auto it = st.plans.find(key);
  if (it == st.plans.end()) {
    side = false;  // timed on the main stream, and run there this once
    // Column-major view of row-major data: C becomes Cᵀ [n, m] with leading dim ldc, W [n, k]
    // becomes a [k, n] matrix (ld ldw) taken transposed, A [m, k] a [k, m] matrix (ld lda).
    Plan p;
    check(api.cublasLtMatmulDescCreate(&p.desc, kCompute32F, kR32F), "cublasLtMatmulDescCreate");
    const int trans_a = kOpT, trans_b = kOpN;
    check(api.cublasLtMatmulDescSetAttribute(p.desc, kDescTransA, &trans_a, sizeof trans_a), "set TRANSA");
    check(api.cublasLtMatmulDescSetAttribute(p.desc, kDescTransB, &trans_b, sizeof trans_b), "set TRANSB");
    check(api.cublasLtMatrixLayoutCreate(&p.a, type, static_cast<uint64_t>(k), static_cast<uint64_t>(n), ldw), "layout W");
    check(api.cublasLtMatrixLayoutCreate(&p.b, type, static_cast<uint64_t>(k), static_cast<uint64_t>(m), lda), "layout A");
    check(api.cublasLtMatrixLayoutCreate(&p.c, c_type == DType::BF16 ? kR16BF : kR32F, static_cast<uint64_t>(n), static_cast<uint64_t>(m), ldc),
          "layout C");
    Handle pref = nullptr;
    check(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    check(api.cublasLtMatmulPreferenceSetAttribute(pref, kPrefMaxWorkspace, &ws, sizeof ws), "set workspace");
    HeuristicResult res[kCandidates]{};
    int found = 0;
    check(api.cublasLtMatmulAlgoGetHeuristic(st.handle, p.desc, p.a, p.b, p.c, p.c, pref, kCandidates, res, &found), "heuristic");
    if (found < 1) throw Error("cuBLASLt has no algorithm for a " + std::to_string(m) + "x" + std::to_string(k) + " by " +
                               std::to_string(n) + " matmul");
    size_t best = 0;
    const char* tune = std::getenv("LUMINAL_CUBLASLT_TUNE");
    if (found > 1 && m >= kTuneMinRows && !(tune && std::string(tune) == "0")) {
      // Each candidate writes a scratch C (a call may accumulate into the real one), once to
      // warm up, then three times timed; one that fails to run is passed over.
      const DevicePtr scratch = ctx.alloc(static_cast<size_t>(m * ldc) * sizeof(float));
      const float one = 1.0f, zero = 0.0f;
      std::vector<double> ms(static_cast<size_t>(found), -1.0);
      Context::Timer timer(ctx);
      for (int i = 0; i < found; ++i) {
        if (res[i].workspace_size > kWorkspaceBytes) continue;
        auto call = [&] {
          return api.cublasLtMatmul(st.handle, p.desc, &one, reinterpret_cast<const void*>(w), p.a, reinterpret_cast<const void*>(a), p.b,
                                    &zero, reinterpret_cast<const void*>(scratch), p.c, reinterpret_cast<void*>(scratch), p.c, &res[i].algo,
                                    reinterpret_cast<void*>(st.workspace), kWorkspaceBytes, ctx.stream());
        };
        if (call() != 0) continue;
        timer.start();
        bool ok = true;
        for (int r = 0; r < 3; ++r) ok = ok && call() == 0;
        const double t = timer.stop_ms();
        if (ok) ms[static_cast<size_t>(i)] = t / 3;
      }
      ctx.free(scratch);
      for (size_t i = 0; i < ms.size(); ++i)
        if (ms[i] >= 0 && (ms[best] < 0 || ms[i] < ms[best])) best = i;
      const char* log = std::getenv("LUMINAL_CUDA_TUNE_LOG");
      if (log && std::string(log) == "1") {
        std::fprintf(stderr, "cublaslt %lldx%lldx%lld %s%s: candidate %zu of %d;", static_cast<long long>(m), static_cast<long long>(n),
                     static_cast<long long>(k), t == DType::BF16 ? "bf16" : "f32", c_type == DType::BF16 ? " to bf16" : "", best, found);
        for (double x : ms) std::fprintf(stderr, " %.4f", x);
        std::fprintf(stderr, " ms\n");
      }
    }
    p.algo = res[best].algo;
    p.workspace = res[best].workspace_size;
    it = st.plans.emplace(key, p).first;
  }
  const Plan& p = it->second;
  const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  if (side && !st.side_workspace) st.side_workspace = ctx.alloc(kWorkspaceBytes);
  check(api.cublasLtMatmul(st.handle, p.desc, &one, reinterpret_cast<const void*>(w), p.a, reinterpret_cast<const void*>(a), p.b,
                           &beta, reinterpret_cast<const void*>(c), p.c, reinterpret_cast<void*>(c), p.c, &p.algo,
                           reinterpret_cast<void*>(side ? st.side_workspace : st.workspace), kWorkspaceBytes,
                           side ? ctx.side_stream() : ctx.stream()),
        "cublasLtMatmul");
}

}  // namespace luminal::cuda
