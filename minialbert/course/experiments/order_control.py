"""A positive control for the NSP vs SOP ablation: the mechanism, on a corpus where order is decidable.

The course's natural-text arms (ablation.py) cannot learn sentence order at laptop scale, so a sentence
head at chance on SOP there proves nothing: the order may be unreadable, or nothing was learned. This
control trains the same three arms (MLM alone, MLM + NSP, MLM + SOP: one config, one recipe, only the
sentence objective differs) on the generated `ordered` corpus (corpus/ordered.py), where every pair of
neighbouring sentences carries a cue that fixes their order and every document keeps one topic. Its
numbers are this corpus's and this tiny model's, a demonstration of the mechanism, never the paper's
Table 5 (ablation.PAPER_TABLE5 holds those).

Recipe (COURSE_SIZES, CPU, one thread): a 1,000-piece tokenizer on the 6,000 training documents; pairs
cut by the official create_instances_from_document at 128 tokens (A and B hold a few ~25-token
sentences; SOP label 1 = swapped, or B from a random other document where a chunk holds one sentence;
NSP label 1 = B from another document), two passes, 15% n-gram masking; ALBERT with E = H = 64, one
shared layer applied twice, 2 heads, FFN 128, initializer_range 0.1; `train.pretrain` with AdamW 3e-3,
5% warmup then linear decay, 900 steps of 32. Chosen on the valid split (own heads, a few runs each): at
initializer_range 0.02 (2 or 4 layers, shared or not, AdamW 1e-3 to 1e-2, LAMB 1e-2) no SOP head left
its constant guess within 600 steps, at 0.1 it left by ~300; at 128 tokens SOP reached ~90% by step
500, at 64 tokens 76% by 800. No recipe brought NSP near 90%: 60-70% after 800 to 3,000 steps (2 or 4
layers, H 64 or 128, from scratch or after an MLM trunk).

Measured on held-out documents (the valid and test splits), pairs read unmasked:
    head    each arm's own sentence head on NSP pairs and on SOP pairs (class 0 "is next" read as
            "in order" and the other way round, as ablation.head_on_pairs does)
    swap    SOP on the swap-only subset (`swap_only`): pairs whose B provably comes from A's document,
            so label 1 means swapped: the pure order question. The official SOP set also holds
            random-document negatives, which need no order, so its accuracy can overstate order
    probe   a logistic regression on the frozen pooled output (ablation.fit_logistic), fitted on
            training pairs (swap-only ones for swap), for every arm and a randomly initialised encoder
    chance  each set's majority-class share; a rule reading only the two segment lengths
            (ablation.length_shortcut); for MLM, the unigram and neighbour baselines
    choice  downstream: pick the true next sentence after a context (3 sentences) among 4 sentences of
            its document ([CLS] context [SEP] candidate [SEP], a linear score on the pooled output,
            softmax over 4), each arm fine-tuned alike on questions from valid documents, tested on
            questions from test documents (chance 25%), arms compared by paired_bootstrap.paired_difference.
An overfit check (an SOP model fitting 32 fixed pairs) shows first that the stack learns. Every interval
is a 95% bootstrap over documents (pairs and questions of one document are not independent).

Measured (assets/figures/order_control.json, `python -m minialbert ablation --order-control`, seed 0; 319 s
on 2 busy cores): SOP arm 94.2% on SOP and 94.3% [93.1, 95.5] on swap-only pairs, 66.7% [65.2, 68.2] on NSP;
NSP arm only 62.7% [61.0, 64.4] on NSP (majority 58.7%) but 71.0% [69.1, 73.0] on swap-only SOP (its probe
79.7%): at this size NSP is learned through the order cues (a B that opens "First," or counts down is not
the next one), not topic; MLM arm's probe 57.4% [55.1, 59.7] on swap-only SOP (random encoder 51.7%). Every
arm's masked LM stays on the unigram plateau (~11% at [MASK], unigram 10.8%). Downstream: SOP 50.8%, NSP
31.1%, MLM 30.6%; SOP - MLM +20.2 points [+15.7, +24.5], SOP - NSP +19.7 [+15.1, +24.0].
"""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass

import torch

from ...config import OBJECTIVES, AlbertConfig
from ...corpus.ordered import ordered_documents
from ...evaluation import (
    MLMBaselines,
    clustered_proportion,
    evaluate_pretraining,
    evaluation_sample,
)
from ...masking import MASK_RATE, MaskingVocab
from ...model import AlbertForPretraining
from ...pretraining_data import examples_from_token_documents
from ...pretraining_dataset import PretrainingDataset
from ...segments import OFFICIAL
from ...tokenizer import Tokenizer
from ...train import RunOptions, TrainArgs, pretrain
from .ablation import length_shortcut, read_pairs
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

