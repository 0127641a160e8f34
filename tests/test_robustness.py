"""Regression tests, one per case that once went wrong: nothing silently wrong, nothing lost.

Damaged checkpoints and caches, non-finite training, shared or half-made run directories,
configs changed after creation, bad model inputs, and the CLI's one-line errors.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys
import warnings

import pytest
import torch
from test_train import TINY, args, synthetic_examples, weights

import minialbert as ma
from minialbert import download
from minialbert.checkpoint import NonFiniteError, find_checkpoint, load_checkpoint
from minialbert.config import AlbertConfig
from minialbert.costs import count_parameters
from minialbert.course.commands import main
from minialbert.course.scale import SCALES
from minialbert.evaluation import pretraining_evaluator
from minialbert.inputs import check_batch
from minialbert.model import AlbertForPretraining, AlbertModel
from minialbert.run_directory import RunLockedError, read_metrics, run_lock
from minialbert.train import RunOptions, pretrain


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs on one thread (conftest.one_thread)."""


def flip_bytes(path, offset: int, count: int = 4) -> None:
    raw = bytearray(path.read_bytes())
    for i in range(offset, offset + count):
        raw[i % len(raw)] ^= 0xFF
    path.write_bytes(bytes(raw))


# ---------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.pt", "trainer_state.json", "config.json"])
def test_four_changed_bytes_in_the_latest_checkpoint_are_named(tmp_path, name):
    data = synthetic_examples(16)
    pretrain(TINY, args(steps=2, warmup=0, checkpoint_every=1, eval_every=0), data,
             options=RunOptions(out_dir=tmp_path, progress=False))
    latest = find_checkpoint(tmp_path)
    flip_bytes(latest / name, (latest / name).stat().st_size // 2)
    for attempt in (lambda: load_checkpoint(tmp_path),
                    lambda: pretrain(TINY, args(steps=3, warmup=0, checkpoint_every=1, eval_every=0), data,
                                     options=RunOptions(out_dir=tmp_path, resume=True, progress=False))):
        with pytest.raises(ValueError, match=f"{name} is damaged") as info:
            attempt()
        assert "\n" not in str(info.value)
    assert find_checkpoint(tmp_path) == latest                              # latest untouched


def test_resume_from_the_previous_checkpoint_finishes_the_run_exactly(tmp_path):
    data = synthetic_examples(32)
    a = args(steps=4, warmup=1, checkpoint_every=2, eval_every=2, keep_last=2)
    straight = pretrain(TINY, a, data, pretraining_evaluator(data, TINY, a),
                        RunOptions(out_dir=tmp_path / "straight", progress=False))

    run = tmp_path / "run"
    pretrain(TINY, a, data, pretraining_evaluator(data, TINY, a), RunOptions(out_dir=run, progress=False))
    flip_bytes(run / "checkpoints" / "step-000004" / "optimizer.pt", 100)
    with pytest.raises(ValueError, match="optimizer.pt is damaged.*resume from .*step-000002"):
        pretrain(TINY, a, data, pretraining_evaluator(data, TINY, a),
                 RunOptions(out_dir=run, resume=True, progress=False))
    redone = pretrain(TINY, a, data, pretraining_evaluator(data, TINY, a),
                      RunOptions(out_dir=run, resume_from=run / "checkpoints" / "step-000002",
                                 progress=False))
    assert find_checkpoint(run).name == "step-000004"
    for k, v in weights(straight.model).items():
        assert torch.equal(weights(redone.model)[k], v), k
    assert load_checkpoint(run) is not None                                 # verified again


# ---------------------------------------------------------------------------- non-finite training
@pytest.mark.parametrize("change, message", [
    (dict(lr=math.nan), "lr must be a finite number > 0"),
    (dict(lr=math.inf), "lr must be a finite number > 0"),
    (dict(weight_decay=math.nan), "weight_decay must be a finite number >= 0"),
    (dict(weight_decay=-5.0), "weight_decay must be a finite number >= 0"),
    (dict(eval_examples=0), "eval_examples must be an integer >= 1"),
    (dict(eval_examples=-1), "eval_examples must be an integer >= 1"),
    (dict(eval_every=-1), "eval_every must be an integer >= 0"),
    (dict(checkpoint_every=-1), "checkpoint_every must be an integer >= 0"),
    (dict(steps="3"), "steps must be an integer >= 1"),
    (dict(optimizer="sgd"), "unknown optimizer 'sgd'"),
])
def test_bad_hyper_parameters_are_refused_before_anything_is_written(change, message):
    with pytest.raises(ValueError, match=message):
        args(**change)


def test_scale_warmup_is_clamped_to_a_short_run_with_a_warning():
    with pytest.warns(UserWarning, match="warmup of 5 steps is longer than steps=3: using warmup=3"):
        assert SCALES["ci"].recipe.train_args(steps=3).warmup == 3
    with pytest.raises(ValueError, match="warmup 5 must be between 0 and steps 3"):
        SCALES["ci"].recipe.train_args(steps=3, warmup=5)               # the user's own value: refused


def test_a_non_finite_loss_stops_the_run_and_latest_stays_good(tmp_path):
    data = synthetic_examples(16)
    with pytest.raises(NonFiniteError, match=r"step 2: non-finite train .*mlm_loss = nan"):
        pretrain(TINY, args(steps=4, warmup=0, lr=1e5, optimizer="adamw", checkpoint_every=1, eval_every=0),
                 data, options=RunOptions(out_dir=tmp_path, progress=False))
    assert find_checkpoint(tmp_path).name == "step-000001"
    model = load_checkpoint(tmp_path)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    no_nan = lambda c: pytest.fail(f"{c} in metrics.jsonl")  # noqa: E731
    records = [json.loads(line, parse_constant=no_nan) for line in lines]
    assert [r["step"] for r in records] == [1]


# ---------------------------------------------------------------------------- run directories
def test_a_second_run_on_a_locked_directory_is_refused(tmp_path):
    data = synthetic_examples(16)
    with run_lock(tmp_path):
        with pytest.raises(RunLockedError, match=f"in use by another run \\(PID {os.getpid()}") as info:
            pretrain(TINY, args(steps=1, warmup=0), data,
                     options=RunOptions(out_dir=tmp_path, progress=False))
    assert isinstance(info.value, OSError)                                  # the CLI's one-line kind
    assert not (tmp_path / "checkpoints").exists()


def test_a_stale_lock_is_taken_over_and_removed(tmp_path):
    (tmp_path / ".lock").write_text("999999999\n")                         # its process is long gone
    pretrain(TINY, args(steps=1, warmup=0), synthetic_examples(16),
             options=RunOptions(out_dir=tmp_path, progress=False))
    assert not (tmp_path / ".lock").exists() and find_checkpoint(tmp_path).name == "step-000001"


def test_a_run_failing_before_its_first_step_leaves_the_directory_as_found(tmp_path):
    data = synthetic_examples(16)
    with pytest.raises(ValueError, match="fewer than one batch"):
        pretrain(TINY, args(steps=1, warmup=0, batch_size=100000), data,
                 options=RunOptions(out_dir=tmp_path / "new", progress=False))
    assert not (tmp_path / "new").exists()
    (tmp_path / "old").mkdir()
    with pytest.raises(ValueError, match="fewer than one batch"):
        pretrain(TINY, args(steps=1, warmup=0, batch_size=100000), data,
                 options=RunOptions(out_dir=tmp_path / "old", progress=False))
    assert list((tmp_path / "old").iterdir()) == []


def test_leftover_temporaries_are_cleaned_at_the_next_start(tmp_path):
    data = synthetic_examples(16)
    pretrain(TINY, args(steps=2, warmup=0, checkpoint_every=1, eval_every=0), data,
             options=RunOptions(out_dir=tmp_path, progress=False))
    (tmp_path / "checkpoints" / ".tmp-step-000002-123").mkdir()
    (tmp_path / "checkpoints" / ".tmp-step-000002-123" / "model.safetensors").write_bytes(b"half")
    (tmp_path / "checkpoints" / ".latest.tmp-123").write_text("step-000002\n")
    (tmp_path / ".metrics.jsonl.tmp-123").write_text("")
    (tmp_path / ".config.json.k3j_9xq0.tmp").write_text("")                    # atomic_write's mkstemp
    mine = [tmp_path / "checkpoints" / ".tmp-notes", tmp_path / "tmp-mine", tmp_path / ".tmp-step-2-x"]
    for path in mine:                                   # not the tool's pattern: never touched
        path.mkdir()
    with pytest.warns(UserWarning, match=r"removed what an interrupted save left in .*: "
                                         r"checkpoints/.tmp-step-000002-123, ") as said:
        pretrain(TINY, args(steps=2, warmup=0, checkpoint_every=1, eval_every=0), data,
                 options=RunOptions(out_dir=tmp_path, resume=True, progress=False))
    assert len(said) == 1 and "\n" not in str(said[0].message)
    assert sorted(p for p in tmp_path.rglob("*") if "tmp" in p.name) == sorted(mine)


def test_an_empty_out_dir_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out_dir is empty"):
        pretrain(TINY, args(steps=1, warmup=0), synthetic_examples(16),
                 options=RunOptions(out_dir="", progress=False))
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- configs
def test_a_config_cannot_change_under_a_model():
    cfg = AlbertConfig.preset("ci-albert")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.sharing = "none"


def test_dataclasses_replace_re_derives_the_groups():
    albert = AlbertConfig.preset("albert-base")
    assert dataclasses.replace(albert, sharing="attention").num_hidden_groups == 12
    bert6 = dataclasses.replace(AlbertConfig.preset("ci-bert"), num_layers=6)
    assert bert6.num_hidden_groups == 6
    assert sum(p.numel() for p in AlbertModel(bert6).parameters()) == count_parameters(bert6)
    with pytest.raises(ValueError, match="shares nothing"):
        dataclasses.replace(AlbertConfig.preset("ci-bert"), sharing="all")
    assert dataclasses.replace(AlbertConfig.preset("ci-bert"), sharing="all",
                               num_hidden_groups=None).num_hidden_groups == 1


# ---------------------------------------------------------------------------- model inputs
IDS = torch.tensor([[2, 7, 8, 3], [2, 9, 3, 0]])


@pytest.mark.parametrize("inputs, message", [
    (dict(input_ids=IDS + 50), "input_ids holds 59, outside \\[0, 50\\)"),
    (dict(input_ids=-IDS), "input_ids holds -9"),
    (dict(input_ids=IDS.float()), "input_ids must be an int64"),
    (dict(input_ids=IDS[:0]), "empty batch"),
    (dict(input_ids=IDS[0]), "must be a \\(batch, length\\) tensor"),
    (dict(input_ids=IDS, token_type_ids=IDS.clamp(max=2)), "token_type_ids holds 2"),
    (dict(input_ids=IDS, token_type_ids=IDS[:, :3] * 0), "token_type_ids has shape \\(2, 3\\)"),
    (dict(input_ids=IDS, attention_mask=(IDS == 0).float() * -10000), "an additive mask"),
    (dict(input_ids=IDS, attention_mask=torch.ones(2, 5)), "attention_mask must have input_ids' shape"),
    (dict(input_ids=IDS, mlm_labels=IDS + 100), "mlm_labels must be in \\[0, 50\\) or -100"),
])
def test_bad_inputs_are_named_where_they_enter(inputs, message):
    with pytest.raises(ValueError, match=message):
        check_batch(TINY, **inputs)


def test_sentence_labels_need_a_sentence_head():
    with pytest.raises(ValueError, match="without a sentence head"):
        AlbertForPretraining(TINY, sentence_task=None)(IDS, sentence_labels=torch.tensor([0, 1]))


def test_an_all_zero_mask_row_gives_the_same_finite_output_on_every_backend():
    mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]])
    outputs = {}
    for backend in ("math", "sdpa"):
        torch.manual_seed(0)
        model = AlbertModel(TINY.replace(attention_backend=backend)).eval()
        outputs[backend] = model(IDS, attention_mask=mask).last_hidden_state
    assert torch.isfinite(outputs["sdpa"]).all()
    torch.testing.assert_close(outputs["math"], outputs["sdpa"])


