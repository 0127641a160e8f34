"""The learner's pieces: a right piece passes, each named mistake is recognised, and whatever the
learner wrote (nothing, an exception, a wrong shape, a wrong parameter) gives one line, never an error."""

import math

import pytest
import torch
import torch.nn.functional as F
from test_pieces_06_12 import RIGHT as LATER_06_12
from torch import nn

from minialbert.course.pieces import PIECES, check
from minialbert.model import AlbertModel, TransformerLayer

# ------------------------------------------------------------------ pieces written as a learner would


def embedding_parameters(V, E, H):
    return V * E + E * H + H


class MyFactorizedEmbedding(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        E = cfg.embedding_size
        self.word_embeddings = nn.Embedding(cfg.vocab_size, E, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, E)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, E)
        self.LayerNorm = nn.LayerNorm(E, eps=cfg.layer_norm_eps)
        self.projection = nn.Linear(E, cfg.hidden_size)

    def forward(self, input_ids, token_type_ids):
        positions = torch.arange(input_ids.shape[1])
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(token_type_ids))
        return self.projection(self.LayerNorm(x))


def split_heads(x, num_heads):
    B, N, H = x.shape
    return x.view(B, N, num_heads, H // num_heads).transpose(1, 2)


def merge_heads(x):
    B, h, N, d = x.shape
    return x.transpose(1, 2).reshape(B, N, h * d)


def attention(q, k, v, attend):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~attend, float("-inf")).softmax(dim=-1) @ v


class MyLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, F_ = cfg.hidden_size, cfg.intermediate_size
        self.num_heads = cfg.num_heads
        self.qkv, self.dense = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.attention_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)
        self.ffn, self.ffn_output = nn.Linear(H, F_), nn.Linear(F_, H)
        self.ffn_norm = nn.LayerNorm(H, eps=cfg.layer_norm_eps)

    def forward(self, x, attend):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        x = self.attention_norm(x + self.dense(merge_heads(attention(q, k, v, attend))))
        return self.ffn_norm(x + self.ffn_output(F.gelu(self.ffn(x), approximate="tanh")))


class MyEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_layers, self.layer = cfg.num_layers, TransformerLayer(cfg)

    def forward(self, x, attend):
        for _ in range(self.num_layers):
            x = self.layer(x, attend)
        return x


class MyMLMHead(nn.Module):
    def __init__(self, cfg, word_embeddings):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.embedding_size)
        self.LayerNorm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.word_embeddings = word_embeddings
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, x):
        x = self.LayerNorm(F.gelu(self.dense(x), approximate="tanh"))
        return x @ self.word_embeddings.weight.T + self.bias


def sentence_loss(pooled, labels, head):
    return F.cross_entropy(head(pooled), labels)


def ngram_probabilities(max_n):
    weights = [1 / n for n in range(1, max_n + 1)]
    return [w / sum(weights) for w in weights]


def whole_words(input_ids, vocab):
    words, after_special = [], True
    for position, token in enumerate(input_ids):
        if vocab.is_special[token]:
            after_special = True
            continue
        if after_special or vocab.is_word_start[token]:
            words.append([position])
        else:
            words[-1].append(position)
        after_special = False
    return words


def corrupt(token, vocab, rng):
    r = rng.random()
    return vocab.mask_id if r < 0.8 else rng.choice(vocab.random_ids) if r < 0.9 else token


def sop_pair(a, b, other, swap):
    return (b, a, 1) if swap else (a, b, 0)


def nsp_pair(a, b, other, use_random):
    return (a, other, 1) if use_random else (a, b, 0)


def trust_ratio(weight, update):
    w, u = weight.norm(), update.norm()
    return w / u if w > 0 and u > 0 else torch.tensor(1.0)


def mask_accuracy(logits, labels):
    return (logits.argmax(-1) == labels).float().mean().item()


def unigram_accuracy(train_targets, heldout_targets):
    return (heldout_targets == torch.bincount(train_targets).argmax()).float().mean().item()


