// A one-block small group's code inside the gated experts' GEMV that reads its member as scales
// (fold_small_groups), or in the last block of the router whose output it reads
// (fold_groups_into_producers; both in cuda_codegen.h).
#include <algorithm>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_codegen_parts.h"
#include "core/cache_paths.h"

namespace luminal::cuda {

constexpr const char* kWait = "  lm_grid_wait();\n";

std::optional<std::pair<size_t, size_t>> dims_and_wait(const std::string& text) {
  const size_t p = text.find("const long long* __restrict__ lm_dims) {\n"), w = text.find(kWait);
  if (p == std::string::npos || w == std::string::npos || text.find(kWait, w + 1) != std::string::npos) return std::nullopt;
  return std::make_pair(p, w);
}

std::optional<std::pair<std::string, std::string>> renamed_twin(const std::string& function, std::optional<std::string> text,
                                                                const std::string& prefix) {
  if (!text) return std::nullopt;
  const std::string name = prefix + hash_key(*text);
  const size_t at = text->find(function);
  if (at == std::string::npos) return std::nullopt;
  text->replace(at, function.size(), name);
  return std::make_pair(name, *text);
}

namespace {

// The group's body with `leaf`'s name (lm_l<leaf>) as `leaf_as` where given, then its outputs,
// leaves and shared arrays renamed lm_go<j>, lm_gl<l> and lm_gs<j>, where they could meet the
// names of the function it goes into (a GEMV's lm_s0 is a listed scale).
std::string renamed_group_body(const SmallGroup& grp, std::optional<size_t> leaf, const std::string& leaf_as) {
  std::string body = grp.body;
  if (leaf) body = std::regex_replace(body, std::regex("\\blm_l" + std::to_string(*leaf) + "\\b"), leaf_as);
  body = std::regex_replace(body, std::regex(R"(\blm_o(\d+)\b)"), "lm_go$1");
  body = std::regex_replace(body, std::regex(R"(\blm_l(\d+)\b)"), "lm_gl$1");
  return std::regex_replace(body, std::regex(R"(\blm_s(\d+)\b)"), "lm_gs$1");
}

// The declarations of the group's shared arrays (lm_gs<j>).
std::string group_arrays(const SmallGroup& grp) {
  std::string code;
  for (size_t j = 0; j < grp.nodes.size(); ++j) code += "  __shared__ float lm_gs" + std::to_string(j) + "[" + std::to_string(grp.capacity[j]) + "];\n";
  return code;
}

// The declarations of the dims the group reads, from the function's lm_dims; nullopt where one
// is not the graph's.
std::optional<std::string> group_dims(const SmallGroup& grp, const std::vector<std::string>& graph_dims) {
  std::string code;
  for (const std::string& d : grp.dims) {
    const auto it = std::find(graph_dims.begin(), graph_dims.end(), d);
    if (it == graph_dims.end()) return std::nullopt;
    code += "  const long long " + d + " = lm_dims[" + std::to_string(it - graph_dims.begin()) + "];\n";
  }
  return code;
}

}  // namespace

std::optional<LastBlockGroup> last_block_group(const SmallGroup& grp, size_t leaf, const std::string& leaf_as, const std::vector<std::string>& graph_dims,
                                               const std::string& comment, const std::string& before_body) {
  std::string body = renamed_group_body(grp, leaf, leaf_as);
  // One block runs it: it stores every member (a one-block group's body has no other use of its place).
  body = std::regex_replace(body, std::regex(R"(if \(blockIdx\.x == 0\) )"), "");
  if (body.find("blockIdx") != std::string::npos || body.find("gridDim") != std::string::npos || body.find("lm_grid_wait") != std::string::npos)
    return std::nullopt;
  LastBlockGroup g;
  for (size_t j = 0; j < grp.nodes.size(); ++j) g.params += "char* __restrict__ lm_go" + std::to_string(j) + ", ";
  for (size_t l = 0; l < grp.leaves.size(); ++l)
    if (l != leaf) g.params += "const char* __restrict__ lm_gl" + std::to_string(l) + ", ";
  g.params += "char* __restrict__ lm_gcnt, ";
  // (LUMINAL_CUDA_SMALL_GROUP_RELEASE=0 counts with fences, as the groups' own counts do.)
  static const bool release = gen::env_switch_on("LUMINAL_CUDA_SMALL_GROUP_RELEASE");
  const std::optional<std::string> dims = group_dims(grp, graph_dims);
  if (!dims) return std::nullopt;
  g.code = "  {  // " + comment + "\n  __shared__ int lm_last;\n" + gen::last_block_count("(unsigned*)lm_gcnt", "gridDim.x - 1", release) +
           group_arrays(grp) + *dims + "  {\n" + before_body + body + "  }\n  }\n";
  return g;
}

namespace {

// `text` (a generated function) with the group's code after its wait: the group's outputs and
// leaves as parameters before the dims (lm_go<j>, lm_gl<l>), its shared arrays (lm_gs<j>), its
// dims in a scope of their own, and the scales (lm_in2) read from member `scale`'s shared copy.
// With `through_o` (its router run in the o projection's launch), the router's logits leaf is
// read unscaled and scaled by h (lm_rh, a parameter after the leaves) first. nullopt where the
// text is not of the expected form.
std::optional<std::string> with_group(const std::string& text, const SmallGroup& grp, size_t scale, const std::vector<std::string>& graph_dims,
                                      const RouterThroughO* through_o) {
  const auto at = dims_and_wait(text);
  if (!at || text.find("lm_in2") == std::string::npos || text.find("lm_go0") != std::string::npos || text.find("lm_rh") != std::string::npos)
    return std::nullopt;
  const auto [p, w] = *at;
  std::string params;
  for (size_t j = 0; j < grp.nodes.size(); ++j) params += "char* __restrict__ lm_go" + std::to_string(j) + ", ";
  for (size_t l = 0; l < grp.leaves.size(); ++l) params += "const char* __restrict__ lm_gl" + std::to_string(l) + ", ";
  std::optional<size_t> leaf;
  std::string scaled;
  if (through_o) {
    leaf = static_cast<size_t>(std::find(grp.leaves.begin(), grp.leaves.end(), through_o->router) - grp.leaves.begin());
    if (*leaf == grp.leaves.size()) return std::nullopt;
    scaled = router_scaled_logits_code(*through_o, "((const float*)lm_gl" + std::to_string(*leaf) + ")", "lm_rh", false) +
             "  const char* const lm_rsx = (const char*)lm_rsl;\n";
    params += "const char* __restrict__ lm_rh, ";
  }
  const std::string body = renamed_group_body(grp, leaf, "lm_rsx");
  const std::optional<std::string> dims = group_dims(grp, graph_dims);
  if (!dims) return std::nullopt;
  // (The arrays outside the group's scope: lm_in2 points into one after it.)
  const std::string code = "  // The small group of the scales, in every block (block 0 stores its members).\n" + group_arrays(grp) + "  {\n" + *dims +
                           scaled + body + "  }\n  lm_in2 = (const char*)lm_gs" + std::to_string(scale) + ";\n";
  std::string out = text;
  out.insert(w + std::string(kWait).size(), code);
  out.insert(p, params);
  return out;
}

// A twin of form `f` whose functions are `transform`ed (named `prefix` and a hash of their
// text, added to `functions`); null where any function is not of the expected form.
std::shared_ptr<NodeKernels> twin_of(const NodeKernels& f, const std::function<std::optional<std::string>(const std::string&)>& transform,
                                     const std::string& prefix, FunctionSet& functions) {
  auto twin = std::make_shared<NodeKernels>();
  twin->launches = f.launches;
  twin->alternatives = f.alternatives;
  std::map<std::string, std::string> renamed;
  for (std::vector<Launch>* ls : {&twin->launches, &twin->alternatives})
    for (Launch& l : *ls) {
      if (!renamed.count(l.function)) {
        const std::string* text = functions.find(l.function);
        if (!text) return nullptr;
        const auto named = renamed_twin(l.function, transform(*text), prefix);
        if (!named) return nullptr;
        functions.add(named->first, named->second);
        renamed[l.function] = named->first;
      }
      l.function = renamed[l.function];
    }
  return twin;
}

// A twin of form `f` whose functions run the group first (scaling the logits themselves where
// the group's router runs in the o projection's launch).
std::shared_ptr<NodeKernels> routed_twin(const NodeKernels& f, const SmallGroup& grp, size_t scale, const std::vector<std::string>& graph_dims,
                                         FunctionSet& functions) {
  const RouterThroughO* through_o = grp.router_through_o ? &*grp.router_through_o : nullptr;
  return twin_of(f, [&](const std::string& text) { return with_group(text, grp, scale, graph_dims, through_o); },
                 through_o ? "lm_RoutedO_" : "lm_Routed_", functions);
}

// `text` (a linear GEMV whose output is the group's leaf `leaf`) with the group's code in its
// last block, after every block's stores: the group's outputs, its other leaves and a zeroed
// counter (lm_gcnt, left zero) as parameters before the dims; the leaf read through lm_out (the
// same buffer: a parameter of its own would break lm_out's __restrict__). nullopt where the
// text is not of the expected form (one early return, before any work, that every block takes
// alike, so that every block reaches the count or none does).
std::optional<std::string> with_tail_group(const std::string& text, const SmallGroup& grp, size_t leaf, const std::vector<std::string>& graph_dims) {
  const std::string dims_param = "const long long* __restrict__ lm_dims) {\n", uniform_return = "  if (lm_m <= 0 || lm_n <= 0) return;\n";
  const size_t p = text.find(dims_param), end = text.rfind('}');
  const size_t r = text.find("return;");
  if (p == std::string::npos || end == std::string::npos || end < p || text.find("lm_gcnt") != std::string::npos ||
      r == std::string::npos || text.find("return;", r + 1) != std::string::npos || text.find(uniform_return) + uniform_return.find("return;") != r)
    return std::nullopt;
  const std::optional<LastBlockGroup> g = last_block_group(grp, leaf, "lm_out", graph_dims, "The small group that reads this GEMV's output, in its last block.");
  if (!g) return std::nullopt;
  std::string out = text;
  out.insert(end, g->code);
  out.insert(p, g->params);
  return out;
}

}  // namespace

std::optional<size_t> only_computed_leaf(const Graph& plan, const SmallGroup& grp) {
  std::optional<size_t> leaf;
  for (size_t l = 0; l < grp.leaves.size(); ++l) {
    if (plan.node(grp.leaves[l]).op == OpKind::Input) continue;
    if (leaf) return std::nullopt;
    leaf = l;
  }
  return leaf;
}

void fold_small_groups(const Graph& plan, std::vector<SmallGroup>& groups, std::vector<std::optional<NodeKernels>>& per_node,
                       const std::vector<std::string>& graph_dims, FunctionSet& functions) {
  const std::vector<NodeId> order = plan.topo_order();
  for (SmallGroup& grp : groups) {
    if (grp.counter || grp.body.empty()) continue;
    const std::set<NodeId> members(grp.nodes.begin(), grp.nodes.end());
    // The first reader outside the group, in the plan's order.
    std::optional<NodeId> first;
    for (NodeId id : order) {
      if (members.count(id)) continue;
      const Node& n = plan.node(id);
      if (std::any_of(n.inputs.begin(), n.inputs.end(), [&](const Edge& e) { return members.count(e.src) > 0; })) {
        first = id;
        break;
      }
    }
    if (!first) continue;
    const Node& r = plan.node(*first);
    if (r.op != OpKind::Kernel || r.kernel != "ScaledMatmul" || r.inputs.size() != 3 || !per_node[*first] || !per_node[*first]->gated) continue;
    if (members.count(r.inputs[0].src) || members.count(r.inputs[1].src) || !members.count(r.inputs[2].src)) continue;
    const size_t scale = static_cast<size_t>(std::find(grp.nodes.begin(), grp.nodes.end(), r.inputs[2].src) - grp.nodes.begin());
    NodeKernels& gated = *per_node[*first]->gated;
    std::shared_ptr<NodeKernels> plain = routed_twin(gated, grp, scale, graph_dims, functions);
    std::shared_ptr<NodeKernels> normed = gated.normed ? routed_twin(*gated.normed, grp, scale, graph_dims, functions) : nullptr;
    if (!plain || (gated.normed && !normed)) continue;
    gated.routed = plain;
    if (normed) gated.normed->routed = normed;
    grp.fold_reader = *first;
    grp.fold_member = scale;
    if (grp.router_through_o) grp.router_through_o->routed_takes_h = true;
  }
}

void fold_groups_into_producers(const Graph& plan, std::vector<SmallGroup>& groups, std::vector<std::optional<NodeKernels>>& per_node,
                                const std::vector<std::string>& graph_dims, FunctionSet& functions) {
  const std::vector<NodeId> order = plan.topo_order();
  std::map<NodeId, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  for (SmallGroup& grp : groups) {
    // (Not where the router runs in the o projection's launch: then no GEMV of its own produces it.)
    if (grp.counter || grp.body.empty() || grp.fold_reader || grp.router_through_o) continue;
    const std::optional<size_t> leaf = only_computed_leaf(plan, grp);  // the router's logits
    if (!leaf) continue;
    const NodeId producer = grp.leaves[*leaf];
    const Node& n = plan.node(producer);
    if (n.op != OpKind::Kernel || n.kernel != "Matmul" || n.dtype != DType::F32 || !per_node[producer] || !per_node[producer]->normed) continue;
    // The group runs where its producer does: every member after it.
    if (std::any_of(grp.nodes.begin(), grp.nodes.end(), [&](NodeId m) { return position[m] < position[producer]; })) continue;
    NodeKernels& normed = *per_node[producer]->normed;
    const size_t at = *leaf;
    std::shared_ptr<NodeKernels> twin =
        twin_of(normed, [&](const std::string& text) { return with_tail_group(text, grp, at, graph_dims); }, "lm_GroupTail_", functions);
    if (!twin) continue;
    normed.group_tail = twin;
    grp.tail_producer = producer;
  }
}

}  // namespace luminal::cuda