# ---------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("argv, message", [
    (["--set", "bogus=1"], "unknown AlbertConfig field(s) ['bogus']"),
    (["--set", "hidden_dropout_prob=abc"], "hidden_dropout_prob must be a number, got 'abc'"),
    (["--eval-examples", "0"], "eval_examples must be an integer >= 1"),
    (["--lr", "nan"], "lr must be a finite number > 0"),
])
def test_bad_values_are_one_line_errors(tmp_path, capsys, argv, message):
    assert main(["pretrain", "--out", str(tmp_path / "run"), "--scale", "ci", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("minialbert: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv", [["--out", ""], ["--out", "x", "--threads", "0"],
                                  ["--out", "x", "--threads", "-1"]])
def test_bad_options_are_refused_by_the_parser(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(["pretrain", *argv])
    assert info.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_unexpected_errors_and_ctrl_c_are_one_line_and_debug_shows_traceback(monkeypatch, capsys, tmp_path):
    import minialbert.course.commands as cli

    def boom(args, scale):
        raise TypeError("something odd\nsecond line")

    monkeypatch.setitem(cli.COMMANDS, "figures", boom)
    assert main(["figures"]) == 1
    assert capsys.readouterr().err == ("minialbert: error: TypeError: something odd "
                                       "(run with --debug for the traceback)\n")
    for argv in (["--debug", "figures"], ["figures", "--debug"]):
        with pytest.raises(TypeError):
            main(argv)

    def interrupted(args, scale):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, "pretrain", interrupted)
    assert main(["pretrain", "--out", str(tmp_path)]) == 130
    assert capsys.readouterr().err == (f"minialbert: interrupted; the last checkpoint in {tmp_path} is "
                                       "intact (continue with --resume)\n")


def test_a_cache_variable_naming_a_file_is_named(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "file"))
    with pytest.raises(ValueError, match="set MINIALBERT_CACHE to a writable directory"):
        download.cache_dir()


def test_kernels_load_on_first_access_without_triton_at_import():
    code = ("import sys, minialbert as ma; assert 'triton' not in sys.modules; "
            "print(callable(ma.kernels.fused_attention))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# ---------------------------------------------------------------------------- hf and the tokenizer
def test_from_hf_rejects_misspelled_keys_non_tensors_and_non_finite_weights():
    sd, config = ma.hf.to_hf(AlbertForPretraining(TINY.replace(embedding_projection=True)))
    with pytest.raises(ValueError, match="unknown key 'num_hidden_layer'.*did you mean 'num_hidden_layers'"):
        ma.hf.from_hf(sd, {**config, "num_hidden_layer": 2})
    with pytest.raises(ValueError, match="from_hf takes a state dict and a config dict"):
        ma.hf.from_hf(sd, None)
    with pytest.raises(ValueError, match="convert numpy arrays"):
        ma.hf.from_hf({k: v.numpy() for k, v in sd.items()}, config)
    key = "albert.pooler.weight"
    with pytest.raises(ValueError, match=f"{key} holds NaN"):
        ma.hf.from_hf({**sd, key: torch.full_like(sd[key], math.nan)}, config)
    with pytest.raises(ValueError, match=f"{key} has dtype torch.int64"):
        ma.hf.from_hf({**sd, key: sd[key].long()}, config)


def test_tokenizer_rejects_what_it_cannot_encode_or_decode():
    from test_tokenizer import SENTENCES

    from minialbert.tokenizer import Tokenizer

    tok = Tokenizer.train(SENTENCES, vocab_size=120)
    with pytest.raises(ValueError, match="expected text \\(a str\\), got NoneType"):
        tok.encode(None)
    with pytest.raises(ValueError, match="unpaired surrogate"):
        tok.encode("a\ud800b")
    with pytest.raises(ValueError, match="token ids must be integers"):
        tok.decode([6.7])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.encode_pair([5, 500], [6])


def test_damaged_cache_files_are_reported_and_rebuilt(tmp_path):
    path = download.write_checked(tmp_path / "corpus.json", b'[{"title": "a", "sentences": ["b"]}]')
    assert download.read_checked(path) == path.read_bytes()
    path.write_bytes(b"[]")
    with pytest.warns(UserWarning, match="corpus.json is damaged"):
        assert download.read_checked(path) is None
    assert not path.exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert download.read_checked(path) is None                         # simply missing: no warning


def test_a_replaced_tokenizer_cache_is_rebuilt(tmp_path, monkeypatch):
    from test_tokenizer import SENTENCES

    from minialbert.config import PRESETS
    from minialbert.course.data import course_tokenizer
    from minialbert.tokenizer import Tokenizer

    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    monkeypatch.setitem(PRESETS, "tiny-albert", {**PRESETS["ci-albert"], "vocab_size": 300})
    scale = SCALES["ci"].replace(albert_preset="tiny-albert", max_documents=40)
    tok = course_tokenizer(scale.data)
    [path] = (tmp_path / "tokenizers").glob("*.model")
    Tokenizer.train(SENTENCES, vocab_size=120).save(path)                   # another valid model
    with pytest.warns(UserWarning, match="is damaged"):
        assert course_tokenizer(scale.data).model_proto == tok.model_proto


def test_metrics_of_a_run_are_strict_json(tmp_path):
    pretrain(TINY, args(steps=2, warmup=0), synthetic_examples(16),
             pretraining_evaluator(synthetic_examples(8, seed=1), TINY, args(steps=2, warmup=0)),
             RunOptions(out_dir=tmp_path, progress=False))
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 2]


# ---------------------------------------------- damaged weights, resumed and re-run runs, odd inputs
def resign(ckpt) -> None:
    """Rewrite a checkpoint's manifest to match its files, as a careless copy or a tool might."""
    from minialbert.checkpoint import CHECKPOINT_FILES, MANIFEST

    (ckpt / MANIFEST).write_text(json.dumps({f: download.sha256_of(ckpt / f) for f in CHECKPOINT_FILES}))


@pytest.mark.parametrize("value", [math.nan, 1e30])
def test_weights_that_are_not_finite_are_refused_when_loaded(tmp_path, value):
    """NaN or absurd weights behind a re-signed manifest: loading, resuming and fine-tuning
    refuse them in one line naming the file and the tensor."""
    import safetensors.torch

    data, run_args = synthetic_examples(16), args(steps=2, warmup=0, eval_every=0, checkpoint_every=1)
    pretrain(TINY, run_args, data, options=RunOptions(out_dir=tmp_path, progress=False))
    ckpt = tmp_path / "checkpoints" / "step-000001"
    (tmp_path / "checkpoints" / "latest").write_text("step-000001\n")    # as if killed after step 1
    tensors = safetensors.torch.load_file(ckpt / "model.safetensors")
    tensors["albert.pooler.weight"][0, 0] = value
    safetensors.torch.save_file(tensors, ckpt / "model.safetensors")
    resign(ckpt)
    for attempt in (lambda: load_checkpoint(tmp_path),
                    lambda: pretrain(TINY, run_args, data,
                                     options=RunOptions(out_dir=tmp_path, resume=True, progress=False))):
        with pytest.raises(ValueError, match=r"model.safetensors holds unusable weights: "
                                             r"albert.pooler.weight reaches"):
            attempt()


def test_resuming_from_another_runs_checkpoint_into_an_existing_run_is_refused(tmp_path):
    """--resume-from OTHER/step-N into a directory that holds its own run is refused, and
    nothing there changes; into a new directory it branches."""
    data, run_args = synthetic_examples(16), args(steps=2, warmup=0, eval_every=0, checkpoint_every=1)
    run, other = tmp_path / "run", tmp_path / "other"
    for out in (run, other):
        pretrain(TINY, run_args, data, options=RunOptions(out_dir=out, progress=False))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    step_1 = other / "checkpoints" / "step-000001"
    with pytest.raises(FileExistsError, match="already holds a run .* belongs to another run"):
        pretrain(TINY, run_args, data, options=RunOptions(out_dir=run, resume_from=step_1, progress=False))
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    result = pretrain(TINY, run_args, data,
                      options=RunOptions(out_dir=tmp_path / "branch", resume_from=step_1, progress=False))
    assert result.history[-1]["step"] == 2


def test_a_rerun_says_which_metrics_it_replaces(tmp_path):
    """A run killed before its first checkpoint left metrics.jsonl; a plain re-run says it
    replaces them."""
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "split": "train"}\n{"step": 2, "split": "train"}\n')
    with pytest.warns(UserWarning, match="holds 2 records of an earlier run that saved no checkpoint"):
        pretrain(TINY, args(steps=1, warmup=0, eval_every=0), synthetic_examples(16),
                 options=RunOptions(out_dir=tmp_path, progress=False))


