"""Text corpus for tokenizer parity tests and benchmarks.

CASES is a list of str (valid text) and bytes (possibly invalid UTF-8) covering many
scripts, code, emoji, whitespace runs, digits, contractions, special-token strings typed in
text and combining characters. Deterministic: no randomness without a fixed seed.
"""
import random

SCRIPTS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "Ça va? Élève, naïve café, façade, jalapeño, Größe, Straße, ÅÄÖ åäö, Ørsted, œuvre",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Привет, как дела? Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "مرحبا بالعالم! كيف حالك؟ ١٢٣٤٥",
    "שלום עולם! מה שלומך?",
    "नमस्ते दुनिया! आप कैसे हैं? क्षत्रिय",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "你好，世界！今天天气很好。我们去公园散步吧。",
    "繁體中文測試：資訊、電腦、網際網路",
    "안녕하세요 세계! 한국어 텍스트입니다. 각각의 음절",
    "こんにちは世界！ひらがなとカタカナ、漢字。ｶﾀｶﾅ",
    "Tiếng Việt có dấu: Nguyễn, Trường, được, người",
    "ᚠᛇᚻ᛫ᛒᛦᚦ ⠁⠃⠉ ∀x∈ℝ: x²≥0 ∑∫∂ ≠ ≤ ≥ ± × ÷",
    "ÀÉÎÕÜ àéîõü ÿ Ŧ ŉ ǅ ǈ ǋ ǲ İstanbul ıi",
    "ﬁ ﬂ ㎏ ① Ⅻ ½ ™ ℃ ｆｕｌｌｗｉｄｔｈ",
]

CODE = [
    "def foo(x):\n    return x * 2\n\n\nif __name__ == '__main__':\n    print(foo(21))\n",
    "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v.size() > 2 ? 0 : 1;\n}\n",
    '{"name": "switchyard", "version": 1.5, "tags": ["a", "b"], "nested": {"x": null, "y": true}}',
    "<!DOCTYPE html>\n<html><body class=\"main\"><p>Hi &amp; bye</p><br/></body></html>",
    "SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';",
    "fn main() { let x: Vec<u8> = vec![0xFF; 16]; println!(\"{:?}\", x); }",
    "    indented\n\t\ttabs\r\nwindows\rmac\n\n\n",
    "a=b&&c||d!=e<=f>=g->h::i...j",
    "https://example.com/path?query=1&other=two#frag",
    "user@example.org, @mention #hashtag $100 50% ^_^ ~/path\\to\\file",
]

EMOJI = [
    "😀😃😄 🙈🙉🙊",
    "👍🏻👍🏼👍🏽👍🏾👍🏿",
    "👨‍👩‍👧‍👦 👩‍💻 🏳️‍🌈 🧑🏽‍🚀",
    "🇺🇸🇫🇷🇯🇵🇩🇪 flags",
    "I ❤️ Python 🐍 and C++ ⚡",
    "♠♣♥♦ ☀☁☂ ✓✗ ★☆",
]

WHITESPACE = [
    "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t\t", "a  b", "a   b",
    "a\tb", "a \t b", "trailing   ", "   leading", "  both  ", "line1\nline2\n", "x\n\n\ny",
    " " * 40, "\n" * 20, "word" + " " * 17 + "word", "mixed \t\n \t\n end", "a\u3000b",
    "nbsp\u00a0here", "\u2028line sep", "zero\u200bwidth", "\u00a0\u00a0", " \u00a0 ",
]

DIGITS = [
    "1", "12", "123", "1234", "1234567", "12345678901234567890", "3.14159", "0.5", "-42",
    "1,000,000", "1e10", "2024-01-15", "12:34:56", "v1.2.3", "abc123def", "x1y22z333",
    "٣٤٥", "１２３", "½ ⅓ ²", "$1,234.56", "+1 (555) 123-4567",
]

CONTRACTIONS = [
    "it's", "IT'S", "don't", "DON'T", "we're", "they've", "I'm", "you'll", "YOU'LL", "he'd",
    "'s", "'ll", "o'clock", "rock'n'roll", "It'S WeIrD", "'twas", "don’t (curly)",
]

