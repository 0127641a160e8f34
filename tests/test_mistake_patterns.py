"""Feedback that points at the mistake.

Each piece is judged alone: while its check runs, the other pieces the learner's code calls by name are
the package's, so a right piece is right whatever the learner's earlier pieces do, and a wrong one is
blamed on itself. And a mistake nobody registered (none of a piece's `mistakes`, none of the planted
ones in tests/test_pieces*.py and test_piece_count.py) is still named by its pattern: a constant factor
with its closed form, a sign, zeros, transposed axes, the padded positions, a shift by one, the same
numbers in other places, or the operation of the training step whose absence gives the learner's result.
"""

import functools
import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from test_pieces_04_05 import place_spans
from torch import nn

from minialbert.config import IGNORE_INDEX
from minialbert.course.pieces import PIECES, check
from minialbert.course.pieces.checking import CHECK_CONFIG, pretraining_batch
from minialbert.course.pieces.mistakes import STEP_CHANGES, changed_step, pattern
from minialbert.model import AlbertForPretraining
from minialbert.optim import make_optimizer, warmup_linear_decay

# ------------------------------------------------------------------ pieces written as a learner would


def attention(q, k, v, attend):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~attend, float("-inf")).softmax(dim=-1) @ v


def split_heads(x, num_heads):
    B, N, H = x.shape
    return x.view(B, N, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x):
    B, h, N, d = x.shape
    return x.transpose(1, 2).reshape(B, N, h * d)


class MyLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, F_ = cfg.hidden_size, cfg.intermediate_size
        self.num_heads = cfg.num_heads
        self.qkv, self.dense = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.attention_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.ffn, self.ffn_output = nn.Linear(H, F_), nn.Linear(F_, H)
        self.ffn_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)

    def forward(self, x, attend):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        x = self.attention_norm(x + self.dense(merge_heads(attention(q, k, v, attend))))
        return self.ffn_norm(x + self.ffn_output(F.gelu(self.ffn(x), approximate="tanh")))


def whole_words(input_ids, vocab):
    words, after_special = [], True
    for position, token in enumerate(input_ids):
        if vocab.is_special[token]:
            after_special = True
            continue
        if after_special or vocab.is_word_start[token]:
            words.append([position])
        else:
            words[-1].append(position)
        after_special = False
    return words


def lr_factor(step, warmup, total):
    if step < warmup:
        return step / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def training_step(model, batch, optimizer, scheduler, clip_norm, order=("clip", "optimizer", "schedule")):
    """A right step in the default order; `order` moves or leaves out its middle operations."""
    loss = model(**batch).loss
    loss.backward()
    for operation in order:
        if operation == "clip":
            nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        elif operation == "optimizer":
            optimizer.step()
        elif operation == "schedule":
            scheduler.step()
    optimizer.zero_grad()
    return loss.item()


def verdict(capsys, name, piece) -> tuple[bool, str]:
    ok = check(name, piece)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"not one line: {out!r}"
    return ok, out


def run_cells(source: str) -> dict:
    """Run a lesson's cells in one namespace, as a kernel would: the namespace."""
    namespace = {"__name__": "__lesson__"}
    exec(compile(source, "<cell>", "exec"), namespace)
    return namespace


LESSON_03 = """
import math
import torch
import torch.nn.functional as F
from torch import nn
from minialbert.course.pieces import check


def split_heads(x, num_heads):
    B, N, H = x.shape
    return x.view(B, N, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x):
    B, h, N, d = x.shape
    return x.transpose(1, 2).reshape(B, N, h * d)


def attention(q, k, v, attend):                       # the learner's mistake: no 1/sqrt(d)
    scores = q @ k.transpose(-2, -1)
    return scores.masked_fill(~attend, torch.finfo(scores.dtype).min).softmax(dim=-1) @ v
"""


# ------------------------------------------------------------------ each piece judged alone


def test_a_right_layer_is_right_although_the_learners_attention_is_wrong(capsys):
    """It used to say "layer: wrong": the layer's check ran the learner's attention."""
    namespace = run_cells(LESSON_03 + "\n\n" + inspect.getsource(MyLayer))
    learners_attention = namespace["attention"]
    ok, out = verdict(capsys, "attention", learners_attention)
    assert not ok and "leaving out the 1/sqrt(d) scale" in out, out
    ok, out = verdict(capsys, "layer", namespace["MyLayer"])
    assert ok and out.startswith("layer: right: "), out
    assert namespace["attention"] is learners_attention, "the learner's attention was not put back"


