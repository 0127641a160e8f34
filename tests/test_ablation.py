"""The NSP vs SOP ablation: segment lengths, the length shortcut and its matched set, probes, the CLI."""

import json
import random

import pytest
import torch

from minialbert.course.commands import main
from minialbert.course.data import SHIPPED_DIR, course_tokenizer
from minialbert.course.experiments import ablation, zoo
from minialbert.course.scale import SCALES
from minialbert.masking import MaskingVocab
from minialbert.model import IGNORE_INDEX
from minialbert.pretraining_data import PretrainingDataset, examples_from_token_documents
from minialbert.tokenizer import CLS_ID, MASK_ID, SEP_ID, Tokenizer

TOKENIZER = Tokenizer.load(SHIPPED_DIR / "course-4000.model")


def token_pairs(segments, labels, objective="sop", masked=()):
    """[CLS] A [SEP] B [SEP] examples of the given (A ids, B ids) and sentence labels; the flat positions
    in `masked` show [MASK] (their label the original token)."""
    ids, types, offsets = [], [], [0]
    for a, b in segments:
        ids += [CLS_ID, *a, SEP_ID, *b, SEP_ID]
        types += [0] * (len(a) + 2) + [1] * (len(b) + 1)
        offsets.append(len(ids))
    ids, mlm_labels = torch.tensor(ids), torch.full((len(ids),), IGNORE_INDEX)
    for at in masked:
        mlm_labels[at], ids[at] = ids[at], MASK_ID
    return PretrainingDataset(ids, torch.tensor(types), mlm_labels, torch.tensor(offsets),
                              torch.tensor(labels), objective, 64)


def pairs(lengths, labels, objective="sop"):
    """[CLS] A [SEP] B [SEP] examples with the given (len A, len B) and sentence labels (tokens are 7s)."""
    return token_pairs([([7] * a, [7] * b) for a, b in lengths], labels, objective)


def test_segment_lengths_and_joined_datasets():
    first, second = pairs([(3, 5), (1, 1)], [0, 1]), pairs([(10, 2)], [1])
    both = ablation.joined(first, second)
    assert ablation.segment_lengths(both).tolist() == [[3, 5], [1, 1], [10, 2]]
    assert [int(both[i]["sentence_label"]) for i in range(3)] == [0, 1, 1]
    assert torch.equal(both[2]["input_ids"], second[0]["input_ids"])
    with pytest.raises(ValueError, match="cannot join a sop/64 dataset with a nsp/64"):
        ablation.joined(first, pairs([(1, 1)], [0], "nsp"))


def test_length_shortcut_finds_a_length_cue_and_the_matched_set_removes_it():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 12, (600, 2), generator=g)
    # Label 1 mostly when A is longer: a cue a reader of the lengths alone can use.
    cue = (lengths[:, 0] > lengths[:, 1]).long()
    noise = torch.rand(600, generator=g) < 0.2
    labels = torch.where(noise, 1 - cue, cue)
    train = pairs(lengths[:400].tolist(), labels[:400].tolist())
    test = pairs(lengths[400:].tolist(), labels[400:].tolist())
    found = ablation.length_shortcut(train, test)
    assert found["accuracy"] > 0.7 and found["n"] == 200
    matched = ablation.length_matched(test)
    assert 0 < len(matched) < 200 and len(matched) % 2 == 0
    cells = ablation.segment_lengths(test)[matched].tolist()
    for cell in {tuple(c) for c in cells}:                      # as many of each label in every cell
        at = [i for i, c in zip(matched, cells) if tuple(c) == cell]
        assert sum(int(test.sentence_labels[i]) for i in at) * 2 == len(at)
    assert ablation.length_shortcut(train, test, matched)["accuracy"] == 0.5
    assert ablation.length_matched(test) == matched                  # seeded: the same subset again
    with pytest.raises(ValueError, match="one segment per example"):
        ablation.segment_lengths(PretrainingDataset(torch.tensor([2, 7, 3]), torch.zeros(3, dtype=torch.long),
                                                    torch.full((3,), IGNORE_INDEX), torch.tensor([0, 3]),
                                                    None, "mlm", 64))


def test_shortcut_intervals_resample_documents():
    """Five documents of 40 pairs; the lengths decide every label except in one document, where each is
    flipped. Pairs of one document are not independent: the interval must be as wide as five documents
    allow, not as narrow as 200 pairs would."""
    lengths = [(a, b) for a, b in zip([1, 2, 3, 4, 5] * 40, [3] * 200)]
    cue = [int(a > b) for a, b in lengths]
    train = pairs(lengths, cue)
    flipped = [1 - c if i < 40 else c for i, c in enumerate(cue)]
    test = pairs(lengths, flipped)
    iid = ablation.length_shortcut(train, test)
    test.document_ids = torch.arange(200) // 40
    clustered = ablation.length_shortcut(train, test)
    assert iid["accuracy"] == clustered["accuracy"] == 0.8
    assert iid["ci95"][0] > 0.73 and clustered["ci95"][0] < 0.65
    assert ablation.end_shortcut(train, test, TOKENIZER)["ci95"][0] < 0.65


