// Blocks as fibers: each CUDA thread of a block runs on its own stack, all of them on one worker
// thread, switching where a GPU thread would wait (a barrier, a warp collective, a spin on memory
// another block writes). A round-robin scheduler resumes them; a round in which no thread moves
// and none spins is a deadlock (a barrier some threads never reach), reported, not hung.
#include "block_runner.h"

#include <sys/mman.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "emulator.h"

namespace luminal::cuda_emulator {
namespace {

struct Block;
struct Fiber {
  void* sp = nullptr;
  Block* block = nullptr;
  unsigned index = 0;
  bool done = false;
};

// A warp's collectives: the lanes' values of the current one (double-buffered by generation, so
// that a lane may enter the next one before a slow lane has read this one's).
struct Warp {
  unsigned live = 0, mask = 0;  // lanes still running; the pending collective's mask
  int arrived = 0;
  unsigned gen = 0;
  unsigned long long vals[2][32];
  unsigned words[2][32][LM_EMU_WORDS], out[2][32][LM_EMU_WORDS];
};

struct Block {
  const Grid* grid = nullptr;
  lm_emu_block info;  // the module's blockIdx, blockDim, gridDim and dynamic shared memory
  unsigned n = 0, live = 0;
  std::vector<Fiber> fibers;
  std::vector<lm_emu_thread> ctx;  // each thread's threadIdx and lane
  std::vector<Warp> warps;
  void* sched_sp = nullptr;
  unsigned bar_arrived = 0, bar_gen = 0;
  int bar_acc = 0, bar_result[2] = {0, 0};
  unsigned long long progress = 0;
  bool spun = false;
};

// initial-exec: read on every thread index and collective (a few bytes of the static TLS block,
// which dlopen'ed libraries may take).
__attribute__((tls_model("initial-exec"))) thread_local Block* t_block = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local Fiber* t_fiber = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local const lm_emu_thread* t_self = nullptr;

}  // namespace
}  // namespace luminal::cuda_emulator

using namespace luminal::cuda_emulator;

// Saves the callee-saved registers on the current stack, stores the stack pointer in *save and
// continues on `load`'s stack (System V x86-64). The FP control words are not switched: kernel
// code never changes them, and saving them cost a third of the switch.
extern "C" __attribute__((visibility("hidden"))) void lm_emu_switch(void** save, void* load);
extern "C" __attribute__((visibility("hidden"))) void lm_emu_fiber_trampoline();
extern "C" __attribute__((visibility("hidden"), noreturn)) void lm_emu_fiber_main(Fiber* f);
asm(R"(
  .text
  .hidden lm_emu_switch
  .globl lm_emu_switch
  .type lm_emu_switch, @function
lm_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size lm_emu_switch, .-lm_emu_switch
  .hidden lm_emu_fiber_trampoline
  .globl lm_emu_fiber_trampoline
  .type lm_emu_fiber_trampoline, @function
lm_emu_fiber_trampoline:
  movq %rbx, %rdi
  call lm_emu_fiber_main
  ud2
  .size lm_emu_fiber_trampoline, .-lm_emu_fiber_trampoline
)");

namespace luminal::cuda_emulator {
namespace {

constexpr size_t kStack = 128 * 1024, kGuard = 4096;
constexpr unsigned kMaxThreads = 1024;

// A worker's memory: fiber stacks (each with a guard page below it) and the dynamic shared memory.
struct WorkerMemory {
  char* stacks = nullptr;
  unsigned char* smem = nullptr;
  WorkerMemory() {
    const size_t bytes = kMaxThreads * (kStack + kGuard);
    void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "luminal CUDA emulator: cannot map fiber stacks\n");
      std::abort();
    }
    stacks = static_cast<char*>(p);
    for (unsigned i = 0; i < kMaxThreads; ++i) mprotect(stacks + i * (kStack + kGuard) + kGuard, kStack, PROT_READ | PROT_WRITE);
    smem = static_cast<unsigned char*>(std::aligned_alloc(128, kMaxDynamicSmem));
  }
  // The initial frame lm_emu_switch pops: r15..r12, rbx (the fiber), rbp, and the trampoline as
  // the return address, placed so that the trampoline's call is 16-aligned (sp + 56 = top - 16).
  void* initial_sp(unsigned i, Fiber* f) const {
    char* top = stacks + i * (kStack + kGuard) + kGuard + kStack;
    auto* sp = reinterpret_cast<unsigned long long*>(top - 72);
    std::memset(sp, 0, 72);
    sp[4] = reinterpret_cast<unsigned long long>(f);  // rbx
    sp[6] = reinterpret_cast<unsigned long long>(&lm_emu_fiber_trampoline);
    return sp;
  }
};

