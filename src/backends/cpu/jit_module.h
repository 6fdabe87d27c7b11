#pragma once
// Generated C++ compiled at run time into a shared library with the system compiler, cached on
// disk by a hash of the source, the compiler and this CPU, then loaded with dlopen. A second
// load of the same kernels costs a dlopen, not a compile; a machine without a compiler still
// loads what an earlier run left in the cache.
#include <memory>
#include <string>

namespace luminal::cpu {

class JitModule {
 public:
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;

  // Compiles `source` (or finds it in `cache_dir`) and loads it. Returns nullptr and sets
  // `why_not` when there is no compiler or it fails; the caller then runs without these kernels.
  static std::unique_ptr<JitModule> load(const std::string& source, const std::string& cache_dir, std::string* why_not);

  void* symbol(const std::string& name) const;  // nullptr if absent
  const std::string& path() const { return path_; }
  bool from_cache() const { return from_cache_; }
  double compile_ms() const { return compile_ms_; }

  // The compiler command: $LUMINAL_CXX, else c++ or g++ found on PATH; empty if none.
  static std::string compiler();

 private:
  JitModule() = default;
  void* handle_ = nullptr;
  std::string path_;
  bool from_cache_ = false;
  double compile_ms_ = 0;
};

}  // namespace luminal::cpu