SPECIALS = [
    "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>",
    "<|im_start|>user\nhi<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<s>hello</s>",
    "a<s>b", "text <s> text", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning\n</think>", "<tool_call>{\"a\": 1}</tool_call>", "<|fim_prefix|>x<|fim_suffix|>",
    "<|begin_of_text|><|begin_of_text|>", "< s >", "<|notatoken|>", "<<s>>",
    # Gemma 3: turn markers, image tokens, HTML tags and whitespace runs as added tokens.
    "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<bos><eos><pad>",
    "<start_of_image><image_soft_token><end_of_image>", "<unused0> <unused99>x",
    "<table><tr><th>a</th></tr></table>", "<b>bold</b> <em>em</em> </footer>",
    "x> </y a>  </b",
    "\t\t\t\t\t\t\t\t\t\t\t\t\tdeep", "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\nx",
    # DeepSeek V3: full-width bars and U+2581 inside special tokens; CJK and digit splits.
    "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>", "<｜tool▁calls▁begin｜><｜tool▁sep｜>",
    "<｜fim▁begin｜>a<｜fim▁hole｜>b<｜fim▁end｜>", "<|EOT|>", "<｜end▁of▁sentence｜>",
    "中文ひらがなカタカナ12345한국", "'s 'T'Re", "!Hello #tag .dotted",
    # gpt-oss (harmony): channel markers; case-sensitive word splits.
    "<|start|>assistant<|channel|>analysis<|message|>ok<|end|>", "<|return|><|call|><|constrain|>",
    "HTTPServer McDonald's iPhone XMLHttpRequest ABCdef DEFghi's", "path/to/file\r\n/next",
]

COMBINING = [
    "e\u0301", "a\u0300\u0301", "o\u0308\u0304", "\u1100\u1161\u11a8", "n\u0303", "A\u030a",
    "\u0041\u0301\u0328", "Å vs Å", "\u212b", "q\u0307\u0323", "\u0301start", "x\u20d7",
    "ﾊﾟ", "\u0915\u093c", "\u05d1\u05bc", "ḱṷṓn",
]

MIXED = [
    "Hello 世界! Привет 🌍 مرحبا",
    "The price is €100 (≈$108) — cheap!",
    "Email: test@example.com; Tel: +49 30 1234567",
    "Mixed\tTabs and    spaces\n\nand newlines",
    "CamelCaseIdentifier snake_case_identifier kebab-case-identifier SCREAMING_CASE",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS !@#",
    "....!!!???,,,;;;:::---___===+++",
    "''''\"\"\"```",
    "a" * 300,
    "ab" * 150,
    "=" * 100,
    "🙂" * 30,
    "中" * 50,
]

INVALID_UTF8 = [
    b"\xff", b"abc\xff\xfedef", b"\xc3", b"caf\xc3", b"\xe2\x82", b"\xe2\x82x", b"\xf0\x9f\x98",
    b"\xed\xa0\x80", b"\xc0\xaf", b"\x80\x80\x80", b"ok \xf4\x90\x80\x80 ok", b"\xf0\x9f\x98\x80\xff",
    b"<s>\xff</s>", b"\xef\xbf\xbd already replaced",
]


def _variants(texts):
    out = []
    for t in texts:
        out.append(t)
        if t:
            out.append(" " + t)
            out.append(t + "\n")
    return out


def _random_mixtures(n, seed=1234):
    rng = random.Random(seed)
    pool = SCRIPTS + CODE + EMOJI + DIGITS + CONTRACTIONS + SPECIALS + COMBINING
    seps = ["", " ", "  ", "\n", "\t", " \n", "\n\n"]
    out = []
    for _ in range(n):
        parts = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
        out.append("".join(p + rng.choice(seps) for p in parts))
    return out


CASES = (_variants(SCRIPTS + CODE + EMOJI + WHITESPACE + DIGITS + CONTRACTIONS + SPECIALS +
                   COMBINING + MIXED) + _random_mixtures(120) + INVALID_UTF8)


def bench_text(target_bytes=2_000_000):
    """A few MB of mixed text built from the corpus, one document per line."""
    lines = []
    size = 0
    rng = random.Random(99)
    pool = [c for c in SCRIPTS + CODE + EMOJI + DIGITS + CONTRACTIONS + MIXED]
    while size < target_bytes:
        doc = " ".join(rng.choice(pool) for _ in range(8)).replace("\n", " ")
        lines.append(doc)
        size += len(doc.encode()) + 1
    return "\n".join(lines) + "\n"


def _text_files(root, suffixes, max_bytes):
    """Sorted regular files under `root` with one of `suffixes`, decoded as UTF-8."""
    import pathlib
    root = pathlib.Path(root)
    if not root.is_dir():
        return
    for path in sorted(root.rglob("*")):
        if path.suffix not in suffixes or not path.is_file() or path.is_symlink():
            continue
        if path.stat().st_size > max_bytes:
            continue
        try:
            yield path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue


def _multilingual_documents(rng, count):
    """Paragraphs of shuffled words from the multilingual samples: varied, not one line."""
    words = [w for s in SCRIPTS + MIXED[:4] + CONTRACTIONS for w in s.split()]
    out = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(3, 12)):
            sentences.append(" ".join(rng.choice(words) for _ in range(rng.randint(4, 20))))
        out.append(". ".join(sentences) + ".\n")
    return out


def realistic_documents(target_bytes=4_000_000):
    """Several MB of distinct real documents: Python sources of the installed packages
    (code), text from /usr/share/doc (prose), and shuffled multilingual paragraphs, as a list
    of documents in a deterministic order. Duplicate files (vendored copies) are dropped, so
    the word cache sees a realistic, non-repetitive vocabulary."""
    import hashlib
    import pathlib
    import sys
    rng = random.Random(2024)
    seen = set()

    def take(docs, budget):
        out, size = [], 0
        for doc in docs:
            if size >= budget:
                break
            digest = hashlib.sha1(doc.encode()).digest()
            if not doc.strip() or digest in seen:
                continue
            seen.add(digest)
            out.append(doc)
            size += len(doc.encode())
        return out

    site = pathlib.Path(sys.prefix) / "lib"
    site = next(iter(sorted(site.glob("python3*/site-packages"))), site)
    code = take(_text_files(site, {".py"}, 64_000), target_bytes * 0.5)
    prose = take(_text_files("/usr/share/doc", {".txt", ".md", ".rst"}, 64_000),
                 target_bytes * 0.4)
    multi = _multilingual_documents(rng, max(1, int(target_bytes * 0.1) // 900))
    docs = code + prose + multi
    rng.shuffle(docs)
    return docs
