"""Lessons 04 and 05's pieces beyond the first ones: the masking budget, the p(n) draw and the span
placement (04); the masked-LM loss, the LAMB update, its exclusions, the schedule and the training loop
(05). A right piece passes; each planted mistake fails, in one line that says what differs."""

import math
import random

import pytest
import torch
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR

from minialbert.config import IGNORE_INDEX
from minialbert.course.experiments.synthetic import permutation_chains
from minialbert.course.pieces import PIECES, check
from minialbert.course.pieces.checking import CHECK_CONFIG
from minialbert.course.pieces.runs import compare_run
from minialbert.masking import MaskingVocab, corrupt, ngram_mask, whole_words
from minialbert.model import AlbertForPretraining
from minialbert.optim import make_optimizer
from minialbert.pretraining_data import collate
from minialbert.train import RunOptions, StepBatches, TrainArgs, pretrain

# ------------------------------------------------------------------ written as a learner would


def mask_budget(n_real, mask_rate):
    return max(1, round(n_real * mask_rate)) if n_real and mask_rate > 0 else 0


def draw_ngram(rng, max_ngram):
    weights = [1 / n for n in range(1, max_ngram + 1)]
    return rng.choices(range(1, max_ngram + 1), weights=weights)[0]


def place_spans(input_ids, vocab, rng, whole=True, fill=True, shown=True, limit=True):
    words = whole_words(input_ids, vocab)
    words = words if whole else [[p] for w in words for p in w]
    budget = mask_budget(sum(map(len, words)), 0.15)
    output, labels, free, used = list(input_ids), [IGNORE_INDEX] * len(input_ids), set(range(len(words))), 0
    while used < budget:
        n = draw_ngram(rng, 3)
        starts = [s for s in range(len(words) - n + 1) if all(w in free for w in range(s, s + n))
                  and words[s + n - 1][-1] - words[s][0] == sum(len(w) for w in words[s:s + n]) - 1
                  and (sum(len(w) for w in words[s:s + n]) <= budget - used or not limit)]
        if not starts:
            if n == 1 or not any(len(words[w]) <= budget - used for w in free):
                break
            continue
        s = rng.choice(starts)
        for w in range(s, s + n):
            free.discard(w)
            for p in words[w]:
                labels[p] = input_ids[p]
                output[p] = corrupt(input_ids[p], vocab, rng) if shown else input_ids[p]
                used += 1
        if not fill:
            break
    return output, labels


def package_spans(input_ids, vocab, rng):
    masked = ngram_mask(input_ids, vocab, rng)
    return masked.input_ids, masked.mlm_labels


def mlm_loss(logits, labels):
    predicted = labels != IGNORE_INDEX
    return F.cross_entropy(logits[predicted], labels[predicted])


def lamb_update(w, g, m, v, lr, weight_decay, adapt, b1=0.9, b2=0.999, eps=1e-6):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    u = m / (v.sqrt() + eps) + weight_decay * w
    if adapt and w.norm() > 0 and u.norm() > 0:
        u = u * w.norm() / u.norm()
    return w - lr * u, m, v


def excluded(name):
    return "LayerNorm" in name or "layer_norm" in name or "bias" in name


def lr_factor(step, warmup, total):
    if step < warmup:
        return step / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def training_loop(model, optimizer, lr_factor, train_data, valid_data, args, step, evaluate, at_end=True,
                  schedule=True):
    scheduler = LambdaLR(optimizer, lambda s: lr_factor(s, args.warmup, args.steps) if schedule else 1.0)
    history = []
    model.train()
    for n, indices in enumerate(StepBatches.for_run(len(train_data), args), start=1):
        batch = collate([train_data[i] for i in indices])
        history.append({"step": n, "split": "train", "loss": step(model, batch, optimizer, scheduler,
                                                                  args.clip_norm)})
        if n % args.eval_every == 0 or (at_end and n == args.steps):
            history.append({"step": n, "split": "valid", **evaluate(model, valid_data)})
    return history


