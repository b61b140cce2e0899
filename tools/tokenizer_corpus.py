"""The text corpus behind the tokenizer goldens (tools/make_tokenizer_goldens.py).

Deterministic: hand-written strings for every script and edge case the issue lists, plus
strings drawn with a fixed seed from character pools that mix them. Also used by
tools/bench_tokenizer_python.py and bench/tokenizer_bench.cpp's data file to build the
~10 MB benchmark text.
"""

import random

ENGLISH = [
    "Hello world",
    "Hello, world! How are you doing today?",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine, but we've seen what you'd do.",
    "DON'T SHOUT: IT'S LOUD AND THEY'RE LISTENING, I'LL SAY.",
    "It's a dog's life; the dogs' bowls are empty.",
    "''quoted'' and 'single' and \"double\" and `backtick`",
    "e.g. i.e. etc. Mr. Smith vs. Mrs. Jones & co.",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_CASE",
    "https://example.com/path/to/page?query=1&other=two#fragment",
    "user@example.org, +1 (555) 123-4567, 221B Baker Street",
    "Price: $1,234.56 (20% off) - was €1.500,00; now £999.99!",
    "Wait... what?! No way!!! Really???",
    "A sentence with    multiple   spaces and a trailing space ",
    " leading space",
    "  two leading spaces",
    "tab\tseparated\tvalues\there",
    "line one\nline two\nline three",
    "windows\r\nline\r\nendings\r\n",
    "mixed \r\n\t whitespace \n\n\n three blank lines",
    "a\n\nb\n\n\nc\n\n\n\nd",
    "The year 2024 had 366 days; 1999 had 365.",
    "Version 3.14.159 released on 2025-01-31 at 23:59:59Z",
    "It costs 1000000 dollars, or 1,000,000.00 USD, or 1e6.",
    "Call 0800 123 456 or 911.",
    "Roman numerals: XIV, MMXXV; ordinals: 1st, 2nd, 3rd, 4th.",
    "What's 'S? It's 'S and 's and 'T and 'Re and 'VE and 'LL and 'D and 'M.",
    "naïve café résumé coöperate jalapeño façade",
    "Ångström Ørsted Æsir Œuvre straße",
]

CHINESE = [
    "你好，世界！",
    "今天天气很好，我们去公园散步吧。",
    "人工智能是计算机科学的一个分支。",
    "深度学习模型需要大量的数据进行训练。",
    "《红楼梦》是中国古典四大名著之一。",
    "他说：“我明天再来。”",
    "一二三四五六七八九十百千万亿",
    "中文标点：，。、；：？！“”‘’（）【】《》",
    "混合English和中文的句子，包含123个数字。",
    "繁體中文與簡體中文的區別在於字形。",
    "龘靐齉爩 — rare characters",
    "这是一个很长的句子，用来测试分词器在处理较长中文文本时的表现，其中包含了各种常见的汉字和标点符号。",
]

JAPANESE = [
    "こんにちは、世界！",
    "日本語の文章を分かち書きします。",
    "カタカナとひらがなと漢字が混ざっています。",
    "ｶﾀｶﾅ ﾊﾝｶｸ half-width katakana",
    "東京都渋谷区で会議があります。",
    "「すみません、駅はどこですか？」",
    "ラーメン、寿司、天ぷら、うどん",
    "ゔ ゕ ゖ ゟ ゠ ヷ ヸ ヹ ヺ ー",
    "が ぎ ぐ (composed) vs か\u3099 き\u3099 く\u3099 (combining)",
    "令和7年1月1日",
]

KOREAN = [
    "안녕하세요, 세계!",
    "한국어 문장을 토큰화합니다.",
    "대한민국의 수도는 서울입니다.",
    "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af (conjoining jamo)",
    "ㄱㄴㄷㄹ ㅏㅑㅓㅕ compatibility jamo",
    "오늘 날씨가 정말 좋네요 ㅎㅎ ㅋㅋㅋ",
    "한글과 English, 그리고 123.",
    "가나다라마바사아자차카타파하",
]

ARABIC = [
    "مرحبا بالعالم",
    "اللغة العربية جميلة جدا.",
    "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ",
    "الأرقام: ١٢٣٤٥٦٧٨٩٠",
    "\u200fنص من اليمين إلى اليسار\u200f with LTR",
    "فارسی: سلام دنیا، حال شما چطور است؟ ۱۲۳",
    "עברית: שלום עולם",
    "ﷺ ﷽ ligatures",
]

