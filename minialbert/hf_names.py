"""The one table between our state-dict keys and HuggingFace's ALBERT and BERT keys, which hf.py reads
in both directions (from_hf imports, to_hf exports). Apart from names, the layouts differ only in one
fusion: HF keeps separate query/key/value Linears where we keep one `qkv` Linear (rows ordered q, k, v).
"""

from __future__ import annotations

from .config import AlbertConfig

# Where each family keeps its heads (after the encoder prefix "albert." / "bert.", which heads lack).
HEAD_PREFIX = {"albert": {"mlm": "predictions.", "sentence": "sop_classifier."},
               "bert": {"mlm": "cls.predictions.", "sentence": "cls.seq_relationship."}}
_BERT_LINEARS = (("attention.dense", "attention.output.dense"), ("feed_forward.ffn_output", "output.dense"),
                 ("attention.LayerNorm", "attention.output.LayerNorm"),     # (ours, BERT's) in each layer
                 ("feed_forward.ffn", "intermediate.dense"), ("feed_forward.LayerNorm", "output.LayerNorm"))


def _linear(ours: str, hf: str) -> dict[str, str]:
    return {f"{ours}.weight": f"{hf}.weight", f"{ours}.bias": f"{hf}.bias"}


def _qkv(ours: str, hf: str) -> dict[str, tuple[str, str, str]]:
    """Our fused qkv Linear <- HF's query, key, value Linears (concatenated along the output rows)."""
    return {f"{ours}.qkv.{p}": tuple(f"{hf}.{n}.{p}" for n in ("query", "key", "value"))
            for p in ("weight", "bias")}


def key_names(cfg: AlbertConfig, family: str, prefix: str) -> dict[str, dict]:
    """Our state-dict key -> HF key (or the 3 HF keys fused into qkv), in parts that may be absent.

    Parts: "encoder" (always), "pooler", "mlm", "sentence", "classifier" (the fine-tuning head, one name
    in both families). `prefix`: "albert." / "bert." or "" (bare AlbertModel / BertModel). The tied MLM
    decoder has no entry: it is the word embeddings.
    """
    e, hf_e = "albert.embeddings", f"{prefix}embeddings"
    encoder = {f"{e}.{n}.weight": f"{hf_e}.{n}.weight"
               for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")}
    encoder |= _linear(f"{e}.LayerNorm", f"{hf_e}.LayerNorm")
    if family == "albert":
        encoder |= _linear(f"{e}.projection", f"{prefix}encoder.embedding_hidden_mapping_in")
        for g in range(cfg.num_hidden_groups):
            for k in range(cfg.inner_group_num):
                ours = f"albert.encoder.groups.{g}.{k}"
                hf = f"{prefix}encoder.albert_layer_groups.{g}.albert_layers.{k}"
                encoder |= _qkv(f"{ours}.attention", f"{hf}.attention")
                for o, h in (("attention.dense", "attention.dense"),
                             ("attention.LayerNorm", "attention.LayerNorm"),
                             ("feed_forward.ffn", "ffn"), ("feed_forward.ffn_output", "ffn_output"),
                             ("feed_forward.LayerNorm", "full_layer_layer_norm")):
                    encoder |= _linear(f"{ours}.{o}", f"{hf}.{h}")
        pooler = _linear("albert.pooler", f"{prefix}pooler")
        mlm = (_linear("mlm_head.dense", "predictions.dense")
               | _linear("mlm_head.LayerNorm", "predictions.LayerNorm"))
        mlm["mlm_head.bias"] = "predictions.bias"
        sentence = _linear("sentence_head.1", "sop_classifier.classifier")
    else:
        for i in range(cfg.num_layers):
            ours, hf = f"albert.encoder.groups.{i}.0", f"{prefix}encoder.layer.{i}"
            encoder |= _qkv(f"{ours}.attention", f"{hf}.attention.self")
            for o, h in _BERT_LINEARS:
                encoder |= _linear(f"{ours}.{o}", f"{hf}.{h}")
        pooler = _linear("albert.pooler", f"{prefix}pooler.dense")
        mlm = (_linear("mlm_head.dense", "cls.predictions.transform.dense")
               | _linear("mlm_head.LayerNorm", "cls.predictions.transform.LayerNorm"))
        mlm["mlm_head.bias"] = "cls.predictions.bias"
        sentence = _linear("sentence_head.1", "cls.seq_relationship")
    return {"encoder": encoder, "pooler": pooler, "mlm": mlm, "sentence": sentence,
            "classifier": _linear("classifier", "classifier")}
