// The CUDA driver API the backend calls (cuda_driver.cpp), and cuBLASLt's (cublaslt.cpp), on the
// host: device memory is host memory, every stream is one in-order queue run at once, a captured
// graph is a list of those operations replayed in order, and a kernel launch runs its blocks as
// fibers (block_runner.cpp). Modules are the shared objects the emulator's NVRTC builds.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "block_runner.h"
#include "emulator.h"

using namespace luminal::cuda_emulator;

namespace {

using CUresult = int;
constexpr CUresult kOk = 0, kInvalidValue = 1, kOutOfMemory = 2, kInvalidImage = 200, kNotFound = 500;

// The emulated device: an sm_90 with few multiprocessors, so that persistent kernels launch few
// blocks (LUMINAL_EMULATOR_SMS overrides; at most 16 blocks meet at a grid barrier).
int multiprocessors() {
  static const int n = [] {
    const char* e = std::getenv("LUMINAL_EMULATOR_SMS");
    const int v = e ? std::atoi(e) : 8;
    return v < 1 ? 1 : v > kWorkers ? kWorkers : v;
  }();
  return n;
}
constexpr size_t kDeviceBytes = size_t(16) << 30;

struct Kernel {
  std::string name;
  void* (*pack)(void**) = nullptr;  // copies the arguments cuLaunchKernel points at
  void (*run)(void*) = nullptr;
  void (*release)(void*) = nullptr;
  void (*set_block)(const lm_emu_block*) = nullptr;
};

struct Module {
  void* handle = nullptr;
  std::vector<std::unique_ptr<Kernel>> kernels;
};

// A captured graph: the stream's operations, in order (each may be replayed many times).
struct Graph {
  std::vector<std::function<void()>> ops;
};

std::mutex g_mu;
Graph* g_capture = nullptr;  // the graph being captured (every stream joins the one capture)

void submit(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_capture) {
      g_capture->ops.push_back(std::move(f));
      return;
    }
  }
  f();
}

// A launch's copied arguments, released with the last operation that runs it.
struct Packed {
  Packed(const Kernel* kernel, void* a) : k(kernel), args(a) {}
  Packed(const Packed&) = delete;
  ~Packed() { k->release(args); }
  const Kernel* k;
  void* args;
};

CUresult launch(Kernel* k, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void** params) {
  if (!k || !params) return kInvalidValue;
  static const bool trace = std::getenv("LUMINAL_EMULATOR_TRACE") != nullptr;  // each launch to stderr
  if (trace) std::fprintf(stderr, "emulated launch %s: grid %u x %u x %u, block %u x %u x %u, %u B dynamic shared\n", k->name.c_str(), gx, gy, gz, bx, by, bz, smem);
  auto packed = std::make_shared<Packed>(k, k->pack(params));
  submit([k, packed, gx, gy, gz, bx, by, bz, smem] {
    Grid g;
    g.kernel = k->name;
    g.run = k->run;
    g.set_block = k->set_block;
    g.args = packed->args;
    g.grid[0] = gx, g.grid[1] = gy, g.grid[2] = gz;
    g.block[0] = bx, g.block[1] = by, g.block[2] = bz;
    g.dynamic_smem = smem;
    run_grid(g);
  });
  return kOk;
}

double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Event {
  double ms = 0;
};

int g_context_tag, g_stream_tag;

}  // namespace

extern "C" {

CUresult cuInit(unsigned) { return kOk; }
CUresult cuDriverGetVersion(int* v) { return *v = 13000, kOk; }
CUresult cuDeviceGetCount(int* n) { return *n = 1, kOk; }
CUresult cuDeviceGet(int* d, int ordinal) { return ordinal == 0 ? (*d = 0, kOk) : kInvalidValue; }
CUresult cuDeviceGetName(char* name, int len, int) {
  std::snprintf(name, static_cast<size_t>(len), "luminal CUDA emulator (sm_90 on the CPU, %d SMs)", multiprocessors());
  return kOk;
}
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 1: *v = 1024; break;           // max threads per block
    case 8: *v = 49152; break;          // shared memory per block
    case 10: *v = 32; break;            // warp size
    case 16: *v = multiprocessors(); break;
    case 38: *v = 50 << 20; break;      // L2 bytes
    case 39: *v = 2048; break;          // threads per multiprocessor
    case 75: *v = 9; break;             // compute capability
    case 76: *v = 0; break;
    case 81: *v = 233472; break;        // shared memory per multiprocessor
    case 97: *v = static_cast<int>(kMaxDynamicSmem); break;  // per block, opted in
    default: *v = 0;
  }
  return kOk;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, int) { return *bytes = kDeviceBytes, kOk; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int) { return *ctx = &g_context_tag, kOk; }
CUresult cuCtxSetCurrent(void*) { return kOk; }
CUresult cuGetErrorName(CUresult r, const char** name) {
  switch (r) {
    case kOk: *name = "CUDA_SUCCESS"; break;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; break;
    default: *name = "CUDA_ERROR_UNKNOWN";
  }
  return kOk;
}

