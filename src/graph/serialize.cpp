// Format: a header line, then per node one `node` line followed by one `edge` line per input
// and one `layer` line per view layer. Expressions are S-expressions (Expr::to_sexpr), floats
// are stored as their bit patterns, names are length-prefixed.
#include "graph/serialize.h"

#include <cctype>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace luminal {
namespace {

std::string bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", u);
  return buf;
}

void exprs(std::ostringstream& o, const std::vector<Expr>& xs) {
  o << ' ' << xs.size();
  for (const Expr& e : xs) o << ' ' << e.to_sexpr();
}

}  // namespace

std::string serialize(const Graph& g) {
  std::ostringstream o;
  o << "luminal-graph 2 " << g.size() << '\n';
  for (const Node& n : g.nodes()) {
    o << "node " << op_name(n.op) << ' ' << dtype_name(n.dtype);
    exprs(o, n.shape);
    o << ' ' << n.name.size() << ':' << n.name << ' ' << n.kernel.size() << ':' << n.kernel << ' ' << bits(n.constant) << ' ' << n.iota_expr.to_sexpr() << ' '
      << n.axis << ' ' << n.code.size();
    for (int64_t c : n.code) o << ' ' << c;
    o << ' ' << n.inputs.size() << '\n';
    for (const Edge& e : n.inputs) {
      o << "edge " << e.src << ' ' << bits(e.view.pad_value()) << ' ' << e.view.layers().size() << '\n';
      for (const ViewLayer& l : e.view.layers()) {
        o << "layer";
        exprs(o, l.shape);
        exprs(o, l.strides);
        o << ' ' << l.offset.to_sexpr();
        exprs(o, l.mask_lo);
        exprs(o, l.mask_hi);
        o << '\n';
      }
    }
  }
  return o.str();
}

namespace {

struct Reader {
  const std::string& s;
  size_t i = 0;
  int line = 1;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("serialized graph, line " + std::to_string(line) + ": " + what);
  }
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) {
      if (s[i] == '\n') ++line;
      ++i;
    }
  }
  std::string token() {  // an atom or a balanced parenthesised group
    skip();
    if (i >= s.size()) fail("unexpected end of file");
    size_t b = i;
    if (s[i] == '(') {
      int depth = 0;
      do {
        if (s[i] == '(') ++depth;
        if (s[i] == ')') --depth;
        if (s[i] == '\n') fail("unbalanced expression");
        ++i;
      } while (i < s.size() && depth > 0);
      if (depth != 0) fail("unbalanced expression");
    } else {
      while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    }
    return s.substr(b, i - b);
  }
  void expect(const char* word) {
    std::string t = token();
    if (t != word) fail(std::string("expected '") + word + "', got '" + t + "'");
  }
  uint64_t number() {
    std::string t = token();
    try {
      size_t used = 0;
      unsigned long long v = std::stoull(t, &used);
      if (used == t.size()) return v;
    } catch (...) {
    }
    fail("expected a number, got '" + t + "'");
  }
  float bits_float() {
    std::string t = token();
    uint32_t u = 0;
    try {
      u = static_cast<uint32_t>(std::stoul(t, nullptr, 16));
    } catch (...) {
      fail("expected float bits, got '" + t + "'");
    }
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  Expr expr() {
    std::string t = token();
    try {
      return Expr::parse_sexpr(t);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
  std::vector<Expr> exprs() {
    size_t n = number();
    std::vector<Expr> r;
    for (size_t k = 0; k < n; ++k) r.push_back(expr());
    return r;
  }
  std::string name() {
    skip();
    size_t colon = s.find(':', i);
    if (colon == std::string::npos) fail("expected a length-prefixed name");
    size_t len = 0;
    try {
      len = std::stoull(s.substr(i, colon - i));
    } catch (...) {
      fail("expected a name length");
    }
    if (colon + 1 + len > s.size()) fail("name runs past the end of the file");
    std::string r = s.substr(colon + 1, len);
    i = colon + 1 + len;
    return r;
  }
};

OpKind op_from_name(const std::string& name, const Reader& r) {
  for (int k = 0; k <= static_cast<int>(OpKind::Kernel); ++k)
    if (name == op_name(static_cast<OpKind>(k))) return static_cast<OpKind>(k);
  r.fail("unknown op '" + name + "'");
}

}  // namespace

Graph deserialize(const std::string& text) {
  Reader r{text};
  r.expect("luminal-graph");
  if (r.number() != 2) r.fail("unsupported format version (this build reads version 2)");
  size_t count = r.number();
  Graph g;
  for (size_t id = 0; id < count; ++id) {
    r.expect("node");
    Node n;
    n.op = op_from_name(r.token(), r);
    try {
      n.dtype = dtype_from_name(r.token());
    } catch (const Error& e) {
      r.fail(e.what());
    }
    n.shape = r.exprs();
    n.name = r.name();
    n.kernel = r.name();
    n.constant = r.bits_float();
    n.iota_expr = r.expr();
    n.axis = r.number();
    size_t code = r.number();
    for (size_t k = 0; k < code; ++k) {
      std::string t = r.token();
      try {
        n.code.push_back(std::stoll(t));
      } catch (...) {
        r.fail("expected a program word, got '" + t + "'");
      }
    }
    size_t inputs = r.number();
    std::vector<Edge> ins;
    for (size_t k = 0; k < inputs; ++k) {
      r.expect("edge");
      NodeId src = static_cast<NodeId>(r.number());
      if (src >= id) r.fail("edge from node " + std::to_string(src) + " which is not defined before node " + std::to_string(id));
      float pad = r.bits_float();
      size_t layers = r.number();
      std::vector<ViewLayer> ls;
      for (size_t l = 0; l < layers; ++l) {
        r.expect("layer");
        ViewLayer vl;
        vl.shape = r.exprs();
        vl.strides = r.exprs();
        vl.offset = r.expr();
        vl.mask_lo = r.exprs();
        vl.mask_hi = r.exprs();
        ls.push_back(std::move(vl));
      }
      try {
        ins.push_back({src, View::from_layers(std::move(ls), pad)});
      } catch (const Error& e) {
        r.fail(e.what());
      }
    }
    try {
      NodeId made = g.add_like(n, std::move(ins));
      const std::vector<Expr>& got = g.node(made).shape;
      if (!provably_equal(got, n.shape) || g.node(made).dtype != n.dtype)
        r.fail("node " + std::to_string(id) + " says " + dtype_name(n.dtype) + to_string(n.shape) + " but its inputs give " +
               dtype_name(g.node(made).dtype) + to_string(got));
    } catch (const Error& e) {
      r.fail(e.what());
    }
  }
  r.skip();
  if (r.i != text.size()) r.fail("trailing text after the last node");
  return g;
}

}  // namespace luminal
