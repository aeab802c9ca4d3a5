"""Trains the three tokenizer styles with HF `tokenizers` and returns tokenizer.json text.

- byte-level BPE in the Llama-3 style (Llama-3 split regex, merges ignored for whole-vocab words,
  BOS added by a TemplateProcessing post-processor, specials appended after the vocabulary);
- byte-level BPE in the Qwen2 style (NFC, the Qwen2 regex with single digits, no BOS);
- SentencePiece-style BPE in the Llama-2 / Mistral style: `▁` for spaces via the legacy
  normalizer (Prepend + Replace, no pre-tokenizer), byte fallback to <0x00>..<0xFF>, and a
  merge list that lists every split of every piece ranked by the piece's score, so a
  score-driven SPM merger (llama.cpp) and the rank-driven HF BPE agree;
- the same in the Gemma style: Gemma's specials first, no space prepended (Replace only,
  and Gemma's no-op Split pre-tokenizer), no Strip in the decoder.

Training runs on one thread (RAYON_NUM_THREADS=1 is set before `tokenizers` is imported) so
that the output is byte-identical from run to run.
"""

import json
import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer  # noqa: E402
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPM_SPACE = "\u2581"


def _byte_level_pre_tokenizer(pattern: str) -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _train_byte_level(docs: list[str], pattern: str, vocab_size: int, ignore_merges: bool,
                      normalizer) -> Tokenizer:
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = _byte_level_pre_tokenizer(pattern)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(docs, trainer=trainer)
    if tok.get_vocab_size() != vocab_size:
        raise RuntimeError(f"corpus too small: trained {tok.get_vocab_size()} of {vocab_size} tokens")
    return tok


def _add_tokens(tok: Tokenizer, tokens: list[tuple[str, bool]]) -> None:
    """Appends added tokens in order; each is (content, special)."""
    for content, special in tokens:
        added = AddedToken(content, single_word=False, lstrip=False, rstrip=False,
                           normalized=False, special=special)
        if special:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])


def llama3_special_tokens(num_reserved_total: int) -> list[str]:
    """Llama-3's special-token block: named ones at Llama-3's offsets, the rest reserved."""
    named = {
        0: "<|begin_of_text|>", 1: "<|end_of_text|>", 4: "<|finetune_right_pad_id|>",
        6: "<|start_header_id|>", 7: "<|end_header_id|>", 8: "<|eom_id|>", 9: "<|eot_id|>",
        10: "<|python_tag|>",
    }
    out, reserved = [], 0
    for i in range(num_reserved_total):
        if i in named:
            out.append(named[i])
        else:
            out.append(f"<|reserved_special_token_{reserved}|>")
            reserved += 1
    return out


def train_llama3(docs: list[str], vocab_size: int, num_specials: int) -> str:
    tok = _train_byte_level(docs, LLAMA3_PATTERN, vocab_size, ignore_merges=True, normalizer=None)
    _add_tokens(tok, [(t, True) for t in llama3_special_tokens(num_specials)])
    bos = "<|begin_of_text|>"
    bos_id = tok.token_to_id(bos)
    tok.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single=f"{bos}:0 $A:0",
                pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                special_tokens=[(bos, bos_id)],
            ),
        ]
    )
    return tok.to_str(pretty=True)


QWEN2_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", True), ("<|fim_middle|>", True), ("<|fim_suffix|>", True),
]


def train_qwen2(docs: list[str], vocab_size: int) -> str:
    tok = _train_byte_level(docs, QWEN2_PATTERN, vocab_size, ignore_merges=False,
                            normalizer=normalizers.NFC())
    _add_tokens(tok, QWEN2_ADDED)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok.to_str(pretty=True)


MISTRAL_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]


def _byte_token(b: int) -> str:
    return f"<0x{b:02X}>"


