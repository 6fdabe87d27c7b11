#pragma once
// Runs a plan on the GPU: every node's kernels are generated (cuda_codegen.h) and compiled in
// one NVRTC module when the executor is made; inputs (weights, caches) live in device memory
// across runs; intermediates come from a free list by size, so steady-state runs allocate
// nothing; a Scatter into an input that nothing else reads updates it in place (the KV cache).
// The same calls as the reference interpreter, so callers and tests swap one for the other.
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/schedule_cache.h"
#include "graph/graph.h"
#include "runtime/buffer.h"
#include "runtime/interpreter.h"
#include "runtime/run_invariants.h"

namespace luminal::cuda {

// Every kernel a plan needs (each distinct function once) and how each node launches them.
// Needs no GPU: CI compiles it with NVRTC alone.
struct PlanKernels {
  FunctionSet functions;
  std::vector<std::optional<NodeKernels>> per_node;  // by node id; none for Input
  std::vector<SmallGroup> small_groups;
  // The functions in `parts` modules, each with the prelude: NVRTC runs one thread per
  // program, so parts compile in parallel. A function's part follows from its name alone
  // (part_of), and names follow from the code: two plans that differ in a few functions (the
  // search's candidates) differ in those functions' parts only, and the other parts are found
  // in the compiled-kernel cache.
  std::vector<std::string> module_sources(size_t parts) const;
  static size_t part_of(const std::string& function, size_t parts);
  std::string source() const { return module_sources(1)[0]; }  // all in one module
  // Forgets every node's alternatives (and `extra`'s, the linear groups') and the functions
  // only they used: a plan whose schedules are never tuned (the search's candidates, timed with
  // their first schedules) compiles a tenth of the code, the GEMVs' many schedules gone.
  void drop_alternatives(std::vector<NodeKernels*> extra = {});
};
PlanKernels generate_plan_kernels(const Graph& plan, const CodegenOptions& options = {});
// Throws Error("the cuda backend cannot run here: ...") naming what is missing (a driver, a
// device, NVRTC): for callers that must say so before any work.
void require_usable();

struct CudaOptions {
  // Linear layers with bf16 weights and at least kLibraryMinRows rows run on the tensor cores
  // (cuBLASLt). Their f32 activations are split into two bf16 parts, hi + lo, and multiplied
  // twice, which keeps them to about 2^-17 (f32-faithful logits). Off: the generated kernel,
  // which agrees with the reference to f32 rounding.
  bool tensor_cores = true;
  // One bf16 part only, as PyTorch runs a bf16 model: half the tensor-core work, activations
  // rounded to bf16 (to 2^-8 of themselves). Also the generated tensor-core kernels (prefill attention, an
  // MoE's experts: CodegenOptions). Also LUMINAL_CUDA_BF16_ACTIVATIONS=1.
  bool bf16_activations = false;
  // Repeated runs with the same dims replay a CUDA graph of their launches (a decode step is
  // hundreds of small kernels: launching them costs more than running them). Dims named in
  // `bucketed_dims` count as equal within buckets of `bucket` (the cached length grows by one
  // per token): buffers and grids are sized for the bucket's end, kernels read the true dims
  // from device memory. Also LUMINAL_CUDA_GRAPHS=0 turns graphs off.
  bool graphs = true;
  // Generated kernels go out as programmatic dependent launches (Hopper on): each may start
  // while the one before finishes, prefetching its weights, and waits for it before reading its
  // results. On the H200 it took a Llama-3-8B decode step from 6.09 to 5.80 ms;
  // LUMINAL_CUDA_OVERLAP=0 turns it off.
  bool overlap_launches = true;
  // Kernels with variants (the GEMV's schedules) are timed on the device, per size, the first
  // time they run, and the fastest kept. Also LUMINAL_CUDA_TUNE=0 turns it off (first variant);
  // LUMINAL_CUDA_TUNE_LOG=1 prints each choice and its timings to stderr.
  bool tune_variants = true;
  // Each schedule timed in a chain of (a read of a scratch larger than L2, the schedule) with
  // launches overlapped, as a step runs it, where the first schedule alone takes under 0.25 ms
  // (longer ones, a prefill's, are timed alone anyway); off: one launch after an L2 flush, timed
  // alone. Also LUMINAL_CUDA_TUNE_CHAIN=0.
  bool tune_in_chain = true;
  // When a recorded graph replays for the fourth time, the runners-up of the schedules it runs
  // (each within refine_within of the fastest where tuned) are tried in the whole step: each is
  // recorded in, the step replayed and timed, and kept only where the step got faster. A
  // schedule timed in a chain of its own does not always rank as it runs among the others: on
  // the H200 the Qwen3-30B-A3B decode step went from 3041 to 2944 us by the four choices kept.
  // Each choice is refined once; only where a replay gives what the run before gave
  // (refine_safe). Also LUMINAL_CUDA_REFINE=0.
  bool refine_in_step = true;
  double refine_within = 0.12;  // a runner-up is tried within this share of the fastest time (more in tests)
  int refine_runners_up = 3;     // per choice, the fastest first
  // Schedule choices (timed, and refined in the step) are kept on disk beside the CUBINs, one
  // file per device and driver (ScheduleCache), and a later process with the same cache folder
  // runs them without timing: its first prefill and steps skip the tuning (seconds for a large
  // model), and its choices are the refined ones. A choice read there is not refined again.
  // Needs a cache folder; also LUMINAL_CUDA_SCHEDULE_CACHE=0.
  bool schedule_cache = true;
  // >= 0: every node with variants runs this one (clamped to its last), untimed; for tests, and
  // LUMINAL_CUDA_VARIANT=N for profiling a schedule.
  int force_variant = -1;
  // A decode's attention as one launch (NodeKernels::once) where it applies; off: the split
  // and the merge as two launches. Also LUMINAL_CUDA_ATTENTION_ONCE=0.
  bool attention_once = true;
  // A decode's one-launch attention computes its q norms and the new keys' and values' rows
  // itself (NodeKernels::once_folded, cuda_attention_fold.h): the joined launch of the q and k
  // norm-rotaries and the cache writes before it goes. Session 49: full Qwen3-30B-A3B shape on
  // the H200, TPOT 2.767 ms against 2.799; 8-layer shape on an H100, 0.726 against 0.733.
  // LUMINAL_CUDA_ATTENTION_NORMS=0 turns it off.
  bool attention_norms = true;
  // A norm or gated product that only library GEMMs read stores their bf16 words itself
  // (NodeKernels::words) instead of f32 values converted after. Also LUMINAL_CUDA_WORDS=0.
  bool store_words = true;
  // A library linear layer whose one reader adds it to a value nothing reads after (a residual
  // sum) adds into that value's buffer (the GEMM's beta = 1), and the Add costs nothing. The sum
  // rounds once where the reference rounds twice. Also LUMINAL_CUDA_FOLD=0.
  bool fold_residuals = true;
  // A linear group on the library (q/k/v, gate/up of a prefill) may run its first member's GEMM
  // on the main stream and the others' beside it on a side stream. On the H200 (session 23,
  // 512-token Llama-3-8B prefill) that was ~1 ms faster f32-faithful (two products a member) and
  // 0.1-0.3 ms slower with bf16 activations, so by default (-1) each group shape is timed both
  // ways on its first planned run and keeps the faster; 0 never, 1 always.
  // Also LUMINAL_CUDA_CONCURRENT_GEMMS=0/1/auto.
  int concurrent_group_gemms = -1;
  // A linear layer whose activations arrive through a view of several layers reads them in
  // place, without the scratch copy, where that view reads its source in order at the run's
  // dims (a decode's attention heads merged into one row). Also LUMINAL_CUDA_SKIP_COPIES=0.
  bool skip_in_order_copies = true;
  // With bf16 activations, a prefill's sibling linear layers on the library (gate and up) store
  // their GEMMs' sums as bf16 where their one reader is a gated product that stores words: it
  // reads half the bytes (NodeKernels::words_narrow). Also LUMINAL_CUDA_NARROW=0.
  bool narrow_gated_inputs = true;
  // An RMS norm whose readers are all linear layers on the GEMV (a decode's norms before q/k/v
  // and gate/up) launches nothing: the GEMVs read its input and gain and norm as they
  // load (NodeKernels::normed). Also LUMINAL_CUDA_NORM_GEMV=0.
  bool norm_in_gemv = true;
  // A linear group on the GEMV (gate/up of a decode) whose one reader is the gated product of its
  // two outputs stores that product itself (NodeKernels::gated): the product launches nothing and
  // gate and up never cross memory. Also LUMINAL_CUDA_GATED_GEMV=0.
  bool gated_in_gemv = true;
  // A sum over an MoE's experts of their products (ScaledMatmul), with few rows (a decode),
  // runs as one GEMV over the chosen experts that sums as it goes (NodeKernels::expert_sum):
  // the products launch nothing and their mostly-zero [E, m, n] value is never written. Also
  // LUMINAL_CUDA_EXPERT_SUM=0.
  bool expert_sum_in_gemv = true;
  // Such a sum whose products read the gated product of gate/up experts (an MoE's experts)
  // runs, for one token (a decode step), in one kernel with the gate/up experts' GEMV and their
  // gated product (NodeKernels::experts_in_one, sm_90 and enough shared memory): one block a
  // multiprocessor meeting at a grid barrier, the down rows copied into shared memory while the
  // gate/up rows stream. Off by default: on the H200 the 8-layer Qwen3-30B-A3B shape decoded at
  // 0.643 ms a token with it against 0.619-0.623 without (docs/cuda_backend.md, session 38).
  // Also LUMINAL_CUDA_EXPERTS_IN_ONE=1.
  bool experts_in_one = false;
  // Its dynamic shared memory in KB (0: kExpertsInOneSharedBytes), which sizes its stage of down
  // rows: less leaves room on each SM for the next kernel's blocks, the chosen experts past the
  // stage then read from memory. For measuring; also LUMINAL_CUDA_EXPERTS_SMEM_KB.
  int experts_in_one_smem_kb = 0;
  // A softmax with one row (a decode's MoE routing) whose first reader is a fused kernel with a
  // NodeKernels::softmax_fold launches nothing: that reader computes it from its input and
  // stores it for the others. Also LUMINAL_CUDA_SOFTMAX_FOLD=0.
  bool softmax_in_readers = true;
  // A key cache write whose update a Rotary or RMSNormRotary computes (a decode's keys, read
  // in order) launches nothing: that kernel stores into the cache itself (NodeKernels::scatter_node).
  // Also LUMINAL_CUDA_SCATTER_STORE=0.
  bool scatter_in_producers = true;
  // Adjacent nodes of the plan (up to kMaxJoined) that each make one small launch, none reading
  // what another writes (a decode's rotaries of q and k and its value cache write), run as one
  // launch (joined_function): one launch and one wait on the kernel before where there were
  // several. Also LUMINAL_CUDA_PAIRS=0.
  bool pair_launches = true;
  // Small nodes of one token (a decode's MoE routing after its router) run as one launch of
  // their group's function (SmallGroup, CudaExecutor::runs_small_group). Also
  // LUMINAL_CUDA_SMALL_GROUPS=0.
  bool small_groups = true;
  // The router in its routing's group (CodegenOptions::router_in_group). Off by default until
  // measured on a GPU: written in session 43, when none was lent. Also
  // LUMINAL_CUDA_ROUTER_IN_GROUP=1.
  bool router_in_group = false;
  // CodegenOptions::index_values_in_groups. No measurable change on the H200 (session 46); one
  // leaf less. Also LUMINAL_CUDA_GROUP_INDEX_VALUES=0.
  bool index_values_in_groups = true;
  // CodegenOptions::top_ranks_in_groups: the routing's group in one block, its ranks a warp's k
  // rounds of argmax. Also LUMINAL_CUDA_TOP_RANKS=0.
  bool top_ranks_in_groups = true;
  // CodegenOptions::warp_groups. Off: slower on the H200 (session 48, full Qwen3-30B-A3B shape,
  // TPOT 2.817 ms against 2.805). Also LUMINAL_CUDA_GROUP_WARP=1.
  bool warp_groups = false;
  // > 0: a small group asks L2, before its wait, for up to this many bytes of the weights of the
  // first linear layer after it (a decode's routing: the next layer's q/k/v, 21 MB for
  // Qwen3-30B-A3B), by bulk requests from one warp, so that memory streams them while the
  // router and the routing run (CodegenOptions::group_prefetch). A design study had it 1.2 us a
  // layer faster (docs/cuda_backend.md, "The next weights asked of L2"); in the compiler it is
  // far slower (session 50, H200, full Qwen3-30B-A3B shape with the router fold: TPOT 6.15 ms
  // at 24 MB against 2.72 without): off. Also LUMINAL_CUDA_GROUP_PREFETCH_MB.
  int64_t group_prefetch_bytes = 0;
  // A one-block group read first by the gated experts' GEMV runs inside it (fold_small_groups,
  // NodeKernels::routed): one launch and one wait fewer a decode layer. Off by default: on the
  // H100 (session 47, 8-layer Qwen3-30B-A3B shape) the folded GEMV added 27 us a layer where the
  // group and the GEMV added 24.4, TPOT 0.755 ms against 0.733. Until session 52 it turned the
  // router fold through o off (H100: 0.737 ms against 0.690); now the routed twins scale the
  // logits from h themselves where the router ran in o (RouterThroughO::routed_takes_h), with
  // grids of one block an SM each block runs the group once, and the group's launch and its
  // wait are gone. Still slower (session 53, H200, full shape: TPOT 2.595-2.596 ms against
  // 2.552-2.558; the expert sum loses its early form). Also LUMINAL_CUDA_FOLD_GROUPS=1.
  bool fold_groups = false;
  // A one-block group whose only computed leaf is a router's normed GEMV runs in that GEMV's
  // last block (fold_groups_into_producers, NodeKernels::group_tail): a decode's routing then
  // launches nothing. Off until measured on a GPU (written in session 49, without one). Also
  // LUMINAL_CUDA_GROUP_IN_PRODUCER=1.
  bool groups_in_producers = false;
  // A decode's MoE router runs inside its o projection's launch, its logits from weights made
  // once (fold_routers_through_o, RouterThroughO), scaled by the routing group: one launch and
  // one wait fewer a layer, for 3 MB more read by o's launch (f32 M and A) a layer. On the H200
  // (session 50), full Qwen3-30B-A3B shape: TPOT 2.713-2.722 ms against 2.740-2.744 without.
  // LUMINAL_CUDA_ROUTER_THROUGH_O=0 turns it off.
  bool routers_through_o = true;
  // And the routing group then runs in the last block of that launch (RouterThroughO::
  // group_in_last_block): it launches nothing, and the gate/up experts wait on the o projection.
  // Off: no faster (session 52, H100, 8-layer Qwen3-30B-A3B shape: TPOT 0.690-0.691 ms against
  // 0.680-0.682; the o launch with the group added 10.0-10.2 us a layer where o and the group's
  // own launch added 5.9 and 4.0). LUMINAL_CUDA_ROUTING_IN_O=1 turns it on.
  bool routing_in_o = false;
  // > 0: the blocks of a group whose member is shared out, instead of the generated count (for
  // measuring; the function runs on any number). Also LUMINAL_CUDA_SMALL_GROUP_BLOCKS.
  int small_group_blocks = 0;
  std::vector<std::string> bucketed_dims = {"past"};
  int64_t bucket = 256;
  // Grid-stride kernels launch at most this many blocks per multiprocessor (their loops take
  // the rest of the work). Also LUMINAL_CUDA_BLOCKS_PER_SM, for measuring.
  int blocks_per_sm = 16;
};

// Whether running a plan twice on the same inputs leaves what running it once does: no scatter
// into an input (written in place, as a KV cache is) takes its index or update from that input.
// A decode step's cache writes read only the layers before theirs, so a replay rewrites the
// same values (CudaOptions::refine_in_step replays steps to time them).
bool refine_safe(const Graph& plan);

// LUMINAL_CUDA_TUNE_LOG=1: each timed choice (schedules, group concurrency, refinements) to stderr.
bool tune_log();

class CudaExecutor {
 public:
  // Generates and compiles the plan's kernels (cached on disk under cache_dir/cuda; empty: no
  // cache). Throws Error when there is no usable GPU, saying why.
  CudaExecutor(Graph plan, const std::string& cache_dir, CudaOptions options = {});
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  void set_input(const std::string& name, const Buffer& data);  // converted to the input's dtype, uploaded
  void set_dim(const std::string& name, int64_t value);
  // Queues the plan on the device; `wait`: returns when it has run (a failing kernel reports
  // here), else at once, its outputs ready for what is queued after it.
  void run(bool wait = true);
  Buffer output(const std::string& name) const;  // downloaded, in the output's dtype
  // The index of the largest value of an f32 output's last row (its last dim; the first of
  // equals, NaN never chosen, -1 where every value is NaN), found on the device: a greedy
  // decode's choice, 8 bytes downloaded instead of the vocabulary's logits.
  int64_t output_argmax(const std::string& name);
  // The same choice queued, not waited for: written as the one value of i32 input `input` (the
  // next step's token, so the next run can be queued at once) and kept in slot `slot` (0 or 1);
  // take_argmax(slot) then reads that slot as soon as this choice is made, while later runs may
  // already be on the device (LanguageModel's queued greedy steps).
  void argmax_to_input(const std::string& output, const std::string& input, int slot);
  int64_t take_argmax(int slot);
  // Zero-copy for callers that hold device memory (this process's context): the input reads the
  // caller's `bytes` at `ptr` in place, in the input's dtype (no conversion), until the next
  // set_input of that name; a KV cache given so is updated in place there. The caller keeps it
  // alive and frees it. An output is handed back as where it lies, valid until the next run().
  void set_input_device(const std::string& name, DevicePtr ptr, DType dtype, const std::vector<int64_t>& shape);
  // The caller's device memory copied (on the device) into the executor's own buffer for the
  // input: for values that arrive at a new address each call (a token, a position), so the
  // buffer's address, and the CUDA graph recorded over it, stay the same.
  void copy_input_device(const std::string& name, DevicePtr ptr, DType dtype, const std::vector<int64_t>& shape);
  struct DeviceTensor {
    DevicePtr ptr = 0;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
  };
  DeviceTensor output_device(const std::string& name) const;
  std::vector<float> output_f32(const std::string& name) const;  // downloaded straight into the vector when f32

