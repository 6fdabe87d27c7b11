#pragma once
// Gather on the CPU backend: out[i] = data[idx[i]] (the flat logical index into data's view), 0
// where the index is out of range, as the reference. An embedding lookup is one: its rows are
// runs of consecutive indices, copied whole instead of element by element through readers.
#include <cstdint>
#include <vector>

#include "runtime/reader.h"

namespace luminal::cpu {

// Native where the indices are i32 with a flat layout and the data is contiguous in its buffer
// (element k at one offset plus k) with out of its dtype; false leaves the node to the
// reference. Copies the stored bytes: no conversion, so bit for bit the reference's values.
bool gather(const std::vector<Reader>& in, Buffer& out);

}  // namespace luminal::cpu
