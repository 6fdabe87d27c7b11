// The CUDA backend. Without a GPU: the kernels of every case graph, raw (primitives only) and
// compiled (kernel nodes), and of every fixture model's plan, compile with NVRTC for sm_90, and
// asking for the backend fails with a clear reason. With a GPU: each case runs on the device
// and agrees with the reference interpreter at several values of its dynamic dim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "backends/cuda/cuda_attention_parts.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_plan_timer.h"
#include "backends/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "core/error.h"
#include "cuda/cuda_cases.h"
#include "egraph/moe_experts_case.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"
#include "runtime/interpreter.h"

namespace luminal::cuda {
namespace {

using testing::Case;

bool have_nvrtc() { return nvrtc_unavailable_reason().empty(); }
bool have_gpu() { return unavailable_reason().empty() && have_nvrtc(); }

using testing::compiled;

int count_kernels(const Graph& g, const std::string& kernel) {
  int n = 0;
  for (size_t id = 0; id < g.size(); ++id) n += g.node(static_cast<NodeId>(id)).op == OpKind::Kernel && g.node(static_cast<NodeId>(id)).kernel == kernel;
  return n;
}

TEST(CudaCodegen, EveryCaseCompilesWithNvrtc) {
  if (!have_nvrtc()) GTEST_SKIP() << nvrtc_unavailable_reason();
  for (Case& c : testing::cases()) {
    for (const Graph* g : {&c.graph}) {
      PlanKernels raw = generate_plan_kernels(*g);
      EXPECT_NO_THROW(nvrtc_compile(raw.source(), "sm_90", "")) << c.name << " (raw)";
      const Graph compiled_plan = compiled(*g);
      PlanKernels plan = generate_plan_kernels(compiled_plan);
      EXPECT_NO_THROW(nvrtc_compile(plan.source(), "sm_90", "")) << c.name << " (compiled)";
      if (c.name == "rotary") {  // both head sizes, both forms: what CasesMatchTheReference checks
        EXPECT_EQ(count_kernels(compiled_plan, "RMSNormRotary"), 2);
        EXPECT_EQ(count_kernels(compiled_plan, "Rotary"), 2);
      }
    }
  }
}

using testing::fixture_config;

// Every model family's plan (with Matmul, Attention, RMSNorm, Rotary, fused kernels, the KV
// cache's scatters): all of its kernels compile.
TEST(CudaCodegen, EveryFixtureModelPlanCompilesWithNvrtc) {
  if (!have_nvrtc()) GTEST_SKIP() << nvrtc_unavailable_reason();
  int attention = 0, matmul = 0;
  for (const char* name : {"llama-tiny", "qwen3-tiny", "gemma3-tiny", "gemma4-tiny", "qwen3-moe-tiny", "mixtral-tiny"}) {
    Graph g;
    DecoderGraphOptions o;
    o.context = 32;
    build_decoder(g, fixture_config(name), o);
    CompileOptions co;
    Graph plan = compile(g, co).plan;
    attention += count_kernels(plan, "Attention");
    matmul += count_kernels(plan, "Matmul");
    PlanKernels k = generate_plan_kernels(plan);
    EXPECT_GT(k.functions.texts.size(), 5u) << name;
    // PTX lives in the prelude's helpers, never in a generated body: the CPU emulator
    // (tests/cuda_emulator) replaces the helpers and compiles the bodies as host C++.
    static const std::regex inline_asm(R"(\basm\s*(volatile\s*)?\()");
    for (size_t i = 0; i < k.functions.texts.size(); ++i)
      EXPECT_FALSE(std::regex_search(k.functions.texts[i], inline_asm)) << name << ": inline PTX in " << k.functions.names[i];
    // In parts, as the executor compiles them (each part carries the prelude).
    for (const std::string& part : k.module_sources(2)) EXPECT_NO_THROW(nvrtc_compile(part, "sm_90", "")) << name;
  }
  EXPECT_GT(attention, 0);
  EXPECT_GT(matmul, 0);
}

// The kernels of a fixture model's compiled plan (context 32, layers not deduplicated).
PlanKernels fixture_plan_kernels(const std::string& name) {
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  build_decoder(g, fixture_config(name), o);
  return generate_plan_kernels(compiled(g));
}

// Two plans that differ in one function compile to modules that differ in one part only: the
// search's candidates find the rest in the compiled-kernel cache. Every function is in one part.
TEST(CudaCodegen, PlansThatDifferInOneFunctionDifferInOnePart) {
  PlanKernels k = fixture_plan_kernels("llama-tiny");
  ASSERT_GE(k.functions.texts.size(), 12u);
  for (size_t parts : {1, 3, 8}) {
    const std::vector<std::string> before = k.module_sources(parts);
    for (size_t i = 0; i < k.functions.names.size(); ++i) {
      int holders = 0;
      for (const std::string& m : before) holders += m.find(k.functions.names[i] + "(") != std::string::npos;
      EXPECT_EQ(holders, 1) << k.functions.names[i] << " in " << parts << " parts";
    }
    PlanKernels other = k;
    other.functions.names.insert(other.functions.names.begin(), "lm_Extra_0123456789abcdef");
    other.functions.texts.insert(other.functions.texts.begin(), "extern \"C\" __global__ void lm_Extra_0123456789abcdef() {}\n");
    const std::vector<std::string> after = other.module_sources(parts);
    int changed = 0;
    for (size_t p = 0; p < parts; ++p) changed += before[p] != after[p];
    EXPECT_EQ(changed, 1) << parts << " parts";
  }
}

// A plan run with its first schedules only (the search's candidates) keeps every function a
// launch uses, none that only alternatives used, and still compiles.
TEST(CudaCodegen, DroppingAlternativesKeepsWhatLaunchesUse) {
  PlanKernels k = fixture_plan_kernels("qwen3-moe-tiny");
  // Every node's forms that fold something in (a norm, the gated experts' product, an expert
  // sum, in both its forms), and theirs (the gated experts' normed form): each keeps its first
  // schedule.
  auto forms_of = [](const NodeKernels& n) {
    std::vector<const NodeKernels*> out;
    for (const auto& f : {n.normed, n.gated, n.expert_sum, n.expert_sum_early})
      if (f) out.push_back(f.get());
    for (size_t i = 0; i < out.size(); ++i)
      for (const auto& f : {out[i]->normed, out[i]->gated})
        if (f) out.push_back(f.get());
    return out;
  };
  std::set<std::string> only_alternatives;
  int normed_experts = 0;
  for (const auto& n : k.per_node)
    if (n) {
      for (const Launch& l : n->alternatives) only_alternatives.insert(l.function);
      for (const NodeKernels* form : forms_of(*n))
        for (const Launch& l : form->alternatives) only_alternatives.insert(l.function);
      normed_experts += n->gated && n->gated->normed;
    }
  EXPECT_GT(normed_experts, 0);  // the gate/up experts reading the post-attention norm
  int sums = 0;
  for (const auto& n : k.per_node)
    if (n) {
      for (const Launch& l : n->launches) only_alternatives.erase(l.function);
      for (const NodeKernels* form : forms_of(*n)) only_alternatives.erase(form->launches[0].function);
      if (n->softmax_fold) only_alternatives.erase(n->softmax_fold->launches[0].function);
      sums += n->expert_sum != nullptr;
    }
  EXPECT_GT(sums, 0);
  ASSERT_GT(only_alternatives.size(), 10u);  // the GEMV and ScaledMatmul schedules
  const size_t before = k.functions.names.size();
  k.drop_alternatives();
  EXPECT_EQ(k.functions.names.size(), before - only_alternatives.size());
  const std::set<std::string> kept(k.functions.names.begin(), k.functions.names.end());
  for (const auto& n : k.per_node) {
    if (!n) continue;
    EXPECT_TRUE(n->alternatives.empty());
    for (const Launch& l : n->launches) EXPECT_TRUE(kept.count(l.function)) << l.function;
    std::vector<const NodeKernels*> forms = forms_of(*n);
    if (n->softmax_fold) forms.push_back(n->softmax_fold.get());
    for (const NodeKernels* form : forms) {
      EXPECT_TRUE(form->alternatives.empty());
      EXPECT_TRUE(kept.count(form->launches[0].function)) << form->launches[0].function;
    }
    for (const std::optional<Launch>& l : {n->tiled, n->tiled_mma}) {
      if (l) {
        EXPECT_TRUE(kept.count(l->function)) << l->function;
      }
    }
  }
  if (have_nvrtc()) {
    EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", ""));
  }
}

// A decode's norms before q/k/v, gate/up and the LM head are read by linear layers alone: those
// layers, and the groups of siblings among them, also have schedules that fold the norm in
// (reading its input and gain), one for each of their own schedules.
TEST(CudaCodegen, LinearLayersReadingANormAlsoFoldItIn) {
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  const ModelConfig cfg = fixture_config("llama-tiny");
  build_decoder(g, cfg, o);
  Graph plan = compile(g, CompileOptions{}).plan;
  PlanKernels k = generate_plan_kernels(plan);
  std::map<NodeId, std::vector<NodeId>> readers_of_norm;
  for (NodeId id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(id);
    if (!k.per_node[id] || !k.per_node[id]->normed) continue;
    const Node& p = plan.node(n.inputs[0].src);
    EXPECT_EQ(p.kernel, "RMSNormMul");
    readers_of_norm[n.inputs[0].src].push_back(id);
    const NodeKernels& normed = *k.per_node[id]->normed;
    // Each schedule twice: the norm inline, then staged (a tiny model's rows fit at any R).
    EXPECT_EQ(normed.alternatives.size(), 2 * k.per_node[id]->alternatives.size() + 1);
    EXPECT_TRUE(normed.launches[0].gain_in);
  }
  // Two norms a layer (q/k/v; gate/up). Not the final one: it reads the last row of h through a
  // view masked by max(0, 1 - seq), which is not one plain layer.
  EXPECT_EQ(readers_of_norm.size(), static_cast<size_t>(2 * cfg.layers));
  size_t groups = 0, gated = 0;
  for (const auto& [norm, readers] : readers_of_norm) {
    if (readers.size() < 2) continue;
    auto grouped = emit_grouped_linear(plan, readers, plan.dims(), k.functions);
    ASSERT_TRUE(grouped.has_value());
    ASSERT_TRUE(grouped->normed != nullptr);
    EXPECT_EQ(grouped->normed->alternatives.size(), 2 * grouped->alternatives.size() + 1);
    ++groups;
    // gate and up: their one reader, the gated product, is stored by the group's GEMV instead,
    // normed or not, on the schedules whose units take an even number of columns.
    if (readers.size() != 2) continue;
    ASSERT_TRUE(grouped->gated != nullptr && grouped->normed->gated != nullptr);
    EXPECT_EQ(plan.node(grouped->gated_node).kernel, "Fused");
    EXPECT_EQ(grouped->normed->gated_node, grouped->gated_node);
    EXPECT_EQ(grouped->gated->alternatives.size(), 6u);
    EXPECT_EQ(grouped->normed->gated->alternatives.size(), 13u);
    EXPECT_TRUE(grouped->normed->gated->launches[0].gain_in);
    ++gated;
  }
  EXPECT_EQ(groups, static_cast<size_t>(2 * cfg.layers));
  EXPECT_EQ(gated, static_cast<size_t>(cfg.layers));
  if (have_nvrtc()) {
    EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", ""));
  }
}

TEST(CudaCodegen, IdenticalLayersShareFunctions) {
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  build_decoder(g, fixture_config("llama-tiny"), o);
  Graph plan = compile(g, CompileOptions{}).plan;
  PlanKernels k = generate_plan_kernels(plan);
  size_t launches = 0;
  for (const auto& n : k.per_node)
    if (n) launches += n->launches.size() + n->alternatives.size();
  EXPECT_LT(k.functions.texts.size(), launches);  // the layers' kernels (and GEMV schedules) are written once
  // Linear layers read their weights through plain strided views: the vectorised path.
  EXPECT_NE(k.source().find("lm_vec"), std::string::npos);
  // Attention reads the KV cache through its strides.
  EXPECT_NE(k.source().find("lm_ksp"), std::string::npos);
  // The causal mask is read through one index per query row, not one per key.
  EXPECT_NE(k.source().find("lm_mb"), std::string::npos);
  // Prefill attention has its tiled (flash-style) kernel, and the GEMVs have variants to time.
  size_t tiled = 0, variants = 0;
  for (const auto& n : k.per_node)
    if (n) tiled += n->tiled.has_value(), variants += !n->alternatives.empty();
  EXPECT_GT(tiled, 0u);
  EXPECT_GT(variants, 0u);
  EXPECT_NE(k.source().find("lm_ps"), std::string::npos);
  // Every function waits for the kernel before it (launched overlapping, it may start early),
  // and does so before its blocks past the work return; a GEMV's weight prefetch, where one is
  // budgeted (none by default since session 27), comes before that.
  for (const std::string& t : k.functions.texts) {
    const size_t wait = t.find("lm_grid_wait();");
    ASSERT_NE(wait, std::string::npos) << t;
    EXPECT_EQ(t.find("lm_grid_wait();", wait + 1), std::string::npos) << t;
    EXPECT_LT(t.find("lm_grid_release();"), wait) << t;
    const size_t early = t.find("if (blockIdx.x >=");
    if (early != std::string::npos) {
      EXPECT_LT(wait, early) << t;
    }
    if (const size_t prefetch = t.find("lm_prefetch_l2("); prefetch != std::string::npos) {
      EXPECT_LT(prefetch, wait) << t;
    }
  }
}

// Every Matmul of a real decoder plan is a linear layer for the fast paths (the GEMV, cuBLASLt):
// one that is not runs on the generic kernel, orders of magnitude slower (docs/lessons.md).
// A fixture decoder's plan with bf16 weights, as the CLI compiles it.
using testing::bf16_decoder_plan;

// How many of a plan's Matmul nodes there are, and how many are linear layers for the fast paths.
std::pair<int, int> matmuls_and_linear(const Graph& plan, const PlanKernels& k) {
  int matmuls = 0, linear = 0;
  for (size_t id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(static_cast<NodeId>(id));
    if (n.op != OpKind::Kernel || n.kernel != "Matmul") continue;
    ++matmuls;
    linear += k.per_node[id]->linear.has_value();
  }
  return {matmuls, linear};
}

TEST(CudaCodegen, EveryMatmulOfADecoderTakesTheLinearPath) {
  for (const char* name : {"llama-tiny", "qwen3-tiny", "gemma3-tiny"}) {
    Graph plan = bf16_decoder_plan(name);
    auto [matmuls, linear] = matmuls_and_linear(plan, generate_plan_kernels(plan));
    EXPECT_GT(matmuls, 0) << name;
    EXPECT_EQ(linear, matmuls) << name;
  }
}

// An MoE decoder's expert products are ScaledMatmuls on the GEMV's schedules (alternatives to
// time), not the generic kernel; and its other Matmuls are linear layers as above.
TEST(CudaCodegen, MoeExpertsTakeTheScaledGemv) {
  Graph plan = bf16_decoder_plan("qwen3-moe-tiny");
  PlanKernels k = generate_plan_kernels(plan);
  int scaled = 0, gemv = 0;
  for (size_t id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(static_cast<NodeId>(id));
    if (n.op != OpKind::Kernel || n.kernel != "ScaledMatmul") continue;
    ++scaled;
    gemv += !k.per_node[id]->alternatives.empty();
  }
  EXPECT_EQ(scaled, 2 * fixture_config("qwen3-moe-tiny").layers);  // gate/up and down, each layer
  EXPECT_EQ(gemv, scaled);
  auto [matmuls, linear] = matmuls_and_linear(plan, k);
  EXPECT_GT(matmuls, 0);
  EXPECT_EQ(linear, matmuls);
}

// Each layer's gate/up experts, whose one reader is the gated product act(gate) * up, also
// have schedules that store that product (NodeKernels::gated); the down experts, read by their
// sum, do not.
TEST(CudaCodegen, MoeGateUpExpertsCanStoreTheirGatedProduct) {
  Graph plan = bf16_decoder_plan("qwen3-moe-tiny");
  PlanKernels k = generate_plan_kernels(plan);
  int gated = 0;
  for (size_t id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(static_cast<NodeId>(id));
    if (n.op != OpKind::Kernel || n.kernel != "ScaledMatmul" || !k.per_node[id]->gated) continue;
    ++gated;
    const Node& p = plan.node(k.per_node[id]->gated_node);
    EXPECT_EQ(p.kernel, "Fused");
    ASSERT_EQ(p.inputs.size(), 2u);
    EXPECT_EQ(p.inputs[0].src, static_cast<NodeId>(id));
    EXPECT_EQ(p.inputs[1].src, static_cast<NodeId>(id));
    EXPECT_EQ(p.shape.back().value() * 2, n.shape.back().value());
    EXPECT_FALSE(k.per_node[id]->gated->launches.empty());
  }
  EXPECT_EQ(gated, fixture_config("qwen3-moe-tiny").layers);
}

// Within 2e-5 of each value, relative and absolute (`f32_tol` for f32 outputs in place of 2e-5).
void expect_close(const Buffer& want, const Buffer& got, const std::string& what, double f32_tol = 2e-5);  // below

// Which experts each of `rows` tokens chose, as a decode's routing gives them: two a row.
Buffer two_experts_a_row(int64_t rows, int64_t experts) {
  std::vector<float> pick(static_cast<size_t>(rows * experts), 0.0f);
  for (int64_t t = 0; t < rows; ++t) pick[static_cast<size_t>(t * experts + t % 3)] = pick[static_cast<size_t>(t * experts + 4)] = 1.0f;
  return Buffer::f32(pick, {rows, experts});
}

void set_both(Interpreter& ref, CudaExecutor& cuda, const std::map<std::string, Buffer>& in) {
  for (const auto& [name, b] : in) {
    ref.set_input(name, b);
    cuda.set_input(name, b);
  }
}

// An MoE's gate/up experts storing act(gate) * up themselves (CudaExecutor::gates_experts):
// for a decode's few rows the product launches nothing, for many rows it runs; the values are
// the reference's either way (unchosen experts' rows, scaled by zero, give act(0) * 0).
TEST(CudaBackend, GatedExpertsMatchTheReference) {
  constexpr int64_t E = 6, I = 16, H = 24;
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, H});
  Tensor w = cast(input(g, "w", DType::BF16, {E, 2 * I, H}), DType::F32);
  Tensor chosen = input(g, "chosen", DType::F32, {s, E});
  Tensor xs = expand(unsqueeze(x, 0), {Expr(E), s, Expr(H)}) * unsqueeze(permute(chosen, {1, 0}), 2);
  Tensor gu = matmul(xs, transpose(w, 1, 2));  // [E, s, 2I]
  (silu(slice(gu, -1, 0, I)) * slice(gu, -1, I, 2 * I)).output("act");
  const Graph plan = compiled(g);
  const PlanKernels kernels = generate_plan_kernels(plan);
  int forms = 0;
  for (const auto& k : kernels.per_node) forms += k && k->gated;
  ASSERT_EQ(forms, 1) << plan.dump();
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  for (bool fold : {true, false}) {
    // CUDA cores for the 20 rows too: the tensor cores' split products are exact to 2^-17 each,
    // looser than expect_close (their own tests bound them; the H200 had 3.5e-5 here).
    CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .gated_in_gemv = fold});
    for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{20}}) {
      const std::map<std::string, Buffer> in{{"x", testing::random_buffer(DType::F32, {rows, H}, 31)},
                                             {"w", testing::random_buffer(DType::BF16, {E, 2 * I, H}, 32)},
                                             {"chosen", two_experts_a_row(rows, E)}};
      Interpreter ref(g);
      set_both(ref, cuda, in);
      ref.run();
      const int64_t before = cuda.products_folded();
      for (int rep = 0; rep < 3; ++rep) {  // the second run records a CUDA graph, the third replays it
        cuda.run();
        expect_close(ref.output("act"), cuda.output("act"), "act at s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1));
      }
      EXPECT_EQ(cuda.products_folded() > before, fold && rows <= 8) << "s=" << rows;
    }
  }
}

