"""The learner's workspace: every piece that passes its check, kept as a module of its own.

When `check` finds a piece right it writes the piece's source, with what it needs, to
`my_albert/<piece>.py` in the folder the lesson runs in (the notebooks' folder, or the student folder):

    my_albert/attention.py      import math, import torch, ... then the learner's `def attention(...)`

A piece that fails its check removes its earlier file, so the folder holds only passing pieces. Lesson
05 loads the folder in a fresh kernel (course/learner_model.py) and builds the learner's ALBERT from it;
lessons 02-04's kernels are not needed.

What a piece needs is read from its source: the global names it loads. A module becomes an import line, a
function or class of an importable module a `from ... import ...`, a number or string a constant, a helper
the learner defined beside the piece its own source, and another piece of the learner's (an earlier check
passed it) an entry of CALLS: the loader puts in the version lesson 05 uses (the learner's where it passes,
else the package's). Writes are atomic; `keep` and `forget` never raise (a check must not stop a lesson).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
import textwrap
import types
from pathlib import Path

from ...download import atomic_write
from .checking import CHECKED, which_piece

FOLDER_NAME = "my_albert"
DEFAULT: Path | None = None           # tests point this at a temporary folder; None: ./my_albert
LITERALS = (int, float, str, bool, type(None))
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def default_workspace() -> Path:
    """Where `check` keeps passing pieces: my_albert/ in the folder the lesson runs in."""
    return DEFAULT if DEFAULT is not None else Path.cwd() / FOLDER_NAME


def piece_path(name: str, folder: Path | None = None) -> Path:
    return Path(folder if folder is not None else default_workspace()) / f"{name}.py"


def keep(name: str, yours, pieces: dict, folder: Path | None = None) -> Path | None:
    """Write piece `name` (the learner's function or class) to the workspace; its path, or None when its
    source cannot be read (a lambda, a built-in) or written. Never raises."""
    try:
        text = module_text(name, yours, pieces)
        return atomic_write(piece_path(name, folder), text.encode()) if text is not None else None
    except Exception:
        return None


def forget(name: str, folder: Path | None = None) -> None:
    """Remove piece `name`'s file, if any: the workspace holds only passing pieces. Never raises."""
    try:
        piece_path(name, folder).unlink(missing_ok=True)
    except OSError:
        pass


def shown(path: Path) -> str:
    """A kept file's path as the learner reads it: relative to the lesson's folder when inside it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


# ------------------------------------------------------------------ the source and what it needs
def definition_source(obj) -> str | None:
    """The source of a function or class, dedented; None when it cannot be read. A class defined in a
    notebook cell has no file inspect can find, so its source is read from the cell its methods came from."""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        pass
    if not isinstance(obj, type):
        return None
    for method in vars(obj).values():
        code = getattr(method, "__code__", None)
        if code is None:
            continue
        lines = linecache.getlines(code.co_filename)
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError:
            return None
        for node in ast.walk(tree):
            if (isinstance(node, ast.ClassDef) and node.name == obj.__name__
                    and node.lineno <= code.co_firstlineno <= node.end_lineno):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                return textwrap.dedent("".join(lines[first - 1:node.end_lineno]))
    return None


def loaded_names(source: str) -> list[str]:
    """The global names a definition's source reads: names loaded and never bound inside it, in order."""
    tree = ast.parse(source)
    bound, loaded = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, DEFINITIONS) and node is not tree.body[0]:
            bound.add(node.name)                       # a function defined inside the piece
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return list(dict.fromkeys(n for n in loaded if n not in bound))


def globals_of(obj) -> dict:
    """The global namespace a function's or class's code reads (a class: its methods')."""
    functions = [obj]
    if isinstance(obj, type):
        functions = [f for f in vars(obj).values() if isinstance(f, types.FunctionType)]
    found = {}
    for f in functions:
        found.update(getattr(f, "__globals__", {}))
    return found


def import_line(key: str, value) -> str | None:
    """How the workspace module gets `value` under the name `key`: an import, a constant; None if no way."""
    if isinstance(value, types.ModuleType):
        module = value.__name__
        return f"import {module}" if module == key else f"import {module} as {key}"
    if all(isinstance(v, LITERALS) for v in (value if isinstance(value, tuple) else (value,))):
        return f"{key} = {value!r}"
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if module and qualname and module != "__main__" and "." not in qualname and module in sys.modules:
        if getattr(sys.modules[module], qualname, None) is value:
            return f"from {module} import {qualname}" + ("" if qualname == key else f" as {key}")
    return None


def is_learners(value) -> bool:
    """A function or class written by the learner (in a notebook, or read back from the workspace)."""
    return id(value) in CHECKED or getattr(value, "__module__", None) in ("__main__", None) or \
        str(getattr(value, "__module__", "")).startswith(FOLDER_NAME)


def module_text(name: str, yours, pieces: dict) -> str | None:
    """The workspace module of piece `name`: imports, helpers, CALLS, the piece, PIECE; None if its source
    cannot be read or does not compile."""
    source = definition_source(yours)
    if source is None or not isinstance(ast.parse(source).body[0], (ast.FunctionDef, ast.ClassDef)):
        return None
    imports, helpers, calls, seen = [], [], {}, {id(yours)}
    todo = [(source, globals_of(yours))]
    while todo:
        text, namespace = todo.pop()
        for key in loaded_names(text):
            if key not in namespace:
                continue                                  # a builtin, or a name the code never finds
            value = namespace[key]
            other = which_piece(key, value, pieces)
            if other is not None and other != name and is_learners(value):
                calls[key] = other                        # another piece of the learner's: put in on load
            elif (line := import_line(key, value)) is not None:
                imports.append(line)
            elif callable(value) and id(value) not in seen and (helper := definition_source(value)):
                seen.add(id(value))
                helpers.append(helper)                     # a helper of the learner's: its source too
                todo.append((helper, globals_of(value)))
    top = ast.parse(source).body[0].name
    text = "\n".join([
        f'"""Your {name}, kept by check("{name}", ...) when it passed. Lesson 05 builds your ALBERT from '
        f'this folder.\n\nCALLS: the pieces it calls by name, put in when it is loaded: yours where they '
        f'pass their check,\nelse the package\'s."""\n',
        *sorted(set(imports), key=lambda line: (" = " in line, line)), "", f"CALLS = {calls!r}", "", "",
        *[h + "\n\n" for h in reversed(helpers)],
        source.rstrip(), "", "", f"PIECE = {top}", ""])
    compile(text, f"{name}.py", "exec")                   # a SyntaxError: not kept (keep returns None)
    return text


# ------------------------------------------------------------------ reading it back
def load(name: str, folder: Path) -> types.ModuleType:
    """Execute piece `name`'s workspace file as a module (its CALLS not yet put in); raises what it raises."""
    path = piece_path(name, folder)
    module = types.ModuleType(f"{FOLDER_NAME}.{name}")
    module.__file__ = str(path)
    linecache.checkcache(str(path))                  # a file rewritten since: read afresh by tracebacks
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module
