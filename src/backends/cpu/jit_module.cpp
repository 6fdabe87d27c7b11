#include "backends/cpu/jit_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/cache_paths.h"

namespace luminal::cpu {

namespace {

// Kernels must round exactly like the reference: no contraction into FMAs; math functions
// never set errno, so sqrt inlines. -march=native is safe because the cache key holds the CPU.
// The generated source is valid C and C++ and is compiled as C: the C front end starts about
// four times faster (0.08 s against 0.33 s for a small module here), which a search that
// compiles kernels for every generation feels.
const char* kFlags = "-x c -std=gnu11 -O3 -march=native -fPIC -shared -ffp-contract=off -fno-math-errno";

bool on_path(const std::string& exe) {
  if (exe.find('/') != std::string::npos) return access(exe.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
  return false;
}

// What decides the machine code besides the source: the compiler's version and this CPU's
// model and feature flags (for -march=native).
std::string read_machine_identity(const std::string& cxx) {
  std::string id = cxx + " " + kFlags + "\n";
  if (FILE* p = popen((cxx + " --version 2>/dev/null").c_str(), "r")) {
    std::array<char, 256> line{};
    if (fgets(line.data(), line.size(), p)) id += line.data();
    pclose(p);
  }
  std::ifstream cpu("/proc/cpuinfo");
  std::string l;
  int wanted = 2;
  while (wanted > 0 && std::getline(cpu, l))
    if (l.rfind("model name", 0) == 0 || l.rfind("flags", 0) == 0) {
      id += l + "\n";
      --wanted;
    }
  return id;
}

// Asked once per compiler: a search loads modules for many candidates.
std::string machine_identity(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(cxx);
  if (it == known.end()) it = known.emplace(cxx, read_machine_identity(cxx)).first;
  return it->second;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string JitModule::compiler() {
  if (const char* c = std::getenv("LUMINAL_CXX")) return on_path(c) ? c : "";
  for (const char* c : {"c++", "g++"})
    if (on_path(c)) return c;
  return "";
}

JitModule::~JitModule() {
  if (handle_) dlclose(handle_);
}

std::unique_ptr<JitModule> JitModule::load(const std::string& source, const std::string& cache_dir, std::string* why_not) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<JitModule> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  std::string cxx = compiler();
  std::string dir = cache_dir + "/kernels";
  std::string key = hash_key(source + "\n" + machine_identity(cxx.empty() ? "none" : cxx));
  std::string so = dir + "/" + key + ".so";
  std::unique_ptr<JitModule> m(new JitModule());
  m->path_ = so;
  std::error_code ec;
  if (std::filesystem::exists(so, ec)) {
    m->from_cache_ = true;
  } else {
    if (cxx.empty())
      return fail(std::getenv("LUMINAL_CXX") ? "LUMINAL_CXX='" + std::string(std::getenv("LUMINAL_CXX")) + "' is not an executable"
                                             : "no C++ compiler (c++ or g++) on PATH; set LUMINAL_CXX to one");
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail("cannot create kernel cache folder '" + dir + "': " + ec.message());
    // Unique temporary names, then a rename: concurrent processes never load a half-written file.
    std::string tmp = dir + "/" + key + ".tmp" + std::to_string(getpid());
    {
      std::ofstream out(tmp + ".c");
      out << source;
      if (!out) return fail("cannot write '" + tmp + ".c'");
    }
    auto t0 = std::chrono::steady_clock::now();
    std::string cmd = cxx + " " + kFlags + " -o '" + tmp + ".so' '" + tmp + ".c' 2> '" + tmp + ".log'";
    int rc = std::system(cmd.c_str());
    m->compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rc != 0) {
      std::string log = read_file(tmp + ".log");
      std::filesystem::remove(tmp + ".so", ec);
      return fail("'" + cxx + "' failed to compile generated kernels (source kept at " + tmp + ".c): " + log.substr(0, 2000));
    }
    std::filesystem::remove(tmp + ".c", ec);
    std::filesystem::remove(tmp + ".log", ec);
    std::filesystem::rename(tmp + ".so", so, ec);
    if (ec) return fail("cannot move '" + tmp + ".so' to '" + so + "': " + ec.message());
  }
  m->handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!m->handle_) {
    const char* e = dlerror();
    // A corrupt cache entry is replaced next time rather than failing every run.
    if (m->from_cache_) std::filesystem::remove(so, ec);
    return fail("cannot load '" + so + "': " + (e ? e : "dlopen failed"));
  }
  return m;
}

void* JitModule::symbol(const std::string& name) const { return handle_ ? dlsym(handle_, name.c_str()) : nullptr; }

}  // namespace luminal::cpu
