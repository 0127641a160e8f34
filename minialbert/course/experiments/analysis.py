"""Layer-wise smoothness probes of a trained model: the paper's L2 / cosine figure, made precise.

The paper plots "the L2 distances and cosine similarity (in terms of degree) of the input and
output embedding of each layer" but never says which tokens, which text, or how values were
averaged. Our definition, stated once and stored with every figure (DEFINITION):

    h_0 is the input to layer 1 (after the E -> H projection for ALBERT), h_l the output of layer l.
    For layer l = 1..L and one sequence s:
        l2_s(l)    = mean over chosen tokens t of ||h_l[t] - h_(l-1)[t]||_2
        angle_s(l) = mean over chosen tokens t of the angle between h_l[t] and h_(l-1)[t], in degrees
    chosen tokens: every non-padding token ("all", [CLS] and [SEP] included) or [CLS] alone ("cls").
    The figure shows the mean over sequences with a 95% interval over sequences (normal
    approximation: mean +- 1.96 standard errors; sequences, not tokens, are the independent units).

standardize=True first divides every hidden dimension of every h_l by its standard deviation over
all non-padding tokens of the same data (one std per layer and dimension, from a first pass), so a
few "rogue" dimensions with huge variance cannot dominate the distance and the angle. All tokens
also for tokens="cls": h_0 of [CLS] is the same vector in every sequence (same token, position and
segment), so its std over [CLS] alone is 0 and dividing by it would blow up layer 1.

Everything streams: we keep one number per layer and sequence (sequence_transitions), never a list of
hidden states; layer_transitions summarizes them (summarize_sequences).

Verdicts need intervals that respect how the text was drawn: sequences cut from one document are not
independent. document_bootstrap resamples whole documents (heldout_documents names each held-out
sequence's document) and recomputes the mean curves and their measures (curve_measures) on each resample.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch
from torch import nn
from tqdm.auto import tqdm

from ... import hf
from ...config import IGNORE_INDEX
from ...download import DownloadError
from ...evaluation import evaluation_sample
from ...pretraining_data import collate, unmasked_ids
from ...tokenizer import Tokenizer

TOKEN_CHOICES = ("all", "cls")
EMPTY = ("empty batch list: layer_transitions needs at least one batch with a real token "
         "(check the data split and the number of sequences)")
Z95 = 1.96                                 # normal approximation of the 95% interval
DEFINITION = (
    "h_0 = input to layer 1 (after the E->H projection for ALBERT), h_l = output of layer l. "
    "Per sequence: l2(l) = mean over chosen tokens of ||h_l - h_(l-1)||_2; angle(l) = mean over chosen "
    "tokens of arccos(cos(h_l, h_(l-1))) in degrees. Chosen tokens: all non-padding tokens ('all') or "
    "[CLS] only ('cls'). Reported: mean over sequences, 95% interval = mean +- 1.96 standard errors over "
    "sequences (normal approximation). standardize: each hidden dimension of each h_l divided by its "
    "standard deviation over all non-padding tokens of the same data, also for 'cls' (no centring).")


@dataclass
class LayerTransitions:
    """Per layer l = 1..L: mean L2 distance and angle between h_(l-1) and h_l, with 95% intervals."""
    layers: list[int]                      # 1..L
    l2: list[float]                        # mean over sequences
    l2_ci95: list[list[float]]             # [low, high] per layer
    angle: list[float]                     # degrees
    angle_ci95: list[list[float]]
    sequences: int                         # sequences averaged over
    tokens: str                            # "all" | "cls"
    standardize: bool

    def to_dict(self) -> dict:
        """The fields plus each curve's total variation and oscillation, ready for JSON."""
        totals = {key: total_variation(getattr(self, key)) for key in ("l2", "angle")}
        swings = {key: oscillation(getattr(self, key)) for key in ("l2", "angle")}
        return asdict(self) | {"total_variation": totals, "oscillation": swings}


def total_variation(values: Sequence[float]) -> float:
    """sum over l of |v_(l+1) - v_l|. For a monotone curve it is just the range (last - first), so it
    measures how far a curve travels, not whether it is smooth: use oscillation for that."""
    return float(sum(abs(b - a) for a, b in zip(values, values[1:])))


