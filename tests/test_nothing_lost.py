"""Nothing lost or silently wrong in the zoo list, the settings, a resumed run,
replace(), the corpus cache, a full disk, an interrupted save and a figure's two files.

Each test names the case and what it did before the fix.
"""

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from test_train import TINY, args, synthetic_examples  # noqa: E402

from minialbert import checkpoint, corpus, download  # noqa: E402
from minialbert.corpus import sources  # noqa: E402
from minialbert.course.commands import main  # noqa: E402
from minialbert.course.experiments import zoo  # noqa: E402
from minialbert.course.plots import save_figure  # noqa: E402
from minialbert.course.scale import DRY_RUN_VAR, ENV_VAR, SCALES, current_scale  # noqa: E402
from minialbert.train import RunOptions, pretrain  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs on one thread (conftest.one_thread)."""


# -------------------------------------------------------------------- 1. zoo --list verifies
@pytest.fixture
def shipped_copy(tmp_path, monkeypatch):
    """The committed course zoo's smallest entry and its MANIFEST.json, copied; zoo.SHIPPED_ROOT points
    at the copy. -> (the entry's folder, its weights file)."""
    source = zoo.SHIPPED_ROOT / "course"
    [entry] = [d for d in source.iterdir() if d.name.startswith("lesson-albert-sop-")]
    root = tmp_path / "zoo" / "v1"
    shutil.copytree(entry, root / "course" / entry.name)
    shutil.copy2(source / zoo.SHIPPED_MANIFEST, root / "course" / zoo.SHIPPED_MANIFEST)
    monkeypatch.setattr(zoo, "SHIPPED_ROOT", root)
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    copied = root / "course" / entry.name
    return copied, next(copied.rglob("model.safetensors"))


def listed(capsys) -> str:
    """The line `zoo --list --scale course` prints for lesson-albert-sop."""
    assert main(["zoo", "--list", "--scale", "course", "--only", "lesson-albert-sop"]) == 0
    [line] = capsys.readouterr().out.splitlines()
    return line


def test_zoo_list_verifies_every_shipped_file(shipped_copy, capsys):
    """Before: "shipped 12000/12000" after a flipped byte, a deleted or a garbled MANIFEST.json."""
    entry, weights = shipped_copy
    course = SCALES["course"]
    assert zoo.Zoo(course).status(["lesson-albert-sop"])[0]["state"] == "shipped"
    assert listed(capsys).split()[1] == "shipped"
    original = weights.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01                                  # one bit of one weight
    weights.write_bytes(bytes(flipped))
    row = zoo.Zoo(course).status(["lesson-albert-sop"])[0]
    assert row["state"] == "damaged" and not zoo.available(row)
    assert "model.safetensors is damaged" in row["problem"] and "\n" not in row["problem"]
    line = listed(capsys)
    assert line.split()[1] == "damaged" and "model.safetensors is damaged" in line
    with pytest.raises(zoo.ShippedEntryDamaged, match="model.safetensors is damaged"):
        zoo.Zoo(course).load("lesson-albert-sop", progress=False)           # never loaded, never retrained
    with pytest.raises(zoo.ShippedEntryDamaged, match="not as shipped"):
        zoo.Zoo(course).build(["lesson-albert-sop"], progress=False)
    weights.write_bytes(original)
    manifest = entry.parent / zoo.SHIPPED_MANIFEST
    for damage in ("{garbled", json.dumps({"files": ["a list"]}), json.dumps({"files": {}}), None):
        if damage is None:
            manifest.unlink()
        else:
            manifest.write_text(damage)
        row = zoo.Zoo(course).status(["lesson-albert-sop"])[0]
        assert row["state"] == "unverifiable", damage
        assert row["problem"].startswith(f"zoo manifest {manifest}")
        assert listed(capsys).split()[1] == "unverifiable"
    assert not (entry.parent.parent.parent.parent / "cache" / "zoo").exists()     # nothing trained


# -------------------------------------------------------------------- 2. settings from the environment
@pytest.mark.parametrize("value", ["false", "true", "no", "yes", "2", " 1", "1 ", "on"])
def test_a_dry_run_setting_outside_the_documented_values_is_refused(value, monkeypatch, capsys):
    """Before: any value but "" or "0" (even "false") silently turned the dry run on."""
    monkeypatch.setenv(DRY_RUN_VAR, value)
    with pytest.raises(ValueError, match=f"^{DRY_RUN_VAR}={value!r} is not one of '', '0', '1'") as info:
        current_scale("gpu")
    assert "\n" not in str(info.value)
    assert main(["tokenizer", "--scale", "ci"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"minialbert: error: {DRY_RUN_VAR}={value!r}")


@pytest.mark.parametrize("value, dry", [("", False), ("0", False), ("1", True)])
def test_the_documented_dry_run_values_still_work(value, dry, monkeypatch):
    monkeypatch.setenv(DRY_RUN_VAR, value)
    assert current_scale("ci").name == ("ci-dry" if dry else "ci")


def test_a_scale_or_cache_setting_that_cannot_work_names_the_variable(monkeypatch, tmp_path):
    """Before: a relative MINIALBERT_CACHE named a different cache in every folder (the lessons run in
    notebooks/, the CLI in the repository); an unknown MINIALBERT_SCALE did not say which setting."""
    monkeypatch.setenv(ENV_VAR, "laptop")
    with pytest.raises(ValueError,
                       match="^unknown MINIALBERT_SCALE='laptop'; choose one of ci, course, gpu$"):
        current_scale()
    monkeypatch.setenv("MINIALBERT_CACHE", "relative/cache")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="^MINIALBERT_CACHE='relative/cache' is a relative path"):
        download.cache_dir()
    assert not (tmp_path / "relative").exists()
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "absolute"))
    assert download.cache_dir() == tmp_path / "absolute"


