// The fusion pass: adds, next to each elementwise node, a Fused kernel that computes the node
// together with the elementwise nodes feeding it (through no view, up to a size limit), and
// next to each reduction a FusedSum/FusedMax with its elementwise prologue inlined. The
// originals stay in their classes, so extraction and search choose between fused and unfused.
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "egraph/fusion.h"
#include "graph/fused_program.h"

namespace luminal {
namespace {

constexpr int kMaxInstrs = 24;
constexpr int kMaxInputs = 8;

bool elementwise(const EGraph& g, const ENode& n) {
  const OpInfo& op = g.ops().info(n.op);
  return op.primitive && (is_unary(op.kind) || is_binary(op.kind) || op.kind == OpKind::Cast);
}

struct Builder {
  const EGraph& g;
  FusedProgram prog;
  std::vector<ClassId> inputs;
  std::unordered_map<ClassId, int> operand_of;  // class -> operand index already emitted
  std::unordered_map<ClassId, bool> visiting;    // on the current path: a cycle, so an input
  int max_instrs = kMaxInstrs;                   // inlining stops here (later operands are inputs)
  const std::unordered_set<ClassId>* stop = nullptr;  // classes read as inputs, never inlined

  // The first elementwise primitive node of a class, if any.
  const ENode* elementwise_node(ClassId c) const {
    for (const ENode& n : g.eclass(c).nodes)
      if (elementwise(g, n)) return &n;
    return nullptr;
  }

  // The value of a node that holds one value everywhere: a Constant, or an Iota whose
  // expression is a number (or that has one element, read at index 0). The Python frontend's
  // index arithmetic is full of these (Iota(128) : i32[1]); as kernel inputs they had used up
  // the input budget, so a cache index computation ran as a dozen small kernels a layer.
  // Integers past 2^24 are not exact as a program's f32 constant: those stay inputs.
  std::optional<float> constant_value(const ENode& k) const {
    if (k.op == g.ops().primitive(OpKind::Constant)) return static_cast<float>(g.attr(k).number);
    if (k.op != g.ops().primitive(OpKind::Iota)) return std::nullopt;
    const std::vector<Expr>& e = g.attr(k).exprs;  // {expr, n}
    std::optional<int64_t> v = e.at(0).as_const();
    if (!v && e.at(1).is_const(1) && e.at(0).dims().empty()) v = e.at(0).eval({}, 0);
    if (!v || *v > (int64_t{1} << 24) || *v < -(int64_t{1} << 24)) return std::nullopt;
    return static_cast<float>(*v);
  }

  // A constant (above) read through an unmasked view, or directly: a constant instruction.
  std::optional<float> broadcast_constant(ClassId c) const {
    for (const ENode& n : g.eclass(c).nodes) {
      if (n.op != g.ops().view()) {
        if (auto v = constant_value(n)) return v;
        continue;
      }
      if (g.attr(n).view->has_mask()) continue;
      for (const ENode& k : g.eclass(n.kids[0]).nodes)
        if (auto v = constant_value(k)) return v;
    }
    return std::nullopt;
  }

  // Emits class c as an operand: inlined when elementwise and budget remains, else an input.
  // Operand indices count inputs first; they are renumbered in finish().
  int emit(ClassId c, bool root) {
    c = g.find(c);
    if (auto it = operand_of.find(c); it != operand_of.end()) return it->second;
    int r;
    const ENode* n = visiting[c] || (!root && stop && stop->count(c)) ? nullptr : elementwise_node(c);
    visiting[c] = true;
    std::optional<float> k = root ? std::nullopt : broadcast_constant(c);
    if (k) {
      FusedInstr in;
      in.value = *k;
      in.dtype = g.info(c).dtype;
      prog.instrs.push_back(in);
      r = kInstr + static_cast<int>(prog.instrs.size()) - 1;
    } else if (n && (root || static_cast<int>(prog.instrs.size()) < max_instrs)) {
      const OpInfo& op = g.ops().info(n->op);
      FusedInstr in;
      in.op = static_cast<int>(op.kind);
      in.dtype = g.info(c).dtype;
      in.a = emit(n->kids[0], false);
      if (n->kids.size() > 1) in.b = emit(n->kids[1], false);
      in.in_dtype = g.info(n->kids[0]).dtype;
      prog.instrs.push_back(in);
      r = kInstr + static_cast<int>(prog.instrs.size()) - 1;
    } else {
      inputs.push_back(c);
      r = static_cast<int>(inputs.size()) - 1;
    }
    visiting[c] = false;
    operand_of[c] = r;
    return r;
  }

