"""The CLI as a user runs it: real processes, SIGKILL then --resume, and torchrun with 2 processes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import safetensors.torch
import torch

from minialbert.course.commands import main
from minialbert.run_directory import read_metrics

# ci-albert shrunk further: the tests time processes, not learning.
SHRINK = ["--set", "embedding_size=16", "--set", "hidden_size=32", "--set", "num_layers=2",
          "--set", "intermediate_size=64", "--set", "classifier_dropout_prob=0.0"]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A private cache holding the ci-scale tokenizer and pretraining data, built once per module."""
    cache = tmp_path_factory.mktemp("cache")
    environ = {**os.environ, "MINIALBERT_CACHE": str(cache), "MINIALBERT_SCALE": "ci", "OMP_NUM_THREADS": "1"}
    build = ("from minialbert.course.data import course_pretraining_data as c\n"
             "from minialbert.course.scale import SCALES\n"
             "for s in ('train', 'valid'): c('sop', s, SCALES['ci'].data)")
    subprocess.run([sys.executable, "-c", build], env=environ, check=True, cwd=ROOT)
    return environ


def run(argv: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minialbert", *argv], env=env, cwd=ROOT, capture_output=True,
                          text=True, **kw)


def pretrain_argv(out: Path, steps: int, *extra: str) -> list[str]:
    return ["pretrain", "--out", str(out), *SHRINK, "--steps", str(steps), "--batch-size", "8",
            "--warmup", "2", "--lr", "3e-3", "--eval-every", "0", "--threads", "1", "--quiet", *extra]


def final_weights(run_dir: Path) -> dict:
    latest = (run_dir / "checkpoints" / "latest").read_text().strip()
    return safetensors.torch.load_file(run_dir / "checkpoints" / latest / "model.safetensors")


