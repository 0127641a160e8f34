"""Held-out metrics that cannot be gamed, shared by pretraining, the CLI and the lessons.

A masked-LM "accuracy over predicted positions" mixes three different questions, because the
input shows something different at each kind of predicted position (80/10/10 replacement):

    mask    the input shows [MASK]: only context can give the answer (the headline number)
    random  the input shows a random token: context, and knowing that the shown token is wrong
    kept    the input shows the answer itself: copying it is enough

so every MLM accuracy here is split by kind, and stands beside baselines computed on the same
positions that see what the model sees: `unigram` (always the most frequent training token),
`copy_or_unigram` (the shown token unless it is [MASK]), `neighbour` (the token seen most often
between the same left and right neighbours in the training text) and `two_each_side` (two tokens of
context on each side, smoothed down to shorter contexts: `local_context.TwoEachSide`, the strongest
local guess, the one "beyond local statistics" is measured against). Sentence tasks report the share
of each predicted class, so a constant predictor is visible at a glance.

Every figure carries a 95% interval and the size of the set it comes from. Held-out examples are cut
from a few hundred documents, several examples and many positions per document, and those are not
independent draws: where the data name each example's document, `ci95` is a bootstrap interval
that resamples whole documents (`clustered_proportion`, with the number of documents), and the
Wilson interval, right only for independent items, is kept beside it as `wilson95`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm.auto import tqdm

from .config import IGNORE_INDEX
from .device import choose_precision
from .local_context import TwoEachSide
from .pretraining_data import collate
from .pretraining_dataset import check_fits
from .tokenizer import MASK_ID

KINDS = ("mask", "random", "kept")            # what the input shows at a predicted position
BASELINES = ("unigram", "copy_or_unigram", "neighbour", "two_each_side")


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (well behaved near 0 and 1, unlike p +- 1.96 se)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def proportion(successes: int, n: int) -> dict:
    """{"accuracy", "ci95", "n"}: a proportion with its interval and the size of its set (None if n = 0)."""
    lo, hi = wilson_interval(successes, n)
    return {"accuracy": successes / n if n else None, "ci95": [lo, hi], "n": int(n)}


def clustered_interval(hits: torch.Tensor, clusters: torch.Tensor, reps: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of a proportion whose items come in clusters (documents):
    each replicate draws as many clusters as there are, with replacement, and pools their items.
    When items within a cluster are perfectly correlated it is about as wide as a Wilson interval
    over the clusters; when every item is its own cluster, about as wide as one over the items."""
    _, cluster = torch.unique(clusters, return_inverse=True)
    n_clusters = int(cluster.max()) + 1
    hits_per = torch.bincount(cluster, weights=hits.double(), minlength=n_clusters)          # (D,)
    items_per = torch.bincount(cluster, minlength=n_clusters).double()                      # (D,)
    draws = torch.randint(n_clusters, (reps, n_clusters), generator=torch.Generator().manual_seed(seed))
    rates = hits_per[draws].sum(1) / items_per[draws].sum(1)                                 # (reps,)
    lo, hi = torch.quantile(rates, torch.tensor([0.025, 0.975], dtype=rates.dtype)).tolist()
    return (lo, hi)


def clustered_proportion(hits: torch.Tensor, clusters: torch.Tensor | None) -> dict:
    """proportion() of boolean hits, with a document-resampling ci95 where clusters (one id per hit)
    are given: {"accuracy", "ci95", "wilson95", "n", "documents"}."""
    result = proportion(int(hits.sum()), hits.numel())
    if clusters is None or hits.numel() == 0:
        return result
    result["wilson95"] = result["ci95"]
    result["ci95"] = list(clustered_interval(hits, clusters))
    result["documents"] = int(torch.unique(clusters).numel())
    return result


def position_kinds(input_ids: torch.Tensor, mlm_labels: torch.Tensor) -> torch.Tensor:
    """For each predicted position (row-major order), 0 = [MASK] shown, 1 = random token, 2 = kept."""
    predicted = mlm_labels != IGNORE_INDEX
    shown, target = input_ids[predicted], mlm_labels[predicted]                  # (M,), (M,)
    kinds = torch.ones_like(target)
    kinds[shown == MASK_ID] = 0
    kinds[shown == target] = 2
    return kinds


