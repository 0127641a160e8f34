"""The package's layout by audience, read from the code's own imports.

- minialbert/ (its top-level modules and kernels/): the core, ALBERT itself and how it is trained, fine-tuned
  and evaluated; it takes plain values only and never sees a Scale;
- minialbert/corpus/: the pinned text the course trains on (and the real corpora's downloaders);
- minialbert/course/scale.py and course/data.py: the Scale (the course's sizes, in typed parts) and the
  course's tokenizer and pretraining sets it keys;
- minialbert/course/experiments/: the paper's experiments at course scale (zoo, tasks, ablation, analysis);
- minialbert/course/: the lessons' machinery (pieces, self-checks, student versions, figures) and the
  command line (cli.py, commands.py).

Imports run one way, course -> course/experiments -> the scale and its data -> corpus -> core: a reader of
the model never needs the folders above it. minialbert/__main__.py hands `python -m minialbert` to the
course's command line.
"""

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "minialbert"
LAYERS = ("core", "corpus", "course.scale", "course.experiments", "course")     # lowest first
FOLDERS = {"corpus": "corpus", "course.experiments": "course/experiments", "course": "course"}
SCALE_MODULES = {"scale", "data"}                           # course/scale.py and the data sets it keys
EDGE = {"__main__"}                                         # `python -m minialbert`: hands over to the course


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".") + ["", ""]
    if parts[1] == "corpus":
        return "corpus"
    if parts[1] != "course":
        return "core"
    if parts[2] in SCALE_MODULES:
        return "course.scale"
    return "course.experiments" if parts[2] == "experiments" else "course"


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
    for folder in FOLDERS.values():
        assert (PACKAGE / folder / "__init__.py").is_file(), f"minialbert/{folder}/ is not a package"
        assert len(list((PACKAGE / folder).glob("*.py"))) > 1, f"minialbert/{folder}/ holds no module"
    for name in SCALE_MODULES:
        assert (PACKAGE / "course" / f"{name}.py").is_file(), f"minialbert/course/{name}.py is missing"


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
    text = "def f():\n    from .course.experiments import zoo\n    from .course.pieces import check\n"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: text if self == fake else "")
    found = imported(fake)
    assert {"minialbert.course.experiments.zoo", "minialbert.course.pieces"} <= found
    assert {layer(m) for m in found} == {"course.experiments", "course"}
    assert layer("minialbert.course.scale") == "course.scale" and layer("minialbert.corpus.prose") == "corpus"


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
READS_ENVIRONMENT = {("course/scale.py", "current_scale"), ("download.py", "cache_root"),
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
    if path == PACKAGE / "course" / "scale.py":
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


# The core takes plain values: no module outside course/ imports the Scale or its module, names one, takes a
# parameter called `scale`, reads a field only a Scale has, or names the scale's environment variables.
SCALE_NAMES = {"Scale", "SCALES", "current_scale", "scale", "dry_run"}
SCALE_FIELDS = {"albert_preset", "bert_preset", "pretrain_steps", "zoo_steps", "zoo_evals", "zoo_threads",
                "zoo_on_demand", "figure_subdir", "step_seconds", "is_dry_run", "base_name", "model_config",
                "data_shards", "dupe_factor", "max_documents"}
SCALE_STRINGS = {"MINIALBERT_SCALE", "MINIALBERT_DRY_RUN"}


def scale_reads(source: str, name: str) -> list[str]:
    """Where a module's source imports, names or reads a Scale (line: what), from its syntax tree."""
    found = []
    for node in ast.walk(ast.parse(source, name)):
        what = None
        if isinstance(node, ast.ImportFrom) and node.module and "scale" in node.module.split("."):
            what = f"imports {node.module}"
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names = {n for a in node.names for n in (a.name, a.asname) if n} & SCALE_NAMES
            what = f"imports {sorted(names)}" if names else None
        elif isinstance(node, ast.Name) and node.id in SCALE_NAMES:
            what = f"names {node.id}"
        elif isinstance(node, ast.arg) and node.arg in SCALE_NAMES:
            what = f"takes {node.arg}"
        elif isinstance(node, ast.Attribute) and node.attr in SCALE_FIELDS:
            what = f"reads .{node.attr}"
        elif isinstance(node, ast.Constant) and node.value in SCALE_STRINGS:
            what = f"names ${node.value}"
        if what:
            found.append(f"line {node.lineno}: {what}")
    return found


OUTSIDE_COURSE = [p for p in MODULES if layer(module_name(p)) in ("core", "corpus") and p.stem not in EDGE]


@pytest.mark.parametrize("path", OUTSIDE_COURSE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_outside_the_course_sees_a_scale(path):
    hits = scale_reads(path.read_text(), str(path))
    assert not hits, f"minialbert/{path.relative_to(PACKAGE)} sees a Scale (it belongs in course/): {hits}"


def test_the_scale_check_can_fail():
    """Each way a core module could see a Scale is caught; a gradient scaler's .scale() and a kernel's
    sm_scale are not a Scale."""
    source = ("from .course.scale import Scale\nfrom .course import scale as s\n"
              "def f(scale, x):\n    return x.pretrain_steps + len(SCALES)\nV = 'MINIALBERT_SCALE'\n"
              "def g(scaler, loss, sm_scale):\n    return scaler.scale(loss) * sm_scale\n")
    hits = sorted(scale_reads(source, "probe.py"))
    assert hits == ["line 1: imports course.scale", "line 2: imports ['scale']", "line 3: takes scale",
                    "line 4: names SCALES", "line 4: reads .pretrain_steps",
                    "line 5: names $MINIALBERT_SCALE"]
    assert all(p.is_relative_to(PACKAGE) and "course" not in p.relative_to(PACKAGE).parts
               for p in OUTSIDE_COURSE) and PACKAGE / "train.py" in OUTSIDE_COURSE


# The ALBERT and its pretraining read in an afternoon: the config, the model, the masking, the pairs as the
# official code cuts them, the optimizer and the loop, together under about 2,000 lines.
CORE_BUDGET = 2000
ALBERT_CORE = ("config.py", "model.py", "masking.py", "pretraining_data.py", "segments.py", "optim.py",
               "train.py")


def test_the_albert_core_stays_within_its_budget():
    lines = {name: len((PACKAGE / name).read_text().splitlines()) for name in ALBERT_CORE}
    assert sum(lines.values()) <= CORE_BUDGET, f"the ALBERT core has {sum(lines.values())} lines: {lines}"


# The Scale is resolved at the edge and its parts passed down: a function takes the part it reads (models,
# recipe, data, zoo budget), and few take the whole. The limit holds today's count; lower it as it falls.
MAX_SCALE_SIGNATURES = 16


def scale_signatures(source: str, name: str) -> list[str]:
    """The functions whose parameters include a Scale: annotated so, or an unannotated `scale` where the
    module names Scale."""
    names_scale = re.search(r"\bScale\b", source) is not None
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            if any(re.search(r"\bScale\b", ast.unparse(p.annotation)) if p.annotation is not None
                   else p.arg == "scale" and names_scale for p in params):
                found.append(f"{name}:{node.lineno} {getattr(node, 'name', 'lambda')}")
    return found


def test_few_functions_take_the_whole_scale():
    found = [f for p in MODULES for f in scale_signatures(p.read_text(), str(p.relative_to(PACKAGE)))]
    assert len(found) <= MAX_SCALE_SIGNATURES, f"{len(found)} functions take a Scale: {found}"


def test_the_signature_count_sees_a_scale():
    source = ("from .scale import Scale\ndef a(s: Scale): ...\ndef b(x, scale): ...\n"
              "def c(data: Data, models: Models): ...\ndef d(x, *, wanted: 'Scale | None'): ...\n")
    assert [f.split(" ")[1] for f in scale_signatures(source, "probe.py")] == ["a", "b", "d"]
    assert scale_signatures("def f(q, scale):\n    return q * scale\n", "kernel.py") == []   # a float


def test_the_loop_takes_few_parameters_and_no_evaluation_code():
    """pretrain takes what it trains, on what, an evaluation callback and its run options (six or fewer);
    train.py imports no evaluation code: its caller passes the evaluation."""
    path = PACKAGE / "train.py"
    tree = ast.parse(path.read_text())
    pretrain = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "pretrain")
    a = pretrain.args
    assert len(a.posonlyargs + a.args + a.kwonlyargs) <= 6 and not a.vararg and not a.kwarg
    assert "minialbert.evaluation" not in imported(path)