  const Graph& graph() const { return graph_; }
  size_t kernel_functions() const { return functions_; }
  double compile_ms() const { return compile_ms_; }
  bool compiled_from_cache() const { return from_cache_; }
  size_t device_bytes() const;  // held now: inputs, outputs and the free list
  // How runs went since construction: recorded into a CUDA graph, replayed from one, or run
  // launch by launch; and how often the recorded graphs were dropped (an input moved).
  struct GraphStats {
    int64_t recorded = 0, replayed = 0, launched = 0, dropped = 0;
  };
  const GraphStats& graph_stats() const { return graph_stats_; }
  // Launches, since construction, that stored bf16 words for the library (NodeKernels::words).
  int64_t words_stored() const { return words_stored_; }
  // Residual sums, since construction, that a library GEMM added in (CudaOptions::fold_residuals).
  int64_t residuals_folded() const { return residuals_folded_; }
  // Linear layers' scratch copies of their activations skipped (reads_in_order), counted.
  int64_t scratch_copies_skipped() const { return scratch_copies_skipped_; }
  // Kernel launches made launch by launch (not replayed from a CUDA graph), since construction.
  int64_t launches() const { return launches_; }
  // Launches, since construction, that ran two or more nodes (pair_launches).
  int64_t launches_paired() const { return launches_paired_; }
  // Joined functions compiled (or loaded from the disk cache) since construction.
  int64_t joins_compiled() const { return joins_compiled_; }
  // Runs of a linear group whose GEMMs stored bf16 for their gated product (narrow_group).
  int64_t narrowed_groups() const { return narrowed_groups_; }
  // RMS norms, since construction, that launched nothing: their GEMVs normed (norm_in_gemv).
  int64_t norms_folded() const { return norms_folded_; }
  // Gated products, since construction, that their linear group's GEMV stored (gated_in_gemv).
  int64_t products_folded() const { return products_folded_; }
  // Expert products (ScaledMatmul), since construction, that launched nothing: their sum over
  // the experts computed them (expert_sum_in_gemv).
  int64_t experts_summed() const { return experts_summed_; }
  // MoE experts (gate/up, gated product and the sum of the down products), since construction,
  // that ran as one kernel (experts_in_one).
  int64_t experts_in_one_run() const { return experts_in_one_run_; }
  // Expert sums launched in their early form (NodeKernels::expert_sum_early).
  int64_t expert_sums_early() const { return expert_sums_early_; }
  // Softmaxes, since construction, that launched nothing: their first reader computed them
  // (softmax_in_readers).
  int64_t softmaxes_folded() const { return softmaxes_folded_; }
  // Scatters (cache writes), since construction, that launched nothing: the kernel computing
  // their update stored it (scatter_in_producers).
  int64_t scatters_folded() const { return scatters_folded_; }
  // Launches, since construction, of small groups' functions (CudaOptions::small_groups).
  int64_t small_groups_run() const { return small_groups_run_; }
  // Small groups run inside their gate/up experts' GEMV (CudaOptions::fold_groups), launched one by one.
  int64_t small_groups_folded() const { return small_groups_folded_; }
  // Small groups run in their router's last block (CudaOptions::groups_in_producers).
  int64_t small_groups_in_producers() const { return small_groups_in_producers_; }
  // Routers run inside their o projection's launch (CudaOptions::routers_through_o).
  int64_t routers_through_o() const { return routers_through_o_; }
  // Routing groups run in the last block of their o projection's launch (CudaOptions::routing_in_o).
  int64_t routing_groups_in_o() const { return routing_groups_in_o_; }
  // Attentions, since construction, that computed their q norms and new rows (attention_norms).
  int64_t attention_norms_folded() const { return attention_norms_folded_; }
  // Runners-up tried in a recorded step, and those kept (CudaOptions::refine_in_step).
  int64_t refinements_tried() const { return refinements_tried_; }
  int64_t refinements_kept() const { return refinements_kept_; }
  // Schedule choices timed in this process, and taken from the schedule cache instead.
  int64_t schedules_timed() const { return schedules_timed_; }
  int64_t schedules_from_cache() const { return schedules_from_cache_; }
  // The schedule each timed or cached choice runs: "function work" -> schedule_name.
  std::map<std::string, std::string> chosen_schedules() const;

