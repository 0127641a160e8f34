"""The command line: python -m minialbert {pretrain,evaluate,zoo,ablation,figures,...} --help.

Defaults come from the scale ($MINIALBERT_SCALE or --scale). Under torchrun, `pretrain` runs
DistributedDataParallel with one process per rank; only rank 0 prints, logs and checkpoints.
Every error is one line on stderr and a non-zero exit status; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from .scale import SCALES, current_scale


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


def build_parser() -> Parser:
    p = Parser(prog="minialbert", description="ALBERT from scratch: pretrain, evaluate, make the figures.")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    scale_help = f"sizes for defaults and data: {', '.join(SCALES)} (default: $MINIALBERT_SCALE or course)"

    pre = sub.add_parser("pretrain", help="pretrain a model on the course corpus",
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
    pre.add_argument("--scale", choices=list(SCALES), help=scale_help)
    pre.add_argument("--preset", help="AlbertConfig preset, e.g. course-albert or course-bert "
                                      "(default: the scale's ALBERT preset)")
    pre.add_argument("--set", dest="overrides", action="append", default=[], type=parse_override,
                     metavar="KEY=VALUE", help="change a config field, e.g. --set num_layers=2 (repeatable)")
    pre.add_argument("--objective", choices=["mlm", "nsp", "sop"], default="sop",
                     help="mlm alone, mlm + next-sentence prediction, or mlm + sentence-order prediction "
                          "(default: sop)")
    pre.add_argument("--steps", type=int, help="optimizer steps (default: the scale's)")
    pre.add_argument("--batch-size", type=int,
                     help="global batch size over all processes (default: the scale's)")
    pre.add_argument("--grad-accum", type=int, default=1,
                     help="micro-batches per process per step (default: 1)")
    pre.add_argument("--lr", type=float, help="peak learning rate (default: the scale's)")
    pre.add_argument("--warmup", type=int, help="linear warmup steps (default: the scale's)")
    pre.add_argument("--weight-decay", type=float, default=0.01, help="weight decay (default: 0.01)")
    pre.add_argument("--optimizer", choices=["lamb", "adamw"], help="default: the scale's")
    pre.add_argument("--seed", type=int, default=0, help="seed for initialisation, data order, dropout")
    pre.add_argument("--eval-every", type=int,
                     help="steps between held-out evaluations (default: the scale's)")
    pre.add_argument("--eval-examples", type=int,
                     help="held-out examples per evaluation, a fixed seeded sample (default: all of them)")
    pre.add_argument("--checkpoint-every", type=int,
                     help="steps between checkpoints (default: the scale's eval interval)")
    pre.add_argument("--keep-last", type=int, default=2, help="checkpoints kept on disk (default: 2)")
    pre.add_argument("--threads", type=positive_int, help="torch CPU threads (default: torch's choice)")
    pre.add_argument("--quiet", action="store_true", help="no progress bar")

    ev = sub.add_parser("evaluate", help="held-out MLM and sentence-task accuracy of a checkpoint",
                        description="Evaluate a checkpoint on the course corpus: MLM accuracy by what "
                                    "the input showed ([MASK], random, kept) beside the unigram, "
                                    "copy-or-unigram and neighbour-count baselines, and sentence-task "
                                    "accuracy with the share of each predicted class, all with 95%% "
                                    "intervals. A table goes to stderr, JSON to stdout.")
    ev.add_argument("--checkpoint", required=True, type=Path,
                    help="a run directory or one of its step-* directories")
    ev.add_argument("--scale", choices=list(SCALES), help=scale_help)
    ev.add_argument("--objective", choices=["mlm", "nsp", "sop"],
                    help="which examples to score (default: the checkpoint's objective; mlm if it has none)")
    ev.add_argument("--split", choices=["train", "valid", "test"], default="valid", help="default: valid")
    ev.add_argument("--batch-size", type=int, default=32, help="default: 32")
    ev.add_argument("--max-examples", type=int,
                    help="score a fixed seeded sample of this many examples (default: all)")
    ev.add_argument("--json", action="store_true", help="only the JSON on stdout (no table, no progress bar)")

    zoo = sub.add_parser("zoo", help="build the course model zoo (cached pretraining runs the lessons share)",
                         description="Build, one after another, every zoo entry that is missing or "
                                     "unfinished at a scale (a killed build resumes where it stopped), then "
                                     "print each entry's held-out metrics.")
    zoo.add_argument("--scale", choices=list(SCALES), help=scale_help)
    zoo.add_argument("--only", action="append", metavar="NAME", help="build only this entry (repeatable)")
    zoo.add_argument("--list", action="store_true", help="list the entries, what exists and what each costs")
    zoo.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    zoo.add_argument("--out", type=Path, metavar="FILE",
                     help="also write the summary (held-out metrics and minutes per entry) as JSON here")

    abl = sub.add_parser("ablation", help="the NSP vs SOP ablation (the paper's Table 5) on the zoo's arms",
                         description="Cross-evaluate the zoo's MLM-only, NSP, SOP and length-balanced SOP "
                                     "arms (MLM, NSP and SOP accuracy with their own heads and with linear "
                                     "probes, on all held-out "
                                     "pairs and on the length-matched ones), draw their NSP/SOP curves over "
                                     "training, fine-tune each on the offline tasks, and write the JSON and "
                                     "the figure. Builds the zoo entries it needs that are missing.")
    abl.add_argument("--scale", choices=list(SCALES), help=scale_help)
    abl.add_argument("--arms", default="mlm,nsp,sop,sop-balanced",
                     help="comma-separated arms among mlm, nsp, sop, sop-balanced (default: all four)")
    abl.add_argument("--seeds", type=positive_int, default=3, help="pretraining seeds per arm (zoo entries)")
    abl.add_argument("--no-downstream", action="store_true", help="skip the fine-tuning part")
    abl.add_argument("--out", type=directory, metavar="DIR",
                     help="where nsp_vs_sop.json and .png go (default: the scale's figure directory)")

    fig = sub.add_parser("figures", help="regenerate the course figures under assets/figures",
                         description="Regenerate the course figures (PNG + JSON) at a scale.")
    fig.add_argument("--scale", choices=list(SCALES), help=scale_help)

    stu = sub.add_parser("student-notebooks", help="write the student versions of the lessons",
                         description="Write every lesson with its solutions replaced by stubs and its "
                                     "self-check answers blanked (see minialbert/student.py).")
    stu.add_argument("--source", type=Path, default=Path("notebooks"),
                     help="folder of the lessons (default: notebooks)")
    stu.add_argument("--out", type=Path, default=Path("notebooks/student"),
                     help="folder for the student versions (default: notebooks/student)")

    fin = sub.add_parser("finetune", help="fine-tune a pretrained (or a fresh) encoder on a downstream task",
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
    fin.add_argument("--scale", choices=list(SCALES), help=scale_help)
    fin.add_argument("--glue-dir", type=Path, help="folder holding GLUE's task folders (default: the "
                                                   "cache's glue/, where `tasks --download` puts them)")
    fin.add_argument("--steps", type=positive_int, help="most optimizer steps (default: 300)")
    fin.add_argument("--batch-size", type=positive_int, help="default: 16")
    fin.add_argument("--lr", type=float, help="peak learning rate (default: 3e-4)")
    fin.add_argument("--patience", type=int, help="dev evaluations without improvement before stopping "
                                                  "(default: 4; 0 = never)")
    fin.add_argument("--freeze-encoder", action="store_true", help="train the head alone (a linear probe)")
    fin.add_argument("--quiet", action="store_true", help="no progress bar")

    tsk = sub.add_parser("tasks", help="list the downstream tasks: sizes, labels, where the data comes from",
                         description="List the fine-tuning tasks: the offline ones built from the course "
                                     "corpus and the GLUE tasks read from local files.")
    tsk.add_argument("--scale", choices=list(SCALES), help=scale_help)
    tsk.add_argument("--glue-dir", type=Path, help="where the GLUE tasks are (default: the cache's glue/)")
    tsk.add_argument("--download", metavar="NAMES", help="fetch these GLUE tasks first (comma-separated, "
                                                         "e.g. sst2,rte; pinned URLs and sha256)")
    tsk.add_argument("--json", action="store_true", help="JSON instead of a table")

    cln = sub.add_parser("clean-notebooks", help="strip timestamps, widget state and progress bars",
                         description="Clean notebooks in place, keeping their outputs.")
    cln.add_argument("paths", nargs="*", type=Path,
                     help="notebooks to clean (default: every .ipynb under notebooks/)")
    sm = sub.add_parser("smoothness", help="the paper's layer-wise L2 / angle figure for checkpoints",
                        description="For each model, the mean L2 distance and angle (degrees) between the "
                                    "input and output of every layer, averaged over the chosen tokens of "
                                    "each held-out sequence and then over sequences, with a 95%% interval "
                                    "over sequences (see minialbert/analysis.py for the exact definition). "
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
    sm.add_argument("--sequences", type=positive_int, default=256,
                    help="held-out sequences, a fixed seeded sample (default: 256)")
    sm.add_argument("--standardize", action="store_true",
                    help="divide each hidden dimension by its std over the same data first")
    sm.add_argument("--split", choices=["valid", "test"], default="test",
                    help="held-out split (default: test)")
    sm.add_argument("--batch-size", type=positive_int, default=16, help="default: 16")
    sm.add_argument("--paper-axes", action="store_true",
                    help="the paper's axis ranges (layers 1-24, L2 0-18, angle 0-45)")
    sm.add_argument("--scale", choices=list(SCALES), help=scale_help)
    sm.add_argument("--out", type=directory,
                    help="folder for the figure (default: assets/figures, or assets/figures/<scale>)")
    sm.add_argument("--quiet", action="store_true", help="no progress bar")
    for command in (pre, ev, zoo, fig, stu, fin, tsk, cln, sm):   # --debug also after the command
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show the full traceback of an error")
    return p


def cmd_pretrain(args: argparse.Namespace) -> None:
    import torch
    import torch.distributed as dist

    from .config import AlbertConfig
    from .pretraining_data import course_pretraining_data
    from .train import TrainArgs, pretrain

    scale = current_scale(args.scale)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = AlbertConfig.preset(args.preset or scale.albert_preset)
    if args.overrides:
        cfg = cfg.replace(**dict(args.overrides))
    given = dict(steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup=args.warmup,
                 eval_every=args.eval_every, checkpoint_every=args.checkpoint_every, optimizer=args.optimizer)
    train_args = TrainArgs.from_scale(
        scale, objective=args.objective, grad_accum=args.grad_accum, weight_decay=args.weight_decay,
        seed=args.seed, eval_examples=args.eval_examples, keep_last=args.keep_last,
        **{k: v for k, v in given.items() if v is not None})
    train = course_pretraining_data(args.objective, "train", scale)
    valid = course_pretraining_data(args.objective, "valid", scale)
    try:
        result = pretrain(cfg, train_args, train, valid, out_dir=args.out, resume=args.resume,
                          progress=not args.quiet, resume_from=args.resume_from)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        last = {r["split"]: r for r in result.history}           # the final train and valid records
        final = {f"{split}_{k}": v for split, r in last.items() for k, v in r.items()
                 if k not in ("step", "split")}
        print(json.dumps({"out": str(args.out), "steps": train_args.steps,
                          "seconds": round(result.seconds, 1), **final}, indent=2))


def cmd_evaluate(args: argparse.Namespace) -> None:
    from .evaluation import MLMBaselines, evaluate_pretraining, format_report
    from .pretraining_data import course_pretraining_data
    from .train import find_checkpoint, load_checkpoint

    if not args.checkpoint.exists():
        raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
    model = load_checkpoint(args.checkpoint)
    state = json.loads((find_checkpoint(args.checkpoint) / "trainer_state.json").read_text())
    objective = args.objective or state["args"]["objective"]
    scale = current_scale(args.scale)
    data = course_pretraining_data(objective, args.split, scale)
    baselines = MLMBaselines.fit(course_pretraining_data(objective, "train", scale), model.config.vocab_size)
    result = evaluate_pretraining(model, data, baselines, max_examples=args.max_examples,
                                  batch_size=args.batch_size, progress=not args.json)
    if not args.json:
        print(format_report(result), file=sys.stderr)
    print(json.dumps({"checkpoint": str(args.checkpoint), "step": state["step"], "objective": objective,
                      "split": args.split, **result}, indent=2))


def cmd_zoo(args: argparse.Namespace) -> None:
    from . import zoo

    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    scale = current_scale(args.scale)
    for name in args.only or ():
        zoo.entry(name)                                  # unknown names fail before any work
    if args.list:
        for r in zoo.status(scale, args.only):
            left = "?" if r["minutes_left"] is None else f"{r['minutes_left']:.1f}"
            print(f"{r['name']:22s} {r['state']:8s} {r['steps_done']:>6d}/{r['steps']:<6d} "
                  f"~{left:>5s} min left  {r['about']}")
        return
    rows = zoo.build(args.only, scale)
    print(zoo.format_summary(rows))
    if args.out:
        import platform

        import torch

        from .download import atomic_write
        record = {"scale": scale.name, "threads": torch.get_num_threads(), "torch": torch.__version__,
                  "machine": platform.processor() or platform.machine(), "entries": rows}
        atomic_write(args.out, (json.dumps(record, indent=1) + "\n").encode())
        print(f"wrote {args.out}")


def cmd_ablation(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from .ablation import DOWNSTREAM_TASKS, format_summary, run_ablation
    from .plots import figure_dir, plot_ablation, save_figure

    scale = current_scale(args.scale)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    result = run_ablation(arms, args.seeds, scale, downstream=() if args.no_downstream else DOWNSTREAM_TASKS)
    print(format_summary(result))
    axes = plot_ablation(result)
    path = save_figure(axes[0].figure, "nsp_vs_sop", result, args.out or figure_dir(scale))
    print(f"wrote {path} and {path.with_suffix('.json')} ({result['seconds']:.0f} s)")


def cmd_finetune(args: argparse.Namespace) -> None:
    import torch

    from .config import AlbertConfig
    from .finetune import AlbertForSequenceClassification, FinetuneArgs, finetune
    from .tasks import load_task
    from .tokenizer import course_tokenizer

    scale = current_scale(args.scale)
    task = load_task(args.task, scale.max_documents, args.glue_dir)
    train = task.subset(args.labels, args.seed)
    tokenizer = course_tokenizer(scale)
    torch.manual_seed(args.seed)                          # the new head's initialisation
    if args.checkpoint is not None:
        if not args.checkpoint.exists():
            raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
        model = AlbertForSequenceClassification.from_checkpoint(args.checkpoint, task.num_labels)
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"--checkpoint {args.checkpoint} was pretrained with a "
                             f"{model.config.vocab_size}-piece vocabulary but the course tokenizer at scale "
                             f"{scale.name!r} has {tokenizer.vocab_size}; fine-tune at the checkpoint's "
                             f"scale (--scale)")
    else:
        model = AlbertForSequenceClassification(AlbertConfig.preset(args.preset or scale.albert_preset),
                                                task.num_labels)
    given = dict(steps=args.steps, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                 warmup=min(FinetuneArgs.warmup, args.steps // 10) if args.steps else None)
    finetune_args = FinetuneArgs(seed=args.seed, max_seq_len=scale.max_seq_len,
                                 freeze_encoder=args.freeze_encoder,
                                 **{k: v for k, v in given.items() if v is not None})
    result = finetune(model, task, tokenizer, finetune_args, train_examples=train, out_dir=args.out,
                      progress=not args.quiet)
    print(json.dumps({"out": str(args.out), "task": task.name, "metric": task.metric, "labels": len(train),
                      "start": str(args.checkpoint) if args.checkpoint else "scratch", "seed": args.seed,
                      "best_step": result.best_step, "stopped_early": result.stopped_early,
                      "seconds": round(result.seconds, 1), "dev": result.dev, "test": result.test}, indent=2))


def cmd_tasks(args: argparse.Namespace) -> None:
    from .tasks import (
        GLUE,
        OFFLINE_TASKS,
        default_glue_dir,
        download_glue,
        format_tasks,
        glue_downloaded,
        load_task,
    )

    scale = current_scale(args.scale)
    glue_dir = args.glue_dir or default_glue_dir()
    for name in (args.download.split(",") if args.download else []):
        download_glue(name.strip(), glue_dir)
    described = [load_task(name, scale.max_documents).describe() for name in OFFLINE_TASKS]
    for name, spec in GLUE.items():
        if glue_downloaded(name, glue_dir):
            described.append(load_task(name, glue_dir=glue_dir).describe())
        else:
            described.append({"name": name, "about": spec.about, "labels": list(spec.labels) or "regression",
                              "metric": spec.metric, "source": f"GLUE {spec.folder}, not downloaded: "
                                                               f"tasks --download {name}"})
    print(json.dumps(described, indent=2) if args.json else format_tasks(described))


def cmd_figures(args: argparse.Namespace) -> None:
    from .figures import make_figures

    make_figures(current_scale(args.scale))


def _label(path: Path, taken: dict) -> str:
    """A legend name for a checkpoint path: the run's name (run/step-N for a step), made unique."""
    name = f"{path.parent.parent.name}/{path.name}" if path.name.startswith("step-") else path.name
    name = name or str(path)
    return name if name not in taken else f"{name} ({len(taken)})"