# -------------------------------------------------------------------- 3. resume-from a finished run
def test_resuming_a_finished_run_into_a_new_folder_is_refused_and_creates_nothing(tmp_path):
    """Before: exit 0 and a result naming `fresh`, which was never created (nothing was left to train)."""
    data, run_args = synthetic_examples(16), args(steps=2, warmup=0, eval_every=0, checkpoint_every=1)
    done = tmp_path / "done"
    pretrain(TINY, run_args, data, options=RunOptions(out_dir=done, progress=False))
    before = {p: p.read_bytes() for p in done.rglob("*") if p.is_file()}
    for resume_from in (done, done / "checkpoints" / "step-000002"):
        with pytest.raises(ValueError, match=r"is already at step 2 of 2: the run it belongs to is finished, "
                                             r"so there is nothing to train into .*fresh") as info:
            pretrain(TINY, run_args, data,
                     options=RunOptions(out_dir=tmp_path / "fresh", resume_from=resume_from, progress=False))
        assert "\n" not in str(info.value)
        assert not (tmp_path / "fresh").exists()
    assert {p: p.read_bytes() for p in done.rglob("*") if p.is_file()} == before
    # an unfinished run still branches into the new folder, and --resume of the finished run itself is fine
    branch = pretrain(TINY, run_args, data,
                      options=RunOptions(out_dir=tmp_path / "branch",
                                         resume_from=done / "checkpoints" / "step-000001", progress=False))
    assert branch.history[-1]["step"] == 2 and checkpoint.find_checkpoint(tmp_path / "branch")
    resumed = pretrain(TINY, run_args, data, options=RunOptions(out_dir=done, resume=True, progress=False))
    assert resumed.history[-1]["step"] == 2


