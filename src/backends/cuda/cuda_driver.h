#pragma once
// The CUDA driver, loaded at run time (dlopen of libcuda.so.1): luminal builds and runs on
// machines without a GPU or a driver, and says why the CUDA backend cannot run there instead of
// failing to start. One device (the first), its primary context and one stream.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace luminal::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int multiprocessors = 0;
  int max_shared_per_block = 0;    // bytes, with the opt-in above 48 KB
  size_t total_memory = 0;
  int driver_version = 0;          // 13000 = CUDA 13.0
};

// Empty when a CUDA device can be used here; otherwise what is missing (no driver library, no
// device, a driver too old) and what to do about it.
std::string unavailable_reason();

class Module;

// Device 0's primary context. Every call throws Error naming the failing driver call and its
// error (cuGetErrorName) on failure.
class Context {
 public:
  static Context& get();  // the process's one context; throws Error when unavailable_reason() is not empty

  const DeviceInfo& info() const { return info_; }
  std::string arch() const;  // "sm_90"

  DevicePtr alloc(size_t bytes);
  void free(DevicePtr p);
  // Transfers and fills on the context's stream (asynchronous to the host except where noted).
  void upload(DevicePtr dst, const void* src, size_t bytes);    // returns when src may be reused
  // Queued on the stream; `src` is pageable, so the driver stages it before returning and the
  // caller may reuse it at once (a few bytes: the dims of a run).
  void upload_async(DevicePtr dst, const void* src, size_t bytes);
  void download(void* dst, DevicePtr src, size_t bytes);        // returns when dst holds the data
  void copy(DevicePtr dst, DevicePtr src, size_t bytes);
  void fill_zero(DevicePtr dst, size_t bytes);
  void synchronize();
  size_t free_memory() const;
  void* stream() const { return stream_; }  // a CUstream, for libraries (cuBLASLt)
  // A second stream, for library calls that may run beside the main stream's (a linear group's
  // GEMMs, each too small to fill the GPU). fork(): what the side stream does next waits for
  // everything queued on the main stream so far; join(): what the main stream does next waits
  // for everything queued on the side stream.
  void* side_stream();
  void fork();
  void join();
  // Mark `which` (0 or 1) at this point of the stream; download_marked then copies after that
  // mark alone, on the side stream, and returns when dst holds the data: a result read while
  // the stream already runs later work (a greedy decode's token, while the next step runs).
  void mark(int which);
  void download_marked(void* dst, DevicePtr src, size_t bytes, int which);

  // A kernel launch on the stream; args as cuLaunchKernel takes them (pointers to each value).
  // `overlap`: a programmatic dependent launch (Hopper on): the kernel may start while the one
  // before it finishes, and must itself wait (griddepcontrol.wait) before touching anything that
  // kernel writes. Ignored where can_overlap_launches() is false.
  void launch(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x, size_t shared_bytes,
              void** args, bool overlap = false);
  bool can_overlap_launches() const;

  // CUDA graphs: the launches between begin_capture and end_capture are recorded, not run;
  // the returned executable graph replays them with launch_graph.
  void begin_capture();
  void* end_capture();  // an instantiated CUgraphExec
  void launch_graph(void* exec);
  void destroy_graph(void* exec);

  // Device time between two points of the stream, for the search's profiling.
  class Timer {
   public:
    explicit Timer(Context& c);
    ~Timer();
    void start();
    double stop_ms();  // synchronizes
   private:
    Context& c_;
    void *begin_ = nullptr, *end_ = nullptr;
  };

 private:
  Context();
  friend class Module;
  void* context_ = nullptr;
  void* stream_ = nullptr;
  void *side_ = nullptr, *forked_ = nullptr, *joined_ = nullptr;
  void* marks_[2] = {nullptr, nullptr};
  DeviceInfo info_;
  void* staging_ = nullptr;  // page-locked host memory for large downloads
  size_t staging_bytes_ = 0;
  std::mutex staging_mutex_;
};

// A loaded CUBIN image; functions are looked up by name.
class Module {
 public:
  Module(Context& c, const std::string& image);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  void* function(const std::string& name) const;  // throws Error when absent

 private:
  void* module_ = nullptr;
};

}  // namespace luminal::cuda
