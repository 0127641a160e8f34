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
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
import tarfile
from pathlib import Path, PurePosixPath

from ..corpus import COURSE_CORPUS_SHA256, course_corpus
from ..corpus.course_data import course_tokenizer, course_tokenizer_path
from ..download import atomic_write, cache_dir
from ..scale import DRY_RUN_SUFFIX, Scale

MANIFEST = "MANIFEST.json"
TOKENIZERS = "tokenizers"              # the cache folder of trained tokenizers (course.py)
PACK_FORMAT = 2                         # 2: xz (1 was gzip: 10.5 MiB for the gpu scale)
MAX_PACK_BYTES = 48 * 2**20             # what a device call can carry beside the working tree


def pack_files(scale: Scale) -> list[Path]:
    """The cache files the scale's data is made from, built here first where missing: the course
    corpus (when the scale reads it) and the scale's tokenizer (unless it ships with the package)."""
    root, files = cache_dir(), []
    if scale.corpus == "course":
        course_corpus()                                  # builds it (pip) where the cache lacks it
        files += sorted((root / "corpora").glob(f"course-*-{COURSE_CORPUS_SHA256[:16]}.json"))
    course_tokenizer(scale)                              # trains and caches it where missing
    if (tokenizer := course_tokenizer_path(scale)) is not None:
        files.append(tokenizer)
    files = [f for path in files for f in (path, path.with_name(path.name + ".sha256"))]
    if missing := [str(f) for f in files if not f.is_file()]:
        raise FileNotFoundError(f"cannot pack scale {scale.name!r}: {', '.join(missing)} missing from the "
                                "cache")
    return files


def make_pack(scale: Scale, out: str | Path) -> dict:
    """Write the scale's pack to `out` (an xz tar, the same bytes for the same files); returns its
    manifest. Refuses a pack over MAX_PACK_BYTES."""
    root, out = cache_dir(), Path(out)
    members = {f.relative_to(root).as_posix(): f.read_bytes() for f in pack_files(scale)}
    manifest = {"format": PACK_FORMAT, "scale": scale.name,
                "files": {name: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                          for name, data in members.items()}}
    members = {MANIFEST: json.dumps(manifest, indent=1, sort_keys=True).encode(), **members}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", format=tarfile.PAX_FORMAT, preset=9) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0     # no dates: same files, same bytes
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()                             # xz stores no time: same files, same bytes
    if len(data) > MAX_PACK_BYTES:
        raise ValueError(f"the pack for scale {scale.name!r} would be {len(data) / 2**20:.1f} MiB, over the "
                         f"{MAX_PACK_BYTES / 2**20:.0f} MiB a device call carries")
    atomic_write(out, data)
    return {**manifest, "pack": str(out), "pack_bytes": len(data),
            "pack_sha256": hashlib.sha256(data).hexdigest()}


def read_pack(path: str | Path) -> dict[str, bytes]:
    """A pack's files by cache-relative name (its manifest as MANIFEST), each checked against the manifest's
    sha256 and size; ValueError (one line, naming the pack) when it is missing, truncated or damaged."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"pack {path} does not exist; make one with `python -m minialbert pack --out "
                                f"{path}` where the course corpus is built")
    try:
        with tarfile.open(path, mode="r:xz") as tar:
            members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        manifest = json.loads(members[MANIFEST])
        files = {MANIFEST: None, **manifest["files"]}
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, KeyError, ValueError, TypeError) as e:
        raise ValueError(f"pack {path} is damaged or not a pack ({type(e).__name__}: {e}); make it again "
                         "with `python -m minialbert pack --out FILE`") from None
    if manifest.get("format") != PACK_FORMAT:
        raise ValueError(f"pack {path} has format {manifest.get('format')!r}, not {PACK_FORMAT}; make it "
                         "again with this version's `python -m minialbert pack`")
    if set(members) != set(files):
        raise ValueError(f"pack {path} is damaged: it holds {sorted(members)}, its manifest lists "
                         f"{sorted(files)}")
    for name, data in members.items():
        if name == MANIFEST:
            continue
        unsafe = PurePosixPath(name).is_absolute() or ".." in PurePosixPath(name).parts
        expected = (files[name]["sha256"], files[name]["bytes"])
        if unsafe or (hashlib.sha256(data).hexdigest(), len(data)) != expected:
            raise ValueError(f"pack {path} is damaged: {name} does not match its sha256 in the manifest"
                             + (" (or points outside the cache)" if unsafe else ""))
    return members


def unpack(path: str | Path, scale: Scale) -> list[Path]:
    """Check the whole pack, then write its files into the cache (atomically, each); returns their paths.

    The tokenizer's cache name hashes this machine's sentencepiece version (course_tokenizer_path), so
    it is written under the name this machine looks for, not the packing machine's."""
    files = read_pack(path)
    packed = json.loads(files.pop(MANIFEST))["scale"]
    if packed != scale.name:
        raise ValueError(f"pack {path} holds the {packed} scale's files, not the {scale.name} scale's; "
                         f"unpack it with --scale {packed.removesuffix(DRY_RUN_SUFFIX)}")
    root = cache_dir()
    tokenizer = {n: d for n, d in files.items() if n.startswith(f"{TOKENIZERS}/")}
    written = [atomic_write(root / n, d) for n, d in files.items() if n not in tokenizer]
    if tokenizer:
        local = course_tokenizer_path(scale)             # reads the corpus just written
        for name, data in tokenizer.items():             # the model and its .sha256
            suffix = ".sha256" if name.endswith(".sha256") else ""
            written.append(atomic_write(local.with_name(local.name + suffix), data))
    return written
