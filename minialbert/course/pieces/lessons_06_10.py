"""The pieces of lessons 06 to 10: layer transitions (06), the classifier (07), cross-evaluation (08),
Table 2's parameter counts (09) and the online softmax, in PyTorch and in Triton (10)."""

from __future__ import annotations

import math
import re

import torch
import torch.nn.functional as F
from torch import nn

from ...config import AlbertConfig
from ...costs import count_parameters, parameter_breakdown
from ...experiments.ablation import head_on_pairs
from ...experiments.analysis import transition
from ...model import AlbertForSequenceClassification, math_attention
from .checking import CHECK_CONFIG, Piece, difference, largest, named_mistake, pretraining_batch, randn


def _transition_inputs(g, trial):
    before = randn(g, 2, 5, 8).double()
    after = before * 3 if trial == 2 else randn(g, 2, 5, 8).double()    # trial 2: parallel vectors, angle 0
    return before, after


def _cosine_distance(before, after):
    return (after - before).norm(dim=-1), 1 - F.cosine_similarity(after, before, dim=-1)


def _classifier_inputs(g, trial):
    batch = pretraining_batch(g, CHECK_CONFIG)
    return batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]


def _unpooled(ref, ids, types, mask):
    return ref.classifier(ref.albert(ids, types, mask).last_hidden_state[:, 0])


def _online_inputs(g, trial):
    N, M, d = 5, 11, 4                          # M not a multiple of the block: the last block is short
    return randn(g, N, d), randn(g, M, d) * 2, randn(g, M, d), 4


def _full_softmax_attention(q, k, v, block):
    """The reference: plain softmax(q k^T / sqrt(d)) v (the package's math_attention), one head."""
    attend = torch.ones(1, 1, 1, k.shape[0], dtype=torch.bool)
    return math_attention(q[None, None], k[None, None], v[None, None], attend)[0, 0]


def _online_variant(q, k, v, block, rescale=True, normalise=True):
    scale = 1 / math.sqrt(q.shape[-1])
    m = torch.full((q.shape[0], 1), -math.inf)
    l, acc = torch.zeros(q.shape[0], 1), torch.zeros_like(q)
    for start in range(0, k.shape[0], block):
        s = q @ k[start:start + block].T * scale
        m_new = torch.maximum(m, s.max(dim=-1, keepdim=True).values)
        p, alpha = (s - m_new).exp(), (m - m_new).exp() if rescale else torch.ones_like(m)
        l, acc, m = l * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ v[start:start + block], m_new
    return acc / l if normalise else acc


TRITON_BLOCK = 16           # the Triton piece's tiles (tl.dot wants sides of at least 16)
LOG2E = math.log2(math.e)


def _triton_inputs(g, trial):
    N, d = 3 * TRITON_BLOCK, 16                 # three query tiles, three key tiles
    return randn(g, N, d), randn(g, N, d) * 2, randn(g, N, d)


