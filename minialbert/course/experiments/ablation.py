"""The NSP vs SOP ablation (the paper's Table 5): three arms of one ALBERT, differing only in the
sentence objective, each evaluated on every task it was and was not trained for.

The arms are zoo entries: `albert-mlm` (no sentence objective), `albert-nsp` (BERT's next-sentence
prediction), `albert-sop` (ALBERT's sentence-order prediction), `albert-sop-balanced` (SOP on pairs
whose segment lengths carry no cue, see below), and their `-seed1`, `-seed2` twins.
For every arm and seed this module measures, on held-out text (the valid and test splits together):

    mlm     masked-LM accuracy at [MASK] positions and at all predicted positions, on one shared
            single-segment set (every arm reads it in distribution)
    nsp     NSP accuracy of the model's own sentence head; an SOP head is read as the paper did:
    sop     its class 0 ("in order") as NSP's class 0 ("is next"), and the other way round
    probe   a logistic regression on the frozen pooled output, fitted on `probe_examples` training
            pairs of each task: the only sentence reading of the MLM-only arm (whose pooler was
            never trained), and the same yardstick for all arms beside a randomly initialised encoder

Shortcuts. SOP's two classes hold the same text, but not always the same segment lengths: in the arms'
cut (SEGMENTING, not the official one) a chunk grows until a sentence crosses the target length, so the
second run (which holds that sentence) is longer on average, and the swap makes it a cue. `length_shortcut`
measures how far a classifier that sees only the two segment lengths gets; `length_matched` picks the
held-out examples on which it is exactly at chance (as many of each label in every (len A, len B) cell),
and sentence accuracies are reported on both sets. The `sop-balanced` arm trains on pairs chosen the same
way (`segments.length_balanced`), so it cannot learn the cue at all.
Where a segment is cut is a second cue: truncation trims the longer segment (usually the second run) at
a random end, so it often ends mid-sentence. `segment_ends` reads each segment's end type, `end_shortcut`
how far that alone gets; `length_matched` given the tokenizer also matches end types.

Curves: each arm's own head on its own task over training (the zoo's metrics): the step at which it
crosses 60% and at which its interval leaves chance. Downstream: every arm and seed fine-tuned on the
offline single-sentence and sentence-pair tasks (`finetune.learning_curve`).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from ...config import OBJECTIVES
from ...evaluation import evaluate_pretraining, evaluation_sample, sentence_metrics, wilson_interval
from ...finetune import FinetuneArgs, curve_summary, learning_curve
from ...model import AlbertForPretraining
from ...pretraining_data import PretrainingDataset, collate, unmasked_ids
from ...segments import TWO_SENTENCE_CHUNKS, length_balanced
from ...tokenizer import Tokenizer
from ..data import course_pretraining_data, course_tokenizer
from ..scale import Data
from .shortcut_rule import majority_by_cell
from .tasks import load_task
from .zoo import Zoo

ARMS = (*OBJECTIVES, "sop-balanced")      # each objective, and SOP on length-balanced pairs
SEGMENTING, SENTENCE_TASKS = TWO_SENTENCE_CHUNKS, ("nsp", "sop")    # the 32-token arms' cut; pair tasks
DOWNSTREAM_TASKS = ("shuffled-words", "next-sentence")      # one single-sentence task, one pair task
SENTENCE_FINAL = re.compile(r"""[.!?:]["'’”»)\]]*$""")   # a piece that ends a sentence: . ! ? :, closers
CLOSING = re.compile(r"""["'’”»)\]]+""")                   # a piece that only closes: quotes, brackets
# The paper's Table 5 (ALBERT-base, all-shared, its full pretraining): intrinsic accuracies in %.
PAPER_TABLE5 = {
    "mlm": {"mlm": 54.9, "nsp": 52.4, "sop": 53.3, "downstream_avg": 79.0},
    "nsp": {"mlm": 54.5, "nsp": 90.5, "sop": 52.0, "downstream_avg": 79.2},
    "sop": {"mlm": 54.0, "nsp": 78.9, "sop": 86.5, "downstream_avg": 80.1},
}