// The same experts reading a norm, as a decode's gate/up read the post-attention norm beside the
// router: with one or three rows both GEMVs fold the norm in (gated->normed) and it launches
// nothing; at 20 rows, or with the fold off, it runs. Rows of H values, for each of `rows_each`;
// the sums over H in f32 in another order than the reference's, so within 2e-5 · sqrt(H / 24).
void check_normed_gated_experts(int64_t H, const std::vector<int64_t>& rows_each) {
  const double tol = 2e-5 * std::sqrt(static_cast<double>(H) / 24);
  constexpr int64_t E = 6, I = 16;
  Graph g;
  const Expr s = Expr::var("s");
  Tensor x = input(g, "x", DType::F32, {s, H});
  Tensor h = rms_norm(x, cast(input(g, "gain", DType::BF16, {H}), DType::F32), 1e-6);
  linear(h, cast(input(g, "router", DType::BF16, {E, H}), DType::F32), std::nullopt).output("logits");
  Tensor w = cast(input(g, "w", DType::BF16, {E, 2 * I, H}), DType::F32);
  Tensor chosen = input(g, "chosen", DType::F32, {s, E});
  Tensor xs = expand(unsqueeze(h, 0), {Expr(E), s, Expr(H)}) * unsqueeze(permute(chosen, {1, 0}), 2);
  Tensor gu = matmul(xs, transpose(w, 1, 2));
  (silu(slice(gu, -1, 0, I)) * slice(gu, -1, I, 2 * I)).output("act");
  const Graph plan = compiled(g);
  const PlanKernels kernels = generate_plan_kernels(plan);
  int forms = 0;
  std::vector<Launch> schedules;
  for (const auto& k : kernels.per_node)
    if (k && k->gated && k->gated->normed) {
      ++forms;
      schedules = k->gated->normed->launches;
      schedules.insert(schedules.end(), k->gated->normed->alternatives.begin(), k->gated->normed->alternatives.end());
    }
  ASSERT_EQ(forms, 1) << plan.dump();
  // The even-column schedules, then the one-row ones again with their activations loaded early
  // (LinearVariant::early), each function on every grid cap (gen::gated_expert_caps).
  int even = 0, one_row = 0;
  for (const gen::LinearVariant& v : gen::kLinearVariants) even += v.cols % 2 == 0, one_row += v.cols % 2 == 0 && v.rows == 1;
  if (gen::gated_whole_units())
    for (const gen::LinearVariant& v : gen::kGatedExpertVariants) even += v.cols % 2 == 0, one_row += v.cols % 2 == 0 && v.rows == 1;
  const int caps = static_cast<int>(gen::gated_expert_caps().size());
  EXPECT_EQ(static_cast<int>(schedules.size()), caps * (even + one_row));
  std::set<std::string> functions;
  for (const Launch& l : schedules) functions.insert(l.function);
  EXPECT_EQ(static_cast<int>(functions.size()), even + one_row);
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  // The tuner's choice with the norm folded and not, then every function forced on the first
  // of the caps (1 by default: the fewest blocks, so each team takes the most units; -1: tuned).
  std::vector<std::pair<bool, int>> ways{{true, -1}, {false, -1}};
  std::set<std::string> forced;
  for (size_t v = 0; v < schedules.size(); ++v)
    if (forced.insert(schedules[v].function).second) ways.emplace_back(true, static_cast<int>(v));
  for (const auto& [fold, variant] : ways) {
    CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .force_variant = variant, .norm_in_gemv = fold});
    for (int64_t rows : rows_each) {
      const std::map<std::string, Buffer> in{{"x", testing::random_buffer(DType::F32, {rows, H}, 41)},
                                             {"gain", testing::random_buffer(DType::BF16, {H}, 42)},
                                             {"router", testing::random_buffer(DType::BF16, {E, H}, 43)},
                                             {"w", testing::random_buffer(DType::BF16, {E, 2 * I, H}, 44)},
                                             {"chosen", two_experts_a_row(rows, E)}};
      Interpreter ref(g);
      set_both(ref, cuda, in);
      ref.run();
      const int64_t before = cuda.norms_folded();
      for (int rep = 0; rep < 3; ++rep) {  // the second run records a CUDA graph, the third replays it
        cuda.run();
        const std::string at = " at s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1) + (fold ? "" : " (no fold)") +
                               ", variant " + std::to_string(variant);
        expect_close(ref.output("act"), cuda.output("act"), "act" + at, tol);
        expect_close(ref.output("logits"), cuda.output("logits"), "logits" + at, tol);
      }
      EXPECT_EQ(cuda.norms_folded() > before, fold && rows <= 8) << "s=" << rows;
    }
  }
}

TEST(CudaBackend, NormedGatedExpertsMatchTheReference) { check_normed_gated_experts(24, {1, 3, 20}); }

// Rows long enough for every schedule's unrolled passes (kGatedExpertVariants' eight of 256
// values, offered with LUMINAL_CUDA_GATED_WHOLE_UNITS=1 as ctest runs it), twice over, and a tail.
TEST(CudaBackend, NormedGatedExpertsOverLongRowsMatchTheReference) { check_normed_gated_experts(4104, {1, 3}); }

// Each layer's sum over its experts (with the residual add as its epilogue) has the expert-sum
// schedules over the down projection's ScaledMatmul, which it alone reads; the gate/up product,
// read by the activation, is no sum's. The bare case (tests/egraph/moe_experts_case.h) too.
TEST(CudaCodegen, ExpertSumsTakeTheirProductsOperands) {
  Graph plan = bf16_decoder_plan("qwen3-moe-tiny");
  PlanKernels k = generate_plan_kernels(plan);
  std::set<NodeId> summed;
  for (size_t id = 0; id < plan.size(); ++id) {
    if (!k.per_node[id] || !k.per_node[id]->expert_sum) continue;
    const Node& n = plan.node(static_cast<NodeId>(id));
    EXPECT_EQ(n.kernel, "FusedSum");
    EXPECT_EQ(n.inputs.size(), 2u) << "the sum over the experts and the residual";
    const NodeId product = k.per_node[id]->expert_product;
    EXPECT_EQ(n.inputs[0].src, product);
    EXPECT_EQ(plan.node(product).kernel, "ScaledMatmul");
    EXPECT_EQ(k.per_node[id]->expert_sum->alternatives.size() + 1, std::size(gen::kExpertSumVariants));
    summed.insert(product);
  }
  EXPECT_EQ(static_cast<int>(summed.size()), fixture_config("qwen3-moe-tiny").layers);  // the down projections
  Graph bare = compiled(moetest::MoeExperts{}.graph());
  PlanKernels kb = generate_plan_kernels(bare);
  int sums = 0;
  for (size_t id = 0; id < bare.size(); ++id) sums += kb.per_node[id] && kb.per_node[id]->expert_sum;
  EXPECT_EQ(sums, 1) << bare.dump();
}

