#!/usr/bin/env python3
"""Goldens for the C++ tokenizer (tests/unit/tokenizer/tokenizer_golden_test.cpp).

For each tokenizer: the corpus of tools/tokenizer_corpus.py encoded by the Python
`tokenizers` package (ids without special tokens), the special tokens that
add_special_tokens=True puts around them (as transformers' AutoTokenizer does), the
reference decode of the full ids with and without skip_special_tokens, inputs that are not
valid UTF-8 (decoded with errors="replace" first), and decodes of random id lists.

Tokenizers:
  * qwen3, deepseek-v3 from ../shared/tokenizers (the goldens are committed; the C++ test
    skips when the shared directory is absent),
  * the tiny test tokenizer of tests/data/tiny-qwen3,
  * synthetic tokenizers built here (tests/data/tokenizer/synthetic/) that exercise the
    components the real files do not use: Metaspace, Digits, Punctuation, Whitespace,
    byte_fallback/unk, continuing_subword_prefix, ignore_merges, every Split behaviour,
    lstrip/rstrip/single_word/normalized added tokens, Bert/Roberta/Template processors.

add_special_tokens follows transformers 4.x: Llama-style fast tokenizers (DeepSeek-V3's
tokenizer_config says LlamaTokenizerFast, add_bos_token=true) rebuild the post-processor
from add_bos_token/add_eos_token. transformers 5.x ignores those flags when tokenizer.json
exists (and gives DeepSeek-V3 no BOS). Set TRANSFORMERS4_PATH to a directory holding
transformers 4.x to cross-check every corpus string against its AutoTokenizer.

Usage: .venv-tools/bin/python tools/make_tokenizer_goldens.py [--shared ../shared]
"""

import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if os.environ.get("TRANSFORMERS4_PATH"):
    sys.path.insert(0, os.environ["TRANSFORMERS4_PATH"])

import tokenizers  # noqa: E402
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,  # noqa: E402
                        normalizers, pre_tokenizers, processors, trainers)

import tokenizer_corpus  # noqa: E402

OUT_DIR = os.path.join(ROOT, "tests", "data", "tokenizer")
SYNTH_DIR = os.path.join(OUT_DIR, "synthetic")

# transformers 4.x classes whose __init__ rebuilds the post-processor (default flags).
REBUILDING_CLASSES = {
    "LlamaTokenizer": (True, False), "CodeLlamaTokenizer": (True, False),
    "GemmaTokenizer": (True, False), "CohereTokenizer": (True, False),
    "GPTNeoXTokenizer": (False, False),
}


def special_string(value):
    if isinstance(value, dict):
        return value.get("content")
    return value


def transformers4_specials(tok, config):
    """(prefix, suffix) ids that add_special_tokens adds, by transformers 4.x rules."""
    cls = (config.get("tokenizer_class") or "").removesuffix("Fast")
    if cls in REBUILDING_CLASSES:
        add_bos, add_eos = REBUILDING_CLASSES[cls]
        add_bos = config.get("add_bos_token", add_bos)
        add_eos = config.get("add_eos_token", add_eos)
        bos, eos = special_string(config.get("bos_token")), special_string(config.get("eos_token"))
        prefix = [tok.token_to_id(bos)] if add_bos and bos is not None else []
        suffix = [tok.token_to_id(eos)] if add_eos and eos is not None else []
        return prefix, suffix
    return None


def specials_from_post_processor(tok, texts):
    prefix = suffix = None
    for text in texts:
        plain = tok.encode(text, add_special_tokens=False).ids
        full = tok.encode(text, add_special_tokens=True).ids
        if prefix is None and plain:  # an empty sequence cannot tell prefix from suffix
            for start in range(len(full) - len(plain) + 1):
                if full[start:start + len(plain)] == plain:
                    prefix, suffix = full[:start], full[start + len(plain):]
                    break
            else:
                raise SystemExit(f"post-processor does not wrap the sequence for {text!r}")
    for text in texts:
        plain = tok.encode(text, add_special_tokens=False).ids
        if tok.encode(text, add_special_tokens=True).ids != prefix + plain + suffix:
            raise SystemExit(f"post-processor adds different tokens for {text!r}")
    return prefix, suffix


