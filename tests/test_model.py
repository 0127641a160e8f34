"""The model: shapes, padding invariance, cross-layer sharing, backends, and the masked-position trick."""

import pytest
import torch

import minialbert as ma
from minialbert.config import AlbertConfig
from minialbert.inputs import check_batch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"     # the Triton backends: compiled on a GPU
TINY = dict(vocab_size=97, embedding_size=16, hidden_size=32, num_layers=4, num_heads=4,
            intermediate_size=48, max_position_embeddings=40)


def tiny(**changes) -> AlbertConfig:
    return AlbertConfig(**{**TINY, **changes})


def batch(cfg, B=3, N=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, cfg.vocab_size, (B, N), generator=g)
    types = (torch.arange(N) >= N // 2).long().expand(B, N).contiguous()
    return ids, types


def model(cfg, task="sop", seed=0):
    torch.manual_seed(seed)
    return ma.AlbertForPretraining(cfg, task).eval()


def unique_parameter_count(module):
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())


@pytest.mark.parametrize("sharing", ["all", "attention", "ffn", "none"])
def test_shapes(sharing):
    cfg = tiny(sharing=sharing)
    m = model(cfg)
    ids, types = batch(cfg)
    out = m(ids, types, output_hidden_states=True)
    assert out.last_hidden_state.shape == (3, 12, 32)
    assert out.pooled_output.shape == (3, 32)
    assert out.mlm_logits.shape == (3, 12, 97)
    assert out.sentence_logits.shape == (3, 2)
    assert len(out.hidden_states) == cfg.num_layers + 1
    assert all(h.shape == (3, 12, 32) for h in out.hidden_states)
    assert out.loss is None
    torch.testing.assert_close(out.hidden_states[-1], out.last_hidden_state)


@pytest.mark.parametrize("name", ["ci-albert", "ci-bert", "course-albert", "course-bert"])
def test_count_parameters_matches_built_model(name):
    cfg = AlbertConfig.preset(name)
    assert unique_parameter_count(ma.AlbertModel(cfg)) == ma.count_parameters(cfg)


@pytest.mark.parametrize("sharing, groups, inner", [("all", 1, 1), ("all", 2, 1), ("all", 2, 2),
                                                    ("attention", None, 1), ("ffn", None, 1),
                                                    ("none", None, 1)])
def test_count_parameters_every_strategy(sharing, groups, inner):
    cfg = tiny(sharing=sharing, num_hidden_groups=groups, inner_group_num=inner)
    assert unique_parameter_count(ma.AlbertModel(cfg)) == ma.count_parameters(cfg)


def test_all_shared_layers_are_the_same_tensors():
    enc = ma.AlbertModel(tiny(sharing="all")).encoder
    layers = [enc.groups[enc.group_of(i)][0] for i in range(4)]
    assert all(layer is layers[0] for layer in layers)
    # Depth is free in parameters: 4 or 24 applications of the layer cost the same.
    assert ma.count_parameters(tiny(num_layers=24)) == ma.count_parameters(tiny(num_layers=4))


def test_partial_sharing_ties_exactly_one_block():
    attn = ma.AlbertModel(tiny(sharing="attention")).encoder.groups
    assert all(g[0].attention is attn[0][0].attention for g in attn)
    assert len({id(g[0].feed_forward) for g in attn}) == 4
    ffn = ma.AlbertModel(tiny(sharing="ffn")).encoder.groups
    assert all(g[0].feed_forward is ffn[0][0].feed_forward for g in ffn)
    assert len({id(g[0].attention) for g in ffn}) == 4
    none = ma.AlbertModel(tiny(sharing="none")).encoder.groups
    assert len({id(p) for p in none.parameters()}) == 4 * len(list(none[0].parameters()))


def test_shared_gradient_accumulates_over_layers():
    """A shared layer gets one gradient: the sum of what every application contributes."""
    cfg = tiny(sharing="all")
    m = model(cfg)
    ids, types = batch(cfg)
    m(ids, types).sentence_logits.sum().backward()
    shared = m.albert.encoder.groups[0][0].attention.qkv.weight
    assert shared.grad is not None and shared.grad.abs().sum() > 0


