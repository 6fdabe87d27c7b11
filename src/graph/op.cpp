#include "graph/op.h"

namespace luminal {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::Input: return "Input";
    case OpKind::Output: return "Output";
    case OpKind::Constant: return "Constant";
    case OpKind::Iota: return "Iota";
    case OpKind::Cast: return "Cast";
    case OpKind::Exp2: return "Exp2";
    case OpKind::Log2: return "Log2";
    case OpKind::Sin: return "Sin";
    case OpKind::Sqrt: return "Sqrt";
    case OpKind::Recip: return "Recip";
    case OpKind::Add: return "Add";
    case OpKind::Mul: return "Mul";
    case OpKind::Mod: return "Mod";
    case OpKind::LessThan: return "LessThan";
    case OpKind::SumReduce: return "SumReduce";
    case OpKind::MaxReduce: return "MaxReduce";
    case OpKind::Gather: return "Gather";
    case OpKind::Scatter: return "Scatter";
    case OpKind::Kernel: return "Kernel";
  }
  return "?";
}

bool is_unary(OpKind op) { return op >= OpKind::Exp2 && op <= OpKind::Recip; }
bool is_binary(OpKind op) { return op >= OpKind::Add && op <= OpKind::LessThan; }
bool is_reduce(OpKind op) { return op == OpKind::SumReduce || op == OpKind::MaxReduce; }

}  // namespace luminal
