#pragma once
// A per-thread buffer of at least n elements, 64-byte aligned, reused across calls: the caller
// keeps `v` static thread_local (the pool's threads live as long as the pool). Grown, never
// shrunk; its contents are whatever the last call left.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace luminal::cpu {

template <class T>
T* scratch(std::vector<T>& v, size_t n) {
  const size_t pad = 64 / sizeof(T);
  if (v.size() < n + pad) v.resize(n + pad);
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));
}

}  // namespace luminal::cpu
