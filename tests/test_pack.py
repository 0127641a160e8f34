"""The pack (minialbert/course/pack.py): the cache files a scale's data is made from, carried in one file.

A pack from a stranger is checked before anything is written: it may hold only the corpus text and the
tokenizer of one scale, by name (no zoo entry, no pretraining set, no pickle, no extra file, nothing twice),
with names a cache file may have, sizes under a cap checked before a member is read, and a manifest whose
every field is checked. The forged packs below are real packs whose manifest was edited and re-signed.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import shutil
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from minialbert.corpus import course_corpus_cached
from minialbert.course import pack
from minialbert.course.cli import build_parser
from minialbert.course.commands import main
from minialbert.course.data import course_tokenizer, course_tokenizer_path
from minialbert.course.pack import MANIFEST, MAX_PACK_BYTES, PACK_FORMAT, make_pack, read_pack, unpack
from minialbert.course.scale import SCALES, dry_run
from minialbert.download import cache_dir

CI = SCALES["ci"]


def tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One ci-scale pack for the whole module (its tokenizer trained once, in a cache of its own)."""
    root = tmp_path_factory.mktemp("made")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MINIALBERT_CACHE", str(root / "cache"))
        manifest = make_pack(CI.name, CI.data, root / "ci.pack")
    return root / "ci.pack", manifest, tree(root / "cache")


@pytest.fixture()
def packed(made, tmp_path, monkeypatch):
    """The ci-scale pack and the files of the cache it was made in, copied here (MINIALBERT_CACHE: that
    copy)."""
    path, manifest, source = made
    shutil.copytree(path.parent / "cache", tmp_path / "made")
    shutil.copy(path, tmp_path / "ci.pack")
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "made"))
    return tmp_path / "ci.pack", manifest, source


def test_pack_round_trips_byte_for_byte(packed, tmp_path, monkeypatch):
    path, made, source = packed
    assert set(made["files"]) == {n for n in source if n.startswith("tokenizers/")}   # ci: no course corpus
    assert len(made["files"]) == 2 and made["pack_bytes"] == path.stat().st_size <= MAX_PACK_BYTES
    assert made["pack_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "other"))
    written = unpack(path, CI.name, CI.data)
    assert len(written) == 2
    unpacked = tree(tmp_path / "other")                         # (and the embedded corpus's own cache)
    assert {n: unpacked[n] for n in made["files"]} == {n: source[n] for n in made["files"]}   # byte for byte
    assert set(unpacked) - set(made["files"]) <= {n for n in unpacked if n.startswith("corpora/pydocs-")}
    assert course_tokenizer_path(CI.data) in written                  # found where course_tokenizer looks
    assert course_tokenizer(CI.data).model_proto == source[next(iter(made["files"]))]
    again = make_pack(CI.name, CI.data, tmp_path / "again.pack")      # no dates inside: the same bytes
    assert (tmp_path / "again.pack").read_bytes() == path.read_bytes() and again["files"] == made["files"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "not a pack"])
def test_a_damaged_pack_fails_in_one_line_naming_the_file(packed, tmp_path, monkeypatch, damage):
    path, _, _ = packed
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "truncate":
        data = data[:len(data) // 2]
    else:
        data = bytearray(b"hello")
    bad = tmp_path / "bad.pack"
    bad.write_bytes(bytes(data))
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "other"))
    with pytest.raises(ValueError, match="damaged") as e:
        unpack(bad, CI.name, CI.data)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "other" / "tokenizers").exists()      # nothing written from a damaged pack


def test_unpack_refuses_another_scales_pack_and_a_missing_file(packed, tmp_path):
    path, _, _ = packed
    with pytest.raises(ValueError, match="holds the ci scale's files, not the gpu scale's; unpack it with "
                                         "--scale ci"):
        unpack(path, SCALES["gpu"].name, SCALES["gpu"].data)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_pack(tmp_path / "nowhere.pack", CI.name, CI.data)