def training_step(model, batch, optimizer, scheduler, clip_norm, zero=True, clip=True, schedule=True):
    loss = model(**batch).loss
    loss.backward()
    if clip:
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    optimizer.step()
    if schedule:
        scheduler.step()
    if zero:
        optimizer.zero_grad()
    return loss.item()


class MyClassifier(nn.Module):
    def __init__(self, cfg, num_labels):
        super().__init__()
        self.albert = AlbertModel(cfg)
        self.classifier = nn.Linear(cfg.hidden_size, num_labels)

    def forward(self, input_ids, token_type_ids, attention_mask):
        return self.classifier(self.albert(input_ids, token_type_ids, attention_mask).pooled_output)


def online_softmax(q, k, v, block):
    m = torch.full((q.shape[0], 1), float("-inf"))
    total, acc = torch.zeros(q.shape[0], 1), torch.zeros_like(q)
    for start in range(0, k.shape[0], block):
        scores = q @ k[start:start + block].T / math.sqrt(q.shape[-1])
        m_new = torch.maximum(m, scores.max(-1, keepdim=True).values)
        p, alpha = (scores - m_new).exp(), (m - m_new).exp()
        total, acc = total * alpha + p.sum(-1, keepdim=True), acc * alpha + p @ v[start:start + block]
        m = m_new
    return acc / total


def layer_transition(before, after):
    cosine = F.cosine_similarity(after, before, dim=-1).clamp(-1, 1)
    return (after - before).norm(dim=-1), torch.rad2deg(torch.arccos(cosine))


RIGHT = {"embedding_parameters": embedding_parameters, "factorized_embedding": MyFactorizedEmbedding,
         "split_heads": split_heads, "merge_heads": merge_heads, "attention": attention, "layer": MyLayer,
         "shared_encoder": MyEncoder, "mlm_head": MyMLMHead, "sentence_loss": sentence_loss,
         "ngram_probabilities": ngram_probabilities, "whole_words": whole_words, "corrupt": corrupt,
         "sop_pair": sop_pair, "nsp_pair": nsp_pair, "trust_ratio": trust_ratio,
         "mask_accuracy": mask_accuracy,
         "unigram_accuracy": unigram_accuracy, "training_step": training_step, "classifier": MyClassifier,
         "online_softmax": online_softmax, "layer_transition": layer_transition}


def verdict(capsys, name, piece) -> tuple[bool, str]:
    ok = check(name, piece)
    out = capsys.readouterr().out
    assert out.count("\n") == 1, f"not one line: {out!r}"
    return ok, out


def test_every_piece_has_a_right_solution_here():
    # lesson 10's Triton kernel is tested in tests/test_triton_piece.py (it needs triton)
    # lessons 04 and 05's later pieces have theirs in tests/test_pieces_04_05.py
    later_04_05 = {"mask_budget", "ngram_draw", "span_placement", "mlm_loss", "lamb_update",
                   "decay_exclusion", "lr_factor", "training_loop"}
    # lessons 08 and 09's first pieces have theirs in tests/test_pieces_08_09.py, and the pieces lessons 06
    # to 12 gained beside their first ones in tests/test_pieces_06_12.py
    lessons_08_09 = {"cross_evaluation", "table2_parameters"}
    assert set(RIGHT) == (set(PIECES) - {"online_softmax_triton"} - later_04_05 - lessons_08_09
                          - set(LATER_06_12))


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_a_right_piece_passes(capsys, name):
    ok, out = verdict(capsys, name, RIGHT[name])
    assert ok and out.startswith(f"{name}: right: matches the package on 3 random inputs")


FUNCTION_MISTAKES = [(p.name, what, variant) for p in PIECES.values() if p.kind == "function"
                     for what, variant in p.mistakes]


@pytest.mark.parametrize("name, what, variant", FUNCTION_MISTAKES, ids=[m[1] for m in FUNCTION_MISTAKES])
def test_each_named_mistake_in_a_function_is_recognised(capsys, name, what, variant):
    ok, out = verdict(capsys, name, variant)
    assert not ok and out.startswith(f"{name}: wrong: ") and out.endswith(f"that is what {what} gives\n")


