// Generated fused kernels against the reference interpreter: random programs over every dtype,
// read through contiguous, broadcast, transposed, offset and padded views, must give the same
// bits (the generator rounds exactly like the reference).
#include "backends/cpu/fused_jit.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/thread_pool.h"
#include "runtime/interpreter.h"

namespace luminal::cpu {
namespace {

std::string cache_dir() {
  static std::string d = (std::filesystem::temp_directory_path() / ("luminal-jit-test-" + std::to_string(getpid()))).string();
  return d;
}

const DType kTypes[] = {DType::F32, DType::BF16, DType::F16, DType::I32, DType::Bool};

// A random well-typed program: binary ops compute in their left operand's dtype, unary ops
// only on floats. `integral`: integer constants and no unary math, so on integer-valued
// inputs every value stays an integer (a float sum of them is exact in any order).
FusedProgram random_program(std::mt19937& rng, const std::vector<DType>& inputs, int length, bool integral = false) {
  FusedProgram p;
  p.n_inputs = static_cast<int>(inputs.size());
  std::vector<DType> types = inputs;
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int k = 0; k < length; ++k) {
    FusedInstr in;
    int a = pick(static_cast<int>(types.size())), b = pick(static_cast<int>(types.size()));
    DType ta = types[static_cast<size_t>(a)];
    switch (pick(6)) {
      case 0:
        in.op = FusedInstr::kConst;
        in.value = std::uniform_real_distribution<float>(-3, 3)(rng);
        if (integral) in.value = std::round(in.value);
        in.dtype = DType::F32;
        break;
      case 1:
        in.op = static_cast<int>(OpKind::Cast);
        in.a = a;
        in.dtype = kTypes[pick(5)];
        break;
      case 2:
        if (!is_float(ta) || integral) {
          in.op = static_cast<int>(OpKind::Cast), in.a = a, in.dtype = DType::F32;
          break;
        }
        in.op = static_cast<int>((OpKind[]){OpKind::Exp2, OpKind::Log2, OpKind::Sin, OpKind::Sqrt, OpKind::Recip}[pick(5)]);
        in.a = a;
        in.dtype = ta;
        break;
      case 3:
        in.op = static_cast<int>(OpKind::LessThan), in.a = a, in.b = b, in.in_dtype = ta, in.dtype = DType::Bool;
        break;
      default: {
        OpKind op = (OpKind[]){OpKind::Add, OpKind::Mul, OpKind::Mod}[pick(3)];
        if (op == OpKind::Mod && ta == DType::Bool) op = OpKind::Add;
        in.op = static_cast<int>(op), in.a = a, in.b = b, in.in_dtype = ta, in.dtype = ta;
      }
    }
    p.instrs.push_back(in);
    types.push_back(in.dtype);
  }
  return p;
}

Buffer random_buffer(std::mt19937& rng, DType t, std::vector<int64_t> shape, bool integral = false) {
  Buffer b(t, shape);
  std::uniform_real_distribution<double> d(-4, 4);
  for (size_t i = 0; i < b.numel(); ++i) b.set(i, t == DType::I32 ? std::round(d(rng) * 3) : integral ? std::round(d(rng)) : d(rng));
  return b;
}

bool same_bits(const Buffer& a, const Buffer& b, std::string* where) {
  for (size_t i = 0; i < a.numel(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    *where = "element " + std::to_string(i) + ": " + std::to_string(x) + " vs " + std::to_string(y);
    return false;
  }
  return true;
}

// One input read through a random kind of view onto an output of shape [d0, d1, d2] (plain,
// broadcast, transposed, sliced, padded, a broadcast over a reshape, or grouped-query keys); returns
// the view and the buffer shape it reads.
std::pair<View, std::vector<int64_t>> random_view(std::mt19937& rng, const std::vector<int64_t>& out) {
  std::vector<Expr> shape{Expr(out[0]), Expr(out[1]), Expr(out[2])};
  switch (rng() % 7) {
    case 0: return {View::contiguous(shape), out};
    case 6: {  // grouped-query keys: [h, s, d] repeated per group, reshaped to [h*g, s, d], transposed
      if (out[0] % 2 != 0) return {View::contiguous(shape), out};
      const int64_t h = out[0] / 2, s = out[2], d = out[1];
      View v = View::contiguous({Expr(h), Expr(1), Expr(s), Expr(d)}).expand(1, Expr(2));
      return {v.reshape({Expr(out[0]), Expr(s), Expr(d)}).permute({0, 2, 1}), {h, s, d}};
    }
    case 5: {  // broadcast over a reshape of a transposed buffer: a stacked view (two layers)
      View v = View::contiguous({shape[1], shape[0]}).permute({1, 0}).reshape({Expr(out[0] * out[1])});
      v = v.reshape({shape[0], shape[1], Expr(1)}).expand(2, shape[2]);
      return {v, {out[1], out[0]}};
    }
    case 1: {  // broadcast along the last or the first axis
      size_t axis = rng() % 2 ? 2 : 0;
      std::vector<Expr> small = shape;
      small[axis] = Expr(1);
      std::vector<int64_t> buf = out;
      buf[axis] = 1;
      return {View::contiguous(small).expand(axis, shape[axis]), buf};
    }
    case 2: {  // transposed: the buffer is [d2, d1, d0]
      std::vector<Expr> rev{shape[2], shape[1], shape[0]};
      return {View::contiguous(rev).permute({2, 1, 0}), {out[2], out[1], out[0]}};
    }
    case 3: {  // an interior slice: offset and row strides of a larger buffer
      std::vector<Expr> big{Expr(out[0] + 1), Expr(out[1]), Expr(out[2] + 3)};
      return {View::contiguous(big).slice(0, Expr(1), Expr(out[0] + 1)).slice(2, Expr(2), Expr(out[2] + 2)),
              {out[0] + 1, out[1], out[2] + 3}};
    }
    default: {  // padded: not a plain strided view, so it is copied before the kernel runs
      std::vector<Expr> small{shape[0], shape[1], Expr(out[2] - 1)};
      return {View::contiguous(small).pad(2, Expr(1), Expr(0), 0.0f), {out[0], out[1], out[2] - 1}};
    }
  }
}

std::string program_text(const Graph& g, NodeId id) {
  std::string r;
  for (const Edge& e : g.node(id).inputs) r += "input " + std::string(dtype_name(g.node(e.src).dtype)) + " " + e.view.to_string() + "\n";
  const std::vector<int64_t>& code = g.node(id).code;
  for (size_t pos = 0; pos < code.size();) {  // a reduction's prologue, then its epilogue
    if (pos > 0) r += "epilogue:\n";
    FusedProgram p = FusedProgram::decode(code, pos);
    for (size_t k = 0; k < p.instrs.size(); ++k) {
      const FusedInstr& i = p.instrs[k];
      r += "v" + std::to_string(k) + " = " +
           (i.op == FusedInstr::kConst ? "const " + std::to_string(i.value) : std::string(op_name(static_cast<OpKind>(i.op)))) + " " +
           std::to_string(i.a) + " " + std::to_string(i.b) + " : " + dtype_name(i.dtype) + " in " + dtype_name(i.in_dtype) + "\n";
    }
  }
  return r;
}

struct Case {
  Graph g;
  std::vector<std::pair<std::string, Buffer>> inputs;
  int kernels = 0;
};

// Adds `n` inputs of random dtypes, each read through a random view onto `shape`, named
// <prefix><i>, with random data (integer-valued when `integral`); appends their dtypes and edges.
void add_random_inputs(std::mt19937& rng, Case& c, const std::vector<int64_t>& shape, int n, const std::string& prefix,
                       bool integral, std::vector<DType>& types, std::vector<Edge>& edges) {
  for (int i = 0; i < n; ++i) {
    DType t = kTypes[rng() % 5];
    auto [view, buf_shape] = random_view(rng, shape);
    std::vector<Expr> s;
    for (int64_t d : buf_shape) s.push_back(Expr(d));
    std::string name = prefix + std::to_string(i);
    edges.push_back({c.g.input(name, t, s), view});
    c.inputs.push_back({name, random_buffer(rng, t, buf_shape, integral)});
    types.push_back(t);
  }
}

// Adds one random fused kernel (and its inputs) to the case; its output is "y<k>".
void add_random_kernel(std::mt19937& rng, Case& c, const std::vector<int64_t>& out_shape) {
  int id = c.kernels++;
  std::vector<DType> types;
  std::vector<Edge> edges;
  add_random_inputs(rng, c, out_shape, 1 + static_cast<int>(rng() % 4), "x" + std::to_string(id) + "_", false, types, edges);
  FusedProgram p = random_program(rng, types, 1 + static_cast<int>(rng() % 8));
  std::vector<Expr> shape{Expr(out_shape[0]), Expr(out_shape[1]), Expr(out_shape[2])};
  NodeId k = c.g.kernel("Fused", edges, p.instrs.back().dtype, shape, 0, 0.0f, p.encode());
  c.g.output("y" + std::to_string(id), {k, View::contiguous(shape)});
}

// Adds one random fused reduction over a [d0, d1, d2] domain along a random axis: a prologue
// over 1-3 inputs read through random views, an optional epilogue with 0-2 more inputs read
// by output. Sums use integer-valued data and programs, so any summation order gives the
// reference's bits; maxima take any program.
void add_random_reduction(std::mt19937& rng, Case& c, const std::vector<int64_t>& domain) {
  int id = c.kernels++;
  const bool sum = rng() % 2;
  const size_t axis = rng() % 3;
  std::vector<DType> types;
  std::vector<Edge> edges;
  add_random_inputs(rng, c, domain, 1 + static_cast<int>(rng() % 3), "r" + std::to_string(id) + "_", sum, types, edges);
  FusedProgram pro = random_program(rng, types, 1 + static_cast<int>(rng() % 3), sum);
  std::vector<int64_t> code = pro.encode();
  DType out_t = pro.instrs.back().dtype;
  std::vector<Expr> out_shape;
  for (size_t d = 0; d < 3; ++d)
    if (d != axis) out_shape.push_back(Expr(domain[d]));
  if (rng() % 2) {
    std::vector<DType> epi_types{out_t};
    int n_epi = static_cast<int>(rng() % 3);
    for (int i = 0; i < n_epi; ++i) {
      DType t = kTypes[rng() % 5];
      std::string name = "e" + std::to_string(id) + "_" + std::to_string(i);
      std::vector<int64_t> buf{out_shape[0].value(), out_shape[1].value()};
      View v = View::contiguous(out_shape);
      if (rng() % 2) {  // broadcast along the outputs' first axis
        buf[0] = 1;
        v = View::contiguous({Expr(1), out_shape[1]}).expand(0, out_shape[0]);
      }
      edges.push_back({c.g.input(name, t, {Expr(buf[0]), Expr(buf[1])}), v});
      c.inputs.push_back({name, random_buffer(rng, t, buf)});
      epi_types.push_back(t);
    }
    FusedProgram epi = random_program(rng, epi_types, 1 + static_cast<int>(rng() % 3));
    std::vector<int64_t> ec = epi.encode();
    code.insert(code.end(), ec.begin(), ec.end());
    out_t = epi.instrs.back().dtype;
  }
  NodeId k = c.g.kernel(sum ? "FusedSum" : "FusedMax", edges, out_t, out_shape, axis, 0.0f, code);
  c.g.output("y" + std::to_string(id), {k, View::contiguous(out_shape)});
}

// Runs the case on the reference and on generated kernels; returns how many generated
// kernels ran and checks every output.
int run_and_compare(Case& c, ThreadPool& pool) {
  Interpreter ref(c.g), fast(c.g);
  FusedJit jit;
  jit.prepare(fast.graph(), cache_dir());
  EXPECT_EQ(jit.kernels(), static_cast<size_t>(c.kernels)) << jit.status();
  int ran = 0;
  fast.set_kernel_hook([&](const Node& n, const std::vector<Reader>& in, const std::vector<std::vector<int64_t>>& s, Buffer& out) {
    bool ok = jit.run(n, in, s, out, pool);
    ran += ok;
    return ok;
  });
  for (auto& [name, buf] : c.inputs) {
    ref.set_input(name, buf);
    fast.set_input(name, buf);
  }
  ref.run();
  fast.run();
  for (int k = 0; k < c.kernels; ++k) {
    std::string y = "y" + std::to_string(k), where;
    if (!same_bits(ref.output(y), fast.output(y), &where)) {
      NodeId out = c.g.find_output(y);
      ADD_FAILURE() << y << ": " << where << "\n" << c.g.node(c.g.node(out).inputs[0].src).kernel << " program:\n"
                    << program_text(c.g, c.g.node(out).inputs[0].src);
    }
  }
  return ran;
}

TEST(FusedJit, RandomProgramsMatchTheReferenceBitForBit) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  Case c;
  for (int trial = 0; trial < 150; ++trial) {
    std::vector<int64_t> shape{static_cast<int64_t>(1 + rng() % 4), static_cast<int64_t>(1 + rng() % 5),
                               static_cast<int64_t>(2 + rng() % 40)};
    if (trial % 25 == 0) shape = {3, 67, 300};  // big enough to split over threads
    add_random_kernel(rng, c, shape);
  }
  EXPECT_EQ(run_and_compare(c, pool), c.kernels) << "some generated kernels did not run";
}

// Exp2 over every kind of f32 (a stride through all bit patterns, both signs: normals,
// subnormals, infinities, NaNs) and the edges of its special cases: the generated kernels'
// lm_exp2f (a vectorised copy of glibc's exp2f where the CPU has FMA and AVX2) must give the
// reference's libm bits.
TEST(FusedJit, Exp2MatchesTheReferenceAcrossTheFloatRange) {
  std::vector<float> xs;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4093) {
    const uint32_t b = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &b, 4);
    xs.push_back(f);
  }
  for (float f : {-150.0f, std::nextafter(-150.0f, 0.0f), -149.5f, -149.0f, -128.0f, 128.0f, std::nextafter(128.0f, 0.0f), 0.0f, -0.0f,
                  INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 0.5f, 1.0f / 3.0f, 127.5f, -127.5f})
    xs.push_back(f);
  Case c;
  const std::vector<Expr> shape{Expr(1), Expr(1), Expr(static_cast<int64_t>(xs.size()))};
  Buffer xb(DType::F32, {1, 1, static_cast<int64_t>(xs.size())});
  for (size_t i = 0; i < xs.size(); ++i) xb.set(i, xs[i]);
  FusedProgram p;
  p.n_inputs = 1;
  FusedInstr e;
  e.op = static_cast<int>(OpKind::Exp2), e.a = 0, e.dtype = DType::F32;
  p.instrs.push_back(e);
  NodeId k = c.g.kernel("Fused", {{c.g.input("x", DType::F32, shape), View::contiguous(shape)}}, DType::F32, shape, 0, 0.0f, p.encode());
  c.g.output("y0", {k, View::contiguous(shape)});
  c.inputs.push_back({"x", xb});
  c.kernels = 1;
  ThreadPool pool(2);
  EXPECT_EQ(run_and_compare(c, pool), 1);
}

