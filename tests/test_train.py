"""The trainer on a synthetic in-memory dataset: data order, accumulation, resume, checkpoint errors."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minialbert import AlbertConfig
from minialbert.checkpoint import find_checkpoint, load_checkpoint
from minialbert.evaluation import pretraining_evaluator
from minialbert.pretraining_data import collate
from minialbert.run_directory import read_metrics
from minialbert.train import RunOptions, StepBatches, TrainArgs, pretrain

TINY = AlbertConfig.preset("ci-albert", vocab_size=50, embedding_size=16, hidden_size=32, num_layers=2,
                           num_heads=2, intermediate_size=64, max_position_embeddings=32)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs on one thread (conftest.one_thread)."""


def synthetic_examples(n: int, vocab: int = 50, seed: int = 0, sentence: bool = True) -> list[dict]:
    """Examples in the pretraining_data format: each repeats one token drawn from a skewed (Zipf-like)
    distribution, so masked ones are guessable from their neighbours or the frequencies; the sentence
    label says whether the token is even."""
    g = torch.Generator().manual_seed(seed)
    zipf = 1.0 / torch.arange(1, vocab - 4, dtype=torch.float64)
    out = []
    for _ in range(n):
        length = int(torch.randint(8, 24, (), generator=g))
        token = 5 + int(torch.multinomial(zipf, 1, generator=g))
        ids = torch.full((length,), token)
        ids[0], ids[-1] = 2, 3                                   # [CLS] ... [SEP]
        labels = torch.full((length,), -100)
        masked = torch.rand(length, generator=g) < 0.3
        masked[0] = masked[-1] = False
        masked[1] = True                                         # at least one prediction per example
        labels[masked] = ids[masked]
        ids[masked] = 4                                          # [MASK]
        ex = {"input_ids": ids, "token_type_ids": torch.zeros(length, dtype=torch.long), "mlm_labels": labels}
        if sentence:
            ex["sentence_label"] = torch.tensor(token % 2)
        out.append(ex)
    return out


def args(**changes) -> TrainArgs:
    base = dict(objective="sop", steps=6, batch_size=8, lr=3e-3, warmup=2, eval_every=3, eval_examples=4,
                checkpoint_every=3, keep_last=5, seed=1)
    return TrainArgs(**{**base, **changes})


def weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_step_batches_shard_the_global_batch_and_follow_epochs():
    a = args(batch_size=8, grad_accum=2, steps=10)
    single = StepBatches.for_run(20, args(batch_size=8, steps=10))           # 2 steps per epoch
    assert single.steps_per_epoch == 2
    got = [list(b) for b in single]
    assert len(got) == 10 and all(len(b) == 8 for b in got)
    assert got[0] == single.global_batch(0)
    assert set(got[0]).isdisjoint(got[1])                             # one epoch: no repeats
    assert got[2] != got[0]                                           # a new epoch: a new order
    for step in (0, 3, 7):
        shards = []
        for rank in range(2):
            sharded = list(StepBatches.for_run(20, a, start_step=step, rank=rank, world_size=2))
            shards += sharded[0] + sharded[1]                          # both micro-batches of `step`
        assert shards == single.global_batch(step)
    resumed = list(StepBatches.for_run(20, args(batch_size=8, steps=10), start_step=7))
    assert resumed == got[7:]
    with pytest.raises(ValueError, match="multiple of processes x grad_accum"):
        StepBatches.for_run(20, args(batch_size=6, grad_accum=4))
    with pytest.raises(ValueError, match="fewer than one batch"):
        StepBatches.for_run(5, args(batch_size=8))


def test_train_args_validate():
    with pytest.raises(ValueError, match="unknown objective 'xyz'"):
        args(objective="xyz")
    with pytest.raises(ValueError, match="warmup 9"):
        args(warmup=9)


