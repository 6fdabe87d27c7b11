#include "backends/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
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

namespace {

// Spins until done() or about `us` microseconds pass; true if done() held.
template <class Done>
bool spin_until(Done done, int us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

constexpr int kSpinMicros = 200;

}  // namespace

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
    auto ready = [&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(ready, kSpinMicros)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, ready);
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    run_job(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to sleep on done_
      done_.notify_one();
    }
  }
}

// Runs this thread's share of the current job, recording the first exception.
void ThreadPool::run_job(int index) {
  try {
    if (dynamic_chunk_ > 0) {
      for (int64_t c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) * dynamic_chunk_ < dynamic_n_;)
        (*job_)(c * dynamic_chunk_, std::min(dynamic_n_, (c + 1) * dynamic_chunk_));
    } else if (static_cast<size_t>(index) < chunks_.size() && chunks_[static_cast<size_t>(index)].first < chunks_[static_cast<size_t>(index)].second) {
      (*job_)(chunks_[static_cast<size_t>(index)].first, chunks_[static_cast<size_t>(index)].second);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

// Publishes the job set up in chunks_ / dynamic_*, runs the caller's share, waits for the rest.
void ThreadPool::dispatch(const std::function<void(int64_t, int64_t)>& fn) {
  job_ = &fn;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  run_job(0);
  auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done, kSpinMicros)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, all_done);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int64_t parts = std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  chunks_.clear();
  for (int64_t p = 0; p < size(); ++p) {
    int64_t b = p < parts ? n * p / parts : n, e = p < parts ? n * (p + 1) / parts : n;
    chunks_.push_back({b, e});
  }
  dynamic_chunk_ = 0;
  dispatch(fn);
}

void ThreadPool::parallel_for_dynamic(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t chunk) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(1, chunk);
  if (n <= chunk || workers_.empty()) {
    fn(0, n);
    return;
  }
  dynamic_n_ = n;
  dynamic_chunk_ = chunk;
  next_chunk_.store(0, std::memory_order_relaxed);
  dispatch(fn);
}

}  // namespace luminal::cpu