def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["pretrain", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for option in ("--preset", "--objective", "--steps", "--batch-size", "--lr", "--warmup", "--seed",
                   "--out", "--resume", "--scale", "--set", "--grad-accum", "--optimizer", "--eval-every",
                   "--threads"):
        assert option in text
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    assert "--checkpoint" in capsys.readouterr().out


def test_every_subcommand_takes_the_common_options(capsys):
    """`<sub> --debug --help` for every subcommand: each one takes --scale, --debug and --quiet (one parent
    parser, so none can leave one out). In-process; other tests run `python -m minialbert` as a process."""
    from minialbert.course.commands import COMMANDS, main

    for command in COMMANDS:
        with pytest.raises(SystemExit) as exit_:
            main([command, "--debug", "--help"])
        assert exit_.value.code == 0, f"{command}: {capsys.readouterr().err}"
        out = capsys.readouterr().out
        for option in ("--scale", "--debug", "--quiet"):
            assert option in out, f"{command} --help does not list {option}"


@pytest.mark.parametrize("argv, message", [
    (["pretrain", "--out", "x", "--objective", "xyz"], "invalid choice: 'xyz'"),
    (["pretrain", "--out", "x", "--steps", "many"], "invalid int value: 'many'"),
    (["pretrain", "--out", "x", "--set", "num_layers"], "--set takes KEY=VALUE"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["evaluate", "--checkpoint", "/nonexistent/run"], "/nonexistent/run does not exist"),
])
def test_bad_options_give_one_line_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        if main(argv) == 2:
            raise SystemExit(2)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("minialbert: error:") and message in err and err.count("\n") == 1


def test_bad_values_found_while_running_give_one_line_errors(env, tmp_path):
    res = run(pretrain_argv(tmp_path / "r", 5, "--warmup", "9"), env)
    assert res.returncode == 2
    assert res.stderr.strip() == "minialbert: error: warmup 9 must be between 0 and steps 5"
    res = run(pretrain_argv(tmp_path / "r", 5, "--set", "hidden_size=33"), env)
    assert res.returncode == 2 and "hidden_size 33 is not divisible by num_heads" in res.stderr
    assert "Traceback" not in res.stderr


def test_set_positions_sets_the_tokens_per_example(monkeypatch, tmp_path):
    """`--set max_position_embeddings=N` trains on N-token examples, as the zoo's 128-token entries do; it
    once kept the scale's 32 tokens and left the new positions unused. Without it, the scale's length."""
    import minialbert.course.data as course_data

    class Built(Exception):
        pass

    asked = []

    def record(objective, split, data, **kw):
        asked.append(kw.get("max_seq_len"))
        raise Built

    monkeypatch.setattr(course_data, "course_pretraining_data", record)
    for extra in (["--set", "max_position_embeddings=48"], []):
        with pytest.raises(Built):
            main(["pretrain", "--scale", "ci", "--debug", "--out", str(tmp_path / "r"), *extra])
    assert asked == [48, None]


def test_masked_lm_alone_on_sop_pairs_trains_without_a_sentence_head(env, tmp_path):
    """`--objective mlm --inputs sop`: masked LM alone read on the SOP pairs, labels dropped (the 128-token
    trunk's data); with a sentence objective, --inputs is a one-line error."""
    res = run(pretrain_argv(tmp_path / "r", 3, "--objective", "mlm", "--inputs", "sop"), env)
    assert res.returncode == 0, res.stderr
    assert not any(k.startswith("sentence_head") for k in final_weights(tmp_path / "r"))
    assert json.loads((tmp_path / "r" / "train_args.json").read_text())["objective"] == "mlm"
    res = run(pretrain_argv(tmp_path / "s", 3, "--objective", "sop", "--inputs", "sop"), env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("minialbert: error: inputs='sop' needs objective 'mlm'")


def test_resume_from_a_finished_run_into_a_new_out_is_refused(env, tmp_path):
    """`pretrain --out fresh --resume-from DONE` once exited 0 with JSON naming `fresh`, never made."""
    assert run(pretrain_argv(tmp_path / "done", 2), env).returncode == 0
    res = run(pretrain_argv(tmp_path / "fresh", 2, "--resume-from", str(tmp_path / "done")), env)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "is already at step 2 of 2" in res.stderr
    assert not (tmp_path / "fresh").exists()


def test_sigkill_then_resume_is_bitwise_identical(env, tmp_path):
    steps = 120
    straight = run(pretrain_argv(tmp_path / "straight", steps, "--checkpoint-every", "5"), env, timeout=120)
    assert straight.returncode == 0, straight.stderr
    summary = json.loads(straight.stdout)
    assert summary["steps"] == steps and summary["valid_mlm_accuracy"] >= 0

    killed = tmp_path / "killed"
    argv = pretrain_argv(killed, steps, "--checkpoint-every", "5")
    proc = subprocess.Popen([sys.executable, "-m", "minialbert", *argv], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latest = killed / "checkpoints" / "latest"
    deadline = time.monotonic() + 60
    while not latest.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed; raise `steps`"
    killed_at = int(latest.read_text().strip().split("-")[1])
    assert 0 < killed_at < steps
    lines = (killed / "metrics.jsonl").read_text().splitlines()

    resumed = run(pretrain_argv(killed, steps, "--checkpoint-every", "5", "--resume"), env, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    a, b = final_weights(tmp_path / "straight"), final_weights(killed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert len(lines) >= killed_at
    def no_time(run_dir):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in read_metrics(run_dir)]

    assert no_time(killed) == no_time(tmp_path / "straight")

    res = run(["evaluate", "--checkpoint", str(killed), "--max-examples", "40"], env)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["step"] == steps and report["examples"] == 40
    assert 0 <= report["mlm"]["mask"]["accuracy"] <= 1 and report["baselines"]["neighbour"]["mask"]["n"] > 0
    assert "held-out evaluation on 40 of" in res.stderr and "neighbour" in res.stderr


def test_the_documented_pretraining_command_is_lesson_05s_zoo_run(env, tmp_path):
    # docs/package.md's first pretrain command trains lesson 05's model with the scale's recipe: the
    # same bytes as the zoo's lesson-albert-sop, so the zoo's evaluation of that entry is the command's
    # result.
    res = run(["pretrain", "--objective", "sop", "--set", "num_layers=2", "--threads", "1",
               "--segmenting", "two-sentence-chunks", "--out", str(tmp_path / "sop"), "--quiet"], env,
              timeout=300)
    assert res.returncode == 0, res.stderr
    res = run(["zoo", "--only", "lesson-albert-sop", "--quiet"], env, timeout=300)
    assert res.returncode == 0, res.stderr
    [entry] = (Path(env["MINIALBERT_CACHE"]) / "zoo" / "ci").glob("lesson-albert-sop-*")
    ours, zoo_run = final_weights(tmp_path / "sop"), final_weights(entry)
    assert ours.keys() == zoo_run.keys() and all(torch.equal(ours[k], zoo_run[k]) for k in ours)


def test_torchrun_two_processes_match_one(env, tmp_path):
    common = ("--checkpoint-every", "0", "--grad-accum", "2")
    one = run(pretrain_argv(tmp_path / "one", 4, *common), env, timeout=120)
    assert one.returncode == 0, one.stderr
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    argv = pretrain_argv(tmp_path / "two", 4, "--checkpoint-every", "0")
    two = subprocess.run([*torchrun, "-m", "minialbert", *argv],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert two.returncode == 0, two.stderr[-3000:]
    assert json.loads(two.stdout)["steps"] == 4                      # only rank 0 printed
    a, b = final_weights(tmp_path / "one"), final_weights(tmp_path / "two")
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5)


def test_smoothness_on_a_bert_checkpoint_with_a_wordpiece_vocab(env, tmp_path):
    """`smoothness --official DIR` on a tiny random HF BERT directory: the course text is re-tokenized with
    its vocab.txt (WordPiece), and the JSON has one row per layer."""
    transformers = pytest.importorskip("transformers")
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    vocab = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "module", "python", "function"]
             + letters + ["##" + c for c in letters] + list(".,:;()[]'\"_=-"))
    official = tmp_path / "tiny-bert"
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=3,
                                     num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
    transformers.BertForPreTraining(config).save_pretrained(official)
    (official / "vocab.txt").write_text("\n".join(vocab) + "\n")
    out = tmp_path / "figs"
    argv = ["smoothness", "--official", str(official), "--sequences", "6", "--batch-size", "3",
            "--out", str(out), "--quiet"]
    res = run(argv, env, timeout=300)
    assert res.returncode == 0, res.stderr
    numbers = json.loads((out / "layer_transitions.json").read_text())
    assert numbers["checkpoints"] == {"tiny-bert": {"official": str(official)}}
    result = numbers["results"]["tiny-bert"]
    assert result["layers"] == [1, 2, 3] and result["sequences"] == 6 and len(result["l2"]) == 3

    (official / "vocab.txt").unlink()                      # no tokenizer file: one line naming both kinds
    res = run(argv, env, timeout=300)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert f"official model {official} has no spiece.model or vocab.txt" in res.stderr
