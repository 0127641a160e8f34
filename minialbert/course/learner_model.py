"""The learner's ALBERT: lesson 05's model built from the pieces the learner wrote in lessons 02-04.

`check` keeps every passing piece in the learner's workspace, my_albert/ (pieces/workspace.py). Lesson 05,
in a fresh kernel, loads that folder, checks each piece again (silently), and builds

    embeddings      the learner's factorized_embedding          (else the package's FactorizedEmbedding)
    encoder         the learner's shared_encoder, whose one layer is the learner's layer; a layer calls
                    split_heads, merge_heads and attention: the learner's where they pass
    heads           the learner's mlm_head; the sentence loss is the learner's sentence_loss
    training data   masked again by the learner's span_placement (learner_masking), which calls the
                    learner's mask_budget, ngram_draw, ... where they pass

A piece that is missing, does not load or fails its check again is the package's, and the report says
which and why. The model takes AlbertForPretraining's arguments and returns its PretrainingOutput, so the
package's train_step and pretrain, and lesson 05's own step and loop, train it:

    model, report = learner_model(cfg, sentence_task=None)
    print(report)
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..config import IGNORE_INDEX, MASK_ID, AlbertConfig
from ..masking import MaskingVocab
from ..model import (
    Encoder,
    FactorizedEmbedding,
    MaskedLMHead,
    PretrainingOutput,
    TransformerLayer,
    init_weights,
)
from ..pretraining_data import collate, unmasked_ids
from ..pretraining_dataset import PretrainingDataset
from .pieces import PIECES, judge, lesson_04, lessons_02_03
from .pieces.checking import failure
from .pieces.workspace import default_workspace, load, piece_path

NAMES = [p.name for p in lessons_02_03.PIECES + lesson_04.PIECES]      # the 17 pieces, earlier ones first
LESSON = {name: "02" if name in ("factorized_embedding", "embedding_parameters") else
          "03" if name in [p.name for p in lessons_02_03.PIECES] else "04" for name in NAMES}
ROLE = {"factorized_embedding": "the embeddings", "embedding_parameters": "none: a count",
        "split_heads": "called by the layer", "merge_heads": "called by the layer",
        "attention": "called by the layer", "layer": "the one shared layer",
        "shared_encoder": "applies the layer num_layers times", "mlm_head": "the masked-LM head",
        "sentence_loss": "the sentence-order loss", "whole_words": "called by the masking",
        "ngram_probabilities": "called by the masking", "corrupt": "called by the masking",
        "mask_budget": "called by the masking", "ngram_draw": "called by the masking",
        "span_placement": "masks the training data", "sop_pair": "none: the pairs come built",
        "nsp_pair": "none: the pairs come built"}
FALLBACK = "; the rest of the lesson uses the package's version"
NOT_IN_A_RUN = ("embedding_parameters", "sop_pair", "nsp_pair")
PACKAGE_MODULES = {"factorized_embedding": FactorizedEmbedding, "layer": TransformerLayer,
                   "shared_encoder": Encoder, "mlm_head": MaskedLMHead}


class CourseLayer(nn.Module):
    """Lesson 03's layer as the package writes it (MyLayer's parameters), calling the split, merge and
    attention functions it is given: the layer used when the learner's is not, so theirs still run."""

    def __init__(self, cfg: AlbertConfig, split_heads: Callable, merge_heads: Callable, attention: Callable):
        super().__init__()
        H, F_ = cfg.hidden_size, cfg.intermediate_size
        self.num_heads, self.functions = cfg.num_heads, (split_heads, merge_heads, attention)
        self.qkv, self.dense = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.attention_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.ffn, self.ffn_output = nn.Linear(H, F_), nn.Linear(F_, H)
        self.ffn_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)

    def forward(self, x, attend):                      # (B, N, H), (B, 1, 1, N) -> (B, N, H)
        split, merge, attention = self.functions
        q, k, v = (split(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))      # 3 x (B, h, N, d)
        x = self.attention_norm(x + self.dense(merge(attention(q, k, v, attend))))
        return self.ffn_norm(x + self.ffn_output(F.gelu(self.ffn(x), approximate="tanh")))


