// Buffer storage: zero-filled whether fresh or reused, and a large fresh buffer is not written
// to when made, so its pages stay unmapped until used (a 4096-token KV cache of which a short
// prompt touches a few pages).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "runtime/buffer.h"

using namespace luminal;

TEST(BufferStorage, FreshAndReusedStorageAreZero) {
  Buffer dirty(DType::F32, {1000});
  std::memset(dirty.bytes(), 0x7f, dirty.nbytes());
  Buffer reused(DType::F32, {500}, dirty.release());
  for (size_t i = 0; i < reused.numel(); ++i) ASSERT_EQ(reused.get(i), 0.0) << i;
  Buffer fresh(DType::I32, {3, 7});
  for (size_t i = 0; i < fresh.numel(); ++i) ASSERT_EQ(fresh.get(i), 0.0) << i;
}

TEST(BufferStorage, ALargeFreshBufferIsNotTouched) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  Buffer big(DType::F32, {64 << 20});  // 256 MB
  uintptr_t start = (reinterpret_cast<uintptr_t>(big.bytes()) + page - 1) / page * page;
  size_t pages = (big.nbytes() - (start - reinterpret_cast<uintptr_t>(big.bytes()))) / page;
  std::vector<unsigned char> resident(pages);
  ASSERT_EQ(mincore(reinterpret_cast<void*>(start), pages * page, resident.data()), 0);
  size_t in = 0;
  for (unsigned char r : resident) in += r & 1;
  EXPECT_LT(in, pages / 100) << in << " of " << pages << " pages resident right after the buffer was made";
  EXPECT_EQ(big.get(big.numel() - 1), 0.0);  // and it reads as zero
}