def cross_check_transformers(model_dir, tok, texts, prefix, suffix):
    try:
        import transformers
    except ImportError:
        return "not installed"
    version = transformers.__version__
    if int(version.split(".")[0]) >= 5:
        print(f"  note: transformers {version} ignores add_bos_token with tokenizer.json; "
              "set TRANSFORMERS4_PATH to cross-check the 4.x behaviour", file=sys.stderr)
        return version + " (not used: 5.x)"
    auto = transformers.AutoTokenizer.from_pretrained(model_dir)
    for text in texts:
        plain = tok.encode(text, add_special_tokens=False).ids
        got = auto(text)["input_ids"]
        if got != prefix + plain + suffix:
            raise SystemExit(f"{model_dir}: AutoTokenizer disagrees on {text!r}: {got}")
        if auto(text, add_special_tokens=False)["input_ids"] != plain:
            raise SystemExit(f"{model_dir}: AutoTokenizer (no specials) disagrees on {text!r}")
        if auto.decode(got) != tok.decode(got, skip_special_tokens=False):
            raise SystemExit(f"{model_dir}: AutoTokenizer decode disagrees on {text!r}")
    print(f"  transformers {version}: AutoTokenizer agrees on all {len(texts)} strings",
          file=sys.stderr)
    return version


def random_id_lists(tok, count=40, seed=7):
    rng = random.Random(seed)
    size = tok.get_vocab_size(with_added_tokens=True)
    specials = [t.content for t in tok.get_added_tokens_decoder().values()]
    special_ids = [tok.token_to_id(s) for s in specials]
    lists = []
    for i in range(count):
        ids = [rng.randrange(size) for _ in range(rng.randint(1, 24))]
        if special_ids and i % 3 == 0:
            ids.insert(rng.randrange(len(ids) + 1), rng.choice(special_ids))
        if i % 5 == 0:
            ids.append(size + 1000)  # unknown ids are skipped
        lists.append(ids)
    return lists


def goldens(name, tok, source, texts, specials, extra):
    prefix, suffix = specials
    cases = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        full = prefix + ids + suffix
        decoded = tok.decode(full, skip_special_tokens=False)
        decoded_skip = tok.decode(full, skip_special_tokens=True)
        cases.append({
            "text": text, "ids": ids,
            # null: equal to the text, which keeps the files small.
            "decoded": None if decoded == text else decoded,
            "decoded_skip": None if decoded_skip == text else decoded_skip,
        })
    invalid = []
    for raw in tokenizer_corpus.INVALID_UTF8:
        repaired = raw.decode("utf-8", errors="replace")
        invalid.append({"bytes_hex": raw.hex(), "repaired": repaired,
                        "ids": tok.encode(repaired, add_special_tokens=False).ids})
    decodes = []
    for ids in random_id_lists(tok):
        decodes.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                        "decoded_skip": tok.decode(ids, skip_special_tokens=True)})
    doc = {"tokenizer": source, "tokenizers_version": tokenizers.__version__,
           "special_prefix": prefix, "special_suffix": suffix, **extra,
           "cases": cases, "invalid_utf8": invalid, "decodes": decodes}
    path = os.path.join(OUT_DIR, "goldens", f"{name}.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        # One case per line: compact, yet diffs stay readable.
        f.write("{\n")
        keys = list(doc)
        for i, key in enumerate(keys):
            value = doc[key]
            sep = "," if i + 1 < len(keys) else ""
            if isinstance(value, list) and value and isinstance(value[0], dict):
                f.write(f"{json.dumps(key)}: [\n")
                f.write(",\n".join(json.dumps(v, ensure_ascii=False, separators=(",", ":"))
                                   for v in value))
                f.write(f"\n]{sep}\n")
            else:
                f.write(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{sep}\n")
        f.write("}\n")
    print(f"{name}: {len(cases)} strings, {sum(len(c['ids']) for c in cases)} ids -> "
          f"{os.path.relpath(path, ROOT)}", file=sys.stderr)


# ---------------------------------------------------------------- synthetic tokenizers

def train(tok, texts, vocab_size, specials=(), **kwargs):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(specials),
                                  show_progress=False, **kwargs)
    tok.train_from_iterator(texts, trainer)
    return tok


def with_extra_vocab(tok, tokens):
    """Adds plain model-vocab tokens (not added tokens), e.g. byte-fallback <0xXX>."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    next_id = max(max(vocab.values()), max((t["id"] for t in data["added_tokens"]), default=0)) + 1
    for t in tokens:
        if t not in vocab:
            vocab[t] = next_id
            next_id += 1
    return Tokenizer.from_str(json.dumps(data))


def synth_spm_bpe(texts):
    """Llama-2 style: Prepend/Replace normalizer, byte_fallback, fuse_unk, template BOS."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    train(tok, texts, 700, ["<unk>", "<s>", "</s>"], limit_alphabet=120)
    # Bytes 0xF0-0xF4 stay missing so 4-byte characters exercise unk (fused).
    tok = with_extra_vocab(tok, [f"<0x{b:02X}>" for b in range(256) if not 0xF0 <= b <= 0xF4])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    return tok


def synth_metaspace(texts):
    """Metaspace (first) + Digits + Punctuation, NFKD/StripAccents/Lowercase, ## and </w>,
    Bert post-processor, added tokens with lstrip/rstrip/single_word/normalized."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##",
                               end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKD(), normalizers.StripAccents(), normalizers.Lowercase(),
        normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Punctuation(behavior="isolated")])
    train(tok, texts, 900, ["[UNK]", "[CLS]", "[SEP]", "[MASK]"], limit_alphabet=300,
          continuing_subword_prefix="##", end_of_word_suffix="</w>")
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, special=True)])
    tok.add_tokens([AddedToken("hello world", normalized=True),
                    AddedToken("<tag>", single_word=True, normalized=False),
                    AddedToken("ok", rstrip=True, lstrip=True, normalized=False),
                    AddedToken("été", normalized=True)])
    tok.decoder = decoders.Sequence([decoders.BPEDecoder(suffix="</w>"),
                                     decoders.Replace("##", ""),
                                     decoders.Metaspace(replacement="▁", prepend_scheme="first")])
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


def synth_bytelevel(texts):
    """GPT-2 style ByteLevel with its regex and prefix space after Split steps of every
    behaviour, ignore_merges, NFKC, Roberta post-processor."""
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"),
        pre_tokenizers.Split(Regex(r"[.!?]+"), "merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[(\[{<]"), "merged_with_next"),
        pre_tokenizers.Split(Regex(r"\s*\n"), "contiguous"),
        pre_tokenizers.Split(Regex(r"\t+"), "removed"),
        pre_tokenizers.Split("|", "isolated", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    train(tok, texts, 1000, ["<s>", "</s>", "<pad>"],
          initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.add_special_tokens([AddedToken("<|special|>", special=True),
                            AddedToken("<mask>", lstrip=True, rstrip=False, special=True)])
    tok.add_tokens([AddedToken("<think>", normalized=False, rstrip=True),
                    AddedToken("ＡＢＣ", normalized=True),
                    AddedToken("word", single_word=True, normalized=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                                      ("<s>", tok.token_to_id("<s>")))
    return tok


def synth_whitespace(texts):
    """Whitespace + CharDelimiterSplit + WhitespaceSplit, NFC + regex Replace, WordPiece
    decoder, template with BOS and EOS."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFC(),
                                           normalizers.Replace(Regex(r"[0-9]"), "#")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.CharDelimiterSplit("-"), pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Whitespace()])
    train(tok, texts, 600, ["<unk>", "<bos>", "<eos>"], limit_alphabet=200)
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>",
        special_tokens=[("<bos>", tok.token_to_id("<bos>")), ("<eos>", tok.token_to_id("<eos>"))])
    return tok


