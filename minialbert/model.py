"""ALBERT in one file: factorized embeddings, attention, the post-LN layer, a shared encoder, heads.

Read top to bottom. Shapes: B batch, N sequence length, E embedding size, H hidden size,
h heads, d = H / h head dim, V vocabulary, M number of masked (predicted) positions.
With sharing="none", embedding_size == hidden_size and embedding_projection=False this is BERT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import IGNORE_INDEX, OBJECTIVES, AlbertConfig


def activation(name: str):
    if name == "gelu_new":   # tanh approximation of GELU (HF's gelu_new): ALBERT, and Google's BERT code
        return lambda x: F.gelu(x, approximate="tanh")
    if name == "gelu":       # exact erf GELU: transformers' BERT
        return F.gelu
    return F.relu


class FactorizedEmbedding(nn.Module):
    """Token + position + type embeddings of width E, LayerNorm(E), then a projection E -> H.

    The paper's first idea: a V x E table plus an E x H matrix instead of a V x H table.
    """

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        E = cfg.embedding_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, E, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
        # BERT has no projection; HF ALBERT checkpoints keep one even when E == H.
        self.projection = nn.Linear(E, cfg.hidden_size) if cfg.embedding_projection else nn.Identity()

    def forward(self, input_ids, token_type_ids):       # (B, N) ids -> (B, N, H)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(token_type_ids))                  # (B, N, E)
        return self.projection(self.dropout(self.LayerNorm(x)))             # (B, N, H)


def split_heads(x, num_heads: int):
    """(B, N, H) -> (B, h, N, d): each head reads its own d = H / h slice of every vector."""
    B, N, H = x.shape
    return x.view(B, N, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x):
    """(B, h, N, d) -> (B, N, H): the heads' outputs side by side again (split_heads undone)."""
    B, h, N, d = x.shape
    return x.transpose(1, 2).reshape(B, N, h * d)


def math_attention(q, k, v, attend, key_lengths=None, dropout_p: float = 0.0):
    """softmax(q k^T / sqrt(d)) v, written out for teaching. attend: (B, 1, 1, N) bool, True = key is real."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])               # (B, h, N, N)
    scores = scores.masked_fill(~attend, torch.finfo(scores.dtype).min)     # padded keys get ~0 weight
    probs = F.dropout(scores.softmax(dim=-1), p=dropout_p)
    return probs @ v                                                        # (B, h, N, d)


def sdpa_attention(q, k, v, attend, key_lengths=None, dropout_p: float = 0.0):
    """The same, by PyTorch's fused scaled_dot_product_attention (flash or memory-efficient kernels)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attend, dropout_p=dropout_p)


def triton_attention(version: int | None = None):
    """The course's Triton kernel (kernels/), which reads the key lengths instead of the mask: it skips the
    padded keys' tiles. `version`: the kernel's own setting (kernels.VERSIONS; None: its DEFAULT_VERSION).
    Imported only when asked for, so a missing Triton fails when the model is built."""
    from .kernels import DEFAULT_VERSION, VERSIONS, fused_attention

    version = DEFAULT_VERSION if version is None else version
    if version not in VERSIONS:
        raise ValueError(f"kernel version must be one of {VERSIONS}, got {version!r}")

    def attention(q, k, v, attend, key_lengths=None, dropout_p: float = 0.0):   # config refuses dropout
        if key_lengths is None:                   # a layer called alone: the lengths of its right-padded mask
            key_lengths = attend.sum(dim=-1, dtype=torch.int32).flatten()
        return fused_attention(q, k, v, key_lengths=key_lengths, check_lengths=False, version=version)
    attention.kernel_version = version
    return attention


# attention_backend -> the attention function: each takes (q, k, v, attend, key_lengths, dropout_p) and
# returns (B, h, N, d). A model binds one when it is built; its forward tests no name.
ATTENTION = {"math": lambda: math_attention, "sdpa": lambda: sdpa_attention, "triton": triton_attention}


