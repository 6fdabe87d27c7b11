#!/usr/bin/env python3
"""Compare luminal against llama.cpp (through llama-cpp-python) on one GGUF checkpoint.

1. Logits: each prompt is tokenized by llama.cpp, evaluated by llama.cpp with logits for every
   position, and the same ids are run through `luminal logits`. Per prompt it reports top-1
   agreement (fraction of positions whose argmax matches), the max and mean absolute logit error,
   the max error relative to the std and to the range of llama.cpp's logits, and the mean KL
   divergence KL(llama.cpp || luminal) of the next-token distributions.
2. Tokenization: 20+ strings are tokenized by llama.cpp (add_bos=False, special=True) and by
   `luminal tokenize` (no --special, i.e. no post-processor); mismatches are printed.

llama.cpp does not compute what luminal does: for Q4_1 weights its CPU backend quantizes the
activations to Q8_1 and takes integer dot products, while luminal dequantizes the weights exactly
and computes in f32. Small logit differences (tenths of a logit) and top-1 disagreements on
near-ties are therefore expected; the script reports the top-2 margin at every disagreement.

Usage:
  pip install llama-cpp-python numpy
  python3 scripts/compare_llamacpp.py --model /tmp/smollm2.gguf --luminal build/luminal
  (--json PATH also writes every number as JSON; --f64-reference, which needs `pip install gguf`,
  also runs an independent float64 numpy forward pass of the llama-architecture GGUF on the
  dequantized weights and reports both engines' distance from it, to tell which one differs)
"""
import argparse
import json
import subprocess
import sys

import numpy as np

try:
    import llama_cpp
    from llama_cpp import Llama
except ImportError:  # pragma: no cover
    sys.exit("llama-cpp-python is not installed: pip install llama-cpp-python")

PROMPTS = [
    ("english", "The quick brown fox jumps over the lazy dog. Once upon a time, in a small village by the sea, there lived an old fisherman who"),
    ("chat", "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
             "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"),
    ("python", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n        return n\n"
               "    a, b = 0, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n    return b\n\nprint(fibonacci(10))"),
    ("cpp", "#include <vector>\n\nint sum(const std::vector<int>& v) {\n\tint s = 0;\n\tfor (int x : v) s += x;\n\treturn s;\n}\n"),
    ("multilingual", "Bonjour, comment ça va ? Der Mann läuft schnell. Привет, как дела? 東京は日本の首都です。 مرحبا بالعالم 🌍🚀"),
    ("numbers", "In 2023, the population was 8,045,311,447 and π ≈ 3.14159265358979. 12 + 34 = 46; 0x1F = 31."),
    ("long", " ".join(["Large language models are trained on large amounts of text to predict the next token."] * 8)),
]

TOKENIZE_STRINGS = [
    "", " ", "Hello world", " Hello world", "hello  world   !", "\n\n\n", "\t\tindented", "line1\r\nline2\n",
    "I'm sure you're right, it's what we'll do. DON'T SHOUT'S",
    "12345678901234567890", "3.14159 1,000,000 -42 +7 1e-9", "2024-01-31T12:34:56Z",
    "café naïve résumé Ærøskøbing", "Привет, мир!", "日本語のテキストです。", "中文测试，标点符号。", "مرحبا بالعالم", "हिन्दी पाठ",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦", "combining e\u0301 and \u00e9", "zero\u200bwidth\u00a0nbsp",
    "def f(x):\n    return x ** 2  # square\n", "if (a && b || !c) { x->y[0] = *p++; }", "<html><body class=\"x\">&amp;</body></html>",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n", "<|im_start|><|im_end|><|endoftext|>",
    " <|im_start|> spaced <|im_end|> ", "<|im_start|>a<|im_start|>b", "<im_start> not special <|im_start",
    "<filename>main.py<file_sep><repo_name>x", "    four spaces then text     ", "a\u3000b", "`~!@#$%^&*()_+-=[]{}|;':\",./<>?",
]


def luminal_json(args, argv):
    out = subprocess.run([args.luminal] + argv, check=True, capture_output=True)
    return json.loads(out.stdout)


