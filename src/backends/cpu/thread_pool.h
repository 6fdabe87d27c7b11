#pragma once
// A fixed pool of worker threads for the CPU kernels. parallel_for splits a range into one
// contiguous chunk per thread (the caller runs the first), so a kernel's threads touch disjoint
// rows and never share a cache line of output. Idle workers spin briefly before sleeping: a
// decode step runs hundreds of small kernels back to back, and waking a sleeping thread costs
// more than most of them take.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace luminal::cpu {

class ThreadPool {
 public:
  // threads <= 0: $LUMINAL_THREADS if set, else the machine's hardware threads.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long (except
  // the last), and returns when all are done. Exceptions from fn are rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // Like parallel_for, but [0, n) is cut into chunks of `chunk` that threads take one at a time
  // from a shared counter, so fn(begin, end) runs several times per thread. For memory-bound
  // streams on a shared machine: a thread slowed by other work takes fewer chunks instead of
  // holding everyone at the barrier.
  void parallel_for_dynamic(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t chunk);

  static int default_threads();

 private:
  void worker(int index);
  void run_job(int index);
  void dispatch(const std::function<void(int64_t, int64_t)>& fn);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> chunks_;  // static split: one range per thread
  int64_t dynamic_n_ = 0, dynamic_chunk_ = 0;        // dynamic split: chunk size > 0
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<uint64_t> generation_{0};  // bumped (under mu_) when a job is published
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;             // under mu_
};

}  // namespace luminal::cpu
