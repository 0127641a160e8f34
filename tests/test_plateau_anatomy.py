"""benchmarks/plateau_anatomy.py reads what it says: a uniform attention row is 1.0 of uniform on both its
measures, a row on the two neighbours alone is far from it, and smooth position vectors are alike."""

import argparse
import importlib.util
import math
from pathlib import Path

import pytest
import torch

import minialbert as ma
from minialbert.tokenizer import CLS_ID, MASK_ID, SEP_ID

REPO = Path(__file__).resolve().parent.parent


def load_anatomy():
    path = REPO / "benchmarks" / "plateau_anatomy.py"
    spec = importlib.util.spec_from_file_location("plateau_anatomy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def masked_batch(n: int = 12) -> dict:
    ids = torch.randint(5, 50, (3, n), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    ids[:, 4] = ids[:, 7] = MASK_ID
    return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids),
            "attention_mask": torch.ones_like(ids)}


def model_with_qk(scale: float):
    """The ci model with its query and key weights scaled (0: every attention row uniform)."""
    torch.manual_seed(0)
    model = ma.AlbertForPretraining(ma.AlbertConfig.preset("ci-albert"), "sop").eval()
    with torch.no_grad():
        for m in model.modules():
            if hasattr(m, "qkv"):
                H = m.qkv.out_features // 3
                m.qkv.weight[: 2 * H] *= scale
                m.qkv.bias[: 2 * H] *= scale
    return model


def test_uniform_attention_reads_one_on_every_measure():
    anatomy = load_anatomy()
    for layer in anatomy.where_masks_attend(model_with_qk(0.0), masked_batch()):
        assert layer == {"entropy_share": 1.0, "neighbours_vs_uniform": 1.0, "shown_neighbours_vs_shown": 1.0}


def test_attention_on_the_neighbours_alone_reads_far_from_uniform():
    anatomy = load_anatomy()
    batch = masked_batch(n=12)
    near = (torch.arange(12)[:, None] - torch.arange(12)[None, :]).abs() == 1
    probs = (near.float() / near.sum(-1, keepdim=True)).expand(3, 2, 12, 12)   # (B, h, N, N)
    layer = anatomy.mask_rows(probs, batch)
    # 12 real keys, 10 of them shown (two [MASK]s): each shown neighbour holds 0.5, the shown keys' mean 0.1
    assert layer == {"entropy_share": round(math.log(2) / math.log(12), 3), "neighbours_vs_uniform": 6.0,
                     "shown_neighbours_vs_shown": 5.0}


def test_weight_on_a_masked_neighbour_is_not_read_as_reading_the_neighbours():
    """Two adjacent [MASK]s attending half to the [MASK]s and half evenly to the ten shown tokens: the
    first measure sees the neighbours preferred (each row's [MASK] neighbour holds 0.25), the second does
    not (each row's shown neighbour holds what every shown token holds)."""
    anatomy = load_anatomy()
    batch = masked_batch(n=12)
    batch["input_ids"][:, 7] = batch["input_ids"][:, 3]
    batch["input_ids"][:, 5] = MASK_ID                                         # [MASK]s at 4 and 5
    masked = batch["input_ids"][0] == MASK_ID
    row = torch.where(masked, 0.25, 0.05)                                       # (N,) sums to 1
    probs = row.expand(3, 2, 12, 12)                                            # (B, h, N, N)
    layer = anatomy.mask_rows(probs, batch)
    assert layer["neighbours_vs_uniform"] == 1.8 and layer["shown_neighbours_vs_shown"] == 1.0


def test_smooth_positions_are_alike_and_random_ones_are_not():
    anatomy = load_anatomy()
    model = model_with_qk(1.0)
    positions = model.albert.embeddings.position_embeddings.weight
    with torch.no_grad():
        t = torch.arange(positions.shape[0], dtype=torch.float32)[:, None]
        f = torch.linspace(0.01, 0.2, positions.shape[1])[None, :]
        positions.copy_(torch.sin(t * f))                                 # neighbours alike
    smooth = anatomy.position_structure(model)["adjacent_cosine"]
    with torch.no_grad():
        positions.normal_(0, 0.02, generator=torch.Generator().manual_seed(0))
    rough = anatomy.position_structure(model)["adjacent_cosine"]
    assert smooth > 0.9 and abs(rough) < 0.2, (smooth, rough)


def test_extra_takes_an_entry_and_an_optional_label_and_refuses_anything_else():
    anatomy = load_anatomy()
    assert anatomy.entry_and_dir("albert-mlm=runs/x") == ("albert-mlm", "runs/x")
    assert anatomy.entry_and_dir("albert-mlm-128:init-0.1=runs/y") == ("albert-mlm-128:init-0.1", "runs/y")
    for bad in ("runs/x", "albert-mlm=", "=runs/x", "albert-mlm-128:=runs/y"):
        with pytest.raises(argparse.ArgumentTypeError, match="ENTRY=DIR or ENTRY:LABEL=DIR"):
            anatomy.entry_and_dir(bad)


def test_masked_neighbours_counts_the_real_neighbours_that_are_masks_too():
    anatomy = load_anatomy()
    batch = masked_batch(n=12)                       # [MASK]s at 4 and 7: none of their 4 neighbours masked
    assert anatomy.masked_neighbours(batch) == 0.0
    batch["input_ids"][:, 5] = MASK_ID               # 4, 5 and 7: 4's right and 5's left of 6 neighbours
    assert anatomy.masked_neighbours(batch) == round(2 / 6, 3)
    batch["attention_mask"][:, 8:] = 0               # padding from 8 on: 7's right neighbour is not counted
    assert anatomy.masked_neighbours(batch) == round(2 / 5, 3)