def oscillation(values: Sequence[float]) -> dict:
    """How much a layer-wise curve goes up and down (the paper: BERT's transitions oscillate, ALBERT's
    change smoothly), defined before any number is read:

        sign_changes       how often the layer-to-layer difference d_l = v_(l+1) - v_l changes sign
                           (d_l * d_(l+1) < 0): 0 for any monotone curve, L - 2 for a full zig-zag
        second_difference  sum over l of |v_(l+1) - 2 v_l + v_(l-1)|, per step of the curve's own range
                           (0 for a straight line; a reversal across the whole range scores 2; a
                           curve that bends one way only, like a steady fall that flattens, at most 1)
    """
    diffs = [b - a for a, b in zip(values, values[1:])]
    changes = sum(1 for a, b in zip(diffs, diffs[1:]) if a * b < 0)
    spread = max(values) - min(values) if values else 0.0
    bends = sum(abs(b - a) for a, b in zip(diffs, diffs[1:]))
    return {"sign_changes": changes, "second_difference": float(bends / spread) if spread else 0.0}


def _encoder(model: nn.Module) -> nn.Module:
    """The AlbertModel inside an AlbertForPretraining (calling it skips the V-wide MLM logits)."""
    return model.albert if hasattr(model, "albert") else model


def _chosen(attention_mask: torch.Tensor, tokens: str) -> torch.Tensor:
    """(B, N) 0/1 mask -> (B, N) float weights of the tokens we average over."""
    chosen = attention_mask.bool().clone()
    if tokens == "cls":
        chosen[:, 1:] = False              # position 0 is [CLS] (kept only where it is a real token)
    return chosen.to(torch.float64)


def _hidden_states(encoder: nn.Module, batch: dict, device: torch.device) -> tuple[list, torch.Tensor]:
    """Run one batch; return L + 1 float64 tensors (B, N, H) and the attention mask (B, N) on device."""
    ids = batch["input_ids"].to(device)
    mask = batch.get("attention_mask", torch.ones_like(batch["input_ids"])).to(device)
    types = batch.get("token_type_ids")
    types = types.to(device) if types is not None else None
    out = encoder(ids, types, mask, output_hidden_states=True)
    return [h.double() for h in out.hidden_states], mask