def test_a_wrong_layer_is_still_blamed_on_the_layer(capsys):
    class NoResidual(MyLayer):
        def forward(self, x, attend):
            q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
            x = self.attention_norm(self.dense(merge_heads(attention(q, k, v, attend))))
            return self.ffn_norm(self.ffn_output(F.gelu(self.ffn(x), approximate="tanh")))
    ok, out = verdict(capsys, "layer", NoResidual)
    assert not ok and "leaving out the residual connections" in out, out


def test_a_piece_named_as_another_is_replaced_even_if_never_checked(capsys):
    """Lesson 05's LAMB calls my_trust_ratio; a wrong one that was never checked does not make it wrong."""
    namespace = run_cells("""
import torch


def my_trust_ratio(weight, update):                  # wrong: the inverse ratio, and never checked
    return update.norm() / weight.norm()


def my_lamb_update(w, g, m, v, lr, weight_decay, adapt, b1=0.9, b2=0.999, eps=1e-6):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    update = m / (v.sqrt() + eps) + weight_decay * w
    if adapt:
        update = update * my_trust_ratio(w, update)
    return w - lr * update, m, v
""")
    ok, out = verdict(capsys, "lamb_update", namespace["my_lamb_update"])
    assert ok, out
    ok, out = verdict(capsys, "trust_ratio", namespace["my_trust_ratio"])
    assert not ok and "the inverse ratio" in out, out


def test_span_placement_is_judged_with_the_packages_budget_and_draw(capsys):
    """Lesson 04's span placement calls the learner's budget and p(n) draw: wrong ones are blamed on
    themselves, not on the placement."""
    namespace = run_cells("""
from minialbert.config import IGNORE_INDEX
from minialbert.masking import corrupt, whole_words


def mask_budget(n_real, mask_rate):                  # wrong: truncates
    return int(n_real * mask_rate)


def draw_ngram(rng, max_ngram):                      # wrong: uniform
    return rng.randint(1, max_ngram)
""" + "\n\n" + inspect.getsource(place_spans))
    ok, out = verdict(capsys, "mask_budget", namespace["mask_budget"])
    assert not ok and "truncating with int()" in out, out
    ok, out = verdict(capsys, "ngram_draw", namespace["draw_ngram"])
    assert not ok, out
    ok, out = verdict(capsys, "span_placement", namespace["place_spans"])
    assert ok, out
    ok, out = verdict(capsys, "span_placement", functools.partial(namespace["place_spans"], whole=False))
    assert not ok and "spans are whole words" in out, out


def test_the_learners_pieces_are_put_back_when_a_check_is_interrupted():
    namespace = run_cells(LESSON_03 + "\n\n" + inspect.getsource(MyLayer) + """

class Stopped(MyLayer):
    def forward(self, x, attend):
        raise KeyboardInterrupt                      # the learner presses Ctrl-C during the check
""")
    learners = {name: namespace[name] for name in ("attention", "split_heads", "merge_heads")}
    check("attention", learners["attention"])
    with pytest.raises(KeyboardInterrupt):
        check("layer", namespace["Stopped"])
    assert all(namespace[name] is piece for name, piece in learners.items())


# ------------------------------------------------------------------ ten mistakes nobody registered


def scores_over_d(q, k, v, attend):
    scores = q @ k.transpose(-2, -1) / q.shape[-1]
    return scores.masked_fill(~attend, float("-inf")).softmax(dim=-1) @ v


def scores_zeroed(q, k, v, attend):
    scores = torch.zeros(*q.shape[:-1], k.shape[-2])
    return scores.masked_fill(~attend, float("-inf")).softmax(dim=-1) @ v


def heads_after_tokens(q, k, v, attend):
    return attention(q, k, v, attend).transpose(1, 2)


def heads_interleaved(x):
    B, h, N, d = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, N, h * d)


class ZeroedPadding(MyLayer):
    def forward(self, x, attend):
        return super().forward(x, attend) * attend[:, 0, 0, :, None]