HINDI = [
    "नमस्ते दुनिया",
    "हिन्दी भारत की राजभाषा है।",
    "क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़ (precomposed nukta)",
    "क\u093c ख\u093c ग\u093c (combining nukta)",
    "संस्कृतम् वाक्यम्",
    "अंक: ०१२३४५६७८९",
    "বাংলা ভাষা, தமிழ் மொழி, ગુજરાતી, ਪੰਜਾਬੀ, ಕನ್ನಡ, മലയാളം",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Русский язык: Съешь же ещё этих мягких французских булок.",
    "Ελληνικά: Γειά σου Κόσμε, ΣΊΣΥΦΟΣ",
    "Tiếng Việt: Xin chào thế giới, người Việt",
    "Tie\u0302\u0301ng Vie\u0323\u0302t (decomposed)",
]

EMOJI = [
    "😀😃😄😁😆",
    "I ❤️ Unicode 🎉🎊",
    "👨‍👩‍👧‍👦 family",
    "👩🏽‍💻 technologist, 👍🏻👍🏼👍🏽👍🏾👍🏿",
    "🏳️‍🌈 🏴‍☠️ flags 🇺🇸🇨🇳🇯🇵🇩🇪",
    "1️⃣ 2️⃣ #️⃣ *️⃣ keycaps",
    "🫨🩷🪿 newer emoji (Unicode 15)",
    "🧑‍🤝‍🧑 people holding hands",
    "❤\ufe0f vs ❤\ufe0e variation selectors",
    "emoji🙂inside🙃words",
    "☃ ☂ ☀ ★ ☆ ♠ ♣ ♥ ♦ ✓ ✗ → ← ↑ ↓ ∞ ≠ ≤ ≥",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙 𝓢𝓬𝓻𝓲𝓹𝓽",
]

COMBINING = [
    "e\u0301 a\u0300 o\u0302 u\u0308",
    "a\u0300\u0301\u0302\u0303\u0304",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319a\u0310\u0315lg\u0352o\u0306",
    "\u0301 leading combining mark",
    "\u212b angstrom sign, \u2126 ohm sign, \u212a kelvin",
    "ﬁ ﬂ ﬀ ligatures, ² ³ ¹ superscripts, ½ ¼ ¾ fractions",
    "ＡＢＣ ａｂｃ １２３ full-width",
    "\u00c5 vs A\u030a",
    "s\u0323\u0307 vs s\u0307\u0323 (canonical order)",
    "\u0f73 \u0f75 \u0f81 tibetan",
]

CODE = [
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += v[i];\n}",
    "#include <iostream>\nint main() { std::cout << \"hi\\n\"; }",
    "const x = {a: 1, b: [2, 3], 'c': \"d\"};",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name;",
    "<html><body><div class=\"x\">Hello &amp; bye</div></body></html>",
    "{\"key\": \"value\", \"list\": [1, 2.5, true, null], \"nested\": {\"a\": {}}}",
    "$ ls -la | grep '.cpp$' && echo done || exit 1",
    "regex: ^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.\\w{2,}$",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares",
    "    indented\n        more indented\n            most",
    "if (a && b || !c) { return a->b.c[d]; }",
    "| col1 | col2 |\n|------|------|\n| 1    | 2    |",
    "$$\\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2}$$",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "diff --git a/f.py b/f.py\n@@ -1,3 +1,4 @@\n-old\n+new",
    "0x1F600 0b1010 0o755 1_000_000 3.0e-10",
    "print(f\"{name!r:>10}\")",
    "\\n \\t \\\\ \\u00e9 escaped sequences",
    "...---...   ===   +++   ***   ///   \\\\\\",
]

DIGITS = [
    "1234567890",
    "12345678901234567890123456789012345678901234567890",
    "3.14159265358979323846264338327950288419716939937510",
    "0000000000000000",
    "9" * 64,
    "2^64 = 18446744073709551616",
    "١٢٣٤٥٦٧٨٩٠ ۱۲۳۴۵۶۷۸۹۰ ०१२३४५६७८९ ১২৩",
    "１２３４５６７８９０",
    "abc123def4567ghi89012",
    "Ⅰ Ⅱ Ⅲ Ⅳ roman numeral letters, ① ② ③ circled",
    "12:34:56.789 -273.15 +42 1/2 3/4",
]

WHITESPACE = [
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "    ",
    " " * 40,
    "\t\t\t\t",
    "\n\n\n\n\n",
    "\r\n\r\n\r\n",
    " \n \n ",
    "a \t b",
    "hello   ",
    "   hello",
    "x\u00a0y nbsp",
    "x\u3000y ideographic space",
    "x\u0085y next line",
    "x\u2028y\u2029z line and paragraph separators",
    "x\u200by zero width space",
    "\ufeffbyte order mark",
    "x\u000by\u000cz vertical tab form feed",
    "x\u2002y\u2003z\u2009w en em thin spaces",
    "\u180e mongolian vowel separator",
    "trailing newline\n",
    "  \n\t  \r\n  mixed  \t\n",
]

