"""Sharded pretraining sets (pretraining_data.build_examples with shards > 0): built on every core,
the same bytes for any number of worker processes."""

from __future__ import annotations

import pytest
import torch

from minialbert.corpus import documents
from minialbert.course.data import course_pretraining_data, course_tokenizer, pretraining_data_key
from minialbert.course.scale import SCALES
from minialbert.pretraining_data import COURSE_SEED, build_examples, examples_key

CI = SCALES["ci"]


@pytest.fixture(scope="module")
def docs_and_tokenizer():
    return documents(CI.data.corpus, "train", 120), course_tokenizer(CI.data)


@pytest.mark.parametrize("objective", ["sop", "nsp", "mlm"])
def test_two_workers_build_the_bytes_of_one(docs_and_tokenizer, objective):
    docs, tok = docs_and_tokenizer
    built = {workers: build_examples(docs, tok, objective, 64, COURSE_SEED, dupe_factor=2, cache=False,
                                     shards=5, workers=workers)
             for workers in (1, 2)}
    one, two = built[1], built[2]
    assert len(one) > 100 and one.checksum() == two.checksum()
    assert torch.equal(one.document_ids, two.document_ids)
    # shards in order, each its documents' examples: document ids never go back, and cover the docs
    ids = one.document_ids
    assert ids.min() == 0 and ids.max() < len(docs) and ids.unique().numel() > len(docs) // 2
    single = build_examples(docs, tok, objective, 64, COURSE_SEED, dupe_factor=2, cache=False)
    assert single.checksum() != one.checksum()                  # another layout: its own cache key
    assert abs(len(single) - len(one)) < 0.2 * len(single)      # about as many examples


def test_shards_name_their_own_cache_and_leave_the_one_stream_keys(docs_and_tokenizer):
    _, tok = docs_and_tokenizer
    args = ("digest", tok, "sop", 64, COURSE_SEED, 10, 0.15, False)
    assert examples_key(*args) == examples_key(*args, 0) != examples_key(*args, 64)
    assert SCALES["course"].data.data_shards == 0 and SCALES["gpu"].data.data_shards > 0


def test_course_pretraining_data_builds_a_sharded_scale_in_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    scale = CI.replace(max_documents=60, data_shards=4)
    data = course_pretraining_data("sop", "train", scale.data, workers=2)
    (cached,) = (tmp_path / "pretraining").glob("sop-*.safetensors")
    assert pretraining_data_key("sop", "train", scale.data)[:24] in cached.name
    reread = course_pretraining_data("sop", "train", scale.data, workers=1)
    assert reread.checksum() == data.checksum()  # read