class CourseEncoder(nn.Module):
    """Lesson 03's shared encoder as the package writes it: `layer` applied num_layers times."""

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        self.num_layers, self.layer = cfg.num_layers, None          # the layer is put in by the model

    def forward(self, x, attend):                      # (B, N, H) -> (B, N, H)
        for _ in range(self.num_layers):
            x = self.layer(x, attend)
        return x


def package_version(name: str):
    """The package's version of a piece, as the learner's code calls it."""
    return PACKAGE_MODULES.get(name) or PIECES[name].package_version()


class LearnerPieces:
    """The versions of lessons 02-04's pieces a run uses: the learner's from `folder` where they load and
    pass their check again, else the package's. force: pieces used even when they fail (tests, or to see
    what a wrong piece does); wrap(name, version) -> what to use instead (tests count calls with it)."""

    def __init__(self, folder: Path | None = None, force: tuple = (), wrap: Callable | None = None):
        self.folder = Path(folder) if folder is not None else default_workspace()
        self.why: dict[str, str] = {}                  # piece -> why the package's is used (or forced)
        self.calls: dict[str, dict] = {}               # piece -> the pieces its code calls, by name
        modules, yours = {}, {}
        for name in NAMES:
            if not piece_path(name, self.folder).is_file():
                self.why[name] = "missing"
                continue
            try:
                modules[name] = load(name, self.folder)
                self.calls[name] = dict(modules[name].CALLS)
            except Exception as e:
                self.why[name] = f"does not load: {failure(e)}"
        for module in modules.values():                # while they are checked, the pieces they call are
            module.__dict__.update({k: package_version(v) for k, v in module.CALLS.items()})  # the package's
        for name, module in modules.items():
            said, line = judge(name, module.PIECE)
            if said != "right":
                reason = line.split(": ", 2)[-1].removesuffix(FALLBACK)      # the line, less its name
                self.why[name] = f"fails its check: {reason}"
            if said == "right" or name in force:
                yours[name] = module.PIECE
        self.yours = set(yours)
        self.use = {name: yours.get(name, package_version(name)) for name in NAMES}
        if wrap is not None:
            self.use = {name: wrap(name, version) for name, version in self.use.items()}
        for module in modules.values():                # from now on they call the versions of this run
            module.__dict__.update({k: self.use[v] for k, v in module.CALLS.items()})

    def build(self, name: str, *args) -> nn.Module:
        """A module piece: the learner's class if theirs is used, else the course's (its layer and encoder
        call the chosen functions) or the package's."""
        if name in self.yours:
            return self.use[name](*args)
        if name == "layer":
            return CourseLayer(*args, self.use["split_heads"], self.use["merge_heads"], self.use["attention"])
        if name == "shared_encoder":
            return CourseEncoder(*args)
        return PACKAGE_MODULES[name](*args)

    def used(self, sentence_task: str | None, masking: bool = True) -> set[str]:
        """The pieces this run calls: the model's, the masking's, and whatever the learner's code calls."""
        found = {"factorized_embedding", "layer", "shared_encoder", "mlm_head"}
        found |= {"sentence_loss"} if sentence_task else set()
        found |= {"span_placement"} if masking else set()
        if "layer" not in self.yours:
            found |= {"split_heads", "merge_heads", "attention"}         # the course's layer calls them
        todo = list(found)
        while todo:
            name = todo.pop()
            for other in self.calls.get(name, {}).values() if name in self.yours else ():
                if other not in found:
                    found.add(other)
                    todo.append(other)
        return found

    def report(self, sentence_task: str | None = "sop", masking: bool = True) -> Report:
        used = self.used(sentence_task, masking)
        rows = [Row(name, LESSON[name], name in self.yours, self.why.get(name, ""),
                    ROLE[name] if name in used or name in NOT_IN_A_RUN
                    else "not called in this run") for name in NAMES]
        return Report(rows, self.folder, self)


