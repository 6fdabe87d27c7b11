#pragma once
// Dropping a memory-mapped file's pages from this process once their bytes live elsewhere (a
// copy in huge pages, a weight packed at load): peak memory then never holds a weight twice.
// Only whole pages inside [p, p + n) go; touching them again reads the file back, so a late
// reader of the original still sees the right bytes. Only for memory mapped from a file: on
// anonymous (heap) memory MADV_DONTNEED zeroes the pages.
#include <cstddef>

namespace luminal {

void drop_mapped_pages(const void* p, size_t n);

}  // namespace luminal
