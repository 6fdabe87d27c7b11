"""Where a decode step of torch.compile(backend="luminal") spends its time: the whole step, the
backend's call (inputs set, run, outputs returned), the runtime's run alone, and luminal's
per-kernel profile; on CUDA, how many unprofiled runs replayed a recorded CUDA graph. Same models as torch_compile_bench.py.

    PYTHONPATH=build/python python3 benchmarks/torch_backend_profile.py --preset smollm2-135m
    PYTHONPATH=build-py/python python3 benchmarks/torch_backend_profile.py --preset llama-3-8b --dtype bfloat16 --device cuda
"""
import argparse
import statistics
import time

import torch
import transformers

from torch_compile_bench import PRESETS, random_model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="smollm2-135m", choices=sorted(PRESETS))
    ap.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--top", type=int, default=15, help="kernel kinds to list")
    a = ap.parse_args()
    import luminal.torch_backend as tb

    model = random_model(a.preset, a.dtype, a.device)
    config = model.config
    compiled = torch.compile(model, backend="luminal")
    prompt = torch.randint(0, config.vocab_size, (1, a.prompt), device=a.device)
    cache = transformers.StaticCache(config=model.config, max_cache_len=a.prompt + 2 * a.steps + 8)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    # The backend's call and the runtime's run, timed from inside.
    call_ms, run_ms = [], []
    inner_call = tb.LuminalGraph.__call__

    class TimedRun:  # the compiled graph, its run() timed
        def __init__(self, compiled):
            self._compiled = compiled

        def __getattr__(self, name):
            return getattr(self._compiled, name)

        def run(self):
            sync()
            t0 = time.perf_counter()
            self._compiled.run()
            sync()
            run_ms.append((time.perf_counter() - t0) * 1e3)

    def timed_call(self, *args):
        t0 = time.perf_counter()
        real = self.compiled
        self.compiled = TimedRun(real)
        try:
            return inner_call(self, *args)
        finally:
            self.compiled = real
            call_ms.append((time.perf_counter() - t0) * 1e3)

    with torch.no_grad():
        n = a.prompt
        logits = model(prompt, past_key_values=cache, cache_position=torch.arange(n, device=a.device), use_cache=True).logits[:, -1]
        step_ms = []
        for i in range(2 * a.steps):
            if i == a.steps:  # the second half: luminal's kernel profile (runs launch by launch)
                if a.device == "cuda":
                    graph_stats = tb.last_graph.compiled.cuda_graph_stats()
                tb.last_graph.compiled.set_profiling(True)
                tb.LuminalGraph.__call__ = timed_call
            tok = logits.argmax(-1, keepdim=True)
            int(tok)
            t0 = time.perf_counter()
            logits = compiled(tok, past_key_values=cache, cache_position=torch.tensor([n + i], device=a.device),
                              use_cache=True).logits[:, -1]
            sync()
            step_ms.append((time.perf_counter() - t0) * 1e3)
    tb.LuminalGraph.__call__ = inner_call
    plain = statistics.median(step_ms[2:a.steps])
    print(f"{a.preset} {a.dtype} on {a.device}: decode step median {plain:.2f} ms (unprofiled)")
    if a.device == "cuda":
        print(f"  unprofiled runs: {graph_stats}")
    print(f"  profiled steps: step {statistics.median(step_ms[a.steps:]):.2f} ms, backend call {statistics.median(call_ms):.2f} ms, "
          f"runtime run {statistics.median(run_ms):.2f} ms (kernel timing adds its own cost)")
    prof = tb.last_graph.compiled.profile()
    total = sum(ms for _, _, ms in prof)
    print(f"  kernels: {total / a.steps:.2f} ms per step in {sum(c for _, c, _ in prof) // a.steps} launches")
    for label, calls, ms in prof[:a.top]:
        print(f"    {ms / a.steps:8.3f} ms  {calls // a.steps:5d}x  {label}")


if __name__ == "__main__":
    main()
