#!/usr/bin/env python3
"""How each kernel's global loads meet their first uses, read from a cubin's SASS.

    build/benchmarks/cuda_dump_kernels CONFIG.json DUMP        # NVRTC's cubin of a decode plan
    python3 benchmarks/cuda/sass_loads.py DUMP/kernels.cubin [REGEX]

One line a kernel (names matching REGEX): its registers, then its instructions in order as
L (a global load), w (the first instruction reading a register that a load still in flight
writes, where the warp waits on memory) and | (a branch or barrier). "LLLLLLLLw" is eight loads
in flight before the first wait; "LwLwLw" loads that go out one round trip at a time. In session
43 this showed ptxas spreading a warp's loads between its products in kernels of few blocks
(docs/lessons.md). Straight-line order only: a loop's body reads once. cuobjdump comes with the
CUDA toolkit or Triton's wheel (CUOBJDUMP to name one).
"""
import glob
import os
import re
import shutil
import subprocess
import sys


def cuobjdump() -> str:
    for c in [os.environ.get("CUOBJDUMP", ""), shutil.which("cuobjdump") or "", "/usr/local/cuda/bin/cuobjdump"]:
        if c and os.path.exists(c):
            return c
    found = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "triton", "backends", "nvidia", "bin", "cuobjdump"))
    found += glob.glob("/root/.pyenv/versions/*/lib/python3*/site-packages/triton/backends/nvidia/bin/cuobjdump")
    if not found:
        sys.exit("no cuobjdump: install the CUDA toolkit's or Triton's, or set CUOBJDUMP")
    return found[0]


def pattern(body: str) -> str:
    pending = set()  # registers a load in flight writes
    out = []
    for text in re.findall(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", body):
        words = text.split()
        op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
        regs = [int(r) for r in re.findall(r"\bR(\d+)\b", text)]
        if op.startswith(("BRA", "BAR", "EXIT", "RET", "CALL", "WARPSYNC")):
            out.append("|")
            continue
        # The first operand is the destination where it is a register; a predicate (ISETP, FSETP)
        # or an address (stores) is not, and then every register read is a source (session 45:
        # `FSETP.NEU.OR P2, PT, R104, RZ, P0` waited on a scale's load unseen).
        first = text.split(None, 2 if words[0].startswith("@") else 1)[-1].split(",")[0].strip()
        sources = regs[1:] if re.fullmatch(r"R\d+", first) else regs
        if any(r in pending for r in sources):
            out.append("w")
            pending.clear()
        if op.startswith("LDG"):
            width = 4 if ".128" in op else 2 if ".64" in op else 1
            if regs:
                pending.update(range(regs[0], regs[0] + width))
            out.append("L")
    return re.sub(r"\|+", "|", "".join(out))


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    cubin, wanted = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "."
    tool = cuobjdump()
    sass = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    usage = subprocess.run([tool, "-res-usage", cubin], capture_output=True, text=True, check=True).stdout
    registers = dict(re.findall(r"Function (\S+):\s*\n\s*REG:(\d+)", usage))
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        name, body = part.split("\n", 1)
        name = name.strip()
        if re.search(wanted, name):
            print(f"{name} REG={registers.get(name, '?')}: {pattern(body)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
