"""The SOP and NSP pairs are cut exactly as google-research/albert's create_pretraining_data.py cuts them.

`official_instances` below is an independent reading of the official `create_instances_from_document`
(FLAGS.random_next_sentence True for NSP, False for SOP; masked_lm_prob 0, which returns before any
random draw), written as the official code is, loop for loop. For the same `random.Random`, our
`sentence_order_pairs` and `next_sentence_pairs` must return the same (A, B, label) instances in the same
order, on random documents, at many lengths and short_seq_prob values; and then leave the generator in
the same state (every draw made, none extra).
"""

from __future__ import annotations

import random

import pytest

from minialbert.pretraining_data import examples_key
from minialbert.segments import (
    OFFICIAL,
    SEGMENTINGS,
    TWO_SENTENCE_CHUNKS,
    check_segmenting,
    next_sentence_pairs,
    sentence_order_pairs,
)


def official_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    while True:
        total_length = len(tokens_a) + len(tokens_b)
        if total_length <= max_num_tokens:
            break
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        assert len(trunc_tokens) >= 1
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def official_instances(all_documents, document_index, max_seq_length, short_seq_prob, rng,
                       random_next_sentence):
    """create_instances_from_document with masking off -> [(tokens_a, tokens_b, is_random_next)]."""
    document = all_documents[document_index]
    max_num_tokens = max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])
                tokens_b = []
                is_random_next = False
                if len(current_chunk) == 1 or (random_next_sentence and rng.random() < 0.5):
                    is_random_next = True
                    target_b_length = target_seq_length - len(tokens_a)
                    for _ in range(10):
                        random_document_index = rng.randint(0, len(all_documents) - 1)
                        if random_document_index != document_index:
                            break
                    random_document = all_documents[random_document_index]
                    random_start = rng.randint(0, len(random_document) - 1)
                    for j in range(random_start, len(random_document)):
                        tokens_b.extend(random_document[j])
                        if len(tokens_b) >= target_b_length:
                            break
                    num_unused_segments = len(current_chunk) - a_end
                    i -= num_unused_segments
                elif not random_next_sentence and rng.random() < 0.5:
                    is_random_next = True
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                    tokens_a, tokens_b = tokens_b, tokens_a
                else:
                    is_random_next = False
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])
                official_truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                assert len(tokens_a) >= 1
                assert len(tokens_b) >= 1
                instances.append((tokens_a, tokens_b, int(is_random_next)))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def random_documents(rng: random.Random, n: int) -> list[list[list[int]]]:
    """n documents of 1-12 sentences of 1-40 tokens (some long enough to fill a chunk alone)."""
    return [[[rng.randrange(5, 1000) for _ in range(rng.choice((rng.randint(1, 12), rng.randint(1, 40))))]
             for _ in range(rng.randint(1, 12))] for _ in range(n)]


@pytest.mark.parametrize("objective", ["sop", "nsp"])
@pytest.mark.parametrize("short_seq_prob", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("max_seq_len", [16, 19, 32, 64, 128])
def test_pairs_are_the_official_scripts(objective, short_seq_prob, max_seq_len):
    documents = random_documents(random.Random(max_seq_len * 7 + int(short_seq_prob * 10)), 60)
    ours_rng, theirs_rng = random.Random(2019), random.Random(2019)
    segmenter = sentence_order_pairs if objective == "sop" else next_sentence_pairs
    ours = segmenter(documents, max_seq_len, ours_rng, short_seq_prob=short_seq_prob)
    theirs = [(a, b, label, d) for d in range(len(documents))
              for a, b, label in official_instances(documents, d, max_seq_len, short_seq_prob, theirs_rng,
                                                    random_next_sentence=objective == "nsp")]
    assert [(s.a, s.b, s.label, s.document) for s in ours] == theirs
    assert ours_rng.random() == theirs_rng.random()             # the same draws, none extra
    assert all(len(s.a) + len(s.b) <= max_seq_len - 3 for s in ours)
    assert all(s.label == 1 for s in ours if s.other_document)          # B from another document: label 1
    assert objective == "sop" or all(s.other_document == (s.label == 1) for s in ours)


def test_official_sop_has_random_document_negatives_and_the_earlier_cut_has_none():
    """A chunk that closes with one sentence takes B from another document, labelled 1, in SOP too."""
    documents = random_documents(random.Random(5), 200)
    official = sentence_order_pairs(documents, 32, random.Random(0))
    earlier = SEGMENTINGS[TWO_SENTENCE_CHUNKS]["sop"](documents, 32, random.Random(0))

    def from_other_document(s):                 # B is no contiguous run of its own document's tokens
        own = [t for sentence in documents[s.document] for t in sentence]
        return not any(own[k:k + len(s.b)] == s.b for k in range(len(own)))

    others = [s for s in official if from_other_document(s)]
    assert len(others) > 0.05 * len(official) and all(s.label == 1 for s in others)
    assert not any(from_other_document(s) for s in earlier)
    # other_document says which: every pair it names, and (B being a run of its own document otherwise)
    # no other, but for the rare B that also occurs in A's document
    assert all(s.other_document for s in others) and not any(s.other_document for s in earlier)
    assert all(from_other_document(s) or s.label == 1 for s in official if s.other_document)
    assert sum(s.other_document for s in official) == len(others)


def test_segmenting_is_in_the_key_of_pairs_but_leaves_the_earlier_keys_as_they_were():
    class Tok:
        model_proto = b"tokenizer"

    def key(objective, segmenting):
        return examples_key("digest", Tok(), objective, 32, 1, 1, 0.15, False, 0, segmenting)

    assert key("sop", OFFICIAL) != key("sop", TWO_SENTENCE_CHUNKS)
    assert key("nsp", OFFICIAL) != key("nsp", TWO_SENTENCE_CHUNKS)
    assert key("mlm", OFFICIAL) == key("mlm", TWO_SENTENCE_CHUNKS)           # MLM alone: one cut
    # the earlier cut's key is the one the shipped zoo entries were built with (no segmenting setting)
    assert key("sop", TWO_SENTENCE_CHUNKS) == examples_key("digest", Tok(), "sop", 32, 1, 1, 0.15, False, 0,
                                                           TWO_SENTENCE_CHUNKS)
    with pytest.raises(ValueError, match="unknown segmenting 'bert'"):
        check_segmenting("bert")