def log_likelihood(pooled, labels, head):
    return head(pooled).log_softmax(dim=-1).gather(1, labels[:, None]).mean()


def words_from_one(input_ids, vocab):
    return [[p + 1 for p in word] for word in whole_words(input_ids, vocab)]


def unnormalised(max_n):
    return [1 / n for n in range(1, max_n + 1)]


def summed_mlm_loss(logits, labels):
    predicted = labels != IGNORE_INDEX
    return F.cross_entropy(logits[predicted], labels[predicted], reduction="sum")


def one_step_ahead(step, warmup, total):
    return lr_factor(step + 1, warmup, total)


UNREGISTERED = [
    ("03", "attention", scores_over_d, "with the scores x 0.5 = 1/sqrt(d) (d = 4)"),
    ("03", "attention", scores_zeroed, "with the scores set to zero"),
    ("03", "attention", heads_after_tokens, "yours is the package's with axes 1 and 2 swapped"),
    ("03", "merge_heads", heads_interleaved, "the package's numbers, in other places"),
    ("03", "layer", ZeroedPadding, "only the outputs at padded positions differ (batch row 1: position 4; "
                                   "row 2: positions 3-4), and yours are 0 there"),
    ("03", "sentence_loss", log_likelihood, "yours is the package's with the sign flipped"),
    ("04", "whole_words", words_from_one, "every number is 1 more than the package's (off by one)"),
    ("04", "ngram_probabilities", unnormalised, "yours is the package's x 1.5, the same factor everywhere"),
    ("05", "mlm_loss", summed_mlm_loss, "yours is the package's x 7.0 = M (M = 7)"),
    ("05", "lr_factor", one_step_ahead, "yours at step s is the package's at step s + 1 (one step ahead)"),
    ("05", "training_step", functools.partial(training_step, order=("optimizer", "clip", "schedule")),
     "leaving out the gradient clipping gives exactly yours"),
    ("05", "training_step", functools.partial(training_step, order=("clip", "schedule", "optimizer")),
     "stepping the schedule before the optimizer"),
]


def test_ten_unregistered_mistakes_across_lessons_03_to_05():
    assert len(UNREGISTERED) >= 10 and {lesson for lesson, *_ in UNREGISTERED} == {"03", "04", "05"}


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
@pytest.mark.parametrize("lesson, name, piece, phrase", UNREGISTERED,
                         ids=[f"{m[1]}: {m[3][:40]}" for m in UNREGISTERED])
def test_an_unregistered_mistake_is_named_by_its_pattern(capsys, lesson, name, piece, phrase):
    ok, out = verdict(capsys, name, piece)
    assert not ok and out.startswith(f"{name}: wrong: "), out
    assert "that is what" not in out, f"a registered mistake, not a pattern: {out}"
    assert phrase in out, out


@pytest.mark.parametrize("order, phrase", [
    (("optimizer", "schedule"), "leaving out the gradient clipping"),
    (("clip", "optimizer"), "leaving out the schedule's step"),
])
def test_a_step_that_leaves_out_an_operation_is_told_which(capsys, order, phrase):
    """Lesson 05 promises that the check names the step left out (it used to name a weight that differs)."""
    ok, out = verdict(capsys, "training_step", functools.partial(training_step, order=order))
    assert not ok and f"; {phrase}" in out and out.endswith("gives exactly yours\n"), out


def test_a_step_without_weight_decay_is_told_so(capsys):
    def no_decay(model, batch, optimizer, scheduler, clip_norm):
        for group in optimizer.param_groups:
            group["weight_decay"] = 0.0
        return training_step(model, batch, optimizer, scheduler, clip_norm)
    ok, out = verdict(capsys, "training_step", no_decay)
    assert not ok and out.endswith("; leaving out the weight decay gives exactly yours\n"), out


def test_lamb_without_its_decay_term_is_told_so(capsys):
    """The planted mistake of tests/test_pieces_04_05.py got "values differ at ..." alone."""
    def no_decay(w, g, m, v, lr, weight_decay, adapt, b1=0.9, b2=0.999, eps=1e-6):
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        update = m / (v.sqrt() + eps)
        return w - lr * (update * w.norm() / update.norm() if adapt else update), m, v
    ok, out = verdict(capsys, "lamb_update", no_decay)
    assert not ok and out.endswith("; yours is what the package's gives with the weight decay set to "
                                   "zero\n"), out