@dataclass
class Row:
    piece: str
    lesson: str
    yours: bool
    why: str                  # "" for a passing piece; missing / does not load / fails its check: ...
    role: str                 # what it does in this run

    def version(self) -> str:
        short = "missing" if self.why == "missing" else self.why.partition(":")[0] + ", below"
        if self.yours:
            return "yours" if not self.why else f"yours, forced: {short}"
        return f"the package's: {short}"


@dataclass
class Report:
    """Which pieces are the learner's and which fell back to the package's, and why; print() shows it: a
    table, then the reason of every piece that is not missing yet not right, in full."""

    rows: list[Row]
    folder: Path
    pieces: LearnerPieces

    def __str__(self) -> str:
        mine = sum(r.yours for r in self.rows)
        widths = [max(len(r.piece) for r in self.rows), max(len(r.role) for r in self.rows)]
        shown = os.path.relpath(self.folder)                     # my_albert, not the learner's home path
        lines = [f"your pieces from {shown}, checked again: {mine} of {len(self.rows)} are yours",
                 f"  {'piece':<{widths[0]}}  lesson  {'in this run':<{widths[1]}}  version"]
        lines += [f"  {r.piece:<{widths[0]}}  {r.lesson:<6}  {r.role:<{widths[1]}}  {r.version()}"
                  for r in self.rows]
        lines += [f"  {r.piece}: {r.why}" for r in self.rows if r.why not in ("", "missing")]
        return "\n".join(lines)