RIGHT = {"mask_budget": mask_budget, "ngram_draw": draw_ngram, "span_placement": place_spans,
         "mlm_loss": mlm_loss, "lamb_update": lamb_update, "decay_exclusion": excluded,
         "lr_factor": lr_factor, "training_loop": training_loop}


def said(capsys, name, piece) -> tuple[bool, str]:
    ok = check(name, piece)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"not one line: {out!r}"
    return ok, out


def wrong(capsys, name, piece, *phrases):
    ok, out = said(capsys, name, piece)
    assert not ok and out.startswith(f"{name}: wrong: "), out
    assert all(p in out for p in phrases), out


def test_these_pieces_are_the_packages():
    assert set(RIGHT) <= set(PIECES)


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_right_piece_passes(capsys, name):
    ok, out = said(capsys, name, RIGHT[name])
    assert ok and out.startswith(f"{name}: right: matches the package on 3 random inputs"), out


def test_the_packages_own_masking_passes_the_span_placement_check(capsys):
    ok, out = said(capsys, "span_placement", package_spans)
    assert ok, out


def test_budget_mistakes_are_named(capsys):
    wrong(capsys, "mask_budget", lambda n, rate: int(n * rate), "yours gives 5, the package's 6",
          "that is what truncating with int() instead of rounding gives")
    wrong(capsys, "mask_budget", lambda n, rate: round(n * rate), "without the minimum of one token")


def test_a_uniform_ngram_draw_fails(capsys):
    wrong(capsys, "ngram_draw", lambda rng, max_n: rng.randint(1, max_n),
          "p(n) = (1/n) / sum(1/k) gives 0.545")
    wrong(capsys, "ngram_draw", lambda rng, max_n: max_n + 1, "n must be an integer from 1 to max_ngram")


@pytest.mark.parametrize("mistake, phrase", [
    (dict(whole=False), "is predicted only in part: spans are whole words"),
    (dict(fill=False), "still fits: keep placing spans until no word fits"),
    (dict(shown=False), "[MASK] is shown at 0% of the"),
    (dict(limit=False), "the budget is"),
])
def test_span_placement_mistakes_fail(capsys, mistake, phrase):
    wrong(capsys, "span_placement", lambda ids, vocab, rng: place_spans(ids, vocab, rng, **mistake), phrase)


def test_span_placement_that_predicts_a_special_token_fails(capsys):
    def with_cls(ids, vocab, rng):
        shown, labels = place_spans(ids, vocab, rng)
        return shown, [ids[0], *labels[1:]]
    wrong(capsys, "span_placement", with_cls, "it predicts position 0, a special token")


def test_mlm_loss_mistakes_are_named(capsys):
    wrong(capsys, "mlm_loss", lambda lg, lb: F.cross_entropy(lg.flatten(0, 1), lb.flatten(), reduction="sum")
          / lb.numel(), "that is what averaging over every position")
    wrong(capsys, "mlm_loss", lambda lg, lb: torch.stack([mlm_loss(a, b) for a, b in zip(lg, lb)]).mean(),
          "that is what the mean of each sequence's mean")


@pytest.mark.parametrize("mistake, phrase", [
    (lambda w, g, m, v, lr, wd, adapt: lamb_update(w, g, m, v, lr, wd, True), "applied to a tensor excluded"),
    (lambda w, g, m, v, lr, wd, adapt: lamb_update(w, g, m, v, lr, 0.0, adapt), "values differ at"),
    (lambda w, g, m, v, lr, wd, adapt: lamb_update(w, g, m, v, lr, wd, adapt, b2=0.99), "values differ"),
])
def test_lamb_mistakes_fail(capsys, mistake, phrase):
    wrong(capsys, "lamb_update", mistake, phrase)


