#pragma once
// Runs one kernel launch on the host: its blocks on a pool of worker threads, each block's CUDA
// threads as fibers on one worker (so that the block's __shared__ variables, thread_local in the
// module, are shared by its threads and by no other block).
#include <string>

#include "emulator.h"

namespace luminal::cuda_emulator {

struct Grid {
  std::string kernel;             // for messages
  void (*run)(void* args) = nullptr;  // calls the kernel with its packed arguments
  void (*set_block)(const lm_emu_block*) = nullptr;  // the module's blockIdx, blockDim, gridDim
  void* args = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned dynamic_smem = 0;
};

// Returns when every block has finished. Blocks that wait for each other (grid barriers,
// counters polled by spinning) need the launch's blocks resident at once, as on the GPU: up to
// kWorkers of them are.
void run_grid(const Grid& g);
constexpr int kWorkers = 16;
constexpr unsigned kMaxDynamicSmem = 232448;  // what the emulated device reports (227 KB)

}  // namespace luminal::cuda_emulator
