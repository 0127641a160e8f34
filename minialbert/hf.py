"""HuggingFace interop: load HF ALBERT / BERT checkpoints, export to HF ALBERT, fetch the official ones.

The only real differences between HF's layout and ours are names and one fusion: HF keeps separate
query/key/value Linears where we keep one `qkv` Linear (rows ordered q, k, v). Everything else is a
rename, listed once in hf_names.py (`key_names`) and used in both directions.
"""

from __future__ import annotations

import difflib
import json
import urllib.error
import warnings
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save

from . import download as dl
from .config import ACTIVATIONS, AlbertConfig
from .hf_names import HEAD_PREFIX, key_names
from .model import AlbertForPretraining, AlbertForSequenceClassification
from .tokenizer import Tokenizer, WordPieceTokenizer

HUB_URL = "https://huggingface.co"   # files come from {HUB_URL}/{repo}/resolve/{revision}/{file}

# Official checkpoints: name -> (hub repo, pinned commit); only albert-base-v2 and bert-base-uncased
# have a commit we could confirm, the others follow "main".
OFFICIAL: dict[str, tuple[str, str]] = {
    "albert-base-v1": ("albert/albert-base-v1", "main"),
    "albert-large-v1": ("albert/albert-large-v1", "main"),
    "albert-xlarge-v1": ("albert/albert-xlarge-v1", "main"),
    "albert-xxlarge-v1": ("albert/albert-xxlarge-v1", "main"),
    "albert-base-v2": ("albert/albert-base-v2", "eab127d1a4a42b10e2b130e1834c64f5844d541e"),
    "albert-large-v2": ("albert/albert-large-v2", "main"),
    "albert-xlarge-v2": ("albert/albert-xlarge-v2", "main"),
    "albert-xxlarge-v2": ("albert/albert-xxlarge-v2", "main"),
    "bert-base-uncased": ("google-bert/bert-base-uncased", "86b5e0934494bd15c9632b12f734a8a67f723594"),
    "bert-large-uncased": ("google-bert/bert-large-uncased", "main"),
}

# HF config defaults (used when config.json leaves a field out, as transformers does).
_ALBERT_DEFAULTS = dict(vocab_size=30000, embedding_size=128, hidden_size=4096, num_hidden_layers=12,
                        num_hidden_groups=1, num_attention_heads=64, intermediate_size=16384,
                        inner_group_num=1, hidden_act="gelu_new", hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0, max_position_embeddings=512, type_vocab_size=2,
                        initializer_range=0.02, layer_norm_eps=1e-12, classifier_dropout_prob=0.1,
                        pad_token_id=0)
_BERT_DEFAULTS = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                      intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                      attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
                      initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0)
_MODEL_KEYS = set(_ALBERT_DEFAULTS) | set(_BERT_DEFAULTS) | {"position_embedding_type"}
_HF_GENERIC_KEYS = {"classifier_dropout", "num_labels"}   # transformers' own keys that look like a model key
_IGNORED_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")   # index buffers, not weights
TOKENIZER_FILES = ("spiece.model", "vocab.txt")   # ALBERT's SentencePiece model, BERT's WordPiece vocabulary


# ---------------------------------------------------------------------------------- config
def _detect_family(config_dict: dict, keys) -> str:
    model_type = config_dict.get("model_type")
    if model_type in ("albert", "bert"):
        return model_type
    if model_type is not None:
        raise ValueError(f"config.json has model_type {model_type!r}; minialbert loads only 'albert' and "
                         "'bert' checkpoints")
    if any("albert_layer_groups" in k for k in keys):
        return "albert"
    if any(".layer." in k and ".attention.self." in k for k in keys):
        return "bert"
    raise ValueError("cannot tell the checkpoint family: config.json has no model_type and the keys look "
                     "neither like HF ALBERT (albert_layer_groups) nor HF BERT "
                     "(encoder.layer.N.attention.self); add model_type 'albert' or 'bert' to the config")


