// The guards and attribute builders that rule files can name.
#include <cmath>

#include "core/error.h"
#include "egraph/fusion.h"
#include "egraph/rules.h"

namespace luminal {
namespace {

const Attr& attr_arg(const MatchContext& m, const Arg& a) {
  LM_ASSERT(a.kind == Arg::Var && m.subst[a.var].is_attr, "expected an attribute variable");
  return m.g.attrs().get(m.subst[a.var].id);
}

ClassId class_arg(const MatchContext& m, const Arg& a) {
  LM_ASSERT(a.kind == Arg::Var && !m.subst[a.var].is_attr, "expected a class variable");
  return m.g.find(m.subst[a.var].id);
}

const View& view_arg(const MatchContext& m, const Arg& a) {
  const Attr& at = attr_arg(m, a);
  LM_ASSERT(at.view.has_value(), "expected a View attribute");
  return *at.view;
}

// Folds f32 math the way the interpreter computes it.
BuilderFn fold1(float (*f)(float)) {
  return [f](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    Attr r;
    r.number = f(static_cast<float>(attr_arg(m, a[0]).number));
    return r;
  };
}

BuilderFn fold2(float (*f)(float, float)) {
  return [f](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    Attr r;
    r.number = f(static_cast<float>(attr_arg(m, a[0]).number), static_cast<float>(attr_arg(m, a[1]).number));
    return r;
  };
}

// Whether s2, p1, p2 are the views the frontend builds for rotate_half(x) = concat(-x2, x1)
// when x is read through view `x`: x2 = x[.., d/2:], -x2 padded after by d/2, x1 = x[.., :d/2]
// padded before by d - d/2 (concat pads with -0).
bool rotate_half_views(const View& x, const View& s2, const View& p1, const View& p2) {
  if (x.rank() == 0) return false;
  size_t last = x.rank() - 1;
  Expr d = x.shape()[last], half = d / 2;
  std::vector<Expr> half_shape = x.shape();
  half_shape[last] = d - half;
  return s2 == x.slice(last, half, d) && p1 == View::contiguous(half_shape).pad(last, 0, half, -0.0f) &&
         p2 == x.slice(last, 0, half).pad(last, d - half, 0, -0.0f);
}

}  // namespace

RuleFunctions::RuleFunctions() {
  add_guard("contiguous", 1, [](const MatchContext& m, const std::vector<Arg>& a) { return view_arg(m, a[0]).is_contiguous(); });
  add_guard("unmasked", 1, [](const MatchContext& m, const std::vector<Arg>& a) { return !view_arg(m, a[0]).has_mask(); });
  // The view reads a whole class in order with the class's own shape: View[v](x) is x.
  add_guard("identity_view", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    const View& v = view_arg(m, a[0]);
    return v.is_contiguous() && provably_equal(v.shape(), m.g.info(class_arg(m, a[1])).shape);
  });
  add_guard("dtype_is", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return m.g.info(class_arg(m, a[0])).dtype == dtype_from_name(a[1].name);
  });
  add_guard("is_float", 1, [](const MatchContext& m, const std::vector<Arg>& a) {
    return is_float(m.g.info(class_arg(m, a[0])).dtype);
  });
  add_guard("same_shape", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return provably_equal(m.g.info(class_arg(m, a[0])).shape, m.g.info(class_arg(m, a[1])).shape);
  });
  add_guard("same_dtype", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return m.g.info(class_arg(m, a[0])).dtype == m.g.info(class_arg(m, a[1])).dtype;
  });
  add_guard("num_is", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return attr_arg(m, a[0]).number == a[1].number;
  });
  // ?x has the match root's dtype and shape, so the root can become ?x.
  add_guard("same_as_root", 1, [](const MatchContext& m, const std::vector<Arg>& a) {
    const TensorInfo& r = m.g.info(m.root);
    const TensorInfo& x = m.g.info(class_arg(m, a[0]));
    return r.dtype == x.dtype && provably_equal(r.shape, x.shape);
  });
  // Casting ?x to the attribute's dtype loses nothing (bool -> any, f16/bf16 -> f32, x -> x).
  add_guard("lossless_cast", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    DType from = m.g.info(class_arg(m, a[0])).dtype, to = attr_arg(m, a[1]).dtype;
    return from == to || from == DType::Bool ||
           (to == DType::F32 && (from == DType::F16 || from == DType::BF16));
  });

  // A SumReduce over axis k of (A viewed [.., m, k, n] broadcast on n) * (B viewed broadcast
  // on m), with k second to last: a matmul of A [.., m, k] and B [.., k, n].
  add_guard("matmul_operands", 3, [](const MatchContext& m, const std::vector<Arg>& a) {
    const View& va = view_arg(m, a[0]);
    const View& vb = view_arg(m, a[1]);
    size_t r = va.rank(), k = static_cast<size_t>(attr_arg(m, a[2]).axis);
    if (r < 3 || k != r - 2) return false;
    const ViewLayer& la = va.layers().back();
    const ViewLayer& lb = vb.layers().back();
    return la.strides[r - 1].is_const(0) && !la.dim_masked(r - 1) && lb.strides[r - 3].is_const(0) &&
           !lb.dim_masked(r - 3);
  });
  // Read through `outer` (a Matmul's A view [.., m, k]), the view `inner` gives one value per
  // row: it broadcasts along k, unmasked. Not when it is one value for everything (a constant
  // factor): that is no row scale worth a kernel.
  add_guard("row_scale", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    std::optional<View> v = view_arg(m, a[0]).compose(view_arg(m, a[1]));
    if (!v || v->rank() < 2) return false;
    const ViewLayer& top = v->layers().back();
    const size_t k = v->rank() - 1;
    if (!top.strides[k].is_const(0) || top.dim_masked(k)) return false;
    for (size_t d = 0; d < k; ++d)
      if (!top.strides[d].is_const(0)) return true;
    return false;
  });
  // A Matmul's A view [.., m, k] with a batch dim that may exceed one (experts, heads): the
  // unbatched linear layers keep their Matmul, which the backends hand to their GEMM libraries.
  add_guard("batched_rows", 1, [](const MatchContext& m, const std::vector<Arg>& a) {
    const View& v = view_arg(m, a[0]);
    for (size_t d = 0; d + 2 < v.rank(); ++d)
      if (!v.shape()[d].is_const(1)) return true;
    return false;
  });
  // The view reads a tensor reduced along the axis (given by a reduction's attribute), broadcast
  // back over it.
  add_guard("reduced_broadcast", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return view_arg(m, a[0]).is_reduced_broadcast(static_cast<size_t>(attr_arg(m, a[1]).axis));
  });
  // The Iota counts the elements along the axis of ?x: Iota(n, 1) with n = shape[axis].
  add_guard("iota_counts_axis", 3, [](const MatchContext& m, const std::vector<Arg>& a) {
    const Attr& iota = attr_arg(m, a[0]);
    const TensorInfo& x = m.g.info(class_arg(m, a[1]));
    size_t axis = static_cast<size_t>(attr_arg(m, a[2]).axis);
    return iota.exprs.size() == 2 && axis < x.shape.size() && iota.exprs[1].is_const(1) &&
           provably_equal(iota.exprs[0], x.shape[axis]);
  });
  // The three views of the frontend's rotate_half(x) = concat(-x2, x1) on the last axis:
  // x2 = x[.., d/2:], -x2 padded after by d/2, x1 = x[.., :d/2] padded before by d - d/2.
  add_guard("rotate_half_views", 4, [](const MatchContext& m, const std::vector<Arg>& a) {
    View x = View::contiguous(m.g.info(class_arg(m, a[3])).shape);
    return rotate_half_views(x, view_arg(m, a[0]), view_arg(m, a[1]), view_arg(m, a[2]));
  });
  add_guard("rotate_half_of_view", 4, [](const MatchContext& m, const std::vector<Arg>& a) {
    return rotate_half_views(view_arg(m, a[0]), view_arg(m, a[1]), view_arg(m, a[2]), view_arg(m, a[3]));
  });
  // Iota(z, n) with n from the count Iota(n, 1): the identity index of a select.
  add_guard("select_index", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    const Attr& i = attr_arg(m, a[0]);
    const Attr& n = attr_arg(m, a[1]);
    return i.exprs.size() == 2 && n.exprs.size() == 2 && i.exprs[0] == Expr::index() && n.exprs[1].is_const(1) &&
           provably_equal(i.exprs[1], n.exprs[0]);
  });
  // Two flat views of length 2n padded so the first holds [0, n) and the second [n, 2n).
  add_guard("concat_halves", 3, [](const MatchContext& m, const std::vector<Arg>& a) {
    Expr n = attr_arg(m, a[2]).exprs.at(0);
    auto half = [&](const View& v, int part) {
      const ViewLayer& t = v.layers().back();
      return v.rank() == 1 && provably_equal(t.shape[0], n * 2) && provably_equal(t.mask_lo[0], n * part) &&
             provably_equal(t.mask_hi[0], n * (part + 1));
    };
    return half(view_arg(m, a[0]), 0) && half(view_arg(m, a[1]), 1);
  });
  // The part of a concatenation's padded view that holds real data: [part*n, (part+1)*n).
  add_builder("concat_part", 3, [](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    Expr n = attr_arg(m, a[1]).exprs.at(0);
    int64_t part = static_cast<int64_t>(a[2].number);
    Attr r;
    r.view = view_arg(m, a[0]).slice(0, n * part, n * (part + 1));
    return r;
  });
  add_guard("same_axis", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return attr_arg(m, a[0]).axis == attr_arg(m, a[1]).axis;
  });
  // The reduction axis is the last one of a tensor with ?x's rank.
  add_guard("last_axis", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return static_cast<size_t>(attr_arg(m, a[0]).axis) + 1 == m.g.info(class_arg(m, a[1])).shape.size();
  });
  // The axis is the last one of the view (e.g. a softmax over keys read through a reshape that
  // splits query heads into groups: the rows are the same whatever the leading dims).
  add_guard("last_axis_of_view", 2, [](const MatchContext& m, const std::vector<Arg>& a) {
    return static_cast<size_t>(attr_arg(m, a[0]).axis) + 1 == view_arg(m, a[1]).rank();
  });
  add_builder("drop_dim", 2, [](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    const View& v = view_arg(m, a[0]);
    int64_t axis = static_cast<int64_t>(a[1].number);
    if (axis < 0) axis += static_cast<int64_t>(v.rank());
    Attr r;
    r.view = v.drop_broadcast_dim(static_cast<size_t>(axis));
    return r;
  });
  // A kernel attribute from a reduction's axis and an optional Constant (e.g. an epsilon).
  add_builder("axis_param", 2, [](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    Attr r;
    r.axis = attr_arg(m, a[0]).axis;
    r.number = attr_arg(m, a[1]).number;
    return r;
  });
  add_builder("axis_of", 1, [](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    Attr r;
    r.axis = attr_arg(m, a[0]).axis;
    return r;
  });
  add_pass("fuse", [](EGraph& g) { return fuse_elementwise(g); });
  add_builder("compose", 2, [](const MatchContext& m, const std::vector<Arg>& a) -> std::optional<Attr> {
    std::optional<View> v = view_arg(m, a[0]).compose(view_arg(m, a[1]));
    if (!v) return std::nullopt;
    Attr r;
    r.view = *v;
    return r;
  });
  add_builder("fold_add", 2, fold2([](float x, float y) { return x + y; }));
  add_builder("fold_mul", 2, fold2([](float x, float y) { return x * y; }));
  add_builder("fold_recip", 1, fold1([](float x) { return 1.0f / x; }));
  add_builder("fold_exp2", 1, fold1([](float x) { return std::exp2(x); }));
  add_builder("fold_log2", 1, fold1([](float x) { return std::log2(x); }));
  add_builder("fold_sqrt", 1, fold1([](float x) { return std::sqrt(x); }));
  add_builder("fold_sin", 1, fold1([](float x) { return std::sin(x); }));
}