def _triton_online_softmax(kernel, g, trial) -> tuple[str | None, float]:
    """Launch the learner's @triton.jit kernel on one head and compare its output with the package's kernel,
    minialbert.kernels.fused_attention, on the same tiles: in Triton's interpreter on the CPU where the
    kernels are interpreted (no GPU), compiled on the GPU otherwise, float32 products in full float32 in
    both. The kernel's arguments: Q, K, V, O (N, d) float32, n_keys, qk_scale = log2(e) / sqrt(d), and the
    constants HEAD_DIM, BLOCK_M, BLOCK_N; one program per tile of BLOCK_M queries."""
    # triton only here: lesson 10 imports it after choosing the interpreter or a GPU
    from triton import knobs
    from triton.runtime.errors import InterpreterError

    from ...kernels import INTERPRET, fused_attention

    if not callable(getattr(kernel, "fn", None)):
        return "it is not a Triton kernel: put @triton.jit above its def", 0.0
    if not INTERPRET and (stub := re.search(r"raise NotImplementedError\((['\"])(.*?)\1\)", kernel.src)):
        raise NotImplementedError(stub.group(2))        # a compiled kernel cannot raise: its stub says it
    q, k, v = inputs = _triton_inputs(g, trial)
    device = "cpu" if INTERPRET else "cuda"
    (N, d), out = q.shape, torch.zeros_like(q, device=device)
    try:
        with knobs.language.scope():
            knobs.language.fp32_default = "ieee"        # a GPU's default for float32 tl.dot is tf32
            kernel[(N // TRITON_BLOCK,)](*(t.to(device) for t in (q, k, v)), out, N, LOG2E / math.sqrt(d),
                                         HEAD_DIM=d, BLOCK_M=TRITON_BLOCK, BLOCK_N=TRITON_BLOCK)
    except InterpreterError as e:       # the interpreter wraps what the kernel raised: say that instead
        raise (e.__cause__ or e) from None
    theirs = fused_attention(*(t.to(device)[None, None] for t in (q, k, v)), block_m=TRITON_BLOCK,
                             block_n=TRITON_BLOCK)[0, 0]
    out, theirs = out.cpu(), theirs.cpu()
    if (problem := difference(out, theirs)) is not None:
        return problem + named_mistake(TRITON_MISTAKES, out, inputs), 0.0
    return None, largest(out, theirs)


def _softmax_attention_scaled(q, k, v, scale):
    return torch.softmax(q @ k.T * scale, dim=-1) @ v


# The Triton piece's mistakes, which _triton_online_softmax names itself (a property piece runs its own check)
TRITON_MISTAKES = (("not rescaling the running sum and accumulator when the maximum grows",
                    lambda q, k, v: _online_variant(q, k, v, TRITON_BLOCK, rescale=False)),
                   ("tl.exp instead of tl.exp2 (qk_scale holds log2(e): the scores are in base 2)",
                    lambda q, k, v: _softmax_attention_scaled(q, k, v, LOG2E / math.sqrt(q.shape[-1]))),
                   ("leaving out qk_scale",
                    lambda q, k, v: _softmax_attention_scaled(q, k, v, 1 / LOG2E)))


# ------------------------------------------------------------------ lessons 08 and 09
def _cross_inputs(g, trial):
    head = nn.Linear(CHECK_CONFIG.hidden_size, 2)
    with torch.no_grad():
        head.weight.copy_(randn(g, 2, CHECK_CONFIG.hidden_size))
        head.bias.copy_(randn(g, 2) * (trial + 1))          # a bias that grows: a head leaning to one class
    return head, randn(g, 64, CHECK_CONFIG.hidden_size), torch.randint(0, 2, (64,), generator=g)


def _flipped_classes(head, pooled, labels):
    accuracy, share_1 = head_on_pairs(head, pooled, labels)
    return 1 - accuracy, 1 - share_1


def _share_of_class_0(head, pooled, labels):
    accuracy, share_1 = head_on_pairs(head, pooled, labels)
    return accuracy, 1 - share_1


def _table2_configs(g, trial):
    """Trial 0: BERT-large (nothing shared, no projection); 1: ALBERT-xxlarge (all shared); 2: a random small
    config sharing only attention or only the FFN."""
    if trial < 2:
        return (AlbertConfig.preset(("bert-large", "albert-xxlarge")[trial]),)
    sharing = ("attention", "ffn")[int(torch.randint(0, 2, (1,), generator=g))]
    E, heads, L = (int(x) for x in torch.randint(2, 9, (3,), generator=g))
    return (AlbertConfig(vocab_size=int(torch.randint(50, 500, (1,), generator=g)), embedding_size=E * 4,
                         hidden_size=heads * 8, num_layers=L, num_heads=heads, intermediate_size=heads * 32,
                         sharing=sharing),)


def _layer_parameters(cfg: AlbertConfig) -> int:
    """One layer's attention and FFN parameters, as costs.parameter_breakdown counts them."""
    H, F_ = cfg.hidden_size, cfg.intermediate_size
    return 4 * (H * H + H) + 2 * H + 2 * H * F_ + F_ + H + 2 * H


def _every_layer_stored(cfg: AlbertConfig) -> int:
    parts = parameter_breakdown(cfg)
    return sum(parts.values()) - parts["attention"] - parts["ffn"] + cfg.num_layers * _layer_parameters(cfg)


def _without_position_tables(cfg: AlbertConfig) -> int:
    return count_parameters(cfg) - (cfg.max_position_embeddings + cfg.type_vocab_size) * cfg.embedding_size


def _unfactorized(cfg: AlbertConfig) -> int:
    parts = parameter_breakdown(cfg)
    V, P, T, H = cfg.vocab_size, cfg.max_position_embeddings, cfg.type_vocab_size, cfg.hidden_size
    return sum(parts.values()) - parts["embeddings"] - parts["projection"] + (V + P + T) * H + 2 * H


PIECES = (
    # lesson 06
    Piece("layer_transition", "function", transition, _transition_inputs,
          mistakes=(("1 - cosine instead of the angle in degrees", _cosine_distance),
                    ("the angle in radians",
                     lambda b, a: (transition(b, a)[0], torch.deg2rad(transition(b, a)[1]))))),
    # lesson 07
    Piece("classifier", "module", lambda cfg: AlbertForSequenceClassification(cfg, 3).eval(),
          _classifier_inputs, build=lambda cls, cfg, ref: cls(cfg, 3), output=lambda out: out.logits,
          mistakes=(("reading [CLS]'s last hidden state without the pooler (dense + tanh)", _unpooled),)),
    # lesson 08
    Piece("cross_evaluation", "function", head_on_pairs, _cross_inputs,
          mistakes=(("reading the head's class 1 as the other task's class 0 (the classes crossed)",
                     _flipped_classes),
                    ("the share of pairs put in class 0 instead of class 1", _share_of_class_0))),
    # lesson 09
    Piece("table2_parameters", "function", count_parameters, _table2_configs,
          mistakes=(("storing every layer's weights although they are shared", _every_layer_stored),
                    ("leaving out the position and token-type tables", _without_position_tables),
                    ("a V x H embedding table, as if E = H (no factorization)", _unfactorized))),
    # lesson 10
    Piece("online_softmax", "function", _full_softmax_attention, _online_inputs,
          mistakes=(("not rescaling the running sum and accumulator when the maximum grows",
                     lambda *a: _online_variant(*a, rescale=False)),
                    ("not dividing the accumulator by the running sum at the end",
                     lambda *a: _online_variant(*a, normalise=False)))),
    Piece("online_softmax_triton", "property", _triton_online_softmax, lambda g, trial: (),
          mistakes=TRITON_MISTAKES),
)
