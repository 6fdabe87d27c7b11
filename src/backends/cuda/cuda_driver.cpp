#include "backends/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>

#include <cstring>

#include <mutex>

#include "core/error.h"

namespace luminal::cuda {

namespace {

// The few driver API entry points luminal uses, declared here with the driver's C ABI so that
// no CUDA header or library is needed to build (CUresult is an int enum; handles are pointers).
using CUresult = int;
using CUdevice = int;
using Handle = void*;
constexpr int kMultiprocessorCount = 16, kCcMajor = 75, kCcMinor = 76, kSharedOptin = 97;  // CUdevice_attribute
constexpr int kMinDriver = 12000;  // CUDA 12.0: NVRTC's CUBINs of this toolkit generation load

struct Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(Handle*, CUdevice);
  CUresult (*cuCtxSetCurrent)(Handle);
  CUresult (*cuMemAlloc)(DevicePtr*, size_t);
  CUresult (*cuMemFree)(DevicePtr);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemAllocHost)(void**, size_t);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoDAsync)(DevicePtr, const void*, size_t, Handle);
  CUresult (*cuMemcpyDtoHAsync)(void*, DevicePtr, size_t, Handle);
  CUresult (*cuMemcpyDtoDAsync)(DevicePtr, DevicePtr, size_t, Handle);
  CUresult (*cuMemsetD8Async)(DevicePtr, unsigned char, size_t, Handle);
  CUresult (*cuStreamCreate)(Handle*, unsigned);
  CUresult (*cuStreamSynchronize)(Handle);
  CUresult (*cuStreamWaitEvent)(Handle, Handle, unsigned);
  CUresult (*cuModuleLoadData)(Handle*, const void*);
  CUresult (*cuModuleGetFunction)(Handle*, Handle, const char*);
  CUresult (*cuModuleUnload)(Handle);
  CUresult (*cuFuncSetAttribute)(Handle, int, int);
  CUresult (*cuLaunchKernel)(Handle, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, Handle, void**,
                             void**);
  CUresult (*cuLaunchKernelEx)(const void*, Handle, void**, void**);  // optional (CUDA 11.8+)
  CUresult (*cuEventCreate)(Handle*, unsigned);
  CUresult (*cuEventRecord)(Handle, Handle);
  CUresult (*cuEventSynchronize)(Handle);
  CUresult (*cuEventElapsedTime)(float*, Handle, Handle);
  CUresult (*cuEventDestroy)(Handle);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuStreamBeginCapture)(Handle, int);
  CUresult (*cuStreamEndCapture)(Handle, Handle*);
  CUresult (*cuGraphInstantiateWithFlags)(Handle*, Handle, unsigned long long);
  CUresult (*cuGraphLaunch)(Handle, Handle);
  CUresult (*cuGraphExecDestroy)(Handle);
  CUresult (*cuGraphDestroy)(Handle);
};

struct Loaded {
  Api api{};
  std::string error;  // why the driver cannot be used; empty when it can
  int device_count = 0, driver_version = 0;
};

template <class F>
bool bind(void* lib, F& f, const char* name, std::string& error) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f && error.empty()) error = std::string("the CUDA driver (libcuda.so.1) lacks ") + name + ": update the NVIDIA driver";
  return f != nullptr;
}

