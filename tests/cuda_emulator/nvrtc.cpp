// NVRTC's API (nvrtc.cpp in the backend loads it) for the emulator: the program's CUDA C++ is
// compiled by g++ as host C++ with kernel_compat.h into a shared object, and the "CUBIN" is that
// object's bytes and path, for the emulated driver's cuModuleLoadData. Two rewrites make kernel code host
// code: `extern __shared__ T name[];` becomes a pointer to the block's dynamic shared memory,
// and each kernel gets entry points that pack its arguments (cuLaunchKernel's void**) and run
// it. Objects are cached by the text's hash ($LUMINAL_EMULATOR_CACHE, else $TMPDIR).
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#ifndef LM_EMU_SOURCE_DIR
#error "LM_EMU_SOURCE_DIR: the folder of kernel_compat.h"
#endif

namespace {

using nvrtcResult = int;
constexpr nvrtcResult kSuccess = 0, kInvalidInput = 3, kInvalidProgram = 4, kCompilation = 6;

struct Program {
  std::string source, log, image;
};

unsigned long long fnv1a(const std::string& s) {
  unsigned long long h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::string cache_dir() {
  const char* e = std::getenv("LUMINAL_EMULATOR_CACHE");
  const char* t = std::getenv("TMPDIR");
  std::string d = e ? e : std::string(t ? t : "/tmp") + "/luminal-cuda-emulator";
  mkdir(d.c_str(), 0755);
  return d;
}

// This library's own path: kernel modules link against it for the runtime calls.
std::string self_path() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&fnv1a), &info);
  return info.dli_fname ? info.dli_fname : "";
}

std::string host_source(const std::string& cuda) {
  static const std::regex dynamic_smem(R"(extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_][\w ]*?)\s+(\w+)\s*\[\s*\]\s*;)");
  std::string s = std::regex_replace(cuda, dynamic_smem, "$1* $2 = ($1*)lm_emu_dynamic_smem;");
  static const std::regex kernel(R"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\()");
  std::ostringstream entries;
  entries << "\n// The emulated driver's entry points (kernel_compat.h's lm_emu::pack, run, release).\n";
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kernel); it != std::sregex_iterator(); ++it) {
    const std::string n = (*it)[1];
    entries << "extern \"C\" void* lm_emu_pack_" << n << "(void** a) { return lm_emu::pack(&" << n << ", a); }\n"
            << "extern \"C\" void lm_emu_run_" << n << "(void* p) { lm_emu::run(&" << n << ", p); }\n"
            << "extern \"C\" void lm_emu_release_" << n << "(void* p) { lm_emu::release(&" << n << ", p); }\n";
  }
  return s + entries.str();
}

}  // namespace

extern "C" {

// Not a real NVRTC's version: the backend's cubin cache keys on it, and an emulator image must
// never be handed to a GPU's driver (or a cubin to the emulator's).
nvrtcResult nvrtcVersion(int* major, int* minor) {
  *major = 0, *minor = 1;
  return kSuccess;
}
const char* nvrtcGetErrorString(nvrtcResult r) { return r == kSuccess ? "NVRTC_SUCCESS" : r == kCompilation ? "NVRTC_ERROR_COMPILATION" : "NVRTC_ERROR"; }
nvrtcResult nvrtcCreateProgram(Program** p, const char* src, const char*, int, const char* const*, const char* const*) {
  if (!p || !src) return kInvalidInput;
  *p = new Program();
  (*p)->source = src;
  return kSuccess;
}
nvrtcResult nvrtcDestroyProgram(Program** p) {
  if (!p) return kInvalidProgram;
  delete *p;
  *p = nullptr;
  return kSuccess;
}
nvrtcResult nvrtcCompileProgram(Program* p, int, const char* const*) {
  if (!p) return kInvalidProgram;
  const std::string text = host_source(p->source);
  // The key covers the headers too: an object built against an older kernel_compat.h is stale.
  static const std::string headers = [] {
    std::stringstream h;
    for (const char* f : {LM_EMU_SOURCE_DIR "/kernel_compat.h", LM_EMU_SOURCE_DIR "/emulator.h"}) h << std::ifstream(f).rdbuf();
    return h.str();
  }();
  // -O1 and no strict aliasing: kernels reinterpret pointers freely; -march=native for fmaf. No
  // contraction of a * b + c into fma, as the backend's NVRTC runs with --fmad=false (g++'s
  // default contracts).
  static const std::string flags = " -std=c++17 -O1 -fno-strict-aliasing -ffp-contract=off -march=native -fPIC -shared -w";
  // The key covers the flags as well as the headers and the text.
  const std::string dir = cache_dir(), base = dir + "/" + std::to_string(fnv1a(flags + headers + text));
  const std::string so = base + ".so";
  if (access(so.c_str(), R_OK) != 0) {
    // Unique to this call: the executor compiles modules on several threads, and two may be alike.
    static std::atomic<unsigned> calls{0};
    const std::string cpp = base + "." + std::to_string(getpid()) + "." + std::to_string(calls++) + ".cpp", tmp = cpp + ".so", log = cpp + ".log";
    std::ofstream(cpp) << text;
    const char* cxx = std::getenv("CXX");
    const std::string cmd = std::string(cxx ? cxx : "g++") + flags + " -x c++ -include " +
                            LM_EMU_SOURCE_DIR "/kernel_compat.h -I" LM_EMU_SOURCE_DIR " " + cpp + " -x none " + self_path() + " -o " + tmp +
                            " > " + log + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    p->log = ss.str();
    std::remove(log.c_str());
    if (rc != 0) {
      p->log = "the CUDA emulator's g++ failed (source kept at " + cpp + "):\n" + p->log;
      return kCompilation;
    }
    if (!std::getenv("LUMINAL_EMULATOR_KEEP")) std::remove(cpp.c_str());  // kept: to read what was compiled
    std::rename(tmp.c_str(), so.c_str());  // atomic: a concurrent compile of the same text is harmless
  }
  // The image carries the object itself, so that the backend's cubin cache stays good after
  // the emulator's cache is cleared: "LMEMU2 <bytes> <path>\n" and the bytes.
  std::ifstream obj(so, std::ios::binary);
  std::stringstream bytes;
  bytes << obj.rdbuf();
  const std::string b = bytes.str();
  p->image = "LMEMU2 " + std::to_string(b.size()) + " " + so + "\n" + b;
  return kSuccess;
}
nvrtcResult nvrtcGetProgramLogSize(Program* p, size_t* n) { return *n = p->log.size() + 1, kSuccess; }
nvrtcResult nvrtcGetProgramLog(Program* p, char* out) {
  std::memcpy(out, p->log.c_str(), p->log.size() + 1);
  return kSuccess;
}
nvrtcResult nvrtcGetCUBINSize(Program* p, size_t* n) { return *n = p->image.size(), kSuccess; }
nvrtcResult nvrtcGetCUBIN(Program* p, char* out) {
  std::memcpy(out, p->image.data(), p->image.size());
  return kSuccess;
}

}  // extern "C"