__all__ = ["ARMS", "CI_SIZES", "COURSE_SIZES", "OrderControlSizes", "run_order_control"]

ARMS = tuple(OBJECTIVES)                # mlm, nsp, sop: the sentence objective is all that differs


@dataclass(frozen=True)
class OrderControlSizes:
    """Every knob of the control: data, model, pretraining recipe, probes and the downstream task."""
    name: str
    train_documents: int                # ordered:train documents the tokenizer and the arms train on
    heldout_documents: int              # of each of valid and test
    steps: int                          # pretraining steps of each arm
    vocab_size: int = 1000
    max_seq_len: int = 128              # A and B hold several sentences (about 25 tokens each)
    dupe_factor: int = 2                # passes over the training documents (new cuts and masks each)
    # the model: one shared layer applied twice; initializer_range 0.1, not 0.02: at 0.02 no arm left
    # the constant prediction of its sentence head within 600 steps (see the module doc)
    embedding_size: int = 64
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 128
    sharing: str = "all"
    initializer_range: float = 0.1
    optimizer: str = "adamw"
    lr: float = 3e-3
    warmup_share: float = 0.05          # linear warmup over this share of the steps, then linear decay
    batch_size: int = 32
    overfit_pairs: int = 32             # the overfit check: an SOP model on this many fixed pairs
    overfit_steps: int = 60
    probe_examples: int = 2000          # training pairs each linear probe fits on
    context_sentences: int = 3          # downstream: sentences before the one to pick
    questions_per_document: int = 2     # downstream questions cut from each document
    choice_steps: int = 150             # downstream fine-tuning steps (the same for every arm)
    choice_batch: int = 8               # questions per step (CHOICES rows each)
    choice_lr: float = 1e-3


# ci: seconds, for the tests (too few steps to learn the sentence tasks: the overfit check is its learning
# test); course: the measured control (assets/figures/order_control.json), 5-6 minutes on 2 busy cores.
CI_SIZES = OrderControlSizes("ci", train_documents=200, heldout_documents=40, steps=40, batch_size=16,
                             dupe_factor=1, overfit_pairs=16, overfit_steps=40, probe_examples=200,
                             choice_steps=10, choice_batch=4)
COURSE_SIZES = OrderControlSizes("course", train_documents=6000, heldout_documents=500, steps=900)


# ------------------------------------------------------------------------------- data
def _pairs(token_docs, vocab: MaskingVocab, objective: str, sizes: OrderControlSizes, seed: int,
           dupe_factor: int = 1, mask_rate: float | None = None) -> PretrainingDataset:
    extra = {} if mask_rate is None else {"mask_rate": mask_rate}
    return examples_from_token_documents(token_docs, vocab, objective, sizes.max_seq_len, seed,
                                         dupe_factor=dupe_factor, segmenting=OFFICIAL, **extra)


# ------------------------------------------------------------------------------- measurements
def overfit_check(train: PretrainingDataset, cfg: AlbertConfig, sizes: OrderControlSizes, seed: int,
                  pairs: int = 32, steps: int = 60) -> dict:
    """That the stack can learn at all: an MLM + SOP model trained on `pairs` fixed training pairs (all of
    them every step, the recipe's optimizer and rate) should fit their labels. Returns {"pairs", "steps",
    "label_1_share", "sentence_accuracy" on those pairs (their masks as trained), "first_loss",
    "last_loss"}."""
    few = subset(train, range(min(pairs, len(train))))
    args = TrainArgs(objective="sop", steps=steps, batch_size=len(few), lr=sizes.lr,
                     warmup=round(sizes.warmup_share * steps),
                     optimizer=sizes.optimizer, seed=seed, eval_every=0, checkpoint_every=0)
    run = pretrain(cfg, args, few, options=RunOptions(out_dir=None, progress=False, device="cpu"))
    _, predicted = read_pairs(run.model, few, list(range(len(few))))
    return {"pairs": len(few), "steps": steps, "label_1_share": few.sentence_labels.float().mean().item(),
            "sentence_accuracy": (predicted == few.sentence_labels.long()).float().mean().item(),
            "first_loss": run.history[0]["loss"], "last_loss": run.history[-1]["loss"]}


