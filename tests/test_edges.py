"""Bad settings at the edges, each refused in one line that names what is wrong: data that does not fit the
model's config, gpu_check's arguments, torchrun's variables, `zoo --rebuild` with `--only`, a cache folder
that is the home folder, and torch.compile's files left behind by a run that was killed."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from minialbert import AlbertConfig
from minialbert.course.commands import main
from minialbert.download import cache_dir
from minialbert.evaluation import pretraining_evaluator
from minialbert.pretraining_data import collate
from minialbert.pretraining_dataset import PretrainingDataset
from minialbert.train import RunOptions, TrainArgs, distributed_context, pretrain

REPO = Path(__file__).resolve().parent.parent
TINY = AlbertConfig.preset("ci-albert", vocab_size=50, embedding_size=16, hidden_size=32, num_layers=2,
                           num_heads=2, intermediate_size=64, max_position_embeddings=32)
ARGS = TrainArgs(objective="mlm", steps=2, batch_size=4, lr=1e-3, warmup=0, eval_every=0, checkpoint_every=0)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs on one thread (conftest.one_thread)."""


def examples(n: int, length: int, token_type: int = 0) -> list[dict]:
    """n examples of `length` tokens in the pretraining_data format ([CLS] ... [SEP], one masked token)."""
    out = []
    for i in range(n):
        ids = torch.full((length,), 5 + i % 40)
        ids[0], ids[-1] = 2, 3
        labels = torch.full((length,), -100)
        labels[1], ids[1] = ids[1].item(), 4
        out.append({"input_ids": ids, "token_type_ids": torch.full((length,), token_type),
                    "mlm_labels": labels})
    return out


def flat(data: list[dict], max_seq_len: int) -> PretrainingDataset:
    """The same examples as a PretrainingDataset (flat tensors, one max each)."""
    lengths = torch.tensor([len(ex["input_ids"]) for ex in data])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    return PretrainingDataset(*(torch.cat([ex[k] for ex in data]) for k in ("input_ids", "token_type_ids",
                                                                              "mlm_labels")),
                              offsets, None, "mlm", max_seq_len)


# ------------------------------------------------------------------ the data against the model's config
@pytest.mark.parametrize("as_dataset", [False, True], ids=["examples", "PretrainingDataset"])
def test_data_longer_than_the_positions_is_refused_before_the_first_step(tmp_path, as_dataset):
    """`pretrain --set max_position_embeddings=16` on 32-token data: one line naming the setting, before the
    run directory is written (the step skips the model's input checks)."""
    data = examples(8, 32)
    data = flat(data, 32) if as_dataset else data
    with pytest.raises(ValueError, match=r"32 tokens.* max_position_embeddings 16") as e:
        pretrain(TINY.replace(max_position_embeddings=16), ARGS, data,
                 options=RunOptions(out_dir=tmp_path / "run", progress=False, collate_fn=collate))
    assert "\n" not in str(e.value)
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
    pretrain(TINY, ARGS, data, options=RunOptions(progress=False, collate_fn=collate))  # 32 positions: fits


def test_token_types_beyond_the_config_are_refused_before_the_first_step():
    with pytest.raises(ValueError, match="token type 2 >= the model's type_vocab_size 2"):
        pretrain(TINY, ARGS, examples(8, 16, token_type=2),
                 options=RunOptions(progress=False, collate_fn=collate))


def test_held_out_data_is_checked_too():
    short = TINY.replace(max_position_embeddings=16)
    with pytest.raises(ValueError, match="held-out data.*max_position_embeddings 16"):
        pretrain(short, ARGS, examples(8, 16), pretraining_evaluator(examples(4, 24), short, ARGS),
                 RunOptions(progress=False, collate_fn=collate))


