"""The pieces of lessons 11 and 12: our weights under transformers' names and back, each checked by loading
them into the other library's model (11); the gradient norm of each application of a shared or unshared
layer, and the shares of a masked batch (12).

Lesson 11's two pieces are property pieces: the check builds a random ALBERT, asks the learner's function
for the weights in the other naming, compares them name by name with minialbert.hf's (to_hf, from_hf), then
loads them (transformers' AlbertForPreTraining, or ours, with strict=True) and compares the two models'
outputs on a random batch. transformers is imported there, when such a check runs.
"""

from __future__ import annotations

import torch

from ... import hf
from ...config import IGNORE_INDEX, MASK_ID
from ...evaluation import KINDS, position_kinds
from ...model import AlbertForPretraining
from ..experiments.layer_gradients import application_gradient_norms, untied
from .checking import CHECK_CONFIG, Piece, difference, pretraining_batch, randomize, short


# ------------------------------------------------------------------ lesson 11
def _random_model(g, trial) -> AlbertForPretraining:
    """Trials 0 and 1: one shared layer; trial 2: nothing shared (one transformers group per layer)."""
    model = AlbertForPretraining(CHECK_CONFIG.replace(sharing="none" if trial == 2 else "all")).eval()
    randomize(model, g)
    return model


def _state_difference(yours, theirs: dict, whose: str) -> str | None:
    """None when `yours` holds the same tensors under the same names as `theirs`, else what differs."""
    if not isinstance(yours, dict):
        return f"it returns {short(yours)}, not a dict of tensors by name"
    if missing := sorted(set(theirs) - set(yours)):
        return f"{len(missing)} of {whose} names missing: {_few(missing)}"
    if extra := sorted(set(yours) - set(theirs)):
        return f"names {whose} model has not: {_few(extra)}"
    for name, tensor in theirs.items():
        if (problem := difference(yours[name], tensor)) is not None:
            return f"{name}: {problem}"
    return None