TEST(FusedJit, RandomReductionsMatchTheReference) {
  std::mt19937 rng(13);
  ThreadPool pool(2);
  Case c;
  for (int trial = 0; trial < 120; ++trial) {
    std::vector<int64_t> shape{static_cast<int64_t>(1 + rng() % 4), static_cast<int64_t>(1 + rng() % 5),
                               static_cast<int64_t>(2 + rng() % 40)};
    if (trial % 20 == 0) shape = {3, 67, 300};  // long rows, split over threads
    add_random_reduction(rng, c, shape);
  }
  EXPECT_EQ(run_and_compare(c, pool), c.kernels) << "some generated reductions did not run";
}

// A float sum in another order: within a few ulps of the reference's sequential sum.
TEST(FusedJit, FloatReductionsAgreeWithinRounding) {
  Graph g;
  NodeId x = g.input("x", DType::F32, {Expr(37), Expr(1000)});
  NodeId w = g.input("w", DType::BF16, {Expr(1000)});
  FusedProgram p;  // sum_k exp2(x * w) over the last axis, then sqrt
  p.n_inputs = 2;
  p.instrs.push_back({static_cast<int>(OpKind::Cast), DType::F32, DType::F32, 1, -1, 0});
  p.instrs.push_back({static_cast<int>(OpKind::Mul), DType::F32, DType::F32, 0, 2, 0});
  p.instrs.push_back({static_cast<int>(OpKind::Exp2), DType::F32, DType::F32, 3, -1, 0});
  FusedProgram e;
  e.n_inputs = 1;
  e.instrs.push_back({static_cast<int>(OpKind::Sqrt), DType::F32, DType::F32, 0, -1, 0});
  std::vector<int64_t> code = p.encode(), ec = e.encode();
  code.insert(code.end(), ec.begin(), ec.end());
  NodeId k = g.kernel("FusedSum", {{x, View::contiguous({Expr(37), Expr(1000)})}, {w, View::contiguous({Expr(1), Expr(1000)}).expand(0, Expr(37))}},
                      DType::F32, {Expr(37)}, 1, 0.0f, code);
  g.output("y", {k, View::contiguous({Expr(37)})});
  ThreadPool pool(2);
  Interpreter ref(g), fast(g);
  FusedJit jit;
  jit.prepare(fast.graph(), cache_dir());
  ASSERT_EQ(jit.kernels(), 1u) << jit.status();
  fast.set_kernel_hook(cpu_kernels(pool, &jit));
  std::mt19937 rng(4);
  Buffer xb = random_buffer(rng, DType::F32, {37, 1000}), wb = random_buffer(rng, DType::BF16, {1000});
  for (Interpreter* rt : {&ref, &fast}) {
    rt->set_input("x", xb);
    rt->set_input("w", wb);
    rt->run();
  }
  const Buffer &want = ref.output("y"), &got = fast.output("y");
  for (size_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.get(i), want.get(i), 1e-5 * std::abs(want.get(i))) << "row " << i;
}

