"""The course's own data for a Scale: its tokenizer and its pretraining sets, built once and cached.

Everything here takes the Scale its caller resolved (CLI, figures, a lesson's first cell); nothing
reads the environment. The tokenizer is cached under cache_dir()/tokenizers/ and each pretraining
set under cache_dir()/pretraining/, both by a hash of their inputs and settings, so the first call
builds (seconds to minutes) and later calls, in any process, load.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import sentencepiece as spm

from ..corpus import COURSE_CORPUS_SHA256, documents
from ..download import cache_dir, read_checked, write_checked
from ..pretraining_data import COURSE_SEED, PretrainingDataset, build_examples, documents_digest, examples_key
from ..pretraining_dataset import check_inputs
from ..segments import OFFICIAL
from ..tokenizer import TOKENIZER_FORMAT, Tokenizer
from .scale import Data

# The tokenizers shipped with the package (minialbert/tokenizers/<corpus>-<vocab_size>.model), each
# trained by `train_course_tokenizer` on the whole train split of its corpus, so the course never
# retrains them: (corpus, vocab_size) -> (sha256 of the file, sha256 of the corpus it was trained on).
# `python -m minialbert tokenizer --verify` retrains one and compares the bytes.
SHIPPED_TOKENIZERS = {
    ("course", 4000): ("9b6d3744b4d96af7088f2dcd3f50ee410ac7401f7407ace0412528e4d073b9bd",
                       "e3c06e05fcae40e687acbc7fb370e3012fdf405d802497528131f624ac611f74"),
}
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "tokenizers"


def shipped_tokenizer_path(data: Data) -> Path | None:
    """Where the set's shipped tokenizer lives (None: none is shipped for its corpus and vocabulary)."""
    if data.max_documents is not None or (data.corpus, data.vocab_size) not in SHIPPED_TOKENIZERS:
        return None
    return SHIPPED_DIR / f"{data.corpus}-{data.vocab_size}.model"


def _shipped(data: Data) -> Tokenizer | None:
    """The shipped tokenizer for the scale, checked against its recorded sha256."""
    if (path := shipped_tokenizer_path(data)) is None:
        return None
    digest = SHIPPED_TOKENIZERS[data.corpus, data.vocab_size][0]
    content = path.read_bytes() if path.is_file() else b""
    if hashlib.sha256(content).hexdigest() != digest:
        raise ValueError(f"the shipped tokenizer {path} is {'damaged' if content else 'missing'} (its sha256 "
                         f"is not the recorded {digest[:12]}...); restore it from the repository "
                         f"(git checkout -- {path.name}, in its folder) or reinstall minialbert")
    return Tokenizer(content)


def train_course_tokenizer(data: Data, docs: list | None = None) -> Tokenizer:
    """SentencePiece trained on the train split of the set's corpus (deterministic: same bytes);
    docs: that split, where the caller has already read it."""
    docs = documents(data.corpus, "train", data.max_documents) if docs is None else docs
    try:
        return Tokenizer.train((s for d in docs for s in d.sentences), data.vocab_size, seed=0)
    except ValueError as e:
        raise ValueError(f"cannot train the course tokenizer (vocab_size {data.vocab_size} on {len(docs)} "
                         f"{data.corpus} documents): {e}") from e


def course_tokenizer_path(data: Data, docs: list | None = None) -> Path | None:
    """Where course_tokenizer caches the set's trained tokenizer (None: a shipped one is used): named by
    a hash of its settings and of the train split's sentences (docs: that split, where already read)."""
    if shipped_tokenizer_path(data) is not None:
        return None
    docs = documents(data.corpus, "train", data.max_documents) if docs is None else docs
    key = hashlib.sha256()
    key.update(json.dumps({"vocab_size": data.vocab_size, "seed": 0, "format": TOKENIZER_FORMAT,
                           "sentencepiece": spm.__version__}).encode())
    for d in docs:
        for s in d.sentences:
            key.update(s.encode() + b"\n")
    return cache_dir() / "tokenizers" / f"{data.corpus}-{data.vocab_size}-{key.hexdigest()[:16]}.model"


def course_tokenizer(data: Data) -> Tokenizer:
    """The course tokenizer from `data`: the shipped one where there is one, else SentencePiece trained
    on the train split of the set's corpus, once, and cached by a hash of its input and settings."""
    if (tok := _shipped(data)) is not None:
        return tok
    docs = documents(data.corpus, "train", data.max_documents)
    path = course_tokenizer_path(data, docs)
    if (proto := read_checked(path)) is not None:   # None: missing or damaged (then reported)
        try:
            tok = Tokenizer(proto)                      # checks the special ids
            if tok.vocab_size == data.vocab_size:
                return tok
            problem = f"holds {tok.vocab_size} pieces, not the {data.vocab_size} its settings ask for"
        except ValueError as e:
            problem = str(e)
        warnings.warn(f"tokenizer cache {path} is damaged: it {problem}; rebuilding it", stacklevel=2)
    tok = train_course_tokenizer(data, docs)
    write_checked(path, tok.model_proto)
    return tok


def corpus_digest(data: Data, split: str) -> str:
    """A hash naming the text of one split from `data`: the recorded hash of the pinned course corpus
    (so nothing needs to be read), else a hash of the documents themselves."""
    if data.corpus == "course":
        return f"{COURSE_CORPUS_SHA256}:{split}:{data.max_documents}"
    return documents_digest(documents(data.corpus, split, data.max_documents))


def pretraining_data_key(objective: str, split: str, data: Data, balance_lengths: bool = False,
                         segmenting: str = OFFICIAL, max_seq_len: int | None = None) -> str:
    """The key of course_pretraining_data's examples, known without building them (the zoo's keys)."""
    return examples_key(corpus_digest(data, split), course_tokenizer(data), objective,
                        max_seq_len or data.max_seq_len,
                        COURSE_SEED, data.dupe_factor, data.mask_rate, balance_lengths, data.data_shards,
                        segmenting)


def course_pretraining_data(objective: str, split: str, data: Data, balance_lengths: bool = False,
                            workers: int | None = None, segmenting: str = OFFICIAL,
                            max_seq_len: int | None = None, inputs: str | None = None) -> PretrainingDataset:
    """The course's pretraining set for one objective and split from `data`, from the set's corpus.

    balance_lengths: keep only `length_balanced` pairs (the NSP vs SOP ablation's cue-free SOP arm).
    workers: processes building a scale with data_shards (None: every core; the same bytes for any).
    segmenting: how documents are cut (segments.SEGMENTINGS; the official code's by default).
    max_seq_len: tokens per example (None: the set's, its preset's positions).
    inputs: for objective "mlm" only, read this sentence objective's pairs ("nsp" or "sop") with their
        labels dropped (None: single segments, as the official code's MLM-only data).
    """
    check_inputs(objective, inputs)
    docs = documents(data.corpus, split, data.max_documents)
    max_seq_len = max_seq_len or data.max_seq_len
    examples = build_examples(docs, course_tokenizer(data), inputs or objective, max_seq_len, COURSE_SEED,
                              dupe_factor=data.dupe_factor, mask_rate=data.mask_rate,
                              balance_lengths=balance_lengths, digest=corpus_digest(data, split),
                              shards=data.data_shards, workers=workers, segmenting=segmenting)
    return examples.without_sentence_labels() if inputs else examples
