"""AlbertConfig: every size and switch of an ALBERT (or BERT) encoder, validated on creation.

One dataclass covers both models: BERT is ALBERT with `sharing="none"`, E = H and no E->H
projection. Presets hold the paper's Table 1 sizes and the small sizes this course trains.
The config is frozen, so a model always matches the config it was built from: change a field
with `cfg.replace(...)`, which validates again. An explicit num_hidden_groups survives it: on a
2-group config `cfg.replace(num_layers=6)` keeps 2 groups (3 layers each), and `cfg.replace(num_layers=5)`
is refused by name (2 does not divide 5), never silently changed to 1. Only a change of sharing to "all"
derives the groups afresh (1, unless you pass them): under any other sharing they were num_layers.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

SHARING = ("all", "attention", "ffn", "none")
MAX_INITIALIZER_RANGE = 1.0        # std of N(0, std) initial weights; the paper's models use 0.02
ACTIVATIONS = ("gelu_new", "gelu", "relu")
ATTENTION_BACKENDS = ("math", "sdpa", "triton")   # triton: its version is the kernel's (use_kernel_version)
# Pretraining objective -> the sentence head it trains: MLM alone, MLM + NSP (BERT), MLM + SOP (ALBERT).
# The one registry: data, model, training, CLI choices and the ablation's arms all read it.
OBJECTIVES = {"mlm": None, "nsp": "nsp", "sop": "sop"}
PAD_ID, UNK_ID, CLS_ID, SEP_ID, MASK_ID = 0, 1, 2, 3, 4   # the vocabulary's fixed special ids
IGNORE_INDEX = -100      # the MLM label of a position that is not predicted (cross_entropy's ignore_index)
POSITIVE_INTS = ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                 "intermediate_size", "max_position_embeddings", "type_vocab_size", "num_hidden_groups",
                 "inner_group_num")
PROBABILITIES = ("hidden_dropout_prob", "attention_dropout_prob", "classifier_dropout_prob")


@dataclass(frozen=True)
class AlbertConfig:
    vocab_size: int = 30000              # V: SentencePiece pieces
    embedding_size: int = 128            # E: width of token/position/type embeddings
    hidden_size: int = 768               # H: width of the Transformer layers
    num_layers: int = 12                 # how many times a layer is applied
    num_heads: int = 12                  # H / num_heads = head dim (64 in the paper)
    intermediate_size: int = 3072        # FFN width, 4H in the paper
    hidden_act: str = "gelu_new"         # gelu_new: tanh approximation (ALBERT, and Google's BERT code);
                                         # gelu: exact erf (transformers' BERT, which the BERT presets follow)
    hidden_dropout_prob: float = 0.0     # ALBERT v2 uses no dropout; BERT uses 0.1
    attention_dropout_prob: float = 0.0
    classifier_dropout_prob: float = 0.1  # dropout before the SOP/NSP classifier (as in HF)
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    sharing: str = "all"                 # all | attention | ffn | none (Table 4 of the paper)
    num_hidden_groups: int | None = None  # sharing="all" only (else num_layers): layer i uses group
                                          # i // (num_layers / groups), HF's layout;
    inner_group_num: int = 1             # each group holds inner_group_num distinct layers
    embedding_projection: bool = True    # E -> H linear map; BERT has none (E must equal H)
    attention_backend: str = "sdpa"      # math (explicit, for teaching) | sdpa (fused) | triton
    pad_token_id: int = 0

    def __post_init__(self) -> None:
        self._resolve_groups()
        self.validate()

    def _resolve_groups(self) -> None:
        """Derive num_hidden_groups: 1 for sharing="all" when unset; num_layers for any other sharing.

        Only sharing="all" has a choice of groups; with other sharing every layer is its own group,
        whatever value dataclasses.replace carried over from the config it copied.
        """
        if self.sharing != "all" and self.sharing in SHARING:
            object.__setattr__(self, "num_hidden_groups", self.num_layers)   # frozen: set once, here
        elif self.num_hidden_groups is None:
            object.__setattr__(self, "num_hidden_groups", 1)

    # ------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Raise ValueError naming the field and the fix for every impossible combination."""
        for name in POSITIVE_INTS + ("pad_token_id",):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (name != "pad_token_id"):
                kind = "a non-negative" if name == "pad_token_id" else "a positive"
                raise ValueError(f"{name} must be {kind} integer, got {value!r}")
        for name in PROBABILITIES:
            value = _real(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            if not 0 < _real(self, name) < math.inf:
                raise ValueError(f"{name} must be a finite positive number, got {getattr(self, name)!r}")
        if self.initializer_range > MAX_INITIALIZER_RANGE:
            raise ValueError(f"initializer_range {self.initializer_range!r} is the std of the initial "
                             f"weights: above {MAX_INITIALIZER_RANGE} the activations overflow (BERT and "
                             f"ALBERT use 0.02)")
        if not isinstance(self.embedding_projection, bool):
            raise ValueError(f"embedding_projection must be True or False, got {self.embedding_projection!r}")
        if self.pad_token_id >= self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id} must be a valid id below vocab_size "
                             f"{self.vocab_size}")
        if self.attention_backend == "triton-v2":
            raise ValueError("attention_backend 'triton-v2' is attention_backend='triton' with "
                             "model.use_kernel_version(model, 2): the kernel's version is its own setting")
        for name, allowed in (("sharing", SHARING), ("hidden_act", ACTIVATIONS),
                              ("attention_backend", ATTENTION_BACKENDS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; "
                                 f"choose one of {', '.join(allowed)}")
        if self.attention_backend == "triton" and self.attention_dropout_prob > 0:
            raise ValueError(f"attention_backend={self.attention_backend!r} has no attention dropout; set "
                             f"attention_dropout_prob=0 (got {self.attention_dropout_prob}) or use 'sdpa'")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not divisible by num_heads "
                             f"{self.num_heads}; pick num_heads dividing it (e.g. hidden_size // 64)")
        if self.num_layers % self.num_hidden_groups:
            raise ValueError(f"num_hidden_groups {self.num_hidden_groups} does not divide num_layers "
                             f"{self.num_layers}; use a divisor of num_layers")
        if self.sharing != "all" and self.inner_group_num != 1:
            raise ValueError(f"sharing={self.sharing!r} gives every layer its own group: leave "
                             f"inner_group_num=1; groups are an option of sharing='all'")
        if (self.sharing == "all" and self.num_layers > 1 and self.inner_group_num == 1
                and self.num_hidden_groups == self.num_layers):
            raise ValueError(f"sharing='all' with num_hidden_groups = num_layers = {self.num_layers} shares "
                             f"nothing; for one shared layer set num_hidden_groups=None (it derives 1), "
                             f"for no sharing use sharing='none'")
        if not self.embedding_projection and self.embedding_size != self.hidden_size:
            raise ValueError(f"embedding_projection=False needs embedding_size == hidden_size, got "
                             f"{self.embedding_size} != {self.hidden_size}; set embedding_projection=True")

    # ------------------------------------------------------------------ helpers
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def replace(self, **changes) -> AlbertConfig:
        """A validated copy with some fields changed. num_hidden_groups is kept (a count that no longer
        divides num_layers is refused, naming both), except when sharing becomes "all": it derives 1."""
        fields = dataclasses.asdict(self)
        if changes.get("sharing", self.sharing) == "all" and self.sharing != "all":
            fields["num_hidden_groups"] = None          # it was num_layers, derived by the other sharing
        return AlbertConfig.from_dict({**fields, **changes})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> AlbertConfig:
        if not isinstance(d, dict):
            raise ValueError(f"an AlbertConfig is read from a dict of fields, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown AlbertConfig field(s) {unknown}; known fields: {sorted(known)}")
        return cls(**d)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> AlbertConfig:
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"config file {path} does not exist") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"config file {path} is not valid JSON: {e}") from None
        return cls.from_dict(d)

    @classmethod
    def preset(cls, name: str, **changes) -> AlbertConfig:
        """A named configuration: the paper's Table 1 sizes or a course size (see PRESETS)."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls.from_dict({**PRESETS[name], **changes})


def _real(cfg: AlbertConfig, name: str) -> float:
    """A float field's value, or ValueError naming it when it is not a real number (None, str, bool, NaN)."""
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return value


