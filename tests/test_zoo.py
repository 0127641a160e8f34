"""The model zoo at ci scale: entries build, are cached under a key, resume, and rebuild on a new recipe."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minialbert.checkpoint import find_checkpoint
from minialbert.course.experiments import zoo, zoo_entries, zoo_ship
from minialbert.course.scale import SCALES
from minialbert.model import AlbertForPretraining
from minialbert.run_directory import RunLockedError, read_metrics, run_lock

SCALE = SCALES["ci"].replace(zoo_steps=4, pretrain_steps=2, warmup_steps=1, zoo_evals=2)
ZOO = zoo.Zoo(SCALE)


@pytest.fixture(autouse=True, scope="module")
def own_cache(tmp_path_factory):
    """One cache for the module: the ci corpus, tokenizer and data are built once; tests use other entries."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIALBERT_CACHE", str(tmp_path_factory.mktemp("cache")))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        yield
        torch.set_num_threads(threads)


def test_entries_share_one_recipe_and_differ_only_in_their_name():
    def args(e):
        return zoo.entry_args(e, SCALE.recipe, SCALE.zoo)

    def config(e):
        return zoo.entry_config(e, SCALE.models)

    sop, nsp, bert = (zoo.entry(n) for n in ("albert-sop", "albert-nsp", "bert-sop"))
    a_sop, a_nsp, a_bert = (args(e) for e in (sop, nsp, bert))
    assert dataclasses.replace(a_sop, objective="nsp") == a_nsp and a_sop == a_bert
    assert a_sop.steps == SCALE.zoo.steps
    assert config(bert).sharing == "none" and config(sop).sharing == "all"
    assert args(zoo.entry("lesson-albert-sop")).steps == SCALE.recipe.pretrain_steps
    sharing = ("albert-share-attention", "albert-share-ffn", "albert-share-none")
    variants = {n: config(zoo.entry(n)) for n in (*sharing, "albert-e16", "albert-e32")}
    assert [variants[n].sharing for n in sharing] == ["attention", "ffn", "none"]
    assert (variants["albert-e16"].embedding_size, variants["albert-e32"].embedding_size) == (16, 32)
    assert all(args(zoo.entry(n)) == a_sop for n in variants)   # one recipe for all
    balanced = zoo.entry("albert-sop-balanced")                  # the same run on length-balanced pairs
    assert args(balanced) == a_sop and config(balanced) == config(sop)
    assert ZOO.entry_dir(balanced.name).name.split("-")[-1] != ZOO.entry_dir(sop.name).name.split("-")[-1]
    long = args(zoo.entry("albert-sop-balanced-long"))         # four times the steps
    same_pace = {k: getattr(a_sop, k) for k in ("steps", "eval_every", "checkpoint_every")}
    assert long.steps == 4 * SCALE.zoo.steps and dataclasses.replace(long, **same_pace) == a_sop
    for name in ("albert-deep", "bert-deep"):      # 12 layers: a third of the rate, six times the warmup
        deep = zoo.entry_args(zoo.entry(name), SCALE.recipe, SCALE.zoo)
        assert deep.lr == pytest.approx(SCALE.recipe.learning_rate / 3) and deep.warmup == min(
            SCALE.zoo.steps, 6 * SCALE.recipe.warmup_steps)
        assert zoo.entry_config(zoo.entry(name), SCALE.models).num_layers == 12
        assert dataclasses.replace(deep, lr=a_sop.lr, warmup=a_sop.warmup) == a_sop
    with pytest.raises(ValueError, match="unknown zoo entry 'albert-xyz'"):
        zoo.entry("albert-xyz")


def test_build_caches_evaluates_and_reuses(capsys):
    rows = ZOO.build(["albert-sop"], progress=False)
    assert rows[0]["state"] == "built" and 0 <= rows[0]["mask_accuracy"]["accuracy"] <= 1
    run_dir = ZOO.entry_dir("albert-sop")
    assert find_checkpoint(run_dir).name == "step-000004"
    assert [r["step"] for r in read_metrics(run_dir) if r["split"] == "valid"] == [2, 4]
    ev = ZOO.evaluation("albert-sop")
    assert set(ev["baselines"]) == {"unigram", "copy_or_unigram", "neighbour", "two_each_side"}
    assert ev["sentence"]["task"] == "sop"
    first = ZOO.load("albert-sop", progress=False)            # cached: loaded, not trained
    assert "training" not in capsys.readouterr().out and not first.training
    assert ZOO.status(["albert-sop", "albert-nsp"])[1]["state"] == "missing"
    assert "albert-sop" in zoo.format_summary(rows)
    table = zoo.format_summary(rows, markdown=True).splitlines()
    assert table[1] == "|---|---|---|---|---|---|---|---|" and table[2].startswith("| `albert-sop` | 4 |")
    assert table[2].count("|") == table[0].count("|") == 9
    kept = ZOO.checkpoints("albert-sop")                      # every evaluation's checkpoint
    assert list(kept) == [2, 4] and kept[4] == find_checkpoint(run_dir)


