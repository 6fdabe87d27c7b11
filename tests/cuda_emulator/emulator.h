#pragma once
// What a kernel module compiled by the emulator's NVRTC calls in the emulator's runtime: the
// calling CUDA thread's indices, the block's barriers and the warp's collectives. Every CUDA
// thread of a block is a fiber on one host thread (block_runner.cpp), so these calls switch
// fibers where a GPU thread would wait. C linkage: modules link against the emulator library.
#ifdef __cplusplus
extern "C" {
#endif

struct lm_emu_dim3 {
  unsigned x, y, z;
};
// A CUDA thread's own indices (threadIdx is read through lm_emu_self on every use).
struct lm_emu_thread {
  struct lm_emu_dim3 thread_idx;
  unsigned lane;  // linear thread index % 32
};
// What the block's threads share, given to the module (lm_emu_set_block, in kernel_compat.h) on
// the worker thread before the block's fibers start.
struct lm_emu_block {
  struct lm_emu_dim3 block_idx, block_dim, grid_dim;
  unsigned char* dynamic_smem;  // the launch's dynamic shared memory, this block's
  unsigned dynamic_smem_bytes;
};

const struct lm_emu_thread* lm_emu_self(void);
// __syncthreads and its reductions: every live thread of the block arrives; returns how many
// arrived with a nonzero predicate.
int lm_emu_syncthreads_count(int predicate);
// A warp collective over the lanes in `mask` (all must arrive, as on the GPU): each lane gives
// `value` and gets the value of lane `src` (its own where src is outside the warp or the mask).
unsigned long long lm_emu_warp_exchange(unsigned mask, unsigned long long value, int src);
// Each lane gives a predicate and gets the mask of lanes where it held.
unsigned lm_emu_warp_ballot(unsigned mask, int predicate);
// The warp's 32 lanes give LM_EMU_WORDS words each; `fn` runs once with all of them
// (in[lane][i]) and fills out[lane][i]; each lane gets its words back. For the tensor-core
// instructions (all 32 lanes take part).
#define LM_EMU_WORDS 12
void lm_emu_warp_all(const unsigned* in, unsigned* out, void (*fn)(const unsigned (*in)[LM_EMU_WORDS], unsigned (*out)[LM_EMU_WORDS]));
// The two warp functions of the tensor-core helpers: mma.m16n8k16 .row.col bf16 -> f32 (a lane
// gives A's 4 words, B's 2, C's 4 floats; gets D's 4) and ldmatrix .x4 (a lane gives its row
// address in 2 words; gets its 4 words).
void lm_emu_mma_bf16_warp(const unsigned (*in)[LM_EMU_WORDS], unsigned (*out)[LM_EMU_WORDS]);
void lm_emu_ldmatrix_x4_warp(const unsigned (*in)[LM_EMU_WORDS], unsigned (*out)[LM_EMU_WORDS]);
// A thread spinning on memory another block writes lets the others run.
void lm_emu_spin(void);
// __trap and assertion failures: the launch fails with `why` (cuLaunchKernel returns an error).
__attribute__((noreturn)) void lm_emu_trap(const char* why);

#ifdef __cplusplus
}
#endif