def _few(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _named_state(yours, mistakes, *inputs) -> str:
    """'; that is what <mistake> gives' when `yours` is the state a mistake produces."""
    for what, variant in mistakes:
        if _state_difference(yours, variant(*inputs), "") is None:
            return f"; that is what {what} gives"
    return ""


def _outputs_differ(ours: AlbertForPretraining, theirs, batch: dict, how: str) -> tuple[str | None, float]:
    """Our model and transformers' on the same batch: the MLM and the sentence logits must agree."""
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    with torch.no_grad():
        mine, other = ours(**inputs), theirs(**inputs)
    largest = 0.0
    for what, a, b in (("MLM logits", mine.mlm_logits, other.prediction_logits),
                       ("sentence-order logits", mine.sentence_logits, other.sop_logits)):
        if (problem := difference(a, b)) is not None:
            return f"{how}, the two models' {what} differ: {problem}", 0.0
        largest = max(largest, (a - b).abs().max().item())
    return None, largest


def _transformers_model(config: dict, state: dict):
    """transformers' AlbertForPreTraining of `config` with `state` loaded (strict)."""
    import transformers

    cfg = transformers.AlbertConfig(**config, attn_implementation="eager")
    model = transformers.AlbertForPreTraining(cfg)
    model.load_state_dict(state, strict=True)
    return model.eval()


def _to_transformers_variant(model, order=(0, 1, 2), dim=0, decoder_bias=True):
    """to_hf's state with one thing changed: the thirds of qkv in another order or cut along the input
    columns, or without the tied decoder's bias."""
    state, _ = hf.to_hf(model)
    ours = model.state_dict()
    for name in [n for n in state if n.endswith(("attention.query.weight", "attention.query.bias"))]:
        kind = name.rsplit(".", 1)[1]
        layer = name.rsplit(".attention.", 1)[0].replace("albert_layer_groups", "groups").replace(
            ".albert_layers.", ".")
        fused = ours[f"{layer}.attention.qkv.{kind}"]
        thirds = fused.chunk(3, dim=dim if fused.dim() > 1 else 0)
        for part, k in zip(("query", "key", "value"), order):
            state[name.replace("query", part)] = thirds[k]
    if not decoder_bias:
        del state["predictions.decoder.bias"]
    return state


TO_MISTAKES = (("the key and the query swapped (our qkv rows are q, then k, then v)",
                lambda m: _to_transformers_variant(m, order=(1, 0, 2))),
               ("cutting qkv along the input columns instead of the output rows",
                lambda m: _to_transformers_variant(m, dim=1)),
               ("leaving out the tied decoder's bias (transformers' state dict names "
                "predictions.decoder.bias too)", lambda m: _to_transformers_variant(m, decoder_bias=False)))


def _to_transformers(yours, g, trial) -> tuple[str | None, float]:
    """The learner's to_transformers(model) -> state dict: transformers' names and tensors (hf.to_hf's), then
    loaded into transformers' AlbertForPreTraining, whose outputs must be our model's."""
    model = _random_model(g, trial)
    theirs, config = hf.to_hf(model)
    mine = yours(model)
    if (problem := _state_difference(mine, theirs, "transformers'")) is not None:
        return problem + _named_state(mine, TO_MISTAKES, model), 0.0
    return _outputs_differ(model, _transformers_model(config, mine), pretraining_batch(g, model.config),
                           "loaded into transformers' AlbertForPreTraining")


def _package_to_transformers(model):
    return hf.to_hf(model)[0]


def _package_from_transformers(hf_state, model):
    """hf.from_hf's weights, loaded into `model`."""
    model.load_state_dict(hf.from_hf(hf_state, hf.to_hf(model)[1]).state_dict())
    return model


def _fused_swapped(hf_state, model):
    """Our weights with the query and the key swapped in every fused qkv."""
    state = {k: v.clone() for k, v in hf_state.items()}
    for name in [n for n in state if ".attention.query." in n]:
        state[name], state[name.replace("query", "key")] = state[name.replace("query", "key")], state[name]
    return _package_from_transformers(state, model)


FROM_MISTAKES = (("fusing the key before the query (our qkv rows are q, then k, then v)", _fused_swapped),)


def _from_transformers(yours, g, trial) -> tuple[str | None, float]:
    """The learner's from_transformers(hf_state, model) -> model: a fresh model of ours must come back with
    hf.from_hf's weights, and give transformers' outputs on the same batch."""
    source = _random_model(g, trial)
    hf_state, config = hf.to_hf(source)
    expected = hf.from_hf(hf_state, config).state_dict()
    fresh = AlbertForPretraining(source.config).eval()
    mine = yours({k: v.clone() for k, v in hf_state.items()}, fresh)
    if not isinstance(mine, AlbertForPretraining):
        return f"it returns {short(mine)}; return the model, with the weights loaded", 0.0
    state = mine.state_dict()
    if (problem := _state_difference(state, expected, "our")) is not None:
        wrong = [(what, variant(hf_state, AlbertForPretraining(source.config).eval()).state_dict())
                 for what, variant in FROM_MISTAKES]
        named = next((f"; that is what {what} gives" for what, found in wrong
                      if _state_difference(state, found, "") is None), "")
        return problem + named, 0.0
    return _outputs_differ(mine.eval(), _transformers_model(config, hf_state),
                           pretraining_batch(g, source.config), "with yours loaded into our model")


# ------------------------------------------------------------------ lesson 12
def _gradient_inputs(g, trial):
    """Trials 0 and 2: one shared layer; trial 1: nothing shared. Every weight random; a pretraining batch."""
    model = AlbertForPretraining(CHECK_CONFIG.replace(sharing="none" if trial == 1 else "all")).eval()
    randomize(model, g)
    return model, pretraining_batch(g, CHECK_CONFIG)


def _one_gradient(model, batch):
    """The stored layers' gradients as they are: a shared stack has one (the sum of the contributions)."""
    copy = AlbertForPretraining(model.config, model.sentence_task).eval()
    copy.load_state_dict(model.state_dict())
    with torch.enable_grad():                     # a mistake is computed under no_grad: it needs a backward
        copy(**batch).loss.backward()
    return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item()
            for layer in copy.albert.encoder.groups]