def test_pack_and_unpack_commands(packed, tmp_path, monkeypatch, capsys):
    parser = build_parser()                      # their gpu default never leaks into another command's
    assert parser.parse_args(["pretrain", "--out", "r"]).scale is None
    assert parser.parse_args(["pack", "--out", "p"]).scale is None
    assert main(["pack", "--scale", "ci", "--out", str(tmp_path / "p.bin")]) == 0
    assert "sha256" in capsys.readouterr().out
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "other"))
    assert main(["unpack", "--scale", "ci", str(tmp_path / "p.bin")]) == 0
    assert "2 files, every sha256 checked" in capsys.readouterr().out
    (tmp_path / "bad.bin").write_bytes((tmp_path / "p.bin").read_bytes()[:100])
    assert main(["unpack", "--scale", "ci", str(tmp_path / "bad.bin")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.bin is damaged" in err[0]


# ------------------------------------------------------------------------------------ hostile packs
def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def signed(members: list[tuple[str, bytes]], scale: str = "ci") -> dict:
    """The manifest `pack` would write for these members (a forger's re-signed one)."""
    return {"format": PACK_FORMAT, "scale": scale,
            "files": {name: {"sha256": sha256(data), "bytes": len(data)} for name, data in members}}


def forge(path: Path, members: list[tuple[str, bytes]], manifest: dict | bytes | None = None,
          header_only: tarfile.TarInfo | None = None) -> Path:
    """A pack written by hand: the manifest first (signed for `members` unless given), then the members in
    order (a name may come twice), then, where given, a member's header alone (no data follows it)."""
    manifest = signed(members) if manifest is None else manifest
    manifest = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [(MANIFEST, manifest), *members]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        end = tar.offset                                          # before the end-of-archive blocks
    data = buffer.getvalue()
    if header_only is not None:
        data = data[:end] + header_only.tobuf(tarfile.PAX_FORMAT) + bytes(4096)
    path.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, preset=1))     # a 1 MiB dictionary
    return path


def members_of(path: Path) -> list[tuple[str, bytes]]:
    """A pack's members (its manifest left out), in order."""
    with tarfile.open(path, mode="r:xz") as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.name != MANIFEST]


@pytest.fixture()
def hostile(made, tmp_path, monkeypatch):
    """(the real pack's members, a function: members, manifest -> the unpack error's one line), in an empty
    cache that must stay empty."""
    real = members_of(made[0])
    cache = tmp_path / "cache"
    monkeypatch.setenv("MINIALBERT_CACHE", str(cache))

    def refused(members, manifest=None, match="", **kwargs) -> str:
        bad = forge(tmp_path / "forged.pack", members, manifest, **kwargs)
        with pytest.raises(ValueError, match=match) as e:
            unpack(bad, CI.name, CI.data)
        message = str(e.value)
        assert "\n" not in message and str(bad) in message, message
        assert not cache.exists() or tree(cache) == {}, "a refused pack wrote into the cache"
        return message
    return real, refused


def test_the_forging_helper_makes_a_pack_that_unpacks(hostile, tmp_path):
    real, _ = hostile
    assert [n for n, _ in real] == sorted(n for n, _ in real) and len(real) == 2
    assert len(unpack(forge(tmp_path / "ok.pack", real), CI.name, CI.data)) == 2


TOKENIZER_HEX = "0123456789abcdef"


@pytest.mark.parametrize("planted", [
    "zoo/ci/albert-sop/evaluation.json", "zoo/ci/albert-sop/model.safetensors",
    "pretraining/ci-sop-train-0123456789abcdef.safetensors", "zoo/ci/albert-sop/optimizer.pt",
    "tokenizers/notes.txt", "corpora/course-v1-e3c06e05fcae40e6.json", "MANIFEST.json.sha256"])
def test_unpack_writes_only_the_corpus_and_the_tokenizer(hostile, planted):
    """A member that is not the scale's corpus text or tokenizer (or their .sha256) is refused, by name."""
    real, refused = hostile
    message = refused([*real, (planted, b"planted")], match="not a file")
    assert repr(planted) in message


def test_unpack_refuses_thousands_of_extra_files(hostile):
    real, refused = hostile
    extra = [(f"tokenizers/extra-{i}.model", b"x") for i in range(3000)]
    message = refused([*real, *extra], match="not a file")
    assert len(message) < 400                                   # one line, not 3,000 names


def test_unpack_refuses_a_second_tokenizer_or_a_member_twice(hostile):
    real, refused = hostile
    (model, data), (checksum, _) = real
    other = f"tokenizers/pydocs-1000-{TOKENIZER_HEX}.model"
    second = [(other, b"evil"), (other + ".sha256", sha256(b"evil").encode() + b"\n")]
    refused([*real, *second], match="the tokenizer more than once")
    twice = [*real, (model, b"evil")]                           # the same name again, later in the tar
    refused(twice, signed(real), match="twice")


