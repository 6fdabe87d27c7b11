"""Where a decode step's time goes on the GPU, from the GPU's own kernel records.

luminal's `--profile` synchronises after every node, which inflates small kernels. Here the
model runs as usual (CUDA graphs replayed) inside torch.profiler, whose CUPTI records carry every
kernel's start and end in the process, luminal's included. The script prints, per decode step:
the GPU's busy time, the idle gaps between kernels, and the time per kernel kind (a generated
function's name is lm_<kind>_<hash>), then the kernel sequence of one step's first layers.

    PYTHONPATH=build-py/python python3 benchmarks/cuda_timeline.py --model /tmp/llama-3-8b \
        --prompt 512 --steps 8
"""
import argparse
import collections
import json
import os
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile

import luminal


def kind_of(name):
    if name.startswith("lm_"):
        parts = name.split("_")
        return "_".join(parts[1:-1]) or name
    return name[:60]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--show", type=int, default=48, help="kernels of one step to list in order")
    ap.add_argument("--activations", default="f32", help="f32 (faithful) or bf16")
    args = ap.parse_args()

    m = luminal.LanguageModel.load(args.model, backend="cuda", context=args.context,
                                  activations=args.activations)
    vocab = m.vocab_size
    ids = [(i * 7919 + 13) % vocab for i in range(args.prompt)]
    tok = int(m.step(ids).argmax())
    for _ in range(4):  # the second run records the CUDA graph, later ones replay it
        tok = int(m.step([tok]).argmax())

    walls = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            t0 = time.perf_counter()
            logits = m.step([tok])
            walls.append((time.perf_counter() - t0) * 1e3)
            tok = int(logits.argmax())
    print(f"model.step wall times (ms): {' '.join(f'{w:.3f}' for w in walls)}")
    print(m.kernel_status)
    trace = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(trace)
    events = json.load(open(trace))["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    if not kernels:
        print("no kernel records (CUPTI gave none)")
        return
    # Steps are separated by the host's synchronisation: the largest gaps.
    gaps = [kernels[i]["ts"] - (kernels[i - 1]["ts"] + kernels[i - 1]["dur"]) for i in range(1, len(kernels))]
    cuts = sorted(sorted(range(1, len(kernels)), key=lambda i: gaps[i - 1])[-(args.steps - 1):]) if args.steps > 1 else []
    bounds = [0] + cuts + [len(kernels)]
    steps = [kernels[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
    print(f"{len(kernels)} kernels in {len(steps)} steps")
    for i in range(1, len(steps)):
        print(f"host time between steps {i - 1} and {i}: "
              f"{(steps[i][0]['ts'] - steps[i - 1][-1]['ts'] - steps[i - 1][-1]['dur']) / 1e3:.3f} ms")
    # The driver calls from the end of one step's GPU work to the start of the next (CUPTI's
    # API records): what the host spends between steps, call by call.
    if len(steps) > 2:
        lo = steps[1][-1]["ts"] + steps[1][-1]["dur"]
        hi = steps[2][0]["ts"]
        calls = sorted((e for e in events if e.get("cat") in ("cuda_driver", "cuda_runtime") and e["ts"] + e.get("dur", 0) >= lo
                        and e["ts"] <= hi), key=lambda e: e["ts"])
        print(f"\ndriver calls between steps 1 and 2 (µs after step 1's last kernel, duration µs):")
        for e in calls[:40]:
            print(f"  {e['ts'] - lo:9.1f} {e.get('dur', 0):9.1f}  {e['name']}")
    for i, st in enumerate(steps):
        span = st[-1]["ts"] + st[-1]["dur"] - st[0]["ts"]
        busy = sum(e["dur"] for e in st)
        print(f"step {i}: {len(st)} kernels, first-to-last {span / 1e3:.3f} ms, busy {busy / 1e3:.3f} ms, "
              f"idle between kernels {(span - busy) / 1e3:.3f} ms")
    st = steps[len(steps) // 2]
    # With overlapping launches (programmatic dependent launch) a kernel starts before the one
    # before it ends, so its duration includes waiting; what it adds to the step is how much
    # later it ends than the latest of the (up to four) kernels before it ("adds").
    end = lambda e: e["ts"] + e["dur"]
    adds = [st[0]["dur"]] + [end(e) - max(end(x) for x in st[max(0, j - 4):j]) for j, e in enumerate(st) if j]
    by = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for j, e in enumerate(st):
        k = by[kind_of(e["name"])]
        k[0] += 1
        k[1] += e["dur"]
        if j:
            k[2] += e["ts"] - end(st[j - 1])
            k[3] += adds[j]
    print(f"\nstep {len(steps) // 2} by kind: count, kernel time, idle before, adds to the step (ms)")
    for name, (n, d, g, a) in sorted(by.items(), key=lambda x: -x[1][3]):
        print(f"  {name:40s} {n:5d} {d / 1e3:8.3f} {g / 1e3:8.3f} {a / 1e3:8.3f}")
    print(f"\nthe first {args.show} kernels of that step: kind, µs, idle µs before, µs added, grid")
    for j, e in enumerate(st[: args.show]):
        gap = e["ts"] - end(st[j - 1]) if j else 0.0
        grid = e.get("args", {}).get("grid", "")
        print(f"  {kind_of(e['name']):40s} {e['dur']:8.2f} {gap:7.2f} {adds[j]:7.2f} {grid}")


if __name__ == "__main__":
    main()
