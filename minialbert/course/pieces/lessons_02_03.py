"""Lessons 02 and 03's pieces: the model itself (embedding, heads, attention, the shared layer, the losses),
each with its random inputs and the mistakes worth naming."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ...model import (
    Encoder,
    FactorizedEmbedding,
    MaskedLMHead,
    TransformerLayer,
    math_attention,
    merge_heads,
    split_heads,
)
from .checking import CHECK_CONFIG, Piece, padded_keys, randn, randomize


def _attention_inputs(g, trial):
    B, h, N, d = 3, 2, 5, 4
    return randn(g, B, h, N, d), randn(g, B, h, N, d), randn(g, B, h, N, d), padded_keys(g, B, N)


def _attention_variant(q, k, v, attend, scale=True, mask=True, dim=-1, change=lambda scores: scores):
    """The package's attention with one thing changed (`change`: a function of the scaled scores)."""
    scores = change(q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0))
    if mask:
        scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=dim) @ v


def _layer_inputs(g, trial):
    H = CHECK_CONFIG.hidden_size
    return randn(g, 3, 5, H), padded_keys(g, 3, 5)


def _layer_variant(layer: TransformerLayer, x, attend, pre_ln=False, act="tanh", residual=True):
    """The package's layer computed by hand, with one thing changed."""
    a, f = layer.attention, layer.feed_forward
    norm_in = (lambda t, ln: ln(t)) if pre_ln else (lambda t, ln: t)
    norm_out = (lambda t, ln: t) if pre_ln else (lambda t, ln: ln(t))
    q, k, v = (split_heads(t, a.num_heads) for t in a.qkv(norm_in(x, a.LayerNorm)).chunk(3, dim=-1))
    context = a.dense(merge_heads(math_attention(q, k, v, attend)))
    x = norm_out(x * residual + context, a.LayerNorm)
    gelu = (lambda t: F.gelu(t, approximate="tanh")) if act == "tanh" else F.gelu
    return norm_out(x * residual + f.ffn_output(gelu(f.ffn(norm_in(x, f.LayerNorm)))), f.LayerNorm)


def _mlm_head_variant(head: MaskedLMHead, x, act="tanh", norm=True):
    gelu = (lambda t: F.gelu(t, approximate="tanh")) if act == "tanh" else F.gelu
    y = gelu(head.dense(x))
    return (head.LayerNorm(y) if norm else y) @ head.decoder_weight.T + head.bias


def _embedding_inputs(g, trial):
    cfg = CHECK_CONFIG
    ids = torch.randint(0, cfg.vocab_size, (3, 7), generator=g)
    types = torch.randint(0, cfg.type_vocab_size, (3, 7), generator=g)
    return ids, types


def _embedding_parameters(V: int, E: int, H: int) -> int:
    """The package's count: the word table and the E -> H projection of a FactorizedEmbedding."""
    with torch.device("meta"):
        emb = FactorizedEmbedding(CHECK_CONFIG.replace(vocab_size=V, embedding_size=E, hidden_size=H,
                                                       num_heads=1))
    return emb.word_embeddings.weight.numel() + sum(p.numel() for p in emb.projection.parameters())


def _sentence_loss_inputs(g, trial):
    head = nn.Linear(CHECK_CONFIG.hidden_size, 2)
    randomize(head, g)
    return randn(g, 4, CHECK_CONFIG.hidden_size), torch.randint(0, 2, (4,), generator=g), head


def _sentence_loss(pooled, labels, head):
    """What AlbertForPretraining adds to the MLM loss: cross-entropy of the head's two scores."""
    return F.cross_entropy(head(pooled).float(), labels)


PIECES = (
    Piece("embedding_parameters", "function", _embedding_parameters,
          lambda g, trial: tuple(int(n) for n in torch.randint(2, 300, (3,), generator=g)),
          mistakes=(("V x H, the table without factorization", lambda V, E, H: V * H),
                    ("V x E + E x H without the projection's H biases", lambda V, E, H: V * E + E * H))),
    Piece("factorized_embedding", "module", lambda cfg: FactorizedEmbedding(cfg).eval(), _embedding_inputs),
    Piece("split_heads", "function", split_heads, lambda g, trial: (randn(g, 2, 5, 12), 3),
          mistakes=(("reshaping to (B, h, N, d) directly instead of (B, N, h, d) then transposing",
                     lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)),)),
    Piece("merge_heads", "function", merge_heads, lambda g, trial: (randn(g, 2, 3, 5, 4),),
          mistakes=(("reshaping (B, h, N, d) to (B, N, H) without transposing h and N back first",
                     lambda x: x.reshape(x.shape[0], x.shape[2], -1)),)),
    Piece("attention", "function", math_attention, _attention_inputs,
          mistakes=(("leaving out the 1/sqrt(d) scale", lambda *a: _attention_variant(*a, scale=False)),
                    ("not masking the padded keys", lambda *a: _attention_variant(*a, mask=False)),
                    ("a softmax over the queries (dim=-2) instead of the keys",
                     lambda *a: _attention_variant(*a, dim=-2))),
          sizes=lambda q, k, v, attend: {"d": q.shape[-1]},
          inner=(("the scores", lambda change, *a: _attention_variant(*a, change=change)),)),
    Piece("layer", "module", lambda cfg: TransformerLayer(cfg).eval(), _layer_inputs,
          rename=(("attention.LayerNorm.", "attention_norm."), ("attention.", ""),
                  ("feed_forward.LayerNorm.", "ffn_norm."), ("feed_forward.", "")),
          mistakes=(("a pre-LN layer (LayerNorm before each block) instead of post-LN",
                     lambda ref, *a: _layer_variant(ref, *a, pre_ln=True)),
                    ("the exact erf GELU instead of ALBERT's tanh approximation",
                     lambda ref, *a: _layer_variant(ref, *a, act="erf")),
                    ("leaving out the residual connections",
                     lambda ref, *a: _layer_variant(ref, *a, residual=False)))),
    Piece("shared_encoder", "module", lambda cfg: Encoder(cfg).eval(), _layer_inputs,
          rename=(("groups.0.0.", "layer."),),
          output=lambda out: out[0],
          mistakes=(("applying the layer once instead of num_layers times",
                     lambda ref, x, attend: ref.groups[0][0](x, attend)),)),
    Piece("mlm_head", "module",
          lambda cfg: MaskedLMHead(cfg, nn.Embedding(cfg.vocab_size, cfg.embedding_size)).eval(),
          lambda g, trial: (randn(g, 3, 5, CHECK_CONFIG.hidden_size),),
          build=lambda cls, cfg, ref: cls(cfg, nn.Embedding(cfg.vocab_size, cfg.embedding_size)),
          rename=(("decoder_weight", "word_embeddings.weight"),),
          mistakes=(("the exact erf GELU instead of the tanh approximation",
                     lambda ref, x: _mlm_head_variant(ref, x, act="erf")),
                    ("leaving out the LayerNorm(E)", lambda ref, x: _mlm_head_variant(ref, x, norm=False)))),
    Piece("sentence_loss", "function", _sentence_loss, _sentence_loss_inputs,
          mistakes=(("the loss summed over the batch instead of averaged",
                     lambda p, y, head: F.cross_entropy(head(p), y, reduction="sum")),)),
)