// A NaN anywhere in a row makes its max NaN, before or after larger values.
TEST(FusedJit, MaxPropagatesNaN) {
  Graph g;
  NodeId x = g.input("x", DType::F32, {Expr(4), Expr(50)});
  FusedProgram p;  // max_k log2(x): NaN where x < 0
  p.n_inputs = 1;
  p.instrs.push_back({static_cast<int>(OpKind::Log2), DType::F32, DType::F32, 0, -1, 0});
  NodeId k = g.kernel("FusedMax", {{x, View::contiguous({Expr(4), Expr(50)})}}, DType::F32, {Expr(4)}, 1, 0.0f, p.encode());
  g.output("y", {k, View::contiguous({Expr(4)})});
  ThreadPool pool(2);
  Interpreter fast(g);
  FusedJit jit;
  jit.prepare(fast.graph(), cache_dir());
  ASSERT_EQ(jit.kernels(), 1u) << jit.status();
  fast.set_kernel_hook(cpu_kernels(pool, &jit));
  std::vector<float> v(200, 2.0f);
  v[10] = -1.0f;         // row 0: NaN early, larger values later
  v[50 + 49] = -1.0f;    // row 1: NaN last
  v[10 + 1] = 64.0f;
  v[150 + 3] = 1024.0f;  // row 3: no NaN, max log2 = 10
  fast.set_input("x", Buffer::f32(v, {4, 50}));
  fast.run();
  const Buffer& y = fast.output("y");
  EXPECT_TRUE(std::isnan(y.get(0)));
  EXPECT_TRUE(std::isnan(y.get(1)));
  EXPECT_EQ(y.get(2), 1.0);
  EXPECT_EQ(y.get(3), 10.0);
}