def use_kernel_version(model: nn.Module, version: int) -> nn.Module:
    """Every attention layer of `model`, built with attention_backend="triton", rebound to version `version`
    of the kernel (kernels/attention.py: 1, the split backward; 2, the fused one). Which kernel runs is a
    setting of the kernel, not of the model's config. Returns the model."""
    layers = [m for m in model.modules() if isinstance(m, SelfAttention)]
    if not layers or not all(hasattr(m.attention_fn, "kernel_version") for m in layers):
        raise ValueError("use_kernel_version needs a model built with attention_backend='triton'")
    attention = triton_attention(version)
    for layer in layers:
        layer.attention_fn = attention
    return model


class SelfAttention(nn.Module):
    """Multi-head self-attention over a padded batch, with its output projection and post-LN."""

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        H = cfg.hidden_size
        self.num_heads, self.dropout_p = cfg.num_heads, cfg.attention_dropout_prob
        self.qkv = nn.Linear(H, 3 * H)              # query, key, value in one matmul
        self.dense = nn.Linear(H, H)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
        self.LayerNorm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.attention_fn = ATTENTION[cfg.attention_backend]()     # bound once, here

    def forward(self, x, attend, key_lengths=None):    # x: (B, N, H), attend: (B, 1, 1, N) bool, lengths (B,)
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))  # 3 x (B, h, N, d)
        context = self.attention_fn(q, k, v, attend, key_lengths, self.dropout_p if self.training else 0.0)
        context = merge_heads(context)                                      # (B, N, H)
        return self.LayerNorm(x + self.dropout(self.dense(context)))        # post-LN residual


class FeedForward(nn.Module):
    """Position-wise FFN H -> intermediate -> H with its residual and post-LN."""

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        self.ffn = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.ffn_output = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.dropout = nn.Dropout(cfg.hidden_dropout_prob)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x):                                                  # (B, N, H) -> (B, N, H)
        return self.LayerNorm(x + self.dropout(self.ffn_output(self.act(self.ffn(x)))))


class TransformerLayer(nn.Module):
    """One post-LN Transformer layer: attention block, then feed-forward block."""

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        self.attention = SelfAttention(cfg)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, attend, key_lengths=None):
        return self.feed_forward(self.attention(x, attend, key_lengths))


class Encoder(nn.Module):
    """num_layers applications of shared layers: the paper's second idea, cross-layer sharing.

    Parameters live in `groups[g][k]` (HF's num_hidden_groups x inner_group_num layout). Step i
    runs every layer of group i // (num_layers / num_hidden_groups). sharing="all" with one group
    reuses one layer everywhere; "none" gives each step its own layer; "attention" and "ffn" give
    each step its own layer but make all of them hold the very same attention (or FFN) module.
    """

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        self.num_layers = cfg.num_layers
        self.groups = nn.ModuleList(
            nn.ModuleList(TransformerLayer(cfg) for _ in range(cfg.inner_group_num))
            for _ in range(cfg.num_hidden_groups))
        first = self.groups[0][0]
        for group in self.groups[1:]:            # partial sharing: one module object, many places
            if cfg.sharing == "attention":
                group[0].attention = first.attention
            elif cfg.sharing == "ffn":
                group[0].feed_forward = first.feed_forward

    def group_of(self, step: int) -> int:
        return step * len(self.groups) // self.num_layers

    def forward(self, x, attend, key_lengths=None, output_hidden_states=False):
        hidden_states = [x]                      # input to layer 1, then every layer's output
        for step in range(self.num_layers):
            for layer in self.groups[self.group_of(step)]:
                x = layer(x, attend, key_lengths)
            if output_hidden_states:
                hidden_states.append(x)
        return x, (tuple(hidden_states) if output_hidden_states else None)


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor              # (B, N, H)
    pooled_output: torch.Tensor                  # (B, H): tanh(W h_[CLS] + b)
    hidden_states: tuple | None = None           # num_layers + 1 tensors of (B, N, H)


