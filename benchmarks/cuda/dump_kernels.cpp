// The CUDA kernels of a model's decode plan, for reading without a GPU: the module's source, the
// cubin NVRTC makes of it (where NVRTC loads), and a listing of each GEMV form's schedules by
// function name, including the linear groups' norm and gated forms, which the executor builds.
// Disassemble with cuobjdump (Triton's wheel carries one):
//   python3 scripts/make_random_model.py --arch llama-3-8b --out /tmp/cfg8b --config-only --layers 1
//   build/benchmarks/cuda_dump_kernels /tmp/cfg8b/config.json /tmp/k8b
//   cuobjdump -sass -fun lm_Matmul_<hash> /tmp/k8b/kernels.cubin
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/nvrtc.h"
#include "compiler/compile.h"
#include "core/error.h"
#include "models/decoder_graph.h"
#include "models/model_config.h"

using namespace luminal;
using namespace luminal::cuda;

namespace {

void list_form(std::ostream& out, const std::string& label, const NodeKernels* k) {
  if (!k || k->launches.empty()) return;
  out << label << ": " << k->launches.back().function;
  for (const Launch& l : k->alternatives) out << " " << l.function;
  out << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: cuda_dump_kernels CONFIG.json OUT_DIR\n";
    return 2;
  }
  try {
    const ModelConfig cfg = ModelConfig::from_json_file(argv[1]);
    Graph g;
    DecoderGraphOptions o;
    o.context = 64;
    build_decoder(g, cfg, o);
    const Graph plan = compile(g, CompileOptions{}).plan;
    // LUMINAL_CUDA_ROUTER_IN_GROUP=1: the routers in their routing groups, as the executor has them then.
    // LUMINAL_CUDA_TOP_RANKS=0: the routing's ranks shared out over blocks, as before session 47.
    const char* router = std::getenv("LUMINAL_CUDA_ROUTER_IN_GROUP");
    // LUMINAL_CUDA_FOLD_GROUPS=1: the gate/up experts' twins with the routing group inside.
    const char* top_ranks = std::getenv("LUMINAL_CUDA_TOP_RANKS");
    const char* fold = std::getenv("LUMINAL_CUDA_FOLD_GROUPS");
    // LUMINAL_CUDA_GROUP_IN_PRODUCER=1: the routers' twins with the routing group in their last block.
    const char* tail = std::getenv("LUMINAL_CUDA_GROUP_IN_PRODUCER");
    // LUMINAL_CUDA_ATTENTION_NORMS=1: decode attention's twins that compute their q norms and new rows.
    const char* norms = std::getenv("LUMINAL_CUDA_ATTENTION_NORMS");
    // LUMINAL_CUDA_ROUTER_THROUGH_O=1: the o projections' twins computing their routers' logits.
    const char* through_o = std::getenv("LUMINAL_CUDA_ROUTER_THROUGH_O");
    // LUMINAL_CUDA_ROUTING_IN_O=1 (with the above): those twins running the routing group in their last block.
    const char* routing_in_o = std::getenv("LUMINAL_CUDA_ROUTING_IN_O");
    PlanKernels k = generate_plan_kernels(plan, CodegenOptions{.router_in_group = router && std::string(router) != "0",
                                                               .top_ranks_in_groups = !top_ranks || std::string(top_ranks) != "0",
                                                               .fold_groups = fold && std::string(fold) != "0",
                                                               .groups_in_producers = tail && std::string(tail) != "0",
                                                               .attention_norms = norms && std::string(norms) != "0",
                                                               .routers_through_o = through_o && std::string(through_o) != "0",
                                                               .routing_in_o = routing_in_o && std::string(routing_in_o) != "0"});
    const std::filesystem::path dir(argv[2]);
    std::filesystem::create_directories(dir);
    std::ofstream list(dir / "schedules.txt");
    // Each GEMV node's forms, then the groups of linear layers reading one norm (q/k/v, gate/up).
    std::map<NodeId, std::vector<NodeId>> readers;
    for (NodeId id = 0; id < plan.size(); ++id) {
      if (!k.per_node[id] || k.per_node[id]->alternatives.empty()) continue;
      const std::string label = plan.node(id).kernel + " node " + std::to_string(id);
      list_form(list, label, &*k.per_node[id]);
      list_form(list, label + " normed", k.per_node[id]->normed.get());
      if (const auto& gated = k.per_node[id]->gated) {  // an MoE's gate/up experts storing their gated product
        list_form(list, label + " gated", gated.get());
        list_form(list, label + " gated normed", gated->normed.get());
      }
      if (k.per_node[id]->normed) readers[plan.node(id).inputs[0].src].push_back(id);
    }
    for (const auto& [norm, members] : readers) {
      if (members.size() < 2) continue;
      auto grouped = emit_grouped_linear(plan, members, plan.dims(), k.functions);
      if (!grouped) continue;
      const std::string label = "group of " + std::to_string(members.size()) + " after node " + std::to_string(norm);
      list_form(list, label, &*grouped);
      list_form(list, label + " gated", grouped->gated.get());
      list_form(list, label + " normed", grouped->normed.get());
      if (grouped->normed) list_form(list, label + " normed gated", grouped->normed->gated.get());
    }
    std::ofstream(dir / "kernels.cu") << k.source();
    std::ofstream(dir / "plan.txt") << plan.dump();  // the nodes the functions are for
    std::cout << k.functions.texts.size() << " functions: " << (dir / "kernels.cu").string() << ", " << (dir / "schedules.txt").string() << "\n";
    if (const std::string why = nvrtc_unavailable_reason(); !why.empty()) {
      std::cout << "no cubin: " << why << "\n";
      return 0;
    }
    const CompiledKernels c = nvrtc_compile(k.source(), "sm_90", "");
    std::ofstream(dir / "kernels.cubin", std::ios::binary) << c.cubin;
    std::cout << "sm_90 cubin: " << (dir / "kernels.cubin").string() << " (" << c.compile_ms / 1000 << " s)\n";
  } catch (const std::exception& e) {
    std::cerr << "cuda_dump_kernels: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