def cmd_smoothness(args: argparse.Namespace) -> None:
    import torch

    from . import hf
    from .analysis import DEFINITION, heldout_batches, interval_note, layer_transitions
    from .download import DownloadError
    from .plots import figure_dir, plot_layer_transitions, save_figure
    from .pretraining_data import course_pretraining_data
    from .tokenizer import course_tokenizer
    from .train import load_checkpoint

    officials = [name.strip() for name in (args.official or "").split(",") if name.strip()]
    if not args.checkpoint and not officials:
        raise ValueError("give at least one --checkpoint or --official model")
    for path in args.checkpoint:
        if not path.exists():
            raise FileNotFoundError(f"--checkpoint {path} does not exist")
    scale = current_scale(args.scale)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = course_tokenizer(scale)
    dataset = course_pretraining_data("mlm", args.split, scale)
    ours = heldout_batches(dataset, args.sequences, args.batch_size)
    models, sources = {}, {}                                    # name -> (model, batches); name -> origin
    for path in args.checkpoint:
        model = load_checkpoint(path, device)
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"--checkpoint {path} has a vocabulary of {model.config.vocab_size} but the "
                             f"{scale.name}-scale course tokenizer has {tokenizer.vocab_size}; pass the "
                             "--scale the checkpoint was trained at")
        name = _label(path, models)
        models[name], sources[name] = (model, ours), {"checkpoint": str(path)}
    for official in officials:
        try:
            model, tokenizer_file = hf.load_pretrained(official)
        except DownloadError as e:             # no network is an expected failure, not a bug
            raise ConnectionError(f"--official {official}: {e}") from None
        if tokenizer_file is None:
            raise ValueError(f"--official {official} has no spiece.model or vocab.txt: the held-out text is "
                             "re-tokenized with the checkpoint's own tokenizer")
        target = hf.load_tokenizer(tokenizer_file)
        if target.vocab_size > model.config.vocab_size:
            raise ValueError(f"--official {official}: {tokenizer_file.name} has {target.vocab_size} tokens "
                             f"but the model's vocabulary has {model.config.vocab_size}")
        batches = heldout_batches(dataset, args.sequences, args.batch_size, source=tokenizer,
                                  target=target, max_len=model.config.max_position_embeddings)
        name = _label(Path(official), models)
        models[name], sources[name] = (model.to(device), batches), {"official": official}
    results = {}
    for name, (model, batches) in models.items():
        results[name] = layer_transitions(model, batches, args.tokens, args.standardize,
                                          progress=not args.quiet).to_dict()
        print(f"{name}: {len(results[name]['layers'])} layers, total variation L2 "
              f"{results[name]['total_variation']['l2']:.3f}, angle "
              f"{results[name]['total_variation']['angle']:.2f} deg", file=sys.stderr)
        models[name] = None                                     # free the model before the next one
    import matplotlib.pyplot as plt

    axes = plot_layer_transitions(results, paper_axes=args.paper_axes)
    figure = "layer_transitions" + ("_cls" if args.tokens == "cls" else "") + (
        "_standardized" if args.standardize else "")
    first = next(iter(results.values()))
    numbers = {"figure": figure, "definition": DEFINITION, "tokens": args.tokens,
               "standardize": args.standardize, "sequences": first["sequences"],
               "interval": interval_note(first["sequences"]), "split": args.split, "scale": scale.name,
               "device": device, "checkpoints": sources, "results": results}
    path = save_figure(axes[0].figure, figure, numbers, args.out or figure_dir(scale))
    plt.close(axes[0].figure)
    print(json.dumps({"figure": str(path), "json": str(path.with_suffix(".json"))}, indent=2))


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"minialbert: warning: {message}\n"