def arm_entry(arm: str, seed: int = 0) -> str:
    """The zoo entry of an arm and pretraining seed: albert-sop, albert-sop-seed1, albert-sop-balanced, ..."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return f"albert-{arm}" + (f"-seed{seed}" if seed else "")


# ------------------------------------------------------------------------------- held-out data
def joined(first: PretrainingDataset, second: PretrainingDataset) -> PretrainingDataset:
    """One dataset holding the examples of both (same objective and sequence length), first's first."""
    if (first.objective, first.max_seq_len) != (second.objective, second.max_seq_len):
        raise ValueError(f"cannot join a {first.objective}/{first.max_seq_len} dataset with a "
                         f"{second.objective}/{second.max_seq_len} one")
    labels = (None if first.sentence_labels is None
              else torch.cat([first.sentence_labels, second.sentence_labels]))
    documents = None                  # the second's documents numbered after the first's: never merged
    if first.document_ids is not None and second.document_ids is not None:
        after = int(first.document_ids.max()) + 1 if len(first) else 0
        documents = torch.cat([first.document_ids, second.document_ids + after])
    return PretrainingDataset(torch.cat([first.input_ids, second.input_ids]),
                              torch.cat([first.token_type_ids, second.token_type_ids]),
                              torch.cat([first.mlm_labels, second.mlm_labels]),
                              torch.cat([first.offsets, second.offsets[1:] + first.offsets[-1]]),
                              labels, first.objective, first.max_seq_len, documents)


def sampled(dataset: PretrainingDataset, max_examples: int | None, seed: int = 0) -> PretrainingDataset:
    """A fixed seeded sample of max_examples of the dataset's examples, in their order (None, or at
    least as many as it holds: the dataset itself)."""
    at = evaluation_sample(dataset, max_examples, seed)
    if len(at) == len(dataset):
        return dataset
    bounds = dataset.offsets.tolist()
    pieces = [slice(bounds[i], bounds[i + 1]) for i in at]
    offsets = torch.cat([dataset.offsets[:1], dataset.lengths[at].cumsum(0).to(dataset.offsets.dtype)])
    labels = None if dataset.sentence_labels is None else dataset.sentence_labels[at]
    documents = None if dataset.document_ids is None else dataset.document_ids[at]
    return PretrainingDataset(*(torch.cat([t[p] for p in pieces]) for t in
                                (dataset.input_ids, dataset.token_type_ids, dataset.mlm_labels)),
                              offsets, labels, dataset.objective, dataset.max_seq_len, documents)


def heldout(objective: str, data: Data, examples: int | None) -> PretrainingDataset:
    """The course's held-out pretraining examples of one objective, cut as the arms' were (SEGMENTING): the
    valid and the test split (a fixed seeded sample of `examples`, the recipe's eval_examples, where the
    scale caps it; None: all)."""
    return sampled(joined(*(course_pretraining_data(objective, split, data, segmenting=SEGMENTING)
                            for split in ("valid", "test"))), examples)


def segment_lengths(dataset: PretrainingDataset) -> torch.Tensor:
    """(E, 2): the tokens of segment A and of segment B of every [CLS] A [SEP] B [SEP] example."""
    if dataset.objective == "mlm":
        raise ValueError("an MLM-only dataset has one segment per example; segment lengths need pairs")
    example = torch.repeat_interleave(torch.arange(len(dataset)), dataset.lengths)           # (T,)
    b = torch.zeros(len(dataset), dtype=torch.long).index_add_(0, example, dataset.token_type_ids.long())
    return torch.stack([dataset.lengths - b - 2, b - 1], dim=1)           # minus [CLS], [SEP]; minus [SEP]


def segment_ends(dataset: PretrainingDataset, tokenizer: Tokenizer) -> torch.Tensor:
    """(E, 2) bool: whether segment A and segment B of every pair end at a sentence end.

    Examples do not store where truncation cut a segment, so this reads the text before masking: a
    segment ends at a sentence end when its last piece, past any closing quotes or brackets, ends in
    '.', '!', '?' or ':'. Every sentence of the course corpus's valid split does, and about 1% of cuts at
    random places within its sentences do (just after "e.g.", "os."): it is the end as the text shows
    it, the cue as a model could read it.
    """
    pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
    kind = torch.tensor([2 if CLOSING.fullmatch(p) else int(bool(SENTENCE_FINAL.search(p))) for p in pieces])
    lengths = segment_lengths(dataset)                                                          # (E, 2)
    last = torch.stack([dataset.offsets[:-1] + lengths[:, 0], dataset.offsets[1:] - 2], dim=1)  # (E, 2)
    back = torch.arange(4)                               # room for three closing pieces after the end
    at = (last[..., None] - back).clamp(min=0)                                                  # (E, 2, 4)
    ids = unmasked_ids({"input_ids": dataset.input_ids[at], "mlm_labels": dataset.mlm_labels[at]})
    kinds = torch.where(back < lengths[..., None], kind[ids.long()], 0)     # 0 outside the segment
    word = (kinds != 2).int().argmax(-1, keepdim=True)             # the last piece that does not close
    return kinds.gather(-1, word).squeeze(-1) == 1


