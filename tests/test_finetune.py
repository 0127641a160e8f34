"""Fine-tuning: the classification head against transformers, the loop, the metrics, the CLI.

HF models here are tiny and randomly initialised (no download). Loops run on a tiny model and a
handful of examples so the whole file stays within seconds at MINIALBERT_SCALE=ci.
"""

import json

import pytest
import torch
import transformers
from test_hf import ALBERT_SMALL, BERT_SMALL, EXACT, V, _batch, _perturb
from torch.testing import assert_close

from minialbert import AlbertConfig, AlbertForPretraining, hf
from minialbert.course.commands import main
from minialbert.course.data import course_tokenizer
from minialbert.course.experiments.tasks import load_task
from minialbert.course.plots import plot_learning_curve
from minialbert.course.scale import SCALES
from minialbert.evaluation import (
    bag_of_words_baseline,
    f1_binary,
    matthews_correlation,
    pearson,
    spearman,
    task_metrics,
)
from minialbert.finetune import (
    FinetuneArgs,
    classifier_from_checkpoint,
    curve_summary,
    encode_examples,
    evaluate_classifier,
    finetune,
    learning_curve,
    load_finetuned,
)
from minialbert.labelled_task import Example, Task
from minialbert.model import AlbertForSequenceClassification
from minialbert.run_directory import read_metrics

FAMILIES = {"albert": (transformers.AlbertForSequenceClassification, transformers.AlbertConfig, ALBERT_SMALL),
            "bert": (transformers.BertForSequenceClassification, transformers.BertConfig, BERT_SMALL)}


def _hf_classifier(family: str, num_labels: int, seed: int = 0):
    cls, config_cls, sizes = FAMILIES[family]
    torch.manual_seed(seed)
    model = cls(config_cls(**sizes, num_labels=num_labels, attn_implementation="eager"))
    _perturb(model, seed)                       # move biases and LayerNorms off their trivial init
    return model.eval()


def _padded_pairs():
    """Three sentence pairs [CLS] A [SEP] B [SEP], right-padded by 0, 3 and 6 positions."""
    ids, types, mask, _, _ = _batch()
    return ids, types, mask


# ---------------------------------------------------------------------------------- HF parity
@pytest.mark.parametrize("num_labels", [3, 1], ids=["classification", "regression"])
@pytest.mark.parametrize("family", ["albert", "bert"])
def test_parity_with_transformers(family, num_labels):
    ref = _hf_classifier(family, num_labels)
    ours = hf.from_hf(ref.state_dict(), ref.config.to_dict())
    assert isinstance(ours, AlbertForSequenceClassification) and ours.num_labels == num_labels
    assert not ours.training
    ids, types, mask = _padded_pairs()
    labels = torch.tensor([0.5, -1.0, 2.0]) if num_labels == 1 else torch.tensor([2, 0, 1])
    with torch.no_grad():
        theirs = ref(ids, attention_mask=mask, token_type_ids=types, labels=labels)
        mine = ours(ids, types, mask, labels=labels)
    assert_close(mine.logits, theirs.logits, **EXACT)
    assert_close(mine.loss, theirs.loss, **EXACT)
    if family == "bert":                        # BERT's head drops out with the hidden dropout rate
        assert ours.config.classifier_dropout_prob == ref.config.hidden_dropout_prob


def test_export_round_trip_through_transformers():
    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=3, num_heads=4,
                       intermediate_size=37, max_position_embeddings=24)
    ours = AlbertForSequenceClassification(cfg, num_labels=2).eval()
    sd, config_dict = hf.to_hf(ours)
    assert config_dict["architectures"] == ["AlbertForSequenceClassification"]
    ref = transformers.AlbertForSequenceClassification(
        transformers.AlbertConfig(**config_dict, attn_implementation="eager")).eval()
    ref.load_state_dict(sd, strict=True)
    ids, types, mask = _padded_pairs()
    with torch.no_grad():
        theirs = ref(ids, attention_mask=mask, token_type_ids=types).logits
        assert_close(ours(ids, types, mask).logits, theirs, **EXACT)
    again = hf.from_hf(sd, config_dict)
    for (name, a), b in zip(ours.state_dict().items(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_hf_label_count_mismatch_is_an_error():
    ref = _hf_classifier("albert", 3)
    config = {**ref.config.to_dict(), "id2label": {"0": "a", "1": "b"}}
    with pytest.raises(ValueError, match="declares 2 labels but classifier.weight has shape"):
        hf.from_hf(ref.state_dict(), config)


def test_from_pretraining_keeps_the_encoder():
    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=2, num_heads=4,
                       intermediate_size=37, max_position_embeddings=24)
    pretrained = AlbertForPretraining(cfg).eval()
    model = AlbertForSequenceClassification.from_pretraining(pretrained, num_labels=2).eval()
    ids, types, mask = _padded_pairs()
    with torch.no_grad():
        assert_close(model(ids, types, mask).pooled_output, pretrained(ids, types, mask).pooled_output,
                     atol=0, rtol=0)
    assert not any(k.startswith(("mlm_head", "sentence_head")) for k in model.state_dict())


def test_bad_labels_are_clear_errors():
    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=1, num_heads=4,
                       intermediate_size=37, max_position_embeddings=24)
    ids, types, mask = _padded_pairs()
    with pytest.raises(ValueError, match=r"labels must be in \[0, 2\)"):
        AlbertForSequenceClassification(cfg, 2)(ids, types, mask, labels=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="num_labels must be an integer >= 1"):
        AlbertForSequenceClassification(cfg, 0)