def test_lamb_with_bias_correction_is_named(capsys):
    def corrected(w, g, m, v, lr, wd, adapt, b1=0.9, b2=0.999, eps=1e-6):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        u = (m / (1 - b1)) / ((v / (1 - b2)).sqrt() + eps) + wd * w
        return w - lr * (u * w.norm() / u.norm() if adapt else u), m, v
    wrong(capsys, "lamb_update", corrected, "that is what Adam's bias correction")


@pytest.mark.parametrize("rule, phrase", [
    (lambda name: "bias" in name, "LayerNorm.weight: yours applies weight decay"),
    (lambda name: "LayerNorm" in name, ".bias: yours applies"),
    (lambda name: "weight" not in name, "yours applies"),
    (lambda name: 1 if excluded(name) else 0, "not True or False"),
])
def test_decay_exclusion_mistakes_fail(capsys, rule, phrase):
    wrong(capsys, "decay_exclusion", rule, phrase)


@pytest.mark.parametrize("factor, phrase", [
    (lambda s, w, t: (s + 1) / w if s < w else lr_factor(s, w, t), "warmup 10, total 50, step 0"),
    (lambda s, w, t: min(1.0, s / w if w else 1.0) * (t - s) / t, "warmup 10, total 50, step 1"),
    (lambda s, w, t: lr_factor(s, w, t) if s < t else 1.0, "step 50"),
])
def test_lr_factor_mistakes_fail(capsys, factor, phrase):
    wrong(capsys, "lr_factor", factor, phrase)


@pytest.mark.parametrize("mistake, phrase", [
    (dict(at_end=False), "its 'valid' records are at steps [3, 6], the package's at [3, 6, 7]"),
    (dict(schedule=False), "step 2: train loss"),
])
def test_training_loop_mistakes_fail(capsys, mistake, phrase):
    def loop(*args):
        return training_loop(*args, **mistake)
    wrong(capsys, "training_loop", loop, phrase)


def test_a_loop_that_returns_nothing_says_so(capsys):
    wrong(capsys, "training_loop", lambda *args: None, "it must return the history")


def test_span_placement_check_uses_the_packages_budget_rule():
    """The rule the check enforces is the package's: ngram_mask never exceeds the budget and stops only
    when no free word fits (here on one sequence of one-piece words: exactly the budget)."""
    vocab = MaskingVocab.from_ids([True] * 10, special_ids={0, 1, 2, 3, 4})
    labels = ngram_mask([7] * 37, vocab, random.Random(0)).mlm_labels
    assert sum(label != IGNORE_INDEX for label in labels) == mask_budget(37, 0.15) == round(37 * 0.15)
    assert math.isclose(0.15 * 37, 5.55)


# ------------------------------------------------------------------ the lesson's run with your pieces


def training_step(model, batch, optimizer, scheduler, clip_norm):
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()


def diverging_step(at: int, calls: list):
    """A right step until its call number `at`, which starts from weights gone NaN (its calls counted)."""
    def step(model, batch, optimizer, scheduler, clip_norm):
        calls.append(len(calls) + 1)
        if len(calls) == at:
            with torch.no_grad():
                next(model.parameters()).fill_(math.nan)
        return training_step(model, batch, optimizer, scheduler, clip_norm)
    return step


PIECES_IN_USE = {"training_loop": True, "training_step": True, "lr_factor": False}


@pytest.fixture(scope="module")
def lesson_run():
    """Lesson 05's comparison in small: (a run of the learner's loop given a step, the package's losses)."""
    cfg = CHECK_CONFIG.replace(vocab_size=30)
    args = TrainArgs(objective="mlm", steps=20, batch_size=8, lr=0.05, warmup=5, optimizer="adamw",
                     eval_every=100, checkpoint_every=0)
    data = permutation_chains(64, cfg.vocab_size, length=10)
    history = pretrain(cfg, args, data, options=RunOptions(progress=False)).history
    theirs = [r["loss"] for r in history if r["split"] == "train"]

    def run(step, loop=training_loop):
        torch.manual_seed(args.seed)
        model = AlbertForPretraining(cfg, sentence_task=None)
        optimizer = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)
        return loop(model, optimizer, lr_factor, data, None, args, step, lambda model, data: {})
    return run, theirs


