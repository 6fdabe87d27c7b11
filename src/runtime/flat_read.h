#pragma once
// Reading a view's elements in flat (row-major) order as floats, by runs along the last axis of
// its strided layout (Reader::flat) instead of element by element through index programs. The
// CPU kernels and the matmul operands' copies share it.
#include <cstdint>
#include <vector>

#include "runtime/reader.h"

namespace luminal {

// Whether the reader is one strided layer whose every element lies inside its buffer (the
// reference would assert otherwise, so the kernels leave such views to it).
bool strided_in_bounds(const Reader& r, const std::vector<int64_t>& shape);

// Whether the reader has a flat strided layout (Reader::flat) inside its buffer.
bool flat_in_bounds(const Reader& r);

// Whether the reader is stacked (Reader::Stacked) with the layout below its top layer inside
// its buffer.
bool stacked_in_bounds(const Reader& r);

// Elements [z0, z0 + n) of the reader's logical (row-major) order as floats: by runs along
// the last axis of its flat layout when `flat` (flat_in_bounds), else element by element
// through the reader.
void load_floats(const Reader& r, bool flat, int64_t z0, int64_t n, float* dst);

// Every element of a flat layout over `src` (elements of `es` bytes), row-major into `dst`, as
// stored (no conversion): whole runs at a time where the last axis is contiguous.
void copy_flat(const Reader::Flat& f, const uint8_t* src, size_t es, uint8_t* dst);

// A stacked reader's (Reader::Stacked, stacked_in_bounds) elements below its top layer, copied
// row-major into a buffer of its dtype: read through the top layer's offset and strides, they
// give the view (a broadcast copies only the few elements it repeats).
Buffer copy_below_top(const Reader& r);

// Every element of a masked layout, row-major into `dst`: the stored element where the mask lets
// it through, `pad` (one element of `es` bytes) elsewhere. Reads only elements inside the mask.
void copy_masked(const Reader::Masked& m, const uint8_t* src, size_t es, const uint8_t* pad, uint8_t* dst);

}  // namespace luminal