def test_a_step_without_zero_grad_is_told_so(capsys):
    def accumulating(model, batch, optimizer, scheduler, clip_norm):
        loss = model(**batch).loss
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        scheduler.step()
        return loss.item()
    ok, out = verdict(capsys, "training_step", accumulating)
    assert not ok and "leaving out zero_grad" in out, out


def test_each_changed_step_is_the_packages_step_with_one_change():
    """changed_step with no change is the package's step, and each change gives another run."""
    torch.manual_seed(0)
    cfg = CHECK_CONFIG.replace(classifier_dropout_prob=0.0)
    start = AlbertForPretraining(cfg, sentence_task="sop").state_dict()
    g = torch.Generator().manual_seed(0)
    batches = [pretraining_batch(g, cfg) for _ in range(3)]

    def run(step) -> list[float]:
        model = AlbertForPretraining(cfg, sentence_task="sop")
        model.load_state_dict(start)
        optimizer = make_optimizer("adamw", model, lr=0.05, weight_decay=0.1)
        scheduler = warmup_linear_decay(optimizer, warmup_steps=1, total_steps=4)
        losses = [step(model, batch, optimizer, scheduler, 0.5) for batch in batches]
        return losses + [model(**batches[0]).loss.item()]

    package = run(PIECES["training_step"].package_version())
    assert run(functools.partial(changed_step, change="")) == pytest.approx(package, rel=1e-5)
    for change, _ in STEP_CHANGES:
        assert run(functools.partial(changed_step, change=change)) != pytest.approx(package, rel=1e-5), change


# ------------------------------------------------------------------ the patterns themselves


def test_a_factor_of_plain_sizes_is_named_by_its_closed_form():
    t = torch.randn(2, 64, dtype=torch.float64)
    assert pattern(t * 8, t, (torch.zeros(2, 64),)) == "; yours is the package's x 8.0 = sqrt(64)"
    assert pattern(t / 8, t, (torch.zeros(2, 64),)) == "; yours is the package's x 0.125 = 1/sqrt(64)"
    assert pattern(t * 3.3, t, (torch.zeros(2, 64),)) == ("; yours is the package's x 3.3, the same factor "
                                                          "everywhere")


def test_zeros_and_a_constant_added_are_named():
    t = torch.randn(3, 5, dtype=torch.float64)
    assert pattern(torch.zeros(3, 5), t) == "; yours is all zeros"
    assert pattern(t + 0.25, t) == "; yours is the package's + 0.25 everywhere (a constant added)"


def test_whole_columns_and_shifts_are_located():
    t = torch.randn(4, 6, dtype=torch.float64)
    y = t.clone()
    y[:, 2] += 1
    assert pattern(y, t) == "; only column 2 differs (of 0-5); the rest match"
    y[:, 3] += 1
    assert pattern(y, t) == "; only columns 2-3 differ (of 0-5); the rest match"
    seq = torch.arange(10, dtype=torch.float64) ** 2
    assert "yours at position p is the package's at position p - 1 (one position behind)" in pattern(
        torch.cat([seq[:1], seq[:-1]]), seq)


@pytest.mark.parametrize("yours, theirs", [
    (object(), torch.ones(3)), (torch.ones(3) + 1j, torch.ones(3)), ("text", 1.0), ([1, [2]], [1, 2]),
    (torch.ones(2, device="meta"), torch.ones(2)), (torch.randn(3, 4), torch.randn(5)),
])
def test_no_pattern_is_not_an_error(yours, theirs):
    assert pattern(yours, theirs, (torch.zeros(2, 2),)) == ""


def test_the_package_versions_that_stand_in_for_property_pieces_pass_their_checks(capsys):
    """What replaces a learner's p(n) draw, 80/10/10 choice, span placement, exclusion rule, schedule or
    step during another piece's check is right by that piece's own check."""
    for name in ("ngram_draw", "corrupt", "span_placement", "decay_exclusion", "lr_factor", "training_step"):
        ok, out = verdict(capsys, name, PIECES[name].package_version())
        assert ok, out
