"""The package's layout by audience, read from the code's own imports.

- minialbert/ (its top-level modules and kernels/): the core, ALBERT itself and how it is trained;
- minialbert/corpus/: the pinned text the course trains on, and the course's tokenizer and data sets;
- minialbert/experiments/: the paper's experiments at course scale (zoo, tasks, ablation, analysis);
- minialbert/course/: the lessons' machinery (pieces, self-checks, student versions, figures).

Imports run one way, course -> experiments -> corpus -> core: a reader of the model never needs the
folders above it. The command line (__main__.py) is the edge that uses them all.
"""

import ast
import re
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


# A module holds one concept, readable in one sitting. Drawing code is the exception: a figure is long
# because it places every label, and splitting one figure across modules would hide nothing.
MAX_LINES = 450
DRAWING = {"course/diagrams.py": "the course's diagrams, one function each, placed by hand",
           "course/figures.py": "every figure of the course from its data, one function each"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_450_lines_except_drawing(path):
    name = str(path.relative_to(PACKAGE))
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES or name in DRAWING, f"minialbert/{name} has {lines} lines, over {MAX_LINES}"


# The environment is read at the edge only: the Scale ($MINIALBERT_SCALE, $MINIALBERT_DRY_RUN) by
# scale.current_scale, which a lesson's first cell and the CLI call, and the cache's folder
# ($MINIALBERT_CACHE) by download.cache_root, which every cached file's path starts from. The compile
# report is a command of its own that hands its workers its environment without TRITON_INTERPRET.
# torchrun's variables are checked before torch.distributed reads them, and a run points torch.compile's
# files at the cache (TORCHINDUCTOR_CACHE_DIR) while it runs: both settings are torch's, not the course's.
# The grader hands each submission's run its environment with a home, cache and grade log of its own, and a
# check appends its verdict to the grade log the grader named ($MINIALBERT_GRADE_LOG).
READS_ENVIRONMENT = {("scale.py", "current_scale"), ("download.py", "cache_root"),
                     ("kernels/compile_report.py", "compile_variants"),
                     ("device.py", "check_torchrun_variables"), ("compiling.py", "compile_cache"),
                     ("course/grade.py", "run_env"), ("course/grade_log.py", "log_result")}


def environment_reads(source: str, name: str) -> set[tuple[str, str]]:
    """(module, function) of every os.environ / os.getenv use in a module's source ("<module>" outside
    functions)."""
    tree = ast.parse(source, name)
    found = set()

    def visit(node, function):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv"):
            found.add((name, function))
        for child in ast.iter_child_nodes(node):
            visit(child, function)
    visit(tree, "<module>")
    return found


def test_only_the_edge_reads_the_environment():
    reads = set().union(*(environment_reads(p.read_text(), str(p.relative_to(PACKAGE))) for p in MODULES))
    assert reads <= READS_ENVIRONMENT, f"read outside the edge: {sorted(reads - READS_ENVIRONMENT)}"


# No library code decides by a scale's name: what differs between scales is a field of the Scale (or of
# the lessons' sizes, course/lessons.py, looked up by name once). scale.py defines the names.
NAME_TEST = re.compile(r"""\.name\s*(==|!=|\bin\b|\bnot in\b)\s*["'(\[]|\.name\.(startswith|endswith)\(""")


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_code_compares_a_scale_name(path):
    if path.name == "scale.py":
        return
    hits = [f"line {i}: {line.strip()}" for i, line in enumerate(path.read_text().splitlines(), 1)
            if "scale" in line and NAME_TEST.search(line)]
    assert not hits, f"minialbert/{path.relative_to(PACKAGE)} compares a scale's name: {hits}"


def test_the_greps_can_fail():
    """The environment and name rules catch what they are meant to."""
    source = "import os\ndef f(scale):\n    return os.environ.get('X') if scale.name == 'ci' else 0\n"
    assert environment_reads(source, "probe.py") == {("probe.py", "f")}
    assert NAME_TEST.search(source.splitlines()[2])
    assert not NAME_TEST.search("    folder = cache_dir() / 'zoo' / scale.name")