def _shortcut(train_cells: torch.Tensor, train: PretrainingDataset, test_cells: torch.Tensor,
              test: PretrainingDataset, indices: Sequence[int] | None, name: str) -> dict:
    """sentence_metrics on `test` of the rule that answers, in every cell, the label seen most often there
    in `train` (unseen cells and ties: the majority label); the interval resamples `test`'s documents
    where it names them."""
    predicted = majority_by_cell(train_cells, train.sentence_labels, test_cells)
    truth, documents = test.sentence_labels.long(), test.document_ids
    if indices is not None:
        chosen = list(indices)
        predicted, truth = predicted[chosen], truth[chosen]
        documents = None if documents is None else documents[chosen]
    return sentence_metrics(predicted, truth, f"{test.objective} from {name}", clusters=documents)


def length_shortcut(train: PretrainingDataset, test: PretrainingDataset,
                    indices: Sequence[int] | None = None) -> dict:
    """The best a classifier reading only the two segment lengths can do: for every (len A, len B)
    cell, the label seen most often there in training (unseen cells: the majority label). Returns its
    sentence_metrics on `test` (or on its examples at `indices`)."""
    def cells(dataset: PretrainingDataset) -> torch.Tensor:
        lengths = segment_lengths(dataset)
        return lengths[:, 0] * 10_000 + lengths[:, 1]                      # one id per (len A, len B)
    return _shortcut(cells(train), train, cells(test), test, indices, "segment lengths")


def end_shortcut(train: PretrainingDataset, test: PretrainingDataset, tokenizer: Tokenizer,
                 indices: Sequence[int] | None = None) -> dict:
    """The best a rule reading only where the two segments end (`segment_ends`) can do: in each of the
    four (end of A, end of B) cells, the label seen most often there in training. Returns its
    sentence_metrics on `test` (or on its examples at `indices`) with "cells": for each cell of the test
    pairs, {"n", "label_1_share"} (label 1: swapped in SOP, another document's B in NSP). To measure
    the cue within one set (the training pairs after balancing, say) pass it as train and as test:
    with four cells, fitting where one reads inflates the result by almost nothing."""
    train_cells = segment_ends(train, tokenizer).long() @ torch.tensor([2, 1])               # 0..3
    test_ends = segment_ends(test, tokenizer)
    result = _shortcut(train_cells, train, test_ends.long() @ torch.tensor([2, 1]), test, indices,
                       "segment ends")
    at = list(range(len(test))) if indices is None else list(indices)
    ends, labels = test_ends[at], test.sentence_labels[at].float()
    end_type = {True: "sentence end", False: "mid-sentence"}
    result["cells"] = {}
    for end_a in (True, False):
        for end_b in (True, False):
            inside = (ends[:, 0] == end_a) & (ends[:, 1] == end_b)
            share = labels[inside].mean().item() if inside.any() else None
            result["cells"][f"A {end_type[end_a]}, B {end_type[end_b]}"] = {"n": int(inside.sum()),
                                                                             "label_1_share": share}
    return result


def shortcuts(train: dict[str, PretrainingDataset], heldout: dict[str, PretrainingDataset],
              matched: dict[str, list[int]], tokenizer: Tokenizer) -> dict:
    """For each sentence task, the length and segment-end rules fitted on `train` and read on the
    held-out pairs, all of them and the `length_matched` ones (None where none is matched)."""
    result = {}
    for task in SENTENCE_TASKS:
        fitted, read, at = train[task], heldout[task], matched[task]
        result[task] = {"all": length_shortcut(fitted, read),
                        "length_matched": length_shortcut(fitted, read, at) if at else None,
                        "ends": end_shortcut(fitted, read, tokenizer),
                        "ends_matched": end_shortcut(fitted, read, tokenizer, at) if at else None}
    return result