SPECIAL = [
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "text<|endoftext|>text",
    " <|im_start|> spaced <|im_end|> ",
    "<|im_start|partial and <|im_end| partial",
    "<|im_start|><|im_end|><|im_start|>",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<|vision_start|><|image_pad|><|vision_end|>describe",
    "<｜begin▁of▁sentence｜>Hello",
    "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>hello<｜end▁of▁sentence｜>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "<｜begin▁of▁sentence｜> <｜end▁of▁sentence｜>",
    "before<｜end▁of▁sentence｜>after",
    "<s>[INST] hi [/INST]</s>",
    "[CLS] [SEP] [MASK] [UNK] [PAD]",
    "<unk><s></s>",
    "<0x41><0xE4><0xB8><0xAD>",
    "<|IM_START|> <|Im_End|> case variants",
]

EDGE = [
    "a",
    "A",
    "'",
    "'s",
    "''s",
    "\\",
    "\"",
    "\x00\x01\x02\x1f\x7f control characters",
    "\x7f\x80\x9f C1 controls",
    "\ufffd replacement char",
    "\U0010ffff\U000e0001 plane 16 and tags",
    "\ue000\uf8ff private use",
    "a" * 300,
    "ab" * 150,
    "你" * 120,
    "!" * 80,
    "😀" * 30,
    "-" * 100,
    "=" * 70 + "\n" + "=" * 70,
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "A.B.C.D.E.F",
    "mixedCASEwithNUMBERS123andSYMBOLS!@#",
]

PARAGRAPH = (
    "Large language models tokenize text into subword units before processing. "
    "大型语言模型在处理之前会将文本切分成子词单元。"
    "大規模言語モデルは処理の前にテキストをサブワード単位に分割します。"
    "대규모 언어 모델은 처리하기 전에 텍스트를 하위 단어 단위로 토큰화합니다. "
    "تقوم نماذج اللغة الكبيرة بتقسيم النص إلى وحدات فرعية. "
    "बड़े भाषा मॉडल पाठ को उप-शब्द इकाइयों में विभाजित करते हैं। "
    "Emoji 🤖🧠📚 and code `tokenize(text)` with numbers 1234567 and symbols <>[]{}."
)

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    " \t\n\r   ",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年",
    "あいうえおかきくけこアイウエオカキクケコ日本語",
    "가나다라마바사아자차카타파하한국어",
    "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
    "कखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसह",
    "\u0300\u0301\u0302\u0308\u093c\u0951\u05b0",
    "😀🎉👍🏽‍♂️❤️🇺🇸",
    "’“”…—–•€£¥",
    "<|im_start|><|im_end|><｜User｜>",
]


def random_strings(count=70, seed=1234):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        length = rng.randint(1, 60)
        pools = rng.sample(POOLS, rng.randint(1, 4))
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(length)))
    return out


def corpus():
    groups = [ENGLISH, CHINESE, JAPANESE, KOREAN, ARABIC, HINDI, EMOJI, COMBINING, CODE,
              DIGITS, WHITESPACE, SPECIAL, EDGE, [PARAGRAPH, PARAGRAPH * 3]]
    texts = [t for g in groups for t in g] + random_strings()
    seen, out = set(), []
    for t in texts:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


# Inputs that are not valid UTF-8; tokenizers see them decoded with errors="replace".
INVALID_UTF8 = [
    b"\xff",
    b"abc\x80def",
    b"\xe4\xb8",
    b"\xe4\xb8a",
    b"\xe4\xb8\xad\xe4",
    b"\xed\xa0\x80 surrogate",
    b"\xf0\x9f\x98 truncated emoji",
    b"\xc0\xaf overlong",
    b"\xe0\x80\xaf overlong 3",
    b"\xf4\x90\x80\x80 above max",
    b"\xf8\x88\x80\x80\x80 five bytes",
    b"\x80\x80\x80\xbf",
    b"ok \xe2\x82 \xe2\x82\xac euro",
    b"<|im_start|>\xfe\xfe<|im_end|>",
    b"\xf0\x90\x80",
    b"\xc2",
]


def bench_text(target_bytes=10 * 1024 * 1024):
    """Mixed text for the encode benchmark: the corpus repeated with a varying seed."""
    parts, size, seed = [], 0, 0
    base = corpus()
    while size < target_bytes:
        rng = random.Random(seed)
        chunk = base + random_strings(count=70, seed=1000 + seed)
        rng.shuffle(chunk)
        text = "\n".join(chunk) + "\n"
        parts.append(text)
        size += len(text.encode("utf-8"))
        seed += 1
    return "".join(parts)