def test_pretraining_learns_and_logs(tmp_path):
    data, valid = synthetic_examples(160), synthetic_examples(32, seed=9)
    seen = []
    a = args(steps=40, warmup=4, eval_every=20, checkpoint_every=20, lr=2e-2)
    res = pretrain(TINY, a, data, pretraining_evaluator(valid, TINY, a),
                   RunOptions(out_dir=tmp_path / "run", callbacks=[seen.append], progress=False))
    train = [r for r in res.history if r["split"] == "train"]
    valid_records = [r for r in res.history if r["split"] == "valid"]
    assert [r["step"] for r in valid_records] == [20, 40]
    first, last = (sum(r["mlm_loss"] for r in rs) / len(rs) for rs in (train[:5], train[-10:]))
    assert last < first - 0.5                                         # it learns the skewed frequencies
    assert valid_records[-1]["mlm_loss"] < first - 0.4
    assert 1 / 45 < valid_records[-1]["mlm_accuracy"] <= 1           # above chance
    assert 0 <= valid_records[-1]["sop_accuracy"] <= 1
    assert seen == res.history == read_metrics(tmp_path / "run")
    assert all(r["grad_norm"] >= 0 and r["lr"] >= 0 for r in train)
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == TINY.to_dict()
    loaded = load_checkpoint(tmp_path / "run")
    for k, v in res.model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[k], v, rtol=0, atol=0)


def test_grad_accumulation_matches_one_big_batch():
    data = synthetic_examples(48)
    one = pretrain(TINY, args(eval_every=0, checkpoint_every=0), data,
                   options=RunOptions(progress=False)).model
    four = pretrain(TINY, args(eval_every=0, checkpoint_every=0, grad_accum=4), data,
                    options=RunOptions(progress=False)).model
    for k, v in weights(one).items():
        torch.testing.assert_close(weights(four)[k], v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("objective", ["mlm", "nsp"])
def test_other_objectives_run(objective):
    data = synthetic_examples(32, sentence=objective != "mlm")
    a = args(objective=objective, steps=2, warmup=0)
    res = pretrain(TINY, a, data, pretraining_evaluator(data, TINY, a), RunOptions(progress=False))
    last = res.history[-1]
    assert last["split"] == "valid" and "mlm_accuracy" in last
    assert ("nsp_accuracy" in last) == (objective == "nsp") and "sop_accuracy" not in last
    assert (res.model.sentence_head is None) == (objective == "mlm")


def test_resume_from_a_middle_checkpoint_is_bitwise_exact(tmp_path):
    data, valid = synthetic_examples(40), synthetic_examples(16, seed=3)
    straight = pretrain(TINY, args(), data, pretraining_evaluator(valid, TINY, args()),
                        RunOptions(out_dir=tmp_path / "a", progress=False))
    # Pretend the run died right after step 3: keep only that checkpoint, then resume to step 6.
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "b" / "checkpoints" / "step-000006")
    (tmp_path / "b" / "checkpoints" / "latest").write_text("step-000003\n")
    resumed = pretrain(TINY, args(), data, pretraining_evaluator(valid, TINY, args()),
                       RunOptions(out_dir=tmp_path / "b", resume=True, progress=False))
    for k, v in weights(straight.model).items():
        assert torch.equal(weights(resumed.model)[k], v), k
    def no_time(records):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in records]

    assert no_time(resumed.history) == no_time(straight.history)
    assert no_time(read_metrics(tmp_path / "b")) == no_time(straight.history)
    assert all(r["seconds"] >= 0 for r in resumed.history if r["split"] == "train")


def test_run_directory_guards(tmp_path):
    data = synthetic_examples(16)
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        pretrain(TINY, args(steps=1, warmup=0), data,
                 options=RunOptions(out_dir=tmp_path / "r", resume=True, progress=False))
    pretrain(TINY, args(steps=1, warmup=0), data, options=RunOptions(out_dir=tmp_path / "r", progress=False))
    with pytest.raises(FileExistsError, match="already holds a run"):
        pretrain(TINY, args(steps=1, warmup=0), data,
                 options=RunOptions(out_dir=tmp_path / "r", progress=False))
    with pytest.raises(ValueError, match="different model config.*hidden_size"):
        pretrain(TINY.replace(hidden_size=64), args(steps=1, warmup=0), data,
                 options=RunOptions(out_dir=tmp_path / "r", resume=True, progress=False))
    with pytest.raises(ValueError, match="different training arguments.*lr"):
        pretrain(TINY, args(steps=1, warmup=0, lr=1.0), data,
                 options=RunOptions(out_dir=tmp_path / "r", resume=True, progress=False))
    with pytest.raises(ValueError, match="vocab_size"):
        pretrain(TINY.replace(vocab_size=20), args(steps=1, warmup=0), data,
                 options=RunOptions(progress=False))