class LearnerAlbert(nn.Module):
    """AlbertForPretraining built from the learner's pieces: the same arguments and output, so the package's
    training step and loop (and lesson 05's) train it. mlm_loss: lesson 05's loss piece (logits (M, V),
    labels (M,) -> mean), else the package's cross-entropy."""

    def __init__(self, cfg: AlbertConfig, pieces: LearnerPieces, sentence_task: str | None = "sop",
                 mlm_loss: Callable | None = None):
        super().__init__()
        if cfg.sharing != "all" or cfg.num_hidden_groups != 1 or cfg.inner_group_num != 1:
            raise ValueError(f"the learner's encoder shares one layer (sharing='all', one group); got "
                             f"sharing={cfg.sharing!r} with {cfg.num_hidden_groups} group(s)")
        self.config, self.sentence_task, self.pieces = cfg, sentence_task, pieces
        self.embeddings = pieces.build("factorized_embedding", cfg)
        self.encoder = pieces.build("shared_encoder", cfg)
        self.encoder.layer = pieces.build("layer", cfg)             # the one layer every step applies
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.mlm_head = pieces.build("mlm_head", cfg, self.embeddings.word_embeddings)   # tied decoder
        self.sentence_head = None
        if sentence_task is not None:
            self.sentence_head = nn.Sequential(nn.Dropout(cfg.classifier_dropout_prob),
                                               nn.Linear(cfg.hidden_size, 2))
        self.sentence_loss, self.mlm_loss = pieces.use["sentence_loss"], mlm_loss
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None,
                sentence_labels=None, output_hidden_states=False, predicted_tokens=None,
                examples=None) -> PretrainingOutput:
        """As AlbertForPretraining.forward (hidden_states are not kept: None)."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        empty = ~attention_mask.bool().any(dim=1, keepdim=True)            # (B, 1): rows with no real token
        attend = (attention_mask.bool() | empty)[:, None, None, :]          # (B, 1, 1, N)
        x = self.encoder(self.embeddings(input_ids, token_type_ids), attend)   # (B, N, H)
        pooled = torch.tanh(self.pooler(x[:, 0]))                            # (B, H)
        mlm_loss = sentence_loss = sentence_logits = None
        if mlm_labels is not None:
            predicted = (mlm_labels != IGNORE_INDEX).nonzero(as_tuple=True)  # 2 x (M,)
            mlm_logits = self.mlm_head(x[predicted])                         # (M, V)
            targets, count = mlm_labels[predicted], predicted[0].numel()
            predicted_tokens = max(count, 1) if predicted_tokens is None else predicted_tokens
            if self.mlm_loss is not None and count:      # the learner's piece gives this batch's mean
                mlm_loss = self.mlm_loss(mlm_logits.float(), targets) * count / predicted_tokens
            else:
                mlm_loss = F.cross_entropy(mlm_logits.float(), targets, reduction="sum") / predicted_tokens
        else:
            mlm_logits = self.mlm_head(x)                                   # (B, N, V)
        if self.sentence_head is not None:
            sentence_logits = self.sentence_head(pooled)                     # (B, 2)
            if sentence_labels is not None:                # the learner's piece gives this batch's mean
                sentence_loss = self.sentence_loss(pooled, sentence_labels, self.sentence_head)
                if examples is not None:
                    sentence_loss = sentence_loss * sentence_labels.shape[0] / examples
        losses = [t for t in (mlm_loss, sentence_loss) if t is not None]
        loss = sum(losses) if losses else None
        return PretrainingOutput(loss, mlm_logits, sentence_logits, pooled, x, None, mlm_loss, sentence_loss)


def learner_model(cfg: AlbertConfig, workspace: Path | None = None, sentence_task: str | None = "sop",
                  mlm_loss: Callable | None = None, force: tuple = (),
                  wrap: Callable | None = None) -> tuple[LearnerAlbert, Report]:
    """ALBERT for pretraining from the learner's pieces in `workspace` (default: my_albert/ where the lesson
    runs), the package's where theirs is missing or fails its check again -> (model, report); report.pieces
    masks the training data (learner_masking)."""
    pieces = LearnerPieces(workspace, force, wrap)
    return LearnerAlbert(cfg, pieces, sentence_task, mlm_loss), pieces.report(sentence_task)


def learner_masking(data: PretrainingDataset, vocab: MaskingVocab, pieces: LearnerPieces,
                    seed: int = 0) -> PretrainingDataset:
    """`data` masked again by the run's span_placement (the learner's where it passes): each example's
    tokens before masking (the labels put back), then mask(ids, vocab, rng) -> (shown ids, labels), one
    seeded random.Random for all. Types, sentence labels and documents stay."""
    mask, rng = pieces.use["span_placement"], random.Random(seed)
    shown_all, labels_all = [], []
    for i in range(len(data)):
        ids = unmasked_ids(data[i]).tolist()                                # (L,) as a list
        shown, labels = mask(list(ids), vocab, rng)
        if len(shown) != len(ids) or len(labels) != len(ids):
            raise ValueError(f"the masking returned {len(shown)} ids and {len(labels)} labels for an example "
                             f"of {len(ids)} tokens")
        shown_all += shown
        labels_all += labels
    return PretrainingDataset(torch.tensor(shown_all, dtype=torch.int32), data.token_type_ids,
                              torch.tensor(labels_all, dtype=torch.int32), data.offsets, data.sentence_labels,
                              data.objective, data.max_seq_len, data.document_ids)


@torch.no_grad()
def masked_predictions(model: nn.Module, data, batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """What lesson 05's accuracy pieces read: the model's logits and the labels at the positions of `data`
    shown as [MASK] -> (M, V) float logits, (M,) labels."""
    was_training = model.training
    model.eval()
    logits, labels = [], []
    for start in range(0, len(data), batch_size):
        batch = collate([data[i] for i in range(start, min(start + batch_size, len(data)))])
        predicted = batch["mlm_labels"] != IGNORE_INDEX                         # (B, N)
        shown_mask = batch["input_ids"][predicted] == MASK_ID                   # (M_all,)
        out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
                    mlm_labels=batch["mlm_labels"])                             # logits (M_all, V)
        logits.append(out.mlm_logits.float()[shown_mask])
        labels.append(batch["mlm_labels"][predicted][shown_mask])
    model.train(was_training)
    return torch.cat(logits), torch.cat(labels)


def train_targets(data) -> torch.Tensor:
    """Every label a training set asks to predict: (M,), what unigram_accuracy counts."""
    return data.mlm_labels[data.mlm_labels != IGNORE_INDEX].long()
