"""A small Qwen2-style byte-level BPE tokenizer for the tiny test checkpoints.

Trained with the `tokenizers` library on a built-in corpus (English, code, Chinese, emoji, digits)
so that multi-byte merges exist, then assembled with the same pipeline Qwen2/Qwen3 ship in their
tokenizer.json: NFC normalizer, Split(regex, Isolated) + ByteLevel(use_regex=False) pre-tokenizer,
ByteLevel post-processor and decoder, and the ChatML special tokens appended after the BPE vocab.
Imported by make_tiny_models.py; not meant to be run on its own.
"""

import json
import os
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import processors, trainers

# Qwen2's pre-tokenization pattern (transformers' Qwen2Tokenizer / Qwen's tokenizer.json).
QWEN2_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Same order and ids-after-the-vocab layout as Qwen (151643, 151644, 151645 there).
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Size of the BPE part (256 byte symbols + merges); the specials come on top of it.
BPE_VOCAB_SIZE = 509

CHAT_TEMPLATE_FILE = Path(__file__).resolve().parent / "templates" / "qwen2.5_chat_template.jinja"

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog was not amused, and the fox ran away.",
    "Once upon a time, there was a little model that wanted to predict the next token.",
    "It read the same sentence again and again, until the words started to make sense.",
    "Hello, world! How are you today? I'm fine, thanks. We'll see what they've done.",
    "Large language models are trained on text; inference engines run them fast on CPUs.",
    "The attention layer computes softmax(QK^T / sqrt(d)) V for every head in the layer.",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 2024 3.14159 -7 1e-6 65536",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for i in range(10):\n    print(i, i * i)\n",
    "class Tokenizer:\n    def __init__(self, vocab):\n        self.vocab = vocab\n\n"
    "    def encode(self, text):\n        return [self.vocab[t] for t in text.split()]\n",
    "int main(int argc, char** argv) {\n  std::vector<int> v = {1, 2, 3};\n"
    "  for (int x : v) std::printf(\"%d\\n\", x);\n  return 0;\n}\n",
    "import numpy as np\nx = np.zeros((4, 4), dtype=np.float32)\nprint(x.sum())\n",
    '{"role": "user", "content": "What is the capital of France?"}',
    "system: You are a helpful assistant.\nuser: Hello there!\nassistant: Hello! How can I help you?",
    "user: Tell me a story.\nassistant: Sure. Once upon a time, a helpful assistant met a user.",
    "你好，世界！今天天气很好。我们一起去公园散步吧。",
    "人工智能正在改变世界。语言模型可以回答问题、写代码和翻译文本。",
    "中文分词和字节级编码：每个汉字通常占三个字节。",
    "Emoji time 😀😃😄 🚀✨ 👍 ❤️ 🎉 — café, naïve, résumé, Straße, Ελληνικά, русский текст.",
    "Bonjour le monde! Hola, ¿cómo estás? Guten Tag. こんにちは、世界。안녕하세요.",
]

# Repeat the corpus so that merges have real counts; more copies of the multi-byte lines so that
# Chinese and emoji byte sequences win some merges.
CORPUS_REPEATS = 4


def _training_lines():
    lines = []
    for _ in range(CORPUS_REPEATS):
        lines.extend(CORPUS)
    for line in CORPUS:
        if any(ord(c) > 0x2E80 for c in line):
            lines.extend([line] * 2)
    return lines


def build_tokenizer() -> Tokenizer:
    """Trains the BPE deterministically and returns the assembled tokenizer."""
    # One worker: the trainer's result does not depend on thread scheduling anyway, but this
    # removes any doubt.
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"

    bpe = models.BPE(
        dropout=None,
        unk_token=None,
        continuing_subword_prefix="",
        end_of_word_suffix="",
        fuse_unk=False,
        byte_fallback=False,
    )
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(
        add_prefix_space=False, trim_offsets=False, use_regex=False
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)

    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(_training_lines(), trainer=trainer)
    # Specials go after the BPE vocab, like Qwen's; normalized=False so NFC never touches them.
    tok.add_special_tokens(
        [
            AddedToken(t, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
            for t in SPECIAL_TOKENS
        ]
    )
    return tok


def tokenizer_json(tok: Tokenizer) -> dict:
    """The tokenizer.json dict, with BPE model fields spelled exactly as Qwen's file has them."""
    data = json.loads(tok.to_str())
    model = data["model"]
    model["continuing_subword_prefix"] = ""
    model["end_of_word_suffix"] = ""
    model["dropout"] = None
    model["unk_token"] = None
    model["fuse_unk"] = False
    model["byte_fallback"] = False
    model["ignore_merges"] = False
    # The Python binding's ByteLevel decoder ignores its constructor flags; they do not change
    # decoding, but spell them as Qwen's file does.
    data["decoder"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return data


def tokenizer_config(tok: Tokenizer, model_max_length: int) -> dict:
    """tokenizer_config.json as Qwen2.5-Instruct ships it (ChatML, eos <|im_end|>, no bos)."""
    decoder = {}
    for t in SPECIAL_TOKENS:
        decoder[str(tok.token_to_id(t))] = {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE_FILE.read_text(encoding="utf-8"),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": model_max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
