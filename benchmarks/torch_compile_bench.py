"""torch.compile(backend="luminal") against eager PyTorch (and optionally inductor) in one run,
on a random-weight Llama-architecture model built with transformers: greedy decode through a
static KV cache, median time per decode step, plus the time to the first compiled step.

    PYTHONPATH=build/python python3 benchmarks/torch_compile_bench.py --preset smollm2-135m --steps 16
    PYTHONPATH=build/python python3 benchmarks/torch_compile_bench.py --preset tiny --inductor
    PYTHONPATH=build-py/python python3 benchmarks/torch_compile_bench.py --preset llama-3-8b --dtype bfloat16 \
        --device cuda --inductor          # on the GPU machine (benchmarks/python_device_run.sh)

Medians of each engine's steps; the engines run one after another on the same weights, each
decoding the same tokens (greedy: their logits must pick the same tokens, which is checked).
"""
import argparse
import statistics
import time

import torch
import transformers

PRESETS = {
    # SmolLM2-135M's shape (Llama architecture).
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, rms_norm_eps=1e-5, tie_word_embeddings=True),
    # Llama-3-8B's shape.
    "llama-3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=500000.0,
                       tie_word_embeddings=False),
    "tiny": dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, rms_norm_eps=1e-5, tie_word_embeddings=False),
}


def decode(model, forward, prompt, steps, cache_len, device):
    """Eager prefill (it initialises the cache), then `steps` greedy steps through `forward`."""
    cache = transformers.StaticCache(config=model.config, max_cache_len=cache_len)
    n = prompt.shape[1]
    logits = model(prompt, past_key_values=cache, cache_position=torch.arange(n, device=device), use_cache=True).logits[:, -1]
    tokens, times = [], []
    for pos in range(n, n + steps):
        tok = logits.argmax(-1, keepdim=True)
        tokens.append(int(tok))  # a host sync: each step's time is complete
        t0 = time.perf_counter()
        logits = forward(tok, past_key_values=cache, cache_position=torch.tensor([pos], device=device), use_cache=True).logits[:, -1]
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return tokens, times


def random_model(preset, dtype, device):
    """A Llama of the preset's shape with random weights (seed 0), in eval mode."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**PRESETS[preset], max_position_embeddings=4096)
    with torch.device(device):
        return transformers.AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype)).eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="smollm2-135m", choices=sorted(PRESETS))
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0, help="torch and luminal threads (0: their defaults)")
    ap.add_argument("--inductor", action="store_true", help="also torch.compile's default backend (mode reduce-overhead on cuda)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    import luminal.torch_backend as tb

    model = random_model(a.preset, a.dtype, a.device)
    config = model.config
    params = sum(p.numel() * p.element_size() for p in model.parameters()) / 1e6
    prompt = torch.randint(0, config.vocab_size, (1, a.prompt), device=a.device)
    cache_len = a.prompt + a.steps + 8
    engines = [("eager", model)]
    options = {"threads": a.threads} if a.threads else {}
    engines.append(("luminal", torch.compile(model, backend="luminal", options=options)))
    if a.inductor:
        engines.append(("inductor", torch.compile(model, mode="reduce-overhead" if a.device == "cuda" else None)))
    print(f"{a.preset} {a.dtype}: {params:.0f} MB of weights, prompt {a.prompt}, {a.steps} decode steps, "
          f"torch threads {torch.get_num_threads()}")
    reference = None
    with torch.no_grad():
        for name, forward in engines:
            tokens, times = decode(model, forward, prompt, a.steps, cache_len, a.device)
            if reference is None:
                reference = tokens
            same = sum(x == y for x, y in zip(tokens, reference))
            steady = times[2:] if len(times) > 4 else times
            print(f"{name:9s} first step {times[0]:9.1f} ms (compile included)   decode median {statistics.median(steady):8.2f} ms/token"
                  f"   tokens equal to eager: {same}/{len(reference)}")
    print(f"luminal compiles: {tb.compile_count}")


if __name__ == "__main__":
    main()
