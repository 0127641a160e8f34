"""The command line: python -m minialbert {pretrain,evaluate,figures,student-notebooks,...} --help.

Defaults come from the scale ($MINIALBERT_SCALE or --scale). Under torchrun, `pretrain` runs
DistributedDataParallel with one process per rank; only rank 0 prints, logs and checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
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


def build_parser() -> Parser:
    p = Parser(prog="minialbert", description="ALBERT from scratch: pretrain, evaluate, make the figures.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    scale_help = f"sizes for defaults and data: {', '.join(SCALES)} (default: $MINIALBERT_SCALE or course)"

    pre = sub.add_parser("pretrain", help="pretrain a model on the course corpus",
                         description="Pretrain ALBERT (or its BERT twin) with MLM, MLM+NSP or MLM+SOP. "
                                     "Options left out take the scale's values. Launch with torchrun "
                                     "--nproc_per_node=N for DistributedDataParallel.")
    pre.add_argument("--out", required=True, type=Path,
                     help="run directory: config, metrics.jsonl and checkpoints go here")
    pre.add_argument("--resume", action="store_true",
                     help="continue from the run directory's latest checkpoint")
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
    pre.add_argument("--optimizer", choices=["lamb", "adamw"], default="lamb", help="default: lamb")
    pre.add_argument("--seed", type=int, default=0, help="seed for initialisation, data order, dropout")
    pre.add_argument("--eval-every", type=int,
                     help="steps between held-out evaluations (default: the scale's)")
    pre.add_argument("--eval-batches", type=int, default=20,
                     help="held-out batches per evaluation (default: 20)")
    pre.add_argument("--checkpoint-every", type=int,
                     help="steps between checkpoints (default: the scale's eval interval)")
    pre.add_argument("--keep-last", type=int, default=2, help="checkpoints kept on disk (default: 2)")
    pre.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    pre.add_argument("--quiet", action="store_true", help="no progress bar")

    ev = sub.add_parser("evaluate", help="held-out MLM and sentence-task accuracy of a checkpoint",
                        description="Evaluate a checkpoint on the course corpus; prints JSON.")
    ev.add_argument("--checkpoint", required=True, type=Path,
                    help="a run directory or one of its step-* directories")
    ev.add_argument("--scale", choices=list(SCALES), help=scale_help)
    ev.add_argument("--objective", choices=["mlm", "nsp", "sop"],
                    help="which examples to score (default: the checkpoint's objective; mlm if it has none)")
    ev.add_argument("--split", choices=["train", "valid", "test"], default="valid", help="default: valid")
    ev.add_argument("--batch-size", type=int, default=32, help="default: 32")
    ev.add_argument("--max-batches", type=int, help="score only this many batches (default: all)")

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

    cln = sub.add_parser("clean-notebooks", help="strip timestamps, widget state and progress bars",
                         description="Clean notebooks in place, keeping their outputs.")
    cln.add_argument("paths", nargs="*", type=Path,
                     help="notebooks to clean (default: every .ipynb under notebooks/)")
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
                 eval_every=args.eval_every, checkpoint_every=args.checkpoint_every)
    train_args = TrainArgs.from_scale(
        scale, objective=args.objective, grad_accum=args.grad_accum, weight_decay=args.weight_decay,
        optimizer=args.optimizer, seed=args.seed, eval_batches=args.eval_batches, keep_last=args.keep_last,
        **{k: v for k, v in given.items() if v is not None})
    train = course_pretraining_data(args.objective, "train", scale)
    valid = course_pretraining_data(args.objective, "valid", scale)
    try:
        result = pretrain(cfg, train_args, train, valid, out_dir=args.out, resume=args.resume,
                          progress=not args.quiet)
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
    import torch

    from .pretraining_data import collate, course_pretraining_data
    from .train import evaluate, find_checkpoint, load_checkpoint

    if not args.checkpoint.exists():
        raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
    model = load_checkpoint(args.checkpoint)
    state = json.loads((find_checkpoint(args.checkpoint) / "trainer_state.json").read_text())
    objective = args.objective or state["args"]["objective"]
    data = course_pretraining_data(objective, args.split, current_scale(args.scale))
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, collate_fn=collate)
    result = evaluate(model, loader, args.max_batches)
    print(json.dumps({"checkpoint": str(args.checkpoint), "step": state["step"], "objective": objective,
                      "split": args.split, **result}, indent=2))


def cmd_figures(args: argparse.Namespace) -> None:
    from .figures import make_figures

    make_figures(current_scale(args.scale))


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
    command = {"pretrain": cmd_pretrain, "evaluate": cmd_evaluate, "figures": cmd_figures,
               "student-notebooks": cmd_student_notebooks,
               "clean-notebooks": cmd_clean_notebooks}[args.command]
    try:
        command(args)
    except (ValueError, FileNotFoundError, FileExistsError) as e:   # bad input: one line, no traceback
        sys.stderr.write(f"minialbert: error: {e}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