[[noreturn]] void fail(const Block* b, const char* why) {
  std::fprintf(stderr, "luminal CUDA emulator: %s", why);
  if (b) std::fprintf(stderr, " (kernel %s, block (%u, %u, %u)", b->grid->kernel.c_str(), b->info.block_idx.x, b->info.block_idx.y, b->info.block_idx.z);
  if (b && t_fiber) std::fprintf(stderr, ", thread %u", t_fiber->index);
  std::fprintf(stderr, "%s\n", b ? ")" : "");
  std::fflush(stderr);
  std::abort();
}

// Back to the scheduler, which resumes this fiber in its next round.
void wait_here() {
  Fiber* f = t_fiber;
  lm_emu_switch(&f->sp, f->block->sched_sp);
}

void complete_barrier(Block& b) {
  b.bar_result[b.bar_gen & 1] = b.bar_acc;
  b.bar_acc = 0, b.bar_arrived = 0, ++b.bar_gen;
}

void complete_collective(Warp& w) { w.arrived = 0, ++w.gen; }

// Every running lane of the pending collective's mask has joined it.
bool all_in(const Warp& w) { return w.arrived == __builtin_popcount(w.mask & w.live); }

// The calling lane joins its warp's collective over `mask`: `give(w, lane, slot)` leaves its
// part in the collective's slot (0 or 1, by generation), `finish(w, slot)` runs once, in the
// last lane to join, and every lane returns once all have joined. Returns the warp, lane, slot.
struct Joined {
  Warp& w;
  unsigned lane, slot;
};
template <class Give, class Finish>
Joined join(unsigned mask, Give give, Finish finish) {
  Block& b = *t_block;
  const unsigned i = t_fiber->index, lane = i % 32;
  Warp& w = b.warps[i / 32];
  const unsigned g = w.gen, slot = g & 1;
  give(w, lane, slot);
  ++b.progress;
  if (w.arrived == 0) w.mask = mask;
  ++w.arrived;
  if (all_in(w)) {
    finish(w, slot);
    complete_collective(w);
  } else {
    while (w.gen == g) wait_here();
  }
  return {w, lane, slot};
}
void nothing(Warp&, unsigned) {}

void run_block(const Grid& g, unsigned linear, WorkerMemory& mem) {
  Block b;
  b.grid = &g;
  b.n = g.block[0] * g.block[1] * g.block[2];
  if (b.n == 0 || b.n > kMaxThreads) fail(nullptr, "a block of more than 1024 threads (or none)");
  b.fibers.resize(b.n);
  b.ctx.resize(b.n);
  b.warps.resize((b.n + 31) / 32);
  b.info.block_idx = {linear % g.grid[0], linear / g.grid[0] % g.grid[1], linear / (g.grid[0] * g.grid[1])};
  b.info.block_dim = {g.block[0], g.block[1], g.block[2]};
  b.info.grid_dim = {g.grid[0], g.grid[1], g.grid[2]};
  b.info.dynamic_smem = mem.smem;
  b.info.dynamic_smem_bytes = g.dynamic_smem;
  for (unsigned i = 0; i < b.n; ++i) {
    b.ctx[i].thread_idx = {i % g.block[0], i / g.block[0] % g.block[1], i / (g.block[0] * g.block[1])};
    b.ctx[i].lane = i % 32;
    b.fibers[i].block = &b;
    b.fibers[i].index = i;
    b.fibers[i].sp = mem.initial_sp(i, &b.fibers[i]);
    b.warps[i / 32].live |= 1u << (i % 32);
  }
  b.live = b.n;
  g.set_block(&b.info);  // on this worker thread, where every fiber of the block runs
  t_block = &b;
  auto idle_since = std::chrono::steady_clock::now();
  unsigned idle_rounds = 0;
  while (b.live > 0) {
    const unsigned long long before = b.progress;
    b.spun = false;
    for (Fiber& f : b.fibers) {
      if (f.done) continue;
      t_fiber = &f;
      t_self = &b.ctx[f.index];
      lm_emu_switch(&b.sched_sp, f.sp);
    }
    t_fiber = nullptr;
    if (b.progress != before) {
      idle_rounds = 0;
      continue;
    }
    if (!b.spun) fail(&b, "deadlock: every thread of the block waits at a barrier or warp collective the others never reach");
    // Spinning on another block's memory: after a few rounds, sleep, so that the blocks still
    // working get the host's cores (16 workers share a few; yielding alone left them starved).
    if (idle_rounds < 8) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(idle_rounds < 64 ? 10 : 100));
    if (++idle_rounds % 4096 == 0) {
      if (idle_rounds == 4096) idle_since = std::chrono::steady_clock::now();
      else if (std::chrono::steady_clock::now() - idle_since > std::chrono::seconds(120))
        fail(&b, "no progress for 120 s: blocks waiting for others that are not resident (more than 16 blocks meeting at a grid barrier?)");
    }
  }
  t_block = nullptr;
  t_self = nullptr;
}

