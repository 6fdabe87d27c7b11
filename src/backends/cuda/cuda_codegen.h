#pragma once
// CUDA C++ for the nodes of a plan: every primitive op and every kernel node of the CPU backend
// (Fused, FusedSum/FusedMax, Matmul, Softmax, RMSNorm, LayerNorm, Rotary, RMSNormRotary, Where, Attention)
// becomes a __global__ function that reads its inputs through their views' symbolic index
// expressions, with the plan's dynamic dims as kernel arguments. So one compiled module serves
// every value of the dims, and identical layers share one function. Rounding follows the
// reference interpreter (each op rounds to its dtype; compiled without FMA contraction);
// reductions sum in a tree, so they agree with the reference to float rounding, not bit for bit.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_attention_fold.h"
#include "graph/graph.h"

namespace luminal::cuda {

constexpr int kBlockThreads = 256;
// Row kernels (reductions, norms, softmax) size their blocks to the row, up to this many
// threads: a decode step's rows are one block each, latency-bound with 256 threads.
constexpr int kRowMaxThreads = 1024;

// A ScaledMatmul GEMV lists the batches (an MoE's experts) whose scale is not zero in shared
// memory where there are at most kMaxListedBatches of them and kMaxListedBatchRows batch rows
// in all (its lm_compact: a decode); past that its units run over every batch.
constexpr int64_t kMaxListedBatches = 1024, kMaxListedBatchRows = 16384;
// Shared memory a block of an MoE's experts in one kernel (gen::experts_in_one_body) takes: x
// and its output columns' down rows of the first chosen experts; so one block an SM.
constexpr int64_t kExpertsInOneSharedBytes = 220 * 1024;

// One launch of a node. Every function takes (out, in0, .., in<n-1>, dims) with dims a
// pointer to the plan's dynamic dims in device memory, as int64 values in the order of
// Graph::dims(): a run writes them there, so a recorded CUDA graph replays with new dims.
struct Launch {
  std::string function;
  enum class Grid {
    Elements,  // a grid-stride loop over `work` items
    Rows,      // one block per item of `work`
  } grid = Grid::Elements;
  Expr work;
  Expr shared_bytes = Expr(0);  // dynamic shared memory per block
  // A row kernel's row length: its blocks get about four elements per thread (a multiple of 32
  // threads, at most kRowMaxThreads) instead of kBlockThreads. 0: not a row kernel.
  Expr row_length = Expr(0);
  // A grid-stride launch's blocks per multiprocessor at most (0: the executor's cap). Fewer
  // blocks that each loop over more units pay a per-block prologue less often.
  int blocks_per_sm = 0;
  // A GEMV whose units are dealt to the blocks in turn (LinearVariant::spread): its grid is
  // rounded up to whole waves over the multiprocessors (within the cap), so each gets as many.
  bool spread = false;
  // A tensor-core schedule (mma.sync on bf16, sm_80 on): the executor offers it only on such
  // devices, and not with CudaOptions::tensor_cores off.
  bool tensor_cores = false;
  // A linear layer's GEMV: its last parameter before the dims, lm_res, is null or the other
  // operand of the residual sum that reads the layer, [m, n] in order, added at each store (the
  // executor folds that Add into the GEMV; CudaExecutor::residual_of).
  bool residual_in = false;
  // A GEMV that folds in the RMS norm giving its activations (NodeKernels::normed): its next
  // parameter, lm_gain, is the norm's gain (null for a norm without one).
  bool gain_in = false;
  // A reader that computes the single-row softmax it reads (NodeKernels::softmax_fold): its
  // next parameter, lm_smout, is the Softmax's output, which its block 0 writes.
  bool softmax_out = false;
  // A kernel whose value is a Scatter's whole update (NodeKernels::scatter_node): its next two
  // parameters, lm_sdst and lm_sidx, are null or the Scatter's destination and index, and then
  // it stores element z to lm_sdst[lm_sidx[z]] instead of its output.
  bool scatter_out = false;
  // Blocks launched ahead of the grid `work` asks for, which its function runs apart
  // (NodeKernels::router_logits: the router's logits beside the o projection).
  int64_t extra_blocks = 0;
};

// A Matmul that is a linear layer, C[m, n] = A[m, k] · Wᵀ with W a row-major [n, k] matrix and
// both operands plain strided with unit stride along k: it may run on cuBLASLt instead.
struct LinearOperands {
  Expr m, n, k;
  // A is first copied into a contiguous [m, k] scratch (launches[0] writes it): its view is not
  // one strided layer (attention's heads merged back into rows).
  bool a_from_scratch = false;
  Expr a_offset, a_row_stride, w_offset, w_row_stride;  // elements
  DType a_dtype = DType::F32, w_dtype = DType::F32;
};

struct NodeKernels {
  std::vector<Launch> launches;  // in order
  // Scatter only: launches[0] copies the destination, launches[1] writes the updates; an
  // in-place scatter runs launches[1] alone on the destination's buffer.
  bool scatter = false;
  std::optional<LinearOperands> linear;
  // Launches that write a scratch buffer of this many f32 elements instead of the output (and
  // the ones after them read it as input 0).
  std::optional<Expr> scratch_f32;
  // Variants of the last launch (the same work, another schedule): the executor times them
  // against it on the device, per size, and keeps the fastest.
  std::vector<Launch> alternatives;
  // Attention only: with at least `tiled_min_rows` query rows per batch entry (`tiled_rows`, a
  // prefill), this one launch replaces `launches` and writes the output without a scratch.
  // Only where its blocks (a tile of rows each, walking every key) fill the GPU or the rows are
  // as many as the keys (`tiled_keys`): a grouped-query decode has group-many rows per KV head
  // (8 for Qwen3-30B-A3B), and four blocks over a long cache take 160 µs where the split
  // launches take 10.
  std::optional<Launch> tiled;
  // The same on the tensor cores (Launch::tensor_cores), taken instead where the executor
  // offers tensor-core schedules.
  std::optional<Launch> tiled_mma;
  // Its pre-pass, launched first: the keys and values split into bf16 words once, into a scratch
  // of `tiled_mma_words` 32-bit words that tiled_mma then takes after its inputs.
  std::optional<Launch> tiled_mma_prep;
  Expr tiled_mma_words = Expr(0);
  // Attention only: `launches` (the split over slices of keys and the merge) as one launch,
  // taken where the keys make at most `once_max_slices` slices. It takes the scratch
  // (scratch_f32 elements) and `once_counters` zeroed uint32 values, which it leaves zero, after
  // its inputs. A decode step's attention is then one launch.
  std::optional<Launch> once;
  Expr once_slices = Expr(0), once_counters = Expr(0);
  int64_t once_max_slices = 0;
  // `once` computing its own q norms and the new keys' and values' rows (cuda_attention_fold.h,
  // CodegenOptions::attention_norms): after its inputs it takes the q norm's four inputs, the key
  // norm's four and the value update's source; after the scratch and the counters, the key and
  // value caches' buffers, where it stores the new rows. `norms` names the nodes it computes.
  std::optional<Launch> once_folded;
  std::optional<AttentionNorms> norms;
  Expr tiled_rows = Expr(0), tiled_keys = Expr(0);
  int64_t tiled_min_rows = 0;
  // Fused and RMSNormMul nodes that only linear layers read (as activations): the same work
  // storing bf16 words, hi to the output and lo (unless null) to an extra output after the
  // inputs, as kRowsToBf16 would split the f32 values. Where every reader runs on the library
  // (a prefill), the f32 values are never written and read back to be converted. A linear
  // layer whose activations go through a scratch copy (LinearOperands::a_from_scratch): that
  // copy storing the words, for when it runs on the library.
  std::optional<Launch> words;
  // A Fused node's `words` reading the inputs marked in `narrow_inputs` (f32 linear layers'
  // outputs, read in order) as bf16, for a prefill with bf16 activations whose GEMMs for those
  // layers store bf16 (CudaExecutor::narrow_group).
  std::optional<Launch> words_narrow;
  std::vector<bool> narrow_inputs;
  // A linear layer (or group) whose activations are the whole output of an RMS norm over rows:
  // the same GEMV schedules reading the norm's input x (as input 0) and its gain (lm_gain)
  // instead, norming as they load (gen::NormPrologue). Where every reader of the norm runs such
  // a GEMV (a decode), the norm launches nothing (CudaExecutor::defers_norm).
  std::shared_ptr<NodeKernels> normed;
  // A linear group (gate, up) whose two members' one reader is an elementwise program of their
  // outputs, node `gated_node` (the gated MLP's product; gen::GatedEpilogue): the schedules with
  // an even number of columns a unit again, storing that node's value instead of the members'
  // (CudaExecutor::gated_run). `normed`, where there is one, has its own.
  std::shared_ptr<NodeKernels> gated;
  NodeId gated_node = 0;
  // A sum over an MoE's experts (a SumReduce or FusedSum over axis 0) of ScaledMatmul
  // `expert_product`, which nothing else reads: GEMV schedules that compute the chosen experts'
  // products and their sum (and the reduction's epilogue, such as a residual add) in one launch
  // (gen::expert_sum_body), taking the product's three inputs after the reduction's own. For a
  // decode's few rows the product then launches nothing and its [E, m, n] value, mostly zeros,
  // never crosses memory (CudaExecutor::sums_experts).
  std::shared_ptr<NodeKernels> expert_sum;
  NodeId expert_product = 0;
  // The expert sum's schedules again, listing the chosen experts and loading each thread's first
  // weights before their wait (gen::expert_sum_body with `before_wait`): only for a launch right
  // after the gated gate/up experts' GEMV, which releases its dependents after its own wait, so
  // that the scales' producer has finished when these start (CudaExecutor, expert_sum_early).
  std::shared_ptr<NodeKernels> expert_sum_early;
  // The same sum where the product's activations are the gated product of ScaledMatmul
  // `experts_gate_up` (an MoE's gate/up experts): one kernel for the gate/up products, their
  // gated product and this sum, for one token (gen::experts_in_one_body; `normed` where the
  // gate/up reads a norm it may fold). The executor launches it in place of the gate/up experts'
  // GEMV and this sum on a decode step (CudaExecutor::experts_in_one_sum).
  std::shared_ptr<NodeKernels> experts_in_one;
  NodeId experts_gate_up = 0;
  // A gated experts' GEMV form (gated, gated->normed) with its scales' small group inside
  // (fold_small_groups): the same launches and schedules, each function taking the group's
  // outputs and leaves before the dims, running the group's code in every block after its wait
  // (block 0 storing the members) and reading its scales from that block's shared copy.
  std::shared_ptr<NodeKernels> routed;
  // A linear layer's normed GEMV form with the one-block small group that reads its output
  // (a decode's routing, after its router) run in its last block (fold_groups_into_producers):
  // the same launches and schedules, each function taking the group's outputs, its other leaves
  // and a zeroed counter (left zero) before the dims.
  std::shared_ptr<NodeKernels> group_tail;
  // An o projection's residual GEMV (its last launch and alternatives) with blocks of its own
  // ahead of the GEMV's computing an MoE router's logits unscaled (fold_routers_through_o): each
  // function takes M, A and the logits' buffer before the dims.
  std::shared_ptr<NodeKernels> router_logits;
  // A fused kernel (Fused, FusedSum, FusedMax) reading Softmax `softmax_node` (over the last
  // axis, f32): the same work reading the softmax's input (the logits) where it read the
  // softmax, each block first computing row 0's max and sum, and block 0 storing row 0's
  // probabilities to the softmax's output (Launch::softmax_out). Right where the softmax has one
  // row (a decode's MoE routing): the softmax launches nothing and its reader's blocks pay a pass
  // over the row each (CudaExecutor::folds_softmax).
  std::shared_ptr<NodeKernels> softmax_fold;
  NodeId softmax_node = 0;
  // A Rotary or RMSNormRotary whose value only Scatter `scatter_node` reads, as its update (a
  // key cache write): its launches take the Scatter's destination and index (Launch::scatter_out)
  // and store into the destination where given them. Where both of the Scatter's index and
  // update read their buffers in order and it updates its destination in place (a decode), the
  // Scatter then launches nothing (CudaExecutor::scatter_store_of).
  std::optional<NodeId> scatter_node;
};

// A fixed function in every module, for feeding f32 activations to bf16 tensor-core GEMMs:
// (hi, lo, in, rows, cols, ld) writes hi[r, c] = bf16(x) and, when lo is not null,
// lo[r, c] = bf16(x - hi) for x = in[r * ld + c]; hi + lo holds x to about 2^-17.
constexpr const char* kRowsToBf16 = "lm_rows_to_bf16";
// (x, n, out, out32): *out = the index of the largest of x[0, n) (the first of equals; NaN
// never wins; -1 where all are NaN), also as an int at out32 unless null; one block of up to
// 1024 threads.
constexpr const char* kArgmaxF32 = "lm_argmax_f32";
constexpr const char* kEvictRead = "lm_evict_read";

// The helpers every generated module starts with.
std::string cuda_prelude();

// The distinct functions of a plan, each a whole definition, in the order first needed.
struct FunctionSet {
  std::vector<std::string> names, texts;
  // The text of the function named `name`, or null.
  const std::string* find(const std::string& name) const;
  // Adds function `name` unless it is there (identical texts share a name).
  void add(const std::string& name, const std::string& text);
};

// For twins of generated functions (cuda_group_fold.cpp): where `text` declares its dims
// parameter and where its one griddepcontrol wait begins (nullopt where it has no such
// parameter or not exactly one wait); and a function's transformed `text` renamed `prefix` and
// its hash (nullopt where there is no text or it does not name `function`), as (name, text).
std::optional<std::pair<size_t, size_t>> dims_and_wait(const std::string& text);
std::optional<std::pair<std::string, std::string>> renamed_twin(const std::string& function, std::optional<std::string> text,
                                                                const std::string& prefix);

// What generated kernels may trade away.
struct CodegenOptions {
  // Tensor-core kernels (prefill attention, an MoE's experts) take their f32 operands as one
  // bf16 part, not hi + lo: a third (attention) or half (experts) of the products, with operands
  // rounded to bf16 (to 2^-8 of themselves), as PyTorch runs a bf16 model. CudaOptions::bf16_activations.
  bool bf16_activations = false;
  // An MoE's router (a linear layer whose one reader is the routing's softmax) as the first
  // member of the routing's small group (small_groups), its rows shared out over the group's
  // blocks with the norm before it folded in: one launch where there were two.
  // CudaOptions::router_in_group.
  bool router_in_group = false;
  // A small group's member computes the Iota-made values it reads from their index (the
  // routing's tie-break mask) instead of loading them from the buffer of a leaf.
  // CudaOptions::index_values_in_groups.
  bool index_values_in_groups = true;
  // A small group's count recognised as top-k ranks (cuda_top_ranks.h: the routing's choice of
  // experts) runs as k rounds of argmax in a warp, so the group needs one block and no count of
  // finished blocks. CudaOptions::top_ranks_in_groups.
  bool top_ranks_in_groups = true;
  // A one-block group with no linear member launched as one warp (32 threads) instead of
  // kBlockThreads: its barriers then span a warp, and three of the routing's four members ran
  // on warp 0 alone anyway. CudaOptions::warp_groups.
  bool warp_groups = false;
  // Every small group's function takes (lm_pf, lm_pfn) before the dims: null, or bytes of
  // weights that its first warp asks of L2 by bulk requests ahead of its wait (the executor
  // passes the next linear layer's). CudaOptions::group_prefetch_bytes.
  bool group_prefetch = false;
  // fold_small_groups' twins of the gated experts' GEMVs. CudaOptions::fold_groups.
  bool fold_groups = false;
  // fold_groups_into_producers' twins of the routers' GEMVs. CudaOptions::groups_in_producers.
  bool groups_in_producers = false;
  // Decode attention's twins that compute their q norms and new rows (NodeKernels::once_folded).
  // CudaOptions::attention_norms (on there; off here, for the codegen's own callers).
  bool attention_norms = false;
  // fold_routers_through_o's twins. CudaOptions::routers_through_o.
  bool routers_through_o = false;
  // Those twins also run the routing group in their last block. CudaOptions::routing_in_o.
  bool routing_in_o = false;
};

// Adds node `id`'s functions to `functions` (skipping any already there: identical layers
// produce identical functions, named by a hash of their text) and says how to launch them.
// Throws Error for a node it has no kernel for (an unknown kernel name).
// `graph_dims` is g.dims().
NodeKernels emit_node_kernels(const Graph& g, NodeId id, const std::vector<std::string>& graph_dims, FunctionSet& functions,
                              const CodegenOptions& options = {});

// Generated functions (whole texts from a FunctionSet, two or more) as one: blocks
// [0, lm_split0) run the first's body, [lm_split0, lm_split1) the second's and so on, each
// seeing its own part of the grid as blockIdx and gridDim. Its parameters are each function's
// in turn, then lm_split0 .. (unsigned, one fewer than the functions). For small kernels of
// which none reads what another writes (a decode's two rotaries and its value cache write):
// one launch, and one wait on the kernel before, where there were several. nullopt where a
// text is not a generated function.
struct JoinedFunction {
  std::string name, text;
};
std::optional<JoinedFunction> joined_function(const std::vector<std::string>& texts);

// Small nodes of one token run by one block in one launch (cuda_small_group_codegen.cpp): a
// decode's MoE routing, the router's softmax, each expert's rank among the token's, the chosen
// experts' weights, their sum and the weights over it, took a launch each (three after the
// softmax fold), each a wait on the kernel before and a pass of its own over 128 values. A
// group is a connected set of two or more members: f32 nodes that are fused elementwise
// programs, reductions over the last axis of their input (FusedSum, FusedMax, SumReduce,
// MaxReduce) or softmaxes over the last axis, whose shapes are constants but for the first dim
// (the tokens), with at most kSmallGroupMaxValues values and kSmallGroupMaxInputs reduced
// inputs a token. Each member's values go to shared memory, where the next members read them,
// and to its own buffer (the group's function takes the members' outputs in order, then the
// leaves it reads, then a zeroed counter where `counter`, then the dims). One block of
// kBlockThreads runs the members, except that the first member with much work (an expert's
// rank among 128: 16384 comparisons) is shared out over several blocks, which run the cheap
// members before it each, and the last of them to finish runs the rest. The executor runs it where
// every member's first dim is 1 (CudaExecutor::runs_small_group); no leaf depends on a member,
// and none is of a kind whose value the executor may leave unmade (a norm folded into its
// GEMVs, expert products folded into their sum, a folded softmax).
constexpr int64_t kSmallGroupMaxValues = 1024, kSmallGroupMaxInputs = 65536;
// A routing group's router computed beside the o projection (fold_routers_through_o): router
// logits = s · (M · attn + A · x), where h = x + o is the sum the router's RMS norm reads,
// s = 1 / sqrt(mean(h²) + eps), A = W_r ⊙ gain (f32 [experts, hidden]) and M = A · W_o (f32
// [experts, attention_width]), made once by `prep_function` (out: M then A; in: W_r, the gain,
// W_o). The o projection's twin (NodeKernels::router_logits) stores the unscaled logits into
// the router's buffer; `group_function`, the group's twin, takes h's buffer before the dims and
// scales them as it reads them.
struct RouterThroughO {
  NodeId router = 0, norm = 0, sum = 0, o = 0, gain = 0, router_weight = 0, o_weight = 0;
  int64_t experts = 0, hidden = 0, attention_width = 0;
  float eps = 0;
  bool gain_bf16 = false;
  std::string group_function, prep_function;
  // The twin also runs the group in its last block (CodegenOptions::routing_in_o): it takes the
  // group's outputs, its leaves but the logits and a zeroed counter after the logits' buffer.
  bool group_in_last_block = false;
  // The group's routed twins in the gate/up experts (fold_small_groups, after this fold) read the
  // logits unscaled and take h (lm_rh) after the group's leaves: they run where the router ran
  // in the o projection's launch.
  bool routed_takes_h = false;
};
// Code that puts the router's logits, read unscaled from `logits` (a float pointer), times s =
// 1 / sqrt(mean(h²) + eps) of h (`h`, float4s) into shared lm_rsl[experts]; through L2
// (`__ldcg`) where `through_l2` (values other blocks of the same launch wrote).
std::string router_scaled_logits_code(const RouterThroughO& f, const std::string& logits, const std::string& h, bool through_l2);
struct SmallGroup {
  std::vector<NodeId> nodes;      // in the plan's topological order
  std::vector<NodeId> leaves;     // the values outside the group that members read
  std::vector<int64_t> capacity;  // each member's values for one token (its shared array)
  Launch launch;
  bool counter = false;  // takes a zeroed uint32 (left zero) before the dims
  bool prefetch = false;  // then (lm_pf, lm_pfn), CodegenOptions::group_prefetch
  // The members' code as the function has it (outputs lm_o<j>, leaves lm_l<l>, shared arrays
  // lm_s<j>) and the dims it reads, for fold_small_groups.
  std::string body;
  std::vector<std::string> dims;
  // Set by fold_small_groups: the gate/up experts whose scales are member `fold_member`'s values
  // and whose gated forms have a twin (NodeKernels::routed) that runs this group's code first.
  std::optional<NodeId> fold_reader;
  size_t fold_member = 0;
  // Set by fold_groups_into_producers: the linear layer whose output is the group's one
  // computed leaf and whose normed GEMV forms have a twin (NodeKernels::group_tail) that runs
  // the group in its last block.
  std::optional<NodeId> tail_producer;
  // Set by fold_routers_through_o (below).
  std::optional<RouterThroughO> router_through_o;
};
std::vector<SmallGroup> small_groups(const Graph& plan, const std::vector<std::string>& graph_dims, FunctionSet& functions,
                                     const CodegenOptions& options = {});

// The index of the group's one leaf that is not an Input (a routing's router), or nullopt where
// it has none or several.
std::optional<size_t> only_computed_leaf(const Graph& plan, const SmallGroup& grp);

// A one-block group's code for the last block of a launch that computes its leaf `leaf`
// (fold_groups_into_producers, fold_routers_through_o): `params` to go before the launch's dims
// (the members' outputs lm_go<j>, the other leaves lm_gl<l>, a zeroed counter lm_gcnt, left
// zero), and `code`, which counts the finished blocks, returns from all but the last, and there
// declares the group's shared arrays and dims and runs `before_body`, then the group's body
// reading the leaf as `leaf_as` and storing every member. nullopt where the body uses the block's
// place or waits.
struct LastBlockGroup {
  std::string params, code;
};
std::optional<LastBlockGroup> last_block_group(const SmallGroup& grp, size_t leaf, const std::string& leaf_as, const std::vector<std::string>& graph_dims,
                                               const std::string& comment, const std::string& before_body = "");

// A one-block group (no count of finished blocks) whose first reader outside it is a
// ScaledMatmul with gated forms, reading a member as its scales (a decode's routing and its
// gate/up experts): each gated form gets a twin (NodeKernels::routed, cuda_group_fold.cpp), so
// that the executor can run the group inside the gate/up GEMV, one launch and one wait where
// there were two, and the scales come from shared memory, not L2. Sets the groups' fold_reader.
void fold_small_groups(const Graph& plan, std::vector<SmallGroup>& groups, std::vector<std::optional<NodeKernels>>& per_node,
                       const std::vector<std::string>& graph_dims, FunctionSet& functions);

// A one-block group (no count of finished blocks, not folded into a reader) whose only computed
// leaf is a linear layer with normed GEMV forms, all of its members after that layer (a decode's
// routing and its router over the post-attention norm): each normed form gets a twin
// (NodeKernels::group_tail, cuda_group_fold.cpp) whose last block, counted by an atomic after
// every block has stored its outputs, runs the group. The executor can then run the group inside
// the router's launch: one launch and one wait fewer a decode layer, where the group's own
// launch waited for the router's whole grid. Sets the groups' tail_producer.
void fold_groups_into_producers(const Graph& plan, std::vector<SmallGroup>& groups, std::vector<std::optional<NodeKernels>>& per_node,
                                const std::vector<std::string>& graph_dims, FunctionSet& functions);

// A one-block group (no count, not folded elsewhere) whose one computed leaf is an MoE router
// over RMSNormMul(x + o) with bf16 weights, o a linear layer on a bf16 weight whose GEMV adds a
// residual, the router read by the group alone: the o projection's GEMV forms get a twin
// (NodeKernels::router_logits) and the group a function (RouterThroughO, cuda_router_fold.cpp),
// so that a decode runs the router inside the o projection's launch: one launch and one wait
// fewer a layer. Sets the groups' router_through_o.
void fold_routers_through_o(const Graph& plan, std::vector<SmallGroup>& groups, std::vector<std::optional<NodeKernels>>& per_node,
                            FunctionSet& functions, const std::vector<std::string>& graph_dims, bool group_in_last_block);

// Linear layers that read the same activations through the same view, with weights of one
// layout (q, k and v; gate and up), as one GEMV over their weights laid end to end in device
// memory: one launch where there were several, each a few microseconds of ramp and tail.
// Its functions take (out, activations, first weight, out1, .., dims): member i writes to out<i>.
// nullopt where the members do not qualify.
std::optional<NodeKernels> emit_grouped_linear(const Graph& g, const std::vector<NodeId>& members,
                                               const std::vector<std::string>& graph_dims, FunctionSet& functions);

}  // namespace luminal::cuda
