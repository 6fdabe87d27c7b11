#!/usr/bin/env python3
"""Cut the compiler's experts-in-one kernel out of a `cuda_dump_kernels` dump, for moe_layer_bench.cu.

    build/benchmarks/cuda_dump_kernels CONFIG DUMP      # CONFIG: a one-layer Qwen3-30B-A3B config.json
    python3 benchmarks/cuda/cut_experts_kernel.py DUMP /tmp/experts.cu
    nvcc -cubin -arch=sm_90 -O3 -std=c++17 /tmp/experts.cu -o /tmp/experts.cubin
    /tmp/moe 48 21 /tmp/experts.cubin lm_experts

The file is the dump's prelude (its integer typedefs and INT32 limits, written for NVRTC,
replaced by <cstdint>, which nvcc's headers bring in anyway) and the kernel without the norm folded in (the study's k_router writes
the normed x), renamed lm_experts.

With --routing first, the routing group after the router instead (the small group with four
outputs: probabilities, the chosen mask, their sum, the down scales), renamed lm_routing where it
has a count of finished blocks (16 blocks: LUMINAL_CUDA_TOP_RANKS=0 when dumping) and
lm_routing1 where it is one block (top-k ranks in a warp, the default):
ROUTING_CUBIN=/tmp/routing.cubin /tmp/moe 48 21 /tmp/experts.cubin lm_experts runs it in place of
the study's top-k before the first generated experts kernel.
"""
import re
import sys


def main() -> int:
    args = sys.argv[1:]
    routing = bool(args) and args[0] == "--routing"
    if routing:
        args = args[1:]
    if len(args) != 2:
        print(__doc__)
        return 2
    dump, out = args
    lines = open(f"{dump}/kernels.cu").read().split("\n")
    first = next(i for i, l in enumerate(lines) if "__global__" in l)
    prelude = ["#include <cstdint>"] + [l for l in lines[:first] if not re.match(r"(typedef .* u?int\d+_t;|#define INT32_M(AX|IN) )", l)]
    # The experts-in-one kernel's parameters: gate/up (lm_gb) and down (lm_db) weights; the
    # plain form has no norm gain (lm_gain).
    if routing:
        starts = [i for i, l in enumerate(lines) if "__global__" in l and "lm_SmallGroup_" in l and "lm_o3" in l]
    else:
        starts = [i for i, l in enumerate(lines) if "__global__" in l and "lm_gb" in l and "lm_db" in l and "lm_gain" not in l]
    if not starts:
        what = "routing group" if routing else "experts-in-one kernel"
        print(f"no {what} in {dump}/kernels.cu (an MoE config, and the form not refused by its shapes?)")
        return 1
    start = starts[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith('extern "C"')), len(lines))
    name = re.search(r"(lm_\w+?)\(", lines[start]).group(1)
    renamed = ("lm_routing" if "lm_cnt" in lines[start] else "lm_routing1") if routing else "lm_experts"
    kernel = "\n".join(lines[start:end]).replace(name, renamed)
    open(out, "w").write("\n".join(prelude) + "\n" + kernel + "\n")
    print(f"{name} -> {renamed} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