def _config_from_hf(config_dict: dict, family: str) -> AlbertConfig:
    """HF config.json contents -> AlbertConfig (BERT: no sharing, E = H, no projection). Keys transformers
    adds for every model are ignored; a near-miss of a model key is an error (not a silent default)."""
    for key in set(config_dict) - _MODEL_KEYS - _HF_GENERIC_KEYS:
        if near := difflib.get_close_matches(key, _MODEL_KEYS, n=1, cutoff=0.8):
            raise ValueError(f"unknown key {key!r} in the HF config; did you mean {near[0]!r}?")
    c = {**(_ALBERT_DEFAULTS if family == "albert" else _BERT_DEFAULTS), **config_dict}
    if c["hidden_act"] not in ACTIVATIONS:
        raise ValueError(f"unsupported hidden_act {c['hidden_act']!r} in the HF config; minialbert "
                         f"implements {', '.join(ACTIVATIONS)} (gelu_new = tanh GELU, gelu = erf GELU)")
    if c.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"unsupported position_embedding_type {c['position_embedding_type']!r} in the HF "
                         "config; minialbert implements only 'absolute' position embeddings")
    fields = dict(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_layers=c["num_hidden_layers"],
                  num_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
                  hidden_act=c["hidden_act"], hidden_dropout_prob=c["hidden_dropout_prob"],
                  attention_dropout_prob=c["attention_probs_dropout_prob"],
                  max_position_embeddings=c["max_position_embeddings"], type_vocab_size=c["type_vocab_size"],
                  layer_norm_eps=c["layer_norm_eps"], initializer_range=c["initializer_range"],
                  pad_token_id=c["pad_token_id"] if c["pad_token_id"] is not None else 0)
    if family == "albert":   # HF ALBERT always projects E -> H, even when E == H
        one_layer_per_group = c["num_hidden_groups"] == c["num_hidden_layers"] and c["inner_group_num"] == 1
        fields |= dict(embedding_size=c["embedding_size"], embedding_projection=True,
                       sharing="none" if one_layer_per_group else "all",
                       num_hidden_groups=c["num_hidden_groups"], inner_group_num=c["inner_group_num"],
                       classifier_dropout_prob=c["classifier_dropout_prob"])
    else:                    # BERT's NSP head (cls.seq_relationship) has no dropout
        fields |= dict(embedding_size=c["hidden_size"], sharing="none", embedding_projection=False,
                       classifier_dropout_prob=0.0)
    try:
        return AlbertConfig(**fields)
    except ValueError as e:
        raise ValueError(f"the HF config does not give a valid AlbertConfig: {e}") from None


def _config_to_hf(cfg: AlbertConfig, architecture: str, num_labels: int | None = None) -> dict:
    labels = {} if num_labels is None else {"id2label": {str(i): f"LABEL_{i}" for i in range(num_labels)}}
    return {"architectures": [architecture], **labels, "model_type": "albert", "vocab_size": cfg.vocab_size,
            "embedding_size": cfg.embedding_size, "hidden_size": cfg.hidden_size,
            "num_hidden_layers": cfg.num_layers, "num_hidden_groups": cfg.num_hidden_groups,
            "inner_group_num": cfg.inner_group_num, "num_attention_heads": cfg.num_heads,
            "intermediate_size": cfg.intermediate_size, "hidden_act": cfg.hidden_act,
            "hidden_dropout_prob": cfg.hidden_dropout_prob,
            "attention_probs_dropout_prob": cfg.attention_dropout_prob,
            "classifier_dropout_prob": cfg.classifier_dropout_prob,
            "max_position_embeddings": cfg.max_position_embeddings, "type_vocab_size": cfg.type_vocab_size,
            "initializer_range": cfg.initializer_range, "layer_norm_eps": cfg.layer_norm_eps,
            "position_embedding_type": "absolute", "pad_token_id": cfg.pad_token_id,
            "tie_word_embeddings": True}


# ---------------------------------------------------------------------------------- import
def _normalise_keys(state_dict: dict) -> dict:
    """Drop index buffers and rename old LayerNorm gamma/beta to weight/bias."""
    out = {}
    for key, value in state_dict.items():
        if key.endswith(_IGNORED_BUFFERS):
            continue
        if ".LayerNorm." in key:
            key = key.removesuffix(".gamma") + ".weight" if key.endswith(".gamma") else key
            key = key.removesuffix(".beta") + ".bias" if key.endswith(".beta") else key
        out[key] = value
    return out