// Each layer's expert sum also has the experts-in-one kernel (gate/up, their gated product and
// the down products' sum in one launch), with a form that norms as it loads (the post-attention
// norm the router reads too), both through NVRTC; it names the layer's gate/up experts.
TEST(CudaCodegen, MoeExpertsCanRunInOneKernel) {
  Graph plan = bf16_decoder_plan("qwen3-moe-tiny");
  PlanKernels k = generate_plan_kernels(plan);
  int ones = 0;
  FunctionSet theirs;  // the one kernels alone, for NVRTC (the whole plan takes half a minute)
  for (size_t id = 0; id < plan.size(); ++id) {
    if (!k.per_node[id] || !k.per_node[id]->experts_in_one) continue;
    ++ones;
    const NodeKernels& one = *k.per_node[id]->experts_in_one;
    ASSERT_EQ(one.launches.size(), 1u);
    EXPECT_EQ(one.launches[0].shared_bytes.value(), kExpertsInOneSharedBytes);
    ASSERT_TRUE(one.normed) << "the post-attention norm, folded";
    EXPECT_TRUE(one.normed->launches[0].gain_in);
    const NodeId gu = k.per_node[id]->experts_gate_up;
    EXPECT_EQ(plan.node(gu).kernel, "ScaledMatmul");
    ASSERT_TRUE(k.per_node[gu]->gated);
    const NodeId down = k.per_node[id]->expert_product;
    EXPECT_EQ(plan.node(down).inputs[0].src, k.per_node[gu]->gated_node) << "the down experts read the gated product";
    for (const std::string& name : {one.launches[0].function, one.normed->launches[0].function}) {
      const std::string* text = k.functions.find(name);
      ASSERT_NE(text, nullptr) << name;
      if (theirs.find(name)) continue;  // the layers share their functions
      theirs.names.push_back(name);
      theirs.texts.push_back(*text);
    }
  }
  EXPECT_EQ(ones, fixture_config("qwen3-moe-tiny").layers);
  PlanKernels only;
  only.functions = theirs;
  if (have_nvrtc()) {
    EXPECT_NO_THROW(nvrtc_compile(only.source(), "sm_90", ""));
  }
}

// With CodegenOptions::router_in_group each MoE layer's router joins its routing's small group
// as its first member, folding the norm before it (the group reads the norm's x and gain, not
// the norm); the groups compile.
TEST(CudaCodegen, MoeRoutersCanJoinTheirRoutingGroups) {
  for (const char* name : {"qwen3-moe-tiny", "mixtral-tiny"}) {
    Graph g;
    DecoderGraphOptions o;
    o.context = 32;
    build_decoder(g, fixture_config(name), o);
    const Graph plan = compiled(g);
    const PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.router_in_group = true});
    int routers = 0;
    PlanKernels only;
    for (const SmallGroup& grp : k.small_groups) {
      const Node& first = plan.node(grp.nodes[0]);
      if (first.kernel != "Matmul") continue;
      ++routers;
      EXPECT_EQ(plan.node(first.inputs[0].src).kernel, "RMSNormMul") << name;
      for (NodeId l : grp.leaves) EXPECT_EQ(plan.node(l).kernel.find("RMSNorm"), std::string::npos) << name;
      if (only.functions.find(grp.launch.function)) continue;
      only.functions.names.push_back(grp.launch.function);
      only.functions.texts.push_back(*k.functions.find(grp.launch.function));
    }
    EXPECT_EQ(routers, fixture_config(name).layers) << name;
    if (have_nvrtc()) {
      EXPECT_NO_THROW(nvrtc_compile(only.source(), "sm_90", "")) << name;
    }
  }
}

// An MoE's experts as a decode runs them: the norm (read by a router too, so both fold it), the
// gate/up experts scaled by which were chosen, act(gate) * up, the down experts scaled by their
// weights, the sum over experts and the residual. For one row they run as one kernel
// (CudaExecutor::experts_in_one_sum) and match the reference, recorded and replayed too; for
// three rows, or with the option off, they do not. The larger shape gives each block more than
// 16 output columns and more chosen experts than its shared memory holds (ten of 768 x 18 rows).
TEST(CudaBackend, ExpertsInOneKernelMatchTheReference) {
  struct Shape {
    int64_t E, I, H, chosen;
  };
  for (const Shape& sh : {Shape{16, 64, 256, 2}, Shape{12, 768, 2304, 10}}) {
    const int64_t E = sh.E, I = sh.I, H = sh.H;
    Graph g;
    const Expr s = Expr::var("s");
    Tensor x = input(g, "x", DType::F32, {s, H});
    Tensor h = rms_norm(x, cast(input(g, "gain", DType::BF16, {H}), DType::F32), 1e-6);
    linear(h, cast(input(g, "router", DType::BF16, {E, H}), DType::F32), std::nullopt).output("logits");
    Tensor chosen = input(g, "chosen", DType::F32, {s, E});
    Tensor weights = input(g, "weights", DType::F32, {s, E});
    (x + testing::gated_experts(g, h, chosen, weights, E, I, H)).output("out");
    const Graph plan = compiled(g);
    const PlanKernels kernels = generate_plan_kernels(plan);
    int ones = 0;
    for (const auto& k : kernels.per_node) ones += k && k->experts_in_one && k->experts_in_one->normed;
    ASSERT_EQ(ones, 1) << plan.dump();
    if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
    // On with the whole stage, on with 40 KB (x and one or two experts' rows staged, the rest
    // read from memory by every warp), off.
    for (int way : {0, 1, 2}) {
      const bool on = way < 2;
      CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .experts_in_one = on, .experts_in_one_smem_kb = way == 1 ? 40 : 0});
      for (int64_t rows : {int64_t{1}, int64_t{3}}) {
        // The first `chosen` experts of a rotation by the row, each weighted 1 / (its rank + 2).
        std::vector<float> pick(static_cast<size_t>(rows * E), 0.0f), weight(pick.size(), 0.0f);
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t c = 0; c < sh.chosen; ++c) {
            const size_t at = static_cast<size_t>(t * E + (t + 3 * c) % E);
            pick[at] = 1.0f;
            weight[at] = 1.0f / static_cast<float>(c + 2);
          }
        const std::map<std::string, Buffer> in{{"x", testing::random_buffer(DType::F32, {rows, H}, 51)},
                                               {"gain", testing::random_buffer(DType::BF16, {H}, 52)},
                                               {"router", testing::random_buffer(DType::BF16, {E, H}, 53)},
                                               {"w_gu", testing::random_buffer(DType::BF16, {E, 2 * I, H}, 54, -0.05f, 0.05f)},
                                               {"w_d", testing::random_buffer(DType::BF16, {E, H, I}, 55, -0.05f, 0.05f)},
                                               {"chosen", Buffer::f32(pick, {rows, E})},
                                               {"weights", Buffer::f32(weight, {rows, E})}};
        Interpreter ref(g);
        set_both(ref, cuda, in);
        ref.run();
        const int64_t before = cuda.experts_in_one_run();
        for (int rep = 0; rep < 3; ++rep) {  // the second run records a CUDA graph, the third replays it
          cuda.run();
          const std::string at = " (H " + std::to_string(H) + ", s=" + std::to_string(rows) + ", run " + std::to_string(rep + 1) + ", way " + std::to_string(way) + ")";
          expect_close(ref.output("logits"), cuda.output("logits"), "logits" + at);
          // Sums of 2304 and 768 products in another order than the reference's: within 1e-5 of
          // the largest output, not 2e-5 of each.
          const Buffer want = ref.output("out"), got = cuda.output("out");
          double largest = 0, worst = 0;
          for (size_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::abs(want.get(i)));
          for (size_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(want.get(i) - got.get(i)));
          EXPECT_LE(worst, 1e-5 * largest + 1e-6) << "out" << at << ": largest " << largest;
        }
        // (LUMINAL_CUDA_EXPERTS_IN_ONE, when set, decides for both cases.)
        if (!std::getenv("LUMINAL_CUDA_EXPERTS_IN_ONE")) {
          EXPECT_EQ(cuda.experts_in_one_run() > before, on && rows == 1) << "H " << H << ", s=" << rows;
        }
      }
    }
  }
}

// A decoder's norms and gated products are read only by linear layers: each also has the
// launch that stores bf16 words (NodeKernels::words), and so does the o projection's copy of
// the attention heads; nodes others read (the residual sums, the rotary tables) have none.
TEST(CudaCodegen, NormsAndGatedProductsHaveWordStores) {
  const ModelConfig config = fixture_config("llama-tiny");
  Graph plan = bf16_decoder_plan("llama-tiny");
  PlanKernels k = generate_plan_kernels(plan);
  int norms = 0, products = 0, copies = 0, others = 0;
  for (size_t id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(static_cast<NodeId>(id));
    if (!k.per_node[id] || !k.per_node[id]->words) continue;
    if (n.kernel == "RMSNormMul") ++norms;
    else if (n.kernel == "Fused") ++products;
    else if (n.kernel == "Matmul" && k.per_node[id]->linear && k.per_node[id]->linear->a_from_scratch) ++copies;
    else ++others;
    EXPECT_NE(std::find(k.functions.names.begin(), k.functions.names.end(), k.per_node[id]->words->function), k.functions.names.end());
  }
  EXPECT_EQ(norms, 2 * config.layers + 1);  // each layer's two, and the final one before lm_head
  EXPECT_EQ(products, config.layers);        // silu(gate) * up
  EXPECT_EQ(copies, config.layers);          // the o projection's heads merged into rows
  EXPECT_EQ(others, 0);
  for (size_t id = 0; id < plan.size(); ++id) {
    if (plan.node(static_cast<NodeId>(id)).op != OpKind::Add) continue;
    EXPECT_FALSE(k.per_node[id] && k.per_node[id]->words);
  }
  // With bf16 activations each gated product's words also come reading gate and up as bf16
  // (words_narrow; none f32-faithful), and the module compiles.
  for (bool bf16 : {false, true}) {
    PlanKernels kb = generate_plan_kernels(plan, CodegenOptions{.bf16_activations = bf16});
    int narrow = 0;
    for (size_t id = 0; id < plan.size(); ++id) {
      if (!kb.per_node[id] || !kb.per_node[id]->words_narrow) continue;
      const Node& n = plan.node(static_cast<NodeId>(id));
      EXPECT_EQ(n.kernel, "Fused");
      ASSERT_EQ(kb.per_node[id]->narrow_inputs.size(), n.inputs.size());
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Node& in = plan.node(n.inputs[i].src);
        EXPECT_EQ(kb.per_node[id]->narrow_inputs[i], in.kernel == "Matmul") << "input " << i;
      }
      ++narrow;
    }
    EXPECT_EQ(narrow, bf16 ? config.layers : 0) << "bf16=" << bf16;
    if (bf16 && have_nvrtc()) {
      EXPECT_NO_THROW(nvrtc_compile(kb.source(), "sm_90", ""));
    }
  }
}

// Sibling linear layers (q, k, v; gate, up) make grouped GEMVs, and those compile.
TEST(CudaCodegen, SiblingLinearLayersGroupAndCompile) {
  if (!nvrtc_unavailable_reason().empty()) GTEST_SKIP() << nvrtc_unavailable_reason();
  Graph g;
  DecoderGraphOptions o;
  o.context = 32;
  o.weight_dtype = DType::BF16;
  build_decoder(g, fixture_config("llama-tiny"), o);
  Graph plan = compile(g, CompileOptions{}).plan;
  std::map<NodeId, std::vector<NodeId>> by_activations;
  for (size_t id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(static_cast<NodeId>(id));
    if (n.op == OpKind::Kernel && n.kernel == "Matmul") by_activations[n.inputs[0].src].push_back(static_cast<NodeId>(id));
  }
  FunctionSet functions;
  int groups = 0, three = 0;
  for (const auto& [src, members] : by_activations) {
    if (members.size() < 2) continue;
    auto k = emit_grouped_linear(plan, members, plan.dims(), functions);
    ASSERT_TRUE(k.has_value()) << "linear layers reading node " << src << " do not group";
    EXPECT_EQ(k->alternatives.size() + 1, std::size(gen::kLinearVariants));
    ++groups;
    three += members.size() == 3;
  }
  EXPECT_EQ(groups, 2 * fixture_config("llama-tiny").layers) << "q/k/v and gate/up of every layer";
  EXPECT_EQ(three, fixture_config("llama-tiny").layers);
  std::string source = cuda_prelude();
  for (const std::string& t : functions.texts) source += t;
  EXPECT_NO_THROW(nvrtc_compile(source, "sm_90", ""));
}

TEST(CudaBackend, WithoutAGpuTheErrorSaysWhy) {
  if (have_gpu()) GTEST_SKIP() << "a GPU is here";
  Case c = std::move(testing::cases()[0]);
  try {
    CudaExecutor e(c.graph, "");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("CUDA"), std::string::npos) << what;
    EXPECT_NE(what.find(unavailable_reason().empty() ? nvrtc_unavailable_reason() : unavailable_reason()), std::string::npos) << what;
  }
}

void expect_close(const Buffer& want, const Buffer& got, const std::string& what, double f32_tol) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.numel() && bad < 5; ++i) {
    double a = want.get(i), b = got.get(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    double tol = is_float(want.dtype()) ? f32_tol * std::abs(a) + f32_tol : 0;
    if (want.dtype() == DType::BF16 || want.dtype() == DType::F16) tol = 1e-2 * std::abs(a) + 1e-3;
    if (!(std::abs(a - b) <= tol)) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": reference " << a << ", cuda " << b;
    }
  }
}