@pytest.mark.parametrize("damage, message", [
    ("truncate:model.safetensors", "model.safetensors is damaged"),
    ("truncate:trainer_state.json", "trainer_state.json is damaged"),
    ("truncate:optimizer.pt", "optimizer.pt is damaged"),
    ("truncate:manifest.json", "manifest.json is corrupt or truncated"),
    ("delete:config.json", "config.json is missing"),
    ("delete:manifest.json", "manifest.json is missing"),
    ("latest:step-999999", "points to step-999999"),
    ("latest:../../etc", "latest is damaged"),
])
def test_damaged_checkpoints_give_clear_errors(tmp_path, damage, message):
    data = synthetic_examples(16)
    run = tmp_path / "run"
    pretrain(TINY, args(steps=1, warmup=0), data, options=RunOptions(out_dir=run, progress=False))
    ckpt = find_checkpoint(run)
    kind, what = damage.split(":")
    if kind == "truncate":
        raw = (ckpt / what).read_bytes()
        (ckpt / what).write_bytes(raw[:len(raw) // 2])
    elif kind == "delete":
        (ckpt / what).unlink()
    else:
        (run / "checkpoints" / "latest").write_text(what)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        pretrain(TINY, args(steps=1, warmup=0), data,
                 options=RunOptions(out_dir=run, resume=True, progress=False))


def test_checkpoints_are_pruned_and_temp_dirs_cleaned(tmp_path):
    data = synthetic_examples(16)
    pretrain(TINY, args(steps=4, warmup=0, checkpoint_every=1, keep_last=2, eval_every=0), data,
             options=RunOptions(out_dir=tmp_path, progress=False))
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["latest", "step-000003", "step-000004"]
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "step-000004"


def test_evaluate_pretraining_matches_the_models_own_loss():
    from minialbert import AlbertForPretraining
    from minialbert.evaluation import evaluate_pretraining

    data = synthetic_examples(16)
    torch.manual_seed(0)
    model = AlbertForPretraining(TINY, sentence_task="sop").eval()
    batch = collate(data)
    with torch.no_grad():
        out = model(**batch)
    result = evaluate_pretraining(model, data, batch_size=5)
    torch.testing.assert_close(result["mlm_loss"], out.mlm_loss.item())
    predicted = batch["mlm_labels"][batch["mlm_labels"] != -100]
    assert result["mlm"]["all"]["n"] == predicted.numel()
    acc = (out.mlm_logits.argmax(-1) == predicted).float().mean().item()
    assert result["mlm"]["all"]["accuracy"] == pytest.approx(acc)
    sent = (out.sentence_logits.argmax(-1) == batch["sentence_labels"]).float().mean().item()
    assert result["sentence"]["accuracy"] == pytest.approx(sent) and result["sentence"]["n"] == 16


BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "train_step_gpu.py"


@pytest.mark.slow
def test_gpu_training_benchmark_dry_run_writes_its_json(tmp_path):
    """benchmarks/train_step_gpu.py --dry-run: the GPU benchmark's harness on CPU, tiny shapes."""
    # --budget-s: on a loaded machine the default minute skipped the last contenders
    run = subprocess.run([sys.executable, str(BENCHMARK), "--dry-run", "--out", str(tmp_path),
                          "--budget-s", "540",
                          "--contenders", "sdpa", "transformers", "triton", "sdpa+compile", "sdpa+graphs"],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads((tmp_path / "train_step_dry-run.json").read_text())
    assert not record["partial"] and record["setup"]["precision"] == "fp32"
    rows = {(r["contender"], r["batch"]): r for r in record["rows"]}
    assert set(rows) == {(c, b) for c in ("sdpa", "transformers", "sdpa+compile", "sdpa+graphs", "triton")
                         for b in ("full", "ragged")}
    for contender in ("sdpa", "transformers", "sdpa+compile", "sdpa+graphs"):
        for kind in ("full", "ragged"):
            row = rows[contender, kind]
            assert row["ms"] > 0 and row["real_tokens_per_s"] > 0, row
            assert row["vs_sdpa"] > 0 and row["vs_transformers"] > 0
    assert rows["sdpa", "ragged"]["real_tokens"] < rows["sdpa", "full"]["real_tokens"] == 4 * 32
    assert "need CUDA" in rows["triton", "full"]["skipped"]
    assert run.stdout.strip().splitlines()[-1].split()[0] == "sdpa+graphs"    # the summary table ends it


def test_gpu_training_benchmark_refuses_without_cuda_in_one_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    run = subprocess.run([sys.executable, str(BENCHMARK)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "CUDA" in run.stderr


def test_token_ids_are_checked_once_before_the_first_step(tmp_path):
    examples = synthetic_examples(16)
    examples[5]["mlm_labels"][1] = TINY.vocab_size + 3              # a label the model cannot predict
    with pytest.raises(ValueError, match=f"token id {TINY.vocab_size + 3} >= the model's vocab_size"):
        pretrain(TINY, args(steps=2), examples,
                 options=RunOptions(out_dir=tmp_path / "run", progress=False, collate_fn=collate))
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_compile_runs_the_same_steps(monkeypatch):
    """RunOptions(compile=True) trains through torch.compile's wrapper (dynamo with its eager backend
    here: the graph capture without minutes of inductor codegen on CPU) to the same losses."""
    import minialbert.train as train

    data = synthetic_examples(32)
    plain = pretrain(TINY, args(steps=3, eval_every=0), data,
                     options=RunOptions(progress=False, collate_fn=collate)).history
    monkeypatch.setattr(train, "compiled", lambda net: train.torch.compile(net, backend="eager"))
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = pretrain(TINY, args(steps=3, eval_every=0), data,
                            options=RunOptions(progress=False, collate_fn=collate, compile=True)).history
    assert [r["loss"] for r in compiled] == pytest.approx([r["loss"] for r in plain], rel=1e-5)


def test_graphed_layers_run_the_same_steps_and_save_the_same_names(monkeypatch, tmp_path):
    """RunOptions(compile="graphs") compiles the encoder in place (dynamo's eager backend here; on a GPU
    inductor's reduce-overhead mode, which records CUDA graphs): the same losses, and a checkpoint whose
    names are the model's own, so that it loads into an uncompiled model."""
    import minialbert.train as train

    data = synthetic_examples(32)
    plain = pretrain(TINY, args(steps=3, eval_every=0), data,
                     options=RunOptions(progress=False, collate_fn=collate)).history
    graphed = train.graphed_layers
    monkeypatch.setattr(train, "graphed_layers", lambda model: graphed(model, backend="eager"))
    torch._dynamo.reset()
    result = pretrain(TINY, args(steps=3, eval_every=0), data,
                      options=RunOptions(out_dir=tmp_path / "run", progress=False, collate_fn=collate,
                                         compile="graphs"))
    assert result.model.albert.encoder._compiled_call_impl is not None      # the layers ran compiled
    assert [r["loss"] for r in result.history] == pytest.approx([r["loss"] for r in plain], rel=1e-5)
    loaded = load_checkpoint(tmp_path / "run")                               # an uncompiled model
    for name, weight in result.model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], weight)


def test_an_unknown_compile_mode_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"compile must be False, True or one of \('model', 'graphs'\), "
                                         r"got 'layers'"):
        pretrain(TINY, args(steps=4, eval_every=0), synthetic_examples(4),
                 options=RunOptions(progress=False, collate_fn=collate, compile="layers"))
