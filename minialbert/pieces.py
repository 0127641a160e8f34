"""The pieces a learner writes, each checked against the package's own version.

A lesson has the learner write a core piece of ALBERT (a function, or the forward of an nn.Module
whose __init__ the lesson gives) between solution markers; the next cell calls `check`:

    check("attention", attention)
    attention: right: matches the package on 3 random inputs (largest difference 1.2e-07)
    attention: wrong: values differ at [0, 1, 2, 0]: yours 0.4178, the package's 0.3012 (48 of 120
               values differ, by up to 0.29); that is what leaving out the 1/sqrt(d) scale gives
    attention: not written yet; the rest of the lesson uses the package's version

The learner's piece and the package's run on the same random inputs (module pieces with the same
random weights, compared on outputs and on every parameter's gradient); the verdict is one line
naming what differs: the shape, the first differing position, a parameter's name, or a known
mistake the output matches. `check` never raises, so a wrong or missing piece never stops a lesson:
the lesson goes on with the package's version. It returns whether the piece is right.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import AlbertConfig
from .model import (
    Encoder,
    FactorizedEmbedding,
    MaskedLMHead,
    TransformerLayer,
    math_attention,
    merge_heads,
    split_heads,
)

# A small model for the checks: every size different, so a swapped dimension shows as a wrong shape.
CHECK_CONFIG = AlbertConfig(vocab_size=50, embedding_size=6, hidden_size=12, num_layers=3, num_heads=3,
                            intermediate_size=20, max_position_embeddings=16)
TRIALS = 3                 # random inputs per check
ATOL, RTOL = 1e-5, 1e-4    # float32 differences below these are rounding


@dataclass(frozen=True)
class Piece:
    """One piece: the package's version, random inputs for it, and the mistakes worth naming.

    function pieces: reference(*inputs) is the package's output; the learner's fn(*inputs) must match.
    module pieces: reference(cfg) builds the package's module; build(cls, cfg, package_module) builds
    the learner's; both get the same (randomised) weights, matched by name through `rename`
    (package prefix -> learner prefix), and must match in outputs and gradients.
    mistakes: (what the mistake is, a function of the same arguments as the reference giving the
    output it produces); a wrong output that matches one is named.
    """

    name: str
    kind: str                                            # function | module
    reference: Callable
    inputs: Callable[[torch.Generator], tuple]
    mistakes: tuple = ()
    build: Callable | None = None
    rename: tuple = ()
    output: Callable = staticmethod(lambda out: out)      # the package module's output -> the tensor compared


def _randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def _padded_keys(g: torch.Generator, B: int, N: int) -> torch.Tensor:
    """(B, 1, 1, N) bool: row b attends to its first N - b keys (row 0 unpadded)."""
    lengths = torch.tensor([max(1, N - b) for b in range(B)])
    return (torch.arange(N)[None] < lengths[:, None])[:, None, None, :]


# ------------------------------------------------------------------ the package's pieces and their inputs
def _attention_inputs(g):
    B, h, N, d = 3, 2, 5, 4
    return _randn(g, B, h, N, d), _randn(g, B, h, N, d), _randn(g, B, h, N, d), _padded_keys(g, B, N)


def _attention_variant(q, k, v, attend, scale=True, mask=True, dim=-1):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    if mask:
        scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=dim) @ v


def _layer_inputs(g):
    H = CHECK_CONFIG.hidden_size
    return _randn(g, 3, 5, H), _padded_keys(g, 3, 5)


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


def _embedding_inputs(g):
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


def _sentence_loss_inputs(g):
    head = nn.Linear(CHECK_CONFIG.hidden_size, 2)
    _randomize(head, g)
    return _randn(g, 4, CHECK_CONFIG.hidden_size), torch.randint(0, 2, (4,), generator=g), head


def _sentence_loss(pooled, labels, head):
    """What AlbertForPretraining adds to the MLM loss: cross-entropy of the head's two scores."""
    return F.cross_entropy(head(pooled).float(), labels)


