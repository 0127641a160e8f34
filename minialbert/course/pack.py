"""A pack: the cache files a scale needs that take a network or long CPU work to make, in one file.

A machine without network (a GPU node, a cluster without internet) cannot build the course corpus,
which pip fetches, and should not spend minutes training the gpu scale's tokenizer. `make_pack` writes
what the scale's data needs from the cache (the course corpus's cache file and the scale's tokenizer,
each with its .sha256 beside it) into one xz-compressed tar with a manifest of every file's sha256 and size;
`unpack` checks all of them before it writes anything into the cache, so a damaged or truncated pack
fails in one line naming the file. The pretraining sets themselves are not packed: they are hundreds
of megabytes, and are built from these files with every core (course.course_pretraining_data).

    python -m minialbert pack --out pack.bin          # where the corpus is built (default: the gpu scale)
    python -m minialbert unpack pack.bin              # on the other machine, into $MINIALBERT_CACHE

A pack may come from a stranger, so `unpack` trusts nothing in it: it holds exactly the corpus text and
the tokenizer of one scale, by name (`member_rules`), nothing else and nothing twice; every name is a plain
relative path of ASCII letters, digits, '.', '_' and '-'; the manifest's fields are checked one by one;
sizes are checked against MAX_UNPACKED_BYTES before a member is read (a tar header can claim gigabytes of
zeros that compress to almost nothing). Every error is one line naming the pack.
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import re
import tarfile
from pathlib import Path

from ..corpus import COURSE_CORPUS_SHA256, COURSE_FORMAT, course_corpus
from ..download import atomic_write, cache_dir
from .data import course_tokenizer, course_tokenizer_path, shipped_tokenizer_path
from .scale import DRY_RUN_SUFFIX, DRY_RUN_VAR, SCALES, Data

MANIFEST = "MANIFEST.json"
CORPORA = "corpora"                    # the cache folder of built corpora (corpus/__init__.py)
TOKENIZERS = "tokenizers"              # the cache folder of trained tokenizers (course/data.py)
PACK_FORMAT = 2                         # 2: xz (1 was gzip: 10.5 MiB for the gpu scale)
MAX_PACK_BYTES = 48 * 2**20             # what a device call can carry beside the working tree
MAX_UNPACKED_BYTES = 128 * 2**20        # a pack's members together, unpacked (the gpu scale's: 32 MiB)
MAX_MANIFEST_BYTES = 2**20              # (a real one lists four files in under 1 KiB)
MAX_XZ_MEMORY = 96 * 2**20              # the decompressor's memory (preset 9, as make_pack writes: 65 MiB)
NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")     # a cache file's name: plain ASCII, relative
SHA256 = re.compile(r"[0-9a-f]{64}")


def size_text(n: int) -> str:
    """A size for an error message: bytes, MiB or GiB."""
    return f"{n} bytes" if n < 2**20 else f"{n / 2**20:.1f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


class PackError(ValueError):
    """A pack that `unpack` refuses, in one line naming it."""


class Unxz:
    """The bytes an xz file unpacks to, read in order (tarfile's stream mode reads nothing else), at most
    `cap` of them, with at most MAX_XZ_MEMORY for the decompressor: however much a pack's stream claims
    (gigabytes of zeros compress to almost nothing, and a stream's header sets the memory it needs), no
    more is ever unpacked or held."""

    def __init__(self, file, cap: int, path: Path) -> None:
        self.file, self.left, self.path = file, cap, path
        self.xz = lzma.LZMADecompressor(lzma.FORMAT_XZ, memlimit=MAX_XZ_MEMORY)

    def read(self, size: int) -> bytes:
        data = b""
        while len(data) < size and not self.xz.eof:
            raw = self.file.read(2**16) if self.xz.needs_input else b""
            if self.xz.needs_input and not raw:
                raise EOFError("the xz stream ends early")
            data += self.xz.decompress(raw, max_length=size - len(data))
        self.left -= len(data)
        if self.left < 0:
            raise PackError(f"pack {self.path} unpacks to more than {size_text(MAX_UNPACKED_BYTES)}")
        return data


def course_corpus_name() -> str:
    """The course corpus's cache file, relative to the cache (as corpus/__init__.py names it)."""
    return f"{CORPORA}/course-v{COURSE_FORMAT}-{COURSE_CORPUS_SHA256[:16]}.json"


def member_rules(data: Data) -> dict[str, re.Pattern]:
    """What a pack of a scale's `data` holds, by name: each file (beside its .sha256), described, with the
    pattern of its cache name. The tokenizer's name hashes the packing machine's sentencepiece version (any
    16 hex digits); `unpack` writes it under the name this machine looks for."""
    rules = {}
    if data.corpus == "course":
        rules["the course corpus"] = re.compile(re.escape(course_corpus_name()))
    if shipped_tokenizer_path(data) is None:
        prefix = re.escape(f"{TOKENIZERS}/{data.corpus}-{data.vocab_size}-")
        rules["the tokenizer"] = re.compile(prefix + r"[0-9a-f]{16}\.model")
    return rules


def pack_files(scale_name: str, data: Data) -> list[Path]:
    """The cache files the scale's data is made from, built here first where missing: the course
    corpus (when the scale reads it) and the scale's tokenizer (unless it ships with the package)."""
    root, files = cache_dir(), []
    if data.corpus == "course":
        course_corpus()                                  # builds it (pip) where the cache lacks it
        files.append(root / course_corpus_name())
    course_tokenizer(data)                                    # trains and caches it where missing
    if (tokenizer := course_tokenizer_path(data)) is not None:
        files.append(tokenizer)
    files = [f for path in files for f in (path, path.with_name(path.name + ".sha256"))]
    if missing := [str(f) for f in files if not f.is_file()]:
        raise FileNotFoundError(f"cannot pack scale {scale_name!r}: {', '.join(missing)} missing from the "
                                "cache")
    return files


def check_out(out: str | Path) -> Path:
    """`pack --out`: a file name, not a folder, and outside the cache (a pack written there could replace
    one of the cache's own files)."""
    if not str(out).strip():
        raise ValueError("pack --out is empty; name the pack file to write")
    out, root = Path(out), cache_dir()
    if out.is_dir():
        raise ValueError(f"pack --out {out} is a folder; name the pack file to write")
    if out.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"pack --out {out} is inside the minialbert cache {root}; write the pack elsewhere")
    return out


def make_pack(scale_name: str, data: Data, out: str | Path) -> dict:
    """Write the pack of the scale's `data` to `out` (an xz tar, the same bytes for the same files);
    returns its manifest. Refuses a pack over MAX_PACK_BYTES, and an `out` inside the cache."""
    out, root = check_out(out), cache_dir()
    members = {f.relative_to(root).as_posix(): f.read_bytes() for f in pack_files(scale_name, data)}
    manifest = {"format": PACK_FORMAT, "scale": scale_name,
                "files": {name: {"sha256": hashlib.sha256(member).hexdigest(), "bytes": len(member)}
                          for name, member in members.items()}}
    members = {MANIFEST: json.dumps(manifest, indent=1, sort_keys=True).encode(), **members}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", format=tarfile.PAX_FORMAT, preset=9) as tar:
        for name, member in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(member), 0o644, 0   # no dates: same files, same bytes
            tar.addfile(info, io.BytesIO(member))
    packed = buffer.getvalue()                           # xz stores no time: same files, same bytes
    if len(packed) > MAX_PACK_BYTES:
        raise ValueError(f"the pack for scale {scale_name!r} would be {len(packed) / 2**20:.1f} MiB, over "
                         f"the {MAX_PACK_BYTES / 2**20:.0f} MiB a device call carries")
    atomic_write(out, packed)
    return {**manifest, "pack": str(out), "pack_bytes": len(packed),
            "pack_sha256": hashlib.sha256(packed).hexdigest()}


def check_pack_file(path: Path) -> None:
    """The pack is a regular file of at most MAX_PACK_BYTES (what `make_pack` writes)."""
    if path.is_dir():
        raise PackError(f"pack {path} is a folder, not a pack file; give the file `pack --out` wrote")
    if not path.exists():
        raise FileNotFoundError(f"pack {path} does not exist; make one with `python -m minialbert pack --out "
                                f"{path}` where the course corpus is built")
    if not path.is_file():
        raise PackError(f"pack {path} is not a regular file; give the file `pack --out` wrote")
    if path.stat().st_size > MAX_PACK_BYTES:
        raise PackError(f"pack {path} is {size_text(path.stat().st_size)}, more than the "
                        f"{size_text(MAX_PACK_BYTES)} a pack may be")


def check_name(path: Path, name: object) -> None:
    """A member's name: a plain relative path of ASCII letters, digits, '.', '_' and '-' (no control or
    direction character, no '..', not absolute); shown escaped, so the error stays one line."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PackError(f"pack {path} has a member named {ascii(name)}, not a name a cache file may have "
                        "(ASCII letters, digits, '.', '_' and '-' between single '/')")
    if any(part in (".", "..") for part in name.split("/")):
        raise PackError(f"pack {path} has a member named {ascii(name)}, which points outside its folder")


def scale_advice(packed: str, wanted: str) -> str:
    """What to change for `unpack` to take a pack of scale `packed` where scale `wanted` is asked for (both
    by name): --scale, the dry-run setting, or both."""
    base, wanted_base = packed.removesuffix(DRY_RUN_SUFFIX), wanted.removesuffix(DRY_RUN_SUFFIX)
    changes = [f"--scale {base}"] if base != wanted_base else []
    if (base != packed) != (wanted_base != wanted):
        changes.append(f"{DRY_RUN_VAR}=1" if base != packed else f"{DRY_RUN_VAR} unset")
    return "unpack it with " + " and ".join(changes)


def check_entry(path: Path, name: str, entry: object) -> int:
    """One manifest entry: {"sha256": 64 hex digits, "bytes": a size up to the cap}; returns its size."""
    where = f"pack {path}: its manifest's entry for {name!r}"
    if not isinstance(entry, dict):
        raise PackError(f"{where} is {ascii(entry)[:40]}, not an object with \"sha256\" and \"bytes\"")
    if not isinstance(entry.get("sha256"), str) or not SHA256.fullmatch(entry["sha256"]):
        raise PackError(f"{where} has no \"sha256\" of 64 hex digits")
    size = entry.get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise PackError(f"{where} has no \"bytes\" (a size in bytes): {ascii(size)[:40]}")
    if size > MAX_UNPACKED_BYTES:
        raise PackError(f"{where} declares {size_text(size)}, more than the {size_text(MAX_UNPACKED_BYTES)} "
                        "a pack may unpack to")
    return size


def check_manifest(path: Path, text: bytes, scale_name: str, data: Data) -> dict:
    """The manifest, every field checked: its format, its scale (the one asked for, by name), and its files
    (the pack of that scale's `data`, by name, each with a sha256 and a size, together under the cap).
    Returns it."""
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise PackError(f"pack {path}: its manifest is not JSON ({e})") from None
    if not isinstance(manifest, dict):
        raise PackError(f"pack {path}: its manifest is not a JSON object")
    if manifest.get("format") != PACK_FORMAT:
        raise PackError(f"pack {path} has \"format\" {ascii(manifest.get('format'))[:20]}, not "
                        f"{PACK_FORMAT}; make it again with this version's `python -m minialbert pack`")
    packed = manifest.get("scale")
    if not isinstance(packed, str):
        raise PackError(f"pack {path}: its manifest's \"scale\" is {ascii(packed)[:20]}, not a scale's name")
    if packed.removesuffix(DRY_RUN_SUFFIX) not in SCALES:
        raise PackError(f"pack {path}: its manifest names an unknown scale {ascii(packed)[:40]}")
    if packed != scale_name:
        raise PackError(f"pack {path} holds the {packed} scale's files, not the {scale_name} scale's; "
                        f"{scale_advice(packed, scale_name)}")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise PackError(f"pack {path}: its manifest's \"files\" is not an object of name: sha256 and bytes")
    if not files:
        raise PackError(f"pack {path}: its manifest lists no files; make it again with `python -m minialbert "
                        "pack`")
    for name in files:
        check_name(path, name)
    if sum(check_entry(path, name, entry) for name, entry in files.items()) > MAX_UNPACKED_BYTES:
        raise PackError(f"pack {path}: its files add up to more than {size_text(MAX_UNPACKED_BYTES)}")
    check_members(path, list(files), scale_name, data)
    return manifest


def check_members(path: Path, names: list[str], scale_name: str, data: Data) -> None:
    """The names are exactly the pack of the scale's `data`: each of member_rules' files once, with its
    .sha256."""
    rules, found = member_rules(data), {}
    for name in names:
        what = next((w for w, rule in rules.items() if rule.fullmatch(name.removesuffix(".sha256"))), None)
        if what is None:
            raise PackError(f"pack {path} lists {name!r}, not a file a {scale_name} pack holds (only "
                            f"{' and '.join(rules)}, each with its .sha256)")
        found.setdefault(what, set()).add(name)
    for what in rules:
        got = sorted(found.get(what, ()))
        if len(got) > 2 or len({n.removesuffix(".sha256") for n in got}) > 1:
            raise PackError(f"pack {path} holds {what} more than once: {', '.join(got)}")
        if len(got) < 2:
            raise PackError(f"pack {path} lacks {what} or its .sha256 (it holds "
                            f"{', '.join(got) or 'neither'})")


def read_members(path: Path, tar: tarfile.TarFile, files: dict) -> dict[str, bytes]:
    """The tar's members after the manifest, each checked (listed, once, a plain file, its size as listed:
    all before it is read), then read and checked against its sha256."""
    members = {}
    while (info := tar.next()) is not None:
        check_name(path, info.name)
        if info.name in members:
            raise PackError(f"pack {path} holds {info.name} twice")
        if info.name not in files:
            raise PackError(f"pack {path} holds {info.name}, which its manifest does not list")
        if not info.isfile():
            raise PackError(f"pack {path}: {info.name} is not a plain file (a link or a folder)")
        if info.size != files[info.name]["bytes"]:
            raise PackError(f"pack {path}: {info.name} is {size_text(info.size)} in the pack, its manifest "
                            f"says {size_text(files[info.name]['bytes'])}")
        data = tar.extractfile(info).read()
        if len(data) != info.size or hashlib.sha256(data).hexdigest() != files[info.name]["sha256"]:
            raise PackError(f"pack {path} is damaged: {info.name} does not match its sha256 in the manifest")
        members[info.name] = data
    if missing := sorted(set(files) - set(members)):
        raise PackError(f"pack {path} is damaged: it lacks {', '.join(missing)}, which its manifest lists")
    for name, data in members.items():
        digest = hashlib.sha256(data).hexdigest().encode()
        if name + ".sha256" in members and members[name + ".sha256"].strip() != digest:
            raise PackError(f"pack {path}: {name}.sha256 does not hold the sha256 of {name}")
    return members


def read_pack(path: str | Path, scale_name: str, data: Data) -> dict[str, bytes]:
    """The pack of the scale's `data`, its files by cache-relative name, every one checked (see the
    module's docstring); ValueError (one line, naming the pack) when it is missing, damaged, or holds
    anything else."""
    path = Path(path)
    check_pack_file(path)
    cap = MAX_UNPACKED_BYTES + MAX_MANIFEST_BYTES + 2**20                  # members, manifest, headers
    try:
        with (open(path, "rb") as file,                       # a stream: each header read before its data
              tarfile.open(fileobj=Unxz(file, cap, path), mode="r|") as tar):
            first = tar.next()
            manifest_first = first is not None and first.name == MANIFEST and first.isfile()
            if not manifest_first or first.size > MAX_MANIFEST_BYTES:
                raise PackError(f"pack {path} is damaged or not a pack: its first member is not a "
                                f"{MANIFEST} of at most {size_text(MAX_MANIFEST_BYTES)}; make it again with "
                                "`python -m minialbert pack --out FILE`")
            manifest = check_manifest(path, tar.extractfile(first).read(), scale_name, data)
            return read_members(path, tar, manifest["files"])
    except PackError:
        raise
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, ValueError) as e:
        raise PackError(f"pack {path} is damaged or not a pack ({type(e).__name__}: {e}); make it again "
                        "with `python -m minialbert pack --out FILE`") from None


def unpack(path: str | Path, scale_name: str, data: Data) -> list[Path]:
    """Check the whole pack, then write its files into the cache (atomically, each); returns their paths.

    The tokenizer's cache name hashes this machine's sentencepiece version (course_tokenizer_path), so
    it is written under the name this machine looks for, not the packing machine's."""
    files = read_pack(path, scale_name, data)
    root = cache_dir()
    tokenizer = {n: d for n, d in files.items() if n.startswith(f"{TOKENIZERS}/")}
    written = [atomic_write(root / n, d) for n, d in files.items() if n not in tokenizer]
    if tokenizer:
        local = course_tokenizer_path(data)             # reads the corpus just written
        for name, member in tokenizer.items():           # the model and its .sha256
            suffix = ".sha256" if name.endswith(".sha256") else ""
            written.append(atomic_write(local.with_name(local.name + suffix), member))
    return written