@pytest.mark.parametrize("name", ["tokenizers/\u202eledom.model", "tokenizers/a\nb.model",
                                  "tokenizers/a\x07.model", "../outside.model", "/etc/passwd",
                                  "tokenizers/../../x.model", "tokenizers//x.model", "tokenizers/./x.model",
                                  "tokenizers\\x.model", ""])
def test_member_names_follow_the_path_and_character_rules(hostile, name):
    real, refused = hostile
    message = refused([*real, (name, b"x")], match="name")
    assert ascii(name) in message                               # shown escaped: the line stays one line


def test_a_member_checksum_file_must_hold_its_files_sha256(hostile):
    real, refused = hostile
    (model, data), (checksum, _) = real
    refused([(model, data), (checksum, b"0" * 64 + b"\n")], match=f"{checksum} does not hold the sha256")


GIB3 = 3 * 2**30


def test_a_declared_3_gib_member_is_refused_before_anything_is_read(hostile):
    real, refused = hostile
    manifest = signed(real)
    manifest["files"][real[0][0]]["bytes"] = GIB3
    refused(real, manifest, match=r"3\.0 GiB")


def test_a_member_whose_header_says_3_gib_is_refused_before_it_is_read(hostile):
    """The tar header of a member says 3 GiB (and no data follows): refused on its size, not read."""
    real, refused = hostile
    (model, data), (checksum, sums) = real
    header = tarfile.TarInfo(checksum)
    header.size = GIB3
    refused([(model, data)], signed(real), match=r"3\.0 GiB", header_only=header)