const Loaded& loaded() {
  static Loaded l = [] {
    Loaded r;
    // LUMINAL_CUDA_DRIVER: another library with the driver's API (the tests' CPU emulator).
    const char* other = std::getenv("LUMINAL_CUDA_DRIVER");
    void* lib = dlopen(other ? other : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
      r.error = other ? std::string("LUMINAL_CUDA_DRIVER names ") + other + ", which could not be loaded: " + dlerror()
                      : "no CUDA driver: libcuda.so.1 was not found (install the NVIDIA driver, or use --backend cpu)";
      return r;
    }
    Api& a = r.api;
    std::string& e = r.error;
    // Versioned names: cuda.h maps the plain names to these.
    bind(lib, a.cuInit, "cuInit", e), bind(lib, a.cuDriverGetVersion, "cuDriverGetVersion", e);
    bind(lib, a.cuDeviceGetCount, "cuDeviceGetCount", e), bind(lib, a.cuDeviceGet, "cuDeviceGet", e);
    bind(lib, a.cuDeviceGetName, "cuDeviceGetName", e), bind(lib, a.cuDeviceGetAttribute, "cuDeviceGetAttribute", e);
    bind(lib, a.cuDeviceTotalMem, "cuDeviceTotalMem_v2", e);
    bind(lib, a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", e), bind(lib, a.cuCtxSetCurrent, "cuCtxSetCurrent", e);
    bind(lib, a.cuMemAlloc, "cuMemAlloc_v2", e), bind(lib, a.cuMemFree, "cuMemFree_v2", e);
    bind(lib, a.cuMemGetInfo, "cuMemGetInfo_v2", e);
    bind(lib, a.cuMemAllocHost, "cuMemAllocHost_v2", e), bind(lib, a.cuMemFreeHost, "cuMemFreeHost", e);
    bind(lib, a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", e), bind(lib, a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", e);
    bind(lib, a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", e), bind(lib, a.cuMemsetD8Async, "cuMemsetD8Async", e);
    bind(lib, a.cuStreamCreate, "cuStreamCreate", e), bind(lib, a.cuStreamSynchronize, "cuStreamSynchronize", e);
    bind(lib, a.cuStreamWaitEvent, "cuStreamWaitEvent", e);
    bind(lib, a.cuModuleLoadData, "cuModuleLoadData", e), bind(lib, a.cuModuleGetFunction, "cuModuleGetFunction", e);
    bind(lib, a.cuModuleUnload, "cuModuleUnload", e), bind(lib, a.cuFuncSetAttribute, "cuFuncSetAttribute", e);
    bind(lib, a.cuLaunchKernel, "cuLaunchKernel", e);
    a.cuLaunchKernelEx = reinterpret_cast<decltype(a.cuLaunchKernelEx)>(dlsym(lib, "cuLaunchKernelEx"));
    bind(lib, a.cuEventCreate, "cuEventCreate", e), bind(lib, a.cuEventRecord, "cuEventRecord", e);
    bind(lib, a.cuEventSynchronize, "cuEventSynchronize", e), bind(lib, a.cuEventElapsedTime, "cuEventElapsedTime", e);
    bind(lib, a.cuEventDestroy, "cuEventDestroy_v2", e), bind(lib, a.cuGetErrorName, "cuGetErrorName", e);
    bind(lib, a.cuStreamBeginCapture, "cuStreamBeginCapture_v2", e), bind(lib, a.cuStreamEndCapture, "cuStreamEndCapture", e);
    bind(lib, a.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", e), bind(lib, a.cuGraphLaunch, "cuGraphLaunch", e);
    bind(lib, a.cuGraphExecDestroy, "cuGraphExecDestroy", e), bind(lib, a.cuGraphDestroy, "cuGraphDestroy", e);
    if (!e.empty()) return r;
    if (CUresult res = a.cuInit(0); res != 0) {
      const char* name = nullptr;
      a.cuGetErrorName(res, &name);
      e = std::string("the CUDA driver failed to start (cuInit: ") + (name ? name : std::to_string(res)) +
          "): check that the GPU is visible (nvidia-smi), or use --backend cpu";
      return r;
    }
    a.cuDriverGetVersion(&r.driver_version);
    if (r.driver_version < kMinDriver) {
      e = "the NVIDIA driver supports CUDA " + std::to_string(r.driver_version / 1000) + "." +
          std::to_string(r.driver_version % 1000 / 10) + "; luminal needs CUDA 12.0 or newer: update the driver";
      return r;
    }
    if (a.cuDeviceGetCount(&r.device_count) != 0 || r.device_count == 0)
      e = "no CUDA device: the driver is installed but sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)";
    return r;
  }();
  return l;
}

const Api& api() { return loaded().api; }

void check(CUresult r, const char* what) {
  if (r == 0) return;
  const char* name = nullptr;
  api().cuGetErrorName(r, &name);
  throw Error(std::string("CUDA: ") + what + " failed: " + (name ? name : "error " + std::to_string(r)));
}

}  // namespace

std::string unavailable_reason() { return loaded().error; }

Context& Context::get() {
  static std::once_flag once;
  static Context* c = nullptr;
  std::string why = unavailable_reason();
  if (!why.empty()) throw Error("the CUDA backend cannot run here: " + why);
  std::call_once(once, [] { c = new Context(); });  // lives as long as the process
  return *c;
}

Context::Context() {
  const Api& a = api();
  CUdevice dev = 0;
  check(a.cuDeviceGet(&dev, 0), "cuDeviceGet");
  check(a.cuDevicePrimaryCtxRetain(&context_, dev), "cuDevicePrimaryCtxRetain");
  check(a.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  check(a.cuStreamCreate(&stream_, 1 /* non-blocking */), "cuStreamCreate");
  char name[256] = {};
  check(a.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  info_.name = name;
  check(a.cuDeviceGetAttribute(&info_.cc_major, kCcMajor, dev), "cuDeviceGetAttribute");
  check(a.cuDeviceGetAttribute(&info_.cc_minor, kCcMinor, dev), "cuDeviceGetAttribute");
  check(a.cuDeviceGetAttribute(&info_.multiprocessors, kMultiprocessorCount, dev), "cuDeviceGetAttribute");
  check(a.cuDeviceGetAttribute(&info_.max_shared_per_block, kSharedOptin, dev), "cuDeviceGetAttribute");
  check(a.cuDeviceTotalMem(&info_.total_memory, dev), "cuDeviceTotalMem");
  info_.driver_version = loaded().driver_version;
}

std::string Context::arch() const { return "sm_" + std::to_string(info_.cc_major) + std::to_string(info_.cc_minor); }

DevicePtr Context::alloc(size_t bytes) {
  DevicePtr p = 0;
  CUresult r = api().cuMemAlloc(&p, bytes == 0 ? 1 : bytes);
  if (r == 2 /* CUDA_ERROR_OUT_OF_MEMORY */)
    throw Error("CUDA: out of device memory allocating " + std::to_string(bytes) + " bytes (" +
                std::to_string(free_memory() >> 20) + " MiB free of " + std::to_string(info_.total_memory >> 20) +
                " MiB): use a smaller --context or model");
  check(r, "cuMemAlloc");
  return p;
}

void Context::free(DevicePtr p) {
  if (p) api().cuMemFree(p);  // never throws: called from destructors
}

void Context::upload(DevicePtr dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(api().cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync");
  synchronize();  // pageable host memory: the copy may still read src
}

void Context::upload_async(DevicePtr dst, const void* src, size_t bytes) {
  if (bytes) check(api().cuMemcpyHtoDAsync(dst, src, bytes, stream_), "cuMemcpyHtoDAsync");
}

void Context::begin_capture() {
  check(api().cuStreamBeginCapture(stream_, 2 /* CU_STREAM_CAPTURE_MODE_RELAXED: allocations may happen */), "cuStreamBeginCapture");
}

void* Context::end_capture() {
  Handle graph = nullptr, exec = nullptr;
  check(api().cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture");
  CUresult r = api().cuGraphInstantiateWithFlags(&exec, graph, 0);
  api().cuGraphDestroy(graph);  // the executable graph keeps what it needs
  check(r, "cuGraphInstantiateWithFlags");
  return exec;
}

void Context::launch_graph(void* exec) { check(api().cuGraphLaunch(exec, stream_), "cuGraphLaunch"); }

void Context::destroy_graph(void* exec) {
  if (exec) api().cuGraphExecDestroy(exec);
}

void Context::download(void* dst, DevicePtr src, size_t bytes) {
  if (bytes == 0) return;
  // Large results (a row of logits: 0.5 MB) go through page-locked memory: a copy from pageable
  // memory is staged by the driver in small pieces, about three times slower.
  if (bytes >= (size_t(64) << 10)) {
    std::lock_guard<std::mutex> hold(staging_mutex_);
    if (staging_bytes_ < bytes) {
      if (staging_) api().cuMemFreeHost(staging_);
      staging_ = nullptr;
      staging_bytes_ = 0;
      if (api().cuMemAllocHost(&staging_, bytes) == 0) staging_bytes_ = bytes;
      else staging_ = nullptr;
    }
    if (staging_) {
      check(api().cuMemcpyDtoHAsync(staging_, src, bytes, stream_), "cuMemcpyDtoHAsync");
      synchronize();
      std::memcpy(dst, staging_, bytes);
      return;
    }
  }
  check(api().cuMemcpyDtoHAsync(dst, src, bytes, stream_), "cuMemcpyDtoHAsync");
  synchronize();
}

void Context::copy(DevicePtr dst, DevicePtr src, size_t bytes) {
  if (bytes) check(api().cuMemcpyDtoDAsync(dst, src, bytes, stream_), "cuMemcpyDtoDAsync");
}

void Context::fill_zero(DevicePtr dst, size_t bytes) {
  if (bytes) check(api().cuMemsetD8Async(dst, 0, bytes, stream_), "cuMemsetD8Async");
}

void Context::synchronize() { check(api().cuStreamSynchronize(stream_), "cuStreamSynchronize (a kernel failed)"); }

void* Context::side_stream() {
  if (!side_) {
    check(api().cuStreamCreate(&side_, 1 /* non-blocking */), "cuStreamCreate");
    check(api().cuEventCreate(&forked_, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
    check(api().cuEventCreate(&joined_, 2), "cuEventCreate");
  }
  return side_;
}

void Context::fork() {
  side_stream();
  check(api().cuEventRecord(forked_, stream_), "cuEventRecord");
  check(api().cuStreamWaitEvent(side_, forked_, 0), "cuStreamWaitEvent");
}

void Context::join() {
  check(api().cuEventRecord(joined_, side_), "cuEventRecord");
  check(api().cuStreamWaitEvent(stream_, joined_, 0), "cuStreamWaitEvent");
}

void Context::mark(int which) {
  side_stream();
  void*& e = marks_[which & 1];
  if (!e) check(api().cuEventCreate(&e, 2 /* CU_EVENT_DISABLE_TIMING */), "cuEventCreate");
  check(api().cuEventRecord(e, stream_), "cuEventRecord");
}

void Context::download_marked(void* dst, DevicePtr src, size_t bytes, int which) {
  void* e = marks_[which & 1];
  if (!e) throw Error("download_marked: mark " + std::to_string(which) + " was never set");
  check(api().cuStreamWaitEvent(side_, e, 0), "cuStreamWaitEvent");
  check(api().cuMemcpyDtoHAsync(dst, src, bytes, side_), "cuMemcpyDtoHAsync");
  check(api().cuStreamSynchronize(side_), "cuStreamSynchronize (a kernel failed)");
}

size_t Context::free_memory() const {
  size_t free = 0, total = 0;
  api().cuMemGetInfo(&free, &total);
  return free;
}

namespace {

// cuLaunchKernelEx's config and one attribute, with the driver's layout (cuda.h: CUlaunchConfig,
// CUlaunchAttribute, whose value is a 64-byte union).
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int value;
  } v;
};
struct LaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared;
  Handle stream;
  LaunchAttribute* attrs;
  unsigned n_attrs;
};
constexpr int kProgrammaticStreamSerialization = 6;  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

}  // namespace

bool Context::can_overlap_launches() const { return api().cuLaunchKernelEx && info_.cc_major >= 9; }

void Context::launch(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, size_t shared, void** args,
                     bool overlap) {
  if (gx == 0 || gy == 0 || gz == 0) return;  // nothing to do (an empty tensor)
  if (shared > 48 * 1024)
    check(api().cuFuncSetAttribute(function, 8 /* MAX_DYNAMIC_SHARED_SIZE_BYTES */, static_cast<int>(shared)),
          "cuFuncSetAttribute");
  if (overlap && can_overlap_launches()) {
    LaunchAttribute a{};
    a.id = kProgrammaticStreamSerialization;
    a.v.value = 1;
    LaunchConfig cfg{gx, gy, gz, bx, 1, 1, static_cast<unsigned>(shared), stream_, &a, 1};
    check(api().cuLaunchKernelEx(&cfg, function, args, nullptr), "cuLaunchKernelEx");
    return;
  }
  check(api().cuLaunchKernel(function, gx, gy, gz, bx, 1, 1, static_cast<unsigned>(shared), stream_, args, nullptr),
        "cuLaunchKernel");
}

Context::Timer::Timer(Context& c) : c_(c) {
  check(api().cuEventCreate(&begin_, 0), "cuEventCreate");
  check(api().cuEventCreate(&end_, 0), "cuEventCreate");
}

Context::Timer::~Timer() {
  api().cuEventDestroy(begin_);
  api().cuEventDestroy(end_);
}

void Context::Timer::start() { check(api().cuEventRecord(begin_, c_.stream_), "cuEventRecord"); }

double Context::Timer::stop_ms() {
  check(api().cuEventRecord(end_, c_.stream_), "cuEventRecord");
  check(api().cuEventSynchronize(end_), "cuEventSynchronize (a kernel failed)");
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, begin_, end_), "cuEventElapsedTime");
  return ms;
}

Module::Module(Context&, const std::string& image) {
  check(api().cuModuleLoadData(&module_, image.data()), "cuModuleLoadData");
}

Module::~Module() {
  if (module_) api().cuModuleUnload(module_);
}

void* Module::function(const std::string& name) const {
  void* f = nullptr;
  check(api().cuModuleGetFunction(&f, module_, name.c_str()), ("cuModuleGetFunction(" + name + ")").c_str());
  return f;
}

}  // namespace luminal::cuda
