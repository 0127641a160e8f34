"""LAMB against a hand-written numpy reference, parameter groups, and the warmup/decay schedule."""

import numpy as np
import pytest
import torch

from minialbert import AlbertConfig, AlbertForPretraining
from minialbert.optim import Lamb, make_optimizer, param_groups, warmup_linear_decay


def numpy_lamb(w, grads, lr, wd, adapt, b1=0.9, b2=0.999, eps=1e-6):
    """The official ALBERT LAMB update, one line per equation, in float64."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for g in grads:
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = m / (np.sqrt(v) + eps) + wd * w
        r = np.linalg.norm(w) / np.linalg.norm(u) if adapt else 1.0
        w = w - lr * r * u
    return w


@pytest.mark.parametrize("wd, adapt", [(0.01, True), (0.0, False), (0.1, True)])
def test_lamb_matches_numpy_reference(wd, adapt):
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(4, 3))
    grads = [rng.normal(size=(4, 3)) for _ in range(3)]
    p = torch.nn.Parameter(torch.tensor(w0))
    opt = Lamb([dict(params=[p], weight_decay=wd, layer_adaptation=adapt)], lr=0.05)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    expected = numpy_lamb(w0, grads, 0.05, wd, adapt)
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-12, atol=1e-12)
    assert not np.allclose(expected, w0)


def test_lamb_trust_ratio_makes_step_size_proportional_to_weight_norm():
    for scale in (1.0, 100.0):
        p = torch.nn.Parameter(torch.full((10,), scale, dtype=torch.float64))
        opt = Lamb([p], lr=0.1, weight_decay=0.0)
        p.grad = torch.ones(10, dtype=torch.float64)
        before = p.detach().clone()
        opt.step()
        # ||step|| = lr * ||w|| whatever the gradient's size
        torch.testing.assert_close((before - p.detach()).norm(), 0.1 * before.norm())


def test_zero_weights_get_plain_adam_step():
    p = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    opt = Lamb([p], lr=0.1, weight_decay=0.01)
    p.grad = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    opt.step()
    u = 0.1 * p.grad / (np.sqrt(0.001) * p.grad.abs() + 1e-6)  # m / (sqrt(v) + eps), ratio 1
    torch.testing.assert_close(p.detach(), -0.1 * u)


def test_param_groups_exclude_layernorm_and_bias_and_count_tied_once():
    cfg = AlbertConfig.preset("ci-albert")
    model = AlbertForPretraining(cfg, sentence_task="sop")
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 0.01 and decay["layer_adaptation"]
    assert no_decay["weight_decay"] == 0.0 and not no_decay["layer_adaptation"]
    assert all("LayerNorm" in names[id(p)] or "bias" in names[id(p)] for p in no_decay["params"])
    assert not any("LayerNorm" in names[id(p)] or "bias" in names[id(p)] for p in decay["params"])
    all_params = decay["params"] + no_decay["params"]
    assert len({id(p) for p in all_params}) == len(all_params)          # nothing twice
    assert sum(p.numel() for p in all_params) == sum(p.numel() for p in model.parameters())
    assert any(p is model.mlm_head.decoder_weight for p in decay["params"])  # tied = word embeddings
    assert "mlm_head.bias" in {names[id(p)] for p in no_decay["params"]}


def test_lamb_takes_one_trust_ratio_per_query_key_and_value_of_the_fused_weight():
    """A step on the fused (3H, H) q/k/v weight equals LAMB steps on q, k and v as three tensors, as the
    official code (three variables) takes them; one ratio for the whole fused weight does not."""
    torch.manual_seed(0)
    model = AlbertForPretraining(AlbertConfig.preset("ci-albert"), sentence_task="sop").double()
    qkv = next(p for n, p in model.named_parameters() if n.endswith("qkv.weight"))
    with torch.no_grad():                                   # q, k, v of very different sizes
        sizes = torch.tensor([1.0, 5.0, 0.2], dtype=torch.float64).repeat_interleave(qkv.shape[0] // 3)
        qkv.mul_(sizes[:, None])
    groups = param_groups(model, 0.01, split_fused=True)
    fused = [g for g in groups if g.get("variables")]
    assert len(fused) == 1 and fused[0]["variables"] == 3 and fused[0]["params"] == [qkv]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    q, k, v = (torch.nn.Parameter(t.detach().clone()) for t in qkv.chunk(3))
    separate = Lamb([q, k, v], lr=0.05, weight_decay=0.01)
    ours, one_ratio = make_optimizer("lamb", model, 0.05), make_optimizer("lamb-fused-qkv", model, 0.05)
    before = qkv.detach().clone()
    for _ in range(3):
        grad = torch.randn_like(qkv)
        for t, g in zip((q, k, v), grad.chunk(3)):
            t.grad = g.clone()
        separate.step()
        qkv.grad = grad
        ours.step()
    torch.testing.assert_close(qkv.detach(), torch.cat([q, k, v]).detach(), rtol=1e-12, atol=1e-12)
    steps = {}
    for name, optimizer in (("split", make_optimizer("lamb", model, 0.05)), ("one", one_ratio)):
        with torch.no_grad():
            qkv.copy_(before)
        qkv.grad = torch.ones_like(qkv)
        optimizer.step()
        steps[name] = (before - qkv.detach()).chunk(3)
    for split, one, weight in zip(steps["split"], steps["one"], before.chunk(3)):    # ||step|| = lr ||w||
        torch.testing.assert_close(split.norm(), 0.05 * weight.norm())
        assert not torch.allclose(one.norm(), 0.05 * weight.norm())          # the earlier LAMB: one ratio


def test_make_optimizer_kinds_and_errors():
    model = AlbertForPretraining(AlbertConfig.preset("ci-albert"), sentence_task=None)
    assert isinstance(make_optimizer("lamb", model, 1e-3), Lamb)
    assert isinstance(make_optimizer("adamw", model, 1e-3), torch.optim.AdamW)
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        make_optimizer("sgd", model, 1e-3)


def test_warmup_linear_decay_values():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2.0)
    sched = warmup_linear_decay(opt, warmup_steps=4, total_steps=12)
    lrs = []
    for _ in range(13):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    expected = [0.0, 0.5, 1.0, 1.5, 2.0, 1.75, 1.5, 1.25, 1.0, 0.75, 0.5, 0.25, 0.0]
    np.testing.assert_allclose(lrs, expected)
    with pytest.raises(ValueError, match="warmup_steps"):
        warmup_linear_decay(opt, warmup_steps=20, total_steps=10)
