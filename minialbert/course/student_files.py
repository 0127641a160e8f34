"""The student versions as files: made from a folder of lessons, and written to another folder without ever
losing a student's work (`python -m minialbert student-notebooks`, `make student-notebooks`).

Each student version records in its metadata (`minialbert`) the lesson it was made from
(`student_version_of`) and the digest of the cells it was written with (`digest`: cells_digest, over
every cell's source, outputs, attachments and metadata). A file whose cells still have that digest is as
the command wrote it; one whose cells do not, or that records no digest, was edited since. Writing then:
- writes each lesson's version where the file is absent, as written, or holds that version's very cells;
- keeps an edited file and writes the new version beside it (`05_x.new.ipynb`, or `05_x.new-2.ipynb` when
  that one was edited too), with one line saying so; an edited file made from the version the lesson still
  makes needs nothing beside it;
- removes a version whose lesson is gone only if it is as written, and says so; an edited one stays,
  with one line saying so;
- leaves every other file alone (a copy Jupyter made, `05_x-Copy1.ipynb`, a notebook of the student's
  own), and refuses to write over a file at a lesson's name that is no student version;
- with `force` (for instructors) replaces the edited versions and removes the edited ones whose lesson
  is gone, with one line for each.
--out may not be the --source folder, and a student version is not a lesson. Every lesson is read and
transformed before anything is written, all bad lessons are reported in one error, and each file is
written atomically.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat

from ..download import atomic_write
from .notebooks import clean_notebook, lessons, notebook_text, parse_notebook, raise_all, read_notebook
from .student import student_notebook

METADATA_KEY = "minialbert"                  # nb.metadata["minialbert"] = {"student_version_of", "digest"}


def cells_digest(nb: nbformat.NotebookNode) -> str:
    """The sha256 of a notebook's cells (sources, outputs, attachments, metadata): a student's work."""
    text = json.dumps(nb.get("cells", []), sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _record(nb: nbformat.NotebookNode) -> dict:
    record = nb.get("metadata", {}).get(METADATA_KEY)
    return record if isinstance(record, dict) else {}


def made_from(nb: nbformat.NotebookNode) -> str | None:
    """The lesson a notebook is the student version of (recorded in its metadata), or None."""
    return _record(nb).get("student_version_of")


@dataclass(frozen=True)
class _Found:
    """A notebook file in the student versions' folder, as found there."""
    path: Path
    text: str
    lesson: str | None              # the lesson it is the student version of; None: no student version
    digest: str | None              # the digest of the cells it was written with
    cells: str | None               # the digest of the cells it holds

    @property
    def edited(self) -> bool:
        """Whether its cells are not the ones written (or it records no digest)."""
        return self.digest is None or self.digest != self.cells

    @property
    def why(self) -> str:
        """Why an edited file counts as edited."""
        if self.digest is None:
            return "it records no digest of what student-notebooks wrote, so it may have been edited"
        return "edited since student-notebooks wrote it"

    @classmethod
    def read(cls, path: Path) -> _Found:
        try:
            text = path.read_text(encoding="utf-8")
            nb = parse_notebook(text, path)
        except (ValueError, OSError):
            return cls(path, "", None, None, None)
        return cls(path, text, made_from(nb), _record(nb).get("digest"), cells_digest(nb))


def _machine_paths(source_dir: Path) -> list[str]:
    """Absolute folders of this machine that no student output may show: the home folder and the
    folder holding the lessons' folder (the repository)."""
    folders = {Path.home().resolve(), source_dir.resolve().parent}
    return sorted((str(f) for f in folders if len(f.parts) > 1), key=len, reverse=True)