SYNTHETIC = {"spm_bpe": synth_spm_bpe, "metaspace": synth_metaspace,
             "bytelevel": synth_bytelevel, "whitespace": synth_whitespace}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = parser.parse_args()
    texts = tokenizer_corpus.corpus()
    print(f"corpus: {len(texts)} strings", file=sys.stderr)

    real = [("qwen3", os.path.join(args.shared, "tokenizers", "qwen3"), "shared:tokenizers/qwen3"),
            ("deepseek-v3", os.path.join(args.shared, "tokenizers", "deepseek-v3"),
             "shared:tokenizers/deepseek-v3"),
            ("tiny", os.path.join(ROOT, "tests", "data", "tiny-qwen3"), "tests/data/tiny-qwen3")]
    for name, model_dir, source in real:
        path = os.path.join(model_dir, "tokenizer.json")
        if not os.path.exists(path):
            print(f"{name}: {path} missing, skipped", file=sys.stderr)
            continue
        tok = Tokenizer.from_file(path)
        with open(os.path.join(model_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        specials = transformers4_specials(tok, config) or specials_from_post_processor(tok, texts)
        version = cross_check_transformers(model_dir, tok, texts, *specials)
        goldens(name, tok, source, texts, specials, {"transformers_checked": version})

    train_texts = texts + tokenizer_corpus.random_strings(count=300, seed=99)
    for name, build in SYNTHETIC.items():
        tok = build(train_texts)
        out = os.path.join(SYNTH_DIR, name)
        os.makedirs(out, exist_ok=True)
        tok.save(os.path.join(out, "tokenizer.json"), pretty=False)
        tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        goldens(f"synthetic_{name}", tok, f"tests/data/tokenizer/synthetic/{name}", texts,
                specials_from_post_processor(tok, texts), {})


if __name__ == "__main__":
    main()