def test_a_tokenizer_cache_with_other_settings_is_rebuilt(tmp_path, monkeypatch):
    """A valid 120-piece model with a matching checksum, where the scale's tokenizer belongs,
    is reported and rebuilt."""
    from test_tokenizer import SENTENCES

    from minialbert.config import PRESETS
    from minialbert.course.data import course_tokenizer
    from minialbert.tokenizer import Tokenizer

    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    monkeypatch.setitem(PRESETS, "tiny-albert", {**PRESETS["ci-albert"], "vocab_size": 300})
    scale = SCALES["ci"].replace(albert_preset="tiny-albert", max_documents=40)
    tok = course_tokenizer(scale.data)
    [path] = (tmp_path / "tokenizers").glob("*.model")
    download.write_checked(path, Tokenizer.train(SENTENCES, vocab_size=120).model_proto)   # checksum matches
    with pytest.warns(UserWarning, match="holds 120 pieces, not the 300 its settings ask for; rebuilding"):
        assert course_tokenizer(scale.data).model_proto == tok.model_proto


def test_hf_weights_without_the_pooler_are_reported():
    """No albert.pooler.* but an SOP head that reads it: an error; no head at all: a warning."""
    transformers = pytest.importorskip("transformers")
    config = transformers.AlbertConfig(vocab_size=40, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=32,
                                       max_position_embeddings=16)
    torch.manual_seed(0)
    state = transformers.AlbertForPreTraining(config).state_dict()
    no_pooler = {k: v for k, v in state.items() if not k.startswith("albert.pooler.")}
    with pytest.raises(ValueError, match="sentence head reads the pooled .* no pooler"):
        ma.hf.from_hf(no_pooler, config.to_dict())
    encoder_only = {k: v for k, v in no_pooler.items() if k.startswith("albert.")}
    with pytest.warns(UserWarning, match="no pooler .* pooled_output is not pretrained"):
        ma.hf.from_hf(encoder_only, config.to_dict())