  // Final numbering: inputs 0..n-1, then instructions.
  bool finish() {
    if (static_cast<int>(inputs.size()) > kMaxInputs) return false;
    int n = static_cast<int>(inputs.size());
    auto fix = [&](int& o) {
      if (o >= kInstr) o = n + (o - kInstr);
    };
    for (FusedInstr& in : prog.instrs)
      if (in.op != FusedInstr::kConst) {
        fix(in.a);
        if (in.b >= 0) fix(in.b);
      }
    prog.n_inputs = n;
    return true;
  }

  static constexpr int kInstr = 1 << 20;  // marks an instruction operand before renumbering
};

// The reduction node of a class, if it has one.
const ENode* reduce_node(const EGraph& g, ClassId c) {
  for (const ENode& n : g.eclass(c).nodes) {
    const OpInfo& op = g.ops().info(n.op);
    if (op.primitive && is_reduce(op.kind)) return &n;
  }
  return nullptr;
}

// Folds an elementwise program whose input `slot` is a reduction into one fused reduction:
// the reduction's prologue (its elementwise input, or a plain load), then this program as the
// epilogue with the reduced value as its input 0.
std::optional<ENode> with_epilogue(EGraph& g, const Builder& epi, size_t slot, const ENode& r, OpId fused_sum,
                                   OpId fused_max) {
  Builder pro{g};
  ClassId kid = g.find(r.kids[0]);
  if (pro.elementwise_node(kid)) {
    pro.emit(kid, true);
  } else {  // no prologue to inline: load the input (a same-dtype cast is the identity)
    pro.inputs.push_back(kid);
    FusedInstr load;
    load.op = static_cast<int>(OpKind::Cast);
    load.dtype = load.in_dtype = g.info(kid).dtype;
    load.a = 0;
    pro.prog.instrs.push_back(load);
  }
  if (!pro.finish()) return std::nullopt;
  // Renumber the epilogue's inputs: the reduction first, then the others in order.
  FusedProgram e = epi.prog;
  int n = e.n_inputs;
  auto remap = [&](int& o) {
    if (o < 0 || o >= n) return;
    o = o == static_cast<int>(slot) ? 0 : (o < static_cast<int>(slot) ? o + 1 : o);
  };
  for (FusedInstr& in : e.instrs)
    if (in.op != FusedInstr::kConst) {
      remap(in.a);
      remap(in.b);
    }
  std::vector<ClassId> kids = pro.inputs;
  for (size_t i = 0; i < epi.inputs.size(); ++i)
    if (i != slot) kids.push_back(epi.inputs[i]);
  if (static_cast<int>(kids.size()) > kMaxInputs) return std::nullopt;
  Attr a;
  a.code = pro.prog.encode();
  std::vector<int64_t> tail = e.encode();
  a.code.insert(a.code.end(), tail.begin(), tail.end());
  a.axis = g.attr(r).axis;
  a.exprs = g.info(r.kids[0]).shape;  // the iteration domain, for the cost model
  OpId kind = g.ops().info(r.op).kind == OpKind::SumReduce ? fused_sum : fused_max;
  return ENode{kind, g.attrs().intern(a), kids};
}

// The elementwise tree at `root` inlined as deep as the input budget allows: a tree that reads
// too many inputs (integer index arithmetic fed by many) is inlined less deeply rather than not
// fused at all.
Builder fitted_tree(const EGraph& g, ClassId root, const std::unordered_set<ClassId>* stop = nullptr) {
  for (int budget = kMaxInstrs;; budget /= 2) {
    Builder b{g};
    b.max_instrs = budget;
    b.stop = stop;
    b.emit(root, true);
    if (static_cast<int>(b.inputs.size()) <= kMaxInputs || budget <= 2) return b;
  }
}

// Where a second form of each tree stops inlining: the classes a plan computes whatever is
// fused around them. Those are the classes with a recognised kernel (a Softmax, a norm, a
// matmul), and those read, directly or through a view, by an op that no fused kernel inlines
// (a recognised kernel, a scatter, an output).
std::unordered_set<ClassId> kept_classes(const EGraph& g) {
  auto fusable = [&](const ENode& n) {
    if (n.op == g.ops().view()) return true;
    const OpInfo& op = g.ops().info(n.op);
    if (op.primitive) return elementwise(g, n) || is_reduce(op.kind);
    return op.name == "Fused" || op.name == "FusedSum" || op.name == "FusedMax";
  };
  std::unordered_map<ClassId, std::vector<std::pair<ClassId, const ENode*>>> readers;  // class -> (class, node) reading it
  for (ClassId c : g.class_ids())
    for (const ENode& n : g.eclass(c).nodes)
      for (ClassId k : n.kids) readers[g.find(k)].push_back({g.find(c), &n});
  std::unordered_set<ClassId> out;
  for (ClassId c : g.class_ids()) {
    c = g.find(c);
    bool kept = false;
    for (const ENode& n : g.eclass(c).nodes) kept = kept || !fusable(n);
    for (const auto& [p, n] : readers[c]) {
      if (kept) break;
      if (n->op != g.ops().view()) {
        kept = !fusable(*n);
        continue;
      }
      for (const auto& [pp, nn] : readers[p]) kept = kept || !fusable(*nn);
    }
    if (kept) out.insert(c);
  }
  return out;
}

// The fused forms of class c (node n, elementwise or a reduction) as a tree built by `b`:
// the kernel, and for an elementwise tree that reads a reduction, that reduction with the tree
// as its epilogue.
void add_forms(EGraph& g, ClassId c, const ENode& n, Builder b, OpId fused, OpId fused_sum, OpId fused_max,
               std::vector<std::pair<ClassId, ENode>>& todo) {
  const OpInfo& op = g.ops().info(n.op);
  const bool reduce = op.primitive && is_reduce(op.kind);
  // A lone elementwise op gains nothing as a kernel of its own, but it can still be a
  // reduction's epilogue (the residual add after an MoE's sum over experts), below; a
  // reduction gains from any prologue. A program of constants alone (a cast of a broadcast
  // constant) reads no input that would give its node a shape: hash-consed, it would join
  // classes of every shape.
  const bool lone = !reduce && b.prog.instrs.size() < 2;
  if (b.prog.instrs.empty() || b.inputs.empty() || !b.finish()) return;
  for (ClassId in : b.inputs)
    if (g.find(in) == g.find(c)) return;  // cyclic
  Attr a;
  a.code = b.prog.encode();
  if (reduce) {
    a.axis = g.attr(n).axis;
    a.exprs = g.info(n.kids[0]).shape;  // the iteration domain, for the cost model
  }
  OpId kind = !reduce ? fused : op.kind == OpKind::SumReduce ? fused_sum : fused_max;
  if (!lone) todo.push_back({c, ENode{kind, g.attrs().intern(a), b.inputs}});
  // An elementwise tree fed by a reduction (of the same shape) can also be the reduction's
  // epilogue: one kernel for prologue, reduction and epilogue. Every input that is a
  // reduction gives a form (a matmul's class holds its primitive reduction too).
  if (!reduce)
    for (size_t slot = 0; slot < b.inputs.size(); ++slot)
      if (const ENode* r = reduce_node(g, b.inputs[slot]))
        if (auto e = with_epilogue(g, b, slot, *r, fused_sum, fused_max)) todo.push_back({c, *e});
}

}  // namespace

size_t fuse_elementwise(EGraph& g) {
  OpId fused = g.ops().add("Fused", -1);
  OpId fused_sum = g.ops().add("FusedSum", -1);
  OpId fused_max = g.ops().add("FusedMax", -1);
  // Each tree is formed twice where the two differ: inlined as deep as it goes, and stopping at
  // the classes kept_classes finds. Inlining through a kept class recomputes it; where it is a
  // reduction's epilogue (an MoE's chosen-expert mask, [seq, E] from a count over [seq, E, E],
  // kept for the experts' products), the tree then reads that count, which a plan keeping the
  // mask's kernel does not hold. So the routing's weight normalisation ran as four primitive
  // kernels (Mul, SumReduce, Recip, Mul) where a fused sum and a fused kernel do.
  const std::unordered_set<ClassId> stop = kept_classes(g);
  size_t added = 0;
  std::vector<std::pair<ClassId, ENode>> todo;
  for (ClassId c : g.class_ids()) {
    for (const ENode& n : g.eclass(c).nodes) {
      const OpInfo& op = g.ops().info(n.op);
      bool reduce = op.primitive && is_reduce(op.kind);
      if (!elementwise(g, n) && !reduce) continue;
      if (reduce && !Builder{g}.elementwise_node(g.find(n.kids[0]))) continue;  // nothing to fuse in front
      const ClassId root = reduce ? n.kids[0] : c;
      Builder deep = fitted_tree(g, root);
      Builder shallow = fitted_tree(g, root, &stop);
      const bool differ = shallow.inputs != deep.inputs;
      add_forms(g, c, n, std::move(deep), fused, fused_sum, fused_max, todo);
      if (differ) add_forms(g, c, n, std::move(shallow), fused, fused_sum, fused_max, todo);
      break;  // one fused form per class (two where stopping at epilogues differs), plus epilogue forms
    }
  }
  for (auto& [c, node] : todo) {
    ClassId made = g.add(node, g.info(c));
    if (g.merge(c, made, "fusion")) ++added;
  }
  g.rebuild();
  return added;
}

}  // namespace luminal