// The pool: a launch is a job whose blocks the workers claim one at a time, each running its
// block to the end before it claims another.
struct Job {
  const Grid* grid = nullptr;
  unsigned total = 0;
  std::atomic<unsigned> next{0}, finished{0};
};

struct Pool {
  std::mutex mu, launch_mu;
  std::condition_variable wake, done;
  std::shared_ptr<Job> job;
  unsigned long long serial = 0;
  std::vector<std::thread> threads;

  Pool() {
    for (int i = 0; i < kWorkers; ++i) threads.emplace_back([this] { work(); });
    for (std::thread& t : threads) t.detach();  // they live as long as the process
  }

  void work() {
    WorkerMemory mem;
    unsigned long long seen = 0;
    for (;;) {
      std::shared_ptr<Job> j;
      {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return serial != seen; });
        seen = serial;
        j = job;
      }
      for (unsigned blk; (blk = j->next.fetch_add(1)) < j->total;) {
        run_block(*j->grid, blk, mem);
        if (j->finished.fetch_add(1) + 1 == j->total) {
          std::lock_guard<std::mutex> lock(mu);
          done.notify_all();
        }
      }
    }
  }

  void run(const Grid& g) {
    std::lock_guard<std::mutex> one_launch(launch_mu);
    auto j = std::make_shared<Job>();
    j->grid = &g;
    j->total = g.grid[0] * g.grid[1] * g.grid[2];
    if (j->total == 0) return;
    std::unique_lock<std::mutex> lock(mu);
    job = j;
    ++serial;
    wake.notify_all();
    done.wait(lock, [&] { return j->finished.load() == j->total; });
  }
};

}  // namespace

void run_grid(const Grid& g) {
  static Pool* pool = new Pool();  // never destroyed: its threads are detached
  if (g.dynamic_smem > kMaxDynamicSmem) fail(nullptr, "a launch asks for more dynamic shared memory than the device has");
  pool->run(g);
}

}  // namespace luminal::cuda_emulator

extern "C" void lm_emu_fiber_main(Fiber* f) {
  Block& b = *f->block;
  b.grid->run(b.grid->args);
  f->done = true;
  ++b.progress;
  --b.live;
  Warp& w = b.warps[f->index / 32];
  w.live &= ~(1u << (f->index % 32));
  if (w.arrived > 0 && all_in(w)) complete_collective(w);
  if (b.bar_arrived > 0 && b.bar_arrived == b.live) complete_barrier(b);
  lm_emu_switch(&f->sp, b.sched_sp);
  __builtin_unreachable();  // a finished fiber is never resumed
}

extern "C" {

const lm_emu_thread* lm_emu_self(void) { return t_self; }

int lm_emu_syncthreads_count(int predicate) {
  Block& b = *t_block;
  const unsigned g = b.bar_gen;
  ++b.progress;
  b.bar_acc += predicate != 0;
  if (++b.bar_arrived == b.live) complete_barrier(b);
  else
    while (b.bar_gen == g) wait_here();
  return b.bar_result[g & 1];
}

unsigned long long lm_emu_warp_exchange(unsigned mask, unsigned long long value, int src) {
  const Joined j = join(mask, [&](Warp& w, unsigned lane, unsigned slot) { w.vals[slot][lane] = value; }, nothing);
  return src >= 0 && src < 32 && (mask >> src & 1u) ? j.w.vals[j.slot][src] : value;
}

unsigned lm_emu_warp_ballot(unsigned mask, int predicate) {
  const Joined j = join(mask, [&](Warp& w, unsigned lane, unsigned slot) { w.vals[slot][lane] = predicate != 0; }, nothing);
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && j.w.vals[j.slot][l]) bits |= 1u << l;
  return bits;
}

