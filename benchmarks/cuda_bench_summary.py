"""One line per luminal benchmark of a device call: TPOT of each iteration, TTFT, the kernel
timeline's step span and the kinds that add the most to it (`bench --timeline`).

Only a few files come back from a device call, and each benchmark's output is a JSON line among
a timeline's tables: this prints what an A/B needs in the call's own output.

    python3 benchmarks/cuda_bench_summary.py $OUT
"""
import glob
import json
import os
import sys


def summary(path):
    for line in open(path, errors="replace"):
        line = line.strip()
        if not (line.startswith("{") and '"tpot_ms"' in line):
            continue
        j = json.loads(line)
        timeline = j.get("timeline", {})
        adds = sorted(timeline.get("adds_us", {}).items(), key=lambda kv: -kv[1])[:7]
        tpot = ", ".join(f"{t:.3f}" for t in j.get("tpot_ms_each", [j["tpot_ms"]]))
        kinds = " ".join(f"{k} {v:.1f}" for k, v in adds)
        span = f" step {timeline['span_us']:.1f} us: {kinds}" if timeline else ""
        return f"{os.path.basename(path)}: TPOT [{tpot}] ms, TTFT {j['ttft_ms']:.2f} ms{span}"
    return f"{os.path.basename(path)}: no result (see the file)"


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/out"
    for f in sorted(glob.glob(os.path.join(out, "bench_*.txt"))):
        print(summary(f))