# ---------------------------------------------------------------------------------- metrics
def test_classification_metrics_on_known_cases():
    # TP=2, FP=1, FN=1, TN=2: accuracy 4/6, F1 = 2*2 / (2*2 + 1 + 1), MCC = (2*2 - 1*1) / sqrt(3*3*3*3)
    predicted, labels = [1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0]
    m = task_metrics(predicted, labels, num_labels=2)
    assert m["accuracy"] == pytest.approx(4 / 6) and m["n"] == 6 and m["predicted_shares"] == [0.5, 0.5]
    assert task_metrics([1, 1, 1, 1], [0, 1, 0, 1], num_labels=3)["predicted_shares"] == [0.0, 1.0, 0.0]
    assert m["f1"] == pytest.approx(4 / 6)
    assert m["matthews"] == pytest.approx(3 / 9)
    assert matthews_correlation([0, 1, 2, 0], [0, 1, 2, 0]) == pytest.approx(1.0)
    assert matthews_correlation([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert matthews_correlation([1, 1, 1, 1], [0, 1, 0, 1]) == 0.0          # constant: 0 by convention
    assert f1_binary([0, 0], [1, 1]) == 0.0
    # 3 classes by hand: c=3 right of n=5, true = predicted counts (1, 2, 2): (3*5 - 9) / sqrt(16 * 16)
    assert matthews_correlation([0, 2, 2, 1, 1], [0, 1, 2, 2, 1]) == pytest.approx(0.375)


def test_bag_of_words_baseline_learns_words_and_cannot_see_order(tokenizer):
    words = ["table", "window", "garden", "river", "number", "string", "module", "object"]
    rng = torch.Generator().manual_seed(0)
    sentences = [" ".join(words[i] for i in torch.randperm(8, generator=rng)[:5].tolist()) for _ in range(60)]
    # by topic: label 1 iff the sentence holds "river": a bag of words learns that
    topic = [Example(s, None, int("river" in s.split())) for s in sentences]
    task = Task("topic", "t", "test", ("no", "yes"), "accuracy", topic[:40], topic[40:], topic[40:])
    assert bag_of_words_baseline(task, tokenizer)["test"]["accuracy"] == 1.0
    # in mini-batches of 8 (five per epoch, seeded epochs), as on a large task: the same answer
    assert bag_of_words_baseline(task, tokenizer, batch_size=8)["test"]["accuracy"] == 1.0
    # by order: every sentence once as written (1) and once reversed (0): the same bag, one score
    order = [Example(t, None, y) for s in sentences for t, y in ((s, 1), (" ".join(s.split()[::-1]), 0))]
    task = Task("order", "o", "test", ("reversed", "as written"), "accuracy", order, order)
    result = bag_of_words_baseline(task, tokenizer)
    assert result["dev"]["accuracy"] == 0.5 and result["test"] is None
    pairs = [Example(s, s, 1.0) for s in sentences[:10]]                       # similar: B repeats A
    pairs += [Example(s, "table", 0.0) for s in sentences[10:20]]
    regression = Task("sim", "r", "test", (), "pearson", pairs, pairs)
    assert bag_of_words_baseline(regression, tokenizer)["dev"]["pearson"] > 0.9


def test_correlations_on_known_cases():
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert pearson(x, [2 * v + 1 for v in x]) == pytest.approx(1.0)
    assert pearson(x, [5.0, 4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert pearson(x, [1.0, 3.0, 2.0, 5.0, 4.0]) == pytest.approx(0.8)
    assert spearman(x, [v ** 3 for v in x]) == pytest.approx(1.0)                # monotone, not linear
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)   # ties: mean ranks
    assert pearson(x, [2.0] * 5) == 0.0
    m = task_metrics([1.0, 2.0, 3.0], [1.0, 2.0, 4.0], num_labels=1)
    assert set(m) == {"pearson", "spearman", "mse", "n"} and m["mse"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------------- the loop
@pytest.fixture(scope="module")
def tokenizer():
    return course_tokenizer(SCALES["ci"].data)


def _tiny(tokenizer, num_labels=2, seed=0):
    torch.manual_seed(seed)
    cfg = AlbertConfig(vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=32, num_layers=2,
                       num_heads=2, intermediate_size=64, max_position_embeddings=64)
    return AlbertForSequenceClassification(cfg, num_labels)


def test_the_loop_overfits_32_examples(tokenizer, tmp_path):
    source = load_task("next-sentence", SCALES["ci"].data)
    examples = source.subset(32, seed=0)
    task = Task("tiny", "memorise 32 pairs", "test", source.labels, "accuracy", examples, examples)
    args = FinetuneArgs(steps=120, batch_size=16, lr=2e-3, warmup=10, eval_every=20, patience=0,
                        max_seq_len=64)
    result = finetune(_tiny(tokenizer), task, tokenizer, args, out_dir=tmp_path / "run", progress=False)
    assert result.dev["accuracy"] > 0.95, result.dev
    assert not result.stopped_early and result.test is None
    records = read_metrics(tmp_path / "run")
    assert records == result.history and records[-1] == {"step": 120, "split": "dev", **records[-1]}
    assert {r["split"] for r in records} == {"train", "dev"}
    loaded = load_finetuned(tmp_path / "run")                   # the best checkpoint, verified
    encoded = encode_examples(examples, tokenizer, 64)
    assert evaluate_classifier(loaded, encoded)["accuracy"] == result.dev["accuracy"]
    with pytest.raises(FileExistsError, match="already holds a run"):
        finetune(_tiny(tokenizer), task, tokenizer, args, out_dir=tmp_path / "run", progress=False)


def test_early_stopping_stops_and_keeps_the_best(tokenizer):
    task = load_task("word-order", SCALES["ci"].data)
    args = FinetuneArgs(steps=500, batch_size=8, lr=1e-9, warmup=0, eval_every=2, patience=3,
                        dev_examples=64, max_seq_len=64)
    result = finetune(_tiny(tokenizer), task, tokenizer, args, train_examples=task.subset(16), progress=False)
    dev_steps = [r["step"] for r in result.history if r["split"] == "dev"]
    assert result.stopped_early and dev_steps == [2, 4, 6, 8]   # no gain after step 2: 3 more, then stop
    assert result.best_step == 2 and result.test is not None and result.test["n"] == len(task.test)


def test_regression_and_frozen_encoder(tokenizer):
    examples = [Example(f"sentence number {i}", None, float(i % 3)) for i in range(24)]
    task = Task("scores", "regression", "test", (), "pearson", examples, examples)
    model = _tiny(tokenizer, num_labels=1)
    encoder_before = {k: v.clone() for k, v in model.albert.state_dict().items()}
    args = FinetuneArgs(steps=10, batch_size=8, warmup=0, eval_every=5, freeze_encoder=True, max_seq_len=64)
    result = finetune(model, task, tokenizer, args, progress=False)
    assert set(result.dev) == {"pearson", "spearman", "mse", "n"}
    for k, v in model.albert.state_dict().items():
        assert torch.equal(v, encoder_before[k]), k
    with pytest.raises(ValueError, match="the tokenizer has 1000 pieces but the model's vocab_size is 97"):
        other = AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=1, num_heads=4,
                             intermediate_size=37)
        finetune(AlbertForSequenceClassification(other, 1), task, tokenizer, args, progress=False)


def test_learning_curve_same_examples_for_every_start_and_reproducible(tokenizer):
    source = load_task("word-order", SCALES["ci"].data)
    task = Task("small", "word order", "test", source.labels, "matthews", source.train, source.dev[:32],
                source.test[:32])
    pretrained = AlbertForPretraining(_tiny(tokenizer).config)
    starts = {"pretrained": pretrained, "scratch": pretrained.config}
    before = {k: v.clone() for k, v in pretrained.state_dict().items()}
    args = FinetuneArgs(steps=4, batch_size=4, warmup=0, eval_every=2, max_seq_len=64)
    rows = learning_curve(task, tokenizer, starts, sizes=[8, 16], seeds=[0, 1], args=args, progress=False)
    assert [(r["start"], r["labels"], r["seed"]) for r in rows] == [
        (start, n, seed) for start in starts for n in (8, 16) for seed in (0, 1)]
    assert all(r["test"]["n"] == 32 and len(r["test"]["predicted_shares"]) == 2 for r in rows)
    again = learning_curve(task, tokenizer, starts, sizes=[8, 16], seeds=[0, 1], args=args, progress=False)
    assert [r["test"] for r in again] == [r["test"] for r in rows]              # seeded end to end
    for k, v in pretrained.state_dict().items():                                # the start is not touched
        assert torch.equal(v, before[k]), k


def test_curve_summary_and_its_plot():
    rows = [{"start": s, "labels": n, "seed": seed, "test": {"accuracy": a}}
            for s, n, seed, a in [("pre", 16, 0, 0.6), ("pre", 16, 1, 0.8), ("pre", 64, 0, 0.9),
                                  ("scratch", 16, 0, 0.5)]]
    points = curve_summary(rows, "accuracy")
    assert points[0] == {"start": "pre", "labels": 16, "seeds": 2, "mean": pytest.approx(0.7), "min": 0.6,
                         "max": 0.8}
    assert [(p["start"], p["labels"]) for p in points] == [("pre", 16), ("pre", 64), ("scratch", 16)]
    ax = plot_learning_curve(points, "accuracy", {"chance": 0.5})
    assert [line.get_label() for line in ax.get_lines()][-1] == "chance" and len(ax.get_lines()) == 3
    with pytest.raises(ValueError, match="needs at least one point"):
        plot_learning_curve([], "accuracy")


# ---------------------------------------------------------------------------------- CLI
def _pretraining_checkpoint(run_dir, vocab_size):
    """A one-step pretraining run directory in the trainer's checkpoint format."""
    from minialbert.checkpoint import save_checkpoint
    from minialbert.optim import make_optimizer, warmup_linear_decay

    torch.manual_seed(0)
    cfg = AlbertConfig(vocab_size=vocab_size, embedding_size=16, hidden_size=32, num_layers=2, num_heads=2,
                       intermediate_size=64, max_position_embeddings=64)
    model = AlbertForPretraining(cfg)
    optimizer = make_optimizer("adamw", model, 1e-3)
    save_checkpoint(run_dir, model, optimizer, warmup_linear_decay(optimizer, 0, 1),
                    {"step": 1, "args": {"objective": "sop"}}, keep_last=1)
    return model


def test_cli_finetunes_a_checkpoint(tokenizer, tmp_path, capsys):
    pretrained = _pretraining_checkpoint(tmp_path / "pre", tokenizer.vocab_size)
    out = tmp_path / "ft"
    code = main(["finetune", "--task", "next-sentence", "--checkpoint", str(tmp_path / "pre"),
                 "--labels", "16", "--seed", "1", "--steps", "4", "--out", str(out), "--scale", "ci",
                 "--quiet"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["labels"] == 16 and report["task"] == "next-sentence"
    assert 0 <= report["dev"]["accuracy"] <= 1
    assert (out / "metrics.jsonl").is_file() and load_finetuned(out).num_labels == 2
    # the encoder starts from the checkpoint's weights, not a fresh initialisation
    start = classifier_from_checkpoint(tmp_path / "pre", 2).albert
    for name, value in pretrained.albert.state_dict().items():
        assert torch.equal(start.state_dict()[name], value), name


def test_cli_lists_tasks(capsys, tmp_path):
    assert main(["tasks", "--scale", "ci", "--glue-dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "word-order" in table and "next-sentence" in table and "tasks --download sst2" in table


@pytest.mark.parametrize("argv, message", [
    (["--task", "nope", "--from-scratch"], "unknown task 'nope'; choose one of word-order"),
    (["--task", "word-order", "--checkpoint", "MISSING"], "--checkpoint MISSING does not exist"),
    (["--task", "word-order", "--from-scratch", "--labels", "999999"], "--labels must be between 1 and"),
    (["--task", "word-order", "--checkpoint", "OTHER_VOCAB"], "pretrained with a 97-piece vocabulary but the "
                                                              "course tokenizer at scale 'ci' has 1000"),
])
def test_cli_errors_are_one_line(argv, message, tmp_path, capsys):
    _pretraining_checkpoint(tmp_path / "other", V)
    argv = [str(tmp_path / "other") if a == "OTHER_VOCAB" else str(tmp_path / a) if a == "MISSING" else a
            for a in argv]
    code = main(["finetune", *argv, "--out", str(tmp_path / "out"), "--scale", "ci", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("minialbert: error: ")
    assert message.replace("MISSING", str(tmp_path / "MISSING")) in err
    assert not (tmp_path / "out").exists()
