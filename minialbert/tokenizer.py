"""SentencePiece tokenizer with ALBERT's conventions, trained from scratch or loaded.

ALBERT uses a 30k SentencePiece unigram model with fixed special ids (<pad>=0, <unk>=1,
[CLS]=2, [SEP]=3, [MASK]=4) on text that is lower-cased, NFKD-normalised and stripped of
accents before SentencePiece sees it. We train the same kind of model on our corpus and can
also load the official `spiece.model` files.

BERT checkpoints ship a WordPiece `vocab.txt` instead; WordPieceTokenizer reads it and tokenizes
as BERT's uncased tokenizer does, so the course text can be fed to a BERT model too.
"""

from __future__ import annotations

import io
import operator
import string
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm
import torch

from .config import CLS_ID, MASK_ID, PAD_ID, SEP_ID, UNK_ID
from .download import atomic_write

PAD, UNK, CLS, SEP, MASK = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_PIECES = {PAD_ID: PAD, UNK_ID: UNK, CLS_ID: CLS, SEP_ID: SEP, MASK_ID: MASK}
WORD_START = "\u2581"                       # "▁": SentencePiece's marker for a preceding space
TOKENIZER_FORMAT = 2                        # bump when training settings change: invalidates caches


def normalize(text: str) -> str:
    """ALBERT's text preprocessing: collapse whitespace, NFKD, drop accents, lower-case."""
    text = " ".join(text.split()).replace("``", '"').replace("''", '"')
    if text.isascii():                       # NFKD leaves ASCII as it is, and it has no accents to drop
        return text.lower()
    text = unicodedata.normalize("NFKD", text)
    return "".join(c for c in text if not unicodedata.combining(c)).lower()


def _checked_text(text: str) -> str:
    """text, or ValueError if it is not a str SentencePiece can take (UTF-8 encodable)."""
    if not isinstance(text, str):
        raise ValueError(f"expected text (a str), got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"text holds {text[e.start]!r} at position {e.start}, an unpaired surrogate that "
                         "is not valid Unicode text; remove or replace it") from None
    return text


def _checked_ids(ids: Iterable[int], vocab_size: int) -> list[int]:
    """ids as a list of ints, or ValueError if one is not an integer or not in [0, vocab_size)."""
    try:
        ids = [operator.index(i) for i in ids]
    except TypeError:
        raise ValueError(f"token ids must be integers, got {list(ids)[:5]}") from None
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise ValueError(f"token ids {bad[:5]} are outside the vocabulary [0, {vocab_size})")
    return ids


def pair_layout(a: list[int], b: list[int] | None, max_len: int, cls_id: int,
                sep_id: int) -> tuple[list[int], list[int]]:
    """`[CLS] a [SEP] b [SEP]` ids and token types (0 for CLS, a, SEP; 1 for b, SEP), for both tokenizers.

    If too long, ids are removed from the end of the longer segment (a when they tie) until the
    result has max_len ids. a and b are lists of ids without special tokens; they are not modified.
    """
    a, b = list(a), None if b is None else list(b)
    n_special = 2 if b is None else 3
    if max_len < n_special + (0 if b is None else 1) + 1:
        raise ValueError(f"max_len {max_len} leaves no room for the segments after "
                         f"{n_special} special tokens")
    while len(a) + len(b or ()) + n_special > max_len:
        (a if b is None or len(a) >= len(b) else b).pop()
    ids = [cls_id] + a + [sep_id]
    types = [0] * len(ids)
    if b is not None:
        ids += b + [sep_id]
        types += [1] * (len(b) + 1)
    return ids, types


