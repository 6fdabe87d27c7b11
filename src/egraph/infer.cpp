// The tensor analysis of an e-node: dtype and shape, following the HLIR semantics.
#include "core/error.h"
#include "egraph/egraph.h"

namespace luminal {

TensorInfo EGraph::infer(const ENode& n) const {
  const OpInfo& op = ops_.info(n.op);
  const Attr& a = attrs_.get(n.attr);
  auto kid = [&](size_t i) -> const TensorInfo& { return classes_[find(n.kids.at(i))].info; };
  if (n.op == ops_.view()) {
    LM_ASSERT(a.view.has_value(), "View node without a view");
    return {kid(0).dtype, a.view->shape()};
  }
  if (!op.primitive) throw Error("op '" + op.name + "' has no shape rule; add it with an explicit TensorInfo");
  switch (op.kind) {
    case OpKind::Input: return {a.dtype, a.exprs};
    case OpKind::Output: return kid(0);
    case OpKind::Constant: return {DType::F32, {}};
    case OpKind::Iota: return {DType::I32, {a.exprs.at(1)}};
    case OpKind::Cast: return {a.dtype, kid(0).shape};
    case OpKind::Exp2: case OpKind::Log2: case OpKind::Sin: case OpKind::Sqrt: case OpKind::Recip:
      return kid(0);
    case OpKind::Add: case OpKind::Mul: case OpKind::Mod: return kid(0);
    case OpKind::LessThan: return {DType::Bool, kid(0).shape};
    case OpKind::SumReduce: case OpKind::MaxReduce: {
      TensorInfo t = kid(0);
      LM_ASSERT(static_cast<size_t>(a.axis) < t.shape.size(), "reduce axis out of range");
      t.shape.erase(t.shape.begin() + a.axis);
      return t;
    }
    case OpKind::Gather: return {kid(1).dtype, kid(0).shape};
    case OpKind::Scatter: return kid(0);
    case OpKind::Kernel: break;  // kernels are not primitives (handled above)
  }
  LM_ASSERT(false, "unhandled op in infer");
}

}  // namespace luminal
