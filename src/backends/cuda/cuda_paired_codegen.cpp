// Two generated functions as one launch (see paired_function).
#include <algorithm>
#include <cctype>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "core/cache_paths.h"

namespace luminal::cuda {

namespace {

// A generated function's parts: extern "C" __global__ void __launch_bounds__(B) NAME(P) {BODY}.
struct FunctionParts {
  int max_threads = kBlockThreads;
  std::vector<std::string> param_types, param_names;
  std::string body;  // from its opening brace to its closing one, inclusive
};

std::optional<FunctionParts> parts_of(const std::string& text) {
  FunctionParts f;
  const std::string bounds = "__launch_bounds__(";
  const size_t b = text.find(bounds);
  if (text.rfind("extern \"C\" __global__ void ", 0) != 0 || b == std::string::npos) return std::nullopt;
  f.max_threads = std::atoi(text.c_str() + b + bounds.size());
  const size_t open = text.find('(', text.find(')', b) + 1), close = text.find(')', open);
  if (open == std::string::npos || close == std::string::npos || f.max_threads <= 0) return std::nullopt;
  std::stringstream params(text.substr(open + 1, close - open - 1));
  for (std::string p; std::getline(params, p, ',');) {
    const size_t end = p.find_last_not_of(" \n"), start = p.find_last_of(" *", end) + 1;
    if (end == std::string::npos || start > end) return std::nullopt;
    f.param_names.push_back(p.substr(start, end - start + 1));
    f.param_types.push_back(p.substr(0, start));
  }
  const size_t body = text.find('{', close), last = text.rfind('}');
  if (body == std::string::npos || last == std::string::npos || last < body) return std::nullopt;
  f.body = text.substr(body, last - body + 1);
  return f;
}

// The function as a device function of the given name whose blockIdx and gridDim are the
// caller's (its part of the paired grid).
std::string as_device_function(const FunctionParts& f, const std::string& name) {
  std::ostringstream s;
  s << "__device__ __forceinline__ void " << name << "(const uint3 lm_vbi, const dim3 lm_vgd";
  for (size_t i = 0; i < f.param_names.size(); ++i) s << ", " << f.param_types[i] << f.param_names[i];
  s << ") " << f.body << "\n";
  return s.str();
}

}  // namespace

std::optional<PairedFunction> paired_function(const std::string& first, const std::string& second) {
  const std::optional<FunctionParts> a = parts_of(first), b = parts_of(second);
  if (!a || !b) return std::nullopt;
  const std::string tag = hash_key(first + second);
  const std::string fa = "lm_pa_" + tag, fb = "lm_pb_" + tag;
  PairedFunction p;
  p.name = "lm_Pair_" + tag;
  std::ostringstream s;
  // Inside the two bodies, blockIdx and gridDim are their own part of the grid.
  s << "#define blockIdx lm_vbi\n#define gridDim lm_vgd\n" << as_device_function(*a, fa) << as_device_function(*b, fb)
    << "#undef blockIdx\n#undef gridDim\n"
    << "extern \"C\" __global__ void __launch_bounds__(" << std::max(a->max_threads, b->max_threads) << ") " << p.name << "(";
  auto params = [&](const FunctionParts& f, const char* prefix) {
    for (size_t i = 0; i < f.param_names.size(); ++i) s << f.param_types[i] << prefix << i << ", ";
  };
  auto args = [&](const FunctionParts& f, const char* prefix) {
    for (size_t i = 0; i < f.param_names.size(); ++i) s << ", " << prefix << i;
  };
  params(*a, "lm_a");
  params(*b, "lm_b");
  s << "const unsigned lm_split) {\n"
    << "  if (blockIdx.x < lm_split) " << fa << "(make_uint3(blockIdx.x, 0, 0), dim3(lm_split, 1, 1)";
  args(*a, "lm_a");
  s << ");\n  else " << fb << "(make_uint3(blockIdx.x - lm_split, 0, 0), dim3(gridDim.x - lm_split, 1, 1)";
  args(*b, "lm_b");
  s << ");\n}\n\n";
  p.text = s.str();
  return p;
}

}  // namespace luminal::cuda