def test_groups_follow_hf_layout():
    enc = ma.AlbertModel(tiny(num_layers=6, num_hidden_groups=3)).encoder
    assert [enc.group_of(i) for i in range(6)] == [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("sharing", ["all", "none"])
def test_padding_invariance(sharing):
    """Appending padding changes no output at real positions, and no loss."""
    cfg = tiny(sharing=sharing)
    m = model(cfg)
    ids, types = batch(cfg, N=10)
    labels = torch.full_like(ids, -100)
    labels[:, [2, 5, 7]] = ids[:, [2, 5, 7]]
    sentence = torch.tensor([0, 1, 1])
    ref = m(ids, types, torch.ones_like(ids), mlm_labels=labels, sentence_labels=sentence,
            output_hidden_states=True)

    pad = 6
    ids_p = torch.cat([ids, torch.zeros(3, pad, dtype=torch.long)], 1)
    types_p = torch.cat([types, torch.zeros(3, pad, dtype=torch.long)], 1)
    mask_p = torch.cat([torch.ones_like(ids), torch.zeros(3, pad, dtype=torch.long)], 1)
    labels_p = torch.cat([labels, torch.full((3, pad), -100)], 1)
    out = m(ids_p, types_p, mask_p, mlm_labels=labels_p, sentence_labels=sentence, output_hidden_states=True)

    for a, b in zip(ref.hidden_states, out.hidden_states):
        torch.testing.assert_close(b[:, :10], a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.pooled_output, ref.pooled_output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.mlm_logits, ref.mlm_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, ref.loss, atol=1e-6, rtol=1e-6)


def test_padding_is_not_attended():
    """Changing the ids under padding changes nothing at real positions."""
    cfg = tiny()
    m = model(cfg)
    ids, types = batch(cfg, N=10)
    mask = torch.ones_like(ids)
    mask[:, 7:] = 0
    a = m(ids, types, mask).last_hidden_state
    ids2 = ids.clone()
    ids2[:, 7:] = 11
    b = m(ids2, types, mask).last_hidden_state
    torch.testing.assert_close(a[:, :7], b[:, :7], atol=1e-6, rtol=1e-6)


def test_math_and_sdpa_backends_agree():
    cfg = tiny()
    ids, types = batch(cfg)
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    outs = [model(cfg.replace(attention_backend=b))(ids, types, mask, output_hidden_states=True)
            for b in ("math", "sdpa")]
    for a, b in zip(outs[0].hidden_states, outs[1].hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_mlm_logits_only_at_predicted_positions():
    cfg = tiny()
    m = model(cfg)
    ids, types = batch(cfg)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[2, 9] = ids[0, 3], ids[2, 9]
    full = m(ids, types).mlm_logits                                          # (B, N, V)
    out = m(ids, types, mlm_labels=labels)
    assert out.mlm_logits.shape == (2, cfg.vocab_size)
    torch.testing.assert_close(out.mlm_logits, full[[0, 2], [3, 9]])
    expected = torch.nn.functional.cross_entropy(full.reshape(-1, cfg.vocab_size), labels.reshape(-1))
    torch.testing.assert_close(out.mlm_loss, expected)


def test_loss_sums_mlm_and_sentence_losses():
    cfg = tiny()
    m = model(cfg, "nsp")
    ids, types = batch(cfg)
    labels = ids.masked_fill(torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) > 0.2, -100)
    out = m(ids, types, mlm_labels=labels, sentence_labels=torch.tensor([1, 0, 1]))
    torch.testing.assert_close(out.loss, out.mlm_loss + out.sentence_loss)
    assert model(cfg, None)(ids, types).sentence_logits is None


def test_decoder_is_tied_to_word_embeddings():
    m = model(tiny())
    assert m.mlm_head.decoder_weight is m.albert.embeddings.word_embeddings.weight


def test_bert_shape_has_no_projection():
    m = ma.AlbertModel(AlbertConfig.preset("ci-bert"))
    assert isinstance(m.embeddings.projection, torch.nn.Identity)


def test_too_long_input_is_a_clear_error():
    cfg = tiny()
    with pytest.raises(ValueError, match="sequence length 41 exceeds max_position_embeddings 40"):
        check_batch(cfg, torch.ones(1, 41, dtype=torch.long))


def test_unknown_sentence_task():
    with pytest.raises(ValueError, match="unknown sentence_task 'mlm'"):
        ma.AlbertForPretraining(tiny(), "mlm")


def test_deterministic_given_seed():
    cfg = tiny()
    ids, types = batch(cfg)
    a = model(cfg, seed=3)(ids, types).mlm_logits
    b = model(cfg, seed=3)(ids, types).mlm_logits
    assert torch.equal(a, b)


@pytest.mark.parametrize("name, changes", [("ci-albert", {}), ("ci-bert", {}),
                                           ("ci-albert", {"sharing": "none", "num_hidden_groups": 2})])
def test_forward_flops_formula_matches_a_count_of_the_model(name, changes):
    from torch.utils.flop_counter import FlopCounterMode

    cfg = ma.AlbertConfig.preset(name, attention_backend="math", **changes)   # explicit matmuls to count
    B, N = 3, 24
    ids = torch.randint(5, cfg.vocab_size, (B, N), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[:, ::4] = ids[:, ::4]                                   # 6 predicted positions per sequence
    model = ma.AlbertForPretraining(cfg).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids, mlm_labels=labels, sentence_labels=torch.zeros(B, dtype=torch.long))
    assert counter.get_total_flops() == B * sum(ma.forward_flops(cfg, N, predicted=6).values())


# The paper's printed counts (millions): Table 1 and Tables 3/4 (ALBERT-base, H = 768, by E and sharing).
PAPER_TABLE_1 = {"bert-base": 108, "bert-large": 334, "albert-base": 12, "albert-large": 18,
                 "albert-xlarge": 60, "albert-xxlarge": 235}
PAPER_TABLES_3_4 = {(64, "none"): 87, (64, "all"): 10, (128, "none"): 89, (128, "all"): 12,
                    (128, "attention"): 64, (128, "ffn"): 38, (256, "none"): 93, (256, "all"): 16,
                    (768, "none"): 108, (768, "all"): 31, (768, "attention"): 83, (768, "ffn"): 57}


def test_paper_counts_leave_the_pooler_out_of_not_shared_models_only():
    """Lesson 02's explanation: not-shared rows match our counts without the pooler, shared rows with it,
    and ALBERT-xlarge / -xxlarge match neither."""
    base = ma.AlbertConfig.preset("albert-base")
    rows = {name: (ma.AlbertConfig.preset(name), paper) for name, paper in PAPER_TABLE_1.items()}
    rows.update({(E, s): (base.replace(embedding_size=E, sharing=s, embedding_projection=E != 768), paper)
                 for (E, s), paper in PAPER_TABLES_3_4.items()})
    for row, (cfg, paper) in rows.items():
        total, pooler = ma.count_parameters(cfg), ma.parameter_breakdown(cfg)["pooler"]
        with_pooler, without = round(total / 1e6) == paper, round((total - pooler) / 1e6) == paper
        if row in ("albert-xlarge", "albert-xxlarge"):
            assert not with_pooler and not without, row
        elif cfg.sharing == "none":
            assert without and not with_pooler, row
        else:
            assert with_pooler, row


def test_the_losses_divide_by_the_counts_a_trainer_gives():
    """Given the global batch's counts, the micro-batches' losses add up to the global batch's loss."""
    cfg = tiny()
    ids, types = batch(cfg)
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.3, ids, -100)
    order = torch.tensor([0, 1, 1])
    m = model(cfg).eval()
    whole = m(ids, types, mlm_labels=labels, sentence_labels=order)
    predicted = (labels != -100).sum()
    parts = [m(ids[s], types[s], mlm_labels=labels[s], sentence_labels=order[s], predicted_tokens=predicted,
               examples=3) for s in (slice(0, 1), slice(1, 3))]
    torch.testing.assert_close(parts[0].loss + parts[1].loss, whole.loss)
    torch.testing.assert_close(parts[0].mlm_loss + parts[1].mlm_loss, whole.mlm_loss)
    torch.testing.assert_close(parts[0].sentence_loss + parts[1].sentence_loss, whole.sentence_loss)
    assert not torch.allclose(parts[0].loss, m(ids[:1], types[:1], mlm_labels=labels[:1],
                                               sentence_labels=order[:1]).loss)   # its own counts differ


