"""Checksummed, atomic downloads and cache files in the minialbert cache.

A download streams to a temporary file next to its destination, checks the HTTP status, the
announced size and the sha256, and only then renames the file into place. Whatever fails, no
half-written or unverified file is left where a later run would trust it. Files the course
builds itself (corpus, tokenizer) carry a sha256 beside them and are rebuilt when it disagrees.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
import warnings
from pathlib import Path

CACHE_ENV_VAR = "MINIALBERT_CACHE"
CHUNK_BYTES = 1 << 20


class DownloadError(RuntimeError):
    """A download failed: HTTP error, timeout, truncated body or checksum mismatch."""


def cache_root() -> tuple[Path, str]:
    """Where the cache lives, and the setting that said so: $MINIALBERT_CACHE, else ~/.cache/minialbert.
    The one place the package reads it: a setting of the person running the course, like the Scale."""
    setting = os.environ.get(CACHE_ENV_VAR, "")
    path = os.path.expanduser(setting or Path.home() / ".cache" / "minialbert")
    return Path(os.path.normpath(path)), setting               # ~/x/.. is the home folder


def cache_dir() -> Path:
    """The cache directory: $MINIALBERT_CACHE (an absolute path, or one starting with ~), else
    ~/.cache/minialbert (created if missing). A relative path is refused: the lessons run in notebooks/
    and the CLI in the repository, so one setting would name two caches. So is a path that comes to the
    home folder itself, or /, once '..' and symbolic links are followed."""
    path, setting = cache_root()
    if not path.is_absolute():
        raise ValueError(f"{CACHE_ENV_VAR}={setting!r} is a relative path, so it would name another cache in "
                         f"every folder a command or lesson runs from; give an absolute path (e.g. "
                         f"{Path(setting).absolute()}) or unset it for ~/.cache/minialbert")
    for folder, what in ((Path.home(), "home folder"), (Path(path.anchor), "root folder")):
        if path.resolve() == folder.resolve():
            raise ValueError(f"{CACHE_ENV_VAR}={setting!r} is the {what} {path} itself, where the cache's "
                             f"files would mix with everything else; give a folder of its own (e.g. "
                             f"{Path.home() / '.cache' / 'minialbert'}) or unset it")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot use {path} as the minialbert cache ({e.strerror}); set {CACHE_ENV_VAR} "
                         "to a writable directory") from None
    return path


def atomic_write(path: Path, data: bytes) -> Path:
    """Write bytes to a temp file in path's directory, then rename: readers never see half a file."""
    atomic_write_all({Path(path): data})
    return Path(path)


def atomic_write_all(files: dict[Path, bytes]) -> None:
    """Write several files that belong together (a figure's PNG and its JSON): each to a temp file in its
    directory (fsynced), and only when all are written rename them into place, so a failure (a full
    disk, say) leaves none of the new files, and no temp file. An error names the file and what to do."""
    temps: dict[Path, str] = {}
    path = None
    try:
        for path, data in files.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temps[path] = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())            # on disk before it is renamed into place
            os.chmod(temps[path], 0o644)        # mkstemp makes 0600 files; caches are plain files
        for path, tmp in temps.items():
            os.replace(tmp, path)
    except BaseException as e:
        for tmp in temps.values():
            Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and path is not None:
            raise _named_write_error(e, path) from None
        raise


def _named_write_error(e: OSError, path: Path) -> OSError:
    """The OSError of a failed write, as one line naming the file and what to do (a full disk: where to
    make room, and whether the file was in the cache, which MINIALBERT_CACHE can move)."""
    text = f"cannot write {path}: {e.strerror or e}"
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            free = f" ({shutil.disk_usage(path.parent).free / 2**20:.1f} MiB free there)"
        except OSError:
            free = ""
        cache, _ = cache_root()
        in_cache = path.resolve().is_relative_to(cache.resolve())
        where = (f"it is in the minialbert cache {cache}: free space there or set {CACHE_ENV_VAR} to a "
                 f"folder on a disk with room" if in_cache else f"free space on the disk of {path.parent}")
        text = f"no space left on the device while writing {path}{free}; {where}"
    named = OSError(text)
    named.errno = e.errno          # kept for callers that test it (strerror and filename would reformat
    return named                   # the message as "[Errno N] ...: path")


