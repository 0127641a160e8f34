"""The learner writes the model and its training: at least 40 checked pieces in the lessons, two or more in
every lesson from 02 to 10 and one or more in 11 (our weights under transformers' names, checked by loading)
and 12 (per-layer gradient norms of a shared and an unshared model), at least half of them five lines of
solution or more, every piece REQUIRED lists checked in its lesson, and every piece fails its check when a
mistake is planted in it (one wrong version of each below, run through `check` like a learner's).

A piece counts when a lesson's code calls `check("name", ...)` on it and minialbert.course.pieces knows
the name. Its solution is the code between the solution markers of the code cell just before that check
(one block per piece where the check cell checks as many pieces as that cell has blocks); a line of
solution is a line with code on it, not a blank line or a comment.
"""

import functools
import re
from pathlib import Path

import pytest
import torch
from test_hints import solution_blocks
from test_pieces import AppliedOnce, MyClassifier, MyFactorizedEmbedding, NoNorm, PreLN, training_step
from test_pieces_04_05 import place_spans
from test_pieces_04_05 import training_loop as right_training_loop
from test_triton_piece import no_rescaling
from torch import nn

from minialbert.course.notebooks import lessons, read_notebook
from minialbert.course.pieces import PIECES, check

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHECK_CALL = re.compile(r'(?<![\w.])check\(\s*"(?P<name>\w+)"')
BUILD_LESSONS = [f"{n:02d}" for n in range(2, 11)]
MINIMUM = 40
AT_LEAST = {**{lesson: 2 for lesson in BUILD_LESSONS}, "11": 1, "12": 1}     # pieces per lesson
SUBSTANTIAL = 5                      # lines of solution; at least half of all pieces have this many or more

# The pieces each lesson must check: the model's parts and, with them, the masked-LM loss; n-gram
# span placement: the budget, the p(n) draw, the placement with its whole-word extension, the 80/10/10
# corruption; the full LAMB update and its exclusions; the training loop around the step; a cross-evaluation
# in 08; Table 2's parameter count in 09; the online softmax in Triton in 10; then a second and third piece
# in 06 to 09, our weights mapped to transformers' names and back in 11, each checked by loading, and in 12
# each application's gradient norm in a shared and an unshared model, and the shares of a masked batch.
REQUIRED = {
    "02": ["factorized_embedding", "embedding_parameters"],
    "03": ["split_heads", "merge_heads", "attention", "layer", "shared_encoder", "mlm_head", "sentence_loss"],
    "04": ["whole_words", "ngram_probabilities", "corrupt", "sop_pair", "nsp_pair", "mask_budget",
           "ngram_draw", "span_placement"],
    "05": ["trust_ratio", "training_step", "mask_accuracy", "unigram_accuracy", "mlm_loss", "lamb_update",
           "decay_exclusion", "lr_factor", "training_loop"],
    "06": ["layer_transition", "transitions_per_sequence", "curve_oscillation"],
    "07": ["classifier", "pair_layout", "wilson_interval"],
    "08": ["cross_evaluation", "length_rule", "arm_interval"],
    "09": ["table2_parameters", "model_flops", "beats_rule"],
    "10": ["online_softmax", "online_softmax_triton"],
    "11": ["to_transformers", "from_transformers"],
    "12": ["layer_gradient_norms", "masking_shares"],
}


def checked_in_lessons() -> dict[str, list[str]]:
    """{lesson number: the pieces its code cells check, in order}."""
    found = {}
    for path in lessons(NOTEBOOKS):
        cells = read_notebook(path).cells
        found[path.name[:2]] = [m["name"] for c in cells if c.cell_type == "code"
                                for m in CHECK_CALL.finditer(c.source)]
    return found


def code_lines(solution: str) -> int:
    """A solution's lines with code on them (not blank, not a comment)."""
    return sum(1 for line in solution.splitlines() if line.strip() and not line.lstrip().startswith("#"))


def solution_lines() -> dict[str, int]:
    """{piece: its lines of solution}: the solution blocks of the code cell before each check cell, one
    block per piece where the check cell checks as many pieces as the cell has blocks, all of them for the
    one piece it checks otherwise."""
    lines = {}
    for path in lessons(NOTEBOOKS):
        code = [c.source for c in read_notebook(path).cells if c.cell_type == "code"]
        for before, cell in zip(code, code[1:]):
            if not (names := [m["name"] for m in CHECK_CALL.finditer(cell)]):
                continue
            blocks = [code_lines(body) for _, body in solution_blocks(before)[0]]
            assert blocks and (len(names) == 1 or len(names) == len(blocks)), \
                f"{path.name}: the cell before check({', '.join(names)}) has {len(blocks)} solution blocks"
            for name, n in zip(names, blocks) if len(names) == len(blocks) else [(names[0], sum(blocks))]:
                lines[name] = n
    return lines