class PreLN(MyLayer):
    def forward(self, x, attend):
        y = self.attention_norm(x)
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(y).chunk(3, dim=-1))
        x = x + self.dense(merge_heads(attention(q, k, v, attend)))
        return x + self.ffn_output(F.gelu(self.ffn(self.ffn_norm(x)), approximate="tanh"))


class ErfGelu(MyLayer):
    def forward(self, x, attend):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv(x).chunk(3, dim=-1))
        x = self.attention_norm(x + self.dense(merge_heads(attention(q, k, v, attend))))
        return self.ffn_norm(x + self.ffn_output(F.gelu(self.ffn(x))))


class AppliedOnce(MyEncoder):
    def forward(self, x, attend):
        return self.layer(x, attend)


class NoNorm(MyMLMHead):
    def forward(self, x):
        return F.gelu(self.dense(x), approximate="tanh") @ self.word_embeddings.weight.T + self.bias


@pytest.mark.parametrize("name, wrong, said", [
    ("layer", PreLN, "a pre-LN layer"), ("layer", ErfGelu, "the exact erf GELU"),
    ("shared_encoder", AppliedOnce, "applying the layer once"),
    ("mlm_head", NoNorm, "leaving out the LayerNorm"),
])
def test_named_mistakes_in_modules_are_recognised(capsys, name, wrong, said):
    ok, out = verdict(capsys, name, wrong)
    assert not ok and said in out, out


def test_a_missing_piece_says_not_written_and_does_not_raise(capsys):
    def attention(q, k, v, attend):
        raise NotImplementedError("Exercise: scores, mask, softmax, weighted values")
    ok, out = verdict(capsys, "attention", attention)
    assert not ok and out.startswith("attention: not written yet (Exercise: scores")
    assert "the rest of the lesson uses the package's version" in out


def test_an_exception_in_the_learners_code_is_one_line(capsys):
    ok, out = verdict(capsys, "split_heads", lambda x, h: x.view(h, -1, 7))
    assert not ok and out.startswith("split_heads: wrong: your code raised RuntimeError: ")


def test_a_wrong_shape_names_both_shapes(capsys):
    ok, out = verdict(capsys, "merge_heads", lambda x: x.flatten(1))
    assert not ok and "shape (2, 60), the package's is (2, 5, 12)" in out


def test_a_wrong_value_names_the_first_position_and_the_count(capsys):
    def off_by_one_at_the_max(q, k, v, attend):
        return attention(q, k, v, attend) + (q == q.max())
    ok, out = verdict(capsys, "attention", off_by_one_at_the_max)
    assert not ok and "values differ at [" in out and "of 120 values differ" in out


def test_module_parameters_are_matched_by_name_with_a_clear_line(capsys):
    class Renamed(MyFactorizedEmbedding):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.project = self.projection
            del self.projection

        def forward(self, input_ids, token_type_ids):
            return self.project(self.LayerNorm(self.word_embeddings(input_ids)))
    ok, out = verdict(capsys, "factorized_embedding", Renamed)
    assert not ok and "your module has no parameter projection.bias, projection.weight" in out


def test_an_untied_decoder_is_caught(capsys):
    class Untied(MyMLMHead):
        def __init__(self, cfg, word_embeddings):
            super().__init__(cfg, word_embeddings)
            self.decoder = nn.Parameter(word_embeddings.weight.detach().clone())

        def forward(self, x):
            return self.LayerNorm(F.gelu(self.dense(x), approximate="tanh")) @ self.decoder.T + self.bias
    ok, out = verdict(capsys, "mlm_head", Untied)
    assert not ok and "parameters the package's has not: decoder" in out


def test_a_gradient_difference_is_caught_even_when_outputs_agree(capsys):
    class Detached(MyEncoder):
        def forward(self, x, attend):
            for step in range(self.num_layers):
                x = self.layer(x if step < self.num_layers - 1 else x.detach(), attend)
            return x
    ok, out = verdict(capsys, "shared_encoder", Detached)
    assert not ok and "the outputs agree but the gradient of layer." in out