def length_matched(dataset: PretrainingDataset, seed: int = 0,
                   tokenizer: Tokenizer | None = None) -> list[int]:
    """Indices of a subset on which segment lengths say nothing about the label: in every (len A, len B)
    cell, as many examples of each label (a seeded choice of the more frequent one's). Given the
    tokenizer, the cells also match where each segment is cut (`segment_ends`), so on the subset neither
    the lengths nor the end types say anything: the cleaner control."""
    cells = segment_lengths(dataset)
    if tokenizer is not None:
        cells = torch.cat([cells, segment_ends(dataset, tokenizer).long()], dim=1)  # (len A, len B, ends)
    return length_balanced(cells.tolist(), dataset.sentence_labels.tolist(), random.Random(seed))


# ------------------------------------------------------------------------------- measurements
@torch.no_grad()
def read_pairs(model: AlbertForPretraining, dataset: PretrainingDataset, indices: Sequence[int],
               batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The frozen pooled output (n, H) and, for a model with a sentence head, its predicted class (n,)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    pooled, predicted = [], []
    for start in range(0, len(indices), batch_size):
        batch = collate([dataset[i] for i in indices[start:start + batch_size]])
        out = model.albert(batch["input_ids"].to(device), batch["token_type_ids"].to(device),
                           batch["attention_mask"].to(device))
        pooled.append(out.pooled_output.float().cpu())
        if model.sentence_head is not None:
            predicted.append(model.sentence_head(out.pooled_output).argmax(-1).cpu())
    model.train(was_training)
    return torch.cat(pooled), (torch.cat(predicted) if predicted else None)


def head_on_pairs(head: nn.Module, pooled: torch.Tensor,
                  labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A sentence head read on pairs of either task (the cross-evaluation of Table 5): the head's class 0
    is read as the pairs' class 0 ("is next" as "in order"), so an NSP head can be scored on SOP pairs and
    the other way round. pooled: (n, H) pooled outputs, labels: (n,) the pairs' own labels. Returns
    (accuracy, share of the pairs the head puts in class 1), each a 0-dim tensor."""
    predicted = head(pooled).argmax(-1)
    return (predicted == labels).float().mean(), (predicted == 1).float().mean()


def fit_logistic(features: torch.Tensor, labels: torch.Tensor, weight_decay: float = 1e-3,
                 steps: int = 100):
    """A logistic regression on standardised features, fitted by L-BFGS (deterministic): returns a
    function from features (n, D) to predicted classes (n,)."""
    mean, std = features.mean(0), features.std(0).clamp(min=1e-6)
    x = (features - mean) / std
    linear = nn.Linear(features.shape[1], int(labels.max()) + 1)
    nn.init.zeros_(linear.weight)
    nn.init.zeros_(linear.bias)
    optimizer = torch.optim.LBFGS(linear.parameters(), max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(linear(x), labels) + weight_decay * linear.weight.square().sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return lambda f: linear((f - mean) / std).argmax(-1).detach()


def cross_evaluate(model: AlbertForPretraining, data: dict[str, PretrainingDataset],
                   probe_train: dict[str, PretrainingDataset], matched: dict[str, list[int]],
                   probe_examples: int, seed: int = 0) -> dict:
    """One model on every task: {"mlm": evaluate_pretraining on data["mlm"], "nsp"/"sop": {"head": own
    head's sentence_metrics or None, "head_matched": the same on the length-matched subset, "probe",
    "probe_matched": the linear probe's}}. Pairs cut from one document are not independent: where the
    data name each pair's document (that of segment A), every interval resamples documents."""
    result = {"mlm": evaluate_pretraining(model, data["mlm"])}
    for task in SENTENCE_TASKS:
        test = data[task]
        train_at = evaluation_sample(probe_train[task], probe_examples, seed)
        train_x, _ = read_pairs(model, probe_train[task], train_at)
        test_x, predicted = read_pairs(model, test, list(range(len(test))))
        probe = fit_logistic(train_x, probe_train[task].sentence_labels[train_at].long())(test_x)
        result[task] = {**_readings("head", predicted, test, matched[task]),
                        **_readings("probe", probe, test, matched[task])}
    return result


def head_readings(model: AlbertForPretraining, test: PretrainingDataset, matched: list[int]) -> dict:
    """The model's own sentence head on every pair of `test` and on the matched ones: {"head",
    "head_matched"}, as cross_evaluate reads them (without its probe and masked-LM readings)."""
    _, predicted = read_pairs(model, test, list(range(len(test))))
    return _readings("head", predicted, test, matched)


def _readings(name: str, guess: torch.Tensor | None, test: PretrainingDataset, matched: list[int]) -> dict:
    """sentence_metrics of guesses for every pair of `test` (name) and for the matched ones
    (name_matched); None where there is no guess (no head) or no pair (no match in a small sample)."""
    truth, docs = test.sentence_labels.long(), test.document_ids
    readings = {}
    for reading, subset in ((name, list(range(len(test)))), (f"{name}_matched", matched)):
        readings[reading] = None if guess is None or not subset else sentence_metrics(
            guess[subset], truth[subset], test.objective, clusters=None if docs is None else docs[subset])
    return readings


def crossing_step(curve: Sequence[dict], task: str, level: float | str = 0.6) -> int | None:
    """The first step at which the task's accuracy reaches `level`, or, for level "chance", at which the
    lower end of its 95% interval is above the point's chance (50% for a curve from the training
    metrics, see training_curve); None if it never does. Points without the task are skipped."""
    for point in curve:
        m = point.get(task)
        if m is None:
            continue
        if (m["ci95"][0] > m["chance"]) if level == "chance" else (m["accuracy"] >= level):
            return point["step"]
    return None


def training_curve(name: str, zoo: Zoo) -> list[dict]:
    """A zoo entry's own sentence head on its own task at every held-out evaluation of its training, read
    from its training metrics (a fixed seeded sample of held-out pairs, the same at every step):
    [{"step", task: {"accuracy", "ci95", "n", "chance", "predicted_shares"}}]; [] for an MLM-only entry.
    The metrics do not record the sample's label shares; its pairs are built swapped (or with a random
    B) with probability 1/2, so chance is taken as 50% (with 10,000 pairs the majority share is within a
    point of it)."""
    task = zoo.entry(name).objective
    if task not in SENTENCE_TASKS:
        return []
    points = []
    for r in zoo.metrics(name):
        if r["split"] != "valid" or f"{task}_accuracy" not in r:
            continue
        n, accuracy, ones = r["eval_examples"], r[f"{task}_accuracy"], r[f"{task}_predicted_1"]
        points.append({"step": r["step"], task: {
            "accuracy": accuracy, "ci95": list(wilson_interval(round(accuracy * n), n)), "n": n,
            "chance": 0.5, "predicted_shares": [1 - ones, ones]}})
    return points


# ------------------------------------------------------------------------------- the experiment
@dataclass(frozen=True)
class AblationSizes:
    """What the experiment measures (the course's values; the lessons' sizes shrink them at ci scale)."""
    seeds: int = 3                  # pretraining seeds per arm: zoo entries albert-<arm>, -seed1, -seed2
    probe_examples: int = 2000      # labelled pairs each linear probe fits on
    downstream_labels: int = 256    # labelled examples per downstream task


def run_ablation(arms: Sequence[str], zoo: Zoo, sizes: AblationSizes, finetune: FinetuneArgs,
                 downstream: Sequence[str] = DOWNSTREAM_TASKS, curves: bool = True,
                 progress: bool = True) -> dict:
    """The whole experiment: returns a JSON-ready dict (see the module doc). Builds missing zoo entries.
    `finetune` is each downstream run's arguments (its seed is replaced by each arm's seed)."""
    if not arms or any(a not in ARMS for a in arms):
        raise ValueError(f"arms must be a non-empty subset of {', '.join(ARMS)}, got {list(arms)}")
    if isinstance(sizes.seeds, bool) or not isinstance(sizes.seeds, int) or sizes.seeds < 1:
        raise ValueError(f"seeds must be an integer >= 1, got {sizes.seeds!r}")
    t0 = time.perf_counter()
    data = {objective: heldout(objective, zoo.data, zoo.recipe.eval_examples) for objective in OBJECTIVES}
    probe_train = {task: course_pretraining_data(task, "train", zoo.data, segmenting=SEGMENTING)
                   for task in SENTENCE_TASKS}
    tokenizer = course_tokenizer(zoo.data)
    matched = {task: length_matched(data[task], tokenizer=tokenizer) for task in SENTENCE_TASKS}
    result = {"scale": zoo.scale_name, "arms": list(arms), "seeds": list(range(sizes.seeds)),
              "heldout": {task: {"examples": len(d), "length_matched": len(matched.get(task, []))}
                          for task, d in data.items()},
              "probe_examples": sizes.probe_examples,
              "downstream_labels": sizes.downstream_labels, "paper": PAPER_TABLE5,
              "shortcut": shortcuts(probe_train, data, matched, tokenizer),
              "runs": [], "curves": {}, "downstream": []}
    models = {(arm, seed): zoo.load(arm_entry(arm, seed), progress=progress)
              for arm in arms for seed in range(sizes.seeds)}
    reference = next(iter(models.values())).config
    torch.manual_seed(0)
    random_init = AlbertForPretraining(reference, sentence_task=None).eval()
    jobs = [("random init", 0, random_init)] + [(arm, s, m) for (arm, s), m in models.items()]
    for arm, seed, model in tqdm(jobs, disable=not progress, desc="cross-evaluation"):
        entry = None if arm == "random init" else arm_entry(arm, seed)
        measured = cross_evaluate(model, data, probe_train, matched, sizes.probe_examples)
        result["runs"].append({"arm": arm, "seed": seed, "entry": entry, **measured})
    if curves:
        for arm, seed in models:
            curve = training_curve(arm_entry(arm, seed), zoo)
            if curve:
                result["curves"][arm_entry(arm, seed)] = [{"arm": arm, **point} for point in curve]
    for name in downstream:
        task = load_task(name, zoo.data)
        for (arm, seed), model in models.items():
            rows = learning_curve(task, tokenizer, {arm: model}, [sizes.downstream_labels], [seed],
                                  finetune, progress=False)
            result["downstream"] += [{"task": name, **row} for row in rows]
    result["summary"] = summarize(result)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    return result


def _mean_spread(values: list[float]) -> dict:
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values), "seeds": len(values)}


def summarize(result: dict) -> dict:
    """Per arm, over seeds: mean, min and max of [MASK] accuracy, each sentence accuracy (own head and
    probe, all and length-matched) and each downstream task's test accuracy."""
    summary = {}
    for arm in [*result["arms"], "random init"]:
        runs = [r for r in result["runs"] if r["arm"] == arm]
        if not runs:
            continue
        row = {"mask": _mean_spread([r["mlm"]["mlm"]["mask"]["accuracy"] for r in runs])}
        for task in SENTENCE_TASKS:
            for reading in ("head", "head_matched", "probe", "probe_matched"):
                if runs[0][task][reading] is not None:
                    row[f"{task}_{reading}"] = _mean_spread([r[task][reading]["accuracy"] for r in runs])
        for name in sorted({d["task"] for d in result["downstream"]}):
            rows = [d for d in result["downstream"] if d["task"] == name]
            points = [p for p in curve_summary(rows, "accuracy") if p["start"] == arm]
            if points:
                row[name] = {k: points[0][k] for k in ("mean", "min", "max", "seeds")}
        summary[arm] = row
    return summary


def format_summary(result: dict) -> str:
    """The matrix as a terminal table: mean over seeds (min-max) in %."""
    def cell(stat: dict | None) -> str:
        if stat is None:
            return "-"
        return f"{100 * stat['mean']:.1f} ({100 * stat['min']:.1f}-{100 * stat['max']:.1f})"
    columns = ["mask", "nsp_head", "sop_head", "sop_head_matched", "nsp_probe", "sop_probe_matched",
               *sorted({d["task"] for d in result["downstream"]})]
    lines = [f"{'arm':12s}" + "".join(f"{c:>22s}" for c in columns)]
    for arm, row in result["summary"].items():
        lines.append(f"{arm:12s}" + "".join(f"{cell(row.get(c)):>22s}" for c in columns))
    return "\n".join(lines)
