#!/usr/bin/env python3
"""A Kimi-style tiktoken tokenizer and its goldens (tests/unit/tokenizer/tokenizer_golden_test.cpp).

Kimi-K2 / Kimi-K2.5 ship `tiktoken.model` (base64 token bytes, a space, the rank), added
tokens in tokenizer_config.json's added_tokens_decoder, and tokenization_kimi.py whose
`pat_str` is the pre-tokenization regex. The real file is not reachable offline, so this
builds a small one with the same structure in tests/data/tokenizer/tiktoken_kimi/:

  * tiktoken.model: byte-level ranks taken from the Qwen3 tokenizer.json (a tiktoken-born
    vocabulary: ids are ranks) in rank order, keeping the 256 bytes, the first few thousand
    ranks and the non-ASCII tokens of the first 100k whose halves are kept, renumbered;
  * tokenizer_config.json: Kimi's added tokens at Kimi's offsets past the ranks, with gaps;
  * tokenization_kimi.py: a stand-in holding only Kimi's pat_str, written as Kimi writes it.

The reference is transformers' conversion, convert_slow_tokenizer.TikTokenConverter with
Kimi's pat_str, the added tokens listed as transformers' _convert_from_tiktoken lists them
(gaps up to the largest id as <|reserved_token_ID|>). The ids are also compared with
tiktoken itself (what tokenization_kimi.py runs), reported as tiktoken_agrees.

Usage: .venv-tools/bin/python tools/make_tiktoken_goldens.py [--shared ../shared]
"""

import argparse
import base64
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# tiktoken caches files by path in /tmp: a rewritten tiktoken.model would read stale.
os.environ["TIKTOKEN_CACHE_DIR"] = ""

import tiktoken  # noqa: E402
from tiktoken.load import load_tiktoken_bpe  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers.convert_slow_tokenizer import TikTokenConverter, bytes_to_unicode  # noqa: E402

import make_tokenizer_goldens  # noqa: E402
import tokenizer_corpus  # noqa: E402

OUT_DIR = os.path.join(ROOT, "tests", "data", "tokenizer", "tiktoken_kimi")

# tokenization_kimi.py's pat_str, one alternative per entry as Kimi writes it.
KIMI_PAT_STR = [
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
]

# Kimi-K2's added tokens, by offset past the last rank; the other offsets up to the largest
# are reserved tokens.
KIMI_ADDED = {
    0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
    6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
    11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>",
    13: "<|tool_call_begin|>", 14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>",
    17: "<|im_middle|>", 254: "[UNK]", 255: "[PAD]",
}

FIRST_RANKS = 2500      # every token of the first ranks
NON_ASCII_SCAN = 100000  # non-ASCII tokens considered up to this Qwen3 rank
MAX_RANKS = 7000        # keeps tiktoken.model under 100 KiB

STUB = '''"""Test stand-in for Kimi's tokenization_kimi.py (trust_remote_code, not redistributed here):
only the pre-tokenization regex deepinfer reads from it, written as Kimi writes it.
Made by tools/make_tiktoken_goldens.py."""


class TikTokenTokenizer:
    pat_str = "|".join(
        [
{entries}
        ]
    )
'''


def special_texts(base):
    reserved = f"<|reserved_token_{base + 5}|>"
    return [
        "[BOS]Hello[EOS]",
        "<|im_system|>system<|im_middle|>You are Kimi.<|im_end|>"
        "<|im_user|>user<|im_middle|>你好，Kimi！What's up?<|im_end|>"
        "<|im_assistant|>assistant<|im_middle|>",
        f"reserved {reserved} token and [UNK][PAD] pair",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        "<|tool_call_argument_begin|>{\"city\": \"北京\"}<|tool_call_end|>"
        "<|tool_calls_section_end|>",
        "<|im_end| partial [BOS and [bos] lowercase <|IM_END|>",
        " [EOT] spaced [EOT] ",
        "<|reserved_token_999999|> is not a token",
    ]