// Raw and compiled graphs on the device against the reference interpreter on the raw graph.
TEST(CudaBackend, CasesMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  for (Case& c : testing::cases()) {
    Graph plan = compiled(c.graph);
    for (const Graph* g : {&c.graph, &plan}) {
      const std::string kind = g == &plan ? " (compiled)" : " (raw)";
      // Kernels one after another, then as overlapping (programmatic dependent) launches.
      for (bool overlap : {false, true}) {
      CudaExecutor cuda(*g, "", CudaOptions{.tensor_cores = false, .overlap_launches = overlap});
      for (int64_t s : testing::s_values()) {
        Interpreter ref(c.graph);
        for (auto& [name, buf] : c.inputs(s)) {
          ref.set_input(name, buf);
          cuda.set_input(name, buf);
        }
        ref.run();
        // Three runs with the same dims: the second records a CUDA graph, the third replays it.
        for (int rep = 0; rep < 3; ++rep) {
          cuda.run();
          for (NodeId o : c.graph.outputs()) {
            const std::string& name = c.graph.node(o).name;
            expect_close(ref.output(name), cuda.output(name),
                         c.name + kind + (overlap ? " overlapped" : "") + " output " + name + " at s=" + std::to_string(s) + ", run " +
                             std::to_string(rep + 1));
          }
        }
      }
      }
    }
  }
}

// The search times its candidates on the GPU (search_on_cuda), and what it keeps is right.
TEST(CudaBackend, SearchTimesCandidatesOnTheGpu) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  Case c = testing::cases()[1];  // reductions and norms over fusable elementwise work
  CompileOptions opts;
  opts.dedup = false;
  opts.backend = "cuda";
  opts.search.limit = 6;
  opts.search.profile_dims = {{"s", 67}};
  search_on_cuda(opts, "");
  CompileResult r = compile(c.graph, opts);
  EXPECT_GT(r.search.profiled, r.search.rejected) << r.search.to_string();
  EXPECT_GT(r.search.best_ms, 0.0);
  CudaExecutor cuda(r.plan, "");
  Interpreter ref(c.graph);
  for (auto& [name, buf] : c.inputs(4)) {
    ref.set_input(name, buf);
    cuda.set_input(name, buf);
  }
  ref.run();
  cuda.run();
  for (NodeId o : c.graph.outputs()) {
    const std::string& name = c.graph.node(o).name;
    expect_close(ref.output(name), cuda.output(name), "searched plan, output " + name);
  }
}

// Inputs given as device pointers are read in place; outputs handed back as device pointers
// hold the results; a dtype other than the input's is refused with the reason.
TEST(CudaBackend, DevicePointersInAndOut) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  Case c = std::move(testing::cases()[0]);
  Context& ctx = Context::get();
  CudaExecutor cuda(compiled(c.graph), "");
  Interpreter ref(c.graph);
  std::vector<DevicePtr> held;
  for (auto& [name, buf] : c.inputs(5)) {
    ref.set_input(name, buf);
    DevicePtr p = ctx.alloc(buf.nbytes());
    held.push_back(p);
    ctx.upload(p, buf.bytes(), buf.nbytes());
    cuda.set_input_device(name, p, buf.dtype(), buf.shape());
  }
  ref.run();
  cuda.run();
  for (NodeId o : c.graph.outputs()) {
    const std::string& name = c.graph.node(o).name;
    CudaExecutor::DeviceTensor t = cuda.output_device(name);
    Buffer got(t.dtype, t.shape);
    ctx.download(got.bytes(), t.ptr, got.nbytes());
    expect_close(ref.output(name), got, "device output " + name);
  }
  try {
    cuda.set_input_device("x", held[0], DType::BF16, {7, 5});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtype"), std::string::npos) << e.what();
  }
  for (DevicePtr p : held) ctx.free(p);
}

// Inputs copied from device memory that moves each run (a token at a new address each step):
// the runs after the second replay a recorded CUDA graph, which must read each run's new values
// (copied into the input's own buffer), never the first run's.
TEST(CudaBackend, CopiedDeviceInputsReachReplayedGraphs) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  Case c = std::move(testing::cases()[0]);
  Context& ctx = Context::get();
  CudaExecutor cuda(compiled(c.graph), "");
  for (int step = 0; step < 4; ++step) {
    Interpreter ref(c.graph);
    std::vector<DevicePtr> held;
    auto inputs = c.inputs(5);
    for (auto& [name, buf] : inputs) {
      // x (f32) gets new values each step; y is copied once, as a weight is.
      const bool changes = buf.dtype() == DType::F32;
      for (size_t i = 0; changes && i < buf.nbytes() / 4; ++i) reinterpret_cast<float*>(buf.bytes())[i] += static_cast<float>(step);
      ref.set_input(name, buf);
      if (!changes && step > 0) continue;
      DevicePtr p = ctx.alloc(buf.nbytes());
      held.push_back(p);
      ctx.upload(p, buf.bytes(), buf.nbytes());
      cuda.copy_input_device(name, p, buf.dtype(), buf.shape());
    }
    for (DevicePtr p : held) ctx.free(p);  // copied: the caller's memory may go at once
    ref.run();
    cuda.run();
    for (NodeId o : c.graph.outputs()) {
      const std::string& name = c.graph.node(o).name;
      expect_close(ref.output(name), cuda.output(name), "step " + std::to_string(step) + " output " + name);
    }
  }
  // The first run launches kernel by kernel, the second records, the others replay: copied
  // inputs keep their buffers, so nothing drops the graph.
  const CudaExecutor::GraphStats& g = cuda.graph_stats();
  EXPECT_EQ(g.launched, 1);
  EXPECT_EQ(g.recorded, 1);
  EXPECT_EQ(g.replayed, 2);
  EXPECT_EQ(g.dropped, 0);
  // New bytes in y, whose cast the graph keeps as a run invariant, must drop the graphs.
  Buffer y = c.inputs(5).at("y");
  DevicePtr p = ctx.alloc(y.nbytes());
  ctx.upload(p, y.bytes(), y.nbytes());
  cuda.copy_input_device("y", p, y.dtype(), y.shape());
  ctx.free(p);
  EXPECT_EQ(cuda.graph_stats().dropped, 1);
}

// Every variant of the GEMV (the executor keeps whichever is fastest on the device, so each
// must be right): a bf16 and an f32 linear layer at several row counts, with an odd k (the
// unaligned tail) and k = 200 (aligned), against the reference interpreter.
TEST(CudaBackend, EveryGemvVariantMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  for (int64_t k : {int64_t{200}, int64_t{77}}) {
    for (DType wt : {DType::BF16, DType::F32}) {
      Graph g;
      Tensor a = input(g, "a", DType::F32, {Expr::var("s"), k});
      Tensor w = input(g, "w", wt, {300, k});
      linear(a, wt == DType::F32 ? w : cast(w, DType::F32), std::nullopt).output("y");
      Graph plan = compiled(g);
      // Every schedule (the spread ones deal 300 columns' units over a grid of whole waves).
      for (int v = 0; v < static_cast<int>(std::size(gen::kLinearVariants)); ++v) {
        CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .force_variant = v});
        for (int64_t s : {int64_t{1}, int64_t{3}, int64_t{9}}) {
          Interpreter ref(g);
          Buffer ab = testing::random_buffer(DType::F32, {s, k}, 5), wb = testing::random_buffer(wt, {300, k}, 6);
          ref.set_input("a", ab), ref.set_input("w", wb), cuda.set_input("a", ab), cuda.set_input("w", wb);
          ref.run();
          cuda.run();
          expect_close(ref.output("y"), cuda.output("y"),
                       "variant " + std::to_string(v) + " k=" + std::to_string(k) + " " + dtype_name(wt) + " s=" + std::to_string(s));
        }
      }
    }
  }
}

// An MoE's expert products (tests/egraph/moe_experts_case.h): the experts no token chose hold
// NaN weights, so every GEMV schedule (the executor may keep any) must skip rows scaled by zero
// without reading them, and scale the others: decode (one token), a few tokens, and prefills
// that take the kernel's two other paths.
TEST(CudaBackend, ScaledMatmulSkipsExpertsNoTokenChose) {
  // k = 21 (bf16 only): rows that are not 16-byte aligned, copied element by element.
  for (auto [wt, k] : {std::pair{DType::BF16, int64_t{24}}, std::pair{DType::F32, int64_t{24}}, std::pair{DType::BF16, int64_t{21}}}) {
    moetest::MoeExperts c;
    c.weight_dtype = wt;
    c.k = k;
    Graph plan = compiled(c.graph());
    ASSERT_EQ(count_kernels(plan, "ScaledMatmul"), 1) << plan.dump();
    // bf16 weights bring the tensor-core schedules (the last variants below), f32 ones do not.
    EXPECT_EQ(generate_plan_kernels(plan).source().find("lm_mma_bf16(lm_acc") != std::string::npos, wt == DType::BF16);
    if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
    // Every GEMV schedule, with the executor's grid and with four blocks a multiprocessor; then,
    // for bf16 weights, the tensor cores' grouped GEMMs.
    const int gemvs = 2 * static_cast<int>(std::size(gen::kLinearVariants)), mmas = static_cast<int>(std::size(gen::kScaledMmaTiles));
    // The tensor cores' schedules run twice: f32-faithful, then with bf16 activations (x
    // rounded to bf16, one product), whose truth is the product of the rounded x.
    for (int v = k == 24 ? 0 : gemvs; v < gemvs + (wt == DType::BF16 ? 2 * mmas : 0); ++v) {
      const bool mma = v >= gemvs, bf16 = v >= gemvs + mmas;
      // The products' own schedules: a few tokens' sum over the experts would take them over.
      CudaExecutor cuda(plan, "",
                        CudaOptions{.tensor_cores = mma, .bf16_activations = bf16, .force_variant = bf16 ? v - mmas : v, .expert_sum_in_gemv = false});
      // 1-9 tokens: the listed experts; 3000: the listed rows of each expert; 5000: every row.
      for (int64_t s : {int64_t{1}, int64_t{2}, int64_t{9}, int64_t{3000}, int64_t{5000}}) {
        auto in = c.inputs(s);
        for (auto& [name, buf] : in) cuda.set_input(name, buf);
        cuda.run();
        auto truth_in = in;
        if (bf16) truth_in.at("x") = in.at("x").cast(DType::BF16).cast(DType::F32);
        std::vector<double> want = c.expected(truth_in, s);
        Buffer got = cuda.output("out");
        ASSERT_EQ(got.numel(), want.size());
        for (size_t i = 0; i < want.size(); ++i)
          // The tensor cores' split activations are exact to 2^-17 a product, and |x w| <= 1.
          ASSERT_NEAR(got.get(i), want[i], 1e-5 * (1 + std::abs(want[i])) + (mma ? k * 0x1p-17 : 0.0))
              << "variant " << v << (bf16 ? " (bf16 activations)" : "") << " " << dtype_name(wt) << " s=" << s << " out[" << i << "]";
      }
    }
  }
}

// A greedy decode's choice on the device: the first of the last row's largest values (NaN never
// chosen), against the host's, on rows as long as a vocabulary and short ones.
TEST(CudaBackend, OutputArgmaxIsTheFirstLargestOfTheLastRow) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const Expr r = Expr::var("r"), n = Expr::var("n");
  Graph g;
  Tensor x = input(g, "x", DType::F32, {r, n});
  (x * 1.0f).output("y");
  CudaExecutor cuda(compiled(g), "");
  // Several blocks (4096 values each) whose bests merge; {2, 9999}'s last row is not 16-byte aligned.
  for (auto [rows, len] : {std::pair<int64_t, int64_t>{1, 7}, {3, 151936}, {2, 1000}, {2, 9999}}) {
    for (int variant = 0; variant < 4; ++variant) {
      Buffer b = testing::random_buffer(DType::F32, {rows, len}, 400 + variant, -50, -1);
      const size_t last = static_cast<size_t>((rows - 1) * len);
      int64_t want = 0;
      if (variant >= 1) {  // ties: the first one wins
        b.set(last + static_cast<size_t>(len / 3), 5.0);
        b.set(last + static_cast<size_t>(len - 1), 5.0);
        want = len / 3;
      }
      if (variant >= 2) b.set(last + static_cast<size_t>(len / 5), std::nan(""));  // never chosen
      if (variant == 3 && rows > 1) b.set(0, 100.0);                                // an earlier row's does not count
      if (variant == 0) {
        for (int64_t i = 1; i < len; ++i)
          if (b.get(last + static_cast<size_t>(i)) > b.get(last + static_cast<size_t>(want))) want = i;
      }
      cuda.set_dim("r", rows);
      cuda.set_dim("n", len);
      cuda.set_input("x", b);
      cuda.run();
      EXPECT_EQ(cuda.output_argmax("y"), want) << rows << "x" << len << " variant " << variant;
    }
  }
}