def student_versions(source_dir: str | Path) -> dict[str, str]:
    """{file name: student notebook text} for every lesson in source_dir, cleaned like the lessons and
    recording its lesson and digest. All lessons are read; one ValueError names every bad one."""
    source_dir = Path(source_dir)
    found = lessons(source_dir)
    if not found:
        raise FileNotFoundError(f"no lessons (NN_name.ipynb) in {source_dir}: run from the repository "
                                "root or pass --source")
    machine_paths, versions, problems, copies = _machine_paths(source_dir), {}, [], []
    for path in found:
        try:
            nb = read_notebook(path)
            if made_from(nb):
                copies.append(path.name)
                continue
            student = clean_notebook(student_notebook(nb, str(path), machine_paths))
        except ValueError as e:
            problems.append(str(e))
            continue
        student.metadata[METADATA_KEY] = {"student_version_of": path.name, "digest": cells_digest(student)}
        versions[path.name] = notebook_text(student)
    if copies:
        problems.insert(0, f"{source_dir} holds student versions, not lessons ({', '.join(copies)}): pass "
                           "the lessons' folder as --source")
    raise_all(problems, f"lessons in {source_dir} cannot be made into student versions")
    return versions


def _same_folder(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


def _beside(path: Path, digest: str, found: dict[str, _Found]) -> Path:
    """Where the new version (of cells `digest`) of an edited student version goes: `NN_x.new.ipynb`,
    unless that file is something else than a student version as written (then `NN_x.new-2.ipynb`, ...)."""
    def free(beside: Path) -> bool:
        there = found.get(beside.name) or (_Found.read(beside) if beside.exists() else None)
        return there is None or there.cells == digest or (there.lesson is not None and not there.edited)
    names = (f"{path.stem}.new{'' if n == 1 else f'-{n}'}{path.suffix}" for n in itertools.count(1))
    return next(beside for beside in map(path.with_name, names) if free(beside))


def write_student_notebooks(source_dir: str | Path, out_dir: str | Path, force: bool = False) -> list[Path]:
    """Write the student version of every lesson to out_dir without losing a student's work (the module
    docstring); -> the path of each lesson's newest version. Says one line (a warning) for each file it
    keeps, removes or, with force, replaces."""
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    if _same_folder(source_dir, out_dir):
        raise ValueError(f"--out {out_dir} is the lessons' folder (--source {source_dir}): the student "
                         "versions would replace the lessons; pass another --out (the default is "
                         "notebooks/student)")
    versions = student_versions(source_dir)
    found = {path.name: _Found.read(path) for path in lessons(out_dir)}
    blocked = [name for name in versions if name in found and found[name].lesson is None]
    if blocked:
        raise ValueError(f"{out_dir} holds {', '.join(blocked)}, not written by student-notebooks (no "
                         f"'{METADATA_KEY}.student_version_of' in its metadata): move or delete "
                         f"{'it' if len(blocked) == 1 else 'them'} first, or pass another --out")
    writes, removals, said, newest = {}, [], [], []
    for name, text in versions.items():
        path, there = out_dir / name, found.get(name)
        digest = _record(parse_notebook(text, path))["digest"]
        if there is None or not there.edited or there.cells == digest:
            writes[path] = text                         # absent, as written, or already the new cells
        elif force:
            writes[path] = text
            said.append(f"replaced {path} (--force): {there.why}")
        elif there.digest != digest:                    # (else: edited from the version the lesson makes)
            path = _beside(path, digest, found)
            writes[path] = text
            said.append(f"kept {out_dir / name}: {there.why}; the new version is {path}")
        newest.append(path)
    for name, there in found.items():
        if name in versions or there.lesson is None or there.lesson in versions:
            continue                                    # a lesson's version, another file, a copy or a .new
        gone = f"its lesson {there.lesson} is gone from {source_dir}"
        if not there.edited:
            removals.append(there.path)
            said.append(f"removed {there.path}: the student version of {there.lesson}, which {source_dir} no "
                        "longer has")
        elif force:
            removals.append(there.path)
            said.append(f"removed {there.path} (--force): {there.why}, and {gone}")
        else:
            said.append(f"kept {there.path}: {there.why}, and {gone}")
    for name, there in found.items():
        if there.lesson is None and name not in versions:
            said.append(f"left {there.path} alone: not a student version written by student-notebooks, and "
                        f"{source_dir} has no lesson of that name")
    for path, text in writes.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write(path, text.encode())
    for path in removals:
        path.unlink()
    for line in said:
        warnings.warn(line, stacklevel=2)
    return newest