def _tensor_norms_added(model, batch):
    """Each application's tensors' norms added up, instead of one norm over all its tensors together."""
    copy = untied(model)
    with torch.enable_grad():
        copy(**batch).loss.backward()
    return [sum(p.grad.norm().item() for p in layer.parameters()) for layer in copy.albert.encoder.groups]


def _masked_batch(g, trial):
    """A masked batch as the data pipeline makes it: real tokens, [CLS], [SEP] and padding; about 15% of the
    real tokens chosen, of those about 80% shown as [MASK], 10% as a random token, 10% as themselves."""
    V = CHECK_CONFIG.vocab_size
    ids = torch.randint(MASK_ID + 1, V, (8, 24), generator=g)
    ids[:, 0], ids[:, 12], ids[:, -1] = 2, 3, 3                                   # [CLS] A [SEP] B [SEP]
    ids[trial + 1:4, 18:] = 0                                                      # some rows padded
    ids[trial + 1:4, 17] = 3
    real = ids > MASK_ID
    chosen = real & (torch.rand(ids.shape, generator=g) < 0.15)
    labels = torch.where(chosen, ids, IGNORE_INDEX)
    draw = torch.rand(ids.shape, generator=g)
    shown = torch.where(draw < 0.8, MASK_ID, torch.where(draw < 0.9, torch.randint(MASK_ID + 1, V, ids.shape,
                                                                                    generator=g), ids))
    return torch.where(chosen, shown, ids), labels


def package_masking_shares(input_ids: torch.Tensor, mlm_labels: torch.Tensor) -> tuple[float, ...]:
    """What a masked batch shows (lesson 12's claim 6; the package's version of its piece): (the chosen share
    of the real tokens; of the chosen, the shares shown as [MASK], as a random token and as themselves;
    the share of the real tokens that show [MASK]). Real tokens: every id above the special ones."""
    chosen = mlm_labels != IGNORE_INDEX
    real = torch.where(chosen, mlm_labels, input_ids) > MASK_ID
    kinds = position_kinds(input_ids, mlm_labels)
    shares = [float((kinds == k).float().mean()) for k in range(len(KINDS))]          # [MASK], random, kept
    return (float(chosen.sum() / real.sum()), *shares, float((input_ids[real] == MASK_ID).float().mean()))


def _shares_of_every_position(input_ids, mlm_labels):
    chosen = mlm_labels != IGNORE_INDEX
    return (float(chosen.float().mean()), *package_masking_shares(input_ids, mlm_labels)[1:4],
            float((input_ids == MASK_ID).float().mean()))


def _kinds_over_real_tokens(input_ids, mlm_labels):
    found = package_masking_shares(input_ids, mlm_labels)
    return (found[0], *(share * found[0] for share in found[1:4]), found[4])


PIECES = (
    # lesson 11
    Piece("to_transformers", "property", _to_transformers, lambda g, trial: (), mistakes=TO_MISTAKES,
          package=_package_to_transformers),
    Piece("from_transformers", "property", _from_transformers, lambda g, trial: (), mistakes=FROM_MISTAKES,
          package=_package_from_transformers),
    # lesson 12
    Piece("layer_gradient_norms", "function", application_gradient_norms, _gradient_inputs,
          mistakes=(("the stored layers' gradients (for a shared stack one norm: the sum of every "
                     "application's contribution)", _one_gradient),
                    ("the norms of a layer's tensors added up, instead of one norm over all of them together",
                     _tensor_norms_added))),
    Piece("masking_shares", "function", package_masking_shares, _masked_batch,
          mistakes=(("the shares of every position, padding and special tokens included, not of the real "
                     "tokens",
                     _shares_of_every_position),
                    ("the [MASK], random and kept shares of all real tokens instead of the chosen ones",
                     _kinds_over_real_tokens))),
)
