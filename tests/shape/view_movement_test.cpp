// Single movement ops on a View, each checked element by element against the oracle.
#include <gtest/gtest.h>

#include "shape/view_oracle.h"

using namespace viewtest;
using luminal::Expr;
using luminal::View;

TEST(ViewMovement, FreshViewIsIdentity) {
  for (const Shape& s : {Shape{}, Shape{1}, Shape{7}, Shape{2, 3}, Shape{2, 1, 3}, Shape{2, 3, 4, 5}}) {
    Twin t = Twin::arange(s);
    EXPECT_TRUE(matches(t)) << str(s);
    EXPECT_TRUE(t.v.is_contiguous()) << str(s);
    EXPECT_FALSE(t.v.has_mask()) << str(s);
    EXPECT_EQ(t.v.layers().size(), 1u);
  }
  // The scalar view reads element 0.
  View scalar;
  EXPECT_EQ(scalar.rank(), 0u);
  EXPECT_EQ(scalar.flat_index().index.eval({}, 0), 0);
  EXPECT_EQ(scalar.flat_index().valid.eval({}, 0), 1);
}

TEST(ViewMovement, PermuteEveryPermutationOfRank3And4) {
  for (const Shape& s : {Shape{2, 3, 4}, Shape{2, 1, 3, 2}}) {
    std::vector<size_t> p(s.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = i;
    do {
      Twin t = Twin::arange(s).permute(p);
      EXPECT_TRUE(matches(t)) << str(s);
    } while (std::next_permutation(p.begin(), p.end()));
  }
}

TEST(ViewMovement, PermuteTwiceComposes) {
  Twin t = Twin::arange({2, 3, 4}).permute({2, 0, 1}).permute({0, 2, 1});  // = permute({2, 1, 0})
  EXPECT_TRUE(matches(t));
  EXPECT_FALSE(t.v.is_contiguous());
  EXPECT_EQ(t.v, View::contiguous({2, 3, 4}).permute({2, 1, 0}));
  Twin identity = Twin::arange({2, 3, 4}).permute({2, 0, 1}).permute({1, 2, 0});
  EXPECT_TRUE(matches(identity));
  EXPECT_EQ(identity.v, View::contiguous({2, 3, 4}));
  Twin back = Twin::arange({2, 3, 4}).permute({2, 0, 1}).permute({1, 2, 0}).permute({0, 2, 1}).permute({0, 2, 1});
  EXPECT_TRUE(matches(back));
}

TEST(ViewMovement, ExpandBroadcastsWithStrideZero) {
  Twin t = Twin::arange({3, 1}).expand(1, 4);
  EXPECT_TRUE(matches(t));
  EXPECT_TRUE(t.v.layers().back().strides[1].is_const(0));
  EXPECT_FALSE(t.v.is_contiguous());
  EXPECT_FALSE(t.v.has_mask());
  // Expanding to the same size is a no-op.
  EXPECT_EQ(Twin::arange({3, 4}).v.expand(1, 4), View::contiguous({3, 4}));
  // Both dims broadcast.
  EXPECT_TRUE(matches(Twin::arange({1, 1}).expand(0, 3).expand(1, 2)));
}

TEST(ViewMovement, BroadcastToAddsLeadingDims) {
  EXPECT_TRUE(matches(Twin::arange({3}).broadcast_to({2, 4, 3})));
  EXPECT_TRUE(matches(Twin::arange({3, 1}).broadcast_to({2, 3, 5})));
  EXPECT_TRUE(matches(Twin::arange({1, 4}).broadcast_to({3, 4})));
  EXPECT_TRUE(matches(Twin::arange({2, 3}).broadcast_to({2, 3})));
  EXPECT_TRUE(matches(Twin::arange({}).broadcast_to({2, 2})));  // scalar to matrix
  Twin t = Twin::arange({1, 3, 1}).broadcast_to({2, 2, 3, 4});
  EXPECT_TRUE(matches(t));
  EXPECT_FALSE(t.v.is_contiguous());
}

TEST(ViewMovement, BroadcastToSymbolicSize) {
  Expr s = Expr::var("s");
  View v = View::contiguous({3, 1}).broadcast_to({s, 3, s});
  for (int64_t sv : {1, 2, 4}) {
    Oracle o = Oracle::arange({3, 1}).broadcast_to({sv, 3, sv});
    EXPECT_TRUE(view_matches(v, o, {{"s", sv}})) << "s=" << sv;
  }
}

TEST(ViewMovement, UnsqueezeAndSqueezeAtEveryAxis) {
  Shape s{2, 3};
  for (size_t a = 0; a <= s.size(); ++a) {
    Twin t = Twin::arange(s).unsqueeze(a);
    EXPECT_TRUE(matches(t)) << "unsqueeze " << a;
    EXPECT_TRUE(t.v.is_contiguous()) << "a size-1 dim keeps the view contiguous";
    Twin back = t.squeeze(a);
    EXPECT_TRUE(matches(back)) << "squeeze " << a;
    EXPECT_EQ(back.v.shape(), View::contiguous(exprs(s)).shape());
  }
  Twin t = Twin::arange({1, 2, 1, 3, 1}).squeeze(4).squeeze(0).squeeze(1);
  EXPECT_TRUE(matches(t));
  EXPECT_TRUE(t.v.is_contiguous());
}

TEST(ViewMovement, SqueezeOfPermutedAndSlicedDims) {
  EXPECT_TRUE(matches(Twin::arange({3, 1, 2}).permute({1, 2, 0}).squeeze(0)));
  // A size-1 slice in the middle of a dim, then squeezed: keeps the offset.
  EXPECT_TRUE(matches(Twin::arange({3, 4}).slice(0, 2, 3).squeeze(0)));
  EXPECT_TRUE(matches(Twin::arange({3, 4}).slice(1, 1, 2).squeeze(1)));
}

TEST(ViewMovement, SqueezeOfPaddedSize1Dim) {
  // [1, 3] padded on axis 0 then sliced back to one row: that size-1 dim is all padding
  // (or all data); squeezing it must keep that.
  Twin base = Twin::arange({1, 3}).pad(0, 1, 1, 2.0f);
  for (int64_t row = 0; row < 3; ++row) {
    Twin t = base.slice(0, row, row + 1).squeeze(0);
    EXPECT_TRUE(matches(t)) << "row " << row;
  }
}

TEST(ViewMovement, SliceEveryAxisStartEndStep) {
  Shape s{4, 5, 3};
  int64_t checked = 0;
  for (size_t axis = 0; axis < s.size(); ++axis)
    for (int64_t step = 1; step <= 3; ++step)
      for (int64_t b = 0; b <= s[axis]; ++b)
        for (int64_t e = b; e <= s[axis]; ++e) {
          Twin t = Twin::arange(s).slice(axis, b, e, step);
          EXPECT_TRUE(matches(t, &checked)) << "axis " << axis << " [" << b << ":" << e << ":" << step << "]";
          EXPECT_FALSE(t.v.has_mask()) << "slicing alone never masks";
        }
  EXPECT_GT(checked, 2000);
}

TEST(ViewMovement, EmptySlices) {
  for (int64_t b : {0, 2, 4}) {
    Twin t = Twin::arange({4, 3}).slice(0, b, b);
    EXPECT_EQ(t.v.shape()[0], Expr(0));
    EXPECT_TRUE(t.v.numel().is_const(0));
    EXPECT_TRUE(matches(t));
  }
  EXPECT_TRUE(matches(Twin::arange({4, 3}).slice(1, 1, 1, 3)));
}

TEST(ViewMovement, SliceOfSlice) {
  Twin t = Twin::arange({10, 6}).slice(0, 1, 9, 2).slice(0, 1, 4, 2).slice(1, 5, 6).slice(1, 0, 1);
  EXPECT_TRUE(matches(t));
  EXPECT_TRUE(matches(Twin::arange({12}).slice(0, 2, 12, 3).slice(0, 1, 4, 2)));
}

TEST(ViewMovement, SliceSymbolicEnd) {
  Expr s = Expr::var("s");
  // x[:, 1:s-1] of a [3, s] tensor
  View v = View::contiguous({3, s}).slice(1, 1, s - 1);
  for (int64_t sv : {2, 3, 6}) {
    Oracle o = Oracle::arange({3, sv}).slice(1, 1, sv - 1, 1);
    EXPECT_TRUE(view_matches(v, o, {{"s", sv}})) << "s=" << sv;
  }
  View w = View::contiguous({s, 4}).slice(0, 0, s, 2);
  for (int64_t sv : {1, 2, 5}) {
    Oracle o = Oracle::arange({sv, 4}).slice(0, 0, sv, 2);
    EXPECT_TRUE(view_matches(w, o, {{"s", sv}})) << "s=" << sv;
  }
}

TEST(ViewMovement, PadBeforeAndAfterOnEveryAxis) {
  Shape s{2, 3, 2};
  for (size_t axis = 0; axis < s.size(); ++axis)
    for (int64_t before = 0; before <= 2; ++before)
      for (int64_t after = 0; after <= 2; ++after) {
        Twin t = Twin::arange(s).pad(axis, before, after, -1.5f);
        EXPECT_TRUE(matches(t)) << "axis " << axis << " pad " << before << "," << after;
        EXPECT_EQ(t.v.has_mask(), before + after > 0);
        EXPECT_EQ(t.v.is_contiguous(), before + after == 0);
      }
}

TEST(ViewMovement, PadValueIsKeptAndSharedPadsCompose) {
  Twin t = Twin::arange({2, 3}).pad(0, 1, 0, 7.0f).pad(1, 0, 2, 7.0f).pad(0, 0, 1, 7.0f);
  EXPECT_TRUE(matches(t));
  EXPECT_EQ(t.v.pad_value(), 7.0f);
  EXPECT_TRUE(t.v.has_mask());
  EXPECT_TRUE(t.v.can_pad_with(7.0f));
  // Padding an already padded axis again.
  EXPECT_TRUE(matches(Twin::arange({3}).pad(0, 2, 1, 1.0f).pad(0, 1, 3, 1.0f)));
}

TEST(ViewMovement, SecondPadWithDifferentValueThrows) {
  View v = View::contiguous({2, 3}).pad(1, 1, 1, 3.0f);
  EXPECT_TRUE(v.can_pad_with(3.0f));
  EXPECT_FALSE(v.can_pad_with(0.0f));
  EXPECT_FALSE(v.can_pad_with(-3.0f));
  std::string msg;
  EXPECT_TRUE(throws_error([&] { (void)v.pad(0, 1, 0, 0.0f); }, &msg));
  EXPECT_TRUE(throws_error([&] { (void)v.permute({1, 0}).pad(0, 1, 0, 4.0f); }));
  // A fresh view can pad with anything.
  EXPECT_TRUE(View::contiguous({2}).can_pad_with(123.0f));
  // -0.0 and 0.0 are different pad values (bitwise compare).
  EXPECT_FALSE(View::contiguous({2}).pad(0, 1, 0, 0.0f).can_pad_with(-0.0f));
}

TEST(ViewMovement, PadSymbolic) {
  Expr s = Expr::var("s");
  View v = View::contiguous({s, 2}).pad(0, 1, s, 0.5f).pad(1, 2, 0, 0.5f);
  for (int64_t sv : {1, 2, 3}) {
    Oracle o = Oracle::arange({sv, 2}).pad(0, 1, sv, 0.5f).pad(1, 2, 0, 0.5f);
    EXPECT_TRUE(view_matches(v, o, {{"s", sv}})) << "s=" << sv;
  }
}

TEST(ViewMovement, FlipEveryAxis) {
  for (size_t a = 0; a < 3; ++a) {
    Twin t = Twin::arange({2, 3, 4}).flip(a);
    EXPECT_TRUE(matches(t)) << "axis " << a;
    EXPECT_FALSE(t.v.is_contiguous());
    EXPECT_TRUE(matches(t.flip(a))) << "double flip, axis " << a;
  }
  EXPECT_TRUE(matches(Twin::arange({2, 3, 4}).flip(0).flip(2).flip(1)));
  EXPECT_TRUE(matches(Twin::arange({5}).flip(0).flip(0)));
  EXPECT_TRUE(matches(Twin::arange({1, 3}).flip(0)));
}

TEST(ViewMovement, FlipSymbolic) {
  Expr s = Expr::var("s");
  View v = View::contiguous({s, 3}).flip(0).flip(1);
  for (int64_t sv : {1, 2, 4}) {
    Oracle o = Oracle::arange({sv, 3}).flip(0).flip(1);
    EXPECT_TRUE(view_matches(v, o, {{"s", sv}})) << "s=" << sv;
  }
}

TEST(ViewMovement, UnfoldMatchesTorchSemantics) {
  // torch.arange(7).unfold(0, 3, 2) == [[0,1,2],[2,3,4],[4,5,6]]
  Twin t = Twin::arange({7}).unfold(0, 3, 2);
  ASSERT_TRUE(matches(t));
  EXPECT_EQ(t.o.shape, (Shape{3, 3}));
  EXPECT_EQ(t.o.data, (std::vector<int64_t>{0, 1, 2, 2, 3, 4, 4, 5, 6}));
  // torch.arange(6).unfold(0, 2, 1): 5 windows
  Twin u = Twin::arange({6}).unfold(0, 2, 1);
  ASSERT_TRUE(matches(u));
  EXPECT_EQ(u.o.shape, (Shape{5, 2}));
  EXPECT_EQ(u.o.data, (std::vector<int64_t>{0, 1, 1, 2, 2, 3, 3, 4, 4, 5}));
}

TEST(ViewMovement, UnfoldEveryAxisSizeAndStep) {
  Shape s{3, 5, 4};
  for (size_t axis = 0; axis < s.size(); ++axis)
    for (int64_t size = 1; size <= s[axis]; ++size)
      for (int64_t step = 1; step <= 3; ++step) {
        Twin t = Twin::arange(s).unfold(axis, size, step);
        EXPECT_TRUE(matches(t)) << "axis " << axis << " size " << size << " step " << step;
        EXPECT_EQ(t.v.rank(), s.size() + 1);
      }
  // Unfolding twice (2-D patches).
  EXPECT_TRUE(matches(Twin::arange({5, 6}).unfold(0, 3, 2).unfold(1, 2, 2)));
}

TEST(ViewMovement, UnfoldSymbolicAxis) {
  Expr s = Expr::var("s");
  View v = View::contiguous({2, s}).unfold(1, 2, 2);
  for (int64_t sv : {2, 3, 4, 7}) {
    Oracle o = Oracle::arange({2, sv}).unfold(1, 2, 2);
    EXPECT_TRUE(view_matches(v, o, {{"s", sv}})) << "s=" << sv;
  }
}

TEST(ViewMovement, IsContiguous) {
  View v = View::contiguous({2, 3, 4});
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_FALSE(v.permute({1, 0, 2}).is_contiguous());
  EXPECT_TRUE(v.permute({1, 0, 2}).permute({1, 0, 2}).is_contiguous());
  EXPECT_TRUE(v.permute({2, 0, 1}).permute({1, 2, 0}).is_contiguous());
  EXPECT_FALSE(v.slice(1, 0, 2).is_contiguous());
  EXPECT_FALSE(v.slice(0, 1, 2).is_contiguous()) << "offset into the buffer";
  EXPECT_TRUE(v.slice(2, 0, 4).is_contiguous()) << "a full slice changes nothing";
  EXPECT_FALSE(v.pad(0, 1, 0).is_contiguous());
  EXPECT_FALSE(View::contiguous({2, 1}).expand(1, 3).is_contiguous());
  EXPECT_FALSE(v.flip(2).is_contiguous());
  EXPECT_TRUE(v.unsqueeze(3).unsqueeze(0).is_contiguous());
  Expr s = Expr::var("s");
  EXPECT_TRUE(View::contiguous({s, 4}).is_contiguous());
  EXPECT_FALSE(View::contiguous({s, 4}).permute({1, 0}).is_contiguous());
  EXPECT_TRUE(View::contiguous({s, 4}).permute({1, 0}).permute({1, 0}).is_contiguous());
}

TEST(ViewMovement, HasMask) {
  View v = View::contiguous({4, 4});
  EXPECT_FALSE(v.has_mask());
  EXPECT_FALSE(v.slice(0, 1, 3).permute({1, 0}).flip(0).has_mask());
  EXPECT_TRUE(v.pad(1, 0, 1).has_mask());
  EXPECT_TRUE(v.pad(1, 0, 1).permute({1, 0}).has_mask());
  // Slicing the padding off again leaves nothing masked.
  EXPECT_FALSE(v.pad(1, 2, 1).slice(1, 2, 6).has_mask());
  // A mask below a reshape layer still counts.
  View layered = v.pad(0, 1, 1).reshape({24});
  EXPECT_TRUE(layered.has_mask());
  EXPECT_FALSE(layered.can_pad_with(1.0f));
}

TEST(ViewMovementErrors, Permute) {
  View v = View::contiguous({2, 3, 4});
  std::string msg;
  EXPECT_TRUE(throws_error([&] { (void)v.permute({0, 0, 1}); }, &msg));
  EXPECT_NE(msg.find("twice"), std::string::npos) << msg;
  EXPECT_TRUE(throws_error([&] { (void)v.permute({0, 1}); }));
  EXPECT_TRUE(throws_error([&] { (void)v.permute({0, 1, 2, 3}); }));
  EXPECT_TRUE(throws_error([&] { (void)v.permute({0, 1, 3}); }));
}

TEST(ViewMovementErrors, ExpandSqueezeBroadcast) {
  View v = View::contiguous({2, 1});
  EXPECT_TRUE(throws_error([&] { (void)v.expand(0, 4); }));
  EXPECT_TRUE(throws_error([&] { (void)v.expand(2, 4); }));
  EXPECT_TRUE(throws_error([&] { (void)v.squeeze(0); }));
  EXPECT_TRUE(throws_error([&] { (void)v.squeeze(2); }));
  EXPECT_TRUE(throws_error([&] { (void)v.unsqueeze(3); }));
  EXPECT_TRUE(throws_error([&] { (void)v.broadcast_to({3, 4}); }));
  EXPECT_TRUE(throws_error([&] { (void)v.broadcast_to({4}); }));
}

TEST(ViewMovementErrors, Slice) {
  View v = View::contiguous({4, 3});
  EXPECT_TRUE(throws_error([&] { (void)v.slice(0, 0, 5); }));
  EXPECT_TRUE(throws_error([&] { (void)v.slice(1, 2, 4); }));
  EXPECT_TRUE(throws_error([&] { (void)v.slice(0, 3, 2); }));
  EXPECT_TRUE(throws_error([&] { (void)v.slice(0, -1, 2); }));
  EXPECT_TRUE(throws_error([&] { (void)v.slice(0, 0, 2, 0); }));
  EXPECT_TRUE(throws_error([&] { (void)v.slice(0, 0, 2, -1); }));
  EXPECT_TRUE(throws_error([&] { (void)v.slice(2, 0, 1); }));
}

TEST(ViewMovementErrors, PadFlipUnfoldIndex) {
  View v = View::contiguous({4, 3});
  EXPECT_TRUE(throws_error([&] { (void)v.pad(2, 1, 1); }));
  EXPECT_TRUE(throws_error([&] { (void)v.flip(2); }));
  EXPECT_TRUE(throws_error([&] { (void)v.unfold(0, 5, 1); }));
  EXPECT_TRUE(throws_error([&] { (void)v.unfold(0, 0, 1); }));
  EXPECT_TRUE(throws_error([&] { (void)v.unfold(0, 2, 0); }));
  EXPECT_TRUE(throws_error([&] { (void)v.unfold(2, 1, 1); }));
  EXPECT_TRUE(throws_error([&] { (void)v.index({Expr(0)}); }));
}