// A decoder's small kernels that the executor may join (its rotaries, its cache writes) make
// joined functions that compile; text that is not a generated function makes none. The key
// rotary, whose value only the key cache write reads, takes that write's destination and index.
TEST(CudaCodegen, JoinedFunctionsOfADecodersSmallKernelsCompile) {
  Graph plan = bf16_decoder_plan("llama-tiny");
  PlanKernels k = generate_plan_kernels(plan);
  auto text = [&](const std::string& name) {
    const std::string* t = k.functions.find(name);
    return t ? *t : std::string();
  };
  std::map<std::string, std::vector<std::string>> by_kind;  // the functions of the first layer's nodes of each kind
  int key_rotaries = 0;
  for (NodeId id : plan.topo_order()) {
    const Node& n = plan.node(id);
    const std::string kind = n.op == OpKind::Scatter ? "Scatter" : n.kernel;
    if (kind == "Rotary" || kind == "Scatter" || kind == "RMSNormMul" || kind == "Fused")
      by_kind[kind].push_back(k.per_node[id]->launches.back().function);
    if (kind == "Rotary" && k.per_node[id]->scatter_node) {
      ++key_rotaries;
      const Node& sc = plan.node(*k.per_node[id]->scatter_node);
      EXPECT_EQ(sc.op, OpKind::Scatter);
      EXPECT_EQ(sc.inputs[2].src, id);
      EXPECT_TRUE(k.per_node[id]->launches.back().scatter_out);
      EXPECT_NE(text(k.per_node[id]->launches.back().function).find("char* __restrict__ lm_sdst, const char* __restrict__ lm_sidx"),
                std::string::npos);
    }
  }
  EXPECT_EQ(key_rotaries, static_cast<int>(fixture_config("llama-tiny").layer.size()));  // a key rotary a layer, not the queries'
  ASSERT_GE(by_kind["Rotary"].size(), 2u);
  ASSERT_GE(by_kind["Scatter"].size(), 2u);
  ASSERT_GE(by_kind["RMSNormMul"].size(), 1u);
  ASSERT_GE(by_kind["Fused"].size(), 1u);
  // Two rotaries with a cache write, two cache writes, and a row kernel (blocks of up to 1024
  // threads) with an elementwise one: the largest bound is the join's.
  struct Case {
    std::vector<std::string> functions;
    int bound;
  };
  for (const Case& c : {Case{{by_kind["Rotary"][0], by_kind["Rotary"][1], by_kind["Scatter"][1]}, 256},
                        Case{{by_kind["Scatter"][0], by_kind["Scatter"][1]}, 256}, Case{{by_kind["RMSNormMul"][0], by_kind["Fused"][0]}, 1024}}) {
    std::vector<std::string> texts;
    for (const std::string& f : c.functions) texts.push_back(text(f));
    const std::optional<JoinedFunction> j = joined_function(texts);
    ASSERT_TRUE(j) << c.functions[0];
    EXPECT_EQ(j->name.rfind("lm_Joined_", 0), 0u);
    EXPECT_NE(j->text.find("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(c.bound) + ") " + j->name + "("), std::string::npos)
        << j->text;
    EXPECT_NE(j->text.find("const unsigned lm_split" + std::to_string(c.functions.size() - 2) + ") {"), std::string::npos) << j->text;
    if (have_nvrtc()) {
      EXPECT_NO_THROW(nvrtc_compile(cuda_prelude() + j->text, "sm_90", "")) << c.functions[0];
    }
  }
  EXPECT_FALSE(joined_function({"__global__ void f() {}", text(by_kind["Rotary"][0])}));
  EXPECT_FALSE(joined_function({text(by_kind["Rotary"][0])}));
}

// Decode steps of fixture decoders with joined launches on and off, and with the key cache
// writes stored by the rotaries or not, give the same logits, bit for bit (the kernels are the
// same, launched together or storing elsewhere), launched, recorded and replayed. The third
// decoder has qwen3-tiny's shape with heads of 128 values, a real model's: there the joined key
// norm-rotary stores four values a thread into the cache (four_values_opening).
TEST(CudaBackend, JoinedLaunchesChangeNoValue) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  ModelConfig wide_heads = fixture_config("qwen3-tiny");
  wide_heads.head_dim = 128;
  for (LayerConfig& l : wide_heads.layer) l.head_dim = 128;
  for (const auto& [name, config] : {std::pair<std::string, ModelConfig>{"llama-tiny", fixture_config("llama-tiny")},
                                     {"qwen3-moe-tiny", fixture_config("qwen3-moe-tiny")}, {"qwen3-tiny, 128-value heads", wide_heads}}) {
    Graph plan = bf16_decoder_plan(config);
    const int64_t vocab = config.vocab;
    std::map<std::string, Buffer> weights;
    uint32_t seed = 300;
    for (size_t id = 0; id < plan.size(); ++id) {
      const Node& n = plan.node(static_cast<NodeId>(id));
      if (n.op != OpKind::Input || n.name == "tokens") continue;
      std::vector<int64_t> shape;
      for (const Expr& e : n.shape) shape.push_back(e.value());
      weights[n.name] = n.name.rfind("cache", 0) == 0 ? Buffer(n.dtype, shape) : testing::random_buffer(n.dtype, shape, seed++, -0.5f, 0.5f);
    }
    // The first schedule of each GEMV everywhere: timing may pick others, which sum in another order.
    // (Qwen3's attention computing its norms and cache writes, CudaOptions::attention_norms,
    // would leave the key norm-rotary's cache store to no one: off here.)
    CudaExecutor paired(plan, "", CudaOptions{.tune_variants = false, .attention_norms = false}),
        single(plan, "", CudaOptions{.tune_variants = false, .attention_norms = false, .pair_launches = false}),
        unfolded(plan, "", CudaOptions{.tune_variants = false, .attention_norms = false, .scatter_in_producers = false}),
        launched(plan, "", CudaOptions{.graphs = false, .tune_variants = false, .attention_norms = false});  // every run launched: every join met
    for (CudaExecutor* cuda : {&paired, &single, &unfolded, &launched})
      for (const auto& [n, b] : weights) cuda->set_input(n, b);
    int64_t past = 0;
    int64_t joins_after_first = -1;
    // Twice the same prefill and decode steps, as a benchmark's iterations: the second meets
    // no join the first did not compile (kept values computed by the first run alone once made
    // its joins differ: the second 512-token prefill waited 0.5 s on NVRTC).
    for (int64_t seq : {5, 1, 1, 1, 1, 0, 5, 1, 1, 1, 1}) {
      if (seq == 0) {
        joins_after_first = launched.joins_compiled();
        past = 0;
        continue;
      }
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < seq; ++i) ids.push_back(static_cast<int32_t>((past * 7 + i * 13 + 1) % vocab));
      std::vector<Buffer> logits;
      for (CudaExecutor* cuda : {&paired, &single, &unfolded, &launched}) {
        cuda->set_input("tokens", Buffer::i32(ids, {seq}));
        cuda->set_dim("seq", seq);
        cuda->set_dim("past", past);
        cuda->run();
        logits.push_back(cuda->output("logits"));
      }
      for (int other : {1, 2, 3}) {
        ASSERT_EQ(logits[0].numel(), logits[other].numel());
        // Bit for bit with wide heads too: a joined launch runs with its largest member's block,
        // but a 128-value row's norm still takes one warp, four values a thread, as alone.
        for (size_t i = 0; i < logits[0].numel(); ++i)
          ASSERT_EQ(logits[0].get(i), logits[other].get(i)) << name << " against " << other << " past " << past << " seq " << seq << " logit " << i;
      }
      past += seq;
    }
    EXPECT_GT(paired.launches_paired(), 0) << name;
    EXPECT_GT(joins_after_first, 0) << name;
    EXPECT_EQ(launched.joins_compiled(), joins_after_first) << name << ": the second pass compiled joins the first did not";
    EXPECT_EQ(single.launches_paired(), 0) << name;
    // The decode steps' key cache writes (LUMINAL_CUDA_ATTENTION_NORMS=1, which wins over the
    // options, makes Qwen3's attention compute them instead).
    if (std::string(std::getenv("LUMINAL_CUDA_ATTENTION_NORMS") ? std::getenv("LUMINAL_CUDA_ATTENTION_NORMS") : "0") == "0" || name == "llama-tiny") {
      EXPECT_GT(paired.scatters_folded(), 0) << name;
    }
    EXPECT_EQ(unfolded.scatters_folded(), 0) << name;
    EXPECT_GT(paired.graph_stats().replayed, 0) << name;
  }
}

// The same experts summed by the expert-sum GEMV (NodeKernels::expert_sum), every schedule: for
// up to 8 tokens the products launch nothing and the chosen experts' weights alone are read
// (the others are NaN); past that the products' own schedules run. Recorded and replayed graphs
// give the same values.
TEST(CudaBackend, ExpertSumsComputeTheirProducts) {
  for (auto [wt, k] : {std::pair{DType::BF16, int64_t{24}}, std::pair{DType::F32, int64_t{24}}, std::pair{DType::BF16, int64_t{21}}}) {
    moetest::MoeExperts c;
    c.weight_dtype = wt;
    c.k = k;
    Graph plan = compiled(c.graph());
    if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
    for (int v = 0; v < static_cast<int>(std::size(gen::kExpertSumVariants)); ++v) {
      CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = false, .force_variant = v});
      int64_t want_summed = 0;
      for (int64_t s : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{9}, int64_t{40}}) {
        auto in = c.inputs(s);
        for (auto& [name, buf] : in) cuda.set_input(name, buf);
        for (int run = 0; run < 3; ++run) {  // launched, recorded, replayed
          cuda.run();
          if (s <= 8 && run < 2) ++want_summed;
          std::vector<double> want = c.expected(in, s);
          Buffer got = cuda.output("out");
          ASSERT_EQ(got.numel(), want.size());
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(got.get(i), want[i], 1e-5 * (1 + std::abs(want[i])))
                << "variant " << v << " " << dtype_name(wt) << " k=" << k << " s=" << s << " run " << run << " out[" << i << "]";
        }
      }
      EXPECT_EQ(cuda.experts_summed(), want_summed) << "variant " << v;
    }
  }
}

// A linear layer with a bf16 weight and many rows runs on cuBLASLt with bf16 activations: it
// must compute exactly that product (checked in double precision on the rounded operands).
TEST(CudaBackend, LinearLayerOnTensorCores) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  if (!cublaslt_unavailable_reason().empty()) GTEST_SKIP() << cublaslt_unavailable_reason();
  Graph g;
  Tensor a = input(g, "a", DType::F32, {Expr::var("s"), 72});
  Tensor w = input(g, "w", DType::BF16, {40, 72});
  linear(a, cast(w, DType::F32), std::nullopt).output("y");
  Graph plan = compiled(g);
  bool direct = false;  // the Matmul reads the bf16 weight itself
  for (size_t id = 0; id < plan.size(); ++id) {
    const Node& n = plan.node(static_cast<NodeId>(id));
    if (n.op == OpKind::Kernel && n.kernel == "Matmul") direct = plan.node(n.inputs[1].src).dtype == DType::BF16;
  }
  ASSERT_TRUE(direct) << "the plan casts the weight before its Matmul";
  for (bool bf16 : {false, true}) {
    CudaExecutor cuda(plan, "", CudaOptions{.tensor_cores = true, .bf16_activations = bf16});
    for (int64_t m : {1, 16, 100}) {
      Buffer ab = testing::random_buffer(DType::F32, {m, 72}, 11), wb = testing::random_buffer(DType::BF16, {40, 72}, 12);
      cuda.set_input("a", ab);
      cuda.set_input("w", wb);
      cuda.run();
      Buffer y = cuda.output("y");
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < 40; ++j) {
          double want = 0, scale = 0;
          for (int64_t p = 0; p < 72; ++p) {
            // bf16 activations from 16 rows; the split (and the GEMV below 16 rows) keep f32's.
            double x = ab.get(i * 72 + p);
            if (bf16 && m >= 16) x = bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
            want += x * wb.get(j * 72 + p);
            scale += std::abs(x * wb.get(j * 72 + p));
          }
          // The split holds each activation to 2^-17; f32 sums add a few ulps.
          ASSERT_NEAR(y.get(i * 40 + j), want, 2e-5 * scale + 1e-6) << "m=" << m << " bf16=" << bf16 << " (" << i << ", " << j << ")";
        }
    }
  }
}

// Sibling linear layers with bf16 weights (grouped: one GEMV for few rows; for many, the
// activations converted once and each member's GEMM on cuBLASLt), f32-faithful and with bf16
// activations, against double-precision products of the (rounded) operands. With
// concurrent_group_gemms (1: always, -1: timed per shape, 0: never) the later members go to the
// side stream once their shapes are timed, so the last size runs twice.
TEST(CudaBackend, SiblingLinearLayersMatchTheirProducts) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const int64_t k = 64;
  const std::vector<int64_t> widths = {40, 24, 24};  // whole 256-byte steps, so the weights group
  Graph g;
  Tensor a = input(g, "a", DType::F32, {Expr::var("s"), k});
  for (size_t i = 0; i < widths.size(); ++i) {
    Tensor w = input(g, "w" + std::to_string(i), DType::BF16, {widths[i], k});
    linear(a, cast(w, DType::F32), std::nullopt).output("y" + std::to_string(i));
  }
  Graph plan = compiled(g);
  for (int mode = 0; mode < 6; ++mode) {
    const bool bf16 = mode % 2 == 1;
    const int concurrent = mode / 2 == 0 ? 0 : mode / 2 == 1 ? 1 : -1;
    CudaExecutor cuda(plan, "", CudaOptions{.bf16_activations = bf16, .concurrent_group_gemms = concurrent});
    uint32_t seed = 41;  // new values each run: a stale output would not match
    for (int64_t m : {3, 16, 100, 100}) {
      Buffer ab = testing::random_buffer(DType::F32, {m, k}, seed++);
      cuda.set_input("a", ab);
      std::vector<Buffer> ws;
      for (size_t i = 0; i < widths.size(); ++i) {
        ws.push_back(testing::random_buffer(DType::BF16, {widths[i], k}, 42 + static_cast<uint32_t>(i)));
        cuda.set_input("w" + std::to_string(i), ws.back());
      }
      cuda.run();
      for (size_t i = 0; i < widths.size(); ++i) {
        Buffer y = cuda.output("y" + std::to_string(i));
        ASSERT_EQ(y.numel(), static_cast<size_t>(m * widths[i]));
        for (int64_t r = 0; r < m; ++r)
          for (int64_t j = 0; j < widths[i]; ++j) {
            double want = 0, scale = 0;
            for (int64_t p = 0; p < k; ++p) {
              double x = ab.get(r * k + p);
              if (bf16 && m >= 16) x = bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
              want += x * ws[i].get(j * k + p);
              scale += std::abs(x * ws[i].get(j * k + p));
            }
            ASSERT_NEAR(y.get(r * widths[i] + j), want, 2e-5 * scale + 1e-6) << "y" << i << " m=" << m << " bf16=" << bf16 << " concurrent=" << concurrent << " (" << r << ", " << j << ")";
          }
      }
    }
  }
}

