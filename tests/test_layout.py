"""The package's layout by audience, read from the code's own imports.

- minialbert/ (its top-level modules and kernels/): the core, ALBERT itself and how it is trained;
- minialbert/corpus/: the pinned text the course trains on, and the course's tokenizer and data sets;
- minialbert/experiments/: the paper's experiments at course scale (zoo, tasks, ablation, analysis);
- minialbert/course/: the lessons' machinery (pieces, self-checks, student versions, figures).

Imports run one way, course -> experiments -> corpus -> core: a reader of the model never needs the
folders above it. The command line (__main__.py) is the edge that uses them all.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minialbert"
LAYERS = ("core", "corpus", "experiments", "course")        # lowest first
EDGE = {"__main__"}                                         # the command line: may import every layer


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "core"


def imported(path: Path) -> set[str]:
    """Every minialbert module `path` imports, relative imports resolved, imports inside functions too."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)    # `from . import zoo`
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m.startswith("minialbert")}


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_the_layers_exist_and_hold_modules():
    for name in LAYERS[1:]:
        assert (PACKAGE / name / "__init__.py").is_file(), f"minialbert/{name}/ is not a package"
        assert len(list((PACKAGE / name).glob("*.py"))) > 1, f"minialbert/{name}/ holds no module"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_run_one_way(path):
    """A module imports its own layer and the ones below it; the core imports nothing above itself."""
    if path.stem in EDGE and path.parent == PACKAGE:
        return
    mine = LAYERS.index(layer(module_name(path)))
    above = sorted(m for m in imported(path) if LAYERS.index(layer(m)) > mine)
    assert not above, f"minialbert/{path.relative_to(PACKAGE)} ({LAYERS[mine]}) imports {above} from above it"


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The rule can fail: a core module that imports the zoo, relatively or inside a function, is caught."""
    fake = PACKAGE / "model.py"
    text = "def f():\n    from .experiments import zoo\n    from .course.pieces import check\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text if self == fake else "")
    assert {"minialbert.experiments.zoo", "minialbert.course.pieces"} <= imported(fake)
