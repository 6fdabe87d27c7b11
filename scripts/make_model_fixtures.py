#!/usr/bin/env python3
"""Makes the extra Hugging Face model fixtures in tests/data/models with the real transformers.

Needs: pip install torch transformers==5.17.0 safetensors numpy   (CPU is enough)

Each folder holds config.json, the weights (model.safetensors, or shards plus
model.safetensors.index.json) and reference.json, in the format of the six original
fixtures (see /work/shared/fixtures/README.md):

  mixtral-tiny           MixtralForCausalLM, 4 experts top-2, new (fused) expert tensors:
                         mlp.gate.weight [E,H], mlp.experts.gate_up_proj [E,2I,H] (gate rows
                         first), mlp.experts.down_proj [E,H,I]; the names transformers 5 holds
                         in memory, as in qwen3-moe-tiny.
  mixtral-tiny-legacy    the same weights in the original Mixtral checkpoint layout
                         (block_sparse_moe.gate, block_sparse_moe.experts.E.w1/w2/w3); this is
                         also what transformers 5.17's save_pretrained writes for Mixtral, and
                         the script checks that it is byte for byte the same tensors.
  qwen3-moe-tiny-legacy  qwen3-moe-tiny with per-expert gate_proj/up_proj/down_proj tensors
                         (the Qwen3-30B-A3B layout).
  llama-tiny-sharded     llama-tiny split by transformers' save_pretrained into two shards
                         with model.safetensors.index.json.
  llama-tiny-v4config    llama-tiny with a transformers-4 style config.json (rope_theta +
                         rope_scaling llama3, torch_dtype), as Llama 3.2 checkpoints have.
  gemma3-tiny-v4config   gemma3-tiny with a transformers-4 style config.json (rope_theta,
                         rope_local_base_freq, rope_scaling null, sliding_window_pattern
                         instead of layer_types, torch_dtype), as Gemma 3 checkpoints have.

Every folder is loaded back with transformers' from_pretrained and its logits and greedy
tokens are compared with reference.json; the script prints the max abs difference and fails
if any is above 1e-4 or a greedy token differs. Deterministic (fixed seeds); re-runnable
(each folder is rewritten from scratch).
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "models"
WEIGHTS_DTYPE = "bf16 (values exactly representable; reference computed in fp32)"
PROMPT_LEN = 12
NEW_TOKENS = 16
INIT_STD = 0.08  # the std of the original fixtures' matrices; norms stay at 1
TOLERANCE = 1e-4

summary = []


def fresh_dir(name):
    d = MODELS / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def read_json(path):
    with open(path) as f:
        return json.load(f)


def bf16_exact(t):
    return t.detach().to(torch.bfloat16).to(torch.float32)


def safetensors_names(folder):
    names = {}
    for p in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(p), "pt") as f:
            for k in f.keys():
                names[k] = p.name
    return names


@torch.no_grad()
def run_reference(model, input_ids):
    """fp32 logits for every prompt position and greedy new tokens, as in the original fixtures."""
    model = model.float().eval()
    ids = torch.tensor([input_ids])
    logits = model(ids).logits[0]
    eos = model.generation_config.eos_token_id
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=NEW_TOKENS,
        pad_token_id=eos if isinstance(eos, int) else 0,
    )
    greedy = out[0, len(input_ids) :].tolist()
    return logits, greedy


def reference_json(model_type, input_ids, logits, greedy):
    return {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "model_type": model_type,
        "weights_dtype": WEIGHTS_DTYPE,
        "input_ids": list(input_ids),
        "logits": [[round(float(x), 6) for x in row] for row in logits],
        "greedy_new_tokens": list(greedy),
    }


def write_reference(folder, ref):
    with open(folder / "reference.json", "w") as f:
        json.dump(ref, f)


def verify(name, check_config=None):
    """Load the folder with transformers and compare with its reference.json."""
    folder = MODELS / name
    ref = read_json(folder / "reference.json")
    model, info = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        raise SystemExit(f"{name}: transformers did not load the weights cleanly: {problems}")
    if check_config:
        check_config(model.config)
    logits, greedy = run_reference(model, ref["input_ids"])
    diff = (logits - torch.tensor(ref["logits"])).abs().max().item()
    ok = diff <= TOLERANCE and greedy == ref["greedy_new_tokens"]
    size = sum(p.stat().st_size for p in folder.iterdir())
    summary.append((name, type(model).__name__, diff, greedy == ref["greedy_new_tokens"], size))
    if not ok:
        raise SystemExit(f"{name}: transformers does not reproduce reference.json (max abs diff {diff:.3g}, "
                         f"greedy {greedy} vs {ref['greedy_new_tokens']})")
    return model


# ---------------------------------------------------------------------------------------------
# mixtral-tiny and mixtral-tiny-legacy


def mixtral_config():
    return MixtralConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        max_position_embeddings=256,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        sliding_window=None,
        tie_word_embeddings=False,
    )


def make_mixtral(seed=20240601):
    cfg = mixtral_config()
    torch.manual_seed(seed)
    model = MixtralForCausalLM(cfg)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * INIT_STD)
            p.copy_(bf16_exact(p))
    prompt = torch.randint(3, cfg.vocab_size, (PROMPT_LEN,), generator=gen).tolist()
    logits, greedy = run_reference(model, prompt)
    if len(greedy) != NEW_TOKENS or cfg.eos_token_id in greedy:
        raise SystemExit(f"mixtral: greedy output stops early or holds eos: {greedy}")
    if len(set(greedy)) < 3:
        raise SystemExit(f"mixtral: degenerate greedy output {greedy}")
    ref = reference_json(cfg.model_type, prompt, logits, greedy)

    # mixtral-tiny: the fused tensors transformers 5 keeps in memory.
    d = fresh_dir("mixtral-tiny")
    cfg.save_pretrained(str(d))  # config.json as transformers writes it
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})
    write_reference(d, ref)

    # mixtral-tiny-legacy: the original Mixtral layout, split by hand from the fused tensors.
    inter = cfg.intermediate_size
    legacy = {}
    for k, v in state.items():
        if ".mlp.experts.gate_up_proj" in k:
            base = k.replace(".mlp.experts.gate_up_proj", ".block_sparse_moe.experts.")
            for e in range(v.shape[0]):
                legacy[f"{base}{e}.w1.weight"] = v[e, :inter].clone()  # gate
                legacy[f"{base}{e}.w3.weight"] = v[e, inter:].clone()  # up
        elif ".mlp.experts.down_proj" in k:
            base = k.replace(".mlp.experts.down_proj", ".block_sparse_moe.experts.")
            for e in range(v.shape[0]):
                legacy[f"{base}{e}.w2.weight"] = v[e].clone()  # down
        elif ".mlp.gate.weight" in k:
            legacy[k.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = v
        else:
            legacy[k] = v
    d = fresh_dir("mixtral-tiny-legacy")
    shutil.copy(MODELS / "mixtral-tiny" / "config.json", d / "config.json")
    save_file(legacy, str(d / "model.safetensors"), metadata={"format": "pt"})
    write_reference(d, ref)

    # transformers' own save_pretrained writes this same legacy layout for Mixtral: check that the
    # hand-made split agrees with it tensor for tensor.
    with tempfile.TemporaryDirectory() as tmp:
        model.to(torch.bfloat16).save_pretrained(tmp, safe_serialization=True)
        theirs = load_file(str(Path(tmp) / "model.safetensors"))
    if sorted(theirs) != sorted(legacy):
        raise SystemExit(f"mixtral-tiny-legacy: names differ from save_pretrained's: "
                         f"{sorted(set(theirs) ^ set(legacy))}")
    for k in legacy:
        if not torch.equal(theirs[k], legacy[k]):
            raise SystemExit(f"mixtral-tiny-legacy: {k} differs from what save_pretrained writes")
    print("mixtral-tiny-legacy: identical to transformers' save_pretrained output "
          f"({len(legacy)} tensors)")

    verify("mixtral-tiny")
    verify("mixtral-tiny-legacy")


# ---------------------------------------------------------------------------------------------
# qwen3-moe-tiny-legacy


def make_qwen3_moe_legacy():
    src = MODELS / "qwen3-moe-tiny"
    cfg = read_json(src / "config.json")
    inter = cfg["moe_intermediate_size"]
    state = load_file(str(src / "model.safetensors"))
    legacy = {}
    for k, v in state.items():
        if k.endswith(".mlp.experts.gate_up_proj"):  # [E, 2I, H], gate rows first
            base = k[: -len("gate_up_proj")]
            for e in range(v.shape[0]):
                legacy[f"{base}{e}.gate_proj.weight"] = v[e, :inter].clone()
                legacy[f"{base}{e}.up_proj.weight"] = v[e, inter:].clone()
        elif k.endswith(".mlp.experts.down_proj"):  # [E, H, I]
            base = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                legacy[f"{base}{e}.down_proj.weight"] = v[e].clone()
        else:
            legacy[k] = v  # the router stays model.layers.N.mlp.gate.weight
    d = fresh_dir("qwen3-moe-tiny-legacy")
    shutil.copy(src / "config.json", d / "config.json")
    shutil.copy(src / "reference.json", d / "reference.json")
    save_file(legacy, str(d / "model.safetensors"), metadata={"format": "pt"})
    verify("qwen3-moe-tiny-legacy")


# ---------------------------------------------------------------------------------------------
# llama-tiny-sharded


def make_llama_sharded():
    src = MODELS / "llama-tiny"
    d = fresh_dir("llama-tiny-sharded")
    model = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.bfloat16)
    model.save_pretrained(str(d), safe_serialization=True, max_shard_size="200KB")
    (d / "generation_config.json").unlink(missing_ok=True)
    shutil.copy(src / "config.json", d / "config.json")
    shutil.copy(src / "reference.json", d / "reference.json")
    shards = sorted(p.name for p in d.glob("*.safetensors"))
    if shards != ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]:
        raise SystemExit(f"llama-tiny-sharded: expected two shards, got {shards}")
    index = read_json(d / "model.safetensors.index.json")
    original = load_file(str(src / "model.safetensors"))
    names = safetensors_names(d)
    if index["weight_map"] != names or sorted(names) != sorted(original):
        raise SystemExit("llama-tiny-sharded: index weight_map does not match the shards")
    if index["metadata"]["total_size"] != sum(t.numel() * t.element_size() for t in original.values()):
        raise SystemExit("llama-tiny-sharded: wrong metadata.total_size")
    for shard in shards:
        for k, v in load_file(str(d / shard)).items():
            if not torch.equal(v, original[k]):
                raise SystemExit(f"llama-tiny-sharded: {k} differs from llama-tiny")
    print("llama-tiny-sharded: " + ", ".join(f"{s}: {sum(1 for v in names.values() if v == s)} tensors"
                                             for s in shards))
    verify("llama-tiny-sharded")


# ---------------------------------------------------------------------------------------------
# transformers-4 style configs


def copy_weights(src, d):
    shutil.copy(src / "model.safetensors", d / "model.safetensors")
    shutil.copy(src / "reference.json", d / "reference.json")


def make_llama_v4config():
    src = MODELS / "llama-tiny"
    cfg = read_json(src / "config.json")
    rope = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rope.pop("rope_theta")
    cfg["rope_scaling"] = rope  # factor, high/low_freq_factor, original_max_position_embeddings, rope_type
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = "bfloat16"
    cfg["architectures"] = ["LlamaForCausalLM"]
    cfg["transformers_version"] = "4.45.0.dev0"
    d = fresh_dir("llama-tiny-v4config")
    write_json(d / "config.json", cfg)
    copy_weights(src, d)
    expected = read_json(src / "config.json")["rope_parameters"]

    def check(c):
        got = {k: v for k, v in c.rope_parameters.items() if k in expected}
        if got != expected:
            raise SystemExit(f"llama-tiny-v4config: transformers read rope {c.rope_parameters}, want {expected}")

    verify("llama-tiny-v4config", check)


def make_gemma3_v4config():
    src = MODELS / "gemma3-tiny"
    orig = read_json(src / "config.json")
    cfg = dict(orig)
    rope = cfg.pop("rope_parameters")
    assert rope["full_attention"]["rope_type"] == rope["sliding_attention"]["rope_type"] == "default"
    # Gemma 3 checkpoints on the Hub write the bases as integers.
    cfg["rope_theta"] = int(rope["full_attention"]["rope_theta"])
    cfg["rope_local_base_freq"] = int(rope["sliding_attention"]["rope_theta"])
    cfg["rope_scaling"] = None
    pattern = cfg.pop("_sliding_window_pattern")
    layer_types = cfg.pop("layer_types")
    derived = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(cfg["num_hidden_layers"])]
    if derived != layer_types:
        raise SystemExit("gemma3-tiny: layer_types cannot be written as sliding_window_pattern")
    cfg["sliding_window_pattern"] = pattern
    cfg.pop("use_bidirectional_attention", None)  # newer than Gemma 3's configs
    cfg.pop("dtype", None)
    cfg["torch_dtype"] = "bfloat16"
    cfg["architectures"] = ["Gemma3ForCausalLM"]
    cfg["cache_implementation"] = "hybrid"
    cfg["transformers_version"] = "4.50.0.dev0"
    d = fresh_dir("gemma3-tiny-v4config")
    write_json(d / "config.json", cfg)
    copy_weights(src, d)

    def check(c):
        if c.layer_types != layer_types:
            raise SystemExit(f"gemma3-tiny-v4config: transformers read layer_types {c.layer_types}")
        for kind, params in rope.items():
            if c.rope_parameters[kind]["rope_theta"] != params["rope_theta"]:
                raise SystemExit(f"gemma3-tiny-v4config: transformers read rope {c.rope_parameters}")

    verify("gemma3-tiny-v4config", check)


MAKERS = {
    "mixtral": make_mixtral,
    "qwen3-moe-tiny-legacy": make_qwen3_moe_legacy,
    "llama-tiny-sharded": make_llama_sharded,
    "llama-tiny-v4config": make_llama_v4config,
    "gemma3-tiny-v4config": make_gemma3_v4config,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("only", nargs="*", help=f"make only these of {', '.join(MAKERS)} (default: all)")
    args = ap.parse_args()
    for name in args.only:
        if name not in MAKERS:
            ap.error(f"unknown fixture {name!r}; choose from {', '.join(MAKERS)}")
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    for name, make in MAKERS.items():
        if not args.only or name in args.only:
            make()
    print(f"\ntransformers {transformers.__version__}, torch {torch.__version__}")
    print(f"{'folder':24} {'loaded as':22} {'max |dlogit|':>12} {'greedy':>7} {'bytes':>8}")
    for name, cls, diff, greedy_ok, size in summary:
        print(f"{name:24} {cls:22} {diff:12.3g} {'same' if greedy_ok else 'DIFF':>7} {size:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
