#include "tokenizer/unicode_nfc.h"

#include <algorithm>
#include <iterator>
#include <cstdint>
#include <vector>

#include "tokenizer/utf8.h"

namespace luminal {
namespace {

struct CombiningClass {
  char32_t cp;
  uint8_t ccc;
};
struct Decomposition {
  char32_t cp, first, second;  // second == 0: a single-character decomposition
};
struct Composition {
  char32_t first, second, composite;
};
struct CodeRange {
  char32_t first, last;
};

#include "tokenizer/unicode_nfc_data.inc"

// Hangul syllables decompose and compose arithmetically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::lower_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                             [](const CombiningClass& e, char32_t c) { return e.cp < c; });
  return it != std::end(kCombiningClasses) && it->cp == cp ? it->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (cp >= 0xC0) {
    auto it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                               [](const Decomposition& e, char32_t c) { return e.cp < c; });
    if (it != std::end(kDecompositions) && it->cp == cp) {
      decompose(it->first, out);
      if (it->second) decompose(it->second, out);
      return;
    }
  }
  out.push_back(cp);
}

// The primary composite of (a, b), or 0 when they do not compose.
char32_t compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::pair{a, b},
                             [](const Composition& e, const std::pair<char32_t, char32_t>& k) {
                               return e.first != k.first ? e.first < k.first : e.second < k.second;
                             });
  return it != std::end(kCompositions) && it->first == a && it->second == b ? it->composite : 0;
}

// Whether cp may change, or change its neighbour, under NFC.
bool is_unstable(char32_t cp) {
  if (cp < 0x300) return false;
  auto it = std::upper_bound(std::begin(kUnstableRanges), std::end(kUnstableRanges), cp,
                             [](char32_t c, const CodeRange& r) { return c < r.first; });
  return it != std::begin(kUnstableRanges) && cp <= std::prev(it)->last;
}

}  // namespace

std::string to_nfc(std::string_view text) {
  // The quick check: most text holds no character NFC could touch.
  bool stable = true;
  for (size_t i = 0; i < text.size() && stable;) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    stable = !is_unstable(utf8::decode(text, i));
  }
  if (stable) return std::string(text);

  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) decompose(utf8::decode(text, i), cps);

  // Canonical ordering: stable-sort each run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j,
                     [](char32_t a, char32_t b) { return combining_class(a) < combining_class(b); });
    i = j;
  }

  // Canonical composition: each character joins the last starter unless blocked by a character
  // in between whose class is 0 or not lower than its own.
  std::vector<char32_t> out;
  out.reserve(cps.size());
  size_t starter = SIZE_MAX;
  uint8_t last_class = 0;
  for (char32_t c : cps) {
    const uint8_t cc = combining_class(c);
    if (starter != SIZE_MAX) {
      const bool adjacent = out.size() - 1 == starter;
      const bool blocked = !adjacent && (last_class == 0 || last_class >= cc);
      if (!blocked) {
        if (char32_t composite = compose(out[starter], c)) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (cc == 0) starter = out.size();
    last_class = cc;
    out.push_back(c);
  }

  std::string result;
  result.reserve(text.size());
  for (char32_t c : out) utf8::append(result, c);
  return result;
}

}  // namespace luminal