CUresult cuMemAlloc_v2(unsigned long long* p, size_t bytes) {
  void* m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!m) return kOutOfMemory;
  *p = reinterpret_cast<unsigned long long>(m);
  return kOk;
}
CUresult cuMemFree_v2(unsigned long long p) {
  std::free(reinterpret_cast<void*>(p));
  return kOk;
}
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total) {
  *free_bytes = kDeviceBytes, *total = kDeviceBytes;
  return kOk;
}
CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  *p = std::malloc(bytes ? bytes : 1);
  return *p ? kOk : kOutOfMemory;
}
CUresult cuMemFreeHost(void* p) {
  std::free(p);
  return kOk;
}
// Copies read their source when they run (a captured host-to-device copy reads it at each replay).
CUresult cuMemcpyHtoDAsync_v2(unsigned long long dst, const void* src, size_t n, void*) {
  submit([=] { std::memcpy(reinterpret_cast<void*>(dst), src, n); });
  return kOk;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src, size_t n, void*) {
  submit([=] { std::memcpy(dst, reinterpret_cast<const void*>(src), n); });
  return kOk;
}
CUresult cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, void*) {
  submit([=] { std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n); });
  return kOk;
}
CUresult cuMemsetD8Async(unsigned long long dst, unsigned char v, size_t n, void*) {
  submit([=] { std::memset(reinterpret_cast<void*>(dst), v, n); });
  return kOk;
}

CUresult cuStreamCreate(void** s, unsigned) { return *s = &g_stream_tag, kOk; }
CUresult cuStreamSynchronize(void*) { return kOk; }
CUresult cuStreamWaitEvent(void*, void*, unsigned) { return kOk; }
CUresult cuStreamBeginCapture_v2(void*, int) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_capture) return kInvalidValue;
  g_capture = new Graph();
  return kOk;
}
CUresult cuStreamEndCapture(void*, void** graph) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_capture) return kInvalidValue;
  *graph = g_capture;
  g_capture = nullptr;
  return kOk;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
  *exec = new Graph(*static_cast<Graph*>(graph));  // shares the recorded operations
  return kOk;
}
CUresult cuGraphLaunch(void* exec, void*) {
  const std::vector<std::function<void()>> ops = static_cast<Graph*>(exec)->ops;
  submit([ops] {
    for (const auto& op : ops) op();
  });
  return kOk;
}
CUresult cuGraphExecDestroy(void* exec) {
  delete static_cast<Graph*>(exec);
  return kOk;
}
CUresult cuGraphDestroy(void* graph) {
  delete static_cast<Graph*>(graph);
  return kOk;
}

// Events are stamped when their point of the stream is reached: at once, the stream having run
// everything before.
CUresult cuEventCreate(void** e, unsigned) { return *e = new Event(), kOk; }
CUresult cuEventRecord(void* e, void*) {
  submit([e] { static_cast<Event*>(e)->ms = now_ms(); });
  return kOk;
}
CUresult cuEventSynchronize(void*) { return kOk; }
CUresult cuEventElapsedTime(float* ms, void* a, void* b) {
  *ms = static_cast<float>(static_cast<Event*>(b)->ms - static_cast<Event*>(a)->ms);
  return kOk;
}
CUresult cuEventDestroy_v2(void* e) {
  delete static_cast<Event*>(e);
  return kOk;
}

// An image from the emulator's NVRTC: "LMEMU2 <bytes> <path>\n" and the module's shared object,
// written back to <path> where that file is gone (the image came from the backend's cache).
CUresult cuModuleLoadData(void** module, const void* image) {
  const char* s = static_cast<const char*>(image);
  unsigned long long bytes = 0;
  char path[4096];
  int header = 0;
  if (std::sscanf(s, "LMEMU2 %llu %4095s%n", &bytes, path, &header) != 2 || s[header] != '\n') return kInvalidImage;
  if (access(path, R_OK) != 0) {
    std::error_code ignored;  // the folder too may be gone
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
    const std::string tmp = std::string(path) + "." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(s + header + 1, 1, bytes, f) != bytes) {
      if (f) std::fclose(f);
      return kInvalidImage;
    }
    std::fclose(f);
    std::rename(tmp.c_str(), path);
  }
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "luminal CUDA emulator: cannot load %s: %s\n", path, dlerror());
    return kInvalidImage;
  }
  auto* m = new Module();
  m->handle = h;
  *module = m;
  return kOk;
}
CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  auto* m = static_cast<Module*>(module);
  auto k = std::make_unique<Kernel>();
  k->name = name;
  const std::string n(name);
  k->pack = reinterpret_cast<void* (*)(void**)>(dlsym(m->handle, ("lm_emu_pack_" + n).c_str()));
  k->run = reinterpret_cast<void (*)(void*)>(dlsym(m->handle, ("lm_emu_run_" + n).c_str()));
  k->release = reinterpret_cast<void (*)(void*)>(dlsym(m->handle, ("lm_emu_release_" + n).c_str()));
  k->set_block = reinterpret_cast<void (*)(const lm_emu_block*)>(dlsym(m->handle, "lm_emu_set_block"));
  if (!k->pack || !k->run || !k->release || !k->set_block) return kNotFound;
  *function = k.get();
  m->kernels.push_back(std::move(k));
  return kOk;
}
CUresult cuModuleUnload(void*) { return kOk; }  // kept loaded: launches captured in graphs may still name it
CUresult cuFuncSetAttribute(void*, int, int) { return kOk; }

CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void*, void** params,
                        void**) {
  return launch(static_cast<Kernel*>(f), gx, gy, gz, bx, by, bz, smem, params);
}
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  void* hStream;
  void* attrs;
  unsigned numAttrs;
};
// Programmatic dependent launch changes nothing here: launches run one after another.
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, void* f, void** params, void**) {
  return launch(static_cast<Kernel*>(f), c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ, c->sharedMemBytes,
                params);
}

// ---- cuBLASLt, as cublaslt.cpp uses it: D = alpha op(A) op(B) + beta C, column-major ----
struct LtDesc {
  int trans_a = 0, trans_b = 0;
};
struct LtLayout {
  int type = 0;  // cudaDataType: 0 f32, 14 bf16
  unsigned long long rows = 0, cols = 0;
  long long ld = 0;
};
int cublasLtCreate(void** h) { return *h = &g_context_tag, 0; }
int cublasLtMatmulDescCreate(void** d, int, int) { return *d = new LtDesc(), 0; }
int cublasLtMatmulDescSetAttribute(void* d, int attr, const void* v, size_t) {
  if (attr == 3) std::memcpy(&static_cast<LtDesc*>(d)->trans_a, v, 4);
  if (attr == 4) std::memcpy(&static_cast<LtDesc*>(d)->trans_b, v, 4);
  return 0;
}
int cublasLtMatrixLayoutCreate(void** l, int type, unsigned long long rows, unsigned long long cols, long long ld) {
  if (type != 0 && type != 14) return 7;  // CUBLAS_STATUS_INVALID_VALUE
  *l = new LtLayout{type, rows, cols, ld};
  return 0;
}
int cublasLtMatmulPreferenceCreate(void** p) { return *p = &g_context_tag, 0; }
int cublasLtMatmulPreferenceSetAttribute(void*, int, const void*, size_t) { return 0; }
struct LtHeuristic {
  unsigned long long algo[8];
  size_t workspace;
  int state;
  float waves;
  int reserved[4];
};
int cublasLtMatmulAlgoGetHeuristic(void*, void*, void*, void*, void*, void*, void*, int want, LtHeuristic* res, int* found) {
  if (want < 1) return 7;
  std::memset(res, 0, sizeof *res);
  *found = 1;
  return 0;
}
int cublasLtMatmul(void*, void* desc, const void* alpha, const void* a, void* la, const void* b, void* lb, const void* beta, const void* c, void* lc,
                   void* d, void* ld, const void*, void*, size_t, void*) {
  const LtDesc dd = *static_cast<LtDesc*>(desc);
  const LtLayout A = *static_cast<LtLayout*>(la), B = *static_cast<LtLayout*>(lb), C = *static_cast<LtLayout*>(lc), D = *static_cast<LtLayout*>(ld);
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  submit([=] {
    auto get = [](const LtLayout& l, const void* p, unsigned long long r, unsigned long long col) {
      const unsigned long long at = r + col * static_cast<unsigned long long>(l.ld);
      if (l.type == 0) return static_cast<const float*>(p)[at];
      const unsigned u = static_cast<unsigned>(static_cast<const unsigned short*>(p)[at]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    };
    const unsigned long long m = D.rows, n = D.cols, k = dd.trans_a ? A.rows : A.cols;
    for (unsigned long long j = 0; j < n; ++j)
      for (unsigned long long i = 0; i < m; ++i) {
        float acc = 0.0f;
        for (unsigned long long p = 0; p < k; ++p) {
          const float x = dd.trans_a ? get(A, a, p, i) : get(A, a, i, p);
          const float y = dd.trans_b ? get(B, b, j, p) : get(B, b, p, j);
          acc = std::fma(x, y, acc);
        }
        float v = al * acc + (be != 0.0f ? be * get(C, c, i, j) : 0.0f);
        const unsigned long long at = i + j * static_cast<unsigned long long>(D.ld);
        if (D.type == 0) {
          static_cast<float*>(d)[at] = v;
        } else {
          unsigned u;
          std::memcpy(&u, &v, 4);
          u += 0x7fffu + ((u >> 16) & 1u);
          static_cast<unsigned short*>(d)[at] = static_cast<unsigned short>(u >> 16);
        }
      }
  });
  return 0;
}

}  // extern "C"
