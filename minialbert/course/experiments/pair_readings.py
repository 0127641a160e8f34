"""Reading an encoder on sentence pairs: what the NSP vs SOP experiments share.

Both the positive control on the generated `ordered` corpus (order_control.py) and the 128-token arms on
the course's text (long_text_ablation.py) read their arms the same way, on pairs cut by the official
create_instances_from_document from held-out documents:

    readings    each arm's own sentence head and a linear probe on its frozen pooled output, on NSP pairs,
                SOP pairs and swap-only SOP pairs, with each pair's 0/1 correctness kept for the paired
                differences (paired_bootstrap.paired_difference)
    swap_only   the SOP pairs whose B provably comes from A's document: label 1 then means swapped, the
                pure order question (official SOP also holds random-document negatives, which need no
                order)
    choice      a downstream task that needs order: pick the true next sentence after a context among
                CHOICES sentences of the same document, each arm fine-tuned alike (finetune_choice)
"""

from __future__ import annotations

import bisect
import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import torch
from torch import nn

from ...evaluation import sentence_metrics
from ...model import AlbertForPretraining, AlbertModel
from ...optim import make_optimizer, warmup_linear_decay
from ...pretraining_data import unmasked_ids
from ...pretraining_dataset import PretrainingDataset
from ...tokenizer import CLS_ID, PAD_ID, SEP_ID, Tokenizer
from .ablation import fit_logistic, read_pairs
from .paired_bootstrap import paired_difference

__all__ = ["CHOICES", "ChoiceRecipe", "finetune_choice", "label_shares", "next_sentence_questions",
           "paired", "readings", "segments", "subset", "swap_only", "token_documents"]

CHOICES = 4                             # candidates per downstream question (chance 1 / CHOICES)


@dataclass(frozen=True)
class ChoiceRecipe:
    """How every arm is fine-tuned on the next-sentence choice (the same for all)."""
    steps: int = 150                    # fine-tuning steps
    batch: int = 8                      # questions per step (CHOICES rows each)
    lr: float = 1e-3                    # AdamW, 10% warmup then linear decay, clipping at 1.0
    max_seq_len: int = 128              # [CLS] context [SEP] candidate [SEP], cut to this many tokens


def token_documents(documents, tokenizer: Tokenizer) -> list[list[list[int]]]:
    """Each document's sentences as token ids (documents with a .sentences list of strings)."""
    return [[tokenizer.encode(s) for s in doc.sentences] for doc in documents]


def segments(dataset: PretrainingDataset, i: int) -> tuple[list[int], list[int]]:
    """Segment A and segment B of pair i, unmasked token ids (no specials)."""
    ex = dataset[i]
    ids, types = unmasked_ids(ex).tolist(), ex["token_type_ids"].tolist()
    b_start = types.index(1)
    return ids[1:b_start - 1], ids[b_start:-1]


def swap_only(dataset: PretrainingDataset, token_docs: Sequence[Sequence[Sequence[int]]]) -> list[int]:
    """Indices of the SOP pairs whose segment B provably comes from A's document: B's token sequence
    occurs in A's document and in no other of `token_docs` (the documents the pairs were cut from, in
    the order of their ids). Official SOP pairs are then either in order (label 0) or swapped (label 1);
    the random-document negatives drop out, since their B occurs in the document it was taken from
    (and a B so short that it occurs in several documents drops out whatever its label)."""
    offset = 0xE000                             # token ids as characters of the private-use area
    texts = ["".join(chr(offset + t) for sentence in doc for t in sentence) for doc in token_docs]
    joined = "\uffff".join(texts)               # a separator no token maps to
    starts = list(accumulate((len(text) + 1 for text in texts[:-1]), initial=0))    # where each begins
    keep = []
    for i in range(len(dataset)):
        _, b = segments(dataset, i)
        needle = "".join(chr(offset + t) for t in b)
        d = int(dataset.document_ids[i])
        found, where = set(), joined.find(needle)
        while where >= 0 and len(found) < 2:
            doc = bisect.bisect_right(starts, where) - 1
            found.add(doc)
            where = joined.find(needle, starts[doc] + len(texts[doc]))  # the next document on
        if b and found == {d}:
            keep.append(i)
    return keep


def subset(dataset: PretrainingDataset, indices: Sequence[int]) -> PretrainingDataset:
    """The examples at `indices`, in that order, as a dataset of their own."""
    at = torch.as_tensor(list(indices), dtype=torch.long)
    bounds = dataset.offsets.tolist()
    pieces = [slice(bounds[i], bounds[i + 1]) for i in at.tolist()]
    offsets = torch.cat([dataset.offsets[:1], dataset.lengths[at].cumsum(0).to(dataset.offsets.dtype)])
    return PretrainingDataset(*(torch.cat([t[p] for p in pieces]) for t in
                                (dataset.input_ids, dataset.token_type_ids, dataset.mlm_labels)), offsets,
                              dataset.sentence_labels[at], dataset.objective, dataset.max_seq_len,
                              None if dataset.document_ids is None else dataset.document_ids[at])