def _config(sizes: OrderControlSizes, vocab_size: int) -> AlbertConfig:
    return AlbertConfig.preset("ci-albert", vocab_size=vocab_size, max_position_embeddings=sizes.max_seq_len,
                               embedding_size=sizes.embedding_size, hidden_size=sizes.hidden_size,
                               num_layers=sizes.num_layers, num_heads=sizes.num_heads,
                               intermediate_size=sizes.intermediate_size, sharing=sizes.sharing,
                               initializer_range=sizes.initializer_range)


def _goals(arms: dict, downstream: dict) -> dict:
    """The control's goals, read off the measurements (nothing is tuned to them)."""
    head = lambda arm, task: arms[arm]["head"][task]
    mlm_probe, differences = arms["mlm"]["probe"]["sop_swap"]["ci95"], downstream["paired"]
    return {"nsp arm: NSP head >= 90%": head("nsp", "nsp")["accuracy"] >= 0.9,
            "nsp arm: SOP head on swap-only pairs within 5 points of 50%":
                abs(head("nsp", "sop_swap")["accuracy"] - 0.5) <= 0.05,
            "sop arm: SOP head >= 90%": head("sop", "sop")["accuracy"] >= 0.9,
            "sop arm: SOP head on swap-only pairs >= 90%": head("sop", "sop_swap")["accuracy"] >= 0.9,
            "sop arm: NSP head interval above 55%": head("sop", "nsp")["ci95"][0] > 0.55,
            "mlm arm: swap-only SOP probe interval holds 50%": mlm_probe[0] <= 0.5 <= mlm_probe[1],
            "downstream: sop beats mlm (paired interval above 0)": differences["sop-mlm"]["ci95"][0] > 0,
            "downstream: sop beats nsp (paired interval above 0)": differences["sop-nsp"]["ci95"][0] > 0}


