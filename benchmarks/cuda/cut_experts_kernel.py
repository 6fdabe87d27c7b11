#!/usr/bin/env python3
"""Cut the compiler's experts-in-one kernel out of a `cuda_dump_kernels` dump, for moe_layer_bench.cu.

    build/benchmarks/cuda_dump_kernels CONFIG DUMP      # CONFIG: a one-layer Qwen3-30B-A3B config.json
    python3 benchmarks/cuda/cut_experts_kernel.py DUMP /tmp/experts.cu
    nvcc -cubin -arch=sm_90 -O3 -std=c++17 /tmp/experts.cu -o /tmp/experts.cubin
    /tmp/moe 48 21 /tmp/experts.cubin lm_experts

The file is the dump's prelude (its integer typedefs and INT32 limits, written for NVRTC,
replaced by <cstdint>, which nvcc's headers bring in anyway) and the kernel without the norm folded in (the study's k_router writes
the normed x), renamed lm_experts.
"""
import re
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    dump, out = sys.argv[1], sys.argv[2]
    lines = open(f"{dump}/kernels.cu").read().split("\n")
    first = next(i for i, l in enumerate(lines) if "__global__" in l)
    prelude = ["#include <cstdint>"] + [l for l in lines[:first] if not re.match(r"(typedef .* u?int\d+_t;|#define INT32_M(AX|IN) )", l)]
    # The experts-in-one kernel's parameters: gate/up (lm_gb) and down (lm_db) weights; the
    # plain form has no norm gain (lm_gain).
    starts = [i for i, l in enumerate(lines) if "__global__" in l and "lm_gb" in l and "lm_db" in l and "lm_gain" not in l]
    if not starts:
        print(f"no experts-in-one kernel in {dump}/kernels.cu (an MoE config, and the form not refused by its shapes?)")
        return 1
    start = starts[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith('extern "C"')), len(lines))
    name = re.search(r"(lm_\w+?)\(", lines[start]).group(1)
    kernel = "\n".join(lines[start:end]).replace(name, "lm_experts")
    open(out, "w").write("\n".join(prelude) + "\n" + kernel + "\n")
    print(f"{name} -> lm_experts in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
