"""The pack (minialbert/course/pack.py): the cache files a scale's data is made from, carried in one file."""

from __future__ import annotations

import hashlib

import pytest

from minialbert.__main__ import main
from minialbert.cli import build_parser
from minialbert.corpus.course_data import course_tokenizer, course_tokenizer_path
from minialbert.course.pack import MAX_PACK_BYTES, make_pack, read_pack, unpack
from minialbert.scale import SCALES

CI = SCALES["ci"]


def tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def packed(tmp_path, monkeypatch):
    """A ci-scale pack made in one cache (its tokenizer trained there), and that cache's files."""
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "made"))
    made = make_pack(CI, tmp_path / "ci.pack")
    return tmp_path / "ci.pack", made, tree(tmp_path / "made")


def test_pack_round_trips_byte_for_byte(packed, tmp_path, monkeypatch):
    path, made, source = packed
    assert set(made["files"]) == {n for n in source if n.startswith("tokenizers/")}   # ci: no course corpus
    assert len(made["files"]) == 2 and made["pack_bytes"] == path.stat().st_size <= MAX_PACK_BYTES
    assert made["pack_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "other"))
    written = unpack(path, CI)
    assert len(written) == 2
    unpacked = tree(tmp_path / "other")                         # (and the embedded corpus's own cache)
    assert {n: unpacked[n] for n in made["files"]} == {n: source[n] for n in made["files"]}   # byte for byte
    assert course_tokenizer_path(CI) in written                  # found where course_tokenizer looks
    assert course_tokenizer(CI).model_proto == source[next(iter(made["files"]))]
    again = make_pack(CI, tmp_path / "again.pack")               # no dates inside: the same bytes
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
        unpack(bad, CI)
    assert str(bad) in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "other" / "tokenizers").exists()      # nothing written from a damaged pack


def test_unpack_refuses_another_scales_pack_and_a_missing_file(packed, tmp_path):
    path, _, _ = packed
    with pytest.raises(ValueError, match="holds the ci scale's files, not the gpu scale's; unpack it with "
                                         "--scale ci"):
        unpack(path, SCALES["gpu"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_pack(tmp_path / "nowhere.pack")


def test_pack_and_unpack_commands(tmp_path, monkeypatch, capsys):
    parser = build_parser()                      # their gpu default never leaks into another command's
    assert parser.parse_args(["pretrain", "--out", "r"]).scale is None
    assert parser.parse_args(["pack", "--out", "p"]).scale is None
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "made"))
    assert main(["pack", "--scale", "ci", "--out", str(tmp_path / "p.bin")]) == 0
    assert "sha256" in capsys.readouterr().out
    monkeypatch.setenv("MINIALBERT_CACHE", str(tmp_path / "other"))
    assert main(["unpack", "--scale", "ci", str(tmp_path / "p.bin")]) == 0
    assert "every sha256 checked" in capsys.readouterr().out
    (tmp_path / "bad.bin").write_bytes((tmp_path / "p.bin").read_bytes()[:100])
    assert main(["unpack", "--scale", "ci", str(tmp_path / "bad.bin")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.bin is damaged" in err[0]