def test_a_killed_build_resumes_and_ends_where_a_straight_one_does():
    e = zoo.entry("albert-mlm")
    ZOO.build(["albert-mlm"], progress=False)
    run_dir = ZOO.entry_dir(e.name)
    straight = {k: v.clone() for k, v in ZOO.load("albert-mlm").state_dict().items()}
    # imitate a build killed after its step-2 checkpoint: drop the later checkpoint and the evaluation
    shutil.rmtree(run_dir / "checkpoints" / "step-000004")
    (run_dir / "checkpoints" / "latest").write_text("step-000002\n")
    (run_dir / "evaluation.json").unlink()
    assert ZOO.status(["albert-mlm"])[0]["state"] == "partial"
    resumed = ZOO.load("albert-mlm", progress=False)
    for k, v in straight.items():
        assert torch.equal(resumed.state_dict()[k], v), k


def test_a_changed_recipe_is_a_new_entry():
    e = zoo.entry("albert-sop")
    longer = SCALE.replace(zoo_steps=6)
    other_lr = SCALE.replace(learning_rate=1e-3)
    more_evals = SCALE.replace(zoo_evals=4)             # reporting only: same weights
    dirs = {zoo.Zoo(s).entry_dir(e.name) for s in (SCALE, longer, other_lr)}
    assert len(dirs) == 3
    assert zoo.Zoo(more_evals).entry_dir(e.name) == ZOO.entry_dir(e.name)


def test_evaluation_of_a_missing_entry_says_how_to_build_it():
    with pytest.raises(FileNotFoundError, match="python -m minialbert zoo --only bert-nsp"):
        ZOO.evaluation("bert-nsp")