def next_sentence_questions(token_docs: Sequence[Sequence[Sequence[int]]], context_sentences: int,
                            per_document: int, rng: random.Random) -> list[dict]:
    """Multiple-choice questions: {"document", "context" (token ids of up to context_sentences sentences),
    "candidates" (CHOICES token-id sentences of the document), "answer" (index of the true next sentence)}.
    The distractors are other sentences of the same document, none of them in the context, so topic says
    nothing and order (the cues) decides. Up to per_document questions per document, at distinct places."""
    questions = []
    for d, doc in enumerate(token_docs):
        places = [k for k in range(1, len(doc))
                  if len(doc) - min(k, context_sentences) - 1 >= CHOICES - 1]
        for k in sorted(rng.sample(places, min(per_document, len(places)))):
            context = list(range(max(0, k - context_sentences), k))
            others = [j for j in range(len(doc)) if j != k and j not in context]
            chosen = [k, *rng.sample(others, CHOICES - 1)]
            rng.shuffle(chosen)
            questions.append({"document": d, "context": [t for j in context for t in doc[j]],
                              "candidates": [list(doc[j]) for j in chosen], "answer": chosen.index(k)})
    return questions


def choice_batch(questions: Sequence[dict], max_seq_len: int) -> dict[str, torch.Tensor]:
    """[CLS] context [SEP] candidate [SEP] for every candidate of every question: (Q * CHOICES, N) tensors.
    The context is cut from its front (its end, next to the candidate, is kept), the candidate from its
    end."""
    rows = []
    for q in questions:
        for cand in q["candidates"]:
            cand = cand[:max_seq_len // 2]
            context = q["context"][max(0, len(q["context"]) - (max_seq_len - 3 - len(cand))):]
            rows.append(([CLS_ID, *context, SEP_ID, *cand, SEP_ID], len(context) + 2))
    n = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), n), PAD_ID, dtype=torch.long)
    types, mask = torch.zeros_like(input_ids), torch.zeros_like(input_ids)
    for r, (ids, a_len) in enumerate(rows):
        input_ids[r, :len(ids)] = torch.tensor(ids)
        types[r, a_len:len(ids)] = 1
        mask[r, :len(ids)] = 1
    return {"input_ids": input_ids, "token_type_ids": types, "attention_mask": mask,
            "answers": torch.tensor([q["answer"] for q in questions])}


class _Chooser(nn.Module):
    """A pretrained encoder under one linear score per [CLS] context [SEP] candidate [SEP] row."""

    def __init__(self, encoder: AlbertModel):
        super().__init__()
        self.albert = encoder
        self.dropout = nn.Dropout(encoder.config.classifier_dropout_prob)
        self.score = nn.Linear(encoder.config.hidden_size, 1)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:         # (Q, CHOICES) logits
        pooled = self.albert(batch["input_ids"], batch["token_type_ids"],
                             batch["attention_mask"]).pooled_output                   # (Q * CHOICES, H)
        return self.score(self.dropout(pooled)).view(-1, CHOICES)


def finetune_choice(encoder: AlbertModel, train: Sequence[dict], test: Sequence[dict],
                    recipe: ChoiceRecipe, seed: int) -> torch.Tensor:
    """Fine-tune a copy of `encoder` on the train questions (AdamW, warmup then linear decay) and return
    its correctness on each test question (a 0/1 float tensor)."""
    torch.manual_seed(seed)
    model = _Chooser(copy.deepcopy(encoder)).train()
    optimizer = make_optimizer("adamw", model, recipe.lr)
    scheduler = warmup_linear_decay(optimizer, max(1, recipe.steps // 10), recipe.steps)
    order, rng = [], random.Random(seed)
    for _ in range(recipe.steps):
        if len(order) < recipe.batch:
            order += rng.sample(range(len(train)), len(train))
        batch = choice_batch([train[i] for i in order[:recipe.batch]], recipe.max_seq_len)
        del order[:recipe.batch]
        loss = nn.functional.cross_entropy(model(batch), batch["answers"])
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    model.eval()
    correct = []
    with torch.no_grad():
        for start in range(0, len(test), 64):
            batch = choice_batch(test[start:start + 64], recipe.max_seq_len)
            correct.append((model(batch).argmax(-1) == batch["answers"]).float())
    return torch.cat(correct)


def readings(model: AlbertForPretraining, heldout: dict[str, PretrainingDataset],
              probe_sets: dict[str, PretrainingDataset]) -> tuple[dict, dict]:
    """An encoder on every sentence task: ({"head": {task: metrics or None}, "probe": {task: metrics}},
    {reading/task: per-pair 0/1 correctness}) for the paired differences."""
    result, correct = {"head": {}, "probe": {}}, {}
    for task, test in heldout.items():
        truth, docs = test.sentence_labels.long(), test.document_ids
        test_x, predicted = read_pairs(model, test, list(range(len(test))))
        train = probe_sets[task]
        train_x, _ = read_pairs(model, train, list(range(len(train))))
        probe = fit_logistic(train_x, train.sentence_labels.long())(test_x)
        for reading, guess in (("head", predicted), ("probe", probe)):
            if guess is None:
                result[reading][task] = None
                continue
            result[reading][task] = sentence_metrics(guess, truth, task, clusters=docs)
            correct[f"{reading}/{task}"] = (guess == truth).float()
    return result, correct


def label_shares(dataset: PretrainingDataset) -> list[float]:
    """The share of each sentence label (0, 1) among a dataset's pairs."""
    return (dataset.sentence_labels.bincount(minlength=2).double() / len(dataset)).tolist()


def paired(a: torch.Tensor, b: torch.Tensor, documents: torch.Tensor, seed: int) -> dict:
    """paired_difference of two arms' per-pair (or per-question) outcomes on the same documents. a and b:
    (n,) tensors, or (seeds, n) for arms read with several seeds (averaged per example)."""
    return paired_difference(a.tolist(), b.tolist(), documents.tolist(), seed=seed)
