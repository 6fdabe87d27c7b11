#include "backends/cuda/nvrtc.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/cache_paths.h"
#include "core/error.h"

namespace luminal::cuda {

namespace {

// NVRTC's C ABI (nvrtcResult is an int enum, nvrtcProgram a pointer): no header needed to build.
using Result = int;
using Program = void*;

struct Api {
  Result (*nvrtcVersion)(int*, int*);
  const char* (*nvrtcGetErrorString)(Result);
  Result (*nvrtcCreateProgram)(Program*, const char*, const char*, int, const char* const*, const char* const*);
  Result (*nvrtcCompileProgram)(Program, int, const char* const*);
  Result (*nvrtcGetProgramLogSize)(Program, size_t*);
  Result (*nvrtcGetProgramLog)(Program, char*);
  Result (*nvrtcGetCUBINSize)(Program, size_t*);
  Result (*nvrtcGetCUBIN)(Program, char*);
  Result (*nvrtcDestroyProgram)(Program*);
};

struct Loaded {
  Api api{};
  std::string error;
  int major = 0, minor = 0;
};

const Loaded& loaded() {
  static Loaded l = [] {
    Loaded r;
    std::vector<std::string> names;
    if (const char* env = std::getenv("LUMINAL_NVRTC")) names.push_back(env);
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"}) names.push_back(n);
    void* lib = nullptr;
    for (const std::string& n : names)
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      r.error = "NVRTC (libnvrtc.so) was not found: install the CUDA toolkit (its lib folder on the loader path), or set "
                "LUMINAL_NVRTC to the library's path";
      return r;
    }
    auto bind = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      if (!f && r.error.empty()) r.error = std::string("NVRTC lacks ") + name + ": install a newer CUDA toolkit";
    };
    Api& a = r.api;
    bind(a.nvrtcVersion, "nvrtcVersion"), bind(a.nvrtcGetErrorString, "nvrtcGetErrorString");
    bind(a.nvrtcCreateProgram, "nvrtcCreateProgram"), bind(a.nvrtcCompileProgram, "nvrtcCompileProgram");
    bind(a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"), bind(a.nvrtcGetProgramLog, "nvrtcGetProgramLog");
    bind(a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize"), bind(a.nvrtcGetCUBIN, "nvrtcGetCUBIN");
    bind(a.nvrtcDestroyProgram, "nvrtcDestroyProgram");
    if (r.error.empty()) a.nvrtcVersion(&r.major, &r.minor);
    return r;
  }();
  return l;
}

void check(Result r, const char* what) {
  if (r != 0) throw Error(std::string("NVRTC: ") + what + " failed: " + loaded().api.nvrtcGetErrorString(r));
}

std::string first_lines(const std::string& s, int n) {
  std::istringstream in(s);
  std::string line, out;
  for (int i = 1; i <= n && std::getline(in, line); ++i) out += std::to_string(i) + ": " + line + "\n";
  return out;
}

}  // namespace

std::string nvrtc_unavailable_reason() { return loaded().error; }

std::string nvrtc_version() { return std::to_string(loaded().major) + "." + std::to_string(loaded().minor); }

CompiledKernels nvrtc_compile(const std::string& source, const std::string& arch, const std::string& cache_dir) {
  if (!nvrtc_unavailable_reason().empty()) throw Error("cannot compile CUDA kernels: " + nvrtc_unavailable_reason());
  CompiledKernels out;
  std::filesystem::path file;
  if (!cache_dir.empty()) {
    file = std::filesystem::path(cache_dir) / "cuda" / (hash_key(source + "\n" + arch + "\nnvrtc " + nvrtc_version()) + ".cubin");
    std::ifstream in(file, std::ios::binary);
    if (in) {
      std::ostringstream s;
      s << in.rdbuf();
      out.cubin = s.str();
      if (!out.cubin.empty()) {
        out.from_cache = true;
        return out;
      }
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  const Api& a = loaded().api;
  Program prog = nullptr;
  check(a.nvrtcCreateProgram(&prog, source.c_str(), "luminal_kernels.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "--fmad=false", "--std=c++17", "-default-device", "--extra-device-vectorization"};
  Result r = a.nvrtcCompileProgram(prog, static_cast<int>(sizeof opts / sizeof opts[0]), opts);
  if (r != 0) {
    size_t n = 0;
    a.nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    a.nvrtcGetProgramLog(prog, log.data());
    a.nvrtcDestroyProgram(&prog);
    throw Error("NVRTC could not compile generated CUDA kernels for " + arch + " (a luminal bug; please report it):\n" +
                log.substr(0, 4000) + "\nsource begins:\n" + first_lines(source, 40));
  }
  size_t n = 0;
  check(a.nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
  out.cubin.resize(n);
  check(a.nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");
  a.nvrtcDestroyProgram(&prog);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!file.empty()) {  // best effort: a read-only cache only costs compile time
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    std::filesystem::path tmp = file;
    tmp += ".tmp" + std::to_string(::getpid());
    {
      std::ofstream o(tmp, std::ios::binary);
      o.write(out.cubin.data(), static_cast<std::streamsize>(out.cubin.size()));
    }
    std::filesystem::rename(tmp, file, ec);
  }
  return out;
}

}  // namespace luminal::cuda
