// Every 16-bit pattern round trips; narrowing matches a double-arithmetic reference on every
// tie (and its neighbours) and on many random floats.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/dtype_test_util.h"

using namespace dtypetest;
using luminal::bf16_to_f32;
using luminal::f16_to_f32;
using luminal::f32_to_bf16;
using luminal::f32_to_f16;

static bool is_f16_nan(uint32_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static bool is_bf16_nan(uint32_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

TEST(DTypeExhaustive, EveryBF16PatternRoundTrips) {
  int failures = 0;
  for (uint32_t h = 0; h < 0x10000 && failures < 10; ++h) {
    float f = bf16_to_f32(static_cast<uint16_t>(h));
    uint16_t back = f32_to_bf16(f);
    if (is_bf16_nan(h)) {
      if (!std::isnan(f) || !is_bf16_nan(back)) { ++failures; ADD_FAILURE() << "NaN pattern " << std::hex << h; }
    } else if (back != h) {
      ++failures;
      ADD_FAILURE() << std::hex << h << " -> " << back;
    }
  }
}

TEST(DTypeExhaustive, EveryF16PatternRoundTripsAndDecodesByDefinition) {
  int failures = 0;
  for (uint32_t h = 0; h < 0x10000 && failures < 10; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    uint16_t back = f32_to_f16(f);
    double want = f16_value(static_cast<uint16_t>(h));
    bool ok = is_f16_nan(h) ? std::isnan(f) && is_f16_nan(back)
                            : back == h && static_cast<double>(f) == want && std::signbit(f) == bool(h & 0x8000);
    if (!ok) { ++failures; ADD_FAILURE() << std::hex << h << " -> " << f << " -> " << back; }
  }
}

// For a narrowed result, compare against the reference value bit for bit (via its f32 bits).
static void expect_bf16(float f, int& failures) {
  if (failures >= 10) return;
  double want = bf16_ref(f);
  float got = bf16_to_f32(f32_to_bf16(f));
  bool ok = std::isnan(f) ? std::isnan(got) : bits(got) == bits(static_cast<float>(want));
  if (!ok) { ++failures; ADD_FAILURE() << std::hex << "f32 " << bits(f) << ": got " << bits(got) << " want " << want; }
}

static void expect_f16(float f, int& failures) {
  if (failures >= 10) return;
  double want = f16_ref(f);
  double got = f16_value(f32_to_f16(f));
  bool ok = std::isnan(f) ? std::isnan(got) : got == want && std::signbit(got) == std::signbit(want);
  if (!ok) { ++failures; ADD_FAILURE() << std::hex << "f32 " << bits(f) << std::dec << " (" << f << "): got " << got << " want " << want; }
}

TEST(DTypeExhaustive, EveryBF16TieAndItsNeighbours) {
  int failures = 0;
  for (uint32_t h = 0; h < 0x7f80; ++h)  // every finite positive bf16 and the next one up
    for (uint32_t sign : {0u, 0x80000000u})
      for (int d : {-1, 0, 1}) expect_bf16(from_bits(sign | ((h << 16) + 0x8000 + d)), failures);
}

TEST(DTypeExhaustive, EveryF16TieAndItsNeighbours) {
  int failures = 0;
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // the midpoint between h and h + 1 (h + 1 may be Inf)
    double mid = (f16_value(static_cast<uint16_t>(h)) + (h + 1 == 0x7c00 ? 65536.0 : f16_value(static_cast<uint16_t>(h + 1)))) / 2;
    float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);  // midpoints need 12 bits: exact in f32
    for (float sign : {1.0f, -1.0f})
      for (float f : {m, std::nextafter(m, 0.0f), std::nextafter(m, INFINITY)}) expect_f16(sign * f, failures);
  }
}

TEST(DTypeExhaustive, RandomFloatsMatchTheReference) {
  std::mt19937 rng(1234);
  int bf_failures = 0, h_failures = 0;
  for (int i = 0; i < 400000; ++i) {
    float any = from_bits(rng());  // every exponent, NaNs and Infs included
    expect_bf16(any, bf_failures);
    expect_f16(any, h_failures);
    // Exponents around the f16 range, where most f16 cases live.
    uint32_t e = 127 - 28 + rng() % 46;
    float near = from_bits((rng() & 0x80000000u) | (e << 23) | (rng() & 0x7fffffu));
    expect_f16(near, h_failures);
    expect_bf16(near, bf_failures);
  }
}