void lm_emu_warp_all(const unsigned* in, unsigned* out, void (*fn)(const unsigned (*)[LM_EMU_WORDS], unsigned (*)[LM_EMU_WORDS])) {
  if (t_block->warps[t_fiber->index / 32].live != 0xffffffffu)
    fail(t_block, "a tensor-core instruction in a warp whose 32 lanes are not all running");
  const Joined j = join(
      0xffffffffu, [&](Warp& w, unsigned lane, unsigned slot) { std::memcpy(w.words[slot][lane], in, sizeof w.words[slot][lane]); },
      [&](Warp& w, unsigned slot) { fn(w.words[slot], w.out[slot]); });
  std::memcpy(out, j.w.out[j.slot][j.lane], sizeof j.w.out[j.slot][j.lane]);
}

void lm_emu_spin(void) {
  if (!t_fiber) return;
  t_block->spun = true;
  wait_here();
}

void lm_emu_trap(const char* why) { fail(t_block, why); }

// D = A B + C, m16n8k16: lane l (group g = l / 4, t = l % 4) holds A[g][2t..2t+1] (word 0),
// A[g+8][2t..] (1), A[g][2t+8..] (2), A[g+8][2t+8..] (3), B[2t..2t+1][g] (4), B[2t+8..][g] (5),
// C[g][2t..2t+1] (6, 7) and C[g+8][2t..2t+1] (8, 9); bf16 pairs with the first in the low half.
void lm_emu_mma_bf16_warp(const unsigned (*in)[LM_EMU_WORDS], unsigned (*out)[LM_EMU_WORDS]) {
  float A[16][16], B[16][8], C[16][8];
  auto lo = [](unsigned w) { float f; unsigned u = w << 16; std::memcpy(&f, &u, 4); return f; };
  auto hi = [](unsigned w) { float f; unsigned u = w & 0xffff0000u; std::memcpy(&f, &u, 4); return f; };
  auto fl = [](unsigned w) { float f; std::memcpy(&f, &w, 4); return f; };
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    A[g][2 * t] = lo(in[l][0]), A[g][2 * t + 1] = hi(in[l][0]);
    A[g + 8][2 * t] = lo(in[l][1]), A[g + 8][2 * t + 1] = hi(in[l][1]);
    A[g][2 * t + 8] = lo(in[l][2]), A[g][2 * t + 9] = hi(in[l][2]);
    A[g + 8][2 * t + 8] = lo(in[l][3]), A[g + 8][2 * t + 9] = hi(in[l][3]);
    B[2 * t][g] = lo(in[l][4]), B[2 * t + 1][g] = hi(in[l][4]);
    B[2 * t + 8][g] = lo(in[l][5]), B[2 * t + 9][g] = hi(in[l][5]);
    C[g][2 * t] = fl(in[l][6]), C[g][2 * t + 1] = fl(in[l][7]);
    C[g + 8][2 * t] = fl(in[l][8]), C[g + 8][2 * t + 1] = fl(in[l][9]);
  }
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float acc = C[m][n];
      for (int k = 0; k < 16; ++k) acc = std::fma(A[m][k], B[k][n], acc);
      C[m][n] = acc;
    }
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    const float d[4] = {C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]};
    std::memcpy(out[l], d, sizeof d);
  }
}

// ldmatrix .x4: lanes 8j..8j+7 give the row addresses of matrix j; lane l gets, for each j, the
// word at row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix j.
void lm_emu_ldmatrix_x4_warp(const unsigned (*in)[LM_EMU_WORDS], unsigned (*out)[LM_EMU_WORDS]) {
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < 4; ++j) {
      const unsigned* row_addr = in[8 * j + l / 4];
      const unsigned long long a = (unsigned long long)row_addr[0] | (unsigned long long)row_addr[1] << 32;
      std::memcpy(&out[l][j], reinterpret_cast<const char*>(a) + 4 * (l % 4), 4);
    }
}

}  // extern "C"
