"""The NSP vs SOP ablation at 128 tokens on the course's text: arms that differ only in the sentence
objective after the unigram plateau, read on every task, compared pair by pair.

The arms are zoo entries (zoo_entries.TRUNK, zoo_entries.BRANCHES): one masked-LM trunk, trained past the
plateau, then branches of equal budget from its final weights, MLM alone (`albert-mlm-128`), MLM + NSP
(`albert-nsp-128`) and MLM + SOP (`albert-sop-128`), seeds 0 and 1 (`-seed1`), all on the official pairs
(segments.OFFICIAL) of 128 tokens, where A and B hold several sentences each. Read on held-out documents
(the valid and test splits), as the positive control (order_control.py) reads its arms:

    mask      masked-LM accuracy at [MASK] positions of the trunk's held-out examples, beside the unigram,
              neighbour-count and two-each-side baselines on the same positions
    head      each arm's own sentence head on unmasked NSP pairs, SOP pairs and swap-only SOP pairs
              (pair_readings.swap_only: B provably from A's document, so label 1 means swapped)
    probe     a linear probe on the frozen pooled output, fitted on training pairs of each task: the only
              sentence reading of the MLM arm, the same yardstick for all, beside the trunk and a random
              encoder
    choice    downstream: pick the true next sentence after a context among 4 sentences of its document,
              every arm fine-tuned alike (pair_readings.finetune_choice)

Every arm's reading is its seeds' per-example outcomes averaged (one outcome per pair, question or [MASK]
position), with a 95% interval from a bootstrap over documents; two arms are compared by
`paired_bootstrap.paired_difference` of those outcomes on the same documents. Each seed's own reading is
kept beside it.
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass

import torch

from ...config import IGNORE_INDEX
from ...corpus import documents
from ...evaluation import MLMBaselines, evaluation_sample
from ...masking import MaskingVocab
from ...model import AlbertForPretraining
from ...pretraining_data import examples_from_token_documents
from ...segments import OFFICIAL
from ..data import course_tokenizer
from .ablation import joined, sampled
from .mask_readings import mask_hits
from .pair_readings import (
    CHOICES,
    ChoiceRecipe,
    finetune_choice,
    label_shares,
    next_sentence_questions,
    paired,
    readings,
    subset,
    swap_only,
    token_documents,
)
from .zoo import Zoo
from .zoo_entries import TRUNK

__all__ = ["ARMS", "CI_SIZES", "COURSE_SIZES", "LongTextSizes", "arm_entry", "run_long_text_ablation"]

ARMS = ("mlm", "nsp", "sop")
SEQ_LEN = 128
TASKS = ("nsp", "sop", "sop_swap")
COMPARISONS = (("sop", "nsp"), ("sop", "mlm"), ("nsp", "mlm"))


def arm_entry(arm: str, seed: int = 0) -> str:
    """The zoo entry of an arm and seed: albert-sop-128, albert-sop-128-seed1, ..."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    return f"albert-{arm}-{SEQ_LEN}" + (f"-seed{seed}" if seed else "")


@dataclass(frozen=True)
class LongTextSizes:
    """What the reading measures."""
    name: str
    seeds: int = 2                          # branches per arm: seed 0 and seed 1
    heldout_documents: int | None = None    # of each of valid and test (None: all)
    mask_examples: int = 10_000             # held-out masked-LM examples (a fixed seeded sample)
    probe_examples: int = 2000              # training pairs each linear probe fits on
    questions_per_document: int = 2         # downstream questions cut from each held-out document
    context_sentences: int = 3              # sentences before the one to pick
    choice: ChoiceRecipe = ChoiceRecipe(max_seq_len=SEQ_LEN)


CI_SIZES = LongTextSizes("ci", seeds=1, heldout_documents=12, mask_examples=64, probe_examples=48,
                         choice=ChoiceRecipe(steps=5, batch=4, max_seq_len=SEQ_LEN))