def _short(names: list[str], limit: int = 20) -> str:
    more = f" ... and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def from_hf(state_dict: dict[str, torch.Tensor], config_dict: dict):
    """Build an AlbertForPretraining from HF ALBERT or BERT weights and their config.json contents, or an
    AlbertForSequenceClassification when the weights hold a fine-tuning `classifier`.

    Accepts the AlbertModel / AlbertForMaskedLM / AlbertForPreTraining / AlbertForSequenceClassification
    and BertModel / BertForPreTraining / BertForSequenceClassification layouts. Heads missing from the
    checkpoint keep their (seeded) initial values; with no sentence head `sentence_task` is None. Any
    missing, unexpected or mis-shaped key raises one ValueError listing them. Returns the model in eval mode.
    """
    if not isinstance(state_dict, Mapping) or not isinstance(config_dict, Mapping):
        raise ValueError(f"from_hf takes a state dict and a config dict, got {type(state_dict).__name__} "
                         f"and {type(config_dict).__name__}")
    not_tensors = sorted(k for k, v in state_dict.items() if not isinstance(v, torch.Tensor))
    if not_tensors:
        raise ValueError(f"state dict values must be torch tensors; not tensors: {_short(not_tensors)} "
                         "(convert numpy arrays with torch.from_numpy)")
    sd = _normalise_keys(state_dict)
    family = _detect_family(config_dict, sd)
    cfg = _config_from_hf(config_dict, family)
    prefix = f"{family}." if any(k.startswith(f"{family}.") for k in sd) else ""
    heads = HEAD_PREFIX[family]
    present = {"encoder": True,
               "pooler": any(k.startswith(f"{prefix}pooler.") for k in sd),
               "mlm": any(k.startswith(heads["mlm"]) for k in sd),
               "sentence": any(k.startswith(heads["sentence"]) for k in sd),
               "classifier": "classifier.weight" in sd}
    if present["classifier"]:                 # a fine-tuned model: its pretraining heads are gone
        present["mlm"] = present["sentence"] = False
    with torch.random.fork_rng(devices=[]):   # heads the checkpoint lacks get the same init every time
        torch.manual_seed(0)
        if present["classifier"]:
            model = _classifier_from_hf(cfg, config_dict, family, sd["classifier.weight"])
        else:
            sentence_task = ("sop" if family == "albert" else "nsp") if present["sentence"] else None
            model = AlbertForPretraining(cfg, sentence_task=sentence_task)
    ours = model.state_dict()
    problems = _head_problems(sd, present, prefix, heads)
    names = key_names(cfg, family, prefix)
    wanted = {key: hf for part, table in names.items() if present[part] for key, hf in table.items()}
    loaded, weight_problems = _matched_weights(sd, wanted, ours)
    problems += weight_problems
    if problems:
        found = [p for p in ("pooler", "mlm", "sentence", "classifier") if present[p]] or ["none"]
        raise ValueError(f"cannot load this checkpoint as HF {family.upper()} (encoder prefix {prefix!r}, "
                         f"heads found: {', '.join(found)}):\n  " + "\n  ".join(problems)
                         + "\nCheck that config.json belongs to these weights.")
    if present["mlm"]:
        loaded["mlm_head.decoder_weight"] = loaded["albert.embeddings.word_embeddings.weight"]   # tied
    model.load_state_dict({**ours, **loaded}, strict=True)
    return model.eval()


def _head_problems(sd: dict, present: dict[str, bool], prefix: str, heads: dict[str, str]) -> list[str]:
    """What keeps the heads from loading: a sentence head or classifier without the pooler it reads, an
    untied MLM decoder. The decoder's copies leave sd (we tie it), its bias filling in a missing head bias."""
    problems = []
    reader = "classifier" if present["classifier"] else "sentence" if present["sentence"] else None
    if not present["pooler"] and reader:      # transformers reports the pooler's keys as missing
        problems.append(f"the {reader} head reads the pooled [CLS] output, but the checkpoint has no pooler "
                        f"({prefix}pooler.*): its logits would come from an untrained pooler")
    elif not present["pooler"]:
        warnings.warn(f"the checkpoint has no pooler ({prefix}pooler.*): pooled_output is not pretrained",
                      stacklevel=3)
    word_key = f"{prefix}embeddings.word_embeddings.weight"
    decoder = heads["mlm"] + "decoder"
    decoder_weight, decoder_bias = sd.pop(f"{decoder}.weight", None), sd.pop(f"{decoder}.bias", None)
    if decoder_weight is not None and word_key in sd and not torch.equal(decoder_weight, sd[word_key]):
        problems.append(f"{decoder}.weight differs from {word_key}: minialbert ties the MLM decoder to the "
                        "word embeddings and cannot load an untied checkpoint")
    if decoder_bias is not None:
        bias_key = f"{heads['mlm']}bias"
        if bias_key not in sd:
            sd[bias_key] = decoder_bias              # some files keep only the decoder's copy of the bias
        elif not torch.equal(decoder_bias, sd[bias_key]):
            problems.append(f"{decoder}.bias differs from {bias_key}; they must be the same tensor")
    return problems