def test_cli_lists_and_rejects_unknown_names(capsys):
    from minialbert.course.commands import main

    assert main(["zoo", "--scale", "ci", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in zoo.ENTRIES) and "missing" in out
    assert main(["zoo", "--scale", "ci", "--only", "nope"]) == 2
    assert "unknown zoo entry 'nope'" in capsys.readouterr().err


def test_every_entry_resolves_and_the_cli_builds_one_of_each_kind(capsys, tmp_path):
    """Every entry's model and arguments are valid at ci scale; the CLI then trains one entry of each kind
    (shared, unshared at depth with its own schedule, length-balanced at the long budget). Lessons and
    their student versions build the other entries they read, under nbval and tests/test_student.py."""
    from minialbert.course.commands import main

    ci = SCALES["ci"]
    for e in zoo.ENTRIES.values():
        args = zoo.entry_args(e, ci.recipe, ci.zoo)
        assert 0 < args.warmup <= args.steps and args.lr > 0, e.name
        AlbertForPretraining(zoo.entry_config(e, ci.models))                        # a valid config builds
    kinds = ["albert-sop", "bert-deep", "albert-sop-balanced-long"]
    only = [arg for name in kinds for arg in ("--only", name)]
    assert main(["zoo", "--scale", "ci", "--out", str(tmp_path / "zoo.json"), *only]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in kinds) and "missing" not in out
    assert {r["state"] for r in zoo.Zoo(ci).status(kinds)} == {"built"}
    written = json.loads((tmp_path / "zoo.json").read_text())
    assert written["scale"] == "ci" and [r["name"] for r in written["entries"]] == kinds
    assert all(0 <= r["mask_accuracy"]["accuracy"] <= 1 and r["minutes"] > 0 for r in written["entries"])


def test_a_branch_starts_from_its_trunks_final_weights_and_is_keyed_by_it():
    """The 128-token ablation: the trunk (MLM alone) is built first, each branch starts from its final
    weights (a new sentence head aside), trains its own budget on its own 128-token pairs, and its key
    names the trunk's, so a changed trunk is a new branch."""
    trunk_entry, branch_entry = zoo.entry(zoo_entries.TRUNK), zoo.entry("albert-sop-128")
    assert branch_entry.start_from == zoo_entries.TRUNK and branch_entry.segmenting == "official"
    assert zoo.entry_seq_len(branch_entry, SCALE.models) == 128
    assert zoo.entry_seq_len(zoo.entry("albert-sop"), SCALE.models) == SCALE.data.max_seq_len < 128
    names = (zoo_entries.TRUNK, "albert-sop-128", "albert-nsp-128", "albert-mlm-128")
    args = {n: zoo.entry_args(zoo.entry(n), SCALE.recipe, SCALE.zoo) for n in names}
    assert args[zoo_entries.TRUNK].steps == SCALE.zoo.steps // 2
    assert args["albert-sop-128"].steps == SCALE.zoo.steps // 4
    assert dataclasses.replace(args["albert-sop-128"], objective="mlm") == args["albert-mlm-128"]   # 1 budget
    starts = []
    real_pretrain = zoo.pretrain
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(zoo, "pretrain", lambda cfg, args, data, evaluate, options: starts.append(
            options.start_state) or real_pretrain(cfg, args, data, evaluate, options))
        branch = ZOO.load("albert-sop-128", progress=False)
    trunk = ZOO.load(zoo_entries.TRUNK, progress=False)
    assert starts[0] is None and set(starts[1]) == set(trunk.state_dict())        # trunk first, then branch
    assert all(torch.equal(starts[1][k], v) for k, v in trunk.state_dict().items())
    assert set(branch.state_dict()) - set(trunk.state_dict()) == {"sentence_head.1.weight",
                                                                  "sentence_head.1.bias"}
    assert max(r["step"] for r in ZOO.metrics("albert-sop-128")) == args["albert-sop-128"].steps
    key = ZOO.entry_key(branch_entry.name)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(zoo.ENTRIES, zoo_entries.TRUNK, dataclasses.replace(trunk_entry, lr_factor=1.0))
        assert ZOO.entry_key(branch_entry.name) != key
    from minialbert.train import RunOptions, TrainArgs, pretrain
    with pytest.raises(ValueError, match=r"does not fit .* another shape \['albert.pooler.weight'\]"):
        pretrain(zoo.entry_config(branch_entry, SCALE.models), TrainArgs(objective="sop", steps=1, warmup=0),
                 [], options=RunOptions(start_state={"albert.pooler.weight": torch.zeros(1)}, progress=False))
    with pytest.raises(ValueError, match="start_state does not fit the model: missing"):
        pretrain(zoo.entry_config(branch_entry, SCALE.models), TrainArgs(objective="sop", steps=1, warmup=0),
                 [], options=RunOptions(start_state={}, progress=False))


def test_the_trunk_and_the_mlm_arm_read_the_sop_pairs_without_their_labels():
    """Masked LM alone on single segments stayed on the unigram plateau at 128 tokens; on [CLS] A [SEP] B
    [SEP] it leaves it. So the trunk and the MLM arm read exactly the SOP arm's pairs, masked alike, with
    the labels dropped, and the inputs are in their keys."""
    for name in (zoo_entries.TRUNK, "albert-mlm-128", "albert-mlm-128-seed1"):
        assert zoo.entry(name).objective == "mlm" and zoo.entry(name).inputs == "sop"
    assert all(zoo.entry(n).inputs is None for n in zoo.ENTRIES if not n.startswith(("albert-trunk",
                                                                                      "albert-mlm-128")))
    mlm, sop = ZOO.entry_data("albert-mlm-128", "valid"), ZOO.entry_data("albert-sop-128", "valid")
    assert mlm.objective == "mlm" and mlm.sentence_labels is None and "sentence_label" not in mlm[0]
    for field in ("input_ids", "token_type_ids", "mlm_labels", "offsets", "document_ids"):
        assert torch.equal(getattr(mlm, field), getattr(sop, field)), field
    assert (mlm.token_type_ids == 1).any()                                           # pairs: B is there
    key = ZOO.entry_key("albert-mlm-128")
    with pytest.MonkeyPatch.context() as mp:
        unpaired = dataclasses.replace(zoo.entry("albert-mlm-128"), inputs=None)
        mp.setitem(zoo.ENTRIES, "albert-mlm-128", unpaired)
        assert ZOO.entry_key("albert-mlm-128") != key
    with pytest.raises(ValueError, match="inputs='sop' needs objective 'mlm'"):
        zoo_entries.Entry("x", "nsp", "a sentence objective reads its own pairs", inputs="sop")


def test_a_damaged_entry_resumes_from_its_newest_verified_checkpoint_and_keeps_the_damage_aside():
    """A damaged latest checkpoint (flipped bytes, a missing file, a garbage `latest`)
    never costs the verified work before it: the entry resumes from the newest verified checkpoint,
    ends with the same weights as a straight build, and the damaged one is kept aside, reported."""
    ZOO.build(["bert-nsp"], progress=False)
    run_dir = ZOO.entry_dir("bert-nsp")
    straight = {k: v.clone() for k, v in ZOO.load("bert-nsp").state_dict().items()}
    latest = find_checkpoint(run_dir)
    assert latest.name == "step-000004" and (run_dir / "checkpoints" / "step-000002").is_dir()
    damages = {"flipped bytes": lambda c: flip_last_bytes(c / "model.safetensors"),
               "missing file": lambda c: (c / "optimizer.pt").unlink(),
               "garbage latest": lambda c: (c.parent / "latest").write_bytes(b"\x00garbage")}
    for what, damage in damages.items():
        damage(latest)
        assert ZOO.status(["bert-nsp"])[0]["state"] in ("partial", "built"), what
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = ZOO.load("bert-nsp", progress=False)
        if what != "garbage latest":                                   # the checkpoint itself was damaged
            assert any("set aside as damaged-step-000004" in str(w.message) for w in caught), what
            assert (run_dir / "checkpoints" / "damaged-step-000004").is_dir()
        assert (run_dir / "checkpoints" / "step-000002" / "model.safetensors").exists()   # never deleted
        for k, v in model.state_dict().items():
            assert torch.equal(v, straight[k]), f"{what}: {k} differs from the straight build"
        assert ZOO.status(["bert-nsp"])[0]["state"] == "built"
        latest = run_dir / "checkpoints" / "step-000004"


def test_a_second_build_of_an_entry_stops_naming_the_first():
    """While a process holds an entry's run lock, another build of it stops with one
    line naming that process, and deletes nothing."""
    run_dir = ZOO.entry_dir("albert-nsp")
    with run_lock(run_dir):
        with pytest.raises(RunLockedError, match=f"in use by another run \\(PID {os.getpid()}"):
            ZOO.load("albert-nsp", progress=False)
        assert (run_dir / ".lock").exists()
    code = ("import dataclasses, sys, time\n"
            "from minialbert.course.experiments import zoo\nfrom minialbert.run_directory import run_lock\n"
            "from minialbert.course.scale import SCALES\n"
            "s = SCALES['ci'].replace(zoo_steps=4, pretrain_steps=2, warmup_steps=1,\n"
            "                        zoo_evals=2)\n"
            "with run_lock(zoo.Zoo(s).entry_dir('albert-nsp')):\n"
            "    print('locked', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=f"PID {holder.pid}"):
            ZOO.build(["albert-nsp"], progress=False)
    finally:
        holder.kill()
        holder.wait()
    ZOO.build(["albert-nsp"], progress=False)                  # the lock died with its process
    assert ZOO.status(["albert-nsp"])[0]["state"] == "built"


def test_damaged_zoo_files_are_named():
    """A damaged evaluation.json or metrics.jsonl is an error naming the file."""
    ZOO.build(["albert-mlm"], progress=False)
    run_dir = ZOO.entry_dir("albert-mlm")
    (run_dir / "evaluation.json").write_text('{"mlm": ')
    with pytest.raises(ValueError, match="evaluation.json is damaged"):
        ZOO.evaluation("albert-mlm")
    metrics = run_dir / "metrics.jsonl"
    metrics.write_text(metrics.read_text()[:-10])
    with pytest.raises(ValueError, match=r"metrics file .*metrics.jsonl is damaged at line"):
        ZOO.metrics("albert-mlm")


def flip_last_bytes(path) -> None:
    data = bytearray(path.read_bytes())
    data[-8:] = bytes(b ^ 0xFF for b in data[-8:])                   # inside the tensors
    path.write_bytes(bytes(data))


@settings(max_examples=3, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(done=st.sampled_from([0, 1, 2]))
def test_a_second_process_never_disturbs_a_build_in_progress(done, tmp_path):
    """Drawn by Hypothesis: however far the first build has got (0, 1 or 2 of its
    checkpoints written) when a second process asks for the same entry, the second stops naming the
    first's PID and changes nothing; once the first is gone the entry finishes with the weights of a
    straight build."""
    name = "albert-sop-seed1"
    ZOO.build([name], progress=False)
    run_dir = ZOO.entry_dir(name)
    straight = {k: v.clone() for k, v in ZOO.load(name).state_dict().items()}
    saved = tmp_path / "built"                 # tmp_path is shared by the examples Hypothesis draws
    shutil.rmtree(saved, ignore_errors=True)
    shutil.copytree(run_dir, saved)
    try:
        kept = sorted((run_dir / "checkpoints").glob("step-*"))[:done]    # the first build's progress
        for ckpt in sorted((run_dir / "checkpoints").glob("step-*"))[done:]:
            shutil.rmtree(ckpt)
        (run_dir / "evaluation.json").unlink()
        if kept:
            (run_dir / "checkpoints" / "latest").write_text(kept[-1].name + "\n")
        else:
            shutil.rmtree(run_dir / "checkpoints")
        before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
        code = ("import sys, time\nfrom pathlib import Path\nfrom minialbert.run_directory import run_lock\n"
                "with run_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(60)\n")
        first = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert first.stdout.readline().strip() == "locked"
            with pytest.raises(RunLockedError, match=f"PID {first.pid}"):
                ZOO.load(name, progress=False)
            after = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}
            assert after == before
        finally:
            first.kill()
            first.wait()
        for k, v in ZOO.load(name, progress=False).state_dict().items():
            assert torch.equal(v, straight[k]), k
    finally:
        shutil.rmtree(run_dir)
        shutil.copytree(saved, run_dir)


# ---------------------------------------------------------------------------------- the shipped zoo

def test_unship_removes_only_the_entries_named_and_rewrites_the_manifest(tmp_path, monkeypatch):
    ZOO.build(["albert-sop", "albert-nsp"], progress=False)
    monkeypatch.setattr(zoo, "SHIPPED_ROOT", tmp_path / "zoo" / "v1")
    folder = zoo_ship.ship(["albert-sop", "albert-nsp"], ZOO)
    keys = json.loads((folder / zoo.SHIPPED_MANIFEST).read_text())["entries"]
    (folder / "notes.txt").write_text("a maintainer's file")
    with pytest.raises(zoo.ZooEntryMissing, match=r"MANIFEST.json: no shipped entry albert-mlm"):
        zoo_ship.unship(["albert-nsp", "albert-mlm"], ZOO)
    assert (folder / keys["albert-nsp"]).is_dir()                       # nothing removed on a bad name
    zoo_ship.unship(["albert-nsp"], ZOO)
    manifest = json.loads((folder / zoo.SHIPPED_MANIFEST).read_text())
    assert manifest["entries"] == {"albert-sop": keys["albert-sop"]}
    assert all(p.startswith(keys["albert-sop"]) for p in manifest["files"])
    assert not (folder / keys["albert-nsp"]).exists() and (folder / "notes.txt").exists()
    zoo.verify_shipped(folder / keys["albert-sop"])
    assert ZOO.status(["albert-sop"])[0]["state"] == "shipped"


def test_a_shipped_entry_is_loaded_verified_and_never_retrained(tmp_path, monkeypatch, capsys):
    ZOO.build(["albert-sop", "albert-nsp"], progress=False)
    built = {n: ZOO.load(n).state_dict() for n in ("albert-sop", "albert-nsp")}
    monkeypatch.setattr(zoo, "SHIPPED_ROOT", tmp_path / "zoo" / "v1")
    folder = zoo_ship.ship(["albert-sop", "albert-nsp"], ZOO)
    manifest = json.loads((folder / zoo.SHIPPED_MANIFEST).read_text())
    assert set(manifest["entries"]) == {"albert-sop", "albert-nsp"}
    assert not any(p.endswith("optimizer.pt") for p in manifest["files"])          # weights only
    states = [json.loads((folder / p).read_text()) for p in manifest["files"]
              if p.endswith("trainer_state.json")]
    assert states and all("metrics" not in s and s["step"] in (2, 4) for s in states)  # no resume history
    steps = {n: sorted(p.split("/")[2] for p in manifest["files"] if p.startswith(manifest["entries"][n])
                       and p.endswith("model.safetensors")) for n in ("albert-sop", "albert-nsp")}
    assert steps == {"albert-sop": ["step-000002", "step-000004"], "albert-nsp": ["step-000004"]}
    shipped = [(r["step"], r["split"]) for r in read_metrics(folder / manifest["entries"]["albert-sop"])]
    assert [s for s, split in shipped if split == "train"] == [1, 4]          # thinned; evaluations all kept
    assert {split for _, split in shipped} == {"train", "valid"}
    # a reader with an empty cache: the shipped entries are there, loaded without training
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "empty-cache"))
    rows = {r["name"]: r["state"] for r in ZOO.status(["albert-sop", "albert-nsp", "albert-mlm"])}
    assert rows == {"albert-sop": "shipped", "albert-nsp": "shipped", "albert-mlm": "missing"}
    for name, state in built.items():
        loaded = ZOO.load(name, progress=False).state_dict()
        assert all(torch.equal(loaded[k], v) for k, v in state.items())
    assert "training" not in capsys.readouterr().out
    assert list(ZOO.checkpoints("albert-sop")) == [2, 4]
    assert ZOO.evaluation("albert-nsp")["sentence"]["task"] == "nsp"
    assert ZOO.summary(["albert-sop"])[0]["state"] == "shipped"
    # a damaged, missing or unlisted file is a one-line error naming it
    entry_dir = ZOO.entry_dir("albert-nsp")
    weights = entry_dir / "checkpoints" / "step-000004" / "model.safetensors"
    original = weights.read_bytes()
    flip_last_bytes(weights)
    with pytest.raises(ValueError, match=r"zoo file .*step-000004/model.safetensors is damaged"):
        ZOO.load("albert-nsp")
    weights.write_bytes(original)
    (entry_dir / "notes.txt").write_text("stray")
    with pytest.raises(ValueError, match=r"notes.txt is not in .*MANIFEST.json"):
        ZOO.evaluation("albert-nsp")
    (entry_dir / "notes.txt").unlink()
    (entry_dir / "metrics.jsonl").unlink()
    with pytest.raises(ValueError, match=r"metrics.jsonl is missing; restore it"):
        ZOO.metrics("albert-nsp")
    assert not (tmp_path / "empty-cache" / "zoo").exists()          # nothing was ever trained


