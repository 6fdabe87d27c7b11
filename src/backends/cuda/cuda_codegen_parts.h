#pragma once
// Pieces the CUDA kernel generators share (cuda_codegen.cpp and the fast paths beside it):
// literals, expressions as C, plain strided views. Internal to backends/cuda.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_attention_fold.h"
#include "core/dtype.h"
#include "graph/fused_program.h"
#include "graph/graph.h"

namespace luminal::cuda::gen {

std::string float_lit(float f);             // exact (hex) float literal; inf and NaN by bits
std::string value_lit(double v, DType t);   // a literal of t's value type, converted as Cast would
std::string c(const Expr& e);               // the expression as C, index variable lm_q
bool multiple_of(const Expr& e, int64_t n);  // a constant that n divides
Expr product_of(const std::vector<Expr>& shape, size_t from, size_t to);
// A one-instruction program: what a primitive elementwise node computes, so that it goes
// through the same emitter (and rounding) as fused kernels.
FusedProgram single(OpKind op, DType out, DType in0, int n_inputs);

// The accumulator of SumReduce / MaxReduce in dtype t, as ReduceAcc keeps it: f32 sums and
// maxima, i32 sums wrapping (unsigned), i32/bool maxima. `combine` is a lambda (a, b) -> acc;
// result(t) is lm_acc as a value of t.
struct Acc {
  std::string type, init, combine;
  std::string result(DType t) const;
};
Acc accumulator(bool sum, DType t);

// Attention's softmax over the scores in shared memory, lm_sc[0, lm_keys): leaves lm_sc holding
// exp(score - max), with lm_sum their sum and lm_rcp = 1 / lm_sum (in the reference's order of
// operations; exp as exp2 of a log2(e) product).
std::string shared_scores_softmax();

// A view of one strided layer: element (c_0, .., c_r-1) sits at offset + sum c_d * stride_d
// (where its mask, if any, lets it through). plain_strided: one such layer without a mask.
const ViewLayer* plain_layer(const View& v);
const ViewLayer* plain_strided(const View& v);

// The GEMV's schedules. A team of `team` threads (32: a warp; up to a block of 256) takes
// `cols` adjacent output columns (weight rows) at once, its threads striding over k with 16-byte
// loads, `in_flight` of them per column before their products. A column's partial sums meet
// by shuffles, then in shared memory across a team's warps. Wider teams and more columns per
// team keep more loads in flight per unit of work, so a GEMV of a few thousand columns ramps up
// and drains faster; the executor times every schedule on the device per shape (cold weights)
// and keeps the fastest. The first is the default. Several columns per team also read the
// activations (from L2, once per team and column group) fewer times: with one column per
// team, a decode GEMV reads about twice as many activation bytes from L2 as weight bytes from
// memory.
// `rows`: a unit's rows of A (each weight load serves them all). A decode's single row needs
// one: four hold four accumulators per column in registers, which limits occupancy (ncu on the
// H200: 68-102 registers a thread, 25-37% occupancy, 45-70% of DRAM bandwidth).
struct LinearVariant {
  int in_flight;
  int cols;
  int team;
  int rows = 4;
  // With a norm: x times the gain and the rows' sums of squares staged in shared memory once
  // per block (strided_linear_body), not computed in the k loop. Norm forms offer both: the
  // stage's block-wide pass costs a small GEMV more than it saves, a large one less.
  bool staged = false;
  // Units dealt to the blocks in turn (unit u to block u mod grid) on a grid of whole waves
  // over the multiprocessors (Launch::spread), so that each multiprocessor streams the same
  // share of the weight. Without it block b takes units [b·teams, (b+1)·teams) and a grid that
  // is no multiple of the multiprocessors leaves some with a block more: the 8B's q/k/v, 192
  // blocks of 32 rows on 132 SMs, had 60 SMs streaming twice the rows of the other 72. Only
  // the four-column one-row schedules come spread: with one column a unit the grids are
  // several waves already (and each schedule is one more NVRTC function per shape).
  bool spread = false;
  // ScaledMatmul with one row a unit (an MoE decode's experts) only: each chunk's x values and
  // the inline norm's gain load with its weights, not in its products. There each chunk's went
  // out only once the chunk before was summed, one trip to L2 after another, four a pass (session
  // 43, read in the SASS of the gate/up experts' GEMV); loaded early, a lane's 24 loads of a
  // pass go out together, at about 160 registers where the plain schedule has 120, so both are
  // offered (the gate/up experts' gated forms add early copies of the one-row schedules) and the
  // tuner picks.
  bool early = false;
};
constexpr LinearVariant kLinearVariants[] = {{4, 1, 32},    {4, 4, 32},    {4, 1, 64},    {4, 1, 128},   {2, 1, 128},   {8, 1, 32},
                                             {4, 4, 64},    {2, 4, 128},   {8, 1, 32, 1}, {4, 4, 32, 1}, {4, 1, 128, 1}, {4, 4, 64, 1},
                                             {4, 4, 32, 1, false, true}, {4, 4, 64, 1, false, true}};
// The gated gate/up experts' schedules besides those (the gated product needs an even number
// of columns): a warp's whole unit in flight, eight passes of 256 values (a 2048-long row, as
// Qwen3-30B-A3B's), for grids of one block an SM, which leave each thread the registers for
// 32 loads. Only there: the dense GEMVs' functions would each cost NVRTC time.
constexpr LinearVariant kGatedExpertVariants[] = {{8, 4, 32, 1}};
// Whether the gated experts get those: off, LUMINAL_CUDA_GATED_WHOLE_UNITS=1 for measuring.
// Offered in session 52 (H100, 8-layer Qwen3-30B-A3B shape, grid caps 1, 2 and 4): the gate/up
// experts added 21.0 us a layer with them and without, TPOT 0.680-0.682 ms against 0.679, for
// four more NVRTC functions a gate/up shape.
bool gated_whole_units();
// Which GEMV units a thread takes (strided_linear_body's loop and the weight prefetch's), as
// code: its block's first unit, its team's offset from that, and the step to the next pass;
// block-major, or dealt in turn where v.spread.
struct LinearUnits {
  std::string block_first, team_offset, step;
};
LinearUnits linear_units(const LinearVariant& v);
// The most shared memory a linear GEMV's staged norm (x times the gain, every row of a decode)
// may take a block: up to 8192 values of one row, 2048 of four.
constexpr long long kMaxStagedNormBytes = 32 << 10;
// The threads a schedule launches for `count` outputs: a team per `cols` of them. That is at
// least a team per work unit where batch rows are few (decode), and the kernel's loop strides
// over any units left (the executor caps the grid anyway).
Expr linear_threads(const Expr& count, const LinearVariant& v);

// An RMS norm folded into the GEMV that reads it (a decode's norm before q/k/v or gate/up): A (lm_in0) is the norm's input x; each value is multiplied by the gain (lm_gain, f32
// or bf16, contiguous along k from `gain_offset`; none for a norm without one) as it is loaded,
// and each row's sums by 1 / sqrt(mean(x²) + eps) at the store. The team sums x² as it streams
// k, which it reads whole anyway, so the norm costs no launch and no pass of its own.
struct NormPrologue {
  bool gain = true;
  DType gain_dtype = DType::F32;
  Expr gain_offset = Expr(0);
  float eps = 0;
};

// The RMS norm a linear layer's GEMV may fold in (NormPrologue): `folded_norm` gives, for an f32
// RMSNorm or RMSNormMul over its last axis whose x is one strided layer with unit stride along
// that axis and whose gain (if any) is broadcast over the rows and contiguous along it, x's
// layer, the prologue and the dims their offsets and strides use; `norm_prologue_of` the same
// where Matmul `mm` reads that norm's whole value in order.
struct FoldedNorm {
  ViewLayer x;
  NormPrologue prologue;
  std::vector<std::string> dims;
};
std::optional<FoldedNorm> folded_norm(const Graph& g, NodeId id);
std::optional<FoldedNorm> norm_prologue_of(const Graph& g, const Node& mm);

// A linear group of two members of `half` columns each (gate: columns [0, half) of the weights
// laid end to end, up: [half, 2 half)) whose one reader is an elementwise program of their two
// outputs (the gated MLP's act(gate) * up): each unit takes cols / 2 gate columns and the
// matching up columns, and `store(at, gate, up)` writes the program's value at `at` of its
// [m, half] output, instead of the members' outputs (no launch for the product, and neither
// output crosses memory).
struct GatedEpilogue {
  Expr half;
  std::function<std::string(const std::string& at, const std::string& gate, const std::string& up)> store;
};

// The last-block pattern of a kernel whose blocks each add to `counter` (an unsigned* expression)
// and whose last, the one that sees `last` (the blocks' count less one) before its add, goes on
// alone: lm_last (an int or bool the caller declares in shared memory) is set, the others return,
// and the last sets the counter back to zero for the next launch. With `release` thread 0 counts
// by one acquire-release atomic after the block's barrier (the barrier orders the block's stores
// before its release and, in the last block, what it reads after the acquire); without it every
// thread fences its stores first and the last block fences again before it reads.
std::string last_block_count(const std::string& counter, const std::string& last, bool release);

// A barrier over a grid whose blocks are all resident at once: thread 0 of each block adds one
// to sync[0] by an acquire-release atomic that wraps to zero at the last arrival, which then
// bumps the generation at sync[1] (release); the others poll it (acquire). `sync` is an
// unsigned* expression to two zeroed words, left as found but for the generation, so the same
// words serve any number of barriers in a row. Every thread of every block must reach it.
std::string grid_barrier(const std::string& sync);

// A generator's switch for measuring: on unless the environment variable `name` is "0".
bool env_switch_on(const char* name);
// An opt-in switch: on only where the environment variable `name` is "1".
bool env_switch_set(const char* name);
// A branch on `dims` (declared from lm_dims) to go before a kernel's wait: ptxas otherwise sinks
// their loads (read-only, ld.global.nc) past griddepcontrol.wait, a trip to L2 after it. Dims
// are never negative, so the branch is never taken. The expert sums take it (H100, 8-layer
// Qwen3-30B-A3B shape: they added 73.4 us a step against 86.0); every kernel taking it made the
// GEMVs slower (274 against 254, the o projection's 54 against 48), so the others do not.
// Empty for no dims; LUMINAL_CUDA_DIMS_BEFORE_WAIT=0: none (to measure).
std::string dims_before_wait(const std::vector<std::string>& dims);
// The small groups' one-token forms: row loops of known bounds, unrolled (GroupWriter), and
// the router's scale reading h in a loop of known trips (router_scaled_logits_code). On;
// LUMINAL_CUDA_ONE_TOKEN_GROUPS=0 for the loops of runtime bounds (to measure).
bool one_token_groups();

// The fast paths' kernel bodies (cuda_linear_codegen.cpp, cuda_attention_codegen.cpp); nullopt
// where their conditions do not hold (the generic kernel then runs).
std::optional<std::string> strided_linear_body(const ViewLayer* a, const ViewLayer* b, const std::vector<DType>& dt,
                                               const std::string& count_decl,
                                               const std::function<std::string(const std::string&, DType)>& out_store,
                                               const LinearVariant& v = kLinearVariants[0], const ViewLayer* scale = nullptr,
                                               const NormPrologue* norm = nullptr, const GatedEpilogue* gated = nullptr,
                                               bool preloaded = false);
// `scale` (ScaledMatmul, read from lm_in2 as A is): row i's sums times its scale; a unit whose
// rows' scales are all zero writes zeros without reading its weight rows. With `gated` too (an
// MoE's gate/up experts whose one reader is their gated product), each unit's gate and up sums
// are scaled, then stored through the product's program; there is no path for many listed rows
// (a prefill's), so the executor runs that form for a decode's few rows alone.
// ScaledMatmul's parts of strided_linear_body (cuda_scaled_linear_codegen.cpp):
// - scaled_batches_prologue: with few batches of few rows (an MoE decode: 128 experts, one
//   token; lm_compact), each block lists the batches with a nonzero scale, in order, in shared
//   memory (a ballot per warp, so every block lists them alike), and the units are then those
//   of the listed batches alone (lm_units recounted): every block streams chosen experts'
//   weights, where a grid over all experts leaves most warps idle;
// - scaled_batches_epilogue: after the units (so that weight loads start first), the outputs of
//   the batches the list left out (`width` values a row) get `zero_store`, which stores the
//   value of an all-zero row at lm_z (zero; a gated product's program of zeros);
// - scaled_rows_path: with many rows (a prefill: each expert's tokens are a few of them), per
//   (batch, run of column tiles) the block lists the batch's rows with a nonzero scale and its
//   teams take them `rows` at a time, so a weight row is read once per group of listed rows, not
//   once per group of all rows (most of which did not route there); each team then zeroes the
//   unlisted rows of its columns. `kloop` and `stores` are the GEMV's own, with rows through
//   lm_ar and stores at lm_rl. Up to 4096 rows a batch; past that the units run over every row,
//   and a unit whose rows' scales are all zero reads no k.
std::string scaled_batches_prologue(const ViewLayer* a, const ViewLayer* scale);
// Whether the listing keeps each batch's first scale in shared memory (lm_scl), where a
// one-row unit (decode) reads it: loaded again, its value bounded the unit's k loop, so the
// weights' loads waited a trip to L2 (SASS, session 45). LUMINAL_CUDA_LISTED_SCALES=0: loaded.
bool listed_scales();
std::string scaled_batches_epilogue(const std::string& width, const std::string& zero_store);
std::string scaled_rows_path(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const LinearVariant& v, bool bf16,
                             const std::string& kloop, const std::string& stores,
                             const std::function<std::string(const std::string&, DType)>& out_store);
// Batch lm_b's coordinates (the dims before the last two of a's shape) into the offsets lm_ao,
// lm_bo and, with `scale`, lm_so, each declared before; `in` indents the lines.
std::string batch_offsets(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const std::string& in);
// Appends `idx` to `list` where lm_on holds, in order of idx across the block: a ballot per warp,
// then every thread sums the warps' counts itself (its place after the warps before it, and the
// new total into `count`, an int each thread holds alike: no thread-0 prefix and third barrier
// on the gated experts' path after their wait). `bits` gets the ballots (a bit per idx below
// `limit`). Every thread of the block runs it (barriers); it needs lm_wcnt[kBlockThreads / 32],
// blocks of at most kBlockThreads.
std::string append_listed(const std::string& in, const std::string& idx, const std::string& limit, const std::string& bits,
                          const std::string& list, const std::string& count);
// An MoE's expert products summed over the experts in one GEMV (cuda_expert_sum_codegen.cpp),
// for a decode's few rows: out[i, j] = sum over experts e with a nonzero scale of
// s[e, i] * (A[e, i, :] · B[e, :, j]), operands read from lm_xa, lm_xb, lm_xs (ScaledMatmul's
// three inputs: A f32 [E, m, k] with unit stride along k, B f32 or bf16 [E, k, n] with unit
// stride along k, s f32 shaped as A and constant along k), `store(at, value)` writing the sum
// at flat index `at` of the [m, n] output. Up to kMaxListedExperts experts (a constant).
// A unit is `cols` columns of `rows` rows, for a team of `team` threads.
constexpr int kMaxListedExperts = 1024;
// `min_blocks` > 0: launch bounds of that many blocks an SM, and a grid of at most that many.
// ptxas then has the registers to issue a decode unit's loads of four chunks (weights,
// activations, scales) together; with the plain bounds it kept about 64 registers and spread
// them over the products (session 43, read in the SASS: 16 loads then one wait, against two
// or three waits).
struct ExpertSumVariant {
  int team, cols, rows;
  int min_blocks = 0;
};
constexpr ExpertSumVariant kExpertSumVariants[] = {{32, 1, 1}, {32, 2, 1},    {32, 4, 1},    {64, 1, 1},   {64, 2, 1}, {128, 1, 1},
                                                   {32, 1, 4}, {64, 2, 4},    {32, 1, 1, 2}, {32, 2, 1, 2}, {64, 1, 1, 2}};
std::optional<std::string> expert_sum_body(const ViewLayer* a, const ViewLayer* b, const ViewLayer* s, DType w_dtype,
                                           const std::function<std::string(const std::string&, const std::string&)>& store,
                                           const ExpertSumVariant& v, std::string* before_wait = nullptr);
Expr expert_sum_threads(const Expr& rows, const Expr& n, const ExpertSumVariant& v);  // its launch's threads
// An MoE decode's experts in one kernel (cuda_experts_in_one_codegen.cpp), for one token's row:
// the chosen experts' gate/up products (ScaledMatmul: A f32 [E, m, k] shared by the experts, the
// gate/up weight bf16 [E, k, 2h] with unit stride along k, its scale [E, m, k] constant along k,
// and with `norm` A is the norm's input, normed as the normed GEMVs do), their gated product
// (`gated_value(gate, up, out, indent)` declares float `out`) into a scratch (lm_out1, [chosen,
// h] f32), a grid barrier (counters at lm_out2, two zeroed uint32 values it leaves as it found
// them but for a generation count), then the sum over the chosen experts of their down products
// (bf16 [E, h, n] with the weight's rows adjacent, scale [E, m, h]) times their scale, each
// output stored by `store(at, value)`. A block per multiprocessor, all resident at once (the
// barrier needs them: kExpertsInOneSharedBytes of shared memory a block keeps others off the
// SM); each block's output columns' rows of the first chosen experts' down weights are copied
// into shared memory by the tensor memory accelerator while the gate/up products stream (sm_90).
// It releases its dependents after the barrier, not at its start (KernelWriter::finish's
// `release_at_start`). Operands after the node's inputs: lm_ga, lm_gb, lm_gs, lm_db, lm_ds.
struct ExpertsInOne {
  const ViewLayer *a = nullptr, *gate_up = nullptr, *gate_up_scale = nullptr, *down = nullptr, *down_scale = nullptr;
  const NormPrologue* norm = nullptr;
  std::function<std::string(const std::string& gate, const std::string& up, const std::string& out, const std::string& indent)> gated_value;
  std::function<std::string(const std::string& at, const std::string& value)> store;
};
std::optional<std::string> experts_in_one_body(const ExpertsInOne& x);
// ScaledMatmul with bf16 weights on the tensor cores (cuda_scaled_mma_codegen.cpp), for many rows
// a batch (an MoE prefill, where each expert's rows are the few tokens that chose it): a block per
// (batch, tile of `cols` output columns, i.e. weight rows), grid-stride, lists the batch's rows
// with a nonzero scale and runs them 64 at a time as a GEMM with mma.sync m16n8k16 (bf16 in, f32
// sums). A is split into bf16 hi + lo (x to about 2^-17) and multiplied twice, as the prefill's
// cuBLASLt path does, so sums are f32-faithful. The unlisted rows are zero (`out`, the output's
// dtype, must be f32). Needs sm_80 (lm_mma_bf16 traps below); nullopt where the weight is not
// bf16 or the operands are not plain strided with unit stride along k. `hi_only`: A as one bf16
// part, one product (CodegenOptions::bf16_activations).
// Its schedules (the tuner times them with the GEMV's): a block's weight rows (a multiple of 64),
// k values a step (a multiple of 32) and shared-memory stages.
struct ScaledMmaTile {
  int cols, depth, stages;
};
constexpr ScaledMmaTile kScaledMmaTiles[] = {{128, 32, 4}, {128, 64, 4}, {256, 64, 3}, {256, 32, 4}};
std::optional<std::string> scaled_mma_body(const ViewLayer* a, const ViewLayer* b, const ViewLayer* scale, const std::vector<DType>& dt,
                                           const std::string& count_decl,
                                           const std::function<std::string(const std::string&, DType)>& out_store, DType out,
                                           const ScaledMmaTile& tile, bool hi_only = false);
Expr scaled_mma_threads(const std::vector<Expr>& a_shape, const Expr& n, const ScaledMmaTile& tile);  // its launch's threads
int scaled_mma_shared_bytes(const ScaledMmaTile& tile);                                                // and dynamic shared memory
// Code for before the kernel's wait on the one before it (griddepcontrol.wait): the weight rows
// the kernel reads first, up to a budget of bytes, start streaming into L2 while the kernels
// before it finish. Weights are never written by kernels, so reading them early is safe. Empty
// for batched products and a zero budget. `half`: a gated group's (GatedEpilogue), whose units
// read gate's rows and up's.
std::string linear_weight_prefetch(const ViewLayer* a, const ViewLayer* b, DType w_dtype, const LinearVariant& v, long long budget_bytes,
                                   const Expr* half = nullptr);
// Code for before the kernel's wait, with strided_linear_body(..., preloaded = true) after it
// (the same schedule, no scale): the weight loads of the first k pass of each thread's first
// unit, into registers (lm_q<u>_<k>, with lm_pre set where they were issued), which that pass
// then takes in place of its own. So each resident team's first trip to memory overlaps the
// kernels before it. Only for a weight no kernel writes: the caller checks. "" where the
// operands do not fit the GEMV.
std::string linear_weight_preload(const ViewLayer* a, const ViewLayer* b, DType w_dtype, const std::string& count_decl, const LinearVariant& v,
                                  const NormPrologue* norm = nullptr, const GatedEpilogue* gated = nullptr);
// Whether dense GEMVs preload so (on; LUMINAL_CUDA_GEMV_PRELOAD=0 for the text without).
bool weights_before_wait();
// Grid caps (blocks a multiprocessor; 0: the executor's, or an expert sum variant's own
// min_blocks) offered as alternatives of the same function: `env`'s comma-separated list where
// set (one to four; else an error that says the form), else `defaults`.
std::vector<int> grid_caps(const char* env, std::vector<int> defaults);
// The gated gate/up experts' caps: 1, 2 and 4 (LUMINAL_CUDA_GATED_EXPERT_CAPS). Their 120-164
// registers leave two blocks an SM resident at most, so a grid of more runs as two waves, each
// block listing the experts again. H100, 8-layer Qwen3-30B-A3B shape (session 52): the caps 2
// and 1 offered, the tuner took 1 (132 blocks) and the experts added 20.9 us a layer against
// 23.3 with the old 0 and 4; H200, full shape: TPOT 2.555 ms against 2.647.
const std::vector<int>& gated_expert_caps();
// The caps on which the expert sums' schedules are offered again, after each on its own: none
// ("0"), or LUMINAL_CUDA_EXPERT_SUM_CAPS="1,2" for measuring. Offered in session 52 (H100,
// 8-layer Qwen3-30B-A3B shape), the tuner kept the 512-block grid: 86.5 us a step against 87.2.
const std::vector<int>& expert_sum_caps();
// Whether gated gate/up experts release their dependents after their wait and expert sums get
// forms that list their experts and load their first weights before theirs
// (NodeKernels::expert_sum_early; on; LUMINAL_CUDA_EXPERT_SUM_PRELOAD=0 for neither).
bool expert_sums_before_wait();
// The prefetch budget of a linear layer whose activations come from `producer`: by default none.
// After another linear layer (most of a decode) the early lines only compete with that layer's
// own stream: on the H200 a Llama-3-8B step took 4.54 ms with 16 MB, 4.46 with 8 (the old
// default), 4.44 with none (session 27, one call). After attention, which leaves memory idle,
// the o projection's whole weight (33.5 MB) gained nothing either: 4.335 ms a step against
// 4.311 without (the same call, f32 and bf16 activations), the 8-layer MoE 0.685 against 0.681.
// LUMINAL_CUDA_PREFETCH_AFTER_ATTENTION_MB and LUMINAL_CUDA_PREFETCH_MB set the two budgets;
// LUMINAL_CUDA_PREFETCH_WHOLE_KB prefetches any weight of at most that size whole (measuring).
long long linear_prefetch_budget(const Node& producer);
// Attention in two launches: `partial` runs one block per (group of kAttentionRows query rows
// of a batch entry, slice of kAttentionChunk keys) and writes [max, sum, unnormalised row] per
// (row, slice) into a scratch of rows * slices * (dv + 2) floats; `combine` merges the slices
// (a warp per output element, its lanes over the slices, reading the scratch as input 0).
// Decode's few rows then still fill the GPU, a grouped-query decode reads each KV head's cache
// once for its query heads, and shared memory no longer grows with the context.
constexpr int kAttentionChunk = 32, kAttentionRows = 4;
struct AttentionKernels {
  std::string partial, combine;
};
std::optional<AttentionKernels> strided_attention(const Node& n, const std::vector<DType>& dt, DType out_dtype);
// Both launches in one (cuda_attention_decode_codegen.cpp), for head dims that are constants up
// to 128: the last block of each row group to finish merges the group's slices. The function
// takes the scratch (lm_out1) and a zeroed uint32 counter per row group (lm_out2, left zero)
// after its inputs. The merge is one block's work over every slice, so it serves up to
// kSplitOnceMaxSlices slices (2048 keys); past that the two launches run.
constexpr int kSplitOnceMaxSlices = 64;
// What the one-launch decode attention needs to compute its q norms and its new keys' and values'
// rows itself (cuda_attention_fold.h; the code in cuda_attention_fold_codegen.cpp): loaders over
// the function's named parameters lm_qx, lm_qg, lm_qc, lm_qs (the q norm's inputs: x, gain, cos,
// sin), lm_kx .. lm_ks (the key norm's) and lm_vu (the value update's source), as lambdas of a
// flat index: lm_qld<i> and lm_kld<i> (input i of each norm at its output's index), lm_kup (the
// key norm's index of the key update's element), lm_vup (lm_vu's index of the value update's
// element) and lm_vval (lm_vu's value at an index). The new
// rows are stored through lm_out3 (keys) and lm_out4 (values), the caches' buffers.
struct AttentionFoldCode {
  std::string loaders;
  Expr tokens;              // S: the update's tokens; the new keys are the last S
  float q_eps = 0, k_eps = 0;
  bool rows_linear = false;  // both updates read a row's elements one apart (row start + p)
};
std::optional<std::string> split_attention_once(const Node& n, const std::vector<DType>& dt, DType out_dtype,
                                                const AttentionFoldCode* fold = nullptr);
// The fold's pieces (cuda_attention_fold_codegen.cpp): the loaders of node `f`'s nodes (nullopt
// where a view does not fit); before the keys' and values' rows load, the loads the fold needs
// (warp w's q row w, its element 0 at `q_row` of the q norm's output for row lm_q; the new key's
// projections, in the warp whose four keys hold it), so that all go out together; after them,
// the new key's rows in place of the cache's (and stored into the caches), then the q rows lm_qr
// normed and rotated, through shared memory. One new key a step: the twin runs where S is 1.
std::optional<AttentionFoldCode> attention_fold_code(const Graph& g, const cuda::AttentionNorms& f);
std::string folded_loads(const AttentionFoldCode& f, const Expr& q_row, int64_t dk);
std::string folded_rows(const AttentionFoldCode& f, const ViewLayer& k, const ViewLayer& v, size_t r, int64_t dk);
// Its code before the wait (split_attention_prefetch, cuda_attention_decode_codegen.cpp): the
// block's key and value rows asked of L2. "" where it has none.
std::string split_attention_prefetch(const Node& n, const std::vector<DType>& dt, const Expr& blocks);
// Prefill attention in one launch (flash-style tiles of kTiledRows query rows by kTiledKeys
// keys), one block per (batch entry, row tile), writing the output directly; for head dims that
// are constants up to kTiledMaxHeadDim. The executor takes it from kTiledMinRows query rows.
constexpr int kTiledRows = 64, kTiledKeys = 64, kTiledMaxHeadDim = 256, kTiledMinRows = 8;
std::optional<std::string> tiled_attention(const Node& n, const std::vector<DType>& dt, DType out_dtype);
Expr tiled_attention_shared_bytes(const Node& n);  // only where tiled_attention gave a kernel
// The same on the tensor cores (cuda_attention_mma_codegen.cpp), for head dims that are
// multiples of 16, value head dims up to kTiledMmaMaxValueDim (its outputs live in registers).
// Blocks of kTiledMmaThreads (kBlockThreads) threads. `hi_only`: operands as one bf16 part, one product each
// (CodegenOptions::bf16_activations).
constexpr int kTiledMmaMaxValueDim = 128, kTiledMmaThreads = 256;
std::optional<std::string> tiled_attention_mma(const Node& n, const std::vector<DType>& dt, DType out_dtype, bool hi_only = false);
// Only where tiled_attention_mma gave a kernel:
Expr tiled_attention_mma_shared_bytes(const Node& n, bool hi_only = false);
// Its pre-pass: the keys and values as the bf16 words its tiles hold, split once for all of the
// kernel's blocks, and a summary of the mask a byte per tile of rows and keys (which tiles it
// hides, shows whole or mixes), into a scratch of tiled_attention_mma_prep_words 32-bit words
// that the kernel then reads as its extra output lm_out1; tiled_attention_mma_prep_blocks
// blocks of kBlockThreads.
std::optional<std::string> tiled_attention_mma_prep(const Node& n, const std::vector<DType>& dt, bool hi_only = false);
Expr tiled_attention_mma_prep_words(const Node& n, bool hi_only = false);
Expr tiled_attention_mma_prep_blocks(const Node& n);

}  // namespace luminal::cuda::gen