# The paper's Table 1 (V = 30,000, 512 positions). FFN = 4H; heads = H/64 except xlarge,
# whose released checkpoint uses 16 heads (head dim 128).
_PAPER = dict(vocab_size=30000, max_position_embeddings=512)
_BERT = dict(_PAPER, sharing="none", embedding_projection=False, hidden_act="gelu",
             hidden_dropout_prob=0.1, attention_dropout_prob=0.1)


def _bert_twin(albert: dict) -> dict:
    """The BERT twin of an ALBERT preset: identical except no sharing and E = H, no projection."""
    return dict(albert, sharing="none", embedding_size=albert["hidden_size"], embedding_projection=False)


# Sized by the pretraining sweep (benchmarks/pretraining_sweep.py, on the course corpus): small enough
# to train on 2 CPU cores, deep enough (4 layers) for the layer-wise lessons. E = 64: with E = 32 the
# shared model never left the MLM plateau in 12,000 steps of the course corpus. It reads at most 32
# tokens, the length it trains on.
_COURSE_ALBERT = dict(vocab_size=4000, embedding_size=64, hidden_size=64, num_layers=4, num_heads=2,
                      intermediate_size=256, max_position_embeddings=32)
_CI_ALBERT = dict(vocab_size=1000, embedding_size=64, hidden_size=64, num_layers=4, num_heads=2,
                  intermediate_size=128, max_position_embeddings=64)