def test_the_pad_row_must_get_no_gradient(capsys):
    class NoPaddingIdx(MyFactorizedEmbedding):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.embedding_size)
    ok, out = verdict(capsys, "factorized_embedding", NoPaddingIdx)
    assert not ok and "the gradient of word_embeddings.weight differs: values differ at [0, 0]" in out


@pytest.mark.parametrize("forgot", ["zero", "clip", "schedule"])
def test_a_training_step_missing_a_part_is_caught(capsys, forgot):
    def step(*args):
        return training_step(*args, **{forgot: False})
    ok, out = verdict(capsys, "training_step", step)
    assert not ok and out.startswith("training_step: wrong: ") and "differs" in out, out


def test_corrupt_with_the_wrong_shares_is_caught(capsys):
    def seventy_twenty_ten(token, vocab, rng):
        r = rng.random()
        return vocab.mask_id if r < 0.7 else rng.choice(vocab.random_ids) if r < 0.9 else token
    ok, out = verdict(capsys, "corrupt", seventy_twenty_ten)
    assert not ok and "[MASK] 0.70" in out and "ALBERT's are 0.8 / 0.1 / 0.1" in out, out


def test_an_unknown_piece_is_an_error():
    with pytest.raises(ValueError, match="unknown piece 'atention'; the pieces: "):
        check("atention", attention)


# ------------------------------------------------------------------ wrong answers never right, and no raise


@pytest.mark.parametrize("name, piece, said", [
    ("attention", lambda *a: attention(*a) + 1j, "it returns complex numbers (a torch.complex64 tensor)"),
    ("attention", lambda *a: attention(*a) + 0j, "it returns complex numbers (a torch.complex64 tensor)"),
    ("embedding_parameters", lambda V, E, H: complex(embedding_parameters(V, E, H)), "it returns complex"),
    ("whole_words", lambda ids, vocab: [[p + 0j for p in word] for word in whole_words(ids, vocab)],
     "it returns complex numbers (such as ("),
])
def test_a_complex_result_is_wrong_even_when_its_real_part_is_right(capsys, name, piece, said):
    """Comparing drops no imaginary part: the package's result is real, so a complex one is wrong."""
    ok, out = verdict(capsys, name, piece)
    assert not ok and out.startswith(f"{name}: wrong: ") and said in out, out


def test_a_result_on_the_meta_device_is_named(capsys):
    ok, out = verdict(capsys, "attention", lambda *a: attention(*a).to("meta"))
    assert not ok and out.startswith("attention: wrong: it returns a tensor on the meta device"), out


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("this message cannot be printed")


class Faceless:
    def __repr__(self):
        raise RuntimeError("no repr")


def raise_unprintable(*args):
    raise Unprintable()


def test_an_exception_that_cannot_be_printed_is_still_one_line(capsys):
    ok, out = verdict(capsys, "attention", raise_unprintable)
    assert not ok and out.startswith("attention: wrong: your code raised Unprintable (its message cannot be "
                                     "printed); the rest of the lesson uses the package's version"), out


def test_a_result_that_cannot_be_printed_is_still_one_line(capsys):
    ok, out = verdict(capsys, "embedding_parameters", lambda V, E, H: Faceless())
    assert not ok and out.startswith("embedding_parameters: wrong: yours gives a Faceless (it cannot be "
                                     "printed), the package's 1"), out


def test_a_not_written_piece_whose_message_cannot_be_printed_is_one_line(capsys):
    class Unwritten(NotImplementedError):
        def __str__(self):
            raise RuntimeError("no")

    def attention(q, k, v, attend):
        raise Unwritten()
    ok, out = verdict(capsys, "attention", attention)
    assert not ok and out.startswith("attention: not written yet (its message cannot be printed)"), out


@pytest.mark.parametrize("code", [0, 1, "bye"])
def test_a_piece_that_calls_exit_does_not_end_the_kernel(capsys, code):
    def exits(*args):
        raise SystemExit(code)
    ok, out = verdict(capsys, "attention", exits)
    assert not ok and out.startswith("attention: wrong: your code called exit() (it raised SystemExit)"), out


def test_the_learner_can_still_stop_a_check_with_an_interrupt():
    def interrupted(*args):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        check("attention", interrupted)
