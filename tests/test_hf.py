"""HF interop: parity with tiny random transformers models, export round trips, loaders, error messages.

No download: every HF model here is randomly initialised, and the by-name loader is served from
loopback. The one real-checkpoint check needs MINIALBERT_NETWORK=1.
"""

import functools
import http.server
import json
import os
import socket
import threading
import time

import pytest
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from torch.testing import assert_close

from minialbert import AlbertConfig, AlbertForPretraining, hf

V, N = 97, 9
EXACT = dict(atol=1e-5, rtol=0)
ALBERT_SMALL = dict(vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                    num_attention_heads=4, intermediate_size=37, max_position_embeddings=24,
                    hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)  # eval() turns it off
BERT_SMALL = dict(vocab_size=V, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=37, max_position_embeddings=24)


def _perturb(model: torch.nn.Module, seed: int) -> None:
    """Random offsets on every parameter so biases and LayerNorms are not at their trivial init."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)


def _hf(cls, config_cls, seed=0, **config):
    torch.manual_seed(seed)
    model = cls(config_cls(**config, attn_implementation="eager"))
    _perturb(model, seed)
    return model.eval()


def _batch():
    """A padded batch (rows end in 0, 3 and 6 pads), two segments, MLM labels at a few positions."""
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(5, V, (3, N), generator=gen)
    mask = torch.ones(3, N, dtype=torch.long)
    mask[1, -3:] = 0
    mask[2, -6:] = 0
    ids[mask == 0] = 0
    types = (torch.arange(N) >= 4).long().expand(3, N) * mask
    labels = torch.full((3, N), -100)
    labels[0, [1, 5]] = torch.tensor([7, 11])
    labels[1, 2], labels[2, 1] = 13, 17
    return ids, types, mask, labels, torch.tensor([0, 1, 1])


# ---------------------------------------------------------------------------------- ALBERT parity
@pytest.mark.parametrize("changes", [dict(),
                                     dict(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
                                     dict(embedding_size=32)], ids=["one-group", "2groups-x2inner", "E==H"])
def test_albert_parity(changes):
    ref = _hf(transformers.AlbertForPreTraining, transformers.AlbertConfig, **{**ALBERT_SMALL, **changes})
    ours = hf.from_hf(ref.state_dict(), ref.config.to_dict())
    assert ours.sentence_task == "sop" and not ours.training
    ids, types, mask, labels, order = _batch()
    with torch.no_grad():
        theirs = ref(ids, attention_mask=mask, token_type_ids=types, labels=labels,
                     sentence_order_label=order, output_hidden_states=True)
        base = ref.albert(ids, attention_mask=mask, token_type_ids=types)
        mine = ours(ids, types, mask, output_hidden_states=True)
        labelled = ours(ids, types, mask, mlm_labels=labels, sentence_labels=order)
    # transformers 5 records every inner layer; ours records one state per step (a whole group).
    inner = ref.config.inner_group_num
    assert len(mine.hidden_states) == ref.config.num_hidden_layers + 1
    assert len(theirs.hidden_states) == ref.config.num_hidden_layers * inner + 1
    for a, b in zip(mine.hidden_states, theirs.hidden_states[::inner], strict=True):
        assert_close(a, b, **EXACT)
    assert_close(mine.last_hidden_state, base.last_hidden_state, **EXACT)
    assert_close(mine.pooled_output, base.pooler_output, **EXACT)
    assert_close(mine.mlm_logits, theirs.prediction_logits, **EXACT)
    assert_close(mine.sentence_logits, theirs.sop_logits, **EXACT)
    assert_close(labelled.mlm_logits, theirs.prediction_logits[labels != -100], **EXACT)
    hf_mlm_loss = F.cross_entropy(theirs.prediction_logits.view(-1, V), labels.view(-1))
    assert_close(labelled.mlm_loss, hf_mlm_loss, **EXACT)
    assert_close(labelled.sentence_loss, F.cross_entropy(theirs.sop_logits, order), **EXACT)
    assert_close(labelled.loss, theirs.loss, **EXACT)


def test_albert_model_and_masked_lm_layouts():
    """Bare AlbertModel keys (plus a position_ids buffer) and AlbertForMaskedLM keys (no pooler, no SOP)."""
    ref = _hf(transformers.AlbertForPreTraining, transformers.AlbertConfig, **ALBERT_SMALL)
    ids, types, mask, _, _ = _batch()
    bare = dict(ref.albert.state_dict(), **{"embeddings.position_ids": torch.arange(24)[None]})
    assert not any(k.startswith("albert.") for k in bare)
    ours = hf.from_hf(bare, ref.config.to_dict())
    with torch.no_grad():
        base = ref.albert(ids, attention_mask=mask, token_type_ids=types)
        mine = ours(ids, types, mask)
    assert ours.sentence_task is None and mine.sentence_logits is None
    assert_close(mine.last_hidden_state, base.last_hidden_state, **EXACT)
    assert_close(mine.pooled_output, base.pooler_output, **EXACT)

    mlm = _hf(transformers.AlbertForMaskedLM, transformers.AlbertConfig, seed=3, **ALBERT_SMALL)
    keys = mlm.state_dict()
    assert not any(".pooler." in k for k in keys)
    first, second = hf.from_hf(keys, mlm.config.to_dict()), hf.from_hf(keys, mlm.config.to_dict())
    assert torch.equal(first.albert.pooler.weight, second.albert.pooler.weight)   # seeded init for the gap
    with torch.no_grad():
        theirs = mlm(ids, attention_mask=mask, token_type_ids=types)
        mine = first(ids, types, mask)
    assert first.sentence_task is None
    assert_close(mine.mlm_logits, theirs.logits, **EXACT)


def test_decoder_bias_alone_is_used():
    ref = _hf(transformers.AlbertForPreTraining, transformers.AlbertConfig, **ALBERT_SMALL)
    sd = ref.state_dict()
    bias = sd.pop("predictions.bias")
    assert torch.equal(hf.from_hf(sd, ref.config.to_dict()).mlm_head.bias, bias)


# ---------------------------------------------------------------------------------- BERT parity
def _old_names(sd: dict) -> dict:
    return {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
            for k, v in sd.items()}


@pytest.mark.parametrize("old_names", [False, True], ids=["weight-bias", "gamma-beta"])
def test_bert_parity(old_names):
    ref = _hf(transformers.BertForPreTraining, transformers.BertConfig, **BERT_SMALL)
    sd = ref.state_dict()
    if old_names:
        sd = _old_names(sd)
        assert "bert.embeddings.LayerNorm.gamma" in sd
    ours = hf.from_hf(sd, ref.config.to_dict())
    cfg = ours.config
    assert (cfg.sharing, cfg.embedding_projection, cfg.embedding_size) == ("none", False, 32)
    assert (cfg.hidden_act, cfg.classifier_dropout_prob) == ("gelu", 0.0)
    assert ours.sentence_task == "nsp"
    ids, types, mask, labels, order = _batch()
    with torch.no_grad():
        theirs = ref(ids, attention_mask=mask, token_type_ids=types, labels=labels, next_sentence_label=order,
                     output_hidden_states=True)
        base = ref.bert(ids, attention_mask=mask, token_type_ids=types)
        mine = ours(ids, types, mask, output_hidden_states=True)
        labelled = ours(ids, types, mask, mlm_labels=labels, sentence_labels=order)
    assert len(theirs.hidden_states) == len(mine.hidden_states) == 4
    for a, b in zip(mine.hidden_states, theirs.hidden_states, strict=True):
        assert_close(a, b, **EXACT)
    assert_close(mine.last_hidden_state, base.last_hidden_state, **EXACT)
    assert_close(mine.pooled_output, base.pooler_output, **EXACT)
    assert_close(mine.mlm_logits, theirs.prediction_logits, **EXACT)
    assert_close(mine.sentence_logits, theirs.seq_relationship_logits, **EXACT)
    assert_close(labelled.loss, theirs.loss, **EXACT)


def test_bert_model_layout():
    ref = _hf(transformers.BertModel, transformers.BertConfig, **BERT_SMALL)
    sd = _old_names(ref.state_dict())
    assert "encoder.layer.0.attention.self.query.weight" in sd
    ours = hf.from_hf(sd, {k: v for k, v in ref.config.to_dict().items() if k != "model_type"})  # keys decide
    ids, types, mask, _, _ = _batch()
    with torch.no_grad():
        base = ref(ids, attention_mask=mask, token_type_ids=types)
        mine = ours(ids, types, mask)
    assert ours.sentence_task is None
    assert_close(mine.last_hidden_state, base.last_hidden_state, **EXACT)
    assert_close(mine.pooled_output, base.pooler_output, **EXACT)


# ---------------------------------------------------------------------------------- export round trip
def _ours(seed=0, **changes) -> AlbertForPretraining:
    torch.manual_seed(seed)
    cfg = AlbertConfig(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=4, num_heads=4,
                       intermediate_size=37, max_position_embeddings=24, **changes)
    model = AlbertForPretraining(cfg)
    _perturb(model, seed)
    return model.eval()


def _compare_with_transformers(model, ref):
    ids, types, mask, labels, order = _batch()
    with torch.no_grad():
        mine = model(ids, types, mask, output_hidden_states=True)
        theirs = ref.eval()(ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    inner = model.config.inner_group_num
    for a, b in zip(mine.hidden_states, theirs.hidden_states[::inner], strict=True):
        assert_close(a, b, **EXACT)
    assert_close(mine.mlm_logits, theirs.prediction_logits, **EXACT)
    assert_close(mine.sentence_logits, theirs.sop_logits, **EXACT)


@pytest.mark.parametrize("changes", [dict(), dict(num_hidden_groups=2, inner_group_num=2),
                                     dict(sharing="none"), dict(sharing="attention"), dict(sharing="ffn")],
                         ids=["all", "2groups-x2inner", "none", "attention", "ffn"])
def test_to_hf_round_trip(changes, tmp_path):
    model = _ours(**changes)
    sd, config = hf.to_hf(model)
    assert config["model_type"] == "albert" and config["architectures"] == ["AlbertForPreTraining"]
    assert config["num_hidden_groups"] == model.config.num_hidden_groups

    ref = transformers.AlbertForPreTraining(transformers.AlbertConfig(**config, attn_implementation="eager"))
    ref.load_state_dict(sd, strict=True)
    _compare_with_transformers(model, ref)

    save_file(sd, tmp_path / "model.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = transformers.AlbertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager")
    _compare_with_transformers(model, loaded)

    back = hf.from_hf(sd, config)
    mine, theirs = model.state_dict(), back.state_dict()
    assert mine.keys() == theirs.keys()
    for key in mine:
        assert torch.equal(mine[key], theirs[key]), key


def test_to_hf_refuses_bert_shaped():
    model = AlbertForPretraining(AlbertConfig.preset("ci-bert"), sentence_task="nsp")
    with pytest.raises(ValueError, match="embedding_projection=False"):
        hf.to_hf(model)


# ---------------------------------------------------------------------------------- error messages
@pytest.fixture
def albert_checkpoint():
    ref = _hf(transformers.AlbertForPreTraining, transformers.AlbertConfig, **ALBERT_SMALL)
    return dict(ref.state_dict()), ref.config.to_dict()


def test_error_lists_missing_unexpected_and_misshaped(albert_checkpoint):
    sd, config = albert_checkpoint
    layer = "albert.encoder.albert_layer_groups.0.albert_layers.0"
    del sd[f"{layer}.ffn.weight"]
    sd["albert.encoder.extra.weight"] = torch.zeros(3)
    sd[f"{layer}.attention.key.weight"] = torch.zeros(32, 31)
    with pytest.raises(ValueError) as info:
        hf.from_hf(sd, config)
    message = str(info.value)
    assert "HF ALBERT" in message and "'albert.'" in message
    assert f"missing keys (the config implies them): {layer}.ffn.weight" in message
    assert "unexpected keys (no place for them in this config): albert.encoder.extra.weight" in message
    assert f"mis-shaped keys: {layer}.attention.key.weight: expected (32, 32), found (32, 31)" in message


def test_error_when_config_disagrees_with_weights():
    ref = _hf(transformers.BertForPreTraining, transformers.BertConfig, **BERT_SMALL)
    config = dict(ref.config.to_dict(), num_hidden_layers=4)
    with pytest.raises(ValueError, match=r"HF BERT.*\n.*missing keys.*bert\.encoder\.layer\.3\.") as info:
        hf.from_hf(ref.state_dict(), config)
    assert "encoder.layer.2" not in str(info.value)


def test_error_untied_decoder(albert_checkpoint):
    sd, config = albert_checkpoint
    sd["predictions.decoder.weight"] = sd["predictions.decoder.weight"] + 1
    with pytest.raises(ValueError, match="predictions.decoder.weight differs from .* ties the MLM decoder"):
        hf.from_hf(sd, config)


@pytest.mark.parametrize("change, message", [
    (dict(hidden_act="swish"), "unsupported hidden_act 'swish'"),
    (dict(position_embedding_type="relative_key"), "only 'absolute' position embeddings"),
    (dict(model_type="roberta"), "model_type 'roberta'"),
    (dict(num_attention_heads=5), "hidden_size 32 is not divisible by num_heads 5"),
])
def test_config_errors(albert_checkpoint, change, message):
    sd, config = albert_checkpoint
    with pytest.raises(ValueError, match=message):
        hf.from_hf(sd, dict(config, **change))


# ---------------------------------------------------------------------------------- loaders
def test_load_pretrained_from_local_directory(tmp_path):
    ref = _hf(transformers.AlbertForPreTraining, transformers.AlbertConfig, **ALBERT_SMALL)
    ref.save_pretrained(tmp_path / "st")
    (tmp_path / "st" / "spiece.model").write_bytes(b"not read by the model loader")
    model, spiece = hf.load_pretrained(tmp_path / "st")
    assert spiece == tmp_path / "st" / "spiece.model"
    ids, types, mask, _, _ = _batch()
    with torch.no_grad():
        expected = ref(ids, attention_mask=mask, token_type_ids=types).prediction_logits
        assert_close(model(ids, types, mask).mlm_logits, expected, **EXACT)

    (tmp_path / "bin").mkdir()                           # the older pytorch_model.bin format
    torch.save(ref.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
    (tmp_path / "bin" / "config.json").write_text(ref.config.to_json_string())
    model, spiece = hf.load_pretrained(str(tmp_path / "bin"))
    assert spiece is None
    with torch.no_grad():
        assert_close(model(ids, types, mask).mlm_logits, expected, **EXACT)

    (tmp_path / "bin" / "vocab.txt").write_text("a BERT vocabulary\n")         # spiece.model wins over it
    assert hf.load_pretrained(tmp_path / "bin")[1] == tmp_path / "bin" / "vocab.txt"
    (tmp_path / "bin" / "spiece.model").write_bytes(b"sentencepiece bytes")
    assert hf.load_pretrained(tmp_path / "bin")[1] == tmp_path / "bin" / "spiece.model"

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="expected model.safetensors or pytorch_model.bin"):
        hf.load_pretrained(tmp_path / "empty")


def test_save_pretrained_writes_a_directory_both_loaders_read(tmp_path):
    from minialbert.tokenizer import Tokenizer

    model = _ours()
    tokenizer = Tokenizer.train([f"the json module returns {i} values" for i in range(200)], vocab_size=90)
    directory = hf.save_pretrained(model, tmp_path / "ckpt", tokenizer)
    assert sorted(p.name for p in directory.iterdir()) == ["config.json", "model.safetensors", "spiece.model"]
    _compare_with_transformers(model, transformers.AlbertForPreTraining.from_pretrained(directory))
    loaded, spiece = hf.load_pretrained(directory)
    assert spiece == directory / "spiece.model"
    assert hf.load_tokenizer(spiece).model_proto == tokenizer.model_proto
    mine, theirs = model.state_dict(), loaded.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine) and mine.keys() == theirs.keys()
    assert not (hf.save_pretrained(model, tmp_path / "no-tokenizer") / "spiece.model").exists()


def test_load_tokenizer_reads_both_kinds(tmp_path):
    from minialbert.tokenizer import Tokenizer, WordPieceTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]) + "\n")
    wordpiece = hf.load_tokenizer(vocab)
    assert isinstance(wordpiece, WordPieceTokenizer) and wordpiece.encode("Hello") == [5]
    spiece = tmp_path / "spiece.model"
    Tokenizer.train([f"the json module returns {i} values" for i in range(200)], vocab_size=90, path=spiece)
    assert isinstance(hf.load_tokenizer(spiece), Tokenizer)
    with pytest.raises(ValueError, match="tokenizer.json is not a tokenizer file minialbert reads"):
        hf.load_tokenizer(tmp_path / "tokenizer.json")


def test_load_pretrained_unknown_name():
    with pytest.raises(ValueError, match="neither a local directory nor an official checkpoint.*albert-base"):
        hf.load_pretrained("albert-huge-v9")


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A loopback 'hub' serving tmp_path/served; the cache goes to tmp_path/cache."""
    root = tmp_path / "served"
    root.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(hf, "HUB_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    yield root, server
    server.shutdown()
    thread.join()
    server.server_close()


def test_load_pretrained_by_name_from_loopback_hub(hub):
    root, server = hub
    repo, revision = hf.OFFICIAL["albert-base-v2"]
    served = root / repo / "resolve" / revision
    ref = _hf(transformers.AlbertForMaskedLM, transformers.AlbertConfig, **ALBERT_SMALL)
    ref.save_pretrained(served)
    (served / "spiece.model").write_bytes(b"sentencepiece bytes")
    model, spiece = hf.load_pretrained("albert-base-v2")
    assert spiece.read_bytes() == b"sentencepiece bytes"
    assert spiece.is_relative_to(os.environ["MINIALBERT_CACHE"])
    ids, types, mask, _, _ = _batch()
    with torch.no_grad():
        expected = ref(ids, attention_mask=mask, token_type_ids=types).logits
        assert_close(model(ids, types, mask).mlm_logits, expected, **EXACT)
    server.shutdown()                                   # a second load comes from the cache
    again, _ = hf.load_pretrained("albert-base-v2")
    assert torch.equal(again.mlm_head.bias, model.mlm_head.bias)


def test_load_pretrained_timeout_bounds_a_silent_hub(tmp_path, monkeypatch):
    """A hub that accepts the connection and never answers fails after `timeout`, not after minutes."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        monkeypatch.setattr(hf, "HUB_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        start = time.perf_counter()
        with pytest.raises(hf.dl.DownloadError, match=r"timeout was 0\.3 s"):
            hf.load_pretrained("albert-base-v2", cache_dir=tmp_path, timeout=0.3)
        assert time.perf_counter() - start < 5
    assert not any(p.is_file() for p in tmp_path.rglob("*"))        # nothing half-written stays behind


def test_load_pretrained_falls_back_to_pytorch_model_bin(hub, tmp_path):
    root, _ = hub
    repo, revision = hf.OFFICIAL["bert-base-uncased"]
    served = root / repo / "resolve" / revision
    served.mkdir(parents=True)
    ref = _hf(transformers.BertForPreTraining, transformers.BertConfig, **BERT_SMALL)
    torch.save(_old_names(ref.state_dict()), served / "pytorch_model.bin")
    (served / "config.json").write_text(ref.config.to_json_string())
    (served / "vocab.txt").write_text("a BERT vocabulary\n")
    model, vocab = hf.load_pretrained("bert-base-uncased", cache_dir=tmp_path / "elsewhere")
    cached = tmp_path / "elsewhere" / repo.replace("/", "--") / revision
    assert model.sentence_task == "nsp"
    assert vocab == cached / "vocab.txt" and vocab.read_text() == "a BERT vocabulary\n"   # BERT: vocab.txt
    assert (cached / "pytorch_model.bin").is_file() and not (cached / "model.safetensors").exists()
    assert not (cached / "spiece.model").exists()


@pytest.mark.skipif(os.environ.get("MINIALBERT_NETWORK") != "1", reason="downloads albert-base-v2; set "
                    "MINIALBERT_NETWORK=1 to run")
def test_albert_base_v2_known_values():
    """The check value from transformers' own ALBERT integration test (test_modeling_albert.py)."""
    model, spiece = hf.load_pretrained("albert-base-v2")
    ids = torch.tensor([[0, 345, 232, 328, 740, 140, 1695, 69, 6078, 1588, 2]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        out = model.albert(ids, attention_mask=mask)
    expected = torch.tensor([[[-0.6513, 1.5035, -0.2766], [-0.6515, 1.5046, -0.2780],
                              [-0.6512, 1.5049, -0.2784]]])
    assert_close(out.last_hidden_state[:, 1:4, 1:4], expected, atol=1e-4, rtol=0)
    assert spiece is not None and spiece.is_file()
