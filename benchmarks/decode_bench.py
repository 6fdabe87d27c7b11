#!/usr/bin/env python3
"""Side-by-side CPU decode benchmark: luminal vs PyTorch (transformers) vs llama.cpp, same weights.

  python3 benchmarks/decode_bench.py --model-dir /work/models/qwen3-0.6b-random \\
      --gguf /work/models/qwen3-0.6b-random-bf16.gguf --luminal build/luminal --threads 2

The Hugging Face folder (bf16 safetensors) feeds luminal and PyTorch; the GGUF (bf16, converted
from the same safetensors by llama.cpp's convert_hf_to_gguf.py, see scripts/make_random_model.py)
feeds llama.cpp. Every engine runs in its own subprocess, one after another, so peak RSS is its
own and engines do not compete for cores. Each engine does --iters iterations of: reset, prefill
the same prompt (ids (i*7919+13) % vocab, which is what `luminal bench` uses), then greedy-decode
--new-tokens tokens. Per engine:

  ttft_ms   prefill forward + picking the first token (median over iterations)
  tpot_ms   median over the decode steps of one forward of one token with the KV cache
            (new_tokens - 1 steps per iteration; median over iterations)
  tok/s     1000 / tpot_ms
  rss       peak resident set of the engine's process (ru_maxrss from wait4)

luminal:   `luminal bench --threads N --context P+N+16` (its own JSON).
With --rounds R the whole sequence of engines runs R times, interleaved, and each row reports
the median round (the rounds themselves go to the JSON): on a shared machine the noise moves every
engine by 10-20% from one minute to the next, so one round per engine compares moments, not engines.

PyTorch:   AutoModelForCausalLM in bf16 and in float32 (separate processes); the faster dtype (by
           tpot) is reported, the other is printed too. torch.set_num_threads(threads),
           inference_mode, DynamicCache via past_key_values.
llama.cpp: llama_cpp.Llama(n_threads=threads, n_threads_batch=threads, n_ctx=P+N+16, n_batch=512);
           prompt with one llm.eval(prompt), then llm.eval([tok]) per token.

The bandwidth floor is bytes read per decoded token (all weights: every matrix once, the tied
embedding once as the LM head) / read bandwidth: measured at the start of every round and once at
the end with `gemv_bench --bandwidth-only` (the threads summing a 1 GiB buffer; beside --luminal,
or --gemv-bench), the median taken, since this machine's bandwidth moves between 10 and 57 GB/s
from hour to hour; --bandwidth-gbs sets it instead. A one-thread numpy sum is printed too.

Each engine can need a different Python: --torch-python (needs torch + transformers) and
--llamacpp-python (needs llama_cpp + numpy); by default the first of this Python, python3 and
/work/venv-fix/bin/python that imports them.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def prompt_ids(n, vocab):
    return [(i * 7919 + 13) % vocab for i in range(n)]


def emit(d):
    print("RESULT " + json.dumps(d), flush=True)


# ----------------------------------------------------------------------------- workers


def worker_torch(a):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(a.threads)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[a.dtype]
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=dtype)
    model.eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    vocab = model.config.vocab_size
    ids = torch.tensor([prompt_ids(a.prompt_tokens, vocab)], dtype=torch.long)
    ttfts, tpots, means = [], [], []
    with torch.inference_mode():
        for _ in range(a.iters):
            t0 = time.perf_counter()
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
            ttfts.append((time.perf_counter() - t0) * 1e3)
            past = out.past_key_values
            steps = []
            for _ in range(a.new_tokens - 1):
                s0 = time.perf_counter()
                out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                steps.append((time.perf_counter() - s0) * 1e3)
                past = out.past_key_values
                nxt = out.logits[:, -1, :].argmax(-1, keepdim=True)
            tpots.append(statistics.median(steps) if steps else 0.0)
            means.append(statistics.mean(steps) if steps else 0.0)
            del past, out
    emit(dict(engine=f"pytorch-{a.dtype}", load_ms=load_ms, ttft_ms=statistics.median(ttfts),
              tpot_ms=statistics.median(tpots), tpot_mean_ms=statistics.median(means),
              ttft_all_ms=ttfts, tpot_all_ms=tpots,
              version=f"torch {torch.__version__}, transformers {__import__('transformers').__version__}"))


def worker_llamacpp(a):
    import numpy as np
    import llama_cpp
    from llama_cpp import Llama

    n_ctx = a.prompt_tokens + a.new_tokens + 16
    t0 = time.perf_counter()
    llm = Llama(model_path=a.gguf, n_threads=a.threads, n_threads_batch=a.threads, n_ctx=n_ctx,
                n_batch=512, n_gpu_layers=0, verbose=False)
    load_ms = (time.perf_counter() - t0) * 1e3
    vocab = llm.n_vocab()
    ids = prompt_ids(a.prompt_tokens, vocab)
    ttfts, tpots, means = [], [], []
    for _ in range(a.iters):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(ids)
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        ttfts.append((time.perf_counter() - t0) * 1e3)
        steps = []
        for _ in range(a.new_tokens - 1):
            s0 = time.perf_counter()
            llm.eval([nxt])
            steps.append((time.perf_counter() - s0) * 1e3)
            nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        tpots.append(statistics.median(steps) if steps else 0.0)
        means.append(statistics.mean(steps) if steps else 0.0)
    emit(dict(engine="llama.cpp", load_ms=load_ms, ttft_ms=statistics.median(ttfts),
              tpot_ms=statistics.median(tpots), tpot_mean_ms=statistics.median(means),
              ttft_all_ms=ttfts, tpot_all_ms=tpots, version=f"llama-cpp-python {llama_cpp.__version__}"))


def measure_bandwidth_numpy():
    import numpy as np

    x = np.ones(1 << 28, dtype=np.float32)  # 1 GiB
    x.sum()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.nbytes / best / 1e9


# ----------------------------------------------------------------------------- driver


def merge_rounds(results):
    """One row per engine: the median round's TTFT and TPOT (each its own median), the largest
    peak RSS, the load before the first round and after the last; every round's pair is kept."""
    by = {}
    for r in results:
        by.setdefault(r["engine"], []).append(r)
    merged = []
    for name, rs in by.items():
        ok = [r for r in rs if "tpot_ms" in r]
        if len(rs) == 1 or not ok:
            merged.append(rs[0])
            continue
        m = dict(ok[0])
        m["ttft_ms"] = statistics.median(r["ttft_ms"] for r in ok)
        m["tpot_ms"] = statistics.median(r["tpot_ms"] for r in ok)
        m["peak_rss_bytes_wait4"] = max(r["peak_rss_bytes_wait4"] for r in ok)
        m["load1_before"], m["load1_after"] = ok[0].get("load1_before", 0), ok[-1].get("load1_after", 0)
        m["rounds"] = [[r["ttft_ms"], r["tpot_ms"]] for r in ok]
        m["failed_rounds"] = len(rs) - len(ok)
        merged.append(m)
    return merged