// A norm feeding sibling linear layers, their gated product feeding another, and a linear layer
// of transposed activations (copied to a scratch first): with many rows (the library's GEMMs)
// the norm, the product and the copy store the bf16 words those GEMMs read. The
// outputs must be bit for bit those of converting f32 values after (store_words off), in both
// activation modes, and near the reference interpreter's.
TEST(CudaBackend, NormAndGatedProductStoreTheWordsTheirLinearLayersRead) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const int64_t k = 64, n = 96;
  Graph g;
  Tensor a = input(g, "a", DType::F32, {Expr::var("s"), k});
  Tensor gain = input(g, "gain", DType::BF16, {k});
  Tensor h = rms_norm(a, cast(gain, DType::F32), 1e-5);
  Tensor w0 = input(g, "w0", DType::BF16, {n, k}), w1 = input(g, "w1", DType::BF16, {n, k}), w2 = input(g, "w2", DType::BF16, {k, n});
  Tensor gated = silu(linear(h, cast(w0, DType::F32), std::nullopt)) * linear(h, cast(w1, DType::F32), std::nullopt);
  linear(gated, cast(w2, DType::F32), std::nullopt).output("y");
  Tensor b = input(g, "b", DType::F32, {k, Expr::var("s")}), w3 = input(g, "w3", DType::BF16, {n, k});
  linear(transpose(b, 0, 1), cast(w3, DType::F32), std::nullopt).output("z");
  Graph plan = compiled(g);
  ASSERT_EQ(count_kernels(plan, "RMSNormMul"), 1);
  std::map<std::string, Buffer> inputs = {{"gain", testing::random_buffer(DType::BF16, {k}, 50)},
                                          {"w0", testing::random_buffer(DType::BF16, {n, k}, 51)},
                                          {"w1", testing::random_buffer(DType::BF16, {n, k}, 52)},
                                          {"w2", testing::random_buffer(DType::BF16, {k, n}, 53)},
                                          {"w3", testing::random_buffer(DType::BF16, {n, k}, 55)}};
  for (bool bf16 : {false, true})
    for (int64_t m : {3, 100}) {
      inputs["a"] = testing::random_buffer(DType::F32, {m, k}, 54);
      inputs["b"] = testing::random_buffer(DType::F32, {k, m}, 56);
      std::vector<std::map<std::string, Buffer>> outs;
      std::vector<int64_t> stored, narrowed;
      // Words stored, not stored, and stored with the gate and up GEMMs storing bf16 for the
      // gated product (with bf16 activations and many rows; else the same as the first).
      for (int mode : {0, 1, 2}) {
        CudaExecutor cuda(plan, "", CudaOptions{.bf16_activations = bf16, .store_words = mode != 1, .narrow_gated_inputs = mode == 2});
        for (const auto& [name, b] : inputs) cuda.set_input(name, b);
        cuda.run();
        outs.push_back({{"y", cuda.output("y")}, {"z", cuda.output("z")}});
        stored.push_back(cuda.words_stored());
        narrowed.push_back(cuda.narrowed_groups());
      }
      // The norm, the gated product and the copy, where the library takes their readers.
      EXPECT_EQ(stored[0], m >= 16 ? 3 : 0) << "m=" << m << " bf16=" << bf16;
      EXPECT_EQ(stored[1], 0);
      EXPECT_EQ(stored[2], stored[0]);
      EXPECT_EQ(narrowed[0] + narrowed[1], 0);
      EXPECT_EQ(narrowed[2], bf16 && m >= 16 ? 1 : 0) << "m=" << m << " bf16=" << bf16;
      Interpreter ref(plan);
      for (const auto& [name, b] : inputs) ref.set_input(name, b);
      ref.run();
      for (const char* out : {"y", "z"}) {
        const Buffer &got = outs[0].at(out), &without = outs[1].at(out), &narrow = outs[2].at(out), want = ref.output(out);
        ASSERT_EQ(got.numel(), static_cast<size_t>(m * (out == std::string("y") ? k : n)));
        double worst = 0, worst_narrow = 0, largest = 0;
        for (size_t i = 0; i < got.numel(); ++i) {
          ASSERT_EQ(got.get(i), without.get(i)) << out << " element " << i << " m=" << m << " bf16=" << bf16;
          // Bit for bit where nothing narrowed (decode, f32-faithful, or z, which no group feeds).
          if (narrowed[2] == 0 || out == std::string("z")) {
            ASSERT_EQ(narrow.get(i), got.get(i)) << out << " element " << i;
          }
          worst = std::max(worst, std::abs(got.get(i) - want.get(i)));
          worst_narrow = std::max(worst_narrow, std::abs(narrow.get(i) - want.get(i)));
          largest = std::max(largest, std::abs(want.get(i)));
        }
        // f32-faithful: hi + lo hold the activations to about 2^-17; bf16: rounded to 2^-8 (the
        // narrowed gate and up products once more each, within the same bound).
        EXPECT_LT(worst, (bf16 && m >= 16 ? 3e-2 : 1e-4) * largest) << out << " m=" << m << " bf16=" << bf16;
        EXPECT_LT(worst_narrow, (bf16 && m >= 16 ? 3e-2 : 1e-4) * largest) << out << " m=" << m << " bf16=" << bf16 << " narrowed";
      }
    }
}

// A linear layer added to a value nothing reads after (a residual sum) takes the Add in: with
// many rows the library's GEMM adds into that value's buffer, with few (decode) the GEMV reads it
// at its stores. Near the unfolded sum (which rounds once more) and the reference, in the runs
// that go launch by launch, record a CUDA graph and replay it.
TEST(CudaBackend, ResidualSumsFoldIntoTheirGemm) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const int64_t k = 64, n = 48;
  Graph g;
  Tensor a = input(g, "a", DType::F32, {Expr::var("s"), k}), x = input(g, "x", DType::F32, {Expr::var("s"), n});
  Tensor w = input(g, "w", DType::BF16, {n, k});
  // A kernel's result (its buffer the run's to reuse; an elementwise one would fuse with the Add).
  Tensor residual = rms_norm(x, std::nullopt, 1e-5);
  (residual + linear(a, cast(w, DType::F32), std::nullopt)).output("y");
  Graph plan = compiled(g);
  int adds = 0;
  for (size_t id = 0; id < plan.size(); ++id) adds += plan.node(static_cast<NodeId>(id)).op == OpKind::Add;
  ASSERT_EQ(adds, 1);
  for (bool bf16 : {false, true})
    for (int64_t m : {1, 3, 100}) {
      std::map<std::string, Buffer> inputs = {{"a", testing::random_buffer(DType::F32, {m, k}, 60)},
                                              {"x", testing::random_buffer(DType::F32, {m, n}, 61)},
                                              {"w", testing::random_buffer(DType::BF16, {n, k}, 62)}};
      std::vector<Buffer> ys;
      std::vector<int64_t> folded, looped;
      for (bool fold : {true, false}) {
        CudaExecutor cuda(plan, "", CudaOptions{.bf16_activations = bf16, .fold_residuals = fold});
        for (const auto& [name, b] : inputs) cuda.set_input(name, b);
        cuda.run();
        cuda.run();  // buffers from the free list, as in later steps; recorded
        cuda.run();  // replayed
        ys.push_back(cuda.output("y"));
        folded.push_back(cuda.residuals_folded());
        looped.push_back(cuda.graph_stats().launched + cuda.graph_stats().recorded);
      }
      // One a run that goes launch by launch (all three with the library, whose runs are not
      // recorded; two with the GEMV, whose third replays the recorded graph).
      EXPECT_GE(looped[0], 2) << "m=" << m << " bf16=" << bf16;
      EXPECT_EQ(folded[0], looped[0]) << "m=" << m << " bf16=" << bf16;
      EXPECT_EQ(folded[1], 0);
      Interpreter ref(plan);
      for (const auto& [name, b] : inputs) ref.set_input(name, b);
      ref.run();
      const Buffer want = ref.output("y");
      ASSERT_EQ(ys[0].numel(), static_cast<size_t>(m * n));
      double largest = 0;
      for (size_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::abs(want.get(i)));
      for (size_t i = 0; i < want.numel(); ++i) {
        ASSERT_NEAR(ys[0].get(i), ys[1].get(i), 1e-6 * largest) << "element " << i << " m=" << m << " bf16=" << bf16;
        ASSERT_NEAR(ys[0].get(i), want.get(i), (bf16 && m >= 16 ? 3e-2 : 1e-4) * largest) << "element " << i << " m=" << m << " bf16=" << bf16;
      }
    }
}

// An RMS norm whose readers are all linear layers on the GEMV (a decode's) launches nothing: the
// GEMVs read its input and gain and norm as they load. Two sibling layers with bf16 weights (one
// group) read a norm with an f32 gain over rows of 264 (the GEMV's 16-byte loads); a lone layer
// with f32 weights reads a norm with a bf16 gain over rows of 70 (its one-element path). At 1 and
// 3 rows both norms fold, at 40 only the lone layer's; every way against the reference
// and the unfolded run, through the recorded and replayed graphs too, with three schedules.
TEST(CudaBackend, NormsFoldIntoTheGemvsThatReadThem) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const int64_t k1 = 264, k2 = 70, n = 40;
  const Expr s = Expr::var("s");
  Graph g;
  Tensor x1 = input(g, "x1", DType::F32, {s, Expr(k1)}), x2 = input(g, "x2", DType::F32, {s, Expr(k2)});
  Tensor g1 = input(g, "g1", DType::F32, {Expr(k1)}), g2 = input(g, "g2", DType::BF16, {Expr(k2)});
  Tensor wq = input(g, "wq", DType::BF16, {Expr(n), Expr(k1)}), wk = input(g, "wk", DType::BF16, {Expr(n + 8), Expr(k1)});
  Tensor wo = input(g, "wo", DType::F32, {Expr(n), Expr(k2)});
  Tensor h1 = rms_norm(x1, g1, 1e-5), h2 = rms_norm(x2, cast(g2, DType::F32), 1e-6);
  linear(h1, cast(wq, DType::F32), std::nullopt).output("q");
  linear(h1, cast(wk, DType::F32), std::nullopt).output("k");
  linear(h2, wo, std::nullopt).output("o");
  Graph plan = compiled(g);
  ASSERT_EQ(count_kernels(plan, "RMSNormMul"), 2);
  uint32_t seed = 90;
  const std::map<std::string, Buffer> weights = {{"g1", testing::random_buffer(DType::F32, {k1}, seed++)},
                                                 {"g2", testing::random_buffer(DType::BF16, {k2}, seed++)},
                                                 {"wq", testing::random_buffer(DType::BF16, {n, k1}, seed++)},
                                                 {"wk", testing::random_buffer(DType::BF16, {n + 8, k1}, seed++)},
                                                 {"wo", testing::random_buffer(DType::F32, {n, k2}, seed++)}};
  // From 14 (the inline schedules, kLinearVariants, come first), the schedules with the norm
  // staged in shared memory (14: four rows a unit, 22: one, so m = 3 takes its inline path); o's
  // rows (70 f32) cannot be staged, and its forced index clamps to its last inline schedule.
  static_assert(std::size(gen::kLinearVariants) == 14, "the forced indices below count them");
  for (int variant : {-1, 3, 9, 14, 22})
    for (int64_t m : {1, 3, 40}) {
      std::map<std::string, Buffer> inputs = weights;
      inputs["x1"] = testing::random_buffer(DType::F32, {m, k1}, seed++);
      inputs["x2"] = testing::random_buffer(DType::F32, {m, k2}, seed++);
      Interpreter ref(plan);
      for (const auto& [name, b] : inputs) ref.set_input(name, b);
      ref.run();
      std::map<std::string, std::vector<Buffer>> got;
      std::vector<int64_t> folded;
      for (bool fold : {true, false}) {
        CudaExecutor cuda(plan, "", CudaOptions{.force_variant = variant, .norm_in_gemv = fold});
        for (const auto& [name, b] : inputs) cuda.set_input(name, b);
        for (int run = 0; run < 3; ++run) cuda.run();  // launched, recorded, replayed (the GEMV's)
        for (const char* o : {"q", "k", "o"}) got[o].push_back(cuda.output(o));
        folded.push_back(cuda.norms_folded());
      }
      // Two norms a run that goes launch by launch (the third replays the second's graph); at
      // 40 rows the group goes to the library, but the lone layer stays on the GEMV (rows of 70
      // f32 values are not 16-byte aligned for the library) in all three runs (runs that call
      // the library are never recorded).
      EXPECT_EQ(folded[0], m < 16 ? 4 : 3) << "m=" << m;
      EXPECT_EQ(folded[1], 0);
      for (const char* o : {"q", "k", "o"}) {
        const Buffer want = ref.output(o);
        double largest = 0;
        for (size_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::abs(want.get(i)));
        ASSERT_EQ(got[o][0].numel(), want.numel());
        const double tol = (m >= 16 && std::string(o) != "o" ? 1e-3 : 2e-5) * largest;  // the library's bf16 parts
        for (size_t i = 0; i < want.numel(); ++i) {
          ASSERT_NEAR(got[o][0].get(i), want.get(i), tol) << o << " element " << i << " m=" << m << " variant " << variant;
          ASSERT_NEAR(got[o][0].get(i), got[o][1].get(i), tol) << o << " element " << i << " m=" << m << " variant " << variant;
        }
      }
    }
}