def test_initializer_range_and_replace_behave_as_documented():
    """An initializer range that overflows is refused by name; replace() and
    dataclasses.replace() both keep an explicit num_hidden_groups (replace() used to drop it)."""
    for value in (8e242, 1e8, 2.0):
        with pytest.raises(ValueError, match="initializer_range"):
            AlbertConfig(initializer_range=value)
    cfg = AlbertConfig.preset("albert-base", num_layers=4, num_hidden_groups=2)
    assert cfg.replace(num_layers=6).num_hidden_groups == 2
    assert dataclasses.replace(cfg, num_layers=6).num_hidden_groups == 2


def test_a_full_disk_is_one_line_and_leaves_no_temporary(tmp_path, monkeypatch):
    """On a small filesystem the test makes (a tmpfs), a checkpoint that does not fit is one
    line naming the device problem and the last good checkpoint, and leaves no temporary behind."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root: the full-disk case is not tested here")
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)]).returncode:
        pytest.skip("this machine does not allow mounting a tmpfs: the full-disk case is not tested here")
    try:
        run = disk / "run"
        data, run_args = synthetic_examples(16), args(steps=2, warmup=0, eval_every=0, checkpoint_every=1)

        def fill_the_disk(record):                  # after step 1's checkpoint, before step 2's
            if record["step"] == 2 and record["split"] == "train":
                free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
                (disk / "filler").write_bytes(b"\0" * (free - 64 * 1024))    # leave 64 KiB

        with pytest.raises(OSError, match=r"no space left on the device .* while writing checkpoint "
                                          r".*step-000002; the last good checkpoint is step-000001"):
            pretrain(TINY, run_args, data,
                     options=RunOptions(out_dir=run, progress=False, callbacks=[fill_the_disk]))
        assert not list((run / "checkpoints").glob(".tmp-*"))
        (disk / "filler").unlink()
        result = pretrain(TINY, run_args, data, options=RunOptions(out_dir=run, resume=True, progress=False))
        assert result.history[-1]["step"] == 2
    finally:
        subprocess.run(["umount", str(disk)])


def test_small_errors_name_the_file_or_argument(tmp_path, capsys):
    """Evaluate's batch size, a binary config file, an id outside the vocabulary, a pickle
    that is not ours: each one line that names what is wrong."""
    from test_tokenizer import SENTENCES

    from minialbert.checkpoint import load_optimizer_state
    from minialbert.tokenizer import Tokenizer

    for bad in ("0", "-4"):
        with pytest.raises(SystemExit):
            main(["evaluate", "--checkpoint", str(tmp_path), "--batch-size", bad])
        assert "--batch-size: expected an integer >= 1" in capsys.readouterr().err
    assert main(["pretrain", "--out", str(tmp_path / "r"), "--set", "initializer_range=1e30"]) == 2
    assert "initializer_range 1e+30 is the std of the initial weights" in capsys.readouterr().err
    (tmp_path / "config.json").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(ValueError, match=r"config file .*config.json is not valid JSON"):
        AlbertConfig.load(tmp_path / "config.json")
    tok = Tokenizer.train(SENTENCES, vocab_size=120)
    with pytest.raises(ValueError, match="10000000"):
        tok.id_to_piece(10**7)

    class Evil:
        def __reduce__(self):
            return (os.getcwd, ())

    torch.save({"x": Evil()}, tmp_path / "optimizer.pt")
    with pytest.raises(ValueError, match="is not an optimizer state minialbert wrote") as info:
        load_optimizer_state(tmp_path / "optimizer.pt")
    assert "\n" not in str(info.value)