def _matched_weights(sd: dict, wanted: dict, ours: dict) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Our key -> its tensor from sd (q, k, v fused into qkv) for every wanted key found well shaped, and
    the problems: missing, unexpected, mis-shaped, non-float or non-finite weights."""
    problems = []
    expected_hf = {h for hf in wanted.values() for h in (hf if isinstance(hf, tuple) else (hf,))}
    missing = sorted(expected_hf - set(sd))
    unexpected = sorted(set(sd) - expected_hf)
    misshaped, loaded = [], {}
    for key, hf in wanted.items():
        parts = hf if isinstance(hf, tuple) else (hf,)
        shape = list(ours[key].shape)
        shape[0] //= len(parts)                       # q, k, v each hold a third of qkv's rows
        bad = [h for h in parts if h in sd and list(sd[h].shape) != shape]
        misshaped += [f"{h}: expected {tuple(shape)}, found {tuple(sd[h].shape)}" for h in bad]
        if not bad and all(h in sd for h in parts):
            loaded[key] = torch.cat([sd[h] for h in parts]) if len(parts) > 1 else sd[parts[0]]
            if not loaded[key].is_floating_point():
                problems.append(f"{hf} has dtype {loaded[key].dtype}; weights must be floating-point")
            elif not torch.isfinite(loaded[key]).all():
                problems.append(f"{hf} holds NaN or infinite values; the checkpoint is damaged")
    if missing:
        problems.append(f"missing keys (the config implies them): {_short(missing)}")
    if unexpected:
        problems.append(f"unexpected keys (no place for them in this config): {_short(unexpected)}")
    if misshaped:
        problems.append(f"mis-shaped keys: {_short(misshaped)}")
    return loaded, problems


def _classifier_from_hf(cfg: AlbertConfig, config_dict: dict, family: str, weight: torch.Tensor):
    """An AlbertForSequenceClassification with as many labels as the classifier has rows. Its dropout
    follows transformers: ALBERT's classifier_dropout_prob; BERT's classifier_dropout, else hidden dropout."""
    num_labels = weight.shape[0] if weight.dim() == 2 else 0
    declared = config_dict.get("num_labels", len(config_dict.get("id2label") or {}) or None)
    if declared is not None and declared != num_labels:
        raise ValueError(f"the HF config declares {declared} labels but classifier.weight has shape "
                         f"{tuple(weight.shape)}; check that config.json belongs to these weights")
    if family == "bert":
        dropout = config_dict.get("classifier_dropout")
        cfg = cfg.replace(classifier_dropout_prob=cfg.hidden_dropout_prob if dropout is None else dropout)
    return AlbertForSequenceClassification(cfg, num_labels)


# ---------------------------------------------------------------------------------- export
def to_hf(model) -> tuple[dict[str, torch.Tensor], dict]:
    """Export to HF ALBERT: (state dict, config.json contents) with AlbertForPreTraining keys, or with
    AlbertForSequenceClassification keys for a fine-tuned AlbertForSequenceClassification.

    Partial sharing exports one HF group per layer holding copies of the shared tensors (the same
    outputs). No sentence head: AlbertForMaskedLM-shaped. BERT-shaped models (no E -> H) cannot export.
    """
    cfg = model.config
    if not cfg.embedding_projection:
        raise ValueError("to_hf exports HF ALBERT, which always has the E -> H projection, but this model "
                         "has embedding_projection=False (BERT-shaped); build it with "
                         "embedding_projection=True")
    names = key_names(cfg, "albert", "albert.")
    classifier = hasattr(model, "classifier")
    if classifier:
        parts = ["encoder", "pooler", "classifier"]
    else:
        parts = ["encoder", "pooler", "mlm"] + (["sentence"] if model.sentence_head is not None else [])
    ours = model.state_dict()
    sd = {}
    for part in parts:
        for key, hf in names[part].items():
            tensor = ours[key].detach()
            if isinstance(hf, tuple):
                sd |= {h: chunk.clone() for h, chunk in zip(hf, tensor.chunk(3))}
            else:
                sd[hf] = tensor.clone()
    if classifier:
        return sd, _config_to_hf(cfg, "AlbertForSequenceClassification", model.num_labels)
    # HF's own state dict names the tied decoder too (load_state_dict(strict=True) wants them).
    sd["predictions.decoder.weight"] = sd["albert.embeddings.word_embeddings.weight"].clone()
    sd["predictions.decoder.bias"] = sd["predictions.bias"].clone()
    architecture = "AlbertForPreTraining" if model.sentence_head is not None else "AlbertForMaskedLM"
    return sd, _config_to_hf(cfg, architecture)


# ---------------------------------------------------------------------------------- checkpoints
def _load_dir(directory: Path) -> tuple[AlbertForPretraining, Path | None]:
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} does not exist; a checkpoint directory needs config.json and "
                                "model.safetensors (or pytorch_model.bin)")
    try:
        config_dict = json.loads(config_path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{config_path} is not valid JSON: {e}") from None
    weights = next((directory / f for f in ("model.safetensors", "pytorch_model.bin")
                    if (directory / f).is_file()), None)
    if weights is None:
        raise FileNotFoundError(f"no weights in {directory}: expected model.safetensors or pytorch_model.bin "
                                "(sharded checkpoints are not supported)")
    try:
        state_dict = (load_file(weights) if weights.suffix == ".safetensors"
                      else torch.load(weights, map_location="cpu", weights_only=True))
    except Exception as e:  # safetensors and torch raise several types for damaged files
        raise ValueError(f"{weights} is damaged or not a weights file ({type(e).__name__}: {e}); "
                         "delete it to download it again") from None
    try:
        model = from_hf(state_dict, config_dict)
    except ValueError as e:
        raise ValueError(f"{directory}: {e}") from None
    tokenizer = next((directory / f for f in TOKENIZER_FILES if (directory / f).is_file()), None)
    return model, tokenizer


def _is_404(error: dl.DownloadError) -> bool:
    return isinstance(error.__cause__, urllib.error.HTTPError) and error.__cause__.code == 404


def _fetch(name: str, revision: str | None, cache_dir: str | Path | None, timeout: float) -> Path:
    """Download an official checkpoint's files (once) into the cache; return their directory."""
    repo, pinned = OFFICIAL[name]
    revision = revision or pinned
    root = Path(cache_dir) if cache_dir is not None else dl.cache_dir() / "hf"
    directory = root / repo.replace("/", "--") / revision

    def get(file: str) -> Path:
        return dl.download(f"{HUB_URL}/{repo}/resolve/{revision}/{file}", directory / file, timeout=timeout)

    get("config.json")
    if not any((directory / f).is_file() for f in ("model.safetensors", "pytorch_model.bin")):
        try:
            get("model.safetensors")
        except dl.DownloadError as e:
            if not _is_404(e):
                raise
            get("pytorch_model.bin")                 # older repos only have the pickle-free-loadable .bin
    tokenizer = "spiece.model" if repo.startswith("albert/") else "vocab.txt"   # google-bert/: WordPiece
    if not (directory / tokenizer).is_file():
        get(tokenizer)
    return directory