def test_segment_ends_read_where_each_segment_is_cut():
    encode = TOKENIZER.encode
    segments = [(encode("it works."), encode("call it now")),
                (encode('is it "done."'), encode("yes (see fig. 3).")),          # closing quote, bracket
                (encode("for example:"), encode('it ends. "')),                   # an opening quote: mid
                (encode("what? ok!"), encode("e.g")),
                (encode("x"), encode("."))]                                       # one-piece segments
    expected = [[True, False], [True, True], [True, False], [True, False], [False, True]]
    assert ablation.segment_ends(token_pairs(segments, [0] * 5), TOKENIZER).tolist() == expected
    last_of_a = 1 + len(segments[0][0]) - 1                 # the "." of "it works." shown as [MASK]
    masked = token_pairs(segments, [0] * 5, masked=[last_of_a])
    assert masked[0]["input_ids"][last_of_a] == MASK_ID
    assert ablation.segment_ends(masked, TOKENIZER).tolist() == expected        # the text, not the mask


def test_end_shortcut_measures_the_cut_cue_and_the_matched_set_removes_it():
    word, dot = TOKENIZER.encode("cat")[0], TOKENIZER.piece_to_id(".")
    end, mid = [word, word, dot], [word, word, word]            # the same length, cut differently
    # in order: B (the longer run, truncated) often ends mid-sentence; swapped: A does
    cells = [(end, mid, 0)] * 30 + [(end, end, 0)] * 10 + [(mid, end, 1)] * 30 + [(end, end, 1)] * 10
    data = token_pairs([(a, b) for a, b, _ in cells], [label for *_, label in cells])
    found = ablation.end_shortcut(data, data, TOKENIZER)
    assert found["accuracy"] == 70 / 80 and found["task"] == "sop from segment ends"
    assert found["predicted_shares"] == [50 / 80, 30 / 80] and found["label_shares"] == [0.5, 0.5]
    assert found["cells"] == {"A sentence end, B sentence end": {"n": 20, "label_1_share": 0.5},
                              "A sentence end, B mid-sentence": {"n": 30, "label_1_share": 0.0},
                              "A mid-sentence, B sentence end": {"n": 30, "label_1_share": 1.0},
                              "A mid-sentence, B mid-sentence": {"n": 0, "label_1_share": None}}
    assert json.loads(json.dumps(found)) == found                            # the ablation's JSON holds it
    assert ablation.length_shortcut(data, data)["accuracy"] == 0.5           # the lengths say nothing
    assert ablation.length_matched(data) == list(range(80))                  # so lengths alone keep all
    matched = ablation.length_matched(data, tokenizer=TOKENIZER)             # ends matched too
    assert matched == list(range(30, 40)) + list(range(70, 80))
    assert ablation.end_shortcut(data, data, TOKENIZER, matched)["accuracy"] == 0.5
    assert ablation.length_matched(data, tokenizer=TOKENIZER) == matched      # seeded


def test_sop_pairs_carry_an_end_cue_that_the_matched_set_removes():
    rng = random.Random(0)
    words = ["the", "model", "reads", "a", "sentence", "order", "of", "two", "runs", "text"]
    documents = [[TOKENIZER.encode(" ".join(rng.choices(words, k=rng.randint(3, 12))) + ".")
                  for _ in range(rng.randint(2, 8))] for _ in range(300)]
    data = examples_from_token_documents(documents, MaskingVocab.from_tokenizer(TOKENIZER), "sop",
                                         max_seq_len=32, seed=0, segmenting=ablation.SEGMENTING)
    ends, labels = ablation.segment_ends(data, TOKENIZER), data.sentence_labels
    # the earlier cut's cue (the 32-token arms'): truncation cuts the longer run, more often the second,
    # so the first run more often ends at a sentence end, and the swap turns that into a cue to the order
    first_run = torch.where(labels == 1, ends[:, 1], ends[:, 0])
    second_run = torch.where(labels == 1, ends[:, 0], ends[:, 1])
    assert first_run.float().mean() > second_run.float().mean() + 0.05
    assert ablation.end_shortcut(data, data, TOKENIZER)["accuracy"] > 0.55
    assert ablation.end_shortcut(data, data, TOKENIZER, ablation.length_matched(data))["accuracy"] > 0.52
    matched = ablation.length_matched(data, tokenizer=TOKENIZER)        # lengths and ends matched: no cue
    assert ablation.end_shortcut(data, data, TOKENIZER, matched)["accuracy"] == 0.5
    assert ablation.length_shortcut(data, data, matched)["accuracy"] == 0.5
    cells = torch.cat([ablation.segment_lengths(data), ends.long()], dim=1)[matched].tolist()
    for cell in {tuple(c) for c in cells}:            # as many of each label in every (lengths, ends) cell
        at = [i for i, c in zip(matched, cells) if tuple(c) == cell]
        assert sum(int(labels[i]) for i in at) * 2 == len(at)