class AlbertModel(nn.Module):
    """The encoder: factorized embeddings, shared Transformer layers, and the [CLS] pooler."""

    def __init__(self, cfg: AlbertConfig):
        super().__init__()
        self.config = cfg
        self.embeddings = FactorizedEmbedding(cfg)
        self.encoder = Encoder(cfg)
        self.pooler = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_hidden_states=False):
        """input_ids, token_type_ids: (B, N) integer ids; attention_mask: (B, N) of 0 (padding) / 1.

        The inputs are not checked here: `inputs.check_batch` checks a batch where data enter (the
        datasets check theirs once, when they are loaded).
        A row whose mask is all zeros has no real token; it is treated as unpadded, so every backend
        gives the same finite (meaningless) output for it instead of NaN on some and not on others.
        """
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        empty = ~attention_mask.bool().any(dim=1, keepdim=True)            # (B, 1): rows with no real token
        attention_mask = attention_mask.bool() | empty
        attend = attention_mask[:, None, None, :]                           # (B, 1, 1, N)
        key_lengths = attention_mask.sum(dim=1, dtype=torch.int32)          # (B,): right-padded batches
        x = self.embeddings(input_ids, token_type_ids)                      # (B, N, H)
        x, hidden_states = self.encoder(x, attend, key_lengths, output_hidden_states)
        pooled = torch.tanh(self.pooler(x[:, 0]))                           # (B, H)
        return EncoderOutput(x, pooled, hidden_states)


class MaskedLMHead(nn.Module):
    """H -> E transform, then a decoder E -> V tied to the word embeddings (plus its own bias)."""

    def __init__(self, cfg: AlbertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.embedding_size)
        self.act = activation(cfg.hidden_act)
        self.LayerNorm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.decoder_weight = word_embeddings.weight     # tied: the same Parameter object
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, x):                                 # (..., H) -> (..., V)
        return F.linear(self.LayerNorm(self.act(self.dense(x))), self.decoder_weight, self.bias)


@dataclass
class PretrainingOutput:
    loss: torch.Tensor | None                    # mlm_loss + sentence_loss (those that were given)
    mlm_logits: torch.Tensor                     # (M, V) at labelled positions if mlm_labels given,
                                                 # else (B, N, V)
    sentence_logits: torch.Tensor | None         # (B, 2) for SOP / NSP
    pooled_output: torch.Tensor
    last_hidden_state: torch.Tensor
    hidden_states: tuple | None = None
    mlm_loss: torch.Tensor | None = None         # summed over the M predicted positions / predicted_tokens
    sentence_loss: torch.Tensor | None = None    # summed over the B examples / examples


class AlbertForPretraining(nn.Module):
    """Encoder + masked-LM head + a 2-way sentence head (SOP for ALBERT, NSP for BERT, or none)."""

    def __init__(self, cfg: AlbertConfig, sentence_task: str | None = "sop"):
        super().__init__()
        if sentence_task not in OBJECTIVES.values():
            raise ValueError(f"unknown sentence_task {sentence_task!r}; choose 'sop', 'nsp' or None")
        self.config, self.sentence_task = cfg, sentence_task
        self.albert = AlbertModel(cfg)
        self.mlm_head = MaskedLMHead(cfg, self.albert.embeddings.word_embeddings)
        self.sentence_head = None
        if sentence_task is not None:          # dropout first, as transformers' AlbertSOPHead; the official
            # run_pretraining.py head has none (classifier_dropout_prob=0.0 builds the official one)
            self.sentence_head = nn.Sequential(nn.Dropout(cfg.classifier_dropout_prob),
                                               nn.Linear(cfg.hidden_size, 2))
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_labels=None,
                sentence_labels=None, output_hidden_states=False, predicted_tokens=None,
                examples=None) -> PretrainingOutput:
        """The losses are means: summed cross-entropies divided by predicted_tokens (the predicted
        positions) and by examples. Both default to this batch's counts; a trainer that splits its global
        batch into micro-batches, or over processes, passes the global batch's counts, so that the
        micro-batches' losses add up to the global batch's loss (train.train_step)."""
        if sentence_labels is not None and self.sentence_head is None:
            raise ValueError("sentence_labels given to a model built without a sentence head "
                             "(sentence_task=None); build it with sentence_task='sop' or 'nsp'")
        enc = self.albert(input_ids, token_type_ids, attention_mask, output_hidden_states)
        x = enc.last_hidden_state
        mlm_loss = sentence_loss = sentence_logits = None
        if mlm_labels is not None:
            # The original TF trick: vocabulary logits only where something is predicted
            # (about 15% of positions), which saves most of the E x V decoder's work.
            is_predicted = mlm_labels != IGNORE_INDEX                       # (B, N) bool
            predicted = is_predicted.nonzero(as_tuple=True)                 # 2 x (M,): one read of M
            mlm_logits = self.mlm_head(x[predicted])                        # (M, V)
            if predicted_tokens is None:
                predicted_tokens = is_predicted.sum().clamp(min=1)          # 0 when nothing is predicted
            mlm_loss = F.cross_entropy(mlm_logits.float(), mlm_labels[predicted],
                                       reduction="sum") / predicted_tokens
        else:
            mlm_logits = self.mlm_head(x)                                   # (B, N, V)
        if self.sentence_head is not None:
            sentence_logits = self.sentence_head(enc.pooled_output)          # (B, 2)
            if sentence_labels is not None:
                sentence_loss = F.cross_entropy(sentence_logits.float(), sentence_labels, reduction="sum") / (
                    sentence_labels.shape[0] if examples is None else examples)
        losses = [t for t in (mlm_loss, sentence_loss) if t is not None]
        loss = sum(losses) if losses else None
        return PretrainingOutput(loss, mlm_logits, sentence_logits, enc.pooled_output, x,
                                 enc.hidden_states, mlm_loss, sentence_loss)