def _angle_degrees(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angle between vectors along the last dim, in degrees: (..., H) x (..., H) -> (...).

    2 atan2(|u - v|, |u + v|) with u, v the unit vectors equals arccos(u . v) but stays accurate
    for nearly parallel vectors, where arccos of a rounded cosine loses half its digits.
    """
    u = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    v = b / b.norm(dim=-1, keepdim=True).clamp_min(1e-30)
    return torch.rad2deg(2 * torch.atan2((u - v).norm(dim=-1), (u + v).norm(dim=-1)))


def transition(before: torch.Tensor, after: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """How far one layer moves each vector: (L2 distance, angle in degrees), (..., H) x 2 -> (...) x 2."""
    return (after - before).norm(dim=-1), _angle_degrees(after, before)


def _dimension_std(encoder, batches, device, progress) -> list[torch.Tensor]:
    """First pass for standardize: per layer, the std of every hidden dimension over all real tokens."""
    count, sums, squares = 0.0, None, None
    for batch in tqdm(batches, disable=not progress, desc="std pass"):
        states, mask = _hidden_states(encoder, batch, device)
        w = _chosen(mask, "all")[..., None]                                  # (B, N, 1)
        if sums is None:
            sums = [torch.zeros(h.shape[-1], dtype=torch.float64, device=device) for h in states]
            squares = [torch.zeros_like(s) for s in sums]
        count += float(w.sum())
        for l, h in enumerate(states):                                      # h: (B, N, H)
            sums[l] += (h * w).sum(dim=(0, 1))
            squares[l] += (h * h * w).sum(dim=(0, 1))
    if not count:
        raise ValueError(EMPTY)
    return [((q / count - (s / count) ** 2).clamp_min(0)).sqrt().clamp_min(1e-12)
            for s, q in zip(sums, squares)]                                 # L + 1 tensors of (H,)


@contextmanager
def _measuring(model: nn.Module, batches: Iterable[dict], tokens: str, standardize: bool, progress: bool):
    """Check the arguments, put the encoder in eval mode (and back afterwards), run the standardize pass;
    yield measure(batch) -> (2, L, B') float64: per sequence with a chosen token, its mean L2 [0] and
    angle [1] at each layer."""
    if tokens not in TOKEN_CHOICES:
        raise ValueError(f"tokens must be one of {', '.join(TOKEN_CHOICES)}, got {tokens!r}")
    if isinstance(batches, Sequence) and not batches:
        raise ValueError(EMPTY)
    if standardize and iter(batches) is batches:
        raise ValueError("standardize=True reads the batches twice: pass a list, not an iterator")
    encoder = _encoder(model)
    device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    try:
        std = _dimension_std(encoder, batches, device, progress) if standardize else None

        def measure(batch: dict) -> torch.Tensor:
            states, mask = _hidden_states(encoder, batch, device)
            if std is not None:
                states = [h / s for h, s in zip(states, std)]
            w = _chosen(mask, tokens)                                        # (B, N)
            per_token = w.sum(dim=1)                                         # (B,) chosen tokens per row
            rows = per_token > 0                                             # rows with something to average
            steps = [transition(a, b) for a, b in zip(states, states[1:])]
            l2 = torch.stack([d for d, _ in steps])                              # (L, B, N)
            angle = torch.stack([a for _, a in steps])                           # (L, B, N)
            per_seq = torch.stack([(l2 * w).sum(-1), (angle * w).sum(-1)])[..., rows]        # (2, L, B')
            return per_seq / per_token[rows]

        yield measure
    finally:
        encoder.train(was_training)


@torch.no_grad()
def layer_transitions(model: nn.Module, batches: Iterable[dict], tokens: str = "all",
                      standardize: bool = False, progress: bool = False) -> LayerTransitions:
    """How far, and by what angle, each layer moves the hidden states (see DEFINITION).

    model: an AlbertForPretraining or AlbertModel (ours, or loaded by minialbert.hf from HF ALBERT /
    BERT weights). batches: dicts with input_ids (B, N), attention_mask (B, N) and optionally
    token_type_ids, e.g. from heldout_batches(); a list when standardize=True (it is read twice).
    Runs on the model's device, in eval mode, without gradients.
    """
    return summarize_sequences(sequence_transitions(model, batches, tokens, standardize, progress),
                               tokens, standardize)


@torch.no_grad()
def sequence_transitions(model: nn.Module, batches: Iterable[dict], tokens: str = "all",
                         standardize: bool = False, progress: bool = False) -> torch.Tensor:
    """layer_transitions before the mean over sequences: a (2, L, S) float64 tensor on the CPU, [0] the
    L2 and [1] the angle (degrees) of each layer for each sequence, in batch order (S counts the sequences
    with a chosen token: every sequence of heldout_batches). Its mean over the last dim is
    layer_transitions' curve; document_bootstrap resamples it."""
    with _measuring(model, batches, tokens, standardize, progress) as measure:
        parts = [measure(batch).cpu() for batch in tqdm(batches, disable=not progress, desc="per sequence")]
    if not parts or sum(p.shape[-1] for p in parts) == 0:
        raise ValueError(EMPTY)
    return torch.cat(parts, dim=-1)


def summarize_sequences(per_sequence: torch.Tensor, tokens: str = "all",
                        standardize: bool = False) -> LayerTransitions:
    """sequence_transitions' values (2, L, S) -> LayerTransitions: per layer the mean over sequences and
    its 95% interval (mean +- 1.96 standard errors). One pass over the model then gives both the curves
    and the per-sequence values a bootstrap resamples; tokens and standardize only label the result."""
    n = per_sequence.shape[-1]
    if per_sequence.ndim != 3 or n == 0:
        raise ValueError(EMPTY)
    mean = per_sequence.mean(-1)                                             # (2, L)
    var = per_sequence.var(-1) if n > 1 else torch.zeros_like(mean)         # sample variance over sequences
    half = Z95 * (var / n).sqrt()
    low, high = (mean - half).tolist(), (mean + half).tolist()
    mean = mean.tolist()
    return LayerTransitions(
        layers=list(range(1, len(mean[0]) + 1)),
        l2=mean[0], l2_ci95=[list(p) for p in zip(low[0], high[0])],
        angle=mean[1], angle_ci95=[list(p) for p in zip(low[1], high[1])],
        sequences=n, tokens=tokens, standardize=standardize)


def curve_measures(curves: torch.Tensor | Sequence[Sequence[float]],
                   from_layer: int = 2) -> dict[str, dict[str, float]]:
    """What the lesson judges on the mean curves (2, L) (L2, angle), each read from layer `from_layer` on
    (v_from .. v_L): its oscillation (sign_changes, second_difference: see oscillation), spread = max - min
    (how differently those layers move their input, in the curve's units; 0 for a flat curve) and
    last_over_start = v_L / v_from (how much of the move is left at the last layer; a stack that reaches
    a fixed point drives it to 0).

    Why layer 2 by default: h_0 is no layer's output. For ALBERT it is the projected embedding, which no
    LayerNorm has scaled or centred, while every h_l (l >= 1) leaves a LayerNorm; BERT's h_0 leaves the
    embedding's own LayerNorm. So transition 1 compares unlike vectors, and ALBERT's mostly measures the
    first LayerNorm; from layer 2 on every transition compares like with like."""
    if from_layer < 1:
        raise ValueError(f"from_layer counts layers from 1, got {from_layer}")
    out = {}
    for key, curve in zip(("l2", "angle"), curves):
        values = [float(v) for v in curve][from_layer - 1:]
        if not values:
            raise ValueError(f"a curve of {len(curve)} layers has nothing from layer {from_layer} on")
        out[key] = {**oscillation(values), "spread": max(values) - min(values),
                    "last_over_start": values[-1] / values[0] if values[0] else float("inf")}
    return out


def document_bootstrap(per_sequence: torch.Tensor, documents: Sequence[int] | torch.Tensor,
                       measures: Callable = curve_measures, reps: int = 1000,
                       seed: int = 0) -> dict[str, dict[str, dict]]:
    """95% intervals for measures of the mean curves, resampling whole documents.

    per_sequence: (2, L, S) from sequence_transitions; documents: (S,) the document of each sequence
    (heldout_documents). Each of `reps` replicates draws as many documents as there are, with
    replacement, pools all their sequences, takes the mean curves and applies `measures` (the curves as
    nested lists (2, L) -> {curve: {measure: number}}). Returns {curve: {measure: {"value": on all
    sequences, "ci95": [2.5th, 97.5th percentile]}}}; the percentiles are taken at replicate values
    ("lower" / "higher" interpolation), so a count such as sign_changes keeps whole-number bounds.
    """
    documents = torch.as_tensor(documents).reshape(-1)
    if per_sequence.ndim != 3 or per_sequence.shape[-1] != documents.numel():
        raise ValueError(f"per_sequence {tuple(per_sequence.shape)} needs one document per sequence (its "
                         f"last dim), got {documents.numel()} documents")
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    _, doc = torch.unique(documents, return_inverse=True)
    n_docs = int(doc.max()) + 1
    per_sequence = per_sequence.double()
    sums = torch.zeros(*per_sequence.shape[:2], n_docs, dtype=torch.float64).index_add_(2, doc, per_sequence)
    counts = torch.bincount(doc, minlength=n_docs).double()                 # (D,) sequences per document
    draws = torch.randint(n_docs, (reps, n_docs), generator=torch.Generator().manual_seed(seed))   # (R, D)
    times = torch.zeros(reps, n_docs, dtype=torch.float64).scatter_add_(1, draws, torch.ones(draws.shape,
                                                                                 dtype=torch.float64))
    # a replicate's mean curve: its documents' sums, each as many times as it was drawn, over their sequences
    curves = (sums.flatten(0, 1) @ times.T).view(*sums.shape[:2], reps) / (times @ counts)    # (2, L, R)
    replicates = [measures(c) for c in curves.permute(2, 0, 1).tolist()]    # plain lists: fast
    full = measures(per_sequence.mean(-1).tolist())
    out = {}
    for curve, values in full.items():
        out[curve] = {}
        for name, value in values.items():
            found = torch.tensor([float(r[curve][name]) for r in replicates], dtype=torch.float64)
            low = torch.quantile(found, 0.025, interpolation="lower").item()
            high = torch.quantile(found, 0.975, interpolation="higher").item()
            out[curve][name] = {"value": value, "ci95": [low, high]}
    return out


def total_variation_by_fold(model: nn.Module, batches: Sequence[dict], folds: int = 5, tokens: str = "all",
                            standardize: bool = False) -> dict[str, list[float]]:
    """The total variation of the L2 and angle curves on `folds` disjoint parts of the batches (every
    folds-th batch): a difference between two models means something only if it is larger than the
    spread between parts of the same data. Returns {"l2": [tv per fold], "angle": [...]}.
    """
    if len(batches) < folds:
        raise ValueError(f"{len(batches)} batches cannot make {folds} folds: use smaller batches or more "
                         "sequences")
    parts = [layer_transitions(model, batches[i::folds], tokens, standardize) for i in range(folds)]
    return {key: [total_variation(getattr(p, key)) for p in parts] for key in ("l2", "angle")}


def heldout_batches(dataset, sequences: int | None = None, batch_size: int = 32, seed: int = 0,
                    source: Tokenizer | None = None, target: Tokenizer | None = None,
                    max_len: int = 512) -> list[dict]:
    """Collated batches of unmasked held-out examples: a fixed seeded sample of `sequences` of them.

    dataset: a PretrainingDataset (e.g. course_pretraining_data("mlm", "test")); the masking is
    undone with unmasked_ids. To feed a model with another vocabulary (an official checkpoint),
    give the dataset's tokenizer as `source` and the model's as `target`: each example's text is
    decoded with one and encoded again with the other as [CLS] text [SEP] (at most max_len tokens).
    """
    if (source is None) != (target is None):
        raise ValueError("give both source and target tokenizers to re-tokenize, or neither")
    examples = []
    for i in evaluation_sample(dataset, sequences, seed):
        example = dataset[i]
        ids, types = unmasked_ids(example), example["token_type_ids"]
        if target is not None:
            ids, types = (torch.tensor(t) for t in target.encode_pair(source.decode(ids.tolist()),
                                                                      max_len=max_len))
        examples.append({"input_ids": ids, "token_type_ids": types,
                         "mlm_labels": torch.full_like(ids, IGNORE_INDEX)})
    batches = []
    for start in range(0, len(examples), batch_size):
        batch = collate(examples[start:start + batch_size])
        batches.append({k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")})
    return batches


def heldout_documents(dataset, sequences: int | None = None, seed: int = 0) -> torch.Tensor:
    """The document of each sequence heldout_batches(dataset, sequences, seed=seed) holds, in its order:
    (S,) ids, for document_bootstrap."""
    documents = getattr(dataset, "document_ids", None)
    if documents is None:
        raise ValueError("this dataset does not name the document of its examples (document_ids is None): "
                         "a document bootstrap needs them")
    return documents[evaluation_sample(dataset, sequences, seed)].clone()


def official_model_batches(name: str, dataset, tokenizer: Tokenizer, sequences: int | None,
                           batch_size: int) -> tuple[torch.nn.Module, list[dict]]:
    """An official checkpoint (or a local HF directory, via hf.load_pretrained) and the held-out
    batches of `dataset` re-tokenized with the checkpoint's own tokenizer (ALBERT's spiece.model,
    BERT's vocab.txt); errors name the checkpoint. No network is a ConnectionError."""
    try:
        model, tokenizer_file = hf.load_pretrained(name)
    except DownloadError as e:             # no network is an expected failure, not a bug
        raise ConnectionError(f"official model {name}: {e}") from None
    if tokenizer_file is None:
        raise ValueError(f"official model {name} has no spiece.model or vocab.txt: the held-out text is "
                         "re-tokenized with the checkpoint's own tokenizer")
    target = hf.load_tokenizer(tokenizer_file)
    if target.vocab_size > model.config.vocab_size:
        raise ValueError(f"official model {name}: {tokenizer_file.name} has {target.vocab_size} tokens "
                         f"but the model's vocabulary has {model.config.vocab_size}")
    batches = heldout_batches(dataset, sequences, batch_size, source=tokenizer, target=target,
                              max_len=model.config.max_position_embeddings)
    return model, batches


def interval_note(sequences: int) -> str:
    """One line on how the interval was made, for captions and JSON."""
    small = " (fewer than 30 sequences: the normal interval is too narrow)" if sequences < 30 else ""
    return f"95% interval over {sequences} sequences, normal approximation (mean +- 1.96 s.e.){small}"

