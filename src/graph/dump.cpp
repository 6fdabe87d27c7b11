// Text and Graphviz dumps of a graph, for debugging and `inspect`.
#include <sstream>

#include "graph/graph.h"

namespace luminal {

static std::string attrs(const Node& n) {
  switch (n.op) {
    case OpKind::Input:
    case OpKind::Output: return "\"" + n.name + "\"";
    case OpKind::Constant: {
      std::ostringstream s;
      s << n.constant;
      return s.str();
    }
    case OpKind::Iota: return n.iota_expr.to_string();
    case OpKind::SumReduce:
    case OpKind::MaxReduce: return "axis=" + std::to_string(n.axis);
    case OpKind::Kernel: {
      std::ostringstream s;
      s << n.kernel << " axis=" << n.axis;
      if (n.constant != 0.0f) s << " param=" << n.constant;
      return s.str();
    }
    default: return "";
  }
}

static std::string type_of(const Node& n) { return std::string(dtype_name(n.dtype)) + to_string(n.shape); }

std::string Graph::dump() const {
  std::ostringstream s;
  for (NodeId i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    s << "%" << i << " = " << op_name(n.op) << "(";
    std::string a = attrs(n);
    bool first = a.empty();
    s << a;
    for (const Edge& e : n.inputs) {
      s << (first ? "" : ", ") << "%" << e.src;
      if (!e.view.is_contiguous()) s << " " << e.view.to_string();
      first = false;
    }
    s << ") : " << type_of(n) << "\n";
  }
  return s.str();
}

static std::string escape(const std::string& x) {
  std::string r;
  for (char c : x) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

std::string Graph::to_dot() const {
  std::ostringstream s;
  s << "digraph luminal {\n  node [shape=box, fontname=\"monospace\"];\n";
  for (NodeId i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    std::string label = "%" + std::to_string(i) + " " + op_name(n.op);
    std::string a = attrs(n);
    if (!a.empty()) label += " " + a;
    s << "  n" << i << " [label=\"" << escape(label) << "\\n" << escape(type_of(n)) << "\"";
    if (n.op == OpKind::Input) s << ", style=filled, fillcolor=\"#dde8ff\"";
    if (n.op == OpKind::Output) s << ", style=filled, fillcolor=\"#ddffdd\"";
    s << "];\n";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Edge& e = n.inputs[k];
      s << "  n" << e.src << " -> n" << i << " [label=\"" << k;
      if (!e.view.is_contiguous()) s << " " << escape(e.view.to_string());
      s << "\"];\n";
    }
  }
  s << "}\n";
  return s.str();
}

}  // namespace luminal