PIECES: dict[str, Piece] = {p.name: p for p in (
    Piece("embedding_parameters", "function", _embedding_parameters,
          lambda g: tuple(int(n) for n in torch.randint(2, 300, (3,), generator=g)),
          mistakes=(("V x H, the table without factorization", lambda V, E, H: V * H),
                    ("V x E + E x H without the projection's H biases", lambda V, E, H: V * E + E * H))),
    Piece("factorized_embedding", "module", lambda cfg: _eval(FactorizedEmbedding(cfg)), _embedding_inputs,
          build=lambda cls, cfg, ref: cls(cfg)),
    Piece("split_heads", "function", split_heads, lambda g: (_randn(g, 2, 5, 12), 3),
          mistakes=(("reshaping to (B, h, N, d) directly instead of (B, N, h, d) then transposing",
                     lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)),)),
    Piece("merge_heads", "function", merge_heads, lambda g: (_randn(g, 2, 3, 5, 4),),
          mistakes=(("reshaping (B, h, N, d) to (B, N, H) without transposing h and N back first",
                     lambda x: x.reshape(x.shape[0], x.shape[2], -1)),)),
    Piece("attention", "function", math_attention, _attention_inputs,
          mistakes=(("leaving out the 1/sqrt(d) scale", lambda *a: _attention_variant(*a, scale=False)),
                    ("not masking the padded keys", lambda *a: _attention_variant(*a, mask=False)),
                    ("a softmax over the queries (dim=-2) instead of the keys",
                     lambda *a: _attention_variant(*a, dim=-2)))),
    Piece("layer", "module", lambda cfg: _eval(TransformerLayer(cfg)), _layer_inputs,
          build=lambda cls, cfg, ref: cls(cfg),
          rename=(("attention.LayerNorm.", "attention_norm."), ("attention.", ""),
                  ("feed_forward.LayerNorm.", "ffn_norm."), ("feed_forward.", "")),
          mistakes=(("a pre-LN layer (LayerNorm before each block) instead of post-LN",
                     lambda ref, *a: _layer_variant(ref, *a, pre_ln=True)),
                    ("the exact erf GELU instead of ALBERT's tanh approximation",
                     lambda ref, *a: _layer_variant(ref, *a, act="erf")),
                    ("leaving out the residual connections",
                     lambda ref, *a: _layer_variant(ref, *a, residual=False)))),
    Piece("shared_encoder", "module", lambda cfg: _eval(Encoder(cfg)), _layer_inputs,
          build=lambda cls, cfg, ref: cls(cfg), rename=(("groups.0.0.", "layer."),),
          output=lambda out: out[0],
          mistakes=(("applying the layer once instead of num_layers times",
                     lambda ref, x, attend: ref.groups[0][0](x, attend)),)),
    Piece("mlm_head", "module", lambda cfg: _eval(MaskedLMHead(cfg, nn.Embedding(cfg.vocab_size,
                                                                                cfg.embedding_size))),
          lambda g: (_randn(g, 3, 5, CHECK_CONFIG.hidden_size),),
          build=lambda cls, cfg, ref: cls(cfg, nn.Embedding(cfg.vocab_size, cfg.embedding_size)),
          rename=(("decoder_weight", "word_embeddings.weight"),),
          mistakes=(("the exact erf GELU instead of the tanh approximation",
                     lambda ref, x: _mlm_head_variant(ref, x, act="erf")),
                    ("leaving out the LayerNorm(E)", lambda ref, x: _mlm_head_variant(ref, x, norm=False)))),
    Piece("sentence_loss", "function", _sentence_loss, _sentence_loss_inputs,
          mistakes=(("the loss summed over the batch instead of averaged",
                     lambda p, y, head: F.cross_entropy(head(p), y, reduction="sum")),)),
)}


def _eval(module: nn.Module) -> nn.Module:
    return module.eval()


def _randomize(module: nn.Module, g: torch.Generator) -> None:
    """Every parameter random (LayerNorm scales and biases too), so that no mix-up hides behind 1s and 0s."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)


# ------------------------------------------------------------------ comparing
def difference(yours, theirs) -> str | None:
    """None when `yours` matches the package's output `theirs`, else what differs, in words."""
    if isinstance(theirs, torch.Tensor):
        if not isinstance(yours, torch.Tensor):
            return f"it returns a {type(yours).__name__}, the package's returns a tensor"
        if tuple(yours.shape) != tuple(theirs.shape):
            return f"shape {tuple(yours.shape)}, the package's is {tuple(theirs.shape)}"
        yours, theirs = yours.detach().double(), theirs.detach().double()
        off = ~torch.isclose(yours, theirs, rtol=RTOL, atol=ATOL, equal_nan=True)
        if not off.any():
            return None
        at = [int(i) for i in off.nonzero()[0]]
        return (f"values differ at {at}: yours {yours[tuple(at)].item():.4g}, the package's "
                f"{theirs[tuple(at)].item():.4g} ({int(off.sum())} of {off.numel()} values differ, by up to "
                f"{(yours - theirs).abs().nan_to_num(math.inf).max().item():.2g})")
    if yours != theirs:
        return f"yours gives {yours!r}, the package's {theirs!r}"
    return None


def _largest(yours, theirs) -> float:
    if not isinstance(theirs, torch.Tensor) or not theirs.numel():
        return 0.0
    return (yours.detach().double() - theirs.detach().double()).abs().max().item()


