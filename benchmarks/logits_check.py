#!/usr/bin/env python3
"""luminal's logits against transformers' on the same checkpoint and prompt, in one run.

Issue 6 asks for this on a Llama-3-8B-shaped model with random bf16 weights: the maximum error
against transformers' bf16 logits and the top-1 agreement. Transformers also runs in f32 (the
bf16 weights upcast): luminal computes in f32 activations, so that is its closest truth, and
the bf16 run shows how far PyTorch's own bf16 arithmetic lands from it.

  python3 benchmarks/logits_check.py --model-dir /tmp/llama-3-8b --luminal build-dev/luminal \
      --backend cuda --device cuda --tokens 32

Prints one JSON line: per reference (hf_bf16, hf_f32), the max and mean absolute error over
all positions, the largest logit magnitude (for scale) and the fraction of positions whose
argmax agrees.
"""
import argparse
import json
import subprocess
import sys
import time


def luminal_logits(binary, model_dir, backend, ids, extra):
    cmd = [binary, "logits", "--model", model_dir, "--backend", backend, "--no-cache", "--ids", " ".join(map(str, ids))]
    cmd += extra
    t0 = time.time()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = json.loads(out.stdout)["logits"]
    return rows, time.time() - t0


def hf_logits(model_dir, ids, device, dtype):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    if dtype == "f32":
        model = model.float()
    model = model.to(device).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids], device=device)).logits[0].float().cpu()
    del model
    if device == "cuda":
        torch.cuda.empty_cache()
    return logits


def compare(ours, ref):
    import torch

    ours = torch.tensor(ours, dtype=torch.float32)
    if ours.shape != ref.shape:
        sys.exit(f"shape mismatch: luminal {tuple(ours.shape)} vs transformers {tuple(ref.shape)}")
    diff = (ours - ref).abs()
    agree = (ours.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return {
        "max_abs_error": diff.max().item(),
        "mean_abs_error": diff.mean().item(),
        "max_abs_logit": ref.abs().max().item(),
        "top1_agreement": agree,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--luminal", required=True, help="the luminal binary")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--device", default="cuda", help="where transformers runs")
    ap.add_argument("--tokens", type=int, default=32, help="prompt length (ids cycle through the vocabulary)")
    ap.add_argument("--luminal-args", default="", help="extra arguments for luminal logits")
    a = ap.parse_args()

    with open(f"{a.model_dir}/config.json") as f:
        vocab = json.load(f)["vocab_size"]
    ids = [(i * 7919 + 13) % vocab for i in range(a.tokens)]
    ours, seconds = luminal_logits(a.luminal, a.model_dir, a.backend, ids, a.luminal_args.split())
    result = {"model": a.model_dir, "backend": a.backend, "tokens": a.tokens, "luminal_seconds": round(seconds, 2)}
    for name, dtype in (("hf_bf16", "bf16"), ("hf_f32", "f32")):
        result[name] = compare(ours, hf_logits(a.model_dir, ids, a.device, dtype))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