def test_shipping_keeps_log_spaced_checkpoints_and_thinned_train_records():
    spaced = [s for s in range(2500, 20_001, 2500) if zoo_ship.log_spaced(s, 20_000)]
    assert spaced == [2500, 5000, 10_000, 20_000]
    records = [{"step": s, "split": "train"} for s in range(1, 26)] + [{"step": 25, "split": "valid"}]
    assert [(r["step"], r["split"]) for r in zoo_ship.shipped_metrics(records)] == [
        (1, "train"), (10, "train"), (20, "train"), (25, "train"), (25, "valid")]


def test_a_missing_entry_is_never_trained_silently(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    course_like = SCALE.replace(zoo_on_demand=False, step_seconds=0.5)
    with pytest.raises(zoo.ZooEntryMissing, match=r"'albert-mlm' \(ci scale\) is neither shipped .* "
                                                   r"`python -m minialbert zoo --only albert-mlm --scale ci` "
                                                   r"trains it \(about 0 min on 2 cores\)"):
        zoo.Zoo(course_like).load("albert-mlm")
    assert not (tmp_path / "zoo").exists()                                     # nothing was trained
    shallow, deep = zoo.Zoo(course_like).status(["albert-sop", "albert-deep"])     # cost grows with depth
    layers = [zoo.entry_config(zoo.entry(n), SCALE.models).num_layers for n in ("albert-sop", "albert-deep")]
    assert layers[1] == 12
    assert deep["minutes_left"] == pytest.approx(shallow["minutes_left"] * layers[1] / layers[0])
    trunk = zoo.Zoo(course_like).status(["albert-trunk-128"])[0]                   # and with length
    positions = zoo.entry_config(zoo.entry("albert-trunk-128"), SCALE.models).max_position_embeddings
    per_step = shallow["minutes_left"] / zoo.Zoo(course_like).entry_args("albert-sop").steps
    assert trunk["minutes_left"] == pytest.approx(per_step * trunk["steps"] * positions
                                                  / SCALE.models.config("albert").max_position_embeddings)


def test_an_entry_rebuilt_in_fresh_caches_has_the_same_bytes(tmp_path, monkeypatch):
    """Bit-reproducible: the same entry built twice, each time from an empty cache (corpus, tokenizer,
    data and training all redone) and with a different torch thread count outside, gives weights with
    the same sha256; rebuild() says so against the shipped copy."""
    from minialbert.download import sha256_of

    digests = []
    for attempt, threads in (("first", 1), ("second", 2)):      # the zoo pins its own thread count
        monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / attempt))
        torch.set_num_threads(threads)
        ZOO.build(["albert-sop"], progress=False)
        assert torch.get_num_threads() == threads                # and gives the caller's back
        torch.set_num_threads(1)
        final = ZOO.checkpoints("albert-sop")[4]
        # trainer_state.json (and the manifest hashing it) records wall-clock seconds: not compared
        digests.append({name: sha256_of(final / name) for name in ("model.safetensors", "config.json")})
        digests[-1]["evaluation.json"] = sha256_of(final.parent.parent / "evaluation.json")
    assert digests[0] == digests[1]
    monkeypatch.setattr(zoo, "SHIPPED_ROOT", tmp_path / "zoo")
    zoo_ship.ship(["albert-sop"], ZOO)
    result = ZOO.rebuild("albert-sop", progress=False)
    assert result["identical"] and result["sha256"] == digests[0]["model.safetensors"]