def run_child_rusage(cmd, env=None, timeout=None):
    """Runs cmd; returns (rc, stdout, stderr, peak RSS bytes of that process alone, wall s).
    Reaps with os.wait4 to get the child's own ru_maxrss."""
    import threading

    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    bufs = {"out": [], "err": []}
    ts = [threading.Thread(target=lambda s, k: bufs[k].append(s.read()), args=(p.stdout, "out")),
          threading.Thread(target=lambda s, k: bufs[k].append(s.read()), args=(p.stderr, "err"))]
    for t in ts:
        t.start()
    killed = False
    if timeout:
        timer = threading.Timer(timeout, lambda: p.kill())
        timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    if timeout:
        killed = not timer.is_alive()
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)
    for t in ts:
        t.join()
    err = "".join(bufs["err"])
    if killed:
        err += f"\n(killed after {timeout} s)"
    run_child_rusage.last_cpu_s = ru.ru_utime + ru.ru_stime
    return p.returncode, "".join(bufs["out"]), err, ru.ru_maxrss * 1024, time.time() - t0


def find_python(explicit, modules):
    if explicit:
        return explicit
    cands = [sys.executable, "python3", "/work/venv-fix/bin/python"]
    for c in cands:
        try:
            r = subprocess.run([c, "-c", "import " + ", ".join(modules)], capture_output=True, timeout=120)
            if r.returncode == 0:
                return c
        except (OSError, subprocess.TimeoutExpired):
            pass
    return None


def parse_result(out):
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return None