def luminal_logits(args, ids):
    argv = ["logits", "--model", args.model, "--ids", " ".join(map(str, ids))]
    if args.no_cache:
        argv.append("--no-cache")
    return np.asarray(luminal_json(args, argv)["logits"], dtype=np.float64)


def log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


class F64Llama:
    """A float64 numpy forward pass of a llama-architecture GGUF, weights dequantized by gguf."""

    def __init__(self, path):
        import gguf
        from gguf.quants import dequantize
        r = gguf.GGUFReader(path)
        field = lambda k: r.fields[k].contents()
        assert field("general.architecture") == "llama", "--f64-reference supports llama-architecture GGUFs only"
        self.w = {t.name: dequantize(t.data, t.tensor_type).astype(np.float64) for t in r.tensors}
        self.layers = field("llama.block_count")
        self.heads = field("llama.attention.head_count")
        self.kv_heads = field("llama.attention.head_count_kv")
        self.eps = field("llama.attention.layer_norm_rms_epsilon")
        self.base = field("llama.rope.freq_base")
        self.out = self.w.get("output.weight", self.w["token_embd.weight"])

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w

    def rope(self, x):  # x [T, heads, hd]; GGUF's q/k rows are permuted for adjacent-pair rotation
        hd = x.shape[-1]
        ang = np.arange(x.shape[0])[:, None] * self.base ** (-np.arange(0, hd, 2) / hd)[None]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        out = np.empty_like(x)
        out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
        out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
        return out

    def __call__(self, ids):
        w, T, H, KV = self.w, len(ids), self.heads, self.kv_heads
        x = w["token_embd.weight"][np.asarray(ids)]
        D = x.shape[1]
        hd = D // H
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for layer in range(self.layers):
            p = f"blk.{layer}."
            h = self.rms(x, w[p + "attn_norm.weight"])
            q = self.rope((h @ w[p + "attn_q.weight"].T).reshape(T, H, hd))
            k = np.repeat(self.rope((h @ w[p + "attn_k.weight"].T).reshape(T, KV, hd)), H // KV, 1)
            v = np.repeat((h @ w[p + "attn_v.weight"].T).reshape(T, KV, hd), H // KV, 1)
            a = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            x = x + np.einsum("hts,shd->thd", a, v).reshape(T, D) @ w[p + "attn_output.weight"].T
            h = self.rms(x, w[p + "ffn_norm.weight"])
            g = h @ w[p + "ffn_gate.weight"].T
            x = x + (g / (1 + np.exp(-g)) * (h @ w[p + "ffn_up.weight"].T)) @ w[p + "ffn_down.weight"].T
        return self.rms(x, w["output_norm.weight"]) @ self.out.T


def compare_logits(args, llm):
    f64 = F64Llama(args.model) if args.f64_reference else None
    rows = []
    for name, text in PROMPTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        lum_ids = luminal_json(args, ["tokenize", "--tokenizer", args.model, "--text", text, "--special"])["ids"]
        llm.reset()
        llm.eval(ids)
        ref = np.asarray(llm.scores[: len(ids)], dtype=np.float64)
        got = luminal_logits(args, ids)
        assert got.shape == ref.shape, (got.shape, ref.shape)
        err = np.abs(got - ref)
        ref_top = ref.argmax(-1)
        got_top = got.argmax(-1)
        agree = ref_top == got_top
        lp_ref, lp_got = log_softmax(ref), log_softmax(got)
        kl = (np.exp(lp_ref) * (lp_ref - lp_got)).sum(-1)
        srt = np.sort(ref, axis=-1)
        margins = [float(srt[p, -1] - srt[p, -2]) for p in np.nonzero(~agree)[0]]
        row = {
            "prompt": name,
            "positions": len(ids),
            "same_ids_as_luminal_tokenizer": lum_ids == ids,
            "top1_agreement": float(agree.mean()),
            "max_abs_err": float(err.max()),
            "mean_abs_err": float(err.mean()),
            "max_err_over_std": float(err.max() / ref.std(axis=-1).mean()),
            "max_err_over_range": float(err.max() / (ref.max(-1) - ref.min(-1)).mean()),
            "mean_kl": float(kl.mean()),
            "disagreement_top2_margins": margins,
        }
        if f64 is not None:
            ref64 = f64(ids)
            for engine, logits in (("luminal", got), ("llama_cpp", ref)):
                e = np.abs(logits - ref64)
                row[f"{engine}_vs_f64"] = {"max_abs_err": float(e.max()), "mean_abs_err": float(e.mean()),
                                           "top1_agreement": float((logits.argmax(-1) == ref64.argmax(-1)).mean())}
        rows.append(row)
        print(f"{name:13s} pos={row['positions']:4d} same_ids={str(row['same_ids_as_luminal_tokenizer']):5s} "
              f"top1={row['top1_agreement']:.3f} max_abs={row['max_abs_err']:.4f} mean_abs={row['mean_abs_err']:.4f} "
              f"max/std={row['max_err_over_std']:.4f} max/range={row['max_err_over_range']:.5f} KL={row['mean_kl']:.2e}"
              + (f" margins@disagree={[round(m, 3) for m in margins]}" if margins else ""), flush=True)
        if f64 is not None:
            print("              vs f64 numpy: " + "; ".join(
                f"{e} max_abs={row[e + '_vs_f64']['max_abs_err']:.2e} mean_abs={row[e + '_vs_f64']['mean_abs_err']:.2e} "
                f"top1={row[e + '_vs_f64']['top1_agreement']:.3f}" for e in ("luminal", "llama_cpp")), flush=True)
    n = sum(r["positions"] for r in rows)
    overall = {
        "positions": n,
        "top1_agreement": sum(r["top1_agreement"] * r["positions"] for r in rows) / n,
        "max_abs_err": max(r["max_abs_err"] for r in rows),
        "mean_abs_err": sum(r["mean_abs_err"] * r["positions"] for r in rows) / n,
        "max_err_over_std": max(r["max_err_over_std"] for r in rows),
        "max_err_over_range": max(r["max_err_over_range"] for r in rows),
        "mean_kl": sum(r["mean_kl"] * r["positions"] for r in rows) / n,
    }
    print(f"{'overall':13s} pos={n:4d} top1={overall['top1_agreement']:.3f} max_abs={overall['max_abs_err']:.4f} "
          f"mean_abs={overall['mean_abs_err']:.4f} max/std={overall['max_err_over_std']:.4f} "
          f"max/range={overall['max_err_over_range']:.5f} KL={overall['mean_kl']:.2e}")
    return rows, overall


def compare_tokenization(args, llm):
    mismatches = []
    for s in TOKENIZE_STRINGS:
        ref = llm.tokenize(s.encode("utf-8"), add_bos=False, special=True)
        got = luminal_json(args, ["tokenize", "--tokenizer", args.model, "--text", s])["ids"]
        if got != ref:
            mismatches.append({"text": s, "llama_cpp": ref, "luminal": got})
            print(f"MISMATCH {s!r}\n  llama.cpp: {ref}\n  luminal:   {got}")
    print(f"tokenization: {len(TOKENIZE_STRINGS) - len(mismatches)}/{len(TOKENIZE_STRINGS)} strings identical")
    return mismatches


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="GGUF checkpoint")
    p.add_argument("--luminal", required=True, help="path to the luminal binary")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--plan-cache", dest="no_cache", action="store_false", help="let luminal use its plan cache (default: --no-cache)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--f64-reference", action="store_true",
                   help="also compare both engines with a float64 numpy forward pass (llama architecture; needs gguf)")
    args = p.parse_args()

    print(f"llama_cpp {llama_cpp.__version__}; model {args.model}")
    llm = Llama(model_path=args.model, vocab_only=False, logits_all=True, n_ctx=512, n_threads=args.threads, verbose=False)
    rows, overall = compare_logits(args, llm)
    mismatches = compare_tokenization(args, llm)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"llama_cpp_version": llama_cpp.__version__, "model": args.model, "prompts": rows,
                       "overall": overall, "tokenize_strings": len(TOKENIZE_STRINGS),
                       "tokenize_mismatches": mismatches}, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