def test_cli_rebuild_retrains_from_scratch_and_compares(capsys):
    from minialbert.course.commands import main

    assert main(["zoo", "--scale", "ci", "--only", "albert-e16"]) == 0
    built = zoo.Zoo(SCALES["ci"]).entry_dir("albert-e16")
    capsys.readouterr()
    assert main(["zoo", "--scale", "ci", "--rebuild", "albert-e16"]) == 0
    out = capsys.readouterr().out
    assert f"moved the built albert-e16 aside to {built}.replaced-" in out
    assert "no shipped entry to compare with" in out and built.is_dir()


def test_an_entry_built_meanwhile_by_another_process_is_skipped(monkeypatch):
    """Two `zoo` processes with overlapping lists: the second skips what the first finished meanwhile."""
    trained = []
    train = zoo.Zoo._train

    def first_also_builds_the_other(self, e, run_dir, progress, callbacks=(), **options):
        trained.append(e.name)
        train(self, e, run_dir, progress, callbacks, **options)
        if e.name == "albert-share-ffn":                         # "another process" builds the next one
            train(self, zoo.entry("albert-share-attention"), self.cache_entry_dir("albert-share-attention"),
                  False)

    monkeypatch.setattr(zoo.Zoo, "_train", first_also_builds_the_other)
    rows = ZOO.build(["albert-share-ffn", "albert-share-attention"], progress=False)
    assert trained == ["albert-share-ffn"] and [r["state"] for r in rows] == ["built", "built"]