def weight_bytes_safetensors(model_dir):
    """Bytes of all tensors in the folder's safetensors (from their headers)."""
    import struct

    total = 0
    for f in sorted(Path(model_dir).glob("*.safetensors")):
        with open(f, "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            hdr = json.loads(fh.read(n))
        for k, v in hdr.items():
            if k != "__metadata__":
                total += v["data_offsets"][1] - v["data_offsets"][0]
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True, help="Hugging Face folder (config.json + safetensors)")
    ap.add_argument("--gguf", help="GGUF of the same weights, for llama.cpp")
    ap.add_argument("--luminal", help="path of the luminal binary")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--engines", default="luminal,pytorch,llama.cpp",
                    help="comma list to run (default luminal,pytorch,llama.cpp); luminal-bf16 adds luminal with "
                         "--activations bf16 (prefill's products on bf16 activations, where the CPU has AMX or, on AMD, AVX-512 BF16), "
                         "luminal-hugepages luminal with --huge-pages (weights copied into 2 MB pages at load), luminal-rows luminal "
                         "with --no-packed-weights (bf16 weights read in place from the mapped file, not packed at load)")
    ap.add_argument("--torch-dtypes", default="bf16,fp32", help="PyTorch dtypes to try; the fastest is reported")
    ap.add_argument("--luminal-args", default="", help="extra arguments for `luminal bench` (e.g. --no-cache)")
    ap.add_argument("--torch-python", help="Python with torch + transformers")
    ap.add_argument("--llamacpp-python", help="Python with llama_cpp + numpy")
    ap.add_argument("--bandwidth-gbs", type=float,
                    help="read bandwidth for the floor (GB/s); default: measured in every round with gemv_bench "
                         "--bandwidth-only (the median of the rounds), else 57")
    ap.add_argument("--gemv-bench", help="gemv_bench binary for the bandwidth (default: benchmarks/gemv_bench beside --luminal)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the whole engine sequence this many times, interleaved; rows report the median "
                         "round (on a shared machine, noise moves every engine by 10-20%% from minute to minute)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per engine run")
    ap.add_argument("--json-out", help="also write all results to this file")
    ap.add_argument("--wait-load", type=float, default=0,
                    help="before each engine, wait until the 1-minute load average is below this (0: don't wait)")
    ap.add_argument("--wait-max", type=float, default=900, help="longest wait for --wait-load, seconds")
    # internal
    ap.add_argument("--worker", choices=["torch", "llamacpp", "bandwidth"], help=argparse.SUPPRESS)
    ap.add_argument("--dtype", default="bf16", help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.worker == "torch":
        return worker_torch(a)
    if a.worker == "llamacpp":
        return worker_llamacpp(a)
    if a.worker == "bandwidth":
        return emit({"numpy_sum_gbs": measure_bandwidth_numpy()})

    engines = [e.strip() for e in a.engines.split(",") if e.strip()]
    unknown = [e for e in engines if e not in ("luminal", "luminal-bf16", "luminal-hugepages", "luminal-rows", "pytorch", "llama.cpp")]
    if unknown:
        ap.error(f"--engines: unknown {', '.join(unknown)} (known: luminal, luminal-bf16, luminal-hugepages, luminal-rows, pytorch, llama.cpp)")
    bad_dtypes = [d for d in a.torch_dtypes.split(",") if d.strip() not in ("bf16", "fp32")]
    if bad_dtypes:
        ap.error(f"--torch-dtypes: unknown {', '.join(bad_dtypes)} (known: bf16, fp32)")
    here = os.path.abspath(__file__)
    common = ["--model-dir", a.model_dir, "--threads", str(a.threads), "--prompt-tokens", str(a.prompt_tokens),
              "--new-tokens", str(a.new_tokens), "--iters", str(a.iters)]
    n_ctx = a.prompt_tokens + a.new_tokens + 16
    cfg = json.loads((Path(a.model_dir) / "config.json").read_text())
    wbytes = weight_bytes_safetensors(a.model_dir)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(a.threads))

    print(f"model {a.model_dir} ({cfg.get('architectures', ['?'])[0]}), weights {wbytes / 1e9:.3f} GB; "
          f"threads {a.threads}, prompt {a.prompt_tokens}, new {a.new_tokens}, iters {a.iters}", flush=True)
    results = []

    def quiet():
        """Waits (per --wait-load) for other work on the machine to calm down; returns the load."""
        t0 = time.time()
        while a.wait_load > 0 and os.getloadavg()[0] >= a.wait_load and time.time() - t0 < a.wait_max:
            time.sleep(10)
        return os.getloadavg()[0]

    def run_engine(name, cmd, extra_env=None):
        load0 = quiet()
        print("+ " + " ".join(f"{k}={v}" for k, v in (extra_env or {}).items()) + (" " if extra_env else "") + " ".join(cmd), flush=True)
        rc, out, err, rss, wall = run_child_rusage(cmd, env={**env, **(extra_env or {})}, timeout=a.timeout)
        extra = {"cpu_s": run_child_rusage.last_cpu_s, "load1_before": load0, "load1_after": os.getloadavg()[0]}
        return record(name, rc, out, err, rss, wall, extra)

    def record(name, rc, out, err, rss, wall, extra=None):
        r = parse_result(out) if not name.startswith("luminal") else None
        if name.startswith("luminal"):
            try:
                r = json.loads(out.strip().splitlines()[-1])
                r["engine"] = name
            except (ValueError, IndexError):
                r = None
        if rc != 0 or r is None:
            print(f"  {name}: FAILED (rc {rc}) after {wall:.0f} s\n{err[-3000:]}", flush=True)
            r = {"engine": name, "error": (err or out)[-500:], "rc": rc}
        r["peak_rss_bytes_wait4"] = rss
        r["wall_s"] = wall
        if extra:
            r.update(extra)
        results.append(r)
        if "tpot_ms" in r:
            print(f"  {r['engine']}: ttft {r['ttft_ms']:.1f} ms, tpot {r['tpot_ms']:.1f} ms, "
                  f"rss {rss / 1e9:.2f} GB, {wall:.0f} s wall, {r.get('cpu_s', 0):.0f} s CPU, "
                  f"load {r.get('load1_before', 0):.1f} -> {r.get('load1_after', 0):.1f}", flush=True)
        return r

    if any(e.startswith("luminal") for e in engines) and not a.luminal:
        sys.exit("--luminal PATH is needed for the luminal engine (or leave it out of --engines)")
    gemv_bench = a.gemv_bench or (str(Path(a.luminal).parent / "benchmarks" / "gemv_bench") if a.luminal else None)
    bandwidths = []  # GB/s, one a round: the machine's bandwidth moves from minute to minute

    def measure_bandwidth():
        if not gemv_bench or not os.path.exists(gemv_bench):
            return
        rc, out, err, _, _ = run_child_rusage([gemv_bench, "--threads", str(a.threads), "--reps", "2", "--bandwidth-only"], env=env)
        try:
            bandwidths.append(float(out.split(":")[-1].split()[0]))
            print(f"  read bandwidth ({a.threads} threads, sum of 1 GiB): {bandwidths[-1]:.1f} GB/s", flush=True)
        except (ValueError, IndexError):
            print(f"  gemv_bench --bandwidth-only failed (rc {rc}): {err[-300:]}", flush=True)

    for rnd in range(a.rounds):
        if a.rounds > 1:
            print(f"round {rnd + 1} of {a.rounds}", flush=True)
        measure_bandwidth()
        luminal_cmd = [a.luminal, "bench", "--model", a.model_dir, "--threads", str(a.threads), "--context", str(n_ctx),
                       "--prompt-tokens", str(a.prompt_tokens), "--new-tokens", str(a.new_tokens), "--iters", str(a.iters)]
        luminal_cmd += a.luminal_args.split()
        if "luminal" in engines:
            run_engine("luminal", luminal_cmd)
        if "luminal-bf16" in engines:  # prefill's products on bf16 activations, as PyTorch's bf16 path
            run_engine("luminal-bf16", luminal_cmd + ["--activations", "bf16"])
        if "luminal-hugepages" in engines:  # the same, its weights read from 2 MB pages (a slower load)
            run_engine("luminal-hugepages", luminal_cmd + ["--huge-pages"])
        if "luminal-rows" in engines:  # weights read in place from the mapped file, not packed at load
            run_engine("luminal-rows", luminal_cmd + ["--no-packed-weights"])

        if "pytorch" in engines:
            py = find_python(a.torch_python, ["torch", "transformers"])
            if not py:
                print("  pytorch: no Python with torch + transformers (--torch-python)", flush=True)
            else:
                for dt in [d.strip() for d in a.torch_dtypes.split(",") if d.strip()]:
                    cmd = [py, here, "--worker", "torch", "--dtype", dt] + common
                    run_engine(f"pytorch-{dt}", cmd)

        if "llama.cpp" in engines:
            py = find_python(a.llamacpp_python, ["llama_cpp", "numpy"])
            if not a.gguf:
                print("  llama.cpp: skipped (no --gguf)", flush=True)
            elif not py:
                print("  llama.cpp: no Python with llama_cpp (--llamacpp-python)", flush=True)
            else:
                cmd = [py, here, "--worker", "llamacpp", "--gguf", a.gguf] + common
                run_engine("llama.cpp", cmd)

    results[:] = merge_rounds(results)
    torch_rows = [r for r in results if r["engine"].startswith("pytorch-") and "tpot_ms" in r]
    if torch_rows:
        min(torch_rows, key=lambda r: r["tpot_ms"])["best_of_dtypes"] = True

    # Bandwidth: the given figure, else the median of the rounds' measurements; plus a one-thread
    # numpy sum for reference.
    measure_bandwidth()
    rc, out, err, _, _ = run_child_rusage([sys.executable, here, "--worker", "bandwidth", "--model-dir", a.model_dir])
    bw = parse_result(out) or {}
    numpy_gbs = bw.get("numpy_sum_gbs")
    bandwidth_source = "given"
    if a.bandwidth_gbs is None:
        a.bandwidth_gbs = statistics.median(bandwidths) if bandwidths else 57.0
        bandwidth_source = (f"measured in this run, median of {', '.join(f'{b:.1f}' for b in bandwidths)}" if bandwidths
                            else "the project machine's figure (no gemv_bench to measure it)")
    floor_ms = wbytes / (a.bandwidth_gbs * 1e9) * 1e3

    # ------------------------------------------------------------------ table
    lum = next((r for r in results if r["engine"] == "luminal" and "tpot_ms" in r), None)
    print()
    print(f"## {cfg.get('architectures', ['?'])[0]}  {Path(a.model_dir).name}  threads={a.threads} "
          f"prompt={a.prompt_tokens} new={a.new_tokens} iters={a.iters}")
    print(f"weights read per decoded token: {wbytes / 1e9:.3f} GB; floor at {a.bandwidth_gbs:.1f} GB/s ({bandwidth_source}): "
          f"{floor_ms:.1f} ms/token = {1000 / floor_ms:.1f} tok/s"
          + (f" (one-thread numpy sum of 1 GiB here: {numpy_gbs:.1f} GB/s -> {wbytes / numpy_gbs / 1e6:.1f} ms/token)"
             if numpy_gbs else ""))
    hdr = (f"| {'engine':<16} | {'ttft ms':>9} | {'tpot ms':>8} | {'tok/s':>6} | {'peak RSS GB':>11} | {'tpot/floor':>10} "
           f"| {'luminal ttft / this':>19} | {'luminal tpot / this':>19} | {'load1':>9} |")
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for r in results:
        if "tpot_ms" not in r:
            print(f"| {r['engine']:<16} | {'failed':>9} | {'':>8} | {'':>6} | {'':>11} | {'':>10} | {'':>19} | {'':>19} | {'':>9} |")
            continue
        name = r["engine"] + (" *" if r.get("best_of_dtypes") else "")
        tps = 1000 / r["tpot_ms"] if r["tpot_ms"] > 0 else 0
        rss = r["peak_rss_bytes_wait4"] / 1e9
        rt = f"{lum['ttft_ms'] / r['ttft_ms']:.2f}x" if lum else "-"
        rp = f"{lum['tpot_ms'] / r['tpot_ms']:.2f}x" if lum else "-"
        load = f"{r.get('load1_before', 0):.1f}->{r.get('load1_after', 0):.1f}"
        print(f"| {name:<16} | {r['ttft_ms']:>9.1f} | {r['tpot_ms']:>8.2f} | {tps:>6.2f} | {rss:>11.2f} | "
              f"{r['tpot_ms'] / floor_ms:>9.2f}x | {rt:>19} | {rp:>19} | {load:>9} |")
    for r in results:
        if r.get("rounds"):
            print(f"  {r['engine']} rounds (ttft / tpot ms): "
                  + ", ".join(f"{t:.0f} / {p:.1f}" for t, p in r["rounds"]))
    print("(* the faster PyTorch dtype; ratios > 1 mean luminal is slower; load1 = 1-minute load average "
          f"before -> after the engine's run, on {os.cpu_count()} CPUs: above ~{a.threads} other work was competing)")
    print()
    summary = []
    for r in results:
        j = {k: r.get(k) for k in ("engine", "ttft_ms", "tpot_ms", "load_ms", "compile_ms", "tpot_mean_ms", "version",
                                   "best_of_dtypes", "cpu_s", "load1_before", "load1_after", "error", "rounds")
             if r.get(k) is not None}
        if "tpot_ms" in r:
            j["tokens_per_s"] = 1000 / r["tpot_ms"] if r["tpot_ms"] > 0 else 0
            if lum:
                j["luminal_ttft_ratio"] = lum["ttft_ms"] / r["ttft_ms"]
                j["luminal_tpot_ratio"] = lum["tpot_ms"] / r["tpot_ms"]
        j["peak_rss_bytes"] = r["peak_rss_bytes_wait4"]
        j.update(model=a.model_dir, threads=a.threads, prompt_tokens=a.prompt_tokens, new_tokens=a.new_tokens,
                 iters=a.iters, weight_bytes=wbytes, floor_ms=floor_ms, bandwidth_gbs=a.bandwidth_gbs, bandwidths_measured=bandwidths)
        if numpy_gbs:
            j["numpy_sum_gbs"] = numpy_gbs
        summary.append(j)
        print(json.dumps(j))
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"results": results, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
