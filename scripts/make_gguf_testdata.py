#!/usr/bin/env python3
"""Writes tests/data/gguf/: a small GGUF file with metadata of every value type and one tensor of
every type luminal dequantizes, plus the `gguf` package's own dequantization of each tensor as
independent truth for tests/loader/dequant_test.cpp.

Needs `pip install gguf numpy` (the C++ tests themselves need no Python). Deterministic: rerunning
it rewrites identical files.

Outputs (tests/data/gguf/):
  all_types.gguf        metadata of every value type + tensors "t.<type>" (see TENSORS below)
  aligned64.gguf        general.alignment = 64 and two small f32 tensors
  ref/t.<type>.f32      gguf.quants.dequantize(...) of each tensor, raw little-endian float32
"""
import argparse
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "gguf"

# Types gguf can quantize: real quantizer output. K-quants (gguf can only dequantize them): random
# bytes of the block layout, with sane f16 scales written at these byte offsets in each block.
QUANTIZED = [Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]
K_QUANT_F16_FIELDS = {  # type: offsets of the f16 super-block scales (d, dmin) within a block
    Q.Q2_K: [80, 82],
    Q.Q3_K: [108],
    Q.Q4_K: [0, 2],
    Q.Q5_K: [0, 2],
    Q.Q6_K: [208],
}


def tensor_name(qtype):
    return "t." + qtype.name.lower()


def add_metadata(w):
    # The C++ test (gguf_test.cpp) expects exactly these values.
    w.add_string("general.name", "luminal gguf test")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_uint64("test.u64", 2**40 + 3)
    w.add_uint64("test.u64_huge", 2**63 + 5)  # does not fit in int64
    w.add_int64("test.i64", -(2**62) - 7)
    w.add_float32("test.f32", 3.14159)
    w.add_float64("test.f64", 2.718281828459045)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", "h\u00e9llo w\u00f6rld \u2713")
    w.add_key_value("test.empty_string", "", V.STRING)  # add_string() would skip an empty value
    w.add_key_value("test.array_str", ["a", "bc", "", "\u00fcn\u00ef"], V.ARRAY, sub_type=V.STRING)
    w.add_key_value("test.array_i32", [1, -2, 2147483647], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("test.array_u8", [0, 7, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.array_u64", [0, 2**40], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("test.array_i64", [-(2**50), 5], V.ARRAY, sub_type=V.INT64)
    w.add_key_value("test.array_f32", [0.5, -1.25, 1e-3], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("test.array_f64", [1e300, -0.1], V.ARRAY, sub_type=V.FLOAT64)
    w.add_key_value("test.array_bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)


def f16_specials():
    # zeros, smallest/largest subnormal, smallest normal, max, infinities, a quiet NaN
    bits = [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00]
    return np.array(bits, dtype=np.uint16).view(np.float16)


def make_tensors(rng):
    """Returns [(name, stored array, ggml type or None, reference f32 array)]."""
    out = []
    f32 = rng.standard_normal((2, 3, 8)).astype(np.float32)  # 3-D: checks the shape order
    out.append((tensor_name(Q.F32), f32, None, f32))

    f16 = rng.standard_normal((4, 64)).astype(np.float16)
    f16.reshape(-1)[: len(f16_specials())] = f16_specials()
    out.append((tensor_name(Q.F16), f16, None, gguf.quants.dequantize(f16.view(np.uint8), Q.F16)))

    for qtype in QUANTIZED:
        data = (rng.standard_normal((4, 256)) * rng.uniform(0.01, 2.0, size=(4, 1))).astype(np.float32)
        raw = gguf.quants.quantize(data, qtype)
        out.append((tensor_name(qtype), raw, qtype, gguf.quants.dequantize(raw, qtype)))

    for qtype, f16_offsets in K_QUANT_F16_FIELDS.items():
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        rows, n_blocks = 3, 2
        raw = rng.integers(0, 256, size=(rows, n_blocks, type_size), dtype=np.uint8)
        for off in f16_offsets:
            scale = rng.uniform(-0.05, 0.05, size=(rows, n_blocks)).astype(np.float16)
            raw[:, :, off:off + 2] = scale.view(np.uint8).reshape(rows, n_blocks, 2)
        raw = raw.reshape(rows, n_blocks * type_size)
        out.append((tensor_name(qtype), raw, qtype, gguf.quants.dequantize(raw, qtype)))
    return out


def write_all_types(rng):
    path = OUT / "all_types.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    add_metadata(w)
    tensors = make_tensors(rng)
    for name, stored, qtype, _ in tensors:
        w.add_tensor(name, stored, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    ref_dir = OUT / "ref"
    ref_dir.mkdir(exist_ok=True)
    for name, _, qtype, ref in tensors:
        ref = np.ascontiguousarray(ref, dtype="<f4")
        (ref_dir / (name + ".f32")).write_bytes(ref.tobytes())
        print(f"{name:10s} {str(qtype.name if qtype else 'plain'):6s} -> {ref.size} floats")


def write_aligned64(rng):
    path = OUT / "aligned64.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_custom_alignment(64)
    w.add_tensor("a", np.arange(5, dtype=np.float32))  # 20 bytes: the next tensor needs padding
    w.add_tensor("b", np.arange(6, dtype=np.float32).reshape(2, 3) * -1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20240607)
    write_all_types(rng)
    write_aligned64(rng)


if __name__ == "__main__":
    main()