def test_nothing_to_predict_is_a_zero_loss_not_nan():
    cfg = tiny()
    ids, types = batch(cfg)
    out = model(cfg)(ids, types, mlm_labels=torch.full_like(ids, -100))
    assert out.mlm_loss.item() == 0.0 and out.mlm_logits.shape == (0, cfg.vocab_size)


def test_the_forward_reads_nothing_back_and_check_batch_names_bad_values():
    cfg = tiny()
    ids, types = batch(cfg)
    bad = ids.clone()
    bad[0, 0] = cfg.vocab_size + 5
    with pytest.raises(ValueError, match="input_ids holds"):
        check_batch(cfg, bad, types)
    bad_labels = torch.full_like(ids, -100)
    bad_labels[0, 1] = cfg.vocab_size
    with pytest.raises(ValueError, match="mlm_labels must be in"):
        check_batch(cfg, ids, types, mlm_labels=bad_labels)
    check_batch(cfg, ids, types, mlm_labels=torch.where(ids > 50, ids, -100))
    model(cfg)(ids, types, mlm_labels=torch.where(ids > 50, ids, -100))


def padded_batch(cfg):
    """4 sequences of 16 on DEVICE, the second padded after 10 tokens, a fifth of the tokens predicted."""
    ids, types = batch(cfg, B=4, N=16)
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    labels = torch.where(torch.rand(ids.shape, generator=torch.Generator().manual_seed(2)) < 0.2, ids, -100)
    return tuple(t.to(DEVICE) for t in (ids, types, mask, labels))