def test_a_run_with_right_pieces_matches_the_package_in_one_line(capsys, lesson_run):
    run, theirs = lesson_run
    ours = compare_run(run, training_step, PIECES_IN_USE, theirs)
    out = capsys.readouterr().out
    assert ours is not None and len(ours) == 20 and out.count("\n") == 1, out
    assert out.startswith("20 steps with your training_loop, your training_step and the package's lr_factor: "
                          "loss "), out
    assert "the same as minialbert.train.pretrain" in out


def test_a_step_that_passes_its_check_but_diverges_stops_the_run_at_that_step(capsys, lesson_run):
    """It used to end in a raw `AssertionError: Tensor-likes are not close! ... nan at index (9,)`."""
    assert check("training_step", diverging_step(10, []))           # 9 calls: right
    capsys.readouterr()
    run, theirs = lesson_run
    calls = []
    assert compare_run(run, diverging_step(10, calls), PIECES_IN_USE, theirs) is None
    out = capsys.readouterr().out
    assert out == ("your training run diverged: the loss is nan at step 10 of 20, so it stopped there; the "
                   "pieces in use: your training_loop, your training_step and the package's lr_factor\n"), out
    assert calls == list(range(1, 11)), "the run went on after it diverged"


def test_a_loop_that_swallows_the_stop_is_still_told_where_it_diverged(capsys, lesson_run):
    def stubborn_loop(*args):
        step = args[6]

        def carry_on(*a):
            try:
                return step(*a)
            except Exception:
                return 0.0
        return training_loop(*args[:6], carry_on, *args[7:])
    run, theirs = lesson_run
    ours = compare_run(lambda step: run(step, stubborn_loop), diverging_step(4, []), PIECES_IN_USE, theirs)
    assert ours is None
    out = capsys.readouterr().out
    assert out.startswith("your training run diverged: the loss is nan at step 4 of 20"), out


def test_a_run_that_differs_names_the_first_step_in_one_line(capsys, lesson_run):
    def unclipped(model, batch, optimizer, scheduler, clip_norm):
        return training_step(model, batch, optimizer, scheduler, 1e9)
    run, theirs = lesson_run
    assert compare_run(run, unclipped, PIECES_IN_USE, theirs) is None
    out = capsys.readouterr().out
    assert out.startswith("your training run differs from minialbert.train.pretrain from step "), out
    assert " of 20: loss " in out and out.count("\n") == 1, out
    assert out.endswith("the pieces in use: your training_loop, your training_step and the package's "
                        "lr_factor\n"), out


@pytest.mark.parametrize("history, said", [
    ([{"step": 1, "split": "train", "loss": 2.0}, {"step": 2, "split": "train", "loss": math.inf}],
     "your training run diverged: the loss is inf at step 2 of 2; the pieces in use: your training_loop"),
    ([{"step": 1, "split": "train", "loss": 2.0}], "your training run has 1 training step, the package's 2"),
    (None, "your training run returned None, not the history (a list of records with a 'step')"),
])
def test_a_history_that_is_not_finite_or_not_complete_is_one_line(capsys, history, said):
    assert compare_run(lambda step: history, training_step, {"training_loop": True}, [2.0, 1.0]) is None
    out = capsys.readouterr().out
    assert out.startswith(said) and out.count("\n") == 1, out


@pytest.mark.parametrize("error, said", [
    (ZeroDivisionError("division by zero"), "your code raised ZeroDivisionError: division by zero"),
    (SystemExit(1), "your code called exit() (it raised SystemExit), which would end the notebook's kernel"),
])
def test_a_run_that_raises_or_exits_is_one_line(capsys, error, said):
    def run(step):
        raise error
    assert compare_run(run, training_step, {"training_loop": True}, [2.0]) is None
    out = capsys.readouterr().out
    assert out == f"your training run stopped: {said}; the pieces in use: your training_loop\n", out
