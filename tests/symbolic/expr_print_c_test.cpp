// to_c(): generated C for a few hundred random expressions (raw and simplified) is compiled with
// the system C compiler in one invocation and run over a grid of points; its output must match
// eval(). Skipped when no compiler is installed.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "symbolic/expr.h"
#include "symbolic/expr_test_util.h"

using namespace luminal;
using namespace luminal::testing;

namespace {

const int64_t kZs[] = {0, 1, 2, 5, 13, 31, 50};
const int64_t kAs[] = {0, 1, 3, 7, 20};
const int64_t kBs[] = {0, 2, 5, 16};

struct Point {
  int64_t z, a, b;
};

std::vector<Point> grid() {
  std::vector<Point> g;
  for (int64_t z : kZs)
    for (int64_t a : kAs)
      for (int64_t b : kBs) g.push_back({z, a, b});
  return g;
}

// The first C compiler that runs, or "" when there is none.
std::string find_compiler() {
  for (const char* cc : {"cc", "gcc", "clang", "g++", "c++"})
    if (std::system((std::string(cc) + " --version >/dev/null 2>&1").c_str()) == 0) return cc;
  return "";
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A temporary directory removed on scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lm_expr_c_XXXXXX").string();
    if (mkdtemp(tmpl.data())) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// Expressions with a reference value at every grid point (no zero divisor, no overflow).
std::vector<Expr> defined_everywhere(int want) {
  RandomExprGen gen(8675309u, {"a", "b"});
  std::vector<Point> g = grid();
  std::vector<Expr> out;
  Expr a = Expr::var("a"), b = Expr::var("b"), z = Expr::index();
  // Hand-picked: negative numerators and divisors, large constants, comparisons of negatives.
  out = {
      Expr::raw(ExprKind::FloorDiv, z - 30, 4),
      Expr::raw(ExprKind::Mod, z - 30, 4),
      Expr::raw(ExprKind::CeilDiv, z - 30, 4),
      Expr::raw(ExprKind::FloorDiv, z + 3, -4),
      Expr::raw(ExprKind::Mod, z + 3, -4),
      Expr::raw(ExprKind::CeilDiv, 7 - z, -3),
      Expr::raw(ExprKind::Mul, z + 1, Expr(int64_t{3000000000})),
      Expr::raw(ExprKind::Add, a, Expr(int64_t{-5000000000})),
      Expr::raw(ExprKind::Lt, a - 10, b - 10),
      Expr::raw(ExprKind::Min, a - 10, Expr(-3)),
      Expr::raw(ExprKind::Max, z - 40, b - 20),
  };
  for (int tries = 0; tries < 200000 && static_cast<int>(out.size()) < want; ++tries) {
    Expr e = gen.gen(5);
    bool ok = true;
    for (const Point& p : g) {
      if (!ref_eval(e, {{"a", p.a}, {"b", p.b}}, p.z).ok()) {
        ok = false;
        break;
      }
    }
    if (ok) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST(ExprToC, CompiledCodeMatchesEval) {
  std::string cc = find_compiler();
  if (cc.empty()) GTEST_SKIP() << "no C compiler found (tried cc, gcc, clang, g++, c++)";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty()) << "mkdtemp failed";

  std::vector<Expr> exprs = defined_everywhere(300);
  ASSERT_GE(exprs.size(), 250u) << "the generator found too few expressions defined on the whole grid";
  // Each expression twice: as built (raw) and simplified.
  std::vector<Expr> fns;
  for (const Expr& e : exprs) {
    fns.push_back(e);
    fns.push_back(e.simplify());
  }

  std::ostringstream src;
  src << Expr::c_prelude() << "#include <stdio.h>\n";
  for (size_t i = 0; i < fns.size(); ++i)
    src << "static long long f_" << i
        << "(long long z, long long a, long long b) { (void)z; (void)a; (void)b; "
        << "return " << fns[i].to_c() << "; }\n";
  src << "typedef long long (*fn_t)(long long, long long, long long);\n";
  src << "static const fn_t fns[] = {";
  for (size_t i = 0; i < fns.size(); ++i) src << (i ? ", " : "") << "f_" << i;
  src << "};\n";
  std::vector<Point> g = grid();
  src << "static const long long pts[][3] = {";
  for (const Point& p : g) src << "{" << p.z << ", " << p.a << ", " << p.b << "}, ";
  src << "};\n";
  src << "int main(void) {\n"
         "  for (unsigned f = 0; f < sizeof fns / sizeof fns[0]; ++f)\n"
         "    for (unsigned p = 0; p < sizeof pts / sizeof pts[0]; ++p)\n"
         "      printf(\"%lld\\n\", fns[f](pts[p][0], pts[p][1], pts[p][2]));\n"
         "  return 0;\n}\n";

  std::filesystem::path c_file = dir.path / "exprs.c", exe = dir.path / "exprs", out = dir.path / "out.txt",
                        err = dir.path / "err.txt";
  std::ofstream(c_file) << src.str();
  // -x c: also compile as C when the driver found is g++/c++.
  std::string compile =
      cc + " -x c -O0 -w -o '" + exe.string() + "' '" + c_file.string() + "' 2>'" + err.string() + "'";
  ASSERT_EQ(std::system(compile.c_str()), 0) << "compile failed:\n" << read_file(err).substr(0, 4000);
  ASSERT_EQ(std::system(("'" + exe.string() + "' >'" + out.string() + "'").c_str()), 0);

  std::istringstream lines(read_file(out));
  int compared = 0, mismatches = 0;
  for (size_t f = 0; f < fns.size(); ++f) {
    for (const Point& p : g) {
      long long got = 0;
      ASSERT_TRUE(static_cast<bool>(lines >> got)) << "output ended early at function " << f;
      int64_t want = exprs[f / 2].eval({{"a", p.a}, {"b", p.b}}, p.z);
      ++compared;
      if (got != want && ++mismatches <= 10)
        ADD_FAILURE() << (f % 2 ? "simplified " : "raw ") << fns[f].to_string() << "\n  C: " << fns[f].to_c()
                      << "\n  at z=" << p.z << " a=" << p.a << " b=" << p.b << ": C gave " << got << ", eval "
                      << want;
    }
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(compared, static_cast<int>(fns.size() * g.size()));
}

// The prelude's floor division and modulo, whose fast path takes operands below 2^31 as 32-bit
// unsigned: against floor semantics computed here, on signs, zero and values past 32 bits.
TEST(ExprToC, PreludeDivisionIsFloorDivisionEverywhere) {
  std::string cc = find_compiler();
  if (cc.empty()) GTEST_SKIP() << "no C compiler found (tried cc, gcc, clang, g++, c++)";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty()) << "mkdtemp failed";
  const int64_t values[] = {0, 1, 7, -1, -7, 128, -128, 2147483647LL, 2147483648LL, -2147483648LL, 4294967296LL + 5, -(4294967296LL + 5),
                            (1LL << 40) + 3};
  const int64_t divisors[] = {1, 3, 128, -3, 2147483647LL, 2147483648LL, 4294967296LL, -(1LL << 33)};
  std::ostringstream src;
  src << Expr::c_prelude() << "#include <stdio.h>\nint main(void) {\n";
  for (int64_t a : values)
    for (int64_t b : divisors)
      src << "  printf(\"%lld %lld\\n\", lm_floordiv(" << a << "LL, " << b << "LL), lm_mod(" << a << "LL, " << b << "LL));\n";
  src << "  return 0;\n}\n";
  std::filesystem::path c_file = dir.path / "div.c", exe = dir.path / "div", out = dir.path / "out.txt", err = dir.path / "err.txt";
  std::ofstream(c_file) << src.str();
  ASSERT_EQ(std::system((cc + " -x c -O0 -w -o '" + exe.string() + "' '" + c_file.string() + "' 2>'" + err.string() + "'").c_str()), 0)
      << read_file(err);
  ASSERT_EQ(std::system(("'" + exe.string() + "' >'" + out.string() + "'").c_str()), 0);
  std::istringstream lines(read_file(out));
  for (int64_t a : values)
    for (int64_t b : divisors) {
      long long q = 0, m = 0;
      ASSERT_TRUE(static_cast<bool>(lines >> q >> m));
      int64_t want_q = a / b;
      if (a % b != 0 && ((a < 0) != (b < 0))) --want_q;  // floor, not truncation
      EXPECT_EQ(q, want_q) << a << " // " << b;
      EXPECT_EQ(m, a - want_q * b) << a << " mod " << b;
    }
}