# -------------------------------------------------------------------- 5. corpus cache and full disk
def test_a_folder_in_place_of_a_cache_file_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """Before: `python -m minialbert.corpus` with the corpus JSON damaged and an archive replaced by a
    folder printed a 41-line IsADirectoryError traceback."""
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path))
    monkeypatch.setattr(corpus, "COURSE_SOURCES", corpus.COURSE_SOURCES[:1])   # fails at the first source
    monkeypatch.setattr(corpus, "_COURSE", {})
    cached = corpus._course_cache_path()
    cached.parent.mkdir(parents=True)
    cached.write_text('{"garbled')
    (cached.parent / (cached.name + ".sha256")).write_text("0" * 64 + "\n")
    archive = tmp_path / "corpora" / "archives" / corpus.COURSE_SOURCES[0].filename
    archive.mkdir(parents=True)
    with pytest.warns(UserWarning, match=f"cache file {cached} is damaged"):
        assert corpus.main([]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("[course corpus] building the course corpus") and len(err) == 2
    assert err[-1] == (f"python -m minialbert.corpus: error: {archive} is a folder (or another non-file) "
                       f"where the cache keeps the archive {archive.name}; remove it (rm -r '{archive}') "
                       f"and run again: pip fetches the archive again")
    assert archive.is_dir()                                 # a folder is never deleted for the user
    cached.unlink(missing_ok=True)
    cached.mkdir()
    with pytest.raises(ValueError, match=f"cache file {cached} is a folder"):
        download.read_checked(cached)
    with pytest.raises(ValueError, match="is a folder"):
        sources.course_archive(corpus.COURSE_SOURCES[0])


def no_space(*_):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_names_the_file_and_whether_it_is_the_cache(tmp_path, monkeypatch):
    """Before: "[Errno 28] No space left on device", no path (it was the cache, not --out)."""
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    target = download.cache_dir() / "pretraining" / "sop-0123.safetensors"
    monkeypatch.setattr(download.os, "fsync", no_space)
    with pytest.raises(OSError, match=f"^no space left on the device while writing {target} \\(.* MiB free "
                                      f"there\\); it is in the minialbert cache .*: free space there or set "
                                      f"MINIALBERT_CACHE to a folder on a disk with room$") as info:
        download.atomic_write(target, b"data")
    assert info.value.errno == errno.ENOSPC
    out = tmp_path / "out"
    with pytest.raises(OSError, match=f"^no space left .* writing {out / 'x.json'} .*; free space on the "
                                      f"disk of {out}$"):
        download.write_json(tmp_path / "out" / "x.json", {})
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == []          # no temporary left


def test_pretrain_on_a_full_cache_disk_is_one_line_naming_the_cache(tmp_path):
    """The same on a real full disk: a 2 MiB tmpfs as MINIALBERT_CACHE holding the ci corpus and
    tokenizer, too small for the pretraining set `pretrain` writes there."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root: the real full-disk case is not tested here")
    build = tmp_path / "build"
    env = {**os.environ, "MINIALBERT_CACHE": str(build), "MINIALBERT_SCALE": "ci", "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", "from minialbert.course.data import course_tokenizer as t\n"
                    "from minialbert.course.scale import SCALES\nt(SCALES['ci'].data)"],
                   env=env, check=True, cwd=ROOT)
    disk = tmp_path / "disk"
    disk.mkdir()
    needed = sum(p.stat().st_size for p in build.rglob("*") if p.is_file())
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={needed // 1024 + 300}k", "tmpfs",
                       str(disk)]).returncode:
        pytest.skip("this machine does not allow mounting a tmpfs: the real full-disk case is not tested")
    try:
        shutil.copytree(build, disk, dirs_exist_ok=True)
        argv = ["pretrain", "--out", str(tmp_path / "run"), "--steps", "2", "--warmup", "1", "--quiet"]
        result = subprocess.run([sys.executable, "-m", "minialbert", *argv],
                                env={**env, "MINIALBERT_CACHE": str(disk)}, cwd=ROOT, capture_output=True,
                                text=True)
        assert result.returncode == 2
        assert result.stderr.splitlines()[-1].startswith(f"minialbert: error: no space left on the device "
                                                         f"while writing {disk / 'pretraining'}")
        assert f"it is in the minialbert cache {disk}" in result.stderr
        assert not (tmp_path / "run").exists()
        assert not [p for p in disk.rglob("*") if p.name.endswith(".tmp")]
    finally:
        subprocess.run(["umount", str(disk)])


# -------------------------------------------------------------------- 6. interrupted saves, figure pairs
def test_ctrl_c_during_a_checkpoint_save_leaves_no_temporary_folder(tmp_path, monkeypatch):
    """Before: SIGINT during a save left checkpoints/.tmp-step-NNNNNN-PID behind."""
    data, run_args = synthetic_examples(16), args(steps=2, warmup=0, eval_every=0, checkpoint_every=1)
    write = checkpoint._write_checkpoint_files

    def interrupted(tmp, *rest):
        if tmp.name.startswith(".tmp-step-000002-"):
            tmp.mkdir()
            (tmp / "model.safetensors").write_bytes(b"half")
            raise KeyboardInterrupt
        write(tmp, *rest)

    monkeypatch.setattr(checkpoint, "_write_checkpoint_files", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pretrain(TINY, run_args, data, options=RunOptions(out_dir=tmp_path, progress=False))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step-000001"]


def test_a_figure_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """Before: a full disk during `figures` left NAME.json without its NAME.png."""
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    png = save_figure(fig, "curve", {"x": [1, 2]}, tmp_path)
    assert png == tmp_path / "curve.png"
    assert json.loads((tmp_path / "curve.json").read_text()) == {"x": [1, 2]}
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    fsync, calls = os.fsync, []

    def second_write_fails(fd):                 # the JSON is written, the PNG meets a full disk
        calls.append(fd)
        return no_space() if len(calls) == 2 else fsync(fd)

    monkeypatch.setattr(download.os, "fsync", second_write_fails)
    with pytest.raises(OSError, match=r"no space left on the device while writing .*new\.png"):
        save_figure(fig, "new", {"x": [5]}, tmp_path)
    calls.clear()
    with pytest.raises(OSError, match=r"no space left on the device while writing .*curve\.png"):
        save_figure(fig, "curve", {"x": [5]}, tmp_path)
    plt.close(fig)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == old      # no half pair, no temporary