def cmd_student_notebooks(args: argparse.Namespace) -> None:
    from .student import write_student_notebooks

    written = write_student_notebooks(args.source, args.out)
    print(f"{len(written)} student notebooks in {args.out}")


def cmd_clean_notebooks(args: argparse.Namespace) -> None:
    from .notebooks import clean_notebooks

    paths = args.paths or sorted(Path("notebooks").rglob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        raise FileNotFoundError(f"no notebook at {', '.join(missing) or 'notebooks/'}: run from the "
                                "repository root or pass notebook paths")
    changed = clean_notebooks(paths)
    print(f"cleaned {len(changed)} of {len(paths)} notebooks" + "".join(f"\n  {p}" for p in changed))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = {"pretrain": cmd_pretrain, "evaluate": cmd_evaluate, "zoo": cmd_zoo, "figures": cmd_figures,
               "student-notebooks": cmd_student_notebooks, "finetune": cmd_finetune, "tasks": cmd_tasks,
               "clean-notebooks": cmd_clean_notebooks, "smoothness": cmd_smoothness,
               "ablation": cmd_ablation}[args.command]
    if not args.debug:
        warnings.formatwarning = _one_line_warning
    try:
        command(args)
    except KeyboardInterrupt:
        out = getattr(args, "out", None)
        note = f"; the last checkpoint in {out} is intact (continue with --resume)" if out else ""
        sys.stderr.write(f"minialbert: interrupted{note}\n")
        return 130
    except Exception as e:                    # one line, no traceback (unless --debug)
        if args.debug:
            raise
        expected = isinstance(e, (ValueError, OSError, ImportError, FloatingPointError))
        text = str(e).strip() or type(e).__name__
        if expected:
            sys.stderr.write(f"minialbert: error: {text}\n")
        else:
            sys.stderr.write(f"minialbert: error: {type(e).__name__}: {text.splitlines()[0]} "
                             f"(run with --debug for the traceback)\n")
        return 2 if expected else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