def test_left_plateau_is_the_first_evaluation_whose_interval_clears_the_unigram_baselines():
    unigram = {"accuracy": 0.06, "ci95": [0.055, 0.065]}
    records = [{"split": "train", "step": 1, "loss": 9.0},
               {"split": "valid", "step": 1000, "mask_ci95": [0.05, 0.07]},
               {"split": "valid", "step": 2000, "mask_ci95": [0.065, 0.08]},     # touches 6.5%: not yet
               {"split": "valid", "step": 3000, "mask_ci95": [0.066, 0.09]},
               {"split": "valid", "step": 4000, "mask_ci95": [0.05, 0.07]}]     # a later fall changes nothing
    assert zoo.left_plateau(records, unigram) == 3000
    assert zoo.left_plateau(records[:3], unigram) is None


def test_the_committed_course_zoo_verifies_and_stays_within_40_mb():
    folder = zoo.SHIPPED_ROOT / "course"
    manifest = json.loads((folder / zoo.SHIPPED_MANIFEST).read_text())
    for key in manifest["entries"].values():
        zoo.verify_shipped(folder / key)              # every file listed, present and with its sha256
    text = (".json", ".jsonl", "latest")
    binary = sum((folder / p).stat().st_size for p in manifest["files"] if not p.endswith(text))
    assert binary <= 40_000_000, f"the shipped zoo holds {binary / 1e6:.1f} MB of binary files (at most 40)"
    assert set(manifest["entries"]) <= set(zoo.ENTRIES)