def load_pretrained(name_or_dir: str | Path, revision: str | None = None,
                    cache_dir: str | Path | None = None,
                    timeout: float = 60) -> tuple[AlbertForPretraining, Path | None]:
    """An official checkpoint by name (downloaded once, pinned revision) or a local HF directory.

    Returns (model in eval mode, path of its tokenizer file or None if the checkpoint has none): the
    tokenizer file is spiece.model (ALBERT) if present, else vocab.txt (BERT); read it with load_tokenizer.
    A local directory (config.json + model.safetensors or pytorch_model.bin) loads offline. `timeout`
    (seconds) bounds each wait on the network, so an unreachable hub fails in about that time.
    """
    path = Path(name_or_dir)
    if path.is_dir():
        return _load_dir(path)
    if str(name_or_dir) not in OFFICIAL:
        raise ValueError(f"{str(name_or_dir)!r} is neither a local directory nor an official checkpoint; "
                         f"choose one of {', '.join(OFFICIAL)} or pass a directory holding config.json and "
                         "model.safetensors")
    return _load_dir(_fetch(str(name_or_dir), revision, cache_dir, timeout))


def save_pretrained(model, directory: str | Path, tokenizer: Tokenizer | None = None) -> Path:
    """Write `model` as an HF ALBERT checkpoint directory: config.json and model.safetensors from to_hf,
    plus the tokenizer as spiece.model when given. transformers' from_pretrained and load_pretrained
    both read the directory; return it."""
    state_dict, config = to_hf(model)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    dl.atomic_write(directory / "model.safetensors", save(state_dict, metadata={"format": "pt"}))
    dl.write_json(directory / "config.json", config)
    if tokenizer is not None:
        tokenizer.save(directory / "spiece.model")
    return directory


def load_tokenizer(path: str | Path) -> Tokenizer | WordPieceTokenizer:
    """The tokenizer in a checkpoint's tokenizer file: SentencePiece for a .model file (ALBERT's
    spiece.model), uncased WordPiece for a vocab.txt (BERT's)."""
    path = Path(path)
    if path.suffix == ".model":
        return Tokenizer.load(path)
    if path.name == "vocab.txt":
        return WordPieceTokenizer.load(path, lowercase=True)
    raise ValueError(f"{path} is not a tokenizer file minialbert reads; expected a SentencePiece .model "
                     "(ALBERT's spiece.model) or a WordPiece vocab.txt (BERT's)")
