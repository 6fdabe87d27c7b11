// The weight arena: adopted buffers hold the same values, stay valid after the arena handle is
// dropped, and a full arena says so instead of writing past its end.
#include "runtime/huge_page_arena.h"

#include <gtest/gtest.h>

#include <utility>

#include "core/error.h"

namespace luminal {
namespace {

TEST(HugePageArena, AdoptedBuffersKeepTheirValuesAndTheArenaAlive) {
  Buffer a = Buffer::f32({1.5f, -2.0f, 3.25f}, {3});
  Buffer b(DType::BF16, {2, 2});
  for (size_t i = 0; i < 4; ++i) b.set(i, static_cast<double>(i) - 1.5);
  Buffer ca, cb;
  {
    std::shared_ptr<HugePageArena> arena = HugePageArena::create(a.nbytes() + b.nbytes() + 128);
    ca = arena->adopt(a);
    cb = arena->adopt(b);
    EXPECT_GE(arena->used(), a.nbytes() + b.nbytes());
  }  // the buffers own the arena now
  EXPECT_TRUE(ca.borrowed());
  EXPECT_EQ(ca.shape(), a.shape());
  EXPECT_EQ(cb.dtype(), DType::BF16);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(ca.get(i), a.get(i));
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(cb.get(i), b.get(i));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(std::as_const(cb).bytes()) % 64, 0u);  // aligned for vector loads
}

TEST(HugePageArena, AFullArenaIsAClearError) {
  std::shared_ptr<HugePageArena> arena = HugePageArena::create(16);
  Buffer bigger(DType::F32, {int64_t(3) << 20});
  try {
    arena->adopt(bigger);
    FAIL() << "a 12 MB buffer fit into an arena made for 16 bytes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight arena full"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace luminal
