"""The command line's parser: every subcommand, its options and their help (python -m minialbert -h).

Every subcommand takes --scale, --debug and --quiet from one parent parser; choices come from the
package's registries (objectives, optimizers, scales), and pretrain's defaults from TrainArgs. The
commands themselves are in commands.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from ..compiling import COMPILE_MODES
from ..config import OBJECTIVES
from ..optim import OPTIMIZERS
from ..segments import OFFICIAL, SEGMENTINGS
from ..train import TrainArgs
from .scale import SCALES

TRAIN_DEFAULTS = TrainArgs()        # the training arguments' own defaults, for the help texts


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad option as one line, `minialbert: error: ...`, exit status 2."""

    def error(self, message: str):
        sys.stderr.write(f"minialbert: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def parse_override(text: str) -> tuple[str, object]:
    """'key=value' -> (key, value); value is read as JSON when it can be (numbers, true, null)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--set takes KEY=VALUE (e.g. num_layers=2), got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def directory(text: str) -> Path:
    """argparse type: a non-empty path (an empty --out would write the run into the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a directory name, got an empty string")
    return Path(text)


def file_name(text: str) -> Path:
    """argparse type: a non-empty path (an empty one would name the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file name, got an empty string")
    return Path(text)


def common_options() -> Parser:
    """--scale, --debug and --quiet: every subcommand takes them (a parent parser)."""
    common = Parser(add_help=False)
    common.add_argument("--scale", choices=list(SCALES),
                        help=f"sizes for defaults and data: {', '.join(SCALES)} (default: $MINIALBERT_SCALE "
                             f"or course)")
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,   # keeps a --debug
                        help="show the full traceback of an error")                  # given before it
    common.add_argument("--quiet", action="store_true", help="no progress bar")
    return common


def device_options(p: Parser, compile: bool) -> None:
    """--device (and --compile) of the commands that train: resolved by minialbert.device."""
    p.add_argument("--device", choices=["cuda", "mps", "cpu"],
                   help="where to train (default: CUDA, then Apple's MPS, then the CPU); the precision "
                        "follows: bf16 autocast on sm_80+, fp16 with a gradient scaler on sm_70/75, "
                        "else fp32")
    if compile:
        p.add_argument("--compile", nargs="?", const="model", default=False, choices=COMPILE_MODES,
                       help="compile before the first step (off by default: compiling takes minutes): "
                            "'model' (what --compile alone means) runs the model's forward under "
                            "torch.compile; 'graphs' compiles the encoder's layers to replay as CUDA graphs "
                            "(torch.compile's reduce-overhead mode: no host time per kernel launch)")


def add_pretrain(command: Callable[..., Parser]) -> None:
    """`pretrain`: the run directory, resuming, the model, and the training arguments. An option left out
    is None: TrainArgs (or Recipe.train_args) supplies it, and the help reads its default there."""
    pre = command("pretrain", help="pretrain a model on the course corpus",
                         description="Pretrain ALBERT (or its BERT twin) with MLM, MLM+NSP or MLM+SOP. "
                                     "Options left out take the scale's values. Launch with torchrun "
                                     "--nproc_per_node=N for DistributedDataParallel.")
    pre.add_argument("--out", required=True, type=directory,
                     help="run directory: config, metrics.jsonl and checkpoints go here")
    pre.add_argument("--resume", action="store_true",
                     help="continue from the run directory's latest checkpoint")
    pre.add_argument("--resume-from", type=Path, metavar="STEP_DIR",
                     help="continue from this checkpoint (e.g. OUT/checkpoints/step-000100 when the latest "
                          "one is damaged); later checkpoints are replaced as the run reaches them")
    pre.add_argument("--preset", help="AlbertConfig preset, e.g. course-albert or course-bert "
                                      "(default: the scale's ALBERT preset)")
    pre.add_argument("--set", dest="overrides", action="append", default=[], type=parse_override,
                     metavar="KEY=VALUE", help="change a config field, e.g. --set num_layers=2 (repeatable); "
                                               "max_position_embeddings also sets the tokens per example")
    pre.add_argument("--objective", choices=list(OBJECTIVES),
                     help="mlm alone, mlm + next-sentence prediction, or mlm + sentence-order prediction "
                          f"(default: {TRAIN_DEFAULTS.objective})")
    pre.add_argument("--segmenting", choices=list(SEGMENTINGS), default=OFFICIAL,
                     help="how documents are cut into pairs: the official code's, or the course's earlier "
                          "cut that the shipped 32-token zoo was trained on (default: official)")
    pre.add_argument("--inputs", choices=("nsp", "sop"),
                     help="with --objective mlm: read these sentence pairs, [CLS] A [SEP] B [SEP], with "
                          "their labels dropped (default: single segments, as the official MLM-only data)")
    pre.add_argument("--steps", type=int, help="optimizer steps (default: the scale's)")
    pre.add_argument("--batch-size", type=int,
                     help="global batch size over all processes (default: the scale's)")
    pre.add_argument("--grad-accum", type=int,
                     help=f"micro-batches per process per step (default: {TRAIN_DEFAULTS.grad_accum})")
    pre.add_argument("--lr", type=float, help="peak learning rate (default: the scale's)")
    pre.add_argument("--warmup", type=int, help="linear warmup steps (default: the scale's)")
    pre.add_argument("--weight-decay", type=float,
                     help=f"weight decay (default: {TRAIN_DEFAULTS.weight_decay})")
    pre.add_argument("--optimizer", choices=list(OPTIMIZERS), help="default: the scale's")
    pre.add_argument("--seed", type=int, help="seed for initialisation, data order, dropout")
    pre.add_argument("--eval-every", type=int,
                     help="steps between held-out evaluations (default: the scale's)")
    pre.add_argument("--eval-examples", type=int,
                     help="held-out examples per evaluation, a fixed seeded sample (default: the scale's; "
                          "all of them but in a dry run)")
    pre.add_argument("--checkpoint-every", type=int,
                     help="steps between checkpoints (default: the scale's eval interval)")
    pre.add_argument("--keep-last", type=int,
                     help=f"checkpoints kept on disk (default: {TRAIN_DEFAULTS.keep_last})")
    pre.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's choice)")
    device_options(pre, compile=True)


def add_evaluate(command: Callable[..., Parser]) -> None:
    """`evaluate`: a checkpoint's held-out MLM and sentence-task accuracy."""
    ev = command("evaluate", help="held-out MLM and sentence-task accuracy of a checkpoint",
                        description="Evaluate a checkpoint on the course corpus: MLM accuracy by what "
                                    "the input showed ([MASK], random, kept) beside the unigram, "
                                    "copy-or-unigram and neighbour-count baselines, and sentence-task "
                                    "accuracy with the share of each predicted class, all with 95%% "
                                    "intervals. A table goes to stderr, JSON to stdout.")
    ev.add_argument("--checkpoint", required=True, type=Path,
                    help="a run directory or one of its step-* directories")
    ev.add_argument("--objective", choices=list(OBJECTIVES),
                    help="which examples to score (default: the checkpoint's objective; mlm if it has none)")
    ev.add_argument("--split", choices=["train", "valid", "test"], default="valid", help="default: valid")
    ev.add_argument("--batch-size", type=positive_int, default=32, help="default: 32")
    ev.add_argument("--max-examples", type=positive_int,
                    help="score a fixed seeded sample of this many examples (default: the scale's; all "
                         "but in a dry run)")
    ev.add_argument("--json", action="store_true", help="only the JSON on stdout (no table, no progress bar)")


def add_zoo(command: Callable[..., Parser]) -> None:
    """`zoo`: build, list, rebuild or ship the course model zoo."""
    zoo = command("zoo", help="the course model zoo (shipped or built pretraining runs the lessons share)",
                         description="Build, one after another, every zoo entry that is neither shipped "
                                     "nor built at a scale (a killed build resumes where it stopped), then "
                                     "print each entry's held-out metrics.")
    zoo.add_argument("--only", action="append", metavar="NAME", help="build only this entry (repeatable)")
    zoo.add_argument("--list", action="store_true", help="list the entries, what exists and what each costs")
    zoo.add_argument("--rebuild", action="append", metavar="NAME",
                     help="retrain this entry from scratch (repeatable; 'all' for every entry) and compare "
                          "its weights with the shipped ones, byte for byte")
    zoo.add_argument("--ship", action="store_true",
                     help="copy the built entries (all, or --only) into the repository's zoo/ folder and "
                          "rewrite its MANIFEST.json (for maintainers)")
    zoo.add_argument("--unship", action="append", metavar="NAME",
                     help="remove this shipped entry from the repository's zoo/ folder and its MANIFEST.json "
                          "(repeatable; for maintainers: `--only NAME` builds it again)")
    zoo.add_argument("--out", type=Path, metavar="FILE",
                     help="also write the summary (held-out metrics and minutes per entry) as JSON here")
    zoo.add_argument("--markdown", action="store_true",
                     help="print the summary as a markdown table (docs/zoo.md's table)")
    device_options(zoo, compile=True)


def add_ablation(command: Callable[..., Parser]) -> None:
    """`ablation`: the NSP vs SOP ablation on the zoo's arms."""
    abl = command("ablation", help="the NSP vs SOP ablation (the paper's Table 5) on the zoo's arms",
                         description="Cross-evaluate the zoo's MLM-only, NSP, SOP and length-balanced SOP "
                                     "arms (MLM, NSP and SOP accuracy with their own heads and with linear "
                                     "probes, on all held-out "
                                     "pairs and on the length-matched ones), draw their NSP/SOP curves over "
                                     "training, fine-tune each on the offline tasks, and write the JSON and "
                                     "the figure. Builds the zoo entries it needs that are missing.")
    abl.add_argument("--arms", help="comma-separated arms: an objective, or sop-balanced (SOP on "
                                    "length-balanced pairs) (default: all of them, "
                                    "minialbert.course.experiments.ablation.ARMS)")
    abl.add_argument("--seeds", type=positive_int,
                     help="pretraining seeds per arm (zoo entries; default: the scale's)")
    abl.add_argument("--no-downstream", action="store_true", help="skip the fine-tuning part")
    which = abl.add_mutually_exclusive_group()
    which.add_argument("--long-text", action="store_true",
                       help="read the 128-token arms instead (a masked-LM trunk, then MLM / NSP / SOP "
                            "branches, two seeds: minialbert.course.experiments.long_text_ablation) and "
                            "write long_text_ablation.json")
    which.add_argument("--order-control", action="store_true",
                       help="run the positive control instead (the three arms on the generated `ordered` "
                            "corpus: minialbert.course.experiments.order_control) and write "
                            "order_control.json")
    abl.add_argument("--out", type=directory, metavar="DIR",
                     help="where the JSON (and nsp_vs_sop.png) go (default: the scale's figure directory)")


def add_figures(command: Callable[..., Parser]) -> None:
    """`figures`: regenerate the course figures."""
    fig = command("figures", help="regenerate the course figures under assets/figures",
                  description="Regenerate the course figures (PNG + JSON) at a scale, each from what ships "
                              "with the repository (the code, the course corpus, the zoo: no zoo entry is "
                              "trained), or redrawn from the committed JSON of the command that measures it "
                              "(learning_curve: lesson 07; nsp_vs_sop: `python -m minialbert ablation`; "
                              "model_speed: benchmarks/model_speed.py). One line per figure with its "
                              "seconds.")
    fig.add_argument("--only", action="append", metavar="NAME",
                     help="make only this figure, e.g. layer_transitions (repeatable; "
                          "minialbert.course.figures.FIGURES names them all, and an unknown name lists them)")
    fig.add_argument("--out", type=directory, metavar="DIR",
                     help="folder for NAME.png and NAME.json (default: assets/figures, or "
                          "assets/figures/<scale>)")


def add_student_notebooks(command: Callable[..., Parser]) -> None:
    """`student-notebooks`: the lessons with their solutions taken out."""
    stu = command("student-notebooks", help="write the student versions of the lessons",
                         description="Write every lesson with its solutions replaced by stubs and its "
                                     "self-check answers blanked (see minialbert/course/student.py).")
    stu.add_argument("--source", type=Path, default=Path("notebooks"),
                     help="folder of the lessons (default: notebooks)")
    stu.add_argument("--out", type=Path, default=Path("notebooks/student"),
                     help="folder for the student versions (default: notebooks/student)")
    stu.add_argument("--force", action="store_true",
                     help="for instructors: replace student versions edited since they were written, and "
                          "remove edited ones whose lesson is gone (one line says each); without it an "
                          "edited version is kept and the new one written beside it (NN_name.new.ipynb)")


def add_grade(command: Callable[..., Parser]) -> None:
    """`grade`: a class's submitted student notebooks run and graded, per piece and question."""
    grd = command("grade", help="run submitted student notebooks and grade each piece and question",
                  description="Run each submitted student notebook top to bottom at ci scale (unless "
                              "--scale says otherwise), alone (its own process, temporary home, cache and "
                              "working folder, a time and a memory limit), and print a markdown table: per "
                              "student, each piece right / wrong / not written / error / not run, each "
                              "self-check answer right / wrong / not answered. Not a sandbox for hostile "
                              "code: docs/instructors.md.")
    grd.add_argument("submissions", nargs="+", type=Path, metavar="SUBMISSION",
                     help="submitted notebooks (student versions of lessons, as handed in)")
    grd.add_argument("--out", type=file_name, metavar="CSV",
                     help="also write the table as CSV (a row per student and item)")
    grd.add_argument("--lessons", type=Path, default=Path("notebooks"),
                     help="folder of the lessons, which say what pieces and questions each has "
                          "(default: notebooks)")
    grd.add_argument("--timeout", type=positive_int, default=600, metavar="SECONDS",
                     help="wall-clock limit per submission; the run is killed when it is reached (default: "
                          "600)")
    grd.add_argument("--memory", type=positive_int, default=8192, metavar="MIB",
                     help="address-space limit per submission, in MiB (default: 8192; a ci lesson needs "
                          "about 2048)")
    grd.add_argument("--seed-cache", type=Path, metavar="DIR",
                     help="a minialbert cache every run's cache starts with (copied once, files read-only), "
                          "so lessons do not rebuild what it holds (default: each run starts empty)")


def add_finetune(command: Callable[..., Parser]) -> None:
    """`finetune`: a classification head (and the encoder) on a downstream task."""
    fin = command("finetune", help="fine-tune a pretrained (or a fresh) encoder on a downstream task",
                         description="Fine-tune a classification head (and the encoder) on a task from "
                                     "`python -m minialbert tasks`, with N labelled training examples, early "
                                     "stopping on the dev split and the best checkpoint in --out. Prints the "
                                     "best dev (and test) metrics as JSON.")
    fin.add_argument("--task", required=True, help="task name (see `python -m minialbert tasks`)")
    start = fin.add_mutually_exclusive_group(required=True)
    start.add_argument("--checkpoint", type=Path, help="pretraining run (or step-* directory) whose encoder "
                                                        "is fine-tuned")
    start.add_argument("--from-scratch", action="store_true", help="a randomly initialised encoder instead")
    fin.add_argument("--preset", help="with --from-scratch: AlbertConfig preset (default: the scale's "
                                      "ALBERT)")
    fin.add_argument("--labels", type=positive_int, help="labelled training examples used, a seeded sample "
                                                         "balanced over classes (default: all)")
    fin.add_argument("--seed", type=int, default=0, help="seed for the sample, the head and the data order")
    fin.add_argument("--out", required=True, type=directory, help="run directory (metrics.jsonl, checkpoint)")
    fin.add_argument("--glue-dir", type=Path, help="folder holding GLUE's task folders (default: the "
                                                   "cache's glue/, where `tasks --download` puts them)")
    fin.add_argument("--steps", type=positive_int,
                     help="most optimizer steps (default: the scale's, 300 at course)")
    fin.add_argument("--batch-size", type=positive_int, help="default: 16")
    fin.add_argument("--lr", type=float, help="peak learning rate (default: 3e-4)")
    fin.add_argument("--patience", type=int, help="dev evaluations without improvement before stopping "
                                                  "(default: 4; 0 = never)")
    fin.add_argument("--freeze-encoder", action="store_true", help="train the head alone (a linear probe)")
    device_options(fin, compile=False)


def add_tasks(command: Callable[..., Parser]) -> None:
    """`tasks`: the downstream tasks, and fetching GLUE's."""
    tsk = command("tasks", help="list the downstream tasks: sizes, labels, where the data comes from",
                         description="List the fine-tuning tasks: the offline ones built from the course "
                                     "corpus and the GLUE tasks read from local files.")
    tsk.add_argument("--glue-dir", type=Path, help="where the GLUE tasks are (default: the cache's glue/)")
    tsk.add_argument("--download", metavar="NAMES", help="fetch these GLUE tasks first (comma-separated, "
                                                         "e.g. sst2,rte; pinned URLs and sha256)")
    tsk.add_argument("--json", action="store_true", help="JSON instead of a table")


def add_clean_notebooks(command: Callable[..., Parser]) -> None:
    """`clean-notebooks`: notebooks cleaned in place."""
    cln = command("clean-notebooks", help="strip timestamps, widget state and progress bars",
                         description="Clean notebooks in place, keeping their outputs.")
    cln.add_argument("paths", nargs="*", type=Path,
                     help="notebooks to clean (default: every .ipynb under notebooks/)")


def add_tokenizer(command: Callable[..., Parser]) -> None:
    """`tokenizer`: the scale's course tokenizer, or a check of it."""
    tok = command("tokenizer", help="the scale's course tokenizer: where it comes from, or check it",
                  description="Print which course tokenizer the scale uses (shipped with the package, or "
                              "trained on its corpus and cached) and its sha256. --verify retrains the "
                              "shipped one on the course corpus and compares the bytes.")
    tok.add_argument("--verify", action="store_true",
                     help="retrain the shipped tokenizer (about a minute once the corpus is built) and "
                          "compare it byte for byte")


def add_smoothness(command: Callable[..., Parser]) -> None:
    """`smoothness`: the paper's layer-wise L2 / angle figure."""
    sm = command("smoothness", help="the paper's layer-wise L2 / angle figure for checkpoints",
                        description="For each model, the mean L2 distance and angle (degrees) between the "
                                    "input and output of every layer, averaged over the chosen tokens of "
                                    "each held-out sequence and then over sequences, with a 95%% interval "
                                    "over sequences (see minialbert/course/experiments/analysis.py for the "
                                    "exact definition). "
                                    "Writes NAME.png and NAME.json to --out.")
    sm.add_argument("--checkpoint", action="append", default=[], type=Path,
                    help="a run directory or one of its step-* directories (repeatable)")
    sm.add_argument("--official", metavar="NAMES",
                    help="comma-separated official checkpoints (e.g. albert-large-v2,bert-large-uncased) or "
                         "local HF directories, loaded with minialbert.hf.load_pretrained; the held-out text "
                         "is re-tokenized with each one's own tokenizer (ALBERT's spiece.model, BERT's "
                         "vocab.txt)")
    sm.add_argument("--tokens", choices=["all", "cls"], default="all",
                    help="average over all non-padding tokens or [CLS] only (default: all)")
    sm.add_argument("--sequences", type=positive_int,
                    help="held-out sequences, a fixed seeded sample (default: lesson 06's at the scale, "
                         "1000 at course scale)")
    sm.add_argument("--standardize", action="store_true",
                    help="divide each hidden dimension by its std over the same data first")
    sm.add_argument("--split", choices=["valid", "test"], default="test",
                    help="held-out split (default: test)")
    sm.add_argument("--batch-size", type=positive_int,
                    help="sequences per batch (default: lesson 06's, 50 at course scale)")
    sm.add_argument("--paper-axes", action="store_true",
                    help="the paper's axis ranges (layers 1-24, L2 0-18, angle 0-45)")
    sm.add_argument("--out", type=directory,
                    help="folder for the figure (default: assets/figures, or assets/figures/<scale>)")


def add_pack(command: Callable[..., Parser]) -> None:
    """`pack`: the cache files of a scale's data in one file."""
    pk = command("pack", help="one file holding the cache files a scale's data is made from (for a machine "
                              "without network)",
                 description="Write the course corpus's cache file and the scale's trained tokenizer (built "
                             "first where missing), with their sha256, into one xz-compressed tar of at "
                             "most 48 MiB. Default scale: gpu (not $MINIALBERT_SCALE).")
    pk.add_argument("--out", required=True, type=file_name,
                    help="the pack file to write (outside the cache)")


def add_unpack(command: Callable[..., Parser]) -> None:
    """`unpack`: a pack's files checked and put into the cache."""
    un = command("unpack", help="check a pack's sha256s and put its files into the cache",
                 description="Check every file of a pack made by `pack` against its sha256, then write them "
                             "into $MINIALBERT_CACHE (default: ~/.cache/minialbert). Default scale: gpu (not "
                             "$MINIALBERT_SCALE).")
    un.add_argument("pack", type=Path, help="the pack file")


def build_parser() -> Parser:
    p = Parser(prog="minialbert", description="ALBERT from scratch: pretrain, evaluate, make the figures.")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    common = common_options()
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def command(name: str, **kwargs) -> Parser:
        """A subcommand that takes the common options."""
        return sub.add_parser(name, parents=[common], **kwargs)

    for add in (add_pretrain, add_evaluate, add_zoo, add_ablation, add_figures, add_student_notebooks,
                add_grade, add_finetune, add_tasks, add_clean_notebooks, add_tokenizer, add_smoothness,
                add_pack, add_unpack):                   # in the order `minialbert --help` lists them
        add(command)
    return p