  // Per-node device time under a label ("Matmul", "Fused", "Add"), measured with events around
  // each node (synchronizing after every node, so only for finding where time goes).
  using ProfileEntry = Interpreter::ProfileEntry;
  void set_profiling(bool on) { profiling_ = on; }
  void clear_profile() { profile_.clear(); }
  std::vector<ProfileEntry> profile() const;  // slowest first

 private:
  struct DeviceBuffer {
    DevicePtr ptr = 0;
    size_t bytes = 0;  // allocated
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    bool kept = false;  // a run invariant's value: never returned to the free list
    bool borrowed = false;  // an input in the caller's memory (set_input_device): never freed here
  };
  DeviceBuffer take(DType t, const std::vector<int64_t>& shape);
  const DeviceBuffer& computed_output(const std::string& name) const;  // Error: unknown or not run yet
  NodeId checked_device_input(const std::string& name, DevicePtr ptr, DType dtype, const std::vector<int64_t>& shape) const;
  // The input's own device buffer for `nbytes`: its allocation reused where the size allows.
  DeviceBuffer& owned_input(NodeId id, const std::vector<int64_t>& shape, size_t nbytes);
  void give_back(DeviceBuffer b);
  void bind_dims();
  // Sizes for buffers and grids: the dims with bucketed ones rounded up (plan_dims_). Shapes a
  // caller sees, and library calls, use the true dims (eval_true).
  std::vector<int64_t> concrete(const std::vector<Expr>& shape);
  // Expressions are interned, so the layers' shapes share nodes: each is evaluated once per run.
  int64_t eval(const Expr& e);
  int64_t eval_true(const Expr& e);
  std::unordered_map<const void*, int64_t> evaluated_, evaluated_true_;
  DimMap plan_dims_;
  DevicePtr dims_dev_ = 0;  // the true dims, in graph_dims_ order, for the kernels
  using Choice = std::pair<std::string, int64_t>;  // (function, work): chosen_'s key
  struct RecordedGraph {
    int runs = 0;          // uncaptured runs with these dims
    int replays = 0;
    bool library = false;  // a launch went to cuBLASLt (its arguments are host-side): never captured
    void* exec = nullptr;
    std::map<std::string, DeviceBuffer> outputs;  // owned by the graph (it writes there)
    std::set<Choice> choices;                     // the tuned choices its launches follow
  };
  std::map<std::vector<int64_t>, RecordedGraph> graphs_;
  std::set<NodeId> invariant_inputs_;  // inputs that kept values read
  std::set<NodeId> changing_inputs_;   // inputs set again after a run: nothing reading them is kept
  void new_values(NodeId input);       // an input's contents changed (set or copied again)
  bool keeps(NodeId id) const;         // a run invariant whose value is kept from run to run
  bool used_library_ = false;
  void clear_graphs();
  void launch(const Launch& l, const NodeKernels& k, void* function, DevicePtr out, const std::vector<DevicePtr>& in);
  // A launch's blocks and threads at this run's dims.
  std::pair<int64_t, int64_t> launch_shape(const Launch& l);
  // Joined launches (pair_launches). A node whose one launch may join others (single_launch) is
  // held back (pending_) with those before it that may, until a node that launches otherwise,
  // one that reads or writes what a held one writes, or kMaxJoined held: then they go as one
  // launch of their joined function (flush_pending). While launches are held, buffers given
  // back wait (held_): the joined bodies run at once, so a later output must not reuse an
  // earlier input. Joined functions are compiled when first needed, never while a graph is
  // recorded (the launches then go one by one).
  const Launch* single_launch(NodeId id) const;
  struct PendingLaunch {
    const Launch* launch = nullptr;
    void* function = nullptr;
    DevicePtr out = 0;
    std::vector<DevicePtr> in;
    std::pair<int64_t, int64_t> shape;
    DevicePtr scatter_dst = 0, scatter_idx = 0;  // Launch::scatter_out's parameters
  };
  static constexpr size_t kMaxJoined = 4;
  std::vector<PendingLaunch> pending_;
  std::vector<DeviceBuffer> held_;
  void flush_pending();
  void end_pending();  // forgets the held launches (made or dropped) and gives back the held buffers
  void push_args(std::vector<void*>& args, const PendingLaunch& l);  // its (out, inputs, dims)
  // Holds X with the pending launches where it may join them (else launches those first and
  // holds X alone).
  void hold_launch(const PendingLaunch& x);
  bool capturing_ = false;  // this run is being recorded as a CUDA graph
  bool may_join(const PendingLaunch& x) const;
  // The joined function of the held launches, compiled on first need; null where it cannot be
  // made or a graph is being recorded.
  void* joined_launch_function();
  std::map<std::vector<std::string>, void*> joined_functions_;  // by the held functions; null: could not be made
  std::vector<std::unique_ptr<Module>> joined_modules_;
  std::string cache_dir_;
  int64_t launches_paired_ = 0, joins_compiled_ = 0;
  // Blocks of kBlockThreads for a grid-stride loop over `threads` threads, at most
  // `blocks_per_sm` (a launch's own cap; 0: options_.blocks_per_sm) per multiprocessor;
  // `whole_waves`: rounded up to a multiple of the multiprocessors first (Launch::spread).
  int64_t grid_stride_blocks(int64_t threads, int blocks_per_sm = 0, bool whole_waves = false) const;
  // Whether an attention node runs its tiled (prefill) launch at the current dims.
  bool use_tiled(const NodeKernels& k);
  // Whether a launch may run here (a tensor-core schedule needs sm_80 and the option on).
  bool offered(const Launch& l) const;
  // Which of a node's variants to run (0: launches.back(), v: alternatives[v - 1]).
  size_t variant(const NodeKernels& k, void* first, const std::vector<void*>& alternatives, DevicePtr out,
                 const std::vector<DevicePtr>& in, bool capturing);
  // Variant v's launch (0: launches.back(), v: alternatives[v - 1]).
  static const Launch& variant_launch(const NodeKernels& k, size_t v) { return v == 0 ? k.launches.back() : k.alternatives[v - 1]; }
  // A schedule's name in the schedule cache: its function, and its grid cap where it has one
  // (one function may be offered on several caps, gen::grid_caps).
  static std::string schedule_name(const Launch& l) {
    return l.blocks_per_sm > 0 ? l.function + "@" + std::to_string(l.blocks_per_sm) : l.function;
  }
  // One form of a linear layer's GEMV (its plain schedules, or NodeKernels::normed or ::gated)
  // with its loaded functions; run_form times its schedules once (variant) and launches the chosen.
  struct GemvForm {
    const NodeKernels* kernels = nullptr;
    void* function = nullptr;
    std::vector<void*> alternatives;
  };
  GemvForm load_form(const NodeKernels* kernels, const std::map<std::string, void*>& by_name) const;
  void run_form(const GemvForm& f, DevicePtr out, const std::vector<DevicePtr>& in, bool capturing);
  // Linear layers that read the same activations run as one GEMV over their weights, which
  // share one allocation, laid end to end (emit_grouped_linear). LUMINAL_CUDA_GROUP_LINEAR=0
  // turns it off.
  struct LinearGroup {
    std::vector<NodeId> members, weights;  // weights[i]: members[i]'s weight input
    std::vector<size_t> offsets;           // of each weight in `base`, then the total
    NodeKernels kernels;
    // The forms of its GEMV, by [normed][gated]: kernels, .normed, .gated, .normed->gated (null
    // where there is none); set once groups_ is complete (it never grows after, so the pointers
    // stay valid).
    GemvForm forms[2][2];
    bool gated = false;  // this run's GEMV stores the gated product (kernels.gated_node's value)
    DevicePtr base = 0;
    bool active = false;                // this run uses it
    bool on_library = false;            // this run's members go to cuBLASLt (many rows), else the GEMV
    DType out_type = DType::F32;        // this run's outputs: bf16 where narrow_group says so
    std::vector<DeviceBuffer> pending;  // this run's outputs, by member
  };
  std::vector<LinearGroup> groups_;
  std::map<NodeId, size_t> group_of_member_, group_of_weight_;
  // The LUMINAL_CUDA_* environment overrides of options_ (they decide what is compiled).
  void read_env_options();
  void find_linear_groups();
  bool group_usable(LinearGroup& g);  // also decides g.on_library
  bool weights_in_place(const LinearGroup& g) const;  // every member's weight at its offset in g.base
  void run_group(LinearGroup& g, DevicePtr activations, NodeId producer, bool capturing);
  // The gated product that is a library group's only reader, where the group's GEMMs may store
  // bf16 for it (bf16 activations; it reads every member, and them alone, as words_narrow's
  // narrow inputs, and stores words this run): a prefill's gate and up products then cross
  // memory in half the bytes. narrow_readers_: such readers this run.
  std::optional<NodeId> narrow_group(const LinearGroup& g);
  std::set<NodeId> narrow_readers_;
  std::map<Choice, size_t> chosen_;  // (function, work) -> variant
  // Refining choices in the step (CudaOptions::refine_in_step, cuda_step_refine.cpp): each
  // choice's variants by their tuning time, fastest first; the choices a capture follows; those
  // refined already; whether replaying a run repeats it (refine_safe, decided once).
  std::map<Choice, std::vector<std::pair<double, size_t>>> timings_;
  std::map<Choice, std::vector<std::string>> variant_functions_;  // schedule names by variant, of the choices met here
  ScheduleCache schedules_;  // CudaOptions::schedule_cache
  int64_t schedules_timed_ = 0, schedules_from_cache_ = 0;
  std::set<Choice> capture_choices_, refined_;
  std::optional<bool> replays_repeat_;
  int64_t refinements_tried_ = 0, refinements_kept_ = 0;
  static constexpr int kRefineAtReplay = 4;  // a decode's sixth step (tests run a graph fewer times)
  void refine_graph(const std::vector<int64_t>& key);
  void drop_graph(RecordedGraph& g);
  std::map<std::vector<int64_t>, bool> concurrent_chosen_;  // (rows, k, n of each member) -> side by side
  std::map<NodeId, std::vector<void*>> alternative_functions_;
  std::map<NodeId, GemvForm> normed_forms_;  // a linear layer's NodeKernels::normed
  // Whether RMS norm `id` launches nothing this run: every reader is a linear layer (or group)
  // with normed schedules that runs on the GEMV, or an MoE's gate/up experts that run their
  // gated form with normed schedules (gates_experts). deferred_norms_: such norms this run, whose
  // readers take their input (ptr_of) and gain (gemv_gain_) instead.
  bool defers_norm(NodeId id);
  std::set<NodeId> deferred_norms_;
  DevicePtr gemv_gain_ = 0;
  int64_t norms_folded_ = 0, products_folded_ = 0, experts_summed_ = 0;
  // Whether expert product `id` launches nothing this run: its one reader, a sum over the
  // experts, has expert_sum schedules and the rows are few. deferred_products_: such products
  // this run, whose inputs stay live for their sum, which takes them after its own.
  bool sums_experts(NodeId id);
  std::set<NodeId> deferred_products_;
  std::map<NodeId, GemvForm> expert_sum_forms_;  // a sum's NodeKernels::expert_sum
  std::map<NodeId, GemvForm> expert_sum_early_forms_;  // and its expert_sum_early
  // Every launch counted (never set back, unlike launches_ around a step's refinement), and its
  // value right after the last gated gate/up experts' GEMV (-1: none yet): an expert sum
  // launched while it still holds takes its early form.
  int64_t launch_serial_ = 0, gated_experts_at_ = -1;
  int64_t expert_sums_early_ = 0;
  // The sum that gate/up experts `id` and its down experts compute in one kernel this run
  // (experts_in_one): one token's row, sm_90, the sum's and the down product's other inputs
  // `ready` now. It then stores the sum (experts_outputs_), and the gated product and the down
  // product are never made (experts_fused_products_: gated products whose inputs are gone).
  std::optional<NodeId> experts_in_one_sum(NodeId id, bool normed, const std::function<bool(NodeId)>& ready);
  std::map<NodeId, GemvForm> experts_in_one_forms_, experts_in_one_normed_forms_;  // by the sum
  std::map<NodeId, NodeId> experts_sum_of_gate_up_;
  std::map<NodeId, DeviceBuffer> experts_outputs_;
  std::set<NodeId> experts_fused_products_;
  int64_t experts_in_one_run_ = 0;
  // Whether group g's GEMV stores its gated product this run (gated_in_gemv; its GEMV form has one).
  bool gated_run(const LinearGroup& g, bool normed);
  std::map<NodeId, DeviceBuffer> gated_outputs_;  // a gated product's value, stored by its group's GEMV
  // Whether ScaledMatmul `id` runs its gated form this run (gated_in_gemv): its one reader is
  // the gated product it has the form for, and the rows are a decode's few, listed per expert.
  // It then writes the product's value (gated_outputs_), and its own is never made.
  bool gates_experts(NodeId id);
  std::map<NodeId, GemvForm> gated_expert_forms_;  // a ScaledMatmul's NodeKernels::gated
  // Its gated->normed: the same reading the norm that gives its activations (defers_norm).
  std::map<NodeId, GemvForm> gated_expert_normed_forms_;
  // Whether Softmax `id` launches nothing this run (softmax_in_readers): one row at this run's
  // dims, and its first reader has a softmax_fold form. folded_softmaxes_: such softmaxes this
  // run, whose buffers that reader's block 0 fills (softmax_out_) and whose inputs stay live
  // until it has run.
  bool folds_softmax(NodeId id);
  std::set<NodeId> folded_softmaxes_;
  std::vector<void*> softmax_fold_functions_;  // by node: its NodeKernels::softmax_fold
  DevicePtr softmax_out_ = 0;
  int64_t softmaxes_folded_ = 0;
  // Where node `id`'s kernel stores its value into Scatter k.scatter_node's destination this
  // run (scatter_in_producers): the Scatter updates its destination in place, its index is
  // computed already, and its index and update read their buffers in order at this run's dims
  // (so the update's element z goes to index[z]). Its (destination, index), else nullopt.
  // folded_scatters_: such Scatters this run, which then launch nothing.
  std::optional<std::pair<DevicePtr, DevicePtr>> scatter_store_of(NodeId id, const NodeKernels& k, const std::vector<int>& uses,
                                                                  const std::function<std::optional<DevicePtr>(NodeId)>& ready);
  std::set<NodeId> folded_scatters_;
  int64_t scatters_folded_ = 0;
  // Whether a view reads its source in order from its start at this run's dims (then a linear
  // layer's scratch copy of its activations is skipped).
  bool reads_in_order(const View& v);
  bool scatter_in_place(NodeId id, const Node& n, const std::vector<int>& uses);
  std::map<NodeId, bool> scatter_plain_;
  // Small groups (cuda_small_groups.cpp). Each launches at the turn of its first member that
  // comes after every leaf in the plan's order (launch_at); the members before it launch
  // nothing then, so no node outside the group may read a member before that turn (else the
  // group never runs: valid). active: this run takes it (runs_small_group, decided at its
  // first member's turn).
  struct SmallGroupRun {
    bool valid = false, active = false;
    NodeId launch_at = 0;
    void* function = nullptr;
    // This run's launch waits for its fold reader (SmallGroup::fold_reader), which runs the
    // group inside its gated GEMV or, where it cannot, launches the group first; until then the
    // members' inputs stay live (their buffers are written only then).
    bool deferred = false;
    // This run's group ran in its producer's last block (SmallGroup::tail_producer): its
    // members have their buffers, and launch_at launches nothing.
    bool in_producer = false;
  };
  std::vector<SmallGroupRun> small_group_runs_;
  std::map<NodeId, size_t> small_group_of_;  // member -> its group, for valid groups
  std::vector<size_t> position_;             // a node's place in order_
  int64_t small_groups_run_ = 0, small_groups_folded_ = 0, small_groups_in_producers_ = 0;
  int64_t attention_norms_folded_ = 0;
  // The attentions' folded one-launch functions (NodeKernels::once_folded), by the attention.
  std::map<NodeId, void*> once_folded_functions_;
  // This run's attentions that compute their norms and new rows, and each fold's other nodes
  // (q norm, key norm, the two cache writes) with its attention; the norms it skipped (their
  // inputs stay live until it runs).
  std::map<NodeId, NodeId> attention_fold_of_;
  std::set<NodeId> norms_in_attention_;
  void plan_attention_folds();
  // The gated experts' GEMV forms with their scales' group inside (NodeKernels::routed), by the
  // gate/up node; fold_args_: a folded launch's group outputs and leaves (before the dims).
  std::map<NodeId, GemvForm> routed_forms_, routed_normed_forms_;
  std::vector<DevicePtr> fold_args_;
  // The routers' normed GEMV forms with their group in the last block (NodeKernels::group_tail),
  // by the router, and that group.
  std::map<NodeId, GemvForm> tail_forms_;
  std::map<NodeId, size_t> tail_group_of_;
  std::map<NodeId, size_t> fold_group_of_;  // gate/up experts -> the group their routed forms run (fold_small_groups)
  // Routers run inside their o projection's launch (CudaOptions::routers_through_o), by the o
  // projection: its twin form, the group's function that scales the logits, the function that
  // makes M and A, and those weights (M then A) with the versions of the weights they came from.
  struct RouterFold {
    size_t group = 0;
    GemvForm form;
    void* group_function = nullptr;
    void* prep_function = nullptr;
    DevicePtr weights = 0;
    std::array<uint64_t, 3> versions{};  // of W_r, the gain and W_o
  };
  std::map<NodeId, RouterFold> router_folds_;
  std::map<NodeId, size_t> routers_in_o_;  // this run's: router -> its group
  int64_t routers_through_o_ = 0, routing_groups_in_o_ = 0;
  void prepare_router_folds(const std::map<std::string, void*>& by_name);  // after prepare_small_groups
  // The group whose router o's launch computes this run, its M and A made if need be; nullopt
  // where it does not (not a decode, o's residual not on its GEMV, the group not launched).
  std::optional<size_t> router_fold_at(NodeId o, bool gemv_residual, bool capture);
  void prepare_small_groups(const std::map<std::string, void*>& by_name);  // after order_ and reader_lists_
  bool runs_small_group(size_t g);
  // Whether the norms the group's linear members fold in were deferred this run (see there).
  bool small_group_norms_deferred(const SmallGroup& grp) const;
  // What a group launched at node `at` asks L2 for (SmallGroup::prefetch): the weights of the
  // first linear layer (Matmul) after it in the plan's order, its whole group's where its
  // members' weights lie end to end, at most options_.group_prefetch_bytes, a multiple of 16
  // bytes; {0, 0} where there is none.
  std::pair<DevicePtr, uint64_t> weights_after(NodeId at) const;
  // Attention's one-launch split (NodeKernels::once) counts finished blocks per row group here:
  // `count` uint32 values, zero (the kernel leaves them so), at a fixed address per node.
  DevicePtr zeroed_counters(NodeId id, int64_t count);
  std::map<NodeId, DeviceBuffer> counters_;
  std::vector<DevicePtr> retired_counters_;  // outgrown, still read by graphs recorded before
  // Runs a linear layer on cuBLASLt when it has enough rows; false to take the generated kernel.
  // `producer`: the node whose value is the activations (its words, if it stored them).
  bool run_linear(const LinearOperands& l, DevicePtr out, const std::vector<DevicePtr>& in, NodeId producer, bool accumulate = false);
  // The operand whose buffer linear layer `id`'s GEMM may add into (fold_residuals), given the
  // run's remaining readers and live buffers; folded_: such an Add -> its GEMM.
  std::optional<NodeId> residual_of(NodeId id, const std::vector<int>& uses, const std::vector<std::optional<DeviceBuffer>>& live);
  std::map<NodeId, NodeId> folded_;
  int64_t residuals_folded_ = 0, scratch_copies_skipped_ = 0, launches_ = 0, narrowed_groups_ = 0;
  // Whether this run's sizes and alignments take `l` to cuBLASLt.
  bool on_library(const LinearOperands& l);
  // Whether every schedule of a linear layer's GEMV takes a residual (Launch::residual_in); then
  // residual_of folds the Add that reads it in decode too, and gemv_residual_ is what launch()
  // passes them (null outside such a node).
  bool gemv_adds_residual(const NodeKernels& k);
  DevicePtr gemv_residual_ = 0;
  // A linear layer's f32 activations as bf16 hi (+ lo, unless options_.bf16_activations), and
  // the GEMM that multiplies them by a bf16 weight (in place at `weight` + l.w_offset).
  struct Bf16Activations {
    DeviceBuffer hi;
    std::optional<DeviceBuffer> lo;
  };
  Bf16Activations take_bf16(int64_t m, int64_t k);  // hi, and lo unless bf16_activations
  Bf16Activations to_bf16(const LinearOperands& l, DevicePtr activations);
  // Whether a library group's GEMMs run side by side (options_.concurrent_group_gemms), by shape.
  bool group_concurrent(LinearGroup& g, const Bf16Activations& a, bool capturing);
  void group_gemms(LinearGroup& g, const Bf16Activations& a, bool side);
  // `side`: on the context's side stream (between a fork and a join), where the shape allows.
  void bf16_gemm(const LinearOperands& l, const Bf16Activations& a, DevicePtr weight, DevicePtr out, bool accumulate = false,
                 bool side = false, DType out_type = DType::F32);
  void give_back(Bf16Activations& a);
  // A producer with NodeKernels::words stores them when every reader is a linear layer that
  // this run takes to the library with the producer's whole value as its [m, k] activations:
  // then its readers take `words_` (hi is also the producer's live buffer) and convert nothing.
  std::optional<std::pair<int64_t, int64_t>> words_shape(NodeId id);  // [m, k], where they may
  // Runs node id's words launch (NodeKernels::words) on inputs `in` into new [m, cols] words.
  Bf16Activations store_words(const NodeKernels& k, NodeId id, const std::vector<DevicePtr>& in, int64_t m, int64_t cols);
  // Whether a linear layer's scratch copy stores words this run (it goes to the library).
  bool scratch_words(const std::optional<LinearOperands>& l, DType out_dtype);
  std::vector<std::vector<NodeId>> reader_lists_;
  std::vector<void*> words_functions_, words_narrow_functions_;  // by node
  std::map<NodeId, Bf16Activations> words_;
  int64_t words_stored_ = 0;