# initializer_range 0.01, not the paper's 0.02: at 0.02 the 12 shared post-LN layers map different tokens to
# nearly one vector at initialisation (mean cosine 0.89 at the last layer; 0.50 at 0.01:
# benchmarks/token_collapse_at_init.py), and on an H200 the gpu recipe stayed on the unigram plateau for 2,173
# steps; at 0.01 the same budgeted run left it (assets/benchmarks/gpu_recipe_h200.json).
_GPU_ALBERT = dict(vocab_size=6000, embedding_size=128, hidden_size=768, num_layers=12, num_heads=12,
                   intermediate_size=3072, max_position_embeddings=256, initializer_range=0.01)

PRESETS: dict[str, dict] = {
    "bert-base": dict(_BERT, embedding_size=768, hidden_size=768, num_layers=12, num_heads=12,
                      intermediate_size=3072),
    "bert-large": dict(_BERT, embedding_size=1024, hidden_size=1024, num_layers=24, num_heads=16,
                       intermediate_size=4096),
    "albert-base": dict(_PAPER, embedding_size=128, hidden_size=768, num_layers=12, num_heads=12,
                        intermediate_size=3072),
    "albert-large": dict(_PAPER, embedding_size=128, hidden_size=1024, num_layers=24, num_heads=16,
                         intermediate_size=4096),
    "albert-xlarge": dict(_PAPER, embedding_size=128, hidden_size=2048, num_layers=24, num_heads=16,
                          intermediate_size=8192),
    "albert-xxlarge": dict(_PAPER, embedding_size=128, hidden_size=4096, num_layers=12, num_heads=64,
                           intermediate_size=16384),
    "course-albert": _COURSE_ALBERT,
    "course-bert": _bert_twin(_COURSE_ALBERT),
    "ci-albert": _CI_ALBERT,
    "ci-bert": _bert_twin(_CI_ALBERT),
    "gpu-albert": _GPU_ALBERT,
    "gpu-bert": _bert_twin(_GPU_ALBERT),
}
