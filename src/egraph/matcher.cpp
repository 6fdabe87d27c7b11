// E-matching by backtracking over e-classes (egg's simple top-down matcher), and instantiation
// of replacements.
#include <functional>

#include "core/error.h"
#include "egraph/rules.h"

namespace luminal {
namespace {

struct Matcher {
  EGraph& g;
  const Rule& rule;

  // Extends `s` so that pattern p matches class c; calls k for every way it does. The
  // continuation is type-erased: a template would instantiate itself without end.
  using Cont = std::function<void(Subst&)>;
  void match(const Pattern& p, ClassId c, Subst& s, const Cont& k) {
    c = g.find(c);
    if (p.kind == Pattern::Var) {
      Binding& b = s[p.var];
      if (b.id == UINT32_MAX) {
        b = {false, c};
        k(s);
        b.id = UINT32_MAX;
      } else if (g.find(b.id) == c) {
        k(s);
      }
      return;
    }
    for (const ENode& n : g.eclass(c).nodes) {
      if (n.op != p.op) continue;
      bool attr_bound_here = false;
      if (p.attr_kind == Pattern::LiteralAttr) {
        if (!(g.attrs().get(n.attr) == p.literal)) continue;
      } else if (p.attr_kind == Pattern::VarAttr) {
        Binding& b = s[p.attr_var];
        if (b.id == UINT32_MAX) {
          b = {true, n.attr};
          attr_bound_here = true;
        } else if (b.id != n.attr) {
          continue;
        }
      }
      if (p.kids.size() != n.kids.size()) continue;  // variadic ops
      match_kids(p, n, 0, s, k);
      if (attr_bound_here) s[p.attr_var].id = UINT32_MAX;
    }
  }

  void match_kids(const Pattern& p, const ENode& n, size_t i, Subst& s, const Cont& k) {
    if (i == p.kids.size()) {
      k(s);
      return;
    }
    match(p.kids[i], n.kids[i], s, [&](Subst& s2) { match_kids(p, n, i + 1, s2, k); });
  }
};

bool guards_hold(EGraph& g, const Rule& rule, const Subst& s, ClassId root, const RuleFunctions& fns) {
  MatchContext ctx{g, s, root};
  for (const Call& c : rule.guards)
    if (!(*fns.guard(c.fn))(ctx, c.args)) return false;
  return true;
}

std::optional<ClassId> instantiate(EGraph& g, const Pattern& p, const Subst& s, ClassId root, bool is_root,
                                   const RuleFunctions& fns) {
  if (p.kind == Pattern::Var) return g.find(s[p.var].id);
  ENode n;
  n.op = p.op;
  for (const Pattern& k : p.kids) {
    auto c = instantiate(g, k, s, root, false, fns);
    if (!c) return std::nullopt;
    n.kids.push_back(*c);
  }
  MatchContext ctx{g, s, root};
  switch (p.attr_kind) {
    case Pattern::AnyAttr: break;
    case Pattern::LiteralAttr: n.attr = g.attrs().intern(p.literal); break;
    case Pattern::VarAttr: n.attr = s[p.attr_var].id; break;
    case Pattern::CallAttr: {
      std::optional<Attr> a = (*fns.builder(p.call.fn))(ctx, p.call.args);
      if (!a) return std::nullopt;  // the builder declined (e.g. views that do not compose)
      n.attr = g.attrs().intern(*a);
      break;
    }
  }
  const OpInfo& info = g.ops().info(n.op);
  if (!info.primitive && n.op != g.ops().view()) {
    LM_ASSERT(is_root, "kernel op " + info.name + " can only be the root of a replacement");
    return g.add(n, g.info(root));
  }
  return g.add(n);
}

}  // namespace

std::vector<Match> search(EGraph& g, const Rule& rule, const RuleFunctions& fns, size_t limit) {
  Matcher m{g, rule};
  std::vector<Match> result;
  for (ClassId c : g.class_ids()) {
    Subst s(rule.var_names.size(), Binding{false, UINT32_MAX});
    m.match(rule.lhs, c, s, [&](Subst& found) {
      if (result.size() < limit && guards_hold(g, rule, found, c, fns)) result.push_back({found, c});
    });
    if (result.size() >= limit) break;
  }
  return result;
}

bool apply(EGraph& g, const Rule& rule, const Match& m, const RuleFunctions& fns) {
  auto c = instantiate(g, rule.rhs, m.subst, m.root, true, fns);
  if (!c) return false;
  return g.merge(m.root, *c, rule.name + " (" + rule.where + ")");
}

}  // namespace luminal