class Tokenizer:
    """A SentencePiece model plus ALBERT's special ids, normalisation and pair layout."""

    def __init__(self, model_proto: bytes):
        self.sp = spm.SentencePieceProcessor()
        try:
            self.sp.LoadFromSerializedProto(model_proto)
        except (RuntimeError, OSError) as e:
            raise ValueError(f"not a SentencePiece model ({e}); pass a .model file written by "
                             "Tokenizer.save or an official ALBERT spiece.model") from e
        self.model_proto = model_proto
        wrong = {i: self.sp.id_to_piece(i) for i, p in SPECIAL_PIECES.items()
                 if i >= self.sp.get_piece_size() or self.sp.id_to_piece(i) != p}
        if wrong:
            raise ValueError(f"SentencePiece model has the wrong special pieces {wrong}; ALBERT needs "
                             f"{SPECIAL_PIECES}. Train one with Tokenizer.train or use an ALBERT "
                             "spiece.model")
        self.special_ids = set(SPECIAL_PIECES)

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int, path: Path | None = None,
              seed: int = 0) -> Tokenizer:
        """Train a unigram model on `sentences` (normalised here, in the order given).

        Deterministic: fixed input order, no sampling or shuffling of sentences, one thread and a
        fixed seed, so two trainings on the same input give byte-identical models.
        """
        if vocab_size <= len(SPECIAL_PIECES):
            raise ValueError(f"vocab_size {vocab_size} is too small; it must exceed the "
                             f"{len(SPECIAL_PIECES)} special pieces")
        spm.set_random_generator_seed(seed)
        model = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=(normalize(s) for s in sentences), model_writer=model,
                model_type="unigram", vocab_size=vocab_size, character_coverage=1.0,
                pad_id=PAD_ID, unk_id=UNK_ID, bos_id=-1, eos_id=-1, pad_piece=PAD, unk_piece=UNK,
                control_symbols=[CLS, SEP, MASK],
                # every lower-case printable ASCII character gets a piece, so ASCII never maps to <unk>
                required_chars="".join(sorted(set(string.printable.lower()) - set(string.whitespace))),
                input_sentence_size=0, shuffle_input_sentence=False, num_threads=1,
                minloglevel=2)
        except RuntimeError as e:
            raise ValueError(f"SentencePiece training failed: {str(e).rstrip('.')}. A smaller vocab_size "
                             "or a larger corpus usually fixes this") from e
        tok = cls(model.getvalue())
        if path is not None:
            tok.save(path)
        return tok

    @classmethod
    def load(cls, path: Path) -> Tokenizer:
        """Load a .model file (ours or an official ALBERT spiece.model)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer model at {path}; train one with Tokenizer.train or "
                                    "use course_tokenizer()")
        try:
            return cls(path.read_bytes())
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e

    def save(self, path: Path) -> Path:
        """Write the model atomically (temp file in the same directory, then rename)."""
        return atomic_write(Path(path), self.model_proto)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"Tokenizer(vocab_size={self.vocab_size})"

    def encode(self, text: str) -> list[int]:
        """Token ids of normalised text, without special tokens."""
        return self.sp.encode(normalize(_checked_text(text)))

    def pieces(self, text: str) -> list[str]:
        """The pieces (strings) that encode(text) produces."""
        return self.sp.encode(normalize(_checked_text(text)), out_type=str)

    def checked_ids(self, ids: Iterable[int]) -> list[int]:
        """ids as a list of ints, or ValueError if one is not an integer or not in the vocabulary."""
        return _checked_ids(ids, self.vocab_size)

    def decode(self, ids: Iterable[int]) -> str:
        """Text from ids; <pad>, [CLS] and [SEP] are skipped, [MASK] is shown as '[MASK]'."""
        ids = self.checked_ids(ids)
        words, run = [], []
        for i in ids + [MASK_ID]:                   # a trailing [MASK] flushes the last run
            if i == MASK_ID:
                if run:
                    words.append(self.sp.decode(run))
                words.append(MASK)
                run = []
            elif i not in (PAD_ID, CLS_ID, SEP_ID):
                run.append(i)
        return " ".join(w for w in words[:-1] if w)

    def id_to_piece(self, i: int) -> str:
        return self.sp.id_to_piece(self.checked_ids([i])[0])

    def piece_to_id(self, piece: str) -> int:
        return self.sp.piece_to_id(piece)

    def encode_pair(self, a: str | list[int], b: str | list[int] | None = None,
                    max_len: int = 512) -> tuple[list[int], list[int]]:
        """`[CLS] A [SEP] B [SEP]` ids and token types (0 for CLS, A, SEP; 1 for B, SEP).

        If too long, tokens are removed from the end of the longer segment first (as BERT does, except
        that on a tie BERT cuts B and we cut A), so the result has at most max_len tokens.
        """
        a = self.encode(a) if isinstance(a, str) else self.checked_ids(a)
        b = None if b is None else self.encode(b) if isinstance(b, str) else self.checked_ids(b)
        return pair_layout(a, b, max_len, CLS_ID, SEP_ID)

    def word_start_mask(self) -> torch.Tensor:
        """(vocab_size,) bool: True for pieces that begin a word ('▁...'), False for special ids.

        Whole-word masking groups a word-start piece with the continuation pieces after it.
        """
        mask = torch.tensor([self.sp.id_to_piece(i).startswith(WORD_START) for i in range(self.vocab_size)])
        mask[sorted(self.special_ids)] = False
        return mask


# ---------------------------------------------------------------------------------- WordPiece (BERT)
MAX_WORD_CHARS = 100                        # BERT: a longer word is [UNK] without trying to split it
WORDPIECE_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _is_control(char: str) -> bool:
    """Unicode "other" (Cc, Cf, Cs, Co, Cn), except the tab and newlines BERT treats as whitespace."""
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_punctuation(char: str) -> bool:
    """Unicode punctuation (P*) or any ASCII non-letter, non-digit symbol, such as $, + and ^."""
    cp = ord(char)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126
            or unicodedata.category(char).startswith("P"))


def _is_cjk(char: str) -> bool:
    """A CJK ideograph (the Unified Ideographs blocks, not Hangul or kana): BERT makes each one a word."""
    cp = ord(char)
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_words(text: str, lowercase: bool = True) -> list[str]:
    """BERT's "basic tokenization": text -> words, before WordPiece splits them.

    "Héllo,  WORLD! 中文" -> ["hello", ",", "world", "!", "中", "文"] (lowercase=True).
    """
    text = "".join(" " if _is_whitespace(c) else c for c in text
                   if not (c == "\ufffd" or _is_control(c)))           # drop control chars and U+FFFD
    text = "".join(f" {c} " if _is_cjk(c) else c for c in text)      # each ideograph is its own word
    if lowercase:                                                    # lower-case, then drop accents
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    words = []
    for chunk in text.split():                                       # split on whitespace ...
        word = ""
        for c in chunk:                                              # ... and around every punctuation
            if _is_punctuation(c):
                words += [word, c] if word else [c]
                word = ""
            else:
                word += c
        if word:
            words.append(word)
    return words


class WordPieceTokenizer:
    """BERT's WordPiece tokenizer, read from a checkpoint's vocab.txt (one token per line; id = line number).

    Same interface as Tokenizer where the analysis needs it: encode, pieces, decode, vocab_size and
    encode_pair. Special tokens are never produced from text ("[MASK]" in text is "[", "mask", "]").
    Gives transformers' BertTokenizer ids, except on characters newer than Python's Unicode tables and on
    a word-final "Σ" (str.lower makes it "ς", as BERT's own Python code does; transformers makes it "σ").
    """

    def __init__(self, tokens: list[str], lowercase: bool = True):
        self.tokens = tokens                                          # id -> token
        self.vocab = {t: i for i, t in enumerate(tokens)}             # token -> id (a repeat: the last id)
        self.lowercase = lowercase
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self.vocab[t] for t in WORDPIECE_SPECIALS)
        self.special_ids = {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id}

    @classmethod
    def load(cls, path: Path, lowercase: bool = True) -> WordPieceTokenizer:
        """Load a BERT vocab.txt; lowercase=True for the uncased models (bert-base-uncased, ...)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no WordPiece vocabulary at {path}; pass a BERT checkpoint's vocab.txt")
        try:
            tokens = path.read_text(encoding="utf-8").removesuffix("\n").split("\n")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not a WordPiece vocabulary (not UTF-8 text: {e})") from None
        missing = [t for t in WORDPIECE_SPECIALS if t not in tokens]
        if missing:
            raise ValueError(f"{path}: WordPiece vocabulary lacks the special tokens {', '.join(missing)}; "
                             f"BERT needs {', '.join(WORDPIECE_SPECIALS)}")
        return cls(tokens, lowercase)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"WordPieceTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase})"

    def _word_pieces(self, word: str) -> list[str]:
        """Greedy longest-match-first: "unaffable" -> ["un", "##aff", "##able"]; ["[UNK]"] if stuck."""
        if len(word) > MAX_WORD_CHARS:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:                            # the longest piece in the vocabulary wins
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    break
                end -= 1
            else:
                return ["[UNK]"]                          # no piece matches here: the whole word is unknown
            pieces.append(piece)
            start = end
        return pieces

    def pieces(self, text: str) -> list[str]:
        """The WordPiece tokens of text, without special tokens."""
        return [p for w in basic_words(_checked_text(text), self.lowercase) for p in self._word_pieces(w)]

    def encode(self, text: str) -> list[int]:
        """Token ids of text, without special tokens."""
        return [self.vocab[p] for p in self.pieces(text)]

    def checked_ids(self, ids: Iterable[int]) -> list[int]:
        """ids as a list of ints, or ValueError if one is not an integer or not in the vocabulary."""
        return _checked_ids(ids, self.vocab_size)

    def decode(self, ids: Iterable[int]) -> str:
        """Tokens joined by spaces, each "##" piece glued to the one before; special tokens are kept."""
        return " ".join(self.tokens[i] for i in self.checked_ids(ids)).replace(" ##", "")

    def encode_pair(self, a: str | list[int], b: str | list[int] | None = None,
                    max_len: int = 512) -> tuple[list[int], list[int]]:
        """`[CLS] A [SEP] B [SEP]` ids and token types, truncated as Tokenizer.encode_pair does."""
        a = self.encode(a) if isinstance(a, str) else self.checked_ids(a)
        b = None if b is None else self.encode(b) if isinstance(b, str) else self.checked_ids(b)
        return pair_layout(a, b, max_len, self.cls_id, self.sep_id)
