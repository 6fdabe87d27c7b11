#include "backends/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "core/error.h"

namespace luminal::cpu {
namespace {

TEST(ThreadPool, ChunksCoverTheRangeExactlyOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int64_t n : {1, 2, 3, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    for (int rep = 0; rep < 20; ++rep)
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 20) << n << " " << i;
  }
}

TEST(ThreadPool, GrainLimitsTheNumberOfChunks) {
  ThreadPool pool(4);
  std::atomic<int> calls{0};
  pool.parallel_for(10, [&](int64_t, int64_t) { calls++; }, 8);  // 10 / 8 -> one chunk
  EXPECT_EQ(calls.load(), 1);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(100, [](int64_t b, int64_t) {
    if (b > 0) throw std::runtime_error("worker failed");
  }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

TEST(ThreadPool, DynamicChunksCoverTheRangeExactlyOnceInChunkSizedPieces) {
  ThreadPool pool(3);
  for (int64_t n : {1, 5, 32, 33, 1000})
    for (int64_t chunk : {1, 4, 32, 2000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad{0};
      for (int rep = 0; rep < 10; ++rep)
        pool.parallel_for_dynamic(n, [&](int64_t b, int64_t e) {
          if (b % chunk != 0 || (e - b != chunk && e != n)) bad++;  // whole chunks, the last may be short
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        }, chunk);
      EXPECT_EQ(bad.load(), 0) << n << " " << chunk;
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 10) << n << " " << chunk << " " << i;
    }
  // Interleaved with static jobs, and exceptions still reach the caller.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_THROW(pool.parallel_for_dynamic(100, [](int64_t b, int64_t) {
    if (b == 40) throw std::runtime_error("chunk failed");
  }, 10),
               std::runtime_error);
  pool.parallel_for_dynamic(100, [&](int64_t b, int64_t e) { sum += e - b; }, 7);
  EXPECT_EQ(sum.load(), 200);
}

TEST(ThreadPool, BadEnvironmentValueIsAnError) {
  setenv("LUMINAL_THREADS", "zero", 1);
  EXPECT_THROW(ThreadPool::default_threads(), Error);
  setenv("LUMINAL_THREADS", "3", 1);
  EXPECT_EQ(ThreadPool::default_threads(), 3);
  unsetenv("LUMINAL_THREADS");
}

}  // namespace
}  // namespace luminal::cpu
