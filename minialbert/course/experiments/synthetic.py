"""A synthetic masked-LM task that only context can solve: the fastest test that a stack learns to attend.

Each sequence is a chain through a fixed random permutation pi of the real tokens: x_{i+1} = pi(x_i).
A masked token is given exactly by its left neighbour (pi(left)) or its right one (pi^-1(right)),
while its unigram distribution is uniform: a model that ignores the context is stuck at 1/V, and a
model that has learned to look one position to the side is right almost always. Post-LN stacks sit
on that plateau for a while before they find the neighbours; how long depends on the learning rate
and warmup, which is what lesson 05 shows first, before pretraining on text.
"""

from __future__ import annotations

import random

import torch

from ...config import IGNORE_INDEX
from ...pretraining_data import PretrainingDataset
from ...tokenizer import CLS_ID, MASK_ID, SEP_ID

FIRST_REAL = 5                 # ids 0-4 are <pad>, <unk>, [CLS], [SEP], [MASK]


def permutation_chains(num_examples: int, vocab_size: int = 64, length: int = 32, mask_rate: float = 0.15,
                       seed: int = 0) -> PretrainingDataset:
    """`[CLS] x_1 .. x_n [SEP]` chains through one fixed permutation (the same for every seed's split),
    with mask_rate of the chain tokens predicted (80% shown as [MASK], 10% random, 10% kept)."""
    if vocab_size <= FIRST_REAL + 1 or length < 2 or not 0 < mask_rate < 1:
        raise ValueError(f"need vocab_size > {FIRST_REAL + 1}, length >= 2 and 0 < mask_rate < 1; got "
                         f"{vocab_size}, {length}, {mask_rate}")
    real = list(range(FIRST_REAL, vocab_size))
    shuffled = real[:]
    random.Random(1234).shuffle(shuffled)                          # the task's fixed permutation
    pi = dict(zip(real, shuffled))
    rng = random.Random(seed)
    ids, labels = [], []
    for _ in range(num_examples):
        chain = [rng.choice(real)]
        for _ in range(length - 1):
            chain.append(pi[chain[-1]])
        shown, target = list(chain), [IGNORE_INDEX] * length
        for i in rng.sample(range(length), max(1, round(mask_rate * length))):
            target[i], r = chain[i], rng.random()
            shown[i] = MASK_ID if r < 0.8 else (rng.choice(real) if r < 0.9 else chain[i])
        ids += [CLS_ID, *shown, SEP_ID]
        labels += [IGNORE_INDEX, *target, IGNORE_INDEX]
    n = len(ids)
    offsets = torch.arange(0, n + 1, length + 2)
    return PretrainingDataset(torch.tensor(ids, dtype=torch.int32), torch.zeros(n, dtype=torch.uint8),
                              torch.tensor(labels, dtype=torch.int32), offsets, None, "mlm", length + 2)
