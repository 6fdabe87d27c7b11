#!/usr/bin/env python3
"""Build a random-weight checkpoint of a real architecture for benchmarking.

The config matches the real model's config.json (same shapes, vocabulary, rope, norms, tied
embeddings), so every engine does exactly the work it would do on the real weights; only the
values are random (normal, std --std, so activations stay finite). Written with transformers'
save_pretrained as bf16 safetensors + config.json + generation_config.json, plus the model's
tokenizer files when they can be found, plus (unless --no-gguf) a bf16 GGUF of the same weights
made by llama.cpp's own convert_hf_to_gguf.py, for llama.cpp.

  /work/venv-fix/bin/python scripts/make_random_model.py --arch qwen3-0.6b --out /work/models/qwen3-0.6b-random
  /work/venv-fix/bin/python scripts/make_random_model.py --arch llama-3.2-1b --out /work/models/llama-3.2-1b-random

Needs torch, transformers (5.x), safetensors. The GGUF step needs llama.cpp's converter: pass
--llama-cpp DIR (a llama.cpp checkout, or vendor/llama.cpp of the llama-cpp-python sdist); without
it the script downloads the sdist of the installed llama-cpp-python (or 0.3.36) with
`pip download --no-binary :all: --no-deps` into --cache and extracts the converter and its
vendored gguf-py (and pip-installs sentencepiece and mistral-common, which the converter imports, into --cache/pydeps
if this Python lacks it). The converter needs the tokenizer: tokenizer.json + tokenizer_config.json are
copied from --tokenizer-dir (default: shared/tokenizers/{qwen3,llama3} beside the repository).
The GGUF lands beside the folder, at OUT-bf16.gguf.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

ARCHS = {
    # Qwen/Qwen3-0.6B config.json
    "qwen3-0.6b": dict(
        model_type="qwen3",
        tokenizer="qwen3",
        config=dict(
            architectures=["Qwen3ForCausalLM"],
            attention_bias=False,
            attention_dropout=0.0,
            bos_token_id=151643,
            eos_token_id=151645,
            head_dim=128,
            hidden_act="silu",
            hidden_size=1024,
            initializer_range=0.02,
            intermediate_size=3072,
            max_position_embeddings=40960,
            max_window_layers=28,
            num_attention_heads=16,
            num_hidden_layers=28,
            num_key_value_heads=8,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            sliding_window=None,
            tie_word_embeddings=True,
            use_cache=True,
            use_sliding_window=False,
            vocab_size=151936,
        ),
    ),
    # meta-llama/Llama-3.2-1B config.json
    "llama-3.2-1b": dict(
        model_type="llama",
        tokenizer="llama3",
        config=dict(
            architectures=["LlamaForCausalLM"],
            attention_bias=False,
            attention_dropout=0.0,
            bos_token_id=128000,
            eos_token_id=128001,
            head_dim=64,
            hidden_act="silu",
            hidden_size=2048,
            initializer_range=0.02,
            intermediate_size=8192,
            max_position_embeddings=131072,
            mlp_bias=False,
            num_attention_heads=32,
            num_hidden_layers=16,
            num_key_value_heads=8,
            pretraining_tp=1,
            rms_norm_eps=1e-5,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
            tie_word_embeddings=True,
            use_cache=True,
            vocab_size=128256,
        ),
    ),
    # meta-llama/Meta-Llama-3-8B config.json (the CUDA backend's benchmark model)
    "llama-3-8b": dict(
        model_type="llama",
        tokenizer="llama3",
        config=dict(
            architectures=["LlamaForCausalLM"],
            attention_bias=False,
            attention_dropout=0.0,
            bos_token_id=128000,
            eos_token_id=128001,
            head_dim=128,
            hidden_act="silu",
            hidden_size=4096,
            initializer_range=0.02,
            intermediate_size=14336,
            max_position_embeddings=8192,
            mlp_bias=False,
            num_attention_heads=32,
            num_hidden_layers=32,
            num_key_value_heads=8,
            pretraining_tp=1,
            rms_norm_eps=1e-5,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0},
            tie_word_embeddings=False,
            use_cache=True,
            vocab_size=128256,
        ),
    ),
    # Qwen/Qwen3-30B-A3B config.json (the MoE benchmark model: 128 experts, 8 per token)
    "qwen3-30b-a3b": dict(
        model_type="qwen3_moe",
        tokenizer="qwen3",
        config=dict(
            architectures=["Qwen3MoeForCausalLM"],
            attention_bias=False,
            attention_dropout=0.0,
            bos_token_id=151643,
            eos_token_id=151645,
            decoder_sparse_step=1,
            head_dim=128,
            hidden_act="silu",
            hidden_size=2048,
            initializer_range=0.02,
            intermediate_size=6144,
            max_position_embeddings=40960,
            max_window_layers=48,
            mlp_only_layers=[],
            moe_intermediate_size=768,
            norm_topk_prob=True,
            num_attention_heads=32,
            num_experts=128,
            num_experts_per_tok=8,
            num_hidden_layers=48,
            num_key_value_heads=4,
            output_router_logits=False,
            rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            router_aux_loss_coef=0.001,
            sliding_window=None,
            tie_word_embeddings=False,
            use_cache=True,
            use_sliding_window=False,
            vocab_size=151936,
        ),
    ),
}


def make_config(arch, std, layers=None):
    from transformers import AutoConfig

    spec = ARCHS[arch]
    cfg_kwargs = dict(spec["config"])
    cfg_kwargs["initializer_range"] = std
    if layers:
        cfg_kwargs["num_hidden_layers"] = layers
        if "max_window_layers" in cfg_kwargs:
            cfg_kwargs["max_window_layers"] = layers
    return AutoConfig.for_model(spec["model_type"], **cfg_kwargs)


def build_hf(arch, out, std, seed, init_device="cpu", layers=None):
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    spec = ARCHS[arch]
    config = make_config(arch, std, layers)
    torch.manual_seed(seed)
    t0 = time.time()
    # transformers' own init: normal(0, initializer_range) for linears and embeddings, ones for
    # the RMSNorm weights; stored bf16. On the CPU it runs in fp32 then rounds; on a GPU it draws
    # bf16 values directly (an 8B model in seconds instead of two minutes; other random values).
    if init_device == "cpu":
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model = model.to(torch.bfloat16)
    else:
        with torch.device(init_device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id, do_sample=False
    )
    n_params = sum(p.numel() for p in model.parameters())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    # Record the std used (the saved config keeps initializer_range = std too).
    print(f"{arch}: {n_params / 1e6:.1f}M parameters, saved in {time.time() - t0:.0f} s")
    del model


def find_tokenizer(name, explicit):
    cands = [Path(explicit)] if explicit else [REPO.parent / "shared" / "tokenizers" / name, REPO / "shared" / "tokenizers" / name]
    for c in cands:
        if (c / "tokenizer.json").exists():
            return c
    return None


def llama_cpp_dir(explicit, cache):
    if explicit:
        return Path(explicit)
    cache.mkdir(parents=True, exist_ok=True)
    for d in sorted(cache.glob("llama_cpp_python-*/vendor/llama.cpp")):
        if (d / "convert_hf_to_gguf.py").exists():
            return d
    try:
        from importlib.metadata import version

        ver = version("llama-cpp-python")
    except Exception:
        ver = "0.3.36"
    print(f"downloading the llama-cpp-python {ver} sdist for convert_hf_to_gguf.py ...")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                    f"llama-cpp-python=={ver}", "-d", str(cache)], check=True)
    sdist = sorted(cache.glob(f"llama_cpp_python-{ver}.tar.gz"))[-1]
    with tarfile.open(sdist) as tf:
        members = [m for m in tf.getmembers()
                   if "/vendor/llama.cpp/" in m.name and (m.name.endswith(".py") or "/gguf-py/" in m.name
                                                         or "/models/" in m.name and m.name.endswith(".jinja"))]
        tf.extractall(cache, members=members)
    d = cache / f"llama_cpp_python-{ver}" / "vendor" / "llama.cpp"
    if not (d / "convert_hf_to_gguf.py").exists():
        sys.exit(f"no convert_hf_to_gguf.py in {sdist}")
    return d


def converter_deps(cache):
    """The converter imports sentencepiece and mistral_common (its requirements list them);
    install the ones this Python lacks into a private folder under --cache rather than into the
    environment."""
    target = cache / "pydeps"
    missing = []
    for module, package in (("sentencepiece", "sentencepiece"), ("mistral_common", "mistral-common")):
        try:
            __import__(module)
        except ImportError:
            if not (target / module).exists():
                missing.append(package)
    if missing:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target)] + missing, check=True)
    return [str(target)] if target.exists() else []


def convert_gguf(out, llama_dir, gguf_path, cache):
    env = dict(os.environ)
    paths = [str(llama_dir / "gguf-py")] + converter_deps(cache)
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["NO_LOCAL_GGUF"] = ""
    cmd = [sys.executable, str(llama_dir / "convert_hf_to_gguf.py"), str(out), "--outtype", "bf16", "--outfile", str(gguf_path)]
    print("+", " ".join(cmd))
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    print(f"GGUF written in {time.time() - t0:.0f} s: {gguf_path} ({gguf_path.stat().st_size / 1e9:.3f} GB)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, choices=sorted(ARCHS))
    ap.add_argument("--out", required=True, help="output folder (Hugging Face layout)")
    ap.add_argument("--std", type=float, default=0.02, help="std of the random normal init (default 0.02)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init-device", default="cpu", help="where the random values are drawn (cpu, or cuda: much faster)")
    ap.add_argument("--tokenizer-dir", help="folder with tokenizer.json + tokenizer_config.json to copy in")
    ap.add_argument("--no-gguf", action="store_true", help="skip the llama.cpp GGUF")
    ap.add_argument("--gguf-out", help="GGUF path (default OUT-bf16.gguf, beside OUT)")
    ap.add_argument("--llama-cpp", help="llama.cpp folder holding convert_hf_to_gguf.py and gguf-py/")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "luminal-bench"),
                    help="where the llama-cpp-python sdist is downloaded and extracted")
    ap.add_argument("--layers", type=int, help="fewer layers than the architecture has (a smaller model of the same shape)")
    ap.add_argument("--skip-hf-if-present", action="store_true", help="reuse OUT's safetensors if they exist")
    ap.add_argument("--config-only", action="store_true",
                    help="write OUT/config.json alone (no weights): for tools that need only the shapes")
    a = ap.parse_args()

    out = Path(a.out)
    spec = ARCHS[a.arch]
    if a.config_only:
        make_config(a.arch, a.std, a.layers).save_pretrained(out)
        print(f"config: {out / 'config.json'}")
        return
    if a.skip_hf_if_present and (out / "config.json").exists() and glob.glob(str(out / "*.safetensors")):
        print(f"reusing {out}")
    else:
        build_hf(a.arch, out, a.std, a.seed, a.init_device, a.layers)

    tok = find_tokenizer(spec["tokenizer"], a.tokenizer_dir)
    if tok:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            if (tok / f).exists():
                shutil.copyfile(tok / f, out / f)
        print(f"tokenizer copied from {tok}")
    else:
        print("no tokenizer files found (--tokenizer-dir); the GGUF converter needs them", file=sys.stderr)

    st = sum(os.path.getsize(p) for p in glob.glob(str(out / "*.safetensors")))
    print(f"safetensors: {st / 1e9:.3f} GB in {out}")

    if not a.no_gguf:
        if not tok:
            sys.exit("cannot make the GGUF without tokenizer files")
        gguf_path = Path(a.gguf_out) if a.gguf_out else out.parent / (out.name + "-bf16.gguf")
        convert_gguf(out, llama_cpp_dir(a.llama_cpp, Path(a.cache)), gguf_path, Path(a.cache))


if __name__ == "__main__":
    main()