class MLMBaselines:
    """Context-free and adjacent-token guessers fitted on the training split's unmasked text."""

    def __init__(self, unigram_counts: np.ndarray, pairs: np.ndarray, pair_best: np.ndarray,
                 left_best: np.ndarray, right_best: np.ndarray, two_each_side: TwoEachSide):
        self.vocab_size = len(unigram_counts)
        self.unigram = int(unigram_counts.argmax())
        smoothed = unigram_counts + 1.0                             # add-one: no target has probability 0
        self.unigram_log_probs = torch.from_numpy(np.log(smoothed / smoothed.sum()))
        self.pairs, self.pair_best = pairs, pair_best              # sorted (left * V + right) keys -> token
        self.left_best, self.right_best = left_best, right_best    # (V,) best after / before; -1 unseen
        self.two_each_side = two_each_side

    @classmethod
    def fit(cls, train_data, vocab_size: int | None = None) -> MLMBaselines:
        """Count tokens and (left, token, right) triples over the unmasked training sequences.

        Works on the dataset's flat tensors (every example end to end, PretrainingDataset.offsets
        marking where each starts), so a million examples take seconds, not a Python loop over them.
        """
        labels = train_data.mlm_labels.numpy().astype(np.int64)
        ids = np.where(labels != IGNORE_INDEX, labels, train_data.input_ids.numpy())   # before masking
        V = vocab_size or int(ids.max()) + 1
        counts = np.bincount(labels[labels != IGNORE_INDEX], minlength=V).astype(np.float64)
        starts = train_data.offsets.numpy()
        inner = np.ones(len(ids), dtype=bool)            # a token with both neighbours in its example
        inner[starts[:-1]] = inner[starts[1:] - 1] = False
        mid_at = np.flatnonzero(inner)
        left, mid, right = ids[mid_at - 1], ids[mid_at], ids[mid_at + 1]
        pairs, pair_best = _most_frequent(left * V + right, mid, V)
        lefts, left_tok = _most_frequent(left, mid, V)
        rights, right_tok = _most_frequent(right, mid, V)
        left_best, right_best = np.full(V, -1), np.full(V, -1)
        left_best[lefts], right_best[rights] = left_tok, right_tok
        return cls(counts, pairs, pair_best, left_best, right_best, TwoEachSide.fit(ids, starts, counts))

    def predict(self, input_ids: torch.Tensor, mlm_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """Each baseline's guess at every predicted position (row-major order), from the input alone."""
        predicted = (mlm_labels != IGNORE_INDEX).numpy()
        ids = input_ids.numpy().astype(np.int64)
        padded = np.pad(ids, ((0, 0), (1, 1)), constant_values=-1)               # (B, N + 2)
        left, right = padded[:, :-2][predicted], padded[:, 2:][predicted]       # neighbours as shown
        shown = ids[predicted]
        guess = np.full(shown.shape, self.unigram)
        known = (left >= 0) & (left < self.vocab_size)
        guess[known] = np.where(self.left_best[left[known]] >= 0, self.left_best[left[known]], self.unigram)
        rknown = (right >= 0) & (right < self.vocab_size) & ~(known & (self.left_best[left.clip(0)] >= 0))
        guess[rknown] = np.where(self.right_best[right[rknown]] >= 0, self.right_best[right[rknown]],
                                 self.unigram)
        both = known & (right >= 0) & (right < self.vocab_size)
        keys = left[both] * self.vocab_size + right[both]
        at = np.searchsorted(self.pairs, keys).clip(max=len(self.pairs) - 1)
        hit = self.pairs[at] == keys
        pair_guess = guess[both]
        pair_guess[hit] = self.pair_best[at[hit]]
        guess[both] = pair_guess
        unigram = np.full(shown.shape, self.unigram)
        copy = np.where(shown == MASK_ID, self.unigram, shown)
        wide = self.two_each_side.predict(ids, predicted)
        return {"unigram": torch.from_numpy(unigram), "copy_or_unigram": torch.from_numpy(copy),
                "neighbour": torch.from_numpy(guess), "two_each_side": torch.from_numpy(wide)}


def _most_frequent(keys: np.ndarray, values: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct key (sorted), the value in 0..V-1 seen with it most often (ties: the smallest)."""
    combined, counts = np.unique(keys * V + values, return_counts=True)      # sorted by key, then value
    key, value = combined // V, combined % V
    order = np.lexsort((value, -counts, key))                                # key, then count desc
    key, value = key[order], value[order]
    first = np.r_[True, key[1:] != key[:-1]]
    return key[first], value[first]


def evaluation_sample(dataset, max_examples: int | None = None, seed: int = 0) -> list[int]:
    """The fixed evaluation set: every example, or a seeded shuffled sample of max_examples of them."""
    n = len(dataset)
    if n == 0:
        raise ValueError("the evaluation set is empty; check the split and the scale")
    if max_examples is None or max_examples >= n:
        return list(range(n))
    if max_examples < 1:
        raise ValueError(f"max_examples must be at least 1 (or None for all), got {max_examples}")
    return sorted(torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:max_examples].tolist())


@torch.no_grad()
def evaluate_pretraining(model: nn.Module, dataset, baselines: MLMBaselines | None = None,
                         max_examples: int | None = None, batch_size: int = 64, seed: int = 0,
                         progress: bool = False) -> dict:
    """Held-out MLM accuracy by position kind (beside the baselines) and sentence-task accuracy.

    Returns a JSON-ready dict: examples, mlm_loss, mask_loss (cross-entropy on [MASK] positions: it
    falls below the unigram's, unigram_mask_loss, before the accuracy moves), mlm[kind or "all"] =
    {accuracy, ci95, n}, baselines[name][kind], and for a model with a sentence head and labelled
    data, sentence = {task, accuracy, ci95, n, predicted_shares, label_shares, chance, constant}.
    Where the dataset names each example's document (document_ids), every ci95 resamples documents
    and "documents" counts them (see clustered_proportion).
    """
    indices = evaluation_sample(dataset, max_examples, seed)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    kinds_all, hits_all, losses_all, guesses = [], [], [], {name: [] for name in BASELINES}
    sentence_pred, sentence_true = [], []
    documents = getattr(dataset, "document_ids", None)
    position_docs, example_docs = [], []         # the document of each predicted position / example
    for start in tqdm(range(0, len(indices), batch_size), disable=not progress, desc="evaluate"):
        batch = collate([dataset[i] for i in indices[start:start + batch_size]])
        on_device = {k: v.to(device) for k, v in batch.items()}
        with choose_precision(device).autocast():
            out = model(on_device["input_ids"], on_device["token_type_ids"], on_device["attention_mask"],
                        mlm_labels=on_device["mlm_labels"])
        targets = batch["mlm_labels"][batch["mlm_labels"] != IGNORE_INDEX]                   # (M,)
        logits = out.mlm_logits.float().cpu()                                                 # (M, V)
        losses_all.append(nn.functional.cross_entropy(logits, targets, reduction="none"))
        kinds_all.append(position_kinds(batch["input_ids"], batch["mlm_labels"]))
        hits_all.append(logits.argmax(-1) == targets)
        if documents is not None:
            docs = documents[indices[start:start + batch_size]].long()                         # (B,)
            example_docs.append(docs)
            position_docs.append(docs.repeat_interleave((batch["mlm_labels"] != IGNORE_INDEX).sum(1)))
        if baselines is not None:
            for name, guess in baselines.predict(batch["input_ids"], batch["mlm_labels"]).items():
                guesses[name].append(guess == targets)
        if out.sentence_logits is not None and "sentence_labels" in batch:
            sentence_pred.append(out.sentence_logits.argmax(-1).cpu())
            sentence_true.append(batch["sentence_labels"])
    model.train(was_training)
    kinds, hits, losses = torch.cat(kinds_all), torch.cat(hits_all), torch.cat(losses_all)
    if kinds.numel() == 0:
        raise ValueError("the evaluation set has no predicted (masked) positions")
    docs = torch.cat(position_docs) if position_docs else None
    result = {"examples": len(indices), "of": len(dataset), "mlm_loss": losses.mean().item(),
              "mask_loss": losses[kinds == 0].mean().item(), "mlm": _by_kind(hits, kinds, docs)}
    if baselines is not None:
        result["baselines"] = {name: _by_kind(torch.cat(g), kinds, docs) for name, g in guesses.items()}
        targets = torch.cat([dataset[i]["mlm_labels"] for i in indices])
        targets = targets[targets != IGNORE_INDEX]
        result["unigram_mask_loss"] = -baselines.unigram_log_probs[targets[kinds == 0]].mean().item()
    if sentence_pred:
        result["sentence"] = sentence_metrics(torch.cat(sentence_pred), torch.cat(sentence_true),
                                              getattr(model, "sentence_task", None),
                                              clusters=torch.cat(example_docs) if example_docs else None)
    return result


def _by_kind(hits: torch.Tensor, kinds: torch.Tensor, docs: torch.Tensor | None = None) -> dict:
    out = {kind: clustered_proportion(hits[kinds == k], None if docs is None else docs[kinds == k])
           for k, kind in enumerate(KINDS)}
    out["all"] = clustered_proportion(hits, docs)
    return out


def sentence_metrics(predicted: torch.Tensor, labels: torch.Tensor, task: str | None = None,
                     num_classes: int = 2, clusters: torch.Tensor | None = None) -> dict:
    """Accuracy with its interval (resampling clusters, one id per example, where given), the share of
    each predicted and true class, and chance."""
    n = labels.numel()
    predicted_shares = (torch.bincount(predicted, minlength=num_classes).double() / n).tolist()
    label_shares = (torch.bincount(labels, minlength=num_classes).double() / n).tolist()
    return {"task": task, **clustered_proportion(predicted == labels, clusters),
            "predicted_shares": predicted_shares, "label_shares": label_shares,
            "chance": max(label_shares), "constant": max(predicted_shares) == 1.0}


def pretraining_evaluator(valid_data, cfg, args) -> Callable[[nn.Module, int], dict]:
    """train.pretrain's `evaluate`: summary_record of `valid_data` (args.eval_examples of it, a fixed seeded
    sample), in batches of twice this process's micro-batch; the data checked against `cfg` once, here."""
    check_fits(valid_data, cfg, "the held-out data")

    def evaluate(model: nn.Module, step: int) -> dict:
        world = dist.get_world_size() if dist.is_initialized() else 1
        micro = args.batch_size // (world * args.grad_accum)
        return summary_record(evaluate_pretraining(model, valid_data, max_examples=args.eval_examples,
                                                   batch_size=2 * micro))
    return evaluate


def summary_record(result: dict) -> dict:
    """The flat numbers a metrics.jsonl record keeps of an evaluation (curves are drawn from these)."""
    record = {"mlm_loss": result["mlm_loss"], "mask_loss": result["mask_loss"],
              "eval_examples": result["examples"]}
    for kind in KINDS:
        record[f"{kind}_accuracy"] = result["mlm"][kind]["accuracy"]
    record["mask_ci95"] = result["mlm"]["mask"]["ci95"]
    record["mlm_accuracy"] = result["mlm"]["all"]["accuracy"]      # all predicted positions (the paper's)
    if "sentence" in result:
        s = result["sentence"]
        record[f"{s['task'] or 'sentence'}_accuracy"] = s["accuracy"]
        record[f"{s['task'] or 'sentence'}_predicted_1"] = s["predicted_shares"][1]
    return record


def format_report(result: dict) -> str:
    """A small table for people: accuracy [95% interval] by position kind, beside each baseline."""
    def cell(p: dict) -> str:
        return f"{100 * p['accuracy']:5.1f}% [{100 * p['ci95'][0]:.1f}, {100 * p['ci95'][1]:.1f}]"
    rows = [("model", result["mlm"])] + list(result.get("baselines", {}).items())
    header = f"{'':17s}" + "".join(f"{k + ' (n=' + str(result['mlm'][k]['n']) + ')':>24s}"
                                   for k in (*KINDS, "all"))
    lines = [f"held-out evaluation on {result['examples']} of {result['of']} examples", header]
    lines += [f"{name:17s}" + "".join(f"{cell(r[k]):>24s}" for k in (*KINDS, "all")) for name, r in rows]
    if "sentence" in result:
        s = result["sentence"]
        shares = ", ".join(f"class {i}: {100 * v:.1f}%" for i, v in enumerate(s["predicted_shares"]))
        lines.append(f"{(s['task'] or 'sentence').upper()} accuracy {cell(s)} (n={s['n']}, chance "
                     f"{100 * s['chance']:.1f}%); predicted {shares}"
                     + ("  <- constant predictor" if s["constant"] else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- fine-tuning metrics
# GLUE's metrics, written out: accuracy and F1 (MRPC), Matthews correlation (CoLA), Pearson and
# Spearman correlation (STS-B). A constant prediction has no correlation: 0 by convention here.
def f1_binary(predicted, labels) -> float:
    """F1 of class 1: the harmonic mean of precision and recall (0 when class 1 is never predicted right)."""
    p, y = np.asarray(predicted), np.asarray(labels)
    tp = int(((p == 1) & (y == 1)).sum())
    fp, fn = int(((p == 1) & (y != 1)).sum()), int(((p != 1) & (y == 1)).sum())
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def matthews_correlation(predicted, labels) -> float:
    """Matthews correlation over any number of classes (Gorodkin's R_K): 1 perfect, 0 chance or constant."""
    p, y = np.asarray(predicted, dtype=np.int64), np.asarray(labels, dtype=np.int64)
    k = int(max(p.max(initial=0), y.max(initial=0))) + 1
    confusion = np.zeros((k, k), dtype=np.float64)                 # rows: true class, columns: predicted
    np.add.at(confusion, (y, p), 1)
    n, correct = confusion.sum(), np.trace(confusion)
    true_counts, predicted_counts = confusion.sum(axis=1), confusion.sum(axis=0)
    numerator = correct * n - true_counts @ predicted_counts
    denominator = math.sqrt((n * n - predicted_counts @ predicted_counts)
                            * (n * n - true_counts @ true_counts))
    return float(numerator / denominator) if denominator else 0.0


def pearson(x, y) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = x - x.mean(), y - y.mean()
    denominator = math.sqrt((dx @ dx) * (dy @ dy))
    return float(dx @ dy / denominator) if denominator else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing the mean of their ranks (what Spearman's rho needs)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    values, inverse = np.unique(x, return_inverse=True)
    sums, counts = np.zeros(len(values)), np.zeros(len(values))
    np.add.at(sums, inverse, ranks)
    np.add.at(counts, inverse, 1)
    return (sums / counts)[inverse]


def spearman(x, y) -> float:
    """Pearson correlation of the ranks."""
    return pearson(_ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64)))


def task_metrics(predicted, labels, num_labels: int, documents: Sequence[int | None] | None = None) -> dict:
    """Every metric of a fine-tuning task: classification (num_labels >= 2: class ids) reports accuracy
    with its interval (resampling documents where every example names one, Example.document: see
    clustered_proportion), the share of predictions in each class (a constant predictor shows as 1.0),
    F1 (binary tasks) and Matthews correlation; regression (num_labels == 1) reports Pearson, Spearman
    and the mean squared error."""
    n = len(labels)
    if num_labels == 1:
        p, y = np.asarray(predicted, dtype=np.float64), np.asarray(labels, dtype=np.float64)
        return {"pearson": pearson(p, y), "spearman": spearman(p, y), "mse": float(((p - y) ** 2).mean()),
                "n": n}
    p, y = np.asarray(predicted, dtype=np.int64), np.asarray(labels, dtype=np.int64)
    clusters = None if documents is None or None in documents else torch.tensor(documents)
    metrics = clustered_proportion(torch.from_numpy(p == y), clusters)
    metrics["predicted_shares"] = (np.bincount(p, minlength=num_labels) / max(n, 1)).tolist()
    metrics["matthews"] = matthews_correlation(p, y)
    if num_labels == 2:
        metrics["f1"] = f1_binary(p, y)
    return metrics


def bag_of_words_baseline(task, tokenizer, steps: int = 500, batch_size: int = 4096, seed: int = 0) -> dict:
    """The trivial baseline a fine-tuned model must beat on a downstream task: a logistic regression (or,
    for regression tasks, a linear model) on which pieces occur, reading no word order. For a sentence
    pair it sees three bags: the pieces of A, of B, and those shared by both (the topic cue that solves
    NSP). On a task whose classes hold the same words it must stay at chance.

    Fitted on all of task.train with Adam, its rate falling linearly to 0, over `steps` batches of
    `batch_size` examples in seeded epochs (a smaller training set is one full batch per step), so the
    fit costs seconds however large the task (course `next-sentence`, 297,950 pairs: 60.4% on test
    against 60.5% for 200 full-batch steps, in a tenth of the time). Returns {"dev": ..., "test": ...}
    task_metrics (test None when the task has no test split)."""
    V = tokenizer.vocab_size

    def bags(examples) -> tuple[torch.Tensor, torch.Tensor]:   # every example's feature ids, one after
        features = []                                           # another (F,), and how many each has (n,)
        for ex in examples:
            a = set(tokenizer.encode(ex.text_a))
            b = set(tokenizer.encode(ex.text_b)) if ex.text_b is not None else set()
            features.append(sorted(a) + [V + i for i in sorted(b)] + [2 * V + i for i in sorted(a & b)])
        return (torch.tensor([i for f in features for i in f], dtype=torch.long),
                torch.tensor([len(f) for f in features], dtype=torch.long))

    def scores(ids: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:     # (n, num_labels)
        return weights(ids, counts.cumsum(0) - counts) + bias

    def rows(ids: torch.Tensor, counts: torch.Tensor, at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The feature ids and counts of the examples at `at`, in that order."""
        take = counts[at]                                                    # (b,)
        first = torch.repeat_interleave((counts.cumsum(0) - counts)[at], take)
        within = torch.arange(int(take.sum())) - torch.repeat_interleave(take.cumsum(0) - take, take)
        return ids[first + within], take

    torch.manual_seed(seed)
    weights = nn.EmbeddingBag(3 * V, task.num_labels, mode="sum")
    nn.init.zeros_(weights.weight)
    bias = nn.Parameter(torch.zeros(task.num_labels))

    labels = torch.tensor([ex.label for ex in task.train])
    optimizer = torch.optim.Adam([weights.weight, bias], lr=0.05, weight_decay=1e-4)
    decay = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)   # to 0 at the end
    train_bags = bags(task.train)
    n = len(labels)
    size = min(batch_size, n)
    g = torch.Generator().manual_seed(seed)
    order = torch.cat([torch.randperm(n, generator=g) for _ in range(math.ceil(steps * size / n))])
    for batch in order[:steps * size].view(steps, size):
        s = scores(*rows(*train_bags, batch))
        y = labels[batch]
        loss = (nn.functional.mse_loss(s.squeeze(-1), y.float()) if task.num_labels == 1
                else nn.functional.cross_entropy(s, y))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        decay.step()
    result = {}
    for split, examples in (("dev", task.dev), ("test", task.test)):
        if not examples:
            result[split] = None
            continue
        with torch.no_grad():
            s = scores(*bags(examples))
        predicted = s.squeeze(-1) if task.num_labels == 1 else s.argmax(-1)
        result[split] = task_metrics(predicted.tolist(), [ex.label for ex in examples], task.num_labels,
                                     [ex.document for ex in examples])
    return result
