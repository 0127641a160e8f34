"""The course model zoo's entries: what each pretraining run trains, named once.

Every entry is the scale's model trained with the scale's recipe on the scale's data for the zoo's
number of steps, except where its fields say otherwise (a changed config, objective, seed, budget,
learning rate, optimizer, or length-balanced pairs). zoo.py builds, keys, loads and ships them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...pretraining_dataset import check_inputs
from ...segments import OFFICIAL, TWO_SENTENCE_CHUNKS


@dataclass(frozen=True)
class Entry:
    name: str
    objective: str                    # mlm | nsp | sop
    about: str
    arch: str = "albert"              # albert | bert (the scale's BERT twin: no sharing, E = H)
    changes: tuple = ()               # config fields changed from the preset: ((field, value), ...)
    seed: int = 0
    budget: str = "zoo"               # zoo: scale.zoo.steps; lesson: scale.recipe.pretrain_steps (lesson 05);
                                      # long: 4 x scale.zoo.steps (the schedule stretched, not continued);
                                      # trunk: scale.zoo.steps / 2; branch: scale.zoo.steps / 4
    balanced: bool = False            # train on length-balanced pairs (segments.length_balanced)
    lr_factor: float = 1.0            # the scale's learning rate times this
    warmup_factor: float = 1.0        # the scale's warmup steps times this (at most the entry's steps)
    optimizer: str | None = None      # lamb | adamw (None: the scale's)
    threads: int | None = None        # torch threads of its build (None: the scale's zoo_threads)
    segmenting: str = OFFICIAL        # how its pairs are cut (segments.SEGMENTINGS)
    start_from: str | None = None     # the entry whose final weights it starts from (a branch of a trunk)
    inputs: str | None = None         # mlm only: read these pairs (nsp | sop), labels dropped (None: single
                                      # segments)

    def __post_init__(self):
        check_inputs(self.objective, self.inputs)


# The entries shipped before the official segmenting (2026-12) were trained on the course's earlier cut,
# "two-sentence-chunks"; each names it, so its key, and so its shipped weights, stay what they were.
# Likewise albert-factorized-lamb names the LAMB it was trained with, one trust ratio for the fused q, k, v.
EARLIER_ENTRIES = (
    Entry("albert-sop", "sop", "ALBERT as the paper trains it: MLM + sentence-order prediction"),
    Entry("albert-nsp", "nsp", "ALBERT with BERT's next-sentence prediction instead of SOP"),
    Entry("albert-mlm", "mlm", "ALBERT with MLM alone, no sentence objective"),
    Entry("bert-nsp", "nsp", "the BERT twin (no sharing, E = H) trained as BERT was: MLM + NSP", arch="bert"),
    Entry("bert-sop", "sop", "the BERT twin with ALBERT's objective: differs from albert-sop only in "
                             "sharing and factorization", arch="bert"),
    Entry("lesson-albert-sop", "sop", "lesson 05's own short run of albert-sop's recipe, with two layers "
                                      "(fewer layers leave the plateau in fewer steps)",
          changes=(("num_layers", 2),), budget="lesson"),
    # The paper's Table 4 (what to share) and Table 3 (embedding size E under all-sharing), at course
    # width: albert-sop is the all-shared E = H = 64 point (still projected, as transformers does) and
    # bert-sop the not-shared one.
    Entry("albert-share-attention", "sop", "albert-sop sharing only the attention sublayer across layers "
                                           "(each layer its own FFN)", changes=(("sharing", "attention"),)),
    Entry("albert-share-ffn", "sop", "albert-sop sharing only the FFN sublayer across layers (each layer its "
                                     "own attention)", changes=(("sharing", "ffn"),)),
    Entry("albert-share-none", "sop", "albert-sop with nothing shared (keeps ALBERT's E -> H projection)",
          changes=(("sharing", "none"),)),
    Entry("albert-e16", "sop", "albert-sop with a narrower embedding, E = 16",
          changes=(("embedding_size", 16),)),
    Entry("albert-e32", "sop", "albert-sop with a narrower embedding, E = 32 (the earlier course default)",
          changes=(("embedding_size", 32),)),
    # The NSP vs SOP ablation (the paper's Table 5) needs more than one seed per arm: seed 0 is the
    # entry above, these differ from it only in the seed (initialisation, data order, masking).
    *(Entry(f"albert-{objective}-seed{seed}", objective, f"albert-{objective} with seed {seed}", seed=seed)
      for objective in ("mlm", "nsp", "sop") for seed in (1, 2)),
    # The ablation's fourth arm: SOP on pairs whose segment lengths say nothing about the order. At 32
    # tokens the recipe's SOP pairs carry a length cue (a rule on the two lengths alone scores 55%).
    *(Entry(f"albert-sop-balanced{f'-seed{seed}' if seed else ''}", "sop",
            f"albert-sop trained on length-balanced pairs{f', seed {seed}' if seed else ''} (no length cue)",
            seed=seed, balanced=True) for seed in (0, 1, 2)),
    # The smoothness study at depth (the paper's Figure 2 uses 24-layer models): with 4 layers neither
    # oscillation nor "does not converge to 0" can be judged, so one pair with 12 layers, otherwise
    # albert-sop and bert-sop. At the 4-layer rate (3e-3, 300 warmup steps) both 12-layer post-LN stacks
    # learned for about 2,000 steps, then collapsed onto the unigram guess for good: so a third of the
    # rate and six times the warmup.
    *(Entry(name, "sop", about, arch=arch, changes=(("num_layers", 12),), lr_factor=1 / 3, warmup_factor=6)
      for name, arch, about in (
          ("albert-deep", "albert", "albert-sop with 12 layers (the smoothness study at depth)"),
          ("bert-deep", "bert",
           "bert-sop with 12 layers: albert-deep's twin without sharing or factorization"))),
    Entry("albert-sop-balanced-long", "sop", "albert-sop-balanced trained four times longer: does SOP "
                                             "without a length cue need more compute?",
          balanced=True, budget="long"),
    # ALBERT in miniature as the paper defines it: a factorized embedding (E < H), all layers shared, LAMB,
    # MLM + SOP. At the course width E = 32 < H = 64 never left the plateau with AdamW (albert-e32); at twice
    # the width, with LAMB at 5e-3 and 600 warmup steps, it does (docs/zoo.md). Built with two threads.
    Entry("albert-factorized-lamb", "sop", "ALBERT's own traits at twice the course width: E = 64 < H = 128 "
                                          "(factorized), all layers shared, LAMB, MLM + SOP",
          changes=(("hidden_size", 128), ("embedding_size", 64), ("intermediate_size", 512)),
          optimizer="lamb-fused-qkv", lr_factor=5 / 3, warmup_factor=2, threads=2),
)

# The NSP vs SOP ablation at 128 tokens, where A and B hold several sentences each, on the official pairs:
# one masked-LM trunk (ALBERT in miniature, as albert-factorized-lamb, at 128 positions), then branches of
# equal budget from its final weights that differ only in the sentence objective, two seeds each. So every
# arm starts past the plateau, and what differs after it is the objective alone. The trunk and the MLM
# arm read the SOP arm's pairs with the labels dropped: masked LM alone on single segments stayed on the
# unigram plateau (docs/results.md), on [CLS] A [SEP] B [SEP] it leaves it.
LONG_TEXT = (("hidden_size", 128), ("embedding_size", 64), ("intermediate_size", 512),
             ("max_position_embeddings", 128))
LONG_TEXT_RECIPE = dict(changes=LONG_TEXT, optimizer="lamb", lr_factor=5 / 3, threads=2)
TRUNK = "albert-trunk-128"
BRANCHES = tuple(
    Entry(f"albert-{objective}-128" + (f"-seed{seed}" if seed else ""), objective,
          f"{TRUNK} trained on with {label}, seed {seed}", seed=seed, budget="branch", start_from=TRUNK,
          inputs="sop" if objective == "mlm" else None, **LONG_TEXT_RECIPE)
    for objective, label in (("mlm", "MLM alone (on the SOP pairs, labels dropped)"), ("nsp", "MLM + NSP"),
                             ("sop", "MLM + SOP"))
    for seed in (0, 1))

ENTRIES: dict[str, Entry] = {e.name: e for e in (
    *(replace(e, segmenting=TWO_SENTENCE_CHUNKS) for e in EARLIER_ENTRIES),
    Entry(TRUNK, "mlm", "the masked-LM trunk of the 128-token ablation: ALBERT's own traits at twice the "
                        "course width (as albert-factorized-lamb), 128 tokens, MLM alone on the SOP pairs "
                        "(labels dropped)", budget="trunk", warmup_factor=2, inputs="sop",
          **LONG_TEXT_RECIPE),
    *BRANCHES,
)}