# ------------------------------------------------------------------------------- the experiment
def run_order_control(sizes: OrderControlSizes = COURSE_SIZES, seed: int = 0, progress: bool = False) -> dict:
    """The whole control (see the module doc): returns a JSON-ready dict. Runs on the CPU on one thread
    (restored afterwards); the corpus is the shipped one (its seed 0), `seed` draws the cuts, masks,
    initialisations, data orders and downstream questions."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(sizes, seed, progress)
    finally:
        torch.set_num_threads(threads)


def _run(sizes: OrderControlSizes, seed: int, progress: bool) -> dict:
    t0 = time.perf_counter()
    documents = {"train": ordered_documents("train", sizes.train_documents),
                 "valid": ordered_documents("valid", sizes.heldout_documents),
                 "test": ordered_documents("test", sizes.heldout_documents)}
    tokenizer = Tokenizer.train([s for doc in documents["train"] for s in doc.sentences], sizes.vocab_size)
    tokens = {split: token_documents(docs, tokenizer) for split, docs in documents.items()}
    vocab = MaskingVocab.from_tokenizer(tokenizer)
    train_data = {arm: _pairs(tokens["train"], vocab, arm, sizes, seed, sizes.dupe_factor) for arm in ARMS}
    # held-out pairs, unmasked, from the valid and the test documents (ids: valid first, then test)
    heldout_docs = tokens["valid"] + tokens["test"]
    heldout = {task: _pairs(heldout_docs, vocab, task, sizes, seed + k, mask_rate=0.0)
               for k, task in ((1, "nsp"), (2, "sop"))}
    swap_at = swap_only(heldout["sop"], heldout_docs)
    heldout["sop_swap"] = subset(heldout["sop"], swap_at)
    heldout_mlm = _pairs(heldout_docs, vocab, "mlm", sizes, seed + 3)
    # probes fit on unmasked pairs of training documents (swap-only ones for the pure order question)
    probe_docs = tokens["train"][:sizes.probe_examples]
    probe_sets = {task: _pairs(probe_docs, vocab, task, sizes, seed + k, mask_rate=0.0)
                  for k, task in ((4, "nsp"), (5, "sop"))}
    some_sop = subset(probe_sets["sop"],
                       evaluation_sample(probe_sets["sop"], 2 * sizes.probe_examples, seed))
    probe_sets["sop_swap"] = subset(some_sop, swap_only(some_sop, probe_docs))
    probe_sets = {task: subset(d, evaluation_sample(d, sizes.probe_examples, seed))
                  for task, d in probe_sets.items()}
    data_seconds = time.perf_counter() - t0

    cfg = _config(sizes, tokenizer.vocab_size)
    recipe = dict(steps=sizes.steps, batch_size=sizes.batch_size, lr=sizes.lr,
                  warmup=round(sizes.warmup_share * sizes.steps),
                  optimizer=sizes.optimizer, seed=seed, eval_every=0, checkpoint_every=0)
    overfit = overfit_check(train_data["sop"], cfg, sizes, seed, sizes.overfit_pairs, sizes.overfit_steps)
    models, arms, correct = {}, {}, {}
    mlm_baselines = MLMBaselines.fit(train_data["mlm"], tokenizer.vocab_size)
    for arm in ARMS:
        run = pretrain(cfg, TrainArgs(objective=arm, **recipe), train_data[arm],
                       options=RunOptions(out_dir=None, progress=progress, device="cpu"))
        models[arm] = run.model.eval()
        last = run.history[-max(1, sizes.steps // 10):]             # the last tenth of the steps
        losses = {k: sum(r[k] for r in last) / len(last) for k in last[0] if k.endswith("loss")}
        measured, correct[arm] = readings(models[arm], heldout, probe_sets)
        mlm = evaluate_pretraining(models[arm], heldout_mlm, mlm_baselines, max_examples=1000, seed=seed)
        arms[arm] = {"pretrain_seconds": round(run.seconds, 1), "final_losses": losses,
                     "mask_accuracy": mlm["mlm"]["mask"], **measured}
    torch.manual_seed(seed)
    random_init, _ = readings(AlbertForPretraining(cfg, sentence_task=None).eval(), heldout, probe_sets)
    swap_docs = heldout["sop_swap"].document_ids
    swap_differences = {
        f"sop_swap {r}: {a} - {b}": paired(correct[a][f"{r}/sop_swap"], correct[b][f"{r}/sop_swap"],
                                           swap_docs, seed)
        for r, a, b in (("probe", "sop", "mlm"), ("probe", "sop", "nsp"), ("head", "sop", "nsp"))}
    baselines = {task: {"majority": max(label_shares(d)), "length_rule": length_shortcut(probe_sets[task], d)}
                 for task, d in heldout.items()}
    mask_baselines = {name: kinds["mask"] for name, kinds in mlm["baselines"].items()}

    t_choice = time.perf_counter()
    rng = random.Random(seed)
    questions = {split: next_sentence_questions(tokens[split], sizes.context_sentences,
                                                sizes.questions_per_document, rng)
                 for split in ("valid", "test")}
    question_docs = torch.tensor([q["document"] for q in questions["test"]])
    choice = ChoiceRecipe(sizes.choice_steps, sizes.choice_batch, sizes.choice_lr, sizes.max_seq_len)
    chosen = {arm: finetune_choice(models[arm].albert, questions["valid"], questions["test"], choice, seed)
              for arm in ARMS}
    downstream = {"task": f"pick the true next sentence among {CHOICES} of the same document",
                  "chance": 1 / CHOICES, "train_questions": len(questions["valid"]),
                  "test_questions": len(questions["test"]),
                  "arms": {arm: clustered_proportion(c, question_docs) for arm, c in chosen.items()},
                  "paired": {f"{a}-{b}": paired(chosen[a], chosen[b], question_docs, seed)
                             for a, b in (("sop", "mlm"), ("sop", "nsp"), ("nsp", "mlm"))},
                  "seconds": round(time.perf_counter() - t_choice, 1)}
    return {"what": "positive control: ALBERT's sentence objectives on the generated `ordered` corpus, where "
                    "sentence order is decidable from cues (corpus/ordered.py); this corpus's numbers, not "
                    "the paper's Table 5",
            "seed": seed, "sizes": dataclasses.asdict(sizes), "config": cfg.to_dict(),
            "recipe": {**recipe, "segmenting": OFFICIAL, "mask_rate_pretraining": MASK_RATE,
                       "heldout_inputs": "unmasked", "device": "cpu", "threads": 1},
            "data": {"documents": {split: len(docs) for split, docs in documents.items()},
                     "tokenizer_pieces": tokenizer.vocab_size,
                     "pretraining_examples": {arm: len(d) for arm, d in train_data.items()},
                     "heldout_pairs": {task: len(d) for task, d in heldout.items()},
                     "heldout_label_shares": {task: label_shares(d) for task, d in heldout.items()},
                     "probe_pairs": {task: len(d) for task, d in probe_sets.items()},
                     "seconds": round(data_seconds, 1)},
            "overfit_check": overfit, "baselines": baselines, "mask_baselines": mask_baselines, "arms": arms,
            "random_init": {"probe": random_init["probe"]},
            "paired": swap_differences, "downstream": downstream, "goals": _goals(arms, downstream),
            "seconds": round(time.perf_counter() - t0, 1)}
