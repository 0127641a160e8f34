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

import sentencepiece as spm

from .download import cache_dir, read_checked, write_checked
from .pretraining_data import COURSE_SEED, PretrainingDataset, build_examples
from .pydocs import package_documents, pydocs_documents
from .scale import Scale
from .tokenizer import TOKENIZER_FORMAT, Tokenizer


def course_tokenizer(scale: Scale) -> Tokenizer:
    """The course tokenizer: SentencePiece trained on the pydocs train split at `scale`."""
    docs = pydocs_documents("train", max_documents=scale.max_documents)
    sentences = [s for d in docs for s in d.sentences]
    key = hashlib.sha256()
    key.update(json.dumps({"vocab_size": scale.vocab_size, "seed": 0, "format": TOKENIZER_FORMAT,
                           "sentencepiece": spm.__version__}).encode())
    for s in sentences:
        key.update(s.encode() + b"\n")
    path = cache_dir() / "tokenizers" / f"pydocs-{scale.vocab_size}-{key.hexdigest()[:16]}.model"
    if (proto := read_checked(path)) is not None:   # None: missing or damaged (then reported)
        try:
            tok = Tokenizer(proto)                      # checks the special ids
            if tok.vocab_size == scale.vocab_size:
                return tok
            problem = f"holds {tok.vocab_size} pieces, not the {scale.vocab_size} its settings ask for"
        except ValueError as e:
            problem = str(e)
        warnings.warn(f"tokenizer cache {path} is damaged: it {problem}; rebuilding it", stacklevel=2)
    try:
        tok = Tokenizer.train(sentences, scale.vocab_size, seed=0)
    except ValueError as e:
        raise ValueError(f"cannot train the course tokenizer for scale {scale.name!r} "
                         f"(vocab_size {scale.vocab_size} on {len(docs)} pydocs documents): {e}") from e
    write_checked(path, tok.model_proto)
    return tok


def course_pretraining_data(objective: str, split: str, scale: Scale,
                            balance_lengths: bool = False) -> PretrainingDataset:
    """The course's pretraining set for one objective and split at `scale`.

    The train split adds the docstrings of the scale's packages (held-out splits stay stdlib prose):
    the sweep found the stdlib's 220k words too few for a model to learn more than memorising them.
    balance_lengths: keep only `length_balanced` pairs (the NSP vs SOP ablation's cue-free SOP arm).
    """
    documents = pydocs_documents(split, scale.max_documents)
    if split == "train":
        documents = documents + package_documents(split, scale.packages)   # never extend a cached list
    return build_examples(documents, course_tokenizer(scale), objective, scale.max_seq_len, COURSE_SEED,
                          dupe_factor=scale.dupe_factor, mask_rate=scale.mask_rate,
                          balance_lengths=balance_lengths)
