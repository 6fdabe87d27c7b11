#include "backends/cuda/cupti_capture.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace luminal::cuda {

namespace {

// CUPTI's activity API, as cupti_activity.h declares it (all results are int CUptiResult).
struct CuptiApi {
  using RequestFn = void (*)(uint8_t**, size_t*, size_t*);
  using CompleteFn = void (*)(void*, uint32_t, uint8_t*, size_t, size_t);
  int (*register_callbacks)(RequestFn, CompleteFn) = nullptr;
  int (*enable)(int) = nullptr;
  int (*disable)(int) = nullptr;
  int (*next_record)(uint8_t*, size_t, void**) = nullptr;
  int (*flush_all)(uint32_t) = nullptr;
  int (*timestamp)(uint64_t*) = nullptr;
  int (*result_string)(int, const char**) = nullptr;
};

constexpr int kConcurrentKernel = 10;  // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
constexpr int kMaxLimitReached = 12;   // CUPTI_ERROR_MAX_LIMIT_REACHED: no more records in a buffer
constexpr uint32_t kFlushForced = 1;   // CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
constexpr size_t kBufferBytes = 8 << 20;

// A kernel record's fields this reads, at their offsets in CUpti_ActivityKernel4 through 9 (the
// records are packed with 8-byte alignment; later versions only append fields).
constexpr size_t kStartAt = 16, kEndAt = 24, kStreamAt = 48, kGridAt = 52, kBlockAt = 64, kNameAt = 104;

std::mutex g_mutex;
std::vector<KernelRecord>* g_records = nullptr;  // where completed buffers go while capturing

template <class T>
T field(const uint8_t* rec, size_t at) {
  T v;
  std::memcpy(&v, rec + at, sizeof v);
  return v;
}

void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

const CuptiApi& api();

void buffer_completed(void*, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  void* rec = nullptr;
  while (g_records && api().next_record(buffer, valid, &rec) == 0) {
    const uint8_t* r = static_cast<const uint8_t*>(rec);
    if (field<uint32_t>(r, 0) != kConcurrentKernel) continue;
    KernelRecord k;
    const char* name = field<const char*>(r, kNameAt);
    k.name = name ? name : "?";
    k.start_ns = field<uint64_t>(r, kStartAt);
    k.end_ns = field<uint64_t>(r, kEndAt);
    k.stream = field<uint32_t>(r, kStreamAt);
    k.blocks = field<int32_t>(r, kGridAt) * field<int32_t>(r, kGridAt + 4) * field<int32_t>(r, kGridAt + 8);
    k.threads = field<int32_t>(r, kBlockAt) * field<int32_t>(r, kBlockAt + 4) * field<int32_t>(r, kBlockAt + 8);
    g_records->push_back(std::move(k));
  }
  std::free(buffer);
}

std::string g_tried;  // the library files tried, for the error

const CuptiApi& api() {
  static const CuptiApi a = [] {
    CuptiApi r;
    std::vector<std::string> names;
    if (const char* p = std::getenv("LUMINAL_CUPTI")) names.push_back(p);
    for (const char* n : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) names.push_back(n);
    const char* home = std::getenv("CUDA_HOME");
    for (const std::string& root : {std::string(home ? home : "/usr/local/cuda"), std::string("/usr/local/cuda")})
      for (const char* sub : {"/extras/CUPTI/lib64/libcupti.so", "/lib64/libcupti.so.13", "/lib/libcupti.so.13", "/extras/CUPTI/lib64/libcupti.so.13"})
        names.push_back(root + sub);
    void* lib = nullptr;
    for (const std::string& n : names) {
      g_tried += (g_tried.empty() ? "" : ", ") + n;
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    }
    if (!lib) return r;
    auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name)); };
    sym(r.register_callbacks, "cuptiActivityRegisterCallbacks");
    sym(r.enable, "cuptiActivityEnable");
    sym(r.disable, "cuptiActivityDisable");
    sym(r.next_record, "cuptiActivityGetNextRecord");
    sym(r.flush_all, "cuptiActivityFlushAll");
    sym(r.timestamp, "cuptiGetTimestamp");
    sym(r.result_string, "cuptiGetResultString");
    return r;
  }();
  return a;
}

void check(int result, const char* what) {
  if (result == 0) return;
  const char* s = nullptr;
  if (api().result_string) api().result_string(result, &s);
  throw Error(std::string("CUPTI: ") + what + " failed: " + (s ? s : std::to_string(result)));
}

}  // namespace

std::unique_ptr<CuptiCapture> CuptiCapture::start() {
  const CuptiApi& a = api();
  if (!a.register_callbacks || !a.enable || !a.disable || !a.next_record || !a.flush_all || !a.timestamp)
    throw Error("the kernel timeline needs CUPTI (libcupti), which was not found; tried " + g_tried +
                ". Set LUMINAL_CUPTI to the library's path (it ships with the CUDA toolkit and with PyTorch's "
                "nvidia-cuda-cupti package)");
  std::unique_ptr<CuptiCapture> c(new CuptiCapture());
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_records) throw Error("only one kernel timeline can record at a time");
    g_records = new std::vector<KernelRecord>();
  }
  check(a.register_callbacks(&buffer_requested, &buffer_completed), "cuptiActivityRegisterCallbacks");
  check(a.enable(kConcurrentKernel), "cuptiActivityEnable(CONCURRENT_KERNEL)");
  c->running_ = true;
  return c;
}

uint64_t CuptiCapture::now_ns() const {
  uint64_t t = 0;
  check(api().timestamp(&t), "cuptiGetTimestamp");
  return t;
}

std::vector<KernelRecord> CuptiCapture::stop() {
  if (!running_) return {};
  running_ = false;
  check(api().flush_all(kFlushForced), "cuptiActivityFlushAll");
  check(api().disable(kConcurrentKernel), "cuptiActivityDisable");
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<KernelRecord> out = std::move(*g_records);
  delete g_records;
  g_records = nullptr;
  return out;
}

CuptiCapture::~CuptiCapture() {
  try {
    stop();
  } catch (...) {
  }
}

}  // namespace luminal::cuda