CHECKED = checked_in_lessons()


def test_at_least_40_pieces_are_checked_in_the_lessons():
    names = {name for pieces in CHECKED.values() for name in pieces}
    assert len(names) >= MINIMUM, f"{len(names)} pieces checked in the lessons: {sorted(names)}"


def test_every_lesson_from_02_to_10_has_two_pieces_and_11_and_12_one():
    short = {lesson: CHECKED.get(lesson, []) for lesson, n in AT_LEAST.items()
             if len(CHECKED.get(lesson, [])) < n}
    assert not short, f"lessons with fewer pieces than they need ({AT_LEAST}): {short}"


def test_at_least_half_of_the_pieces_have_five_lines_of_solution_or_more():
    lines = solution_lines()
    assert set(lines) == {name for names in CHECKED.values() for name in names}, "a check with no solution"
    long = sorted(name for name, n in lines.items() if n >= SUBSTANTIAL)
    assert 2 * len(long) >= len(lines), (f"{len(long)} of {len(lines)} pieces have {SUBSTANTIAL} lines of "
                                         f"solution or more: {long}")


def test_every_checked_name_is_a_piece_and_every_piece_is_checked_once():
    names = [name for pieces in CHECKED.values() for name in pieces]
    unknown = set(names) - set(PIECES)
    assert not unknown, f"checked, unknown to minialbert.course.pieces: {unknown}"
    assert not set(PIECES) - set(names), f"pieces no lesson checks: {sorted(set(PIECES) - set(names))}"
    assert len(names) == len(set(names)), f"checked twice: {[n for n in set(names) if names.count(n) > 1]}"


def test_the_required_pieces_are_checked_in_their_lessons():
    missing = [f"{lesson}: {name}" for lesson, names in REQUIRED.items() for name in names
               if name not in CHECKED.get(lesson, [])]
    assert not missing, "listed pieces not checked in their lesson: " + ", ".join(missing)


# ------------------------------------------------------------------ a planted mistake in every piece
class NoPaddingIdx(MyFactorizedEmbedding):
    def __init__(self, cfg):
        super().__init__(cfg)
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.embedding_size)


class Unpooled(MyClassifier):
    def forward(self, input_ids, token_type_ids, attention_mask):
        return self.classifier(self.albert(input_ids, token_type_ids, attention_mask).last_hidden_state[:, 0])


def seventy_twenty_ten(token, vocab, rng):
    r = rng.random()
    return vocab.mask_id if r < 0.7 else rng.choice(vocab.random_ids) if r < 0.9 else token


def first_named_mistake(name):
    """A function piece's first named mistake: a function with the piece's arguments, as a learner's."""
    return PIECES[name].mistakes[0][1]


PLANTED = {
    **{name: first_named_mistake(name) for name, piece in PIECES.items()
       if piece.kind == "function" and piece.mistakes},
    "mask_accuracy": lambda logits, labels: (logits.argmax(dim=-1) == labels).sum().item(),   # a count
    "factorized_embedding": NoPaddingIdx,             # the [PAD] row learns
    "layer": PreLN,
    "shared_encoder": AppliedOnce,
    "mlm_head": NoNorm,
    "classifier": Unpooled,                            # [CLS] without the pooler
    "corrupt": seventy_twenty_ten,
    "training_step": functools.partial(training_step, clip=False),
    "ngram_draw": lambda rng, max_ngram: rng.randint(1, max_ngram),                      # uniform p(n)
    "span_placement": functools.partial(place_spans, whole=False),                      # pieces, not words
    "decay_exclusion": lambda name: "bias" in name,                                      # LayerNorm decayed
    "lr_factor": lambda step, warmup, total: max(0.0, (total - step) / total),          # no warmup
    "training_loop": functools.partial(right_training_loop, schedule=False),            # constant rate
    "online_softmax_triton": no_rescaling,
    "to_transformers": PIECES["to_transformers"].mistakes[0][1],                # key and query swapped
    "from_transformers": PIECES["from_transformers"].mistakes[0][1],            # fused k, q, v
}


def test_every_piece_has_a_planted_mistake():
    assert not set(PIECES) - set(PLANTED), f"no planted mistake for: {sorted(set(PIECES) - set(PLANTED))}"


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_mistake_fails_its_check(capsys, name):
    torch.manual_seed(0)
    ok = check(name, PLANTED[name])
    out = capsys.readouterr().out
    assert not ok and out.startswith(f"{name}: wrong: ") and out.count("\n") == 1, out
    assert "your code raised" not in out, f"the planted mistake crashed instead of being wrong: {out}"
