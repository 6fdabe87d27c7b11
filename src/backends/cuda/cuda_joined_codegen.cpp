// Several generated functions as one launch (see joined_function).
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

std::optional<JoinedFunction> joined_function(const std::vector<std::string>& texts) {
  if (texts.size() < 2) return std::nullopt;
  std::vector<FunctionParts> parts;
  std::string all;
  int max_threads = 0;
  for (const std::string& t : texts) {
    std::optional<FunctionParts> f = parts_of(t);
    if (!f) return std::nullopt;
    max_threads = std::max(max_threads, f->max_threads);
    parts.push_back(std::move(*f));
    all += t;
  }
  const std::string tag = hash_key(all);
  JoinedFunction j;
  j.name = "lm_Joined_" + tag;
  std::ostringstream s;
  // Inside the bodies, blockIdx and gridDim are their own part of the grid.
  s << "#define blockIdx lm_vbi\n#define gridDim lm_vgd\n";
  for (size_t i = 0; i < parts.size(); ++i) s << as_device_function(parts[i], "lm_j" + std::to_string(i) + "_" + tag);
  s << "#undef blockIdx\n#undef gridDim\n"
    << "extern \"C\" __global__ void __launch_bounds__(" << max_threads << ") " << j.name << "(";
  for (size_t i = 0; i < parts.size(); ++i)
    for (size_t p = 0; p < parts[i].param_names.size(); ++p) s << parts[i].param_types[p] << "lm_a" << i << "_" << p << ", ";
  for (size_t i = 0; i + 1 < parts.size(); ++i) s << "const unsigned lm_split" << i << (i + 2 < parts.size() ? ", " : ") {\n");
  // Function i takes blocks [lm_split(i-1), lm_split(i)) (0 and gridDim.x at the ends).
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string lo = i == 0 ? "0u" : "lm_split" + std::to_string(i - 1), hi = i + 1 < parts.size() ? "lm_split" + std::to_string(i) : "gridDim.x";
    s << "  " << (i == 0 ? "" : "else ") << (i + 1 < parts.size() ? "if (blockIdx.x < " + hi + ") " : "") << "lm_j" << i << "_" << tag
      << "(make_uint3(blockIdx.x - " << lo << ", 0, 0), dim3(" << hi << " - " << lo << ", 1, 1)";
    for (size_t p = 0; p < parts[i].param_names.size(); ++p) s << ", lm_a" << i << "_" << p;
    s << ");\n";
  }
  s << "}\n\n";
  j.text = s.str();
  return j;
}

}  // namespace luminal::cuda
