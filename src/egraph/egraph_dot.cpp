// Graphviz dump of an e-graph: one cluster per e-class, one box per e-node, edges to classes.
#include <sstream>

#include "egraph/egraph.h"

namespace luminal {

std::string EGraph::to_dot() const {
  std::ostringstream s;
  s << "digraph egraph {\n  compound=true;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (ClassId c : class_ids()) {
    const EClass& cls = classes_[c];
    s << "  subgraph cluster_" << c << " {\n    style=dotted; label=\"c" << c << " " << dtype_name(cls.info.dtype)
      << luminal::to_string(cls.info.shape) << "\";\n";
    for (size_t i = 0; i < cls.nodes.size(); ++i) {
      std::string label = ops_.info(cls.nodes[i].op).name;
      const Attr& a = attrs_.get(cls.nodes[i].attr);
      if (!a.name.empty()) label += " " + a.name;
      for (char& ch : label)
        if (ch == '"') ch = '\'';
      s << "    n" << c << "_" << i << " [label=\"" << label << "\"];\n";
    }
    s << "  }\n";
  }
  for (ClassId c : class_ids()) {
    const EClass& cls = classes_[c];
    for (size_t i = 0; i < cls.nodes.size(); ++i)
      for (ClassId k : cls.nodes[i].kids) {
        ClassId kc = find(k);
        s << "  n" << c << "_" << i << " -> n" << kc << "_0 [lhead=cluster_" << kc << "];\n";
      }
  }
  s << "}\n";
  return s.str();
}

}  // namespace luminal
