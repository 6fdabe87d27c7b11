#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace luminal::cpu {

int ThreadPool::default_threads() {
  if (const char* env = std::getenv("LUMINAL_THREADS")) {
    int n = std::atoi(env);
    if (n < 1) throw Error("LUMINAL_THREADS must be a positive integer, got '" + std::string(env) + "'");
    return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool::ThreadPool(int threads) {
  int n = threads > 0 ? threads : default_threads();
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  while (true) {
    std::pair<int64_t, int64_t> chunk;
    const std::function<void(int64_t, int64_t)>* job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      chunk = static_cast<size_t>(index) < chunks_.size() ? chunks_[index] : std::make_pair<int64_t, int64_t>(0, 0);
    }
    std::exception_ptr err;
    if (chunk.first < chunk.second) {
      try {
        (*job)(chunk.first, chunk.second);
      } catch (...) {
        err = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (err && !error_) error_ = err;
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int64_t parts = std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  std::vector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t p = 0; p < size(); ++p) {
    int64_t b = p < parts ? n * p / parts : n, e = p < parts ? n * (p + 1) / parts : n;
    chunks.push_back({b, e});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    chunks_ = chunks;
    error_ = nullptr;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  std::exception_ptr mine;
  try {
    fn(chunks[0].first, chunks[0].second);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace luminal::cpu