  Graph graph_;
  Context& ctx_;
  PlanKernels kernels_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::vector<std::vector<void*>> functions_by_node_;
  size_t functions_ = 0;
  void* rows_to_bf16_ = nullptr;
  void* argmax_ = nullptr;
  void* evict_read_ = nullptr;  // lm_evict_read, for timing schedules cold
  DevicePtr argmax_out_ = 0;  // two int64 slots
  std::pair<DevicePtr, int64_t> last_row(const std::string& output) const;
  void launch_argmax(const std::string& output, int slot, DevicePtr token);
  bool cublaslt_ = false;  // cuBLASLt loaded; off with LUMINAL_CUBLASLT=0
  CudaOptions options_;
  // From this many rows a linear layer runs on the tensor cores (bf16 activations), below it
  // on the generated GEMV, which reads the weights once in full lines.
  static constexpr int64_t kLibraryMinRows = 16;
  static constexpr int64_t kExpertSumMaxRows = 8;  // sums_experts: rows an expert sum takes at most
  double compile_ms_ = 0;
  GraphStats graph_stats_;
  bool from_cache_ = false;
  std::map<NodeId, DeviceBuffer> inputs_;
  std::map<std::string, DeviceBuffer> outputs_;
  std::multimap<size_t, DeviceBuffer> free_;  // intermediates' memory, by size
  std::map<std::string, int64_t> explicit_dims_;
  DimMap dims_;
  std::vector<std::string> graph_dims_;
  std::vector<NodeId> order_;  // the plan's topological order, with readers_ and reader_lists_ set when made
  bool analysed_ = false;      // invariants_ analysed (at the first run)
  std::vector<int> readers_;
  // Values computed from weights and constants alone (runtime/run_invariants.h) are kept on the
  // device from run to run until an input they read changes: about half of a decode step's
  // nodes (index tables, casts of norm weights, masks of constant shape).
  RunInvariants invariants_;
  struct Kept {
    DeviceBuffer value;
    std::vector<uint64_t> versions;
  };
  std::map<NodeId, Kept> kept_;
  std::map<NodeId, Kept>::iterator forget_kept(std::map<NodeId, Kept>::iterator it);  // frees it; the next one
  std::map<NodeId, uint64_t> input_versions_;
  size_t kept_bytes_ = 0;
  static constexpr size_t kMaxKeptBytes = size_t(512) << 20;
  std::vector<uint64_t> versions_of(NodeId id) const;
  bool profiling_ = false;
  std::map<std::string, ProfileEntry> profile_;
};

}  // namespace luminal::cuda