// A norm staged over a row wider than a block's float4s (4104 values: five a thread, the last
// for two threads alone; session 43 loads them all before using any) with a bf16 gain, as the 8B's
// 4096: every staged schedule (forced from 14: the ones of one row a unit, the only ones whose
// stage fits) against the reference, launched, recorded and replayed.
TEST(CudaBackend, StagedNormsOverWideRowsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const int64_t k = 4104, n = 48;
  Graph g;
  Tensor x = input(g, "x", DType::F32, {Expr::var("s"), Expr(k)});
  Tensor h = rms_norm(x, cast(input(g, "gain", DType::BF16, {Expr(k)}), DType::F32), 1e-6);
  linear(h, cast(input(g, "w", DType::BF16, {Expr(n), Expr(k)}), DType::F32), std::nullopt).output("y");
  const Graph plan = compiled(g);
  const std::map<std::string, Buffer> inputs = {{"x", testing::random_buffer(DType::F32, {1, k}, 301)},
                                                {"gain", testing::random_buffer(DType::BF16, {k}, 302, 0.5, 1.5)},
                                                {"w", testing::random_buffer(DType::BF16, {n, k}, 303)}};
  Interpreter ref(plan);
  for (const auto& [name, b] : inputs) ref.set_input(name, b);
  ref.run();
  const Buffer want = ref.output("y");
  double largest = 0;
  for (size_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::abs(want.get(i)));
  for (int variant = 14; variant < 20; ++variant) {
    CudaExecutor cuda(plan, "", CudaOptions{.force_variant = variant});
    for (const auto& [name, b] : inputs) cuda.set_input(name, b);
    for (int run = 0; run < 3; ++run) {
      cuda.run();
      const Buffer got = cuda.output("y");
      ASSERT_EQ(got.numel(), want.numel());
      for (size_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.get(i), want.get(i), 2e-5 * largest) << "element " << i << " variant " << variant << " run " << run + 1;
    }
    EXPECT_GT(cuda.norms_folded(), 0) << "variant " << variant;
  }
}

// A linear group whose one reader is the gated product of its two outputs (a decode's gate and
// up) stores the product itself: the product launches nothing. Through a norm the GEMV folds in
// and straight from an input (its product reading up first); 37 columns a member (a unit's last pair of columns half past the
// end); at 1 and 3 rows (the GEMV) and 40 (the library: nothing folds), with three schedules,
// against the reference and the unfolded run, through recorded and replayed graphs.
TEST(CudaBackend, GatedProductsFoldIntoTheirGroupsGemv) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  const int64_t k = 256, half = 37;
  const Expr s = Expr::var("s");
  Graph g;
  Tensor x1 = input(g, "x1", DType::F32, {s, Expr(k)}), x2 = input(g, "x2", DType::F32, {s, Expr(k)});
  Tensor gain = input(g, "gain", DType::BF16, {Expr(k)});
  std::map<std::string, Tensor> w;
  for (const char* name : {"gate1", "up1", "gate2", "up2"}) w.emplace(name, input(g, name, DType::BF16, {Expr(half), Expr(k)}));
  Tensor h1 = rms_norm(x1, cast(gain, DType::F32), 1e-6);
  auto lin = [&](const Tensor& a, const char* name) { return linear(a, cast(w.at(name), DType::F32), std::nullopt); };
  (silu(lin(h1, "gate1")) * lin(h1, "up1")).output("y1");
  (lin(x2, "up2") * sigmoid(lin(x2, "gate2"))).output("y2");
  Graph plan = compiled(g);
  uint32_t seed = 120;
  std::map<std::string, Buffer> weights = {{"gain", testing::random_buffer(DType::BF16, {k}, seed++)}};
  for (const auto& [name, t] : w) weights[name] = testing::random_buffer(DType::BF16, {half, k}, seed++);
  // 6 and 9: schedules with the norm staged (the five even-column schedules come first).
  for (int variant : {-1, 1, 3, 6, 9})
    for (int64_t m : {1, 3, 40}) {
      std::map<std::string, Buffer> inputs = weights;
      inputs["x1"] = testing::random_buffer(DType::F32, {m, k}, seed++);
      inputs["x2"] = testing::random_buffer(DType::F32, {m, k}, seed++);
      Interpreter ref(plan);
      for (const auto& [name, b] : inputs) ref.set_input(name, b);
      ref.run();
      std::map<std::string, std::vector<Buffer>> got;
      std::vector<int64_t> products, norms;
      for (bool fold : {true, false}) {
        CudaExecutor cuda(plan, "", CudaOptions{.force_variant = variant, .gated_in_gemv = fold});
        for (const auto& [name, b] : inputs) cuda.set_input(name, b);
        for (int run = 0; run < 3; ++run) cuda.run();  // launched, recorded, replayed (the GEMV's)
        for (const char* o : {"y1", "y2"}) got[o].push_back(cuda.output(o));
        products.push_back(cuda.products_folded());
        norms.push_back(cuda.norms_folded());
      }
      // Two products a run that goes launch by launch (the third replays the second's graph),
      // and the norm folds into the gated GEMV as into the plain one.
      EXPECT_EQ(products[0], m < 16 ? 4 : 0) << "m=" << m << " variant " << variant;
      EXPECT_EQ(products[1], 0);
      EXPECT_EQ(norms[0], m < 16 ? 2 : 0) << "m=" << m;
      for (const char* o : {"y1", "y2"}) {
        const Buffer want = ref.output(o);
        double largest = 0;
        for (size_t i = 0; i < want.numel(); ++i) largest = std::max(largest, std::abs(want.get(i)));
        ASSERT_EQ(got[o][0].numel(), want.numel());
        const double tol = (m >= 16 ? 1e-3 : 2e-5) * largest;  // the library's bf16 parts
        for (size_t i = 0; i < want.numel(); ++i) {
          ASSERT_NEAR(got[o][0].get(i), want.get(i), tol) << o << " element " << i << " m=" << m << " variant " << variant;
          ASSERT_NEAR(got[o][0].get(i), got[o][1].get(i), tol) << o << " element " << i << " m=" << m << " variant " << variant;
        }
      }
    }
}

// Attention's heads merged back into rows ([heads, s, d] as [s, heads * d]) are a view of two
// layers, so a linear layer copies them into a contiguous scratch first; at s = 1 the view reads
// its source in order and the copy is skipped. Against the reference interpreter either way,
// including the recorded and replayed graphs, and the skip leaves out the copy's launch: session
// 23's first version skipped the copy but still ran its launch, which wrote m * k values into
// the m * n output (k = 128 > n = 40 here, as on the Qwen3-30B-A3B shape's o projection).
TEST(CudaBackend, MergedHeadsOfOneRowSkipTheScratchCopy) {
  const int64_t heads = 4, d = 32, n = 40;
  const Expr s = Expr::var("s");
  Graph g;
  Tensor a = input(g, "a", DType::F32, {Expr(heads), s, Expr(d)});
  Tensor w = input(g, "w", DType::BF16, {n, heads * d});
  linear(a.permute({1, 0, 2}).reshape({s, Expr(heads * d)}), cast(w, DType::F32), std::nullopt).output("y");
  Graph plan = compiled(g);
  const PlanKernels kernels = generate_plan_kernels(plan);
  int scratch_linear = 0;
  for (const auto& k : kernels.per_node) scratch_linear += k && k->linear && k->linear->a_from_scratch;
  ASSERT_EQ(scratch_linear, 1);  // the case this test is about
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  CudaExecutor skipping(plan, "", CudaOptions{}), copying(plan, "", CudaOptions{.skip_in_order_copies = false});
  uint32_t seed = 70;
  for (int64_t sv : {1, 3, 1}) {
    Interpreter ref(plan);
    const Buffer ab = testing::random_buffer(DType::F32, {heads, sv, d}, seed++), wb = testing::random_buffer(DType::BF16, {n, heads * d}, 71);
    ref.set_input("a", ab);
    ref.set_input("w", wb);
    ref.run();
    const int64_t skipped = skipping.scratch_copies_skipped(), launched = skipping.launches(), launched_copying = copying.launches();
    const CudaExecutor::GraphStats before = skipping.graph_stats();
    for (CudaExecutor* cuda : {&skipping, &copying}) {
      cuda->set_input("a", ab);
      cuda->set_input("w", wb);
      for (int rep = 0; rep < 3; ++rep) {
        cuda->run();
        expect_close(ref.output("y"), cuda->output("y"), "s=" + std::to_string(sv) + " run " + std::to_string(rep + 1));
      }
    }
    // Runs that are not replays go through the executor's loop (the first two of a new s: run,
    // record); at s = 1 each skips the copy, so makes one launch fewer.
    const CudaExecutor::GraphStats& after = skipping.graph_stats();
    const int64_t looped = (after.launched - before.launched) + (after.recorded - before.recorded);
    if (seed == 71) {
      EXPECT_EQ(looped, 2);  // the first s = 1
    }
    const int64_t fewer = sv == 1 ? looped : 0;
    EXPECT_EQ(skipping.scratch_copies_skipped() - skipped, fewer) << "s=" << sv;
    EXPECT_EQ((copying.launches() - launched_copying) - (skipping.launches() - launched), fewer) << "s=" << sv;
    EXPECT_EQ(copying.scratch_copies_skipped(), 0);
  }
}

// Grouped-query causal attention over a cache slice, as the decoder builds it (`group` query
// heads per KV head in the rows of one batch entry; two KV heads).
Graph prefill_attention_graph(int64_t d, int64_t cache = 512, int64_t group = 2) {
  Graph g;
  Expr seq = Expr::var("seq"), past = Expr::var("past"), total = past + seq, z = Expr::index();
  Tensor q = input(g, "q", DType::F32, {2, seq * group, d});
  Tensor kc = input(g, "k", DType::F32, {2, cache, d}), vc = input(g, "v", DType::F32, {2, cache, d});
  Tensor k = slice(kc, 1, 0, total), v = slice(vc, 1, 0, total);
  Tensor causal = reshape(cast(iota(g, lt(z % total, z / total + past + 1), seq * total), DType::Bool), {seq, total});
  Tensor scores = matmul(q, transpose(k, 1, 2)) * (1.0 / std::sqrt(static_cast<double>(d)));
  Tensor masked = where(causal, reshape(scores, {2, group, seq, total}), -std::numeric_limits<double>::infinity());
  matmul(reshape(softmax(masked, -1), {2, seq * group, total}), v).output("out");
  return g;
}

// The tensor-core attention finds q's rows through q_row_index: where it accepts a view, row r's
// index plus p must be the view's own index of element r * dk + p; where rows do not sit dk
// apart in memory order it must refuse.
TEST(CudaCodegen, QRowIndexAgreesWithTheViewsIndex) {
  auto value = [](const Expr& e, int64_t at) {
    const Expr x = e.substitute_index(Expr(at)).simplify();
    EXPECT_TRUE(x.is_const()) << e.to_string();
    return x.is_const() ? x.value() : -1;
  };
  struct Kind {
    const char* name;
    View view;
    int64_t dk;
    bool accepted;
  };
  const std::vector<Kind> kinds = {
      {"contiguous", View::contiguous({Expr(2), Expr(9), Expr(16)}), 16, true},
      // grouped-query q: [heads, seq, d] read from [seq, heads, d], heads stacked in groups
      {"grouped", View::contiguous({Expr(5), Expr(8), Expr(16)}).permute({1, 0, 2}).reshape({Expr(2), Expr(20), Expr(16)}), 16, true},
      {"offset rows", View::contiguous({Expr(3), Expr(12), Expr(32)}).slice(1, Expr(2), Expr(11)).slice(2, Expr(0), Expr(16)), 16, true},
      // a contiguous reshape keeps rows dk apart: accepted
      {"reshaped", View::contiguous({Expr(2), Expr(8), Expr(16)}).reshape({Expr(2), Expr(16), Expr(8)}), 8, true},
      // rows of a transposed buffer, reshaped: consecutive elements are 2 apart
      {"rows of a transposed buffer", View::contiguous({Expr(16), Expr(2)}).permute({1, 0}).reshape({Expr(4), Expr(8)}), 8, false},
      {"transposed last dim", View::contiguous({Expr(2), Expr(16), Expr(9)}).permute({0, 2, 1}), 16, false},
  };
  for (const Kind& k : kinds) {
    const std::optional<Expr> row = gen::q_row_index(k.view, k.dk);
    ASSERT_EQ(row.has_value(), k.accepted) << k.name;
    if (!row) continue;
    const IndexExprs ix = k.view.flat_index();
    const int64_t rows = value(k.view.numel(), 0) / k.dk;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t p = 0; p < k.dk; ++p) ASSERT_EQ(value(*row, r) + p, value(ix.index, r * k.dk + p)) << k.name << " row " << r << " p " << p;
  }
}