@pytest.mark.parametrize("backend, version", [("sdpa", None), ("triton", 1), ("triton", 2)])
def test_the_training_forward_compiles_without_graph_breaks(backend, version):
    """One graph for every backend: the Triton kernels enter it as one opaque operator each way
    (kernels/attention.py), so torch.compile can replay the whole forward and backward as CUDA graphs."""
    if backend == "triton":
        pytest.importorskip("triton")
    cfg = AlbertConfig.preset("ci-albert").replace(attention_backend=backend, attention_dropout_prob=0.0)
    net = model(cfg).train().to(DEVICE)
    if version is not None:
        ma.use_kernel_version(net, version)
    ids, types, mask, labels = padded_batch(cfg)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):   # as train.compiled sets it
        explained = torch._dynamo.explain(net)(ids, types, mask, mlm_labels=labels,
                                               sentence_labels=torch.tensor([0, 1, 0, 1], device=DEVICE))
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_graphed_layers_with_the_triton_kernel_give_eager_loss_and_gradients_under_inductor():
    """compiling.graphed_layers as training runs it (inductor, mode reduce-overhead: CUDA graphs on a GPU,
    none on a CPU) with version 2 of the kernel inside: inductor takes the operator and its exact-stride
    tag, and the compiled layers give the eager model's loss and gradients."""
    pytest.importorskip("triton")
    from minialbert.compiling import graphed_layers

    cfg = AlbertConfig.preset("ci-albert").replace(attention_backend="triton", attention_dropout_prob=0.0,
                                                   hidden_dropout_prob=0.0)
    net = ma.use_kernel_version(model(cfg).train().to(DEVICE), 2)
    ids, types, mask, labels = padded_batch(cfg)

    def loss_and_grads():
        loss = net(ids, types, mask, mlm_labels=labels).mlm_loss
        loss.backward()
        grads = {name: p.grad.clone() for name, p in net.named_parameters() if p.grad is not None}
        net.zero_grad()
        return loss.detach(), grads
    eager_loss, eager_grads = loss_and_grads()
    torch._dynamo.reset()
    graphed_layers(net)
    loss, grads = loss_and_grads()
    torch.testing.assert_close(loss, eager_loss)
    assert grads.keys() == eager_grads.keys()
    for name in grads:
        torch.testing.assert_close(grads[name], eager_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_triton_with_attention_dropout_fails_when_configured():
    with pytest.raises(ValueError, match="has no attention dropout"):
        tiny(attention_backend="triton", attention_dropout_prob=0.1)
    with pytest.raises(ValueError, match="use_kernel_version"):
        tiny(attention_backend="triton-v2")


def test_the_kernel_version_is_the_kernels_setting_bound_on_every_layer():
    pytest.importorskip("triton")
    from minialbert.kernels import DEFAULT_VERSION

    net = ma.AlbertModel(tiny(attention_backend="triton", sharing="none"))
    layers = [m for m in net.modules() if isinstance(m, ma.model.SelfAttention)]
    assert len(layers) > 1 and {m.attention_fn.kernel_version for m in layers} == {DEFAULT_VERSION}
    assert ma.use_kernel_version(net, 2) is net
    assert {m.attention_fn.kernel_version for m in layers} == {2}
    with pytest.raises(ValueError, match="kernel version must be one of"):
        ma.use_kernel_version(net, 3)
    with pytest.raises(ValueError, match="attention_backend='triton'"):
        ma.use_kernel_version(ma.AlbertModel(tiny(attention_backend="sdpa")), 2)


def test_every_configurable_backend_has_an_attention_function():
    from minialbert.config import ATTENTION_BACKENDS
    from minialbert.model import ATTENTION

    assert set(ATTENTION) == set(ATTENTION_BACKENDS)