void RuleFunctions::add_pass(const std::string& name, PassFn fn) { passes_[name] = std::move(fn); }
const PassFn* RuleFunctions::pass(const std::string& name) const {
  auto it = passes_.find(name);
  return it == passes_.end() ? nullptr : &it->second;
}

void RuleFunctions::add_guard(const std::string& name, int arity, GuardFn fn) { guards_[name] = {arity, std::move(fn)}; }
void RuleFunctions::add_builder(const std::string& name, int arity, BuilderFn fn) { builders_[name] = {arity, std::move(fn)}; }

const GuardFn* RuleFunctions::guard(const std::string& name) const {
  auto it = guards_.find(name);
  return it == guards_.end() ? nullptr : &it->second.second;
}
const BuilderFn* RuleFunctions::builder(const std::string& name) const {
  auto it = builders_.find(name);
  return it == builders_.end() ? nullptr : &it->second.second;
}
int RuleFunctions::guard_arity(const std::string& name) const {
  auto it = guards_.find(name);
  return it == guards_.end() ? -2 : it->second.first;
}
int RuleFunctions::builder_arity(const std::string& name) const {
  auto it = builders_.find(name);
  return it == builders_.end() ? -2 : it->second.first;
}

static std::string keys(const auto& m) {
  std::string s;
  for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + k;
  return s;
}
std::string RuleFunctions::guard_names() const { return keys(guards_); }
std::string RuleFunctions::builder_names() const { return keys(builders_); }

}  // namespace luminal