def _complete_spm_merges(vocab: dict[str, int], first_piece_id: int) -> list[list[str]]:
    """Every (left, right) split of every piece whose halves are pieces, ranked by the piece id.

    A piece's SPM score is -(id - first_piece_id), so ranking merges by product id is the
    same order in which llama.cpp's SPM merger (highest score first) would build pieces.
    """
    merges = []
    for piece, pid in vocab.items():
        if pid < first_piece_id or len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            lid, rid = vocab.get(left), vocab.get(right)
            if lid is None or rid is None or lid < first_piece_id or rid < first_piece_id:
                continue
            merges.append((pid, lid, rid, left, right))
    merges.sort()
    return [[m[3], m[4]] for m in merges]


def _spm_training_segments(docs: list[str], limit_alphabet: int) -> list[str]:
    """Lines in SentencePiece form, cut at characters outside the kept alphabet.

    SentencePiece trains on lines (so newlines and other controls end up as byte fallback)
    and keeps only its most frequent characters; rarer ones become byte tokens, and no piece
    may span them. The trainer's own limit_alphabet breaks frequency ties in hash order, so
    the alphabet is chosen here, with ties broken by code point.
    """
    lines = []
    for doc in docs:
        for line in doc.replace("\r", "").replace("\t", " ").split("\n"):
            if line.strip():
                lines.append(SPM_SPACE + line.replace(" ", SPM_SPACE))
    counts = {}
    for line in lines:
        for ch in line:
            counts[ch] = counts.get(ch, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    kept = {ch for ch, _ in ranked[:limit_alphabet]} | {SPM_SPACE}
    segments = []
    for line in lines:
        current = []
        for ch in line:
            if ch in kept:
                current.append(ch)
            elif current:
                segments.append("".join(current))
                current = []
        if current:
            segments.append("".join(current))
    return segments


GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]


def train_mistral(docs: list[str], vocab_size: int, limit_alphabet: int) -> str:
    """SPM-style BPE: ids 0-4 specials, 5-260 byte tokens, then trained pieces."""
    return _train_spm(docs, vocab_size, limit_alphabet, MISTRAL_SPECIALS, "<s>", prepend=True)


def train_gemma(docs: list[str], vocab_size: int, limit_alphabet: int) -> str:
    """Gemma-style SPM BPE: ids 0-5 specials, 6-261 byte tokens, then trained pieces."""
    return _train_spm(docs, vocab_size, limit_alphabet, GEMMA_SPECIALS, "<bos>", prepend=False)


def _train_spm(docs: list[str], vocab_size: int, limit_alphabet: int, specials: list[str],
               bos: str, prepend: bool) -> str:
    num_pieces = vocab_size - len(specials) - 256
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Training only: split before each `▁` so that no piece spans a word boundary, as
    # SentencePiece does with split_by_whitespace. The saved tokenizer has no pre-tokenizer.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPM_SPACE, prepend_scheme="never")
    trainer = trainers.BpeTrainer(
        vocab_size=num_pieces, min_frequency=2, show_progress=False, special_tokens=[]
    )
    tok.train_from_iterator(_spm_training_segments(docs, limit_alphabet), trainer=trainer)
    trained = json.loads(tok.to_str())["model"]["vocab"]
    if len(trained) != num_pieces:
        raise RuntimeError(f"corpus too small: trained {len(trained)} of {num_pieces} pieces")

    vocab = {t: i for i, t in enumerate(specials)}
    for b in range(256):
        vocab[_byte_token(b)] = len(vocab)
    first_piece_id = len(vocab)
    for piece, _ in sorted(trained.items(), key=lambda kv: kv[1]):
        vocab[piece] = len(vocab)
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for i, t in enumerate(specials)
        ],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": SPM_SPACE},
                {"type": "Replace", "pattern": {"String": " "}, "content": SPM_SPACE},
            ],
        } if prepend else {"type": "Replace", "pattern": {"String": " "}, "content": SPM_SPACE},
        "pre_tokenizer": None if prepend else {
            "type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
            "invert": False,
        },
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPM_SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ] + ([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if prepend else []),
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": _complete_spm_merges(vocab, first_piece_id),
        },
    }
    text = json.dumps(spec, ensure_ascii=False, indent=2)
    Tokenizer.from_str(text)  # Validates the hand-built spec.
    return text
