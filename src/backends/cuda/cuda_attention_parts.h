#pragma once
// Pieces of generated attention code that the CUDA-core and the tensor-core kernels share
// (cuda_attention_codegen.cpp, cuda_attention_mma_codegen.cpp).
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace luminal::cuda::gen {

// Keys and values that are one strided layer each (a mask may limit the key and batch dims,
// never the head dim), of float types: what the tiled attention kernels need.
struct StridedKv {
  const ViewLayer *k, *v;
  size_t r;
};
std::optional<StridedKv> strided_kv(const Node& n, const std::vector<DType>& dt);

// The condition that element (batch coords lm_bc, key) of a layer passes its mask (dims other
// than `skip`; the key's coordinate is `key_coord` on `key_dim`).
std::string valid_cond(const ViewLayer& l, size_t r, size_t skip, const std::string& key_coord, size_t key_dim);
// The index of element (batch coords lm_bc, key, 0 along `skip`) of a strided layer.
std::string base_index(const ViewLayer& l, size_t r, const std::string& key_coord, size_t key_dim, size_t skip);

// lm_shape_of(d): the batch dims' sizes, for splitting the batch index into coordinates lm_bc.
std::string batch_shape_fn(const ViewLayer& k, size_t r);
// lm_bc: the batch coordinates of batch index lm_b (through lm_shape_of).
std::string batch_coords(size_t r);
// A split attention block's place (lm_R rows, lm_CH keys a slice; lm_seq and lm_keys declared):
// lm_splits and lm_gpb (slices and row groups), its row group lm_grp and slice lm_split, batch
// entry lm_b with its coordinates lm_bc, rows [lm_i0, lm_i0 + lm_live) (lm_row0 overall) and
// keys [lm_k0, lm_k1).
std::string split_block_coords(size_t r);

// A tiled kernel's key and value pointers (lm_K, lm_V) and head-dim strides (lm_ksp, lm_vsj),
// and for each of the `rows` query rows a thread owns (row lm_r0 + `row_of`, in terms of lm_a)
// whether it exists (lm_live) and its mask base (lm_mrow); also lm_ninf and lm_log2e.
std::string tiled_rows_setup(const std::vector<DType>& dt, const StridedKv& kv, const std::string& rows, const std::string& row_of);

// The index of element (row lm_q, 0) of a view whose element (row, p < dk) is that plus p, where
// that holds (every layer's last dim is dk with stride 1, unmasked, and the layers above the
// bottom one keep rows dk apart); nullopt elsewhere. Rows are then found once each, not each
// element through the view's loader.
std::optional<Expr> q_row_index(const View& v, int64_t dk);

// The mask (input 3) at (query row, key): lm_mask_row(row) gives a row's base once, then
// lm_mask_at(base, key) reads one element.
std::string mask_reader(const Node& n, DType mask_dtype, const Expr& keys);

// A tile row's key: lm_key (lm_k0 + `kk`), whether it exists (lm_here), whether the view
// holds it (lm_ok) and the index of its element 0 along the head dim (lm_rb); `in` indents.
std::string tile_key(const ViewLayer& l, size_t r, size_t key_dim, size_t head_dim, const std::string& kk, const std::string& in);
// Element `at` along the head dim of tile_key's key, as a float: zero past the keys, `pad`
// where the view masks the key.
std::string tile_element(const std::string& ptr, DType t, const std::string& at, const std::string& head_stride, const std::string& pad);

}  // namespace luminal::cuda::gen
