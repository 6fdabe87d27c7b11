#include "runtime/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace luminal {

void drop_mapped_pages(const void* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (start + page - 1) / page * page, hi = (start + n) / page * page;
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace luminal