// Without a GPU: the plan's Attention has a tensor-core tiled kernel, and it compiles.
TEST(CudaCodegen, PrefillAttentionHasATensorCoreKernel) {
  for (int64_t d : {64, 128}) {
    PlanKernels k = generate_plan_kernels(compiled(prefill_attention_graph(d)));
    int mma = 0;
    for (const auto& n : k.per_node) mma += n && n->tiled_mma && n->tiled_mma->tensor_cores;
    EXPECT_EQ(mma, 1) << "d=" << d;
    if (have_nvrtc()) {
      EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", "")) << "d=" << d;
    }
  }
}

// One executor of an attention plan and the kernel mode it was made with.
struct AttentionMode {
  CudaExecutor* cuda;
  bool tc, bf16;
  std::string name;
};

// Runs attention graph `g` on the reference and in each of `modes` with inputs `in` at (seq, past)
// and checks the largest difference of "out" against the mode's bound. With bf16 activations the
// truth reads the f32 inputs (q, k, v) rounded to bf16, as the kernel does; what it rounds further
// (the probabilities, 2^-8 of each at most) is the bound: values are within [-2, 2], so an output
// (the probabilities' weighted mean of values) moves by at most 2 * 2^-8. The tensor cores'
// f32-faithful products split each operand into bf16 hi + lo (about 2^-16 a product). The
// reference runs once for each rounding the modes need (it is the slow part of the test).
void expect_attention_near_reference(const Graph& g, const std::vector<AttentionMode>& modes, const std::map<std::string, Buffer>& in,
                                     int64_t seq, int64_t past, const std::string& what) {
  std::map<bool, Buffer> truth;  // by whether the inputs were rounded to bf16
  for (const AttentionMode& m : modes) {
    if (!truth.count(m.bf16)) {
      Interpreter ref(g);
      for (const auto& [name, b] : in) ref.set_input(name, m.bf16 && b.dtype() == DType::F32 ? b.cast(DType::BF16).cast(DType::F32) : b);
      ref.set_dim("seq", seq), ref.set_dim("past", past);
      ref.run();
      truth.emplace(m.bf16, ref.output("out"));
    }
    for (const auto& [name, b] : in) m.cuda->set_input(name, b);
    m.cuda->set_dim("seq", seq), m.cuda->set_dim("past", past);
    m.cuda->run();
    const Buffer& want = truth.at(m.bf16);
    Buffer got = m.cuda->output("out");
    ASSERT_EQ(want.shape(), got.shape()) << what << " " << m.name;
    double worst = 0;
    for (size_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(want.get(i) - got.get(i)));
    EXPECT_LE(worst, m.bf16 ? 2 * 0x1p-8 + 1e-5 : m.tc ? 2e-4 : 2e-5) << what << " " << m.name << " seq=" << seq << " past=" << past;
  }
}

// The tensor-core kernel f32-faithful, the CUDA-core kernel, the tensor-core kernel with bf16
// activations: one executor each of `plan`, kept in `keep`.
std::vector<AttentionMode> attention_modes(const Graph& plan, std::vector<std::unique_ptr<CudaExecutor>>& keep) {
  std::vector<AttentionMode> modes;
  for (int mode : {0, 1, 2}) {
    const bool tc = mode != 1, bf16 = mode == 2;
    keep.push_back(std::make_unique<CudaExecutor>(plan, "", CudaOptions{.tensor_cores = tc, .bf16_activations = bf16}));
    modes.push_back({keep.back().get(), tc, bf16, "mode " + std::to_string(mode)});
  }
  return modes;
}

// The tiled prefill kernels, on the tensor cores and on CUDA cores, against the reference: row
// counts below, at and past a 64-row tile, keys past the rows (a cached prefix), rows that see
// 4 to 8 key tiles (a causal prefill's long rows). The tensor-core
// products split f32 into bf16 hi + lo (about 2^-16 a product), so the tolerance is wider than
// the CUDA cores' exact products need. Groups of 4 and 8 query heads take fewer sizes: the
// reference's time grows with the group, and group 2 has covered the long rows.
TEST(CudaBackend, PrefillAttentionOnTensorCoresMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  // Group 2 (Qwen3-0.6B), 4 (Llama-3-8B) and 8 (Qwen3-30B-A3B) query heads a KV head.
  for (int64_t group : {2, 4, 8})
  for (int64_t d : {64, 128}) {
    if (group > 2 && d == 64) continue;
    Graph g = prefill_attention_graph(d, 512, group);
    Graph plan = compiled(g);
    ASSERT_EQ(count_kernels(plan, "Attention"), 1);
    std::vector<std::unique_ptr<CudaExecutor>> keep;
    const std::vector<AttentionMode> modes = attention_modes(plan, keep);
    const std::vector<std::pair<int64_t, int64_t>> all{{8, 0}, {37, 5}, {64, 0}, {130, 3}, {200, 56}, {300, 200}};
    const std::vector<std::pair<int64_t, int64_t>> few{{37, 5}, {130, 3}, {200, 56}};
    for (auto [seq, past] : group == 2 ? all : few) {
      const std::map<std::string, Buffer> in{{"q", testing::random_buffer(DType::F32, {2, group * seq, d}, 21)},
                                             {"k", testing::random_buffer(DType::F32, {2, 512, d}, 22)},
                                             {"v", testing::random_buffer(DType::F32, {2, 512, d}, 23)}};
      expect_attention_near_reference(g, modes, in, seq, past, "group " + std::to_string(group) + " d=" + std::to_string(d));
    }
  }
}

// Grouped-query attention with a mask given as an input, one per KV head ([2, 1, seq, total],
// broadcast over the group's heads): causal, with holes that differ between the two heads.
Graph masked_attention_graph(int64_t d, int64_t group = 2) {
  Graph g;
  Expr seq = Expr::var("seq"), past = Expr::var("past"), total = past + seq;
  Tensor q = input(g, "q", DType::F32, {2, seq * group, d});
  Tensor kc = input(g, "k", DType::F32, {2, 512, d}), vc = input(g, "v", DType::F32, {2, 512, d});
  Tensor mask = input(g, "mask", DType::Bool, {2, 1, seq, total});
  Tensor k = slice(kc, 1, 0, total), v = slice(vc, 1, 0, total);
  Tensor scores = matmul(q, transpose(k, 1, 2)) * (1.0 / std::sqrt(static_cast<double>(d)));
  Tensor masked = where(mask, reshape(scores, {2, group, seq, total}), -std::numeric_limits<double>::infinity());
  matmul(reshape(softmax(masked, -1), {2, seq * group, total}), v).output("out");
  return g;
}

// The tensor-core kernel reads the mask through its pre-pass's summary of batch entry 0's rows;
// entry 1's mask differs, so its blocks read the mask in every tile. Both against the reference,
// in all three modes, at sizes with partial, hidden and whole tiles.
TEST(CudaBackend, PrefillAttentionWithAMaskThatVariesOverTheBatch) {
  Graph g = masked_attention_graph(64);
  Graph plan = compiled(g);
  ASSERT_EQ(count_kernels(plan, "Attention"), 1);
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  std::vector<std::unique_ptr<CudaExecutor>> keep;
  const std::vector<AttentionMode> modes = attention_modes(plan, keep);
  for (auto [seq, past] : {std::pair<int64_t, int64_t>{37, 5}, {130, 3}, {200, 56}}) {
    const int64_t total = seq + past;
    Buffer mask(DType::Bool, {2, 1, seq, total});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t j = 0; j < total; ++j) {
          // Key 0 always (no row is wholly hidden); entry 1 also hides keys 64-127 of its later rows.
          const bool hole = (i * 7 + j * 3 + b * 5) % 11 == 0 || (b == 1 && i > 100 && j >= 64 && j < 128);
          mask.set((b * seq + i) * total + j, j <= i + past && (j == 0 || !hole) ? 1.0 : 0.0);
        }
    const std::map<std::string, Buffer> in{{"q", testing::random_buffer(DType::F32, {2, 2 * seq, 64}, 41)},
                                           {"k", testing::random_buffer(DType::F32, {2, 512, 64}, 42)},
                                           {"v", testing::random_buffer(DType::F32, {2, 512, 64}, 43)},
                                           {"mask", mask}};
    expect_attention_near_reference(g, modes, in, seq, past, "masked");
  }
}

// Without a GPU: with bf16 activations the tensor-core kernels (prefill attention, an MoE's
// experts) round their operands once and multiply once (no hi + lo split), and they compile.
TEST(CudaCodegen, Bf16ActivationsTakeOneProduct) {
  const CodegenOptions bf16{.bf16_activations = true};
  moetest::MoeExperts c;
  for (const Graph& plan : {compiled(prefill_attention_graph(128)), compiled(c.graph())}) {
    const std::string faithful = generate_plan_kernels(plan).source(), rounded = generate_plan_kernels(plan, bf16).source();
    EXPECT_NE(faithful.find("lm_split_bf16("), std::string::npos);
    // The prelude defines lm_split_bf16 once; no kernel calls it.
    EXPECT_EQ(rounded.find("lm_split_bf16(", rounded.find("lm_split_bf16(") + 1), std::string::npos);
    EXPECT_NE(rounded.find("lm_pack_bf16(lm_"), std::string::npos);
    if (have_nvrtc()) {
      EXPECT_NO_THROW(nvrtc_compile(rounded, "sm_90", ""));
    }
  }
}

// Without a GPU: a decode's attention has its one-launch kernel, which asks L2 for its key and
// value rows before it waits on the kernel before (split_attention_prefetch) and counts its
// finished slices with one acquire-release atomic a block, and it compiles.
TEST(CudaCodegen, DecodeAttentionHasAOneLaunchKernel) {
  for (int64_t d : {64, 128}) {
    PlanKernels k = generate_plan_kernels(compiled(prefill_attention_graph(d, 512, 4)));
    int once = 0;
    for (const auto& n : k.per_node) {
      if (!n || !n->once || n->once_max_slices != gen::kSplitOnceMaxSlices) continue;
      ++once;
      const std::string* found = k.functions.find(n->once->function);
      ASSERT_NE(found, nullptr);
      const std::string& text = *found;
      const size_t prefetch = text.find("lm_prefetch_l2("), wait = text.find("lm_grid_wait();");
      ASSERT_NE(prefetch, std::string::npos) << "d=" << d;
      EXPECT_LT(prefetch, wait) << "d=" << d;
      EXPECT_NE(text.find("lm_prefetch_l2(", prefetch + 1), std::string::npos) << "d=" << d << ": keys and values both";
      // The slices' count: one acquire-release atomic by thread 0, no fence in every thread.
      EXPECT_NE(text.find("lm_atom_add1_acq_rel_gpu("), std::string::npos) << "d=" << d;
      EXPECT_EQ(text.find("__threadfence()"), std::string::npos) << "d=" << d;
    }
    EXPECT_EQ(once, 1) << "d=" << d;
    if (have_nvrtc()) {
      EXPECT_NO_THROW(nvrtc_compile(k.source(), "sm_90", "")) << "d=" << d;
    }
  }
}

// Decode-sized attention (a few rows a KV head: the split over slices of keys) against the
// reference: one row group (4 query heads a KV head) and two (8), keys across slice edges, up to
// the one-launch kernel's last slice count (64 slices: 2048 keys) and past it (the two launches).
// Each case runs three times on one executor: the second records a CUDA graph, the third replays
// it, so the one-launch kernel's counters must be back at zero after every launch.
TEST(CudaBackend, DecodeAttentionMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU: " << unavailable_reason() << nvrtc_unavailable_reason();
  for (int64_t group : {4, 8})
    for (int64_t d : {64, 128}) {
      Graph g = prefill_attention_graph(d, 2200, group);
      Graph plan = compiled(g);
      CudaExecutor cuda(plan, "");
      for (auto [seq, past] : {std::pair<int64_t, int64_t>{1, 0}, {1, 30}, {1, 31}, {1, 32}, {2, 95}, {1, 513}, {1, 2047}, {1, 2100}}) {
        Interpreter ref(g);
        std::map<std::string, Buffer> in{{"q", testing::random_buffer(DType::F32, {2, group * seq, d}, 31)},
                                         {"k", testing::random_buffer(DType::F32, {2, 2200, d}, 32)},
                                         {"v", testing::random_buffer(DType::F32, {2, 2200, d}, 33)}};
        for (auto& [name, b] : in) ref.set_input(name, b);
        ref.set_dim("seq", seq), ref.set_dim("past", past);
        ref.run();
        const Buffer want = ref.output("out");
        for (int run = 0; run < 3; ++run) {
          for (auto& [name, b] : in) cuda.set_input(name, b);
          cuda.set_dim("seq", seq), cuda.set_dim("past", past);
          cuda.run();
          Buffer got = cuda.output("out");
          ASSERT_EQ(want.shape(), got.shape());
          double worst = 0;
          for (size_t i = 0; i < want.numel(); ++i) worst = std::max(worst, std::abs(want.get(i) - got.get(i)));
          EXPECT_LE(worst, 2e-5) << "group=" << group << " d=" << d << " seq=" << seq << " past=" << past << " run " << run;
        }
      }
    }
}

}  // namespace
}  // namespace luminal::cuda