def test_fit_logistic_separates_what_is_separable_and_not_noise():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 5, generator=g) * torch.tensor([1.0, 100.0, 1.0, 1.0, 0.01])   # scales differ
    y = (x[:, 4] > 0).long()                                  # decided by the smallest-scale feature
    predict = ablation.fit_logistic(x[:300], y[:300])
    assert (predict(x[300:]) == y[300:]).float().mean() > 0.95
    noise = torch.randint(0, 2, (400,), generator=g)
    guessed = ablation.fit_logistic(x[:300], noise[:300])(x[300:])
    assert abs((guessed == noise[300:]).float().mean() - 0.5) < 0.15


def test_crossing_step_and_arm_names():
    def point(step, acc, low, chance=0.5):
        return {"step": step, "nsp": {"accuracy": acc, "ci95": [low, acc + 0.02], "chance": chance}}
    curve = [point(1000, 0.55, 0.52, chance=0.55),          # the majority guessed: not above chance
             point(2000, 0.52, 0.49), point(3000, 0.55, 0.52), point(4000, 0.61, 0.58)]
    assert ablation.crossing_step(curve, "nsp") == 4000
    assert ablation.crossing_step(curve, "nsp", "chance") == 3000
    assert ablation.crossing_step(curve, "nsp", 0.7) is None
    assert ablation.arm_entry("sop") == "albert-sop" and ablation.arm_entry("nsp", 2) == "albert-nsp-seed2"
    assert ablation.arm_entry("sop-balanced", 1) == "albert-sop-balanced-seed1"
    with pytest.raises(ValueError, match="unknown arm 'bert'"):
        ablation.arm_entry("bert")


@pytest.mark.slow
def test_ablation_cli_runs_the_whole_experiment_at_ci_scale(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["ablation", "--scale", "ci", "--arms", "nsp,sop,sop-balanced", "--seeds", "1",
                     "--out", str(tmp_path / "fig")]) == 0
    finally:
        torch.set_num_threads(threads)
    result = json.loads((tmp_path / "fig" / "nsp_vs_sop.json").read_text())
    assert (tmp_path / "fig" / "nsp_vs_sop.png").stat().st_size > 10_000
    assert [(r["arm"], r["entry"]) for r in result["runs"]] == [
        ("random init", None), ("nsp", "albert-nsp"), ("sop", "albert-sop"),
        ("sop-balanced", "albert-sop-balanced")]
    random_init, nsp, sop, sop_balanced = result["runs"]
    assert random_init["nsp"]["head"] is None
    assert random_init["sop"]["probe"]["n"] == result["heldout"]["sop"]["examples"]
    for run in (nsp, sop, sop_balanced):         # every arm read on both tasks with its own head
        for task in ("nsp", "sop"):
            assert run[task]["head"]["n"] == result["heldout"][task]["examples"]
            assert run[task]["head_matched"]["n"] == result["heldout"][task]["length_matched"]
            assert sum(run[task]["head"]["predicted_shares"]) == pytest.approx(1.0)
            for reading in ("head", "head_matched", "probe", "probe_matched"):   # pairs of one document
                m = run[task][reading]                                         # are not independent
                assert 1 < m["documents"] < m["n"] and m["ci95"] != m["wilson95"], (task, reading)
        assert run["mlm"]["mlm"]["mask"]["n"] > 0
    for task in ("nsp", "sop"):
        assert result["shortcut"][task]["length_matched"]["accuracy"] == 0.5
    assert set(result["curves"]) == {"albert-nsp", "albert-sop", "albert-sop-balanced"}
    steps = [p["step"] for p in result["curves"]["albert-sop"]]       # every held-out evaluation of training
    assert all(set(p) == {"arm", "step", "sop"} for p in result["curves"]["albert-sop"]), "its own task only"
    ci = SCALES["ci"]
    assert len(steps) == ci.zoo.evals and steps == sorted(steps) and steps[-1] == ci.zoo.steps
    assert {p["arm"] for p in result["curves"]["albert-nsp"]} == {"nsp"}
    assert {p["arm"] for p in result["curves"]["albert-sop-balanced"]} == {"sop-balanced"}
    assert {(d["task"], d["start"]) for d in result["downstream"]} == {
        (t, a) for t in ablation.DOWNSTREAM_TASKS for a in ("nsp", "sop", "sop-balanced")}
    assert set(result["summary"]) == {"nsp", "sop", "sop-balanced", "random init"}
    assert result["summary"]["sop"]["next-sentence"]["seeds"] == 1
    # head_readings (what lesson 08 re-measures) gives the file's own-head readings again
    sop = ablation.heldout("sop", ci.data, ci.recipe.eval_examples)
    matched = ablation.length_matched(sop, tokenizer=course_tokenizer(ci.data))
    again = ablation.head_readings(zoo.Zoo(ci).load("albert-sop", progress=False), sop, matched)
    assert again == {reading: result["runs"][2]["sop"][reading] for reading in ("head", "head_matched")}
