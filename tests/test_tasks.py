"""Downstream tasks: the offline tasks are deterministic, balanced as documented and leak no sentence
from the training documents; GLUE's TSV layouts load from small files written here."""

import hashlib
import io
import random
import zipfile
from collections import Counter

import pytest
from test_download import loopback_server

from minialbert import glue
from minialbert.corpus import pydocs_documents
from minialbert.course.commands import main
from minialbert.course.experiments.tasks import _shuffle_words, _swap_adjacent_words, load_task
from minialbert.course.scale import SCALES
from minialbert.download import DownloadError
from minialbert.glue import PinnedFile, download_glue
from minialbert.labelled_task import SPLITS, Example

CI = SCALES["ci"]             # the embedded corpus, 300 documents per split
MAX_DOCUMENTS = CI.data.max_documents


@pytest.fixture(scope="module", params=["word-order", "shuffled-words", "shuffled-inner-words",
                                        "next-sentence"])
def task(request):
    return load_task(request.param, CI.data)


def test_deterministic(task):
    again = load_task(task.name, CI.data)
    for split in SPLITS:
        assert task.split(split) == again.split(split)


def test_balanced_as_documented(task):
    for split in SPLITS:
        counts = Counter(ex.label for ex in task.split(split))
        assert counts[0] == counts[1] > 100, (split, counts)
    baseline = task.majority_baseline("dev")
    assert baseline["accuracy"] == 0.5 and baseline["matthews"] == 0.0
    described = task.describe()
    assert described["sizes"] == {s: len(task.split(s)) for s in SPLITS}
    assert described["label_balance"]["dev"] == {task.labels[0]: 0.5, task.labels[1]: 0.5}


def test_no_held_out_sentence_occurs_in_a_training_document(task):
    train_sentences = {s for d in pydocs_documents("train") for s in d.sentences}
    train_texts = {t for ex in task.train for t in (ex.text_a, ex.text_b) if t is not None}
    for split in ("dev", "test"):
        held_out = {t for ex in task.split(split) for t in (ex.text_a, ex.text_b) if t is not None}
        assert not held_out & train_texts, split
        if task.name == "next-sentence":        # word-order's swapped sentences are new text anyway
            assert not held_out & train_sentences, split
    assert set(task.removed_overlap) == {"dev", "test"}


def test_word_order_classes_hold_the_same_words():
    task = load_task("word-order", CI.data)
    originals = {s for d in pydocs_documents("train", MAX_DOCUMENTS) for s in d.sentences}
    intact = [ex.text_a for ex in task.train if ex.label == 1]
    swapped = [ex.text_a for ex in task.train if ex.label == 0]
    assert all(s in originals for s in intact[:200])
    assert not any(s in originals for s in swapped[:200])      # a swap always changes the text
    assert len(set(intact) | set(swapped)) == len(task.train)   # each example its own sentence
    sentence = "The quick brown fox jumps over the lazy dog."
    out = _swap_adjacent_words(sentence, random.Random(0))
    assert sorted(out.split()) == sorted(sentence.split()) and out != sentence
    assert out.split()[0] == "The" and out.split()[-1] == "dog."   # first and last words stay
    assert _swap_adjacent_words("Too short here.", random.Random(0)) is None


@pytest.mark.parametrize("name", ["shuffled-words", "shuffled-inner-words"])
def test_shuffled_words_keep_the_words(name):
    task = load_task(name, CI.data)
    originals = {s for d in pydocs_documents("train", MAX_DOCUMENTS) for s in d.sentences}
    by_words = {tuple(sorted(s.split())) for s in originals}
    ends = {(s.split()[0], s.split()[-1]) for s in originals}
    for ex in task.train[:300]:
        assert 6 <= len(ex.text_a.split()) <= 14
        assert (ex.text_a in originals) == (ex.label == 1)                      # shuffling changes the text
        assert ex.label == 1 or tuple(sorted(ex.text_a.split())) in by_words    # ... not its words
    shuffled = [ex.text_a.split() for ex in task.train if ex.label == 0]
    kept_ends = sum((w[0], w[-1]) in ends for w in shuffled) / len(shuffled)
    assert kept_ends == 1.0 if name == "shuffled-inner-words" else kept_ends < 0.5


