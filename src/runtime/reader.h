#pragma once
// Reads a producer's buffer through an edge's view, by logical flat index.
#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "runtime/buffer.h"
#include "shape/view.h"
#include "symbolic/expr_program.h"

namespace luminal {

class Reader {
 public:
  Reader(const Buffer& src, const View& view, const DimMap& dims);
  // With the view's flat index expressions already built (they depend only on the view).
  Reader(const Buffer& src, const View& view, const IndexExprs& exprs, const DimMap& dims);
  double operator()(int64_t z) const {
    if (contiguous_) return src_.get(static_cast<size_t>(z));
    int64_t i;
    if (strided_) {
      i = strided_->offset;
      for (size_t d = flat_->shape.size(); d-- > 0;) {
        i += (z % flat_->shape[d]) * strided_->strides[d];
        z /= flat_->shape[d];
      }
    } else {
      if (!always_valid_ && valid_(z) == 0) return pad_;
      i = index_(z);
    }
    LM_ASSERT(i >= 0 && static_cast<size_t>(i) < src_.numel(),
              "view reads element " + std::to_string(i) + " of a buffer of " + std::to_string(src_.numel()));
    return src_.get(static_cast<size_t>(i));
  }
  DType dtype() const { return src_.dtype(); }
  const Buffer& buffer() const { return src_; }
  // When the view is one unmasked strided layer: element (c0, c1, ...) of the logical shape is
  // buffer element offset + sum(ci * strides[i]). Kernels use it to skip index programs.
  struct Strided {
    int64_t offset = 0;
    std::vector<int64_t> strides;
  };
  const std::optional<Strided>& strided() const { return strided_; }
  // When the logical elements, in row-major order, are those of one strided layout of another
  // shape: a plain strided view (shape = the logical shape), or a reshape of one (the layers
  // above the bottom are contiguous, unmasked and without offset). Kernels that walk elements
  // in flat order (Where, copies) use it where strided() is empty.
  struct Flat {
    std::vector<int64_t> shape;
    Strided layout;
  };
  const std::optional<Flat>& flat() const { return flat_; }
  // When the view is a strided top layer (a broadcast, a permute) over a reshape of one strided
  // layout: `top` indexes the row-major elements that `below` lists. Kernels copy those
  // elements (often far fewer than the view shows) and read the copy through `top`.
  struct Stacked {
    Flat below;
    Strided top;
  };
  const std::optional<Stacked>& stacked() const { return stacked_; }
  // When the view is one strided layer with a mask (a pad, rotate_half's halves): element c
  // reads `layout` where lo[d] <= c[d] < hi[d] on every dim, and is pad() elsewhere.
  struct Masked {
    Flat layout;
    std::vector<int64_t> lo, hi;
  };
  const std::optional<Masked>& masked() const { return masked_; }
  double pad() const { return pad_; }

 private:
  const Buffer& src_;
  ExprProgram index_, valid_;
  double pad_;
  bool always_valid_;
  bool contiguous_;
  std::optional<Strided> strided_;
  std::optional<Flat> flat_;
  std::optional<Stacked> stacked_;
  std::optional<Masked> masked_;
};

// Walks a flat layout's buffer indices in logical (row-major) order.
class FlatCursor {
 public:
  explicit FlatCursor(const Reader::Flat& f) : f_(f), coord_(f.shape.size(), 0), idx_(f.layout.offset) {}
  int64_t index() const { return idx_; }
  // Moves `n` elements on at once, for `n` that divides the last dim, from the start of a run of
  // n (runs along a row).
  void skip(int64_t n) {
    if (coord_.empty()) return;
    const size_t last = coord_.size() - 1;
    idx_ += n * f_.layout.strides[last];
    if ((coord_[last] += n) < f_.shape[last]) return;
    idx_ -= coord_[last] * f_.layout.strides[last];
    coord_[last] = 0;
    for (size_t d = last; d-- > 0;) {
      idx_ += f_.layout.strides[d];
      if (++coord_[d] < f_.shape[d]) return;
      idx_ -= coord_[d] * f_.layout.strides[d];
      coord_[d] = 0;
    }
  }
  void next() {
    for (size_t d = coord_.size(); d-- > 0;) {
      idx_ += f_.layout.strides[d];
      if (++coord_[d] < f_.shape[d]) return;
      idx_ -= coord_[d] * f_.layout.strides[d];
      coord_[d] = 0;
    }
  }

 private:
  const Reader::Flat& f_;
  std::vector<int64_t> coord_;
  int64_t idx_;
};

}  // namespace luminal
