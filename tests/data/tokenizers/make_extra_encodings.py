#!/usr/bin/env python3
"""Writes extra_encodings.json: edge-case strings encoded by Hugging Face `tokenizers` with the
tokenizer.json files of this folder (same layout as tokenizer_encodings.json). Tests read only
the JSON; this script documents where the numbers come from.

    pip install tokenizers==0.23.2 && python3 make_extra_encodings.py
"""
import json
import lzma
import os

import tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))

COMMON = [
    "e\u0301 cafe\u0301 \u212b A\u030a\u0301 \ufb01 \u1100\u1161\u11a8 \u0958",  # NFC material
    "a\x85b a\u00a0b x\u3000 y x\x1c y \u200b\ufeffBOM",
    "\t\t\tindented\n    four spaces\n\n\n\ntrailing\r\n\r\n",
    "I'M YOU'RE WE'LL THEY'D it'S \u017f",
    "1234567890 3.14159265358979 \u0661\u0662\u0663 \u00bd \u216b 00700",
    "\u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22 \u0928\u092e\u0938\u094d\u0924\u0947 \uc548\ub155\ud558\uc138\uc694 \u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac \u05e2\u05d1\u05e8\u05d9\u05ea",
    "\U0001F469\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 1\ufe0f\u20e3 \U0001F9EC \ue000 \U0001D518\U0001D52B \U00020000\U00020001 \U000E0001",
    "!!!!!!!!!! ............ ---- ==== ==== ``` ~~~",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|begin_of_text|><|begin_of_text|>",
    "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n<eos>",
    "<think>\nreasoning\n</think>\n\nanswer<|endoftext|>",
    "<unused5> <table><tr>x</tr></table> <0x41> \u2581\u2581lit",
    "def fibonacci(n: int) -> int:\n\tif n < 2:\n\t\treturn n\n\treturn fibonacci(n - 1) + fibonacci(n - 2)\n",
    ("The quick brown fox jumps over the lazy dog. " * 8) + "Pack my box with five dozen liquor jugs!",
    "   ",
    "\n",
    "a",
]


def main():
    out = {"tokenizers_version": tokenizers.__version__, "encodings": {}}
    for name in ["llama3", "qwen3", "gemma3"]:
        with lzma.open(os.path.join(HERE, name, "tokenizer.json.xz"), "rt", encoding="utf-8") as f:
            tok = tokenizers.Tokenizer.from_str(f.read())
        cases = []
        for text in COMMON:
            plain = tok.encode(text, add_special_tokens=False).ids
            special = tok.encode(text, add_special_tokens=True).ids
            cases.append({"text": text, "ids": plain, "ids_with_special": special,
                          "decoded": tok.decode(plain, skip_special_tokens=False)})
        out["encodings"][name] = cases
    with open(os.path.join(HERE, "extra_encodings.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