def test_a_member_bigger_than_its_manifest_says_is_never_read_into_memory(hostile, tmp_path):
    """A small pack (zeros compress 1000-fold) whose member's tar header says 24 MiB where the manifest says
    65 bytes is refused on the header, without reading the member: the memory held stays far below it."""
    real, _ = hostile
    (model, data), (checksum, sums) = real
    zeros = bytes(24 * 2**20)
    bad = forge(tmp_path / "big.pack", [(model, data), (checksum, zeros)], signed(real))
    del zeros
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"24\.0 MiB in the pack, its manifest says 65 bytes"):
            unpack(bad, CI.name, CI.data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MiB held while refusing a 24 MiB member"


def test_the_decompressor_memory_is_capped(packed, monkeypatch):
    """An xz stream's header says how much memory its decompressor needs (make_pack's preset 9: 65 MiB); a
    stream that asks for more than the cap is refused rather than allocated."""
    path, _, _ = packed
    monkeypatch.setattr(pack, "MAX_XZ_MEMORY", 2**20)
    with pytest.raises(ValueError, match="Memory usage limit"):
        unpack(path, CI.name, CI.data)


@pytest.mark.parametrize("edit, field", [
    (lambda m: m.pop("scale"), '"scale"'),
    (lambda m: m.update(scale=3), '"scale"'),
    (lambda m: m.update(scale=None), '"scale"'),
    (lambda m: m.update(scale="nope"), "unknown scale"),
    (lambda m: m.pop("files"), '"files"'),
    (lambda m: m.update(files=["a"]), '"files"'),
    (lambda m: m.update(files={}), "no files"),
    (lambda m: m.pop("format"), '"format"'),
    (lambda m: m["files"].update({k: "sha256" for k in m["files"]}), "entry for"),
    (lambda m: [v.pop("sha256") for v in m["files"].values()], '"sha256"'),
    (lambda m: [v.update(sha256="abc") for v in m["files"].values()], '"sha256"'),
    (lambda m: [v.pop("bytes") for v in m["files"].values()], '"bytes"'),
    (lambda m: [v.update(bytes=-1) for v in m["files"].values()], '"bytes"'),
    (lambda m: [v.update(bytes="12") for v in m["files"].values()], '"bytes"'),
    (lambda m: [v.update(bytes=True) for v in m["files"].values()], '"bytes"'),
])
def test_a_damaged_manifest_is_named_field_by_field(hostile, edit, field):
    real, refused = hostile
    manifest = signed(real)
    edit(manifest)
    refused(real, manifest, match=field)


@pytest.mark.parametrize("manifest, what", [(b"[1, 2]", "not a JSON object"), (b"{", "not JSON"),
                                            (b"\xff\xfe", "not JSON")])
def test_a_manifest_that_is_not_an_object_is_named(hostile, manifest, what):
    real, refused = hostile
    refused(real, manifest, match=what)


def test_a_manifest_with_no_files_is_an_error_and_nothing_says_checked(hostile, tmp_path, capsys):
    refused = hostile[1]
    refused([], signed([]), match="lists no files")
    assert main(["unpack", "--scale", "ci", str(tmp_path / "forged.pack")]) == 2
    out, err = capsys.readouterr()
    assert "every sha256 checked" not in out and "lists no files" in err and len(err.splitlines()) == 1


def test_unpack_names_a_folder_and_a_device_for_what_they_are(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    assert main(["unpack", "--scale", "ci", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "is a folder, not a pack file" in err[0] and "does not exist" not in err[0]
    if Path("/dev/zero").exists():
        assert main(["unpack", "--scale", "ci", "/dev/zero"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and "/dev/zero is not a regular file" in err[0]
    (tmp_path / "huge.pack").write_bytes(b"")
    with open(tmp_path / "huge.pack", "r+b") as f:
        f.truncate(MAX_PACK_BYTES + 1)                         # sparse: no disk used
    assert main(["unpack", "--scale", "ci", str(tmp_path / "huge.pack")]) == 2
    assert "MiB" in capsys.readouterr().err


def test_a_dry_run_is_told_what_to_change_not_the_scale_it_passed(packed, tmp_path, monkeypatch, capsys):
    path, _, _ = packed
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "other"))
    monkeypatch.setenv("MINIALBERT_DRY_RUN", "1")
    assert main(["unpack", "--scale", "ci", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "--scale ci" not in err[0] and "MINIALBERT_DRY_RUN unset" in err[0], err
    with pytest.raises(ValueError, match="unpack it with --scale ci and MINIALBERT_DRY_RUN unset"):
        unpack(path, (dry := dry_run(SCALES["gpu"])).name, dry.data)
    forged = forge(tmp_path / "dry.pack", members_of(path), signed(members_of(path), scale="ci-dry"))
    with pytest.raises(ValueError, match="not the ci scale's; unpack it with MINIALBERT_DRY_RUN=1$"):
        unpack(forged, CI.name, CI.data)


def test_pack_out_must_be_a_file_outside_the_cache(packed, tmp_path, capsys):
    _, _, source = packed
    with pytest.raises(SystemExit) as e:
        main(["pack", "--scale", "ci", "--out", ""])
    err = capsys.readouterr().err.splitlines()
    assert e.value.code == 2 and len(err) == 1 and "empty" in err[0], err
    cache = tmp_path / "made"
    tokenizer = next(n for n in source if n.endswith(".model"))
    for inside in (cache / tokenizer, cache / "x.pack", cache / "corpora" / ".." / "y.pack"):
        assert main(["pack", "--scale", "ci", "--out", str(inside)]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and "inside the minialbert cache" in err[0], err
    assert tree(cache) == source                                # the cache's own tokenizer untouched
    assert main(["pack", "--scale", "ci", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_the_gpu_and_course_scales_packs_are_named_as_their_caches_name_them(tmp_path, monkeypatch):
    """The gpu scale's pack holds the course corpus and its trained tokenizer, the course scale's the corpus
    alone (its tokenizer ships with the package); the corpus's name is the one the corpus module reads
    (checked on a copy of this machine's built corpus, where there is one)."""
    corpus = pack.course_corpus_name()
    tokenizer = f"tokenizers/course-6000-{TOKENIZER_HEX}.model"
    gpu = [corpus, corpus + ".sha256", tokenizer, tokenizer + ".sha256"]
    pack.check_members(tmp_path, gpu, "gpu", SCALES["gpu"].data)
    pack.check_members(tmp_path, [corpus, corpus + ".sha256"], "course", SCALES["course"].data)
    with pytest.raises(ValueError, match="lacks the tokenizer"):
        pack.check_members(tmp_path, [corpus, corpus + ".sha256"], "gpu", SCALES["gpu"].data)
    built = cache_dir() / corpus
    if not (built.is_file() and built.with_name(built.name + ".sha256").is_file()):
        pytest.skip("the course corpus is not built in this machine's cache")
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "cache"))
    for name in (corpus, corpus + ".sha256"):
        (tmp_path / "cache" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(built.with_name(Path(name).name), tmp_path / "cache" / name)
    assert course_corpus_cached()