TEST(FusedJit, DynamicDimsAtSeveralValues) {
  Graph g;
  Expr s = Expr::var("s");
  NodeId a = g.input("a", DType::F32, {s, Expr(33)});
  NodeId b = g.input("b", DType::BF16, {Expr(33)});
  FusedProgram p;
  p.n_inputs = 2;
  p.instrs.push_back({static_cast<int>(OpKind::Mul), DType::F32, DType::F32, 0, 1, 0});
  p.instrs.push_back({static_cast<int>(OpKind::Exp2), DType::F32, DType::F32, 2, -1, 0});
  NodeId k = g.kernel("Fused", {{a, View::contiguous({s, Expr(33)})}, {b, View::contiguous({Expr(1), Expr(33)}).expand(0, s)}},
                      DType::F32, {s, Expr(33)}, 0, 0.0f, p.encode());
  g.output("y", {k, View::contiguous({s, Expr(33)})});
  ThreadPool pool(2);
  Interpreter ref(g), fast(g);
  FusedJit jit;
  jit.prepare(fast.graph(), cache_dir());
  ASSERT_EQ(jit.kernels(), 1u) << jit.status();
  fast.set_kernel_hook(cpu_kernels(pool, &jit));
  std::mt19937 rng(3);
  for (int64_t n : {1, 2, 7, 300}) {
    Buffer x = random_buffer(rng, DType::F32, {n, 33}), w = random_buffer(rng, DType::BF16, {33});
    ref.set_input("a", x), fast.set_input("a", x);
    ref.set_input("b", w), fast.set_input("b", w);
    ref.run();
    fast.run();
    std::string where;
    EXPECT_TRUE(same_bits(ref.output("y"), fast.output("y"), &where)) << "s=" << n << ": " << where;
  }
}

TEST(FusedJit, SecondPrepareLoadsFromTheCache) {
  std::mt19937 rng(11);
  Case c;
  add_random_kernel(rng, c, {2, 3, 4});
  FusedJit first, second;
  first.prepare(c.g, cache_dir());
  second.prepare(c.g, cache_dir());
  ASSERT_EQ(second.kernels(), 1u) << second.status();
  EXPECT_TRUE(second.from_cache()) << second.status();
}

TEST(FusedJit, WithoutACompilerItSaysWhyAndNodesFallBack) {
  std::mt19937 rng(5);
  Case c;
  add_random_kernel(rng, c, {2, 3, 4});
  std::string dir = cache_dir() + "-nocxx";  // an empty cache: nothing to load either
  setenv("LUMINAL_CXX", "/nonexistent/c++", 1);
  FusedJit jit;
  jit.prepare(c.g, dir);
  unsetenv("LUMINAL_CXX");
  EXPECT_EQ(jit.kernels(), 0u);
  EXPECT_NE(jit.status().find("LUMINAL_CXX"), std::string::npos) << jit.status();
}

}  // namespace
}  // namespace luminal::cpu