COURSE_SIZES = LongTextSizes("course")


def baseline_hits(baselines: MLMBaselines, batches: list) -> dict[str, torch.Tensor]:
    """Each baseline's correctness at the same [MASK] positions as mask_hits."""
    hits = {}
    for input_ids, labels, shown_mask in batches:
        targets = labels[labels != IGNORE_INDEX]
        for name, guess in baselines.predict(input_ids, labels).items():
            hits.setdefault(name, []).append((guess == targets)[shown_mask].float())
    return {name: torch.cat(h) for name, h in hits.items() if name != "copy_or_unigram"}


def over_documents(outcomes: torch.Tensor, documents: torch.Tensor, seed: int = 0) -> dict:
    """An arm's mean outcome, (n,) or (seeds, n) averaged per example, with a 95% document-bootstrap
    interval: {"accuracy", "ci95", "documents", "examples"} (the paired difference from nothing)."""
    d = paired(outcomes, torch.zeros(outcomes.shape[-1]), documents, seed)
    return {"accuracy": d["value"], "ci95": d["ci95"], "documents": d["documents"], "examples": d["examples"]}


def combine(outcomes: dict[str, list[dict]], doc_of: dict[str, torch.Tensor], seed: int = 0
            ) -> tuple[dict, dict]:
    """Arms from their seeds' outcomes: outcomes[arm] is one {reading: (n,) outcomes} per seed (a reading
    missing where the arm has no such head), doc_of[reading] the (n,) documents of its examples. Returns
    ({arm: {reading: over_documents of the seeds' mean}}, {reading: {"a-b": paired difference}}) for the
    COMPARISONS both of whose arms have the reading."""
    def stacked(arm: str, key: str) -> torch.Tensor | None:          # (seeds, n)
        rows = [seed_outcomes.get(key) for seed_outcomes in outcomes[arm]]
        return None if any(r is None for r in rows) else torch.stack(rows)

    arms, differences = {}, {}
    for key, docs in doc_of.items():
        for arm in outcomes:
            if (rows := stacked(arm, key)) is not None:
                arms.setdefault(arm, {})[key] = over_documents(rows, docs, seed)
        for a, b in COMPARISONS:
            if (rows_a := stacked(a, key)) is not None and (rows_b := stacked(b, key)) is not None:
                differences.setdefault(key, {})[f"{a}-{b}"] = paired(rows_a, rows_b, docs, seed)
    return arms, differences