# ------------------------------------------------------------------ benchmarks/gpu_check.py's arguments
def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, words", [
    (["--minutes", "1e308"], "--minutes"), (["--minutes", "nan"], "--minutes"),
    (["--minutes", "0"], "--minutes"), (["--minutes", "abc"], "--minutes"),
    (["--set", "hidden_size=65"], "hidden_size 65 is not divisible"),
    (["--set", "hiden_size=1"], "unknown AlbertConfig field"), (["--set", "num_layers"], "KEY=VALUE"),
    (["--out", ""], "--out"), (["--scale", "huge"], "--scale")])
def test_gpu_check_refuses_a_bad_argument_in_one_line(argv, words, capsys):
    check = load_gpu_check()
    with pytest.raises(SystemExit) as e:
        check.parse_args(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and words in err[0], err


def test_gpu_check_refuses_an_out_that_is_a_file(tmp_path, capsys):
    check = load_gpu_check()
    (tmp_path / "taken").write_text("a file")
    with pytest.raises(SystemExit) as e:
        check.parse_args(["--out", str(tmp_path / "taken")])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "taken is a file" in err[0], err
    with pytest.raises(SystemExit):
        check.parse_args(["--out", str(tmp_path / "taken" / "below")])
    assert "taken is a file" in capsys.readouterr().err
    assert check.parse_args(["--out", str(tmp_path / "new"), "--minutes", "2"]).minutes == 2.0


# ------------------------------------------------------------------ torchrun's variables
TORCHRUN = {"TORCHELASTIC_RUN_ID": "test", "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1",
            "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29531"}


@pytest.mark.parametrize("name, value", [("RANK", "abc"), ("WORLD_SIZE", "two"), ("LOCAL_RANK", "x"),
                                         ("MASTER_PORT", "http")])
def test_a_malformed_torchrun_variable_is_named(monkeypatch, name, value):
    for key, setting in {**TORCHRUN, name: value}.items():
        monkeypatch.setenv(key, setting)
    with pytest.raises(ValueError, match=re.escape(f"{name}={value!r} is not")) as e:
        distributed_context("cpu")
    assert "\n" not in str(e.value) and not dist.is_initialized()


@pytest.mark.parametrize("changes, words", [
    ({"RANK": "5", "WORLD_SIZE": "2"}, "RANK=5"), ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0"),
    ({"RANK": "-1"}, "RANK=-1"), ({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"}, "LOCAL_RANK=3"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000")])
def test_torchrun_variables_out_of_range_are_named(monkeypatch, changes, words):
    """RANK 5 of 2 would wait forever for ranks that never come; each is refused, named, at once."""
    from minialbert import device

    for key, setting in {**TORCHRUN, **changes}.items():
        monkeypatch.setenv(key, setting)
    with pytest.raises(ValueError, match=re.escape(words)):
        device.check_torchrun_variables()
    for key, setting in TORCHRUN.items():
        monkeypatch.setenv(key, setting)
    device.check_torchrun_variables()                                  # a well-formed launch passes


# ------------------------------------------------------------------ zoo --rebuild with --only
def test_zoo_rebuild_with_only_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    from minialbert.course.experiments import zoo

    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    rebuilt = []
    monkeypatch.setattr(zoo.Zoo, "rebuild", lambda self, name, *a, **k: rebuilt.append(name) or
                        {"sha256": "0" * 64, "shipped_sha256": None, "identical": None})
    assert main(["zoo", "--scale", "ci", "--rebuild", "albert-sop", "--only", "albert-nsp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--only" in err[0] and "--rebuild" in err[0], err
    assert rebuilt == []


# ------------------------------------------------------------------ the cache folder
@pytest.mark.parametrize("setting, what", [("~/x/..", "home folder"), ("~", "home folder"),
                                           ("~/.", "home folder"), ("/", "root folder"),
                                           ("/tmp/..", "root folder")])
def test_a_cache_that_is_the_home_or_root_folder_is_refused(tmp_path, monkeypatch, setting, what):
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MINIALBERT_CACHE", setting)
    with pytest.raises(ValueError, match=f"MINIALBERT_CACHE={re.escape(repr(setting))} is the {what}") as e:
        cache_dir()
    assert "\n" not in str(e.value)


def test_a_cache_path_is_normalised(tmp_path, monkeypatch):
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MINIALBERT_CACHE", "~/x/../cache/")
    assert cache_dir() == tmp_path / "home" / "cache" and ".." not in str(cache_dir())
    assert not (tmp_path / "home" / "x").exists()


# ------------------------------------------------------------------ torch.compile's files
def dead_pid() -> int:
    """The process id of a process that has ended."""
    run = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                         text=True, check=True)
    return int(run.stdout)


@pytest.fixture()
def compile_root(tmp_path, monkeypatch):
    """compiling, compile_cache's root and its folder for this torch; TORCHINDUCTOR_CACHE_DIR unset."""
    from minialbert import compiling

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    folder = tmp_path / "compile" / f"torch-{torch.__version__}"
    return compiling, tmp_path / "compile", folder


def test_a_run_compiles_into_a_folder_of_its_own_and_leaves_no_mark(compile_root):
    compiling, root, folder = compile_root
    with compiling.compile_cache(root):
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(folder)
        assert [m.name for m in folder.glob("running-*")] == [compiling.mark_name(os.getpid())]
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ and not list(folder.glob("running-*"))


def test_files_a_killed_run_left_are_cleared_before_the_next_compile(compile_root):
    """A run killed mid-compile leaves its mark and a truncated library; the next run clears them (with a
    one-line warning) before anything compiles."""
    compiling, root, folder = compile_root
    folder.mkdir(parents=True)
    (folder / compiling.mark_name(dead_pid())).touch()
    (folder / "ab").mkdir()
    (folder / "ab" / "cab.main.so").write_bytes(b"\x7fELF truncated")
    with pytest.warns(UserWarning, match="stopped before its end"):
        with compiling.compile_cache(root):
            assert not (folder / "ab").exists()
    assert not list(folder.glob("running-*"))


def test_an_interrupted_run_keeps_its_mark_and_a_live_runs_files_are_kept(compile_root):
    compiling, root, folder = compile_root
    with pytest.raises(KeyboardInterrupt):
        with compiling.compile_cache(root):
            (folder / "half.so").write_bytes(b"\x7fELF")
            raise KeyboardInterrupt
    assert [m.name for m in folder.glob("running-*")] == [compiling.mark_name(os.getpid())]
    with pytest.warns(UserWarning, match="stopped before its end"):
        with compiling.compile_cache(root):                             # this process's own earlier run
            assert not (folder / "half.so").exists()
    (folder / compiling.mark_name(os.getppid())).touch()                # a run that is still going
    (folder / "theirs.so").write_bytes(b"\x7fELF")
    (folder / compiling.mark_name(dead_pid())).touch()
    with compiling.compile_cache(root):
        assert (folder / "theirs.so").exists()


def test_pretrain_compiles_in_the_minialbert_cache(tmp_path, monkeypatch, compile_root):
    """RunOptions(compile=...) points torch.compile at the cache's compile folder for the run (dynamo's eager
    backend here: the wiring, without minutes of inductor codegen on a CPU)."""
    import minialbert.train as train

    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(train, "compiled", lambda net: torch.compile(net, backend="eager"))
    seen = []
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        pretrain(TINY, ARGS, examples(8, 16),
                 options=RunOptions(progress=False, collate_fn=collate, compile=True,
                                    callbacks=[lambda record: seen.append(
                                        os.environ.get("TORCHINDUCTOR_CACHE_DIR"))]))
    folder = tmp_path / "cache" / "compile" / f"torch-{torch.__version__}"
    assert set(seen) == {str(folder)} and folder.is_dir() and not list(folder.glob("running-*"))
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR") != str(folder)        # set for the run only