def write_json(path: Path, obj) -> Path:
    """atomic_write of `obj` as indented JSON (NaN and infinity refused: they are not JSON)."""
    return atomic_write(path, (json.dumps(obj, indent=2, allow_nan=False) + "\n").encode())


def write_checked(path: Path, data: bytes) -> Path:
    """atomic_write, then the data's sha256 into `path.sha256`: a file without it is never trusted."""
    atomic_write(path, data)
    atomic_write(_checksum_file(path), hashlib.sha256(data).hexdigest().encode() + b"\n")
    return path


def read_checked(path: Path) -> bytes | None:
    """The bytes of a file written by write_checked, or None when the caller must (re)build it: the
    file is missing, or damaged (its sha256 is missing or differs), which is reported and deleted."""
    path, checksum = Path(path), _checksum_file(path)
    if not path.exists():
        return None
    for name in (path, checksum):
        if name.exists() and not name.is_file():
            raise ValueError(f"cache file {name} is a folder (or another non-file); remove it (rm -r "
                             f"'{name}') and run again: the file is rebuilt")
    data = path.read_bytes()
    expected = checksum.read_text().strip() if checksum.is_file() else None
    if expected == hashlib.sha256(data).hexdigest():
        return data
    warnings.warn(f"cache file {path} is damaged (its sha256 does not match {checksum.name}); rebuilding it",
                  stacklevel=3)
    path.unlink()
    checksum.unlink(missing_ok=True)
    return None


def _checksum_file(path: Path) -> Path:
    return Path(path).with_name(Path(path).name + ".sha256")


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file, read in chunks so large files use little memory."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: Path, sha256: str | None = None, timeout: float = 60,
             expected_size: int | None = None) -> Path:
    """Download `url` to `dest` unless a file with the right sha256 is already there; return dest.

    expected_size (bytes), when known, is checked too. With sha256=None an existing dest of the
    right size is trusted as is (there is nothing else to check it against).
    """
    dest = Path(dest)
    if dest.exists():
        size_ok = expected_size is None or dest.stat().st_size == expected_size
        if size_ok and (sha256 is None or sha256_of(dest) == sha256.lower()):
            return dest
        dest.unlink()                   # corrupt or stale cache entry: fetch it again
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as f:
            _stream(url, f, timeout, expected_size)
        if sha256 is not None:
            actual = sha256_of(tmp)
            if actual != sha256.lower():
                raise DownloadError(f"sha256 mismatch for {url}: expected {sha256.lower()}, got {actual}; "
                                    "the file on the server changed or the transfer was corrupted")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def _stream(url: str, f, timeout: float, expected_size: int | None) -> None:
    """Copy the body of `url` into the open file `f`, checking status and length."""
    # imported here, not at the top: the corpus module imports this one with the standard library only
    from tqdm.auto import tqdm

    request = urllib.request.Request(url, headers={"User-Agent": "minialbert"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if response.status != 200:
                raise DownloadError(f"download failed: HTTP {response.status} for URL {url}; expected 200")
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None else expected_size
            received = 0
            with tqdm(total=total, unit="B", unit_scale=True, desc=Path(url.split("?")[0]).name,
                      leave=False) as bar:
                while chunk := response.read(CHUNK_BYTES):
                    f.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as e:
        raise DownloadError(f"download failed: HTTP {e.code} for URL {url}; check the URL or retry "
                            "later") from e
    except (urllib.error.URLError, http.client.HTTPException, TimeoutError, OSError) as e:
        raise DownloadError(f"download failed for URL {url}: {e}; check your network connection "
                            f"(timeout was {timeout} s)") from e
    if length is not None and received != int(length):
        raise DownloadError(f"truncated download from {url}: got {received} bytes, expected {length}; "
                            "retry the download")
    if expected_size is not None and received != expected_size:
        raise DownloadError(f"download from {url} has {received} bytes, expected {expected_size}; the "
                            "file on the server is not the pinned one")