def run_long_text_ablation(zoo: Zoo, sizes: LongTextSizes = COURSE_SIZES, seed: int = 0,
                           progress: bool = False) -> dict:
    """The whole reading (see the module doc): returns a JSON-ready dict. Loads the trunk and every branch
    from the zoo (building any that is missing where the scale builds on demand)."""
    t0 = time.perf_counter()
    tokenizer = course_tokenizer(zoo.data)
    vocab = MaskingVocab.from_tokenizer(tokenizer)
    tokens = {split: token_documents(list(documents(zoo.data.corpus, split, zoo.data.max_documents))
                                     [:sizes.heldout_documents], tokenizer) for split in ("valid", "test")}
    heldout_docs = tokens["valid"] + tokens["test"]          # document ids: valid first, then test

    def pairs(docs, task, k):                                # unmasked official pairs of SEQ_LEN tokens
        return examples_from_token_documents(docs, vocab, task, SEQ_LEN, seed + k, segmenting=OFFICIAL,
                                             mask_rate=0.0)

    heldout = {task: pairs(heldout_docs, task, k) for k, task in ((1, "nsp"), (2, "sop"))}
    heldout["sop_swap"] = subset(heldout["sop"], swap_only(heldout["sop"], heldout_docs))
    train_docs = list(documents(zoo.data.corpus, "train", zoo.data.max_documents))
    some = random.Random(seed).sample(train_docs, min(len(train_docs), sizes.probe_examples))
    probe_docs = token_documents(some, tokenizer)            # as many training documents as probe pairs
    probe_sets = {task: pairs(probe_docs, task, k) for k, task in ((4, "nsp"), (5, "sop"))}
    probe_sets["sop_swap"] = subset(probe_sets["sop"], swap_only(probe_sets["sop"], probe_docs))
    probe_sets = {task: subset(d, evaluation_sample(d, sizes.probe_examples, seed))
                  for task, d in probe_sets.items()}
    mlm_data = sampled(joined(zoo.entry_data(TRUNK, "valid"), zoo.entry_data(TRUNK, "test")),
                       sizes.mask_examples, seed)
    mlm_at = list(range(len(mlm_data)))
    questions = {split: next_sentence_questions(tokens[split], sizes.context_sentences,
                                                sizes.questions_per_document, random.Random(seed + k))
                 for k, split in ((6, "valid"), (7, "test"))}
    question_docs = torch.tensor([q["document"] for q in questions["test"]])
    data_seconds = time.perf_counter() - t0

    names = {(arm, s): arm_entry(arm, s) for arm in ARMS for s in range(sizes.seeds)}
    outcomes: dict[str, dict] = {}               # model name -> {"mask", reading/task, "choice"}: outcomes
    per_model: dict[str, dict] = {}
    models = {"trunk": zoo.load(TRUNK, progress=progress),
              **{names[k]: zoo.load(names[k], progress=progress) for k in names}}
    torch.manual_seed(seed)
    models["random init"] = AlbertForPretraining(models["trunk"].config, sentence_task=None)
    mask_docs = None
    for name, model in models.items():
        t = time.perf_counter()
        measured, correct = readings(model.eval(), heldout, probe_sets)
        hits, mask_docs, batches = mask_hits(model, mlm_data, mlm_at)
        chosen = finetune_choice(model.albert, questions["valid"], questions["test"], sizes.choice, seed)
        outcomes[name] = {**correct, "mask": hits, "choice": chosen}
        per_model[name] = {**measured, "mask": over_documents(hits, mask_docs, seed),
                           "choice": over_documents(chosen, question_docs, seed),
                           "seconds": round(time.perf_counter() - t, 1)}

    baselines = MLMBaselines.fit(zoo.entry_data(TRUNK, "train"), tokenizer.vocab_size)
    mask_baselines = {name: over_documents(h, mask_docs, seed)
                      for name, h in baseline_hits(baselines, batches).items()}
    doc_of = {"mask": mask_docs, "choice": question_docs,
              **{f"{r}/{task}": heldout[task].document_ids for r in ("head", "probe") for task in TASKS}}

    arms, differences = combine({arm: [outcomes[names[arm, s]] for s in range(sizes.seeds)] for arm in ARMS},
                                doc_of, seed)
    return {"what": "the NSP vs SOP ablation at 128 tokens on the course's text: a masked-LM trunk, then "
                    "branches of equal budget that differ only in the sentence objective",
            "scale": zoo.scale_name, "seed": seed, "sizes": dataclasses.asdict(sizes),
            "entries": {"trunk": TRUNK, **{f"{arm} seed {s}": n for (arm, s), n in names.items()}},
            "data": {"heldout_documents": len(heldout_docs),
                     "heldout_pairs": {task: len(d) for task, d in heldout.items()},
                     "heldout_label_shares": {task: label_shares(d) for task, d in heldout.items()},
                     "probe_pairs": {task: len(d) for task, d in probe_sets.items()},
                     "mask_examples": len(mlm_data), "mask_positions": len(mask_docs),
                     "choice": {"candidates": CHOICES, "chance": 1 / CHOICES,
                                "train_questions": len(questions["valid"]),
                                "test_questions": len(questions["test"])},
                     "seconds": round(data_seconds, 1)},
            "mask_baselines": mask_baselines, "models": per_model, "arms": arms, "paired": differences,
            "seconds": round(time.perf_counter() - t0, 1)}