def select_ranks(shared):
    path = os.path.join(shared, "tokenizers", "qwen3", "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    by_rank = sorted(vocab.items(), key=lambda item: item[1])
    kept, kept_set = [], set()
    for token, rank in by_rank:
        data = bytes(byte_of[c] for c in token)
        if len(data) > 1:
            if rank >= NON_ASCII_SCAN or len(kept) >= MAX_RANKS:
                continue
            if rank >= FIRST_RANKS and data.isascii():
                continue
            if not any(data[:k] in kept_set and data[k:] in kept_set for k in range(1, len(data))):
                continue
        kept.append(data)
        kept_set.add(data)
    assert sum(len(t) == 1 for t in kept) == 256, "every byte has a rank"
    return kept


def write_inputs(ranks):
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "tiktoken.model"), "w", encoding="ascii") as f:
        for rank, token in enumerate(ranks):
            f.write(f"{base64.b64encode(token).decode()} {rank}\n")
    base = len(ranks)
    config = {
        "added_tokens_decoder": {
            str(base + offset): {"content": content, "lstrip": False, "normalized": False,
                                 "rstrip": False, "single_word": False, "special": True}
            for offset, content in sorted(KIMI_ADDED.items())},
        "additional_special_tokens": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>",
                                      "<|start_header_id|>", "<|end_header_id|>", "[EOT]",
                                      "<|im_system|>", "<|im_middle|>"],
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]",
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "extra_special_tokens": {},
        "model_max_length": 1048576,
        "pad_token": "[PAD]",
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": "[UNK]",
    }
    with open(os.path.join(OUT_DIR, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
        f.write("\n")
    entries = "\n".join(f'            r"""{alt}""",' for alt in KIMI_PAT_STR)
    with open(os.path.join(OUT_DIR, "tokenization_kimi.py"), "w", encoding="utf-8") as f:
        f.write(STUB.replace("{entries}", entries))
    return config


def added_tokens(config, base):
    """The extra special tokens of transformers' _convert_from_tiktoken, gaps reserved."""
    decoder = {int(i): t["content"] for i, t in config["added_tokens_decoder"].items()}
    return [decoder.get(i, f"<|reserved_token_{i}|>") for i in range(base, max(decoder) + 1)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = parser.parse_args()
    ranks = select_ranks(args.shared)
    config = write_inputs(ranks)
    pattern = "|".join(KIMI_PAT_STR)
    model_path = os.path.join(OUT_DIR, "tiktoken.model")
    extras = added_tokens(config, len(ranks))
    converted = TikTokenConverter(vocab_file=model_path, pattern=pattern,
                                  extra_special_tokens=extras).converted()
    tok = Tokenizer.from_str(converted.to_str())
    print(f"tiktoken.model: {len(ranks)} ranks, {os.path.getsize(model_path)} bytes; "
          f"{len(extras)} added tokens", file=sys.stderr)

    texts = tokenizer_corpus.corpus() + special_texts(len(ranks))
    encoding = tiktoken.Encoding(
        name="kimi-test", pat_str=pattern,
        mergeable_ranks=load_tiktoken_bpe(model_path),
        special_tokens={t: len(ranks) + i for i, t in enumerate(extras)})
    differs = [t for t in texts if encoding.encode(t, allowed_special="all")
               != tok.encode(t, add_special_tokens=False).ids]
    for text in differs:
        print(f"  tiktoken differs on {text!r}", file=sys.stderr)
    make_tokenizer_goldens.goldens(
        "tiktoken_kimi", tok, "tests/data/tokenizer/tiktoken_kimi", texts, ([], []),
        {"reference": "transformers TikTokenConverter with tokenization_kimi.py's pat_str",
         "tiktoken_agrees": f"{len(texts) - len(differs)} of {len(texts)} strings"})


if __name__ == "__main__":
    main()