def test_shuffle_words():
    sentence = "The quick brown fox jumps over the lazy dog."
    for seed in range(20):
        inner = _shuffle_words(sentence, random.Random(seed), keep_ends=True).split()
        assert inner != sentence.split() and sorted(inner) == sorted(sentence.split())
        assert inner[0] == "The" and inner[-1] == "dog."
        every = _shuffle_words(sentence, random.Random(seed), keep_ends=False).split()
        assert every != sentence.split() and sorted(every) == sorted(sentence.split())
    assert _shuffle_words("A b b c.", random.Random(0), keep_ends=True) is None     # nothing can move
    assert _shuffle_words("b b", random.Random(0), keep_ends=False) is None


def test_next_sentence_pairs_come_from_one_document():
    task = load_task("next-sentence", CI.data)
    places = {}                                  # sentence -> [(document, position)]: some repeat
    for d in pydocs_documents("train", MAX_DOCUMENTS):
        for i, s in enumerate(d.sentences):
            places.setdefault(s, []).append((d.title, i))
    for ex in task.train[:300]:
        pairs = [(i, j) for doc_a, i in places[ex.text_a] for doc_b, j in places[ex.text_b] if doc_a == doc_b]
        assert any((j == i + 1) if ex.label == 1 else (j >= i + 2) for i, j in pairs), ex
    assert len({ex.text_a for ex in task.train}) > 0.95 * len(task.train)   # anchors are (nearly) unique
    documents = pydocs_documents("train", MAX_DOCUMENTS)
    for ex in task.train[:300]:               # each pair names its document: test intervals resample them
        assert {ex.text_a, ex.text_b} <= set(documents[ex.document].sentences), ex
    assert all(ex.document is None for ex in load_task("shuffled-words", CI.data).test)  # independent items


def test_subset_is_seeded_and_stratified(task):
    sample = task.subset(16, seed=3)
    assert sample == task.subset(16, seed=3) and sample != task.subset(16, seed=4)
    assert Counter(ex.label for ex in sample) == {0: 8, 1: 8}
    assert len(task.subset(None)) == len(task.train)
    with pytest.raises(ValueError, match=f"has {len(task.train)} training examples; --labels must be"):
        task.subset(len(task.train) + 1)


def test_unknown_task_and_missing_glue_dir(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown task 'sst-3'; choose one of word-order, shuffled-words"):
        load_task("sst-3")
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="run `python -m minialbert tasks --download sst2`"):
        load_task("sst2")


# ---------------------------------------------------------------------------------- GLUE files
GLUE_FILES = {
    "sst2": ("SST-2", "sentence\tlabel\nit 's a charming journey . \t1\nthe plot is thin\t0\n"),
    "cola": ("CoLA", "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n"),
    "mrpc": ("MRPC", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said \"yes\".\tHe agreed.\n"
                     "0\t3\t4\tA cat.\tA dog.\n"),
    "rte": ("RTE", "index\tsentence1\tsentence2\tlabel\n0\tA man runs.\tA person moves.\tentailment\n"
                   "1\tIt rains.\tIt is sunny.\tnot_entailment\n"),
    "stsb": ("STS-B", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
                      "\tscore\n0\tmain\tf\t2012\t1\tnone\tnone\tA plane takes off.\tAn air plane is taking"
                      " off.\t5.000\n1\tmain\tf\t2012\t4\tnone\tnone\tA man plays.\tA dog barks.\t0.250\n"),
}
EXPECTED_FIRST = {"sst2": Example("it 's a charming journey . ", None, 1),
                  "cola": Example("Our friends won't buy this analysis.", None, 1),
                  "mrpc": Example('He said "yes".', "He agreed.", 1),
                  "rte": Example("A man runs.", "A person moves.", 0),
                  "stsb": Example("A plane takes off.", "An air plane is taking off.", 5.0)}


def _write_glue(root, name, text=None):
    folder, content = GLUE_FILES[name]
    (root / folder).mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        (root / folder / f"{split}.tsv").write_text(text or content)


@pytest.mark.parametrize("name", list(GLUE_FILES))
def test_glue_layouts(name, tmp_path):
    _write_glue(tmp_path, name)
    task = load_task(name, glue_dir=tmp_path)
    assert len(task.train) == len(task.dev) == 2 and task.test == []
    assert task.train[0] == EXPECTED_FIRST[name]
    assert task.num_labels == (1 if name == "stsb" else 2)
    assert task.describe()["sizes"] == {"train": 2, "dev": 2, "test": 0}


def test_glue_errors_name_the_file_and_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="SST-2/train.tsv does not exist; run `python -m minialbert"):
        load_task("sst2", glue_dir=tmp_path)
    _write_glue(tmp_path, "sst2", "sentence\tlabel\ngood\t1\nbad\t2\n")
    with pytest.raises(ValueError, match=r"train.tsv, line 3: label '2' is not one of 0, 1"):
        load_task("sst2", glue_dir=tmp_path)
    _write_glue(tmp_path, "rte", "idx\ttext\n0\tx\n")
    with pytest.raises(ValueError, match="no column 'sentence1' in the header"):
        load_task("rte", glue_dir=tmp_path)