def _learner_name(name: str, rename: tuple) -> str:
    """A package parameter's name as the learner's module calls it."""
    for old, new in rename:
        if name.startswith(old):
            return new + name[len(old):]
    return name


def _load_package_weights(mine: nn.Module, package: nn.Module, rename: tuple) -> str | None:
    """Copy the package module's weights into the learner's by name; None, or what does not fit."""
    theirs = {_learner_name(n, rename): p for n, p in package.named_parameters()}
    yours = dict(mine.named_parameters())
    if missing := sorted(set(theirs) - set(yours)):
        return (f"your module has no parameter {', '.join(missing)} "
                f"(its parameters: {', '.join(yours) or 'none'})")
    if extra := sorted(set(yours) - set(theirs)):
        return f"your module has parameters the package's has not: {', '.join(extra)}"
    for name, p in theirs.items():
        if yours[name].shape != p.shape:
            return f"parameter {name} has shape {tuple(yours[name].shape)}, the package's {tuple(p.shape)}"
    with torch.no_grad():
        for name, p in theirs.items():
            yours[name].copy_(p)
    return None


def _trial_function(piece: Piece, fn: Callable, g: torch.Generator) -> tuple[str | None, float, tuple]:
    inputs = piece.inputs(g)
    theirs = piece.reference(*inputs)
    yours = fn(*inputs)
    problem = difference(yours, theirs)
    return problem, 0.0 if problem else _largest(yours, theirs), (yours, inputs, None)


def _trial_module(piece: Piece, cls: type, g: torch.Generator) -> tuple[str | None, float, tuple]:
    package = piece.reference(CHECK_CONFIG)
    _randomize(package, g)
    mine = piece.build(cls, CHECK_CONFIG, package)
    if not isinstance(mine, nn.Module):
        return f"it builds a {type(mine).__name__}, not an nn.Module", 0.0, (None, (), package)
    if (problem := _load_package_weights(mine, package, piece.rename)) is not None:
        return problem, 0.0, (None, (), package)
    mine.eval()
    inputs = piece.inputs(g)
    theirs, yours = piece.output(package(*inputs)), mine(*inputs)
    if (problem := difference(yours, theirs)) is not None:
        return problem, 0.0, (yours, inputs, package)
    weights = _randn(g, *theirs.shape)                      # a random loss, so every gradient is tested
    (theirs * weights).sum().backward()
    (yours * weights).sum().backward()
    mine_params = dict(mine.named_parameters())
    for name, p in package.named_parameters():
        name = _learner_name(name, piece.rename)
        if (g_yours := mine_params[name].grad) is None:
            problem = f"parameter {name} gets no gradient: the output does not use it"
        else:
            problem = difference(g_yours, p.grad)
            problem = problem and f"the outputs agree but the gradient of {name} differs: {problem}"
        if problem:
            return problem, 0.0, (None, (), package)
    return None, _largest(yours, theirs), (yours, inputs, package)


def _named_mistake(piece: Piece, yours, inputs: tuple, package) -> str:
    if yours is None:
        return ""
    for what, variant in piece.mistakes:
        with torch.no_grad():
            wrong = variant(package, *inputs) if piece.kind == "module" else variant(*inputs)
        if difference(yours, wrong) is None:
            return f"; that is what {what} gives"
    return ""


def check(name: str, yours, trials: int = TRIALS, seed: int = 0) -> bool:
    """Check the learner's piece against the package's on `trials` random inputs and print one line.

    Never raises for what the learner wrote (a missing piece, an exception, a wrong shape or value):
    the verdict says it. Returns True when the piece is right.
    """
    if name not in PIECES:
        raise ValueError(f"unknown piece {name!r}; the pieces: {', '.join(PIECES)}")
    piece = PIECES[name]
    g = torch.Generator().manual_seed(seed)
    trial = _trial_module if piece.kind == "module" else _trial_function
    largest = 0.0
    for _ in range(trials):
        try:
            problem, diff, (output, inputs, package) = trial(piece, yours, g)
        except NotImplementedError as e:
            print(f"{name}: not written yet ({e}); the rest of the lesson uses the package's version")
            return False
        except Exception as e:                    # the learner's code failed: say how, in one line
            message = str(e).splitlines()[0] if str(e) else ""
            print(f"{name}: wrong: your code raised {type(e).__name__}: {message}; the rest of the lesson "
                  "uses the package's version")
            return False
        if problem is not None:
            print(f"{name}: wrong: {problem}{_named_mistake(piece, output, inputs, package)}")
            return False
        largest = max(largest, diff)
    print(f"{name}: right: matches the package on {trials} random inputs (largest difference {largest:.1g})")
    return True
