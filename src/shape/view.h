#pragma once
// A view: how a consumer reads a producer's contiguous buffer. Movement ops only change views.
//
// A view is a stack of strided layers. The top layer maps a logical coordinate to an offset
// plus a sum of coordinate*stride (stride 0 broadcasts, negative strides flip), with an
// optional valid range per dim (the mask: outside it the element reads as pad_value). That
// offset is a flat row-major index into the logical shape of the layer below; the bottom layer
// indexes the buffer. Most views are one layer; a reshape that cannot be expressed on the top
// layer's strides (e.g. merging a sliced dim) pushes a new contiguous layer instead of copying.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "symbolic/expr.h"

namespace luminal {

struct ViewLayer {
  std::vector<Expr> shape;
  std::vector<Expr> strides;
  Expr offset;
  // Per dim valid range [mask_lo, mask_hi); a dim is unmasked when it is [0, shape).
  std::vector<Expr> mask_lo, mask_hi;

  static ViewLayer contiguous(const std::vector<Expr>& shape);
  // Adds an unmasked dim at `axis` (axis == rank appends) / removes the dim at `axis`.
  void insert_dim(size_t axis, const Expr& size, const Expr& stride);
  void erase_dim(size_t axis);
  bool dim_masked(size_t d) const;
  bool masked() const;
  bool operator==(const ViewLayer& o) const;
};

struct IndexExprs {
  Expr index;  // flat element index into the underlying buffer
  Expr valid;  // 1 where the element exists, 0 where it reads as the pad value
};

class View {
 public:
  View() = default;  // a scalar view
  static View contiguous(std::vector<Expr> shape);

  const std::vector<Expr>& shape() const { return layers_.back().shape; }
  size_t rank() const { return shape().size(); }
  Expr numel() const { return product(shape()); }
  float pad_value() const { return pad_value_; }
  const std::vector<ViewLayer>& layers() const { return layers_; }

  // Movement. Axes are already normalised (0 <= axis < rank); callers validate user input and
  // these methods throw Error on a violated precondition.
  View permute(const std::vector<size_t>& perm) const;
  View unsqueeze(size_t axis) const;                 // insert a size-1 dim at axis
  View squeeze(size_t axis) const;                   // remove a size-1 dim
  View expand(size_t axis, const Expr& size) const;  // broadcast a size-1 dim (stride 0)
  View broadcast_to(const std::vector<Expr>& shape) const;  // numpy rules, new dims in front
  View reshape(const std::vector<Expr>& shape) const;
  View slice(size_t axis, const Expr& start, const Expr& end, int64_t step = 1) const;
  // Pads with `value`. All padding of one view must share a value: can_pad_with() tells.
  View pad(size_t axis, const Expr& before, const Expr& after, float value = 0.0f) const;
  bool can_pad_with(float value) const;
  View flip(size_t axis) const;
  // Sliding windows (torch.Tensor.unfold): axis becomes the window count and a new last dim
  // of length `size` walks inside each window.
  View unfold(size_t axis, const Expr& size, int64_t step) const;

  // The view that reads through `this` and then through `outer` (outer indexes this view's
  // logical shape). nullopt when both pad with different values.
  std::optional<View> compose(const View& outer) const;

  // Removes a dim that the top layer broadcasts (stride 0, unmasked): the view then reads the
  // same elements for each remaining coordinate. Throws Error otherwise.
  View drop_broadcast_dim(size_t axis) const;
  // Whether the top layer is the canonical "reduced along axis, broadcast back" view: one layer,
  // no offset or mask, stride 0 (or size 1) at axis and contiguous strides elsewhere.
  bool is_reduced_broadcast(size_t axis) const;

  bool is_contiguous() const;  // reads the whole buffer in order, no mask, no offset
  bool has_mask() const;

  IndexExprs index(const std::vector<Expr>& coords) const;  // for a logical coordinate
  IndexExprs flat_index() const;  // in terms of the logical flat index (Expr::index())

  std::string to_string() const;
  // Rebuilds a view from its layers (as read back from a file); checks their consistency.
  static View from_layers(std::vector<ViewLayer> layers, float pad_value);
  bool operator==(const View& o) const { return pad_value_ == o.pad_value_ && layers_ == o.layers_; }
  uint64_t hash() const;

 private:
  explicit View(std::vector<ViewLayer> layers, float pad) : layers_(std::move(layers)), pad_value_(pad) {}
  ViewLayer& top() { return layers_.back(); }
  View with_new_layer(const std::vector<Expr>& shape) const;

  std::vector<ViewLayer> layers_{ViewLayer{}};
  float pad_value_ = 0.0f;
  friend View reshape_view(const View& v, const std::vector<Expr>& shape);
};

// Row-major strides of a shape.
std::vector<Expr> contiguous_strides(const std::vector<Expr>& shape);

}  // namespace luminal