# ---------------------------------------------------------------------------------- GLUE downloads
def _zip(members: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return buffer.getvalue()


def _pin(server, monkeypatch, name: str, files: dict[str, bytes]) -> None:
    """Serve `files` from loopback and pin GLUE task `name` to them (URL, size and sha256)."""
    pinned = tuple(PinnedFile(server.serve(f"/{file}", body), len(body), hashlib.sha256(body).hexdigest())
                   for file, body in files.items())
    monkeypatch.setitem(glue.GLUE_DOWNLOADS, name, pinned)


def test_every_glue_task_has_pinned_https_files():
    assert set(glue.GLUE_DOWNLOADS) == set(glue.GLUE)
    for files in glue.GLUE_DOWNLOADS.values():
        for f in files:
            assert f.url.startswith("https://") and f.size > 0 and len(bytes.fromhex(f.sha256)) == 32


def test_download_glue_archive_then_load(tmp_path, monkeypatch):
    folder, content = GLUE_FILES["sst2"]
    archive = _zip({f"{folder}/train.tsv": content, f"{folder}/dev.tsv": content, f"{folder}/test.tsv": "x"})
    with loopback_server() as server:
        _pin(server, monkeypatch, "sst2", {"SST-2.zip": archive})
        assert download_glue("sst2", tmp_path) == tmp_path
        assert download_glue("sst2", tmp_path) == tmp_path          # present: not fetched again
        assert server.hits == {"/SST-2.zip": 1}
    assert sorted(p.name for p in (tmp_path / folder).iterdir()) == ["dev.tsv", "train.tsv"]
    task = load_task("sst2", glue_dir=tmp_path)
    assert task.train[0] == EXPECTED_FIRST["sst2"] and len(task.dev) == 2


def test_download_mrpc_splits_the_corpus_by_glues_dev_pairs(tmp_path, monkeypatch):
    corpus = ("\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
              "1\t10\t11\tHe left.\tHe went away.\r\n0\t12\t13\tA cat.\tA dog.\r\n"
              "1\t14\t15\tIt is red.\tIt's red.\r\n")
    with loopback_server() as server:
        _pin(server, monkeypatch, "mrpc", {"msr_paraphrase_train.txt": corpus.encode(),
                                           "mrpc_dev_ids.tsv": b"12\t13\n"})
        download_glue("mrpc", tmp_path)
    task = load_task("mrpc", glue_dir=tmp_path)
    assert task.dev == [Example("A cat.", "A dog.", 0)]
    assert task.train == [Example("He left.", "He went away.", 1), Example("It is red.", "It's red.", 1)]


def test_download_glue_errors_leave_nothing_behind(tmp_path, monkeypatch):
    with loopback_server() as server:
        _pin(server, monkeypatch, "rte", {"RTE.zip": _zip({"RTE/train.tsv": "x"})})
        pinned = glue.GLUE_DOWNLOADS["rte"][0]
        with pytest.raises(ValueError, match="RTE.zip is not GLUE's RTE archive"):
            download_glue("rte", tmp_path)
        monkeypatch.setitem(glue.GLUE_DOWNLOADS, "rte", (PinnedFile(pinned.url, pinned.size, "0" * 64),))
        with pytest.raises(DownloadError, match="sha256 mismatch"):
            download_glue("rte", tmp_path / "other")
    assert not (tmp_path / "RTE").exists()                      # the archive is kept, no half task
    assert [p.name for p in (tmp_path / "other").rglob("*") if p.is_file()] == []
    with pytest.raises(ValueError, match="unknown GLUE task 'sst3'"):
        download_glue("sst3", tmp_path)


def test_cli_downloads_and_lists_glue(tmp_path, monkeypatch, capsys):
    folder, content = GLUE_FILES["cola"]
    with loopback_server() as server:
        _pin(server, monkeypatch, "cola", {"CoLA.zip": _zip({f"{folder}/train.tsv": content,
                                                             f"{folder}/dev.tsv": content})})
        assert main(["tasks", "--scale", "ci", "--download", "cola", "--glue-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    cola = next(line for line in table.splitlines() if line.startswith("cola"))
    assert cola.split()[1:5] == ["single", "sentence", "2", "2"]
    assert "tasks --download sst2" in table                   # the others say how to get them
