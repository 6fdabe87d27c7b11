#pragma once
// Gather on the CPU backend: out[i] = data[idx[i]] (the flat logical index into data's view), 0
// where the index is out of range, as the reference. An embedding lookup is one: its rows are
// runs of consecutive indices, copied whole instead of element by element through readers.
#include <cstdint>
#include <vector>

#include "runtime/reader.h"

namespace luminal::cpu {

class PackedWeights;

// Native where the indices are i32 with a flat layout and the data is contiguous in its buffer
// (element k at one offset plus k) with out of its dtype; false leaves the node to the
// reference. Copies the stored bytes: no conversion, so bit for bit the reference's values.
// Data that `packed` holds as panels (a tied embedding, packed as the head's W) is read from them.
bool gather(const std::vector<Reader>& in, Buffer& out, const PackedWeights* packed = nullptr);

}  // namespace luminal::cpu