@dataclass
class ClassificationOutput:
    loss: torch.Tensor | None            # cross-entropy (classification) or MSE (regression), if labels given
    logits: torch.Tensor                 # (B, num_labels)
    pooled_output: torch.Tensor          # (B, H): what the head reads


class AlbertForSequenceClassification(nn.Module):
    """Encoder + dropout + Linear(H, num_labels) on the pooled [CLS] output (single sentences or pairs).

    transformers' layout (AlbertForSequenceClassification / BertForSequenceClassification).
    num_labels=1 is regression (mean squared error on a float target, STS-B style); more labels is
    classification (cross-entropy).
    """

    def __init__(self, cfg: AlbertConfig, num_labels: int):
        super().__init__()
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
            raise ValueError(f"num_labels must be an integer >= 1 (1 = regression), got {num_labels!r}")
        self.config, self.num_labels = cfg, num_labels
        self.albert = AlbertModel(cfg)
        self.dropout = nn.Dropout(cfg.classifier_dropout_prob)
        self.classifier = nn.Linear(cfg.hidden_size, num_labels)
        self.apply(lambda m: init_weights(m, cfg.initializer_range))

    @classmethod
    def from_pretraining(cls, pretrained: AlbertForPretraining,
                         num_labels: int) -> AlbertForSequenceClassification:
        """Transfer: the pretrained encoder (embeddings, layers, pooler) under a new, freshly initialised
        head. The MLM and SOP/NSP heads are left behind."""
        model = cls(pretrained.config, num_labels)
        model.albert.load_state_dict(pretrained.albert.state_dict())
        return model

    def forward(self, input_ids, token_type_ids=None, attention_mask=None,
                labels=None) -> ClassificationOutput:
        """input_ids, token_type_ids, attention_mask: (B, N); labels: (B,) int64 class ids, or float
        targets when num_labels == 1."""
        pooled = self.albert(input_ids, token_type_ids, attention_mask).pooled_output   # (B, H)
        logits = self.classifier(self.dropout(pooled))                                  # (B, num_labels)
        loss = None if labels is None else self.loss(logits, labels)
        return ClassificationOutput(loss, logits, pooled)

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if tuple(labels.shape) != tuple(logits.shape[:1]):
            raise ValueError(f"labels must have shape ({logits.shape[0]},), one per example, "
                             f"got {tuple(labels.shape)}")
        if self.num_labels == 1:                                     # regression
            return F.mse_loss(logits.float().squeeze(-1), labels.float())
        if labels.dtype != torch.int64:
            raise ValueError(f"classification labels must be int64 class ids, got {labels.dtype}")
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_labels):
            raise ValueError(f"labels must be in [0, {self.num_labels}), got values in "
                             f"[{int(labels.min())}, {int(labels.max())}]")
        return F.cross_entropy(logits.float(), labels)


def init_weights(module: nn.Module, std: float) -> None:
    """BERT/ALBERT initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm, zero padding row."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
