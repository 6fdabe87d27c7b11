// The CPU backend's Gather (an embedding lookup's rows copied whole) against values computed
// directly: bit for bit, out-of-range indices giving 0 (the whole-graph check against the
// reference is CpuBackend.EmbeddingGatherMatchesTheReference).
#include "backends/cpu/gather.h"

#include <cstring>
#include <utility>

#include "backends/cpu/weight_panels.h"

#include "kernel_compare.h"

namespace luminal::cpu::testing {
namespace {

// Indices of whole rows (row * d + column), including rows past the table and negative ones.
Buffer row_indices(const std::vector<int64_t>& rows, int64_t d) {
  Buffer idx(DType::I32, {static_cast<int64_t>(rows.size()), d});
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t c = 0; c < d; ++c) idx.set(r * d + c, static_cast<double>(rows[r] < 0 ? -1 : rows[r] * d + c));
  return idx;
}

TEST(CpuGather, RowsCopiedWholeAndOutOfRangeZero) {
  const int64_t v = 50, d = 24;
  const std::vector<int64_t> rows = {3, 0, 49, -1, 50, 7, 7};
  for (DType t : {DType::F32, DType::BF16}) {
    Buffer table = random_f32({v, d}, 5).cast(t);
    Buffer idx = row_indices(rows, d);
    std::vector<Reader> in;
    in.emplace_back(idx, View::contiguous(exprs({static_cast<int64_t>(rows.size()), d})), DimMap{});
    in.emplace_back(table, View::contiguous(exprs({v, d})), DimMap{});
    Buffer out(t, {static_cast<int64_t>(rows.size()), d});
    ASSERT_TRUE(gather(in, out)) << dtype_name(t);
    const size_t es = dtype_size(t);
    for (size_t r = 0; r < rows.size(); ++r) {
      const bool inside = rows[r] >= 0 && rows[r] < v;
      std::vector<uint8_t> want(static_cast<size_t>(d) * es, 0);
      if (inside) std::memcpy(want.data(), table.bytes() + static_cast<size_t>(rows[r] * d) * es, want.size());
      EXPECT_EQ(std::memcmp(out.bytes() + r * d * es, want.data(), want.size()), 0) << "row " << r << " " << dtype_name(t);
    }
  }
}

// A tied embedding packed at load (the head's W, backends/cpu/weight_panels.h): the same bf16
// values read from its panels' words; odd d and a table that is not a whole number of panels.
TEST(CpuGather, RowsOfATablePackedAtLoad) {
  const int64_t v = 50, d = 25;
  const std::vector<int64_t> rows = {3, 0, 49, -1, 50, 31, 32, 7};
  Buffer table = random_f32({v, d}, 7).cast(DType::BF16);
  const uint8_t* bytes = std::as_const(table).bytes();
  PackedWeights packed;
  packed.add(bytes, WeightPanels::pack(reinterpret_cast<const uint16_t*>(bytes), v, d, d, nullptr));
  Buffer idx = row_indices(rows, d);
  std::vector<Reader> in;
  in.emplace_back(idx, View::contiguous(exprs({static_cast<int64_t>(rows.size()), d})), DimMap{});
  in.emplace_back(table, View::contiguous(exprs({v, d})), DimMap{});
  Buffer from_rows(DType::BF16, {static_cast<int64_t>(rows.size()), d}), from_panels = from_rows;
  ASSERT_TRUE(gather(in, from_rows));
  ASSERT_TRUE(gather(in, from_panels, &packed));
  EXPECT_EQ(std::memcmp(from_rows.bytes(), from_panels.bytes(), from_rows.nbytes()), 0);
  // Read from the panels, not the rows: change the panels' copy and the gathered values follow.
  PackedWeights zeroed;
  Buffer zeros(DType::BF16, {v, d});
  zeroed.add(bytes, WeightPanels::pack(reinterpret_cast<const uint16_t*>(std::as_const(zeros).bytes()), v, d, d, nullptr));
  ASSERT_TRUE(gather(in, from_panels, &zeroed));
  for (size_t i = 0; i < from_panels.numel(); ++i) ASSERT_EQ(from_panels.get(i), 0.0) << i;
}

// A table read through a transpose is not contiguous: left to the reference.
TEST(CpuGather, TransposedTableLeftToTheReference) {
  Buffer table = random_f32({8, 6}, 6);
  Buffer idx = row_indices({1, 2}, 8);
  std::vector<Reader> in;
  in.emplace_back(idx, View::contiguous(exprs({2, 8})), DimMap{});
  in.emplace_back(table, View::contiguous(exprs({8, 6})).permute({1, 0}), DimMap{});
  Buffer out(DType::F32, {2, 8});
  EXPECT_FALSE(gather(in, out));
}

}  // namespace
}  // namespace luminal::cpu::testing
