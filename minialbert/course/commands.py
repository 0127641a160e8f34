"""The command line's commands: python -m minialbert {pretrain,evaluate,zoo,ablation,figures,...} --help
(minialbert/__main__.py hands the arguments here).

The parser is cli.py's. main() resolves the scale once ($MINIALBERT_SCALE or --scale) and hands it
to the command. Under torchrun, `pretrain` runs DistributedDataParallel with one process per rank;
only rank 0 prints, logs and checkpoints. Every error is one line on stderr and a non-zero exit
status; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import warnings
from pathlib import Path

from ..config import OBJECTIVES
from .cli import build_parser
from .scale import Scale, current_scale


def cmd_pretrain(args: argparse.Namespace, scale: Scale) -> None:
    import torch
    import torch.distributed as dist

    from ..config import AlbertConfig
    from ..evaluation import pretraining_evaluator
    from ..train import RunOptions, pretrain
    from .data import course_pretraining_data

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = AlbertConfig.preset(args.preset) if args.preset else scale.model_config("albert")
    if args.overrides:
        cfg = cfg.replace(**dict(args.overrides))
    # An option left out is None: Recipe.train_args gives the scale's value or TrainArgs' default.
    given = dict(objective=args.objective, steps=args.steps, batch_size=args.batch_size,
                 grad_accum=args.grad_accum, lr=args.lr, warmup=args.warmup, weight_decay=args.weight_decay,
                 optimizer=args.optimizer, seed=args.seed, eval_every=args.eval_every,
                 eval_examples=args.eval_examples, checkpoint_every=args.checkpoint_every,
                 keep_last=args.keep_last)
    train_args = scale.recipe.train_args(**{k: v for k, v in given.items() if v is not None})
    # Tokens per example: the scale's, or the positions set with --set (as the zoo's 128-token entries).
    seq_len = cfg.max_position_embeddings if "max_position_embeddings" in dict(args.overrides) else None
    train, valid = (course_pretraining_data(train_args.objective, split, scale.data,
                                            segmenting=args.segmenting, max_seq_len=seq_len,
                                            inputs=args.inputs)
                    for split in ("train", "valid"))
    try:
        result = pretrain(cfg, train_args, train, pretraining_evaluator(valid, cfg, train_args),
                          RunOptions(out_dir=args.out, resume=args.resume, progress=not args.quiet,
                                     resume_from=args.resume_from, device=args.device, compile=args.compile))
        main_process = not dist.is_initialized() or dist.get_rank() == 0    # torchrun: rank 0 prints
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if main_process:
        last = {r["split"]: r for r in result.history}           # the final train and valid records
        final = {f"{split}_{k}": v for split, r in last.items() for k, v in r.items()
                 if k not in ("step", "split")}
        print(json.dumps({"out": str(args.out), "steps": train_args.steps,
                          "seconds": round(result.seconds, 1), **final}, indent=2))


def cmd_evaluate(args: argparse.Namespace, scale: Scale) -> None:
    from ..checkpoint import find_checkpoint, load_checkpoint, read_json
    from ..evaluation import MLMBaselines, evaluate_pretraining, format_report
    from ..model import AlbertForPretraining
    from .data import course_pretraining_data

    if not args.checkpoint.exists():
        raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
    model = load_checkpoint(args.checkpoint)
    if not isinstance(model, AlbertForPretraining):
        raise ValueError(f"--checkpoint {args.checkpoint} holds a {type(model).__name__}, not a pretraining "
                         "model; evaluate fine-tuned models with `finetune`")
    step = read_json(find_checkpoint(args.checkpoint) / "trainer_state.json")["step"]
    objective = args.objective or next(o for o, head in OBJECTIVES.items() if head == model.sentence_task)
    data = course_pretraining_data(objective, args.split, scale.data)
    baselines = MLMBaselines.fit(course_pretraining_data(objective, "train", scale.data),
                                 model.config.vocab_size)
    result = evaluate_pretraining(model, data, baselines, batch_size=args.batch_size,
                                  max_examples=args.max_examples or scale.recipe.eval_examples,
                                  progress=not (args.json or args.quiet))
    if not args.json:
        print(format_report(result), file=sys.stderr)
    print(json.dumps({"checkpoint": str(args.checkpoint), "step": step, "objective": objective,
                      "split": args.split, **result}, indent=2))


def cmd_zoo(args: argparse.Namespace, scale: Scale) -> None:
    from .experiments import zoo, zoo_ship

    ignored = [option for option, given in (("--only", args.only), ("--list", args.list),
                                            ("--ship", args.ship), ("--out", args.out),
                                            ("--markdown", args.markdown)) if given]
    if args.rebuild and ignored:                         # --rebuild names its entries, and prints no summary
        raise ValueError(f"zoo --rebuild does not take {', '.join(ignored)}: name each entry to rebuild with "
                         "--rebuild NAME (repeatable), and run the other options on their own")
    rebuild = list(zoo.ENTRIES) if args.rebuild == ["all"] else args.rebuild or []
    for name in [*(args.only or ()), *rebuild]:
        zoo.entry(name)                                  # unknown names fail before any work
    course_zoo = zoo.Zoo(scale)
    if rebuild:
        differ = []
        for name in rebuild:
            r = course_zoo.rebuild(name, progress=not args.quiet, device=args.device, compile=args.compile)
            verdict = ("no shipped entry to compare with" if r["shipped_sha256"] is None else
                       "identical to the shipped weights" if r["identical"] else
                       f"DIFFERS from the shipped weights (sha256 {r['shipped_sha256']})")
            print(f"{name}: model.safetensors sha256 {r['sha256']}: {verdict}", flush=True)
            if r["shipped_sha256"] is not None and not r["identical"]:
                differ.append(name)
        if differ:
            raise RuntimeError(f"rebuilt weights differ from the shipped ones for {', '.join(differ)} "
                               "(docs/zoo.md says what may differ between machines)")
        return
    if args.ship:
        print(f"shipped into {zoo_ship.ship(args.only, course_zoo)}")
        return
    if args.unship:
        print(f"removed {', '.join(args.unship)} from {zoo_ship.unship(args.unship, course_zoo)}")
        return
    if args.list:
        for r in course_zoo.status(args.only):
            left = "?" if r["minutes_left"] is None else f"{r['minutes_left']:.1f}"
            print(f"{r['name']:22s} {r['state']:8s} {r['steps_done']:>6d}/{r['steps']:<6d} "
                  f"~{left:>5s} min left  {r.get('problem', r['about'])}")
        return
    rows = course_zoo.build(args.only, progress=not args.quiet, device=args.device, compile=args.compile)
    print(zoo.format_summary(rows, markdown=args.markdown))
    if args.out:
        import platform

        import torch

        from ..download import write_json
        machine = platform.processor() or platform.machine()
        write_json(args.out, {"scale": scale.name, "threads": torch.get_num_threads(),
                              "torch": torch.__version__, "machine": machine, "entries": rows})
        print(f"wrote {args.out}")


def cmd_ablation(args: argparse.Namespace, scale: Scale) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from .experiments.ablation import ARMS, DOWNSTREAM_TASKS, format_summary, run_ablation
    from .experiments.zoo import Zoo
    from .lessons import lesson_sizes
    from .plots import figure_dir, plot_ablation, save_figure

    sizes = lesson_sizes(scale)                                 # lesson 08's, so the two agree
    if args.long_text or args.order_control:
        return other_ablation(args, scale, sizes)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()] if args.arms else list(ARMS)
    ablation = dataclasses.replace(sizes.ablation, seeds=args.seeds) if args.seeds else sizes.ablation
    result = run_ablation(arms, Zoo(scale), ablation, sizes.downstream.finetune, progress=not args.quiet,
                          downstream=() if args.no_downstream else DOWNSTREAM_TASKS)
    print(format_summary(result))
    axes = plot_ablation(result)
    path = save_figure(axes[0].figure, "nsp_vs_sop", result, args.out or figure_dir(scale))
    print(f"wrote {path} and {path.with_suffix('.json')} ({result['seconds']:.0f} s)")


def other_ablation(args: argparse.Namespace, scale: Scale, sizes) -> None:
    """`ablation --long-text` (the 128-token arms) or `--order-control` (the positive control): run it at
    the lesson's sizes and write its JSON."""
    from ..download import write_json
    from .experiments.long_text_ablation import run_long_text_ablation
    from .experiments.order_control import run_order_control
    from .experiments.zoo import Zoo
    from .plots import figure_dir

    if args.long_text:
        name, result = "long_text_ablation", run_long_text_ablation(Zoo(scale), sizes.long_text,
                                                                    progress=not args.quiet)
    else:
        name, result = "order_control", run_order_control(sizes.order_control, progress=not args.quiet)
    path = (args.out or figure_dir(scale)) / f"{name}.json"
    write_json(path, result)
    print(f"wrote {path} ({result['seconds']:.0f} s)")


def cmd_finetune(args: argparse.Namespace, scale: Scale) -> None:
    import torch

    from ..config import AlbertConfig
    from ..finetune import classifier_from_checkpoint, finetune
    from ..model import AlbertForSequenceClassification
    from .data import course_tokenizer
    from .experiments.tasks import load_task
    from .lessons import lesson_sizes

    task = load_task(args.task, scale.data, args.glue_dir)
    train = task.subset(args.labels, args.seed)
    tokenizer = course_tokenizer(scale.data)
    torch.manual_seed(args.seed)                          # the new head's initialisation
    if args.checkpoint is not None:
        if not args.checkpoint.exists():
            raise FileNotFoundError(f"--checkpoint {args.checkpoint} does not exist")
        model = classifier_from_checkpoint(args.checkpoint, task.num_labels)
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError(f"--checkpoint {args.checkpoint} was pretrained with a "
                             f"{model.config.vocab_size}-piece vocabulary but the course tokenizer at scale "
                             f"{scale.name!r} has {tokenizer.vocab_size}; fine-tune at the checkpoint's "
                             f"scale (--scale)")
    else:
        cfg = AlbertConfig.preset(args.preset) if args.preset else scale.model_config("albert")
        model = AlbertForSequenceClassification(cfg, task.num_labels)
    defaults = lesson_sizes(scale).downstream.finetune         # the lessons' runs at this scale
    given = dict(steps=args.steps, batch_size=args.batch_size, lr=args.lr, patience=args.patience,
                 warmup=min(defaults.warmup, args.steps // 10) if args.steps else None)
    finetune_args = dataclasses.replace(defaults, seed=args.seed, freeze_encoder=args.freeze_encoder,
                                        **{k: v for k, v in given.items() if v is not None})
    result = finetune(model, task, tokenizer, finetune_args, train_examples=train, out_dir=args.out,
                      progress=not args.quiet, device=args.device)
    print(json.dumps({"out": str(args.out), "task": task.name, "metric": task.metric, "labels": len(train),
                      "start": str(args.checkpoint) if args.checkpoint else "scratch", "seed": args.seed,
                      "best_step": result.best_step, "stopped_early": result.stopped_early,
                      "seconds": round(result.seconds, 1), "dev": result.dev, "test": result.test}, indent=2))


def cmd_tasks(args: argparse.Namespace, scale: Scale) -> None:
    from ..glue import GLUE, default_glue_dir, download_glue, glue_downloaded
    from .experiments.tasks import OFFLINE_TASKS, format_tasks, load_task

    glue_dir = args.glue_dir or default_glue_dir()
    for name in (args.download.split(",") if args.download else []):
        download_glue(name.strip(), glue_dir)
    described = [load_task(name, scale.data).describe() for name in OFFLINE_TASKS]
    for name, spec in GLUE.items():
        if glue_downloaded(name, glue_dir):
            described.append(load_task(name, glue_dir=glue_dir).describe())
        else:
            described.append({"name": name, "about": spec.about, "labels": list(spec.labels) or "regression",
                              "metric": spec.metric, "source": f"GLUE {spec.folder}, not downloaded: "
                                                               f"tasks --download {name}"})
    print(json.dumps(described, indent=2) if args.json else format_tasks(described))


def cmd_figures(args: argparse.Namespace, scale: Scale) -> None:
    from .figures import make_figures

    make_figures(scale, only=args.only, out=args.out)


def _label(path: Path, taken: dict) -> str:
    """A legend name for a checkpoint path: the run's name (run/step-N for a step), made unique."""
    name = f"{path.parent.parent.name}/{path.name}" if path.name.startswith("step-") else path.name
    name = name or str(path)
    return name if name not in taken else f"{name} ({len(taken)})"


def cmd_smoothness(args: argparse.Namespace, scale: Scale) -> None:
    import matplotlib.pyplot as plt

    from ..checkpoint import load_checkpoint
    from ..device import choose_device
    from .data import course_pretraining_data, course_tokenizer
    from .experiments.analysis import (
        DEFINITION,
        heldout_batches,
        interval_note,
        layer_transitions,
        official_model_batches,
    )
    from .lessons import lesson_sizes
    from .plots import figure_dir, plot_layer_transitions, save_figure

    officials = [name.strip() for name in (args.official or "").split(",") if name.strip()]
    if not args.checkpoint and not officials:
        raise ValueError("give at least one --checkpoint or --official model")
    for path in args.checkpoint:
        if not path.exists():
            raise FileNotFoundError(f"--checkpoint {path} does not exist")
    device = str(choose_device())                               # as the JSON records it
    tokenizer = course_tokenizer(scale.data)
    dataset = course_pretraining_data("mlm", args.split, scale.data)
    sizes = lesson_sizes(scale).smoothness                      # the scale's, as lesson 06's
    sequences, batch_size = args.sequences or sizes.sequences, args.batch_size or sizes.batch_size
    ours = heldout_batches(dataset, sequences, batch_size)
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
        model, batches = official_model_batches(official, dataset, tokenizer, sequences, batch_size)
        name = _label(Path(official), models)
        models[name], sources[name] = (model.to(device), batches), {"official": official}
    results = {}
    for name, (model, batches) in models.items():
        results[name] = layer_transitions(model, batches, args.tokens, args.standardize,
                                          progress=not args.quiet).to_dict()
        l2, angle = results[name]["oscillation"]["l2"], results[name]["oscillation"]["angle"]
        print(f"{name}: {len(results[name]['layers'])} layers; oscillation (sign changes, second "
              f"difference): L2 {l2['sign_changes']}, {l2['second_difference']:.2f}; "
              f"angle {angle['sign_changes']}, {angle['second_difference']:.2f}", file=sys.stderr)
        models[name] = None                                     # free the model before the next one
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


def cmd_tokenizer(args: argparse.Namespace, scale: Scale) -> None:
    import hashlib

    from .data import course_tokenizer, shipped_tokenizer_path, train_course_tokenizer

    shipped = shipped_tokenizer_path(scale.data)
    tok = course_tokenizer(scale.data)
    digest = hashlib.sha256(tok.model_proto).hexdigest()
    where = f"shipped at {shipped}" if shipped else f"trained on the {scale.data.corpus} corpus and cached"
    print(f"{scale.name} scale: {tok.vocab_size:,} pieces, {where}; sha256 {digest}")
    if args.verify:
        if shipped is None:
            raise ValueError(f"no tokenizer is shipped for the {scale.name} scale: --verify checks one")
        again = hashlib.sha256(train_course_tokenizer(scale.data).model_proto).hexdigest()
        if again != digest:
            raise ValueError(f"retraining gave sha256 {again}, not the shipped {digest}: the corpus or "
                             "sentencepiece differs from the one the shipped tokenizer was trained with")
        print("retrained on the course corpus: the same bytes")


def pack_scale(args: argparse.Namespace) -> Scale:
    """The scale pack and unpack carry: the gpu scale unless --scale names one (a dry run still applies)."""
    return current_scale(args.scale or "gpu")


def cmd_pack(args: argparse.Namespace) -> None:
    from .pack import make_pack

    scale = pack_scale(args)
    made = make_pack(scale.name, scale.data, args.out)
    files = ", ".join(f"{name} ({f['bytes'] / 2**20:.1f} MiB)" for name, f in made["files"].items())
    print(f"{made['pack']}: {made['pack_bytes'] / 2**20:.1f} MiB, sha256 {made['pack_sha256']}, the "
          f"{scale.name} scale's {files}")


def cmd_unpack(args: argparse.Namespace) -> None:
    from ..download import cache_dir
    from .pack import unpack

    scale = pack_scale(args)
    written = unpack(args.pack, scale.name, scale.data)
    print(f"unpacked {args.pack} into {cache_dir()}: {len(written)} files, every sha256 checked")


def cmd_student_notebooks(args: argparse.Namespace) -> None:
    from .student_files import write_student_notebooks

    written = write_student_notebooks(args.source, args.out, force=args.force)
    print(f"{len(written)} student notebooks in {args.out}")


def cmd_grade(args: argparse.Namespace) -> None:
    from .grade import Limits, grade
    from .grade_table import markdown, write_csv

    progress = None if args.quiet else lambda line: print(line, file=sys.stderr)
    grades = grade(args.submissions, args.lessons, Limits(args.timeout, args.memory), args.seed_cache,
                   args.scale or "ci", progress)
    print(markdown(grades), end="")
    if args.out:
        print(f"wrote {write_csv(grades, args.out)}")


def cmd_clean_notebooks(args: argparse.Namespace) -> None:
    from .notebooks import clean_notebooks

    paths = args.paths or sorted(Path("notebooks").rglob("*.ipynb"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or not paths:
        raise FileNotFoundError(f"no notebook at {', '.join(missing) or 'notebooks/'}: run from the "
                                "repository root or pass notebook paths")
    changed = clean_notebooks(paths)
    print(f"cleaned {len(changed)} of {len(paths)} notebooks" + "".join(f"\n  {p}" for p in changed))


# the commands sized by the scale main() resolves; the tools, which read no scale (pack and unpack name
# the scale of their pack themselves, the grader hands each submission its own)
SCALED = {"pretrain": cmd_pretrain, "evaluate": cmd_evaluate, "zoo": cmd_zoo, "ablation": cmd_ablation,
          "figures": cmd_figures, "finetune": cmd_finetune, "tasks": cmd_tasks,
          "smoothness": cmd_smoothness, "tokenizer": cmd_tokenizer}
TOOLS = {"student-notebooks": cmd_student_notebooks, "clean-notebooks": cmd_clean_notebooks,
         "pack": cmd_pack, "unpack": cmd_unpack, "grade": cmd_grade}
COMMANDS = {**SCALED, **TOOLS}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.debug:
        warnings.formatwarning = _one_line_warning
    try:
        command = COMMANDS[args.command]
        if args.command in TOOLS:
            command(args)
        else:
            command(args, current_scale(args.scale))       # the scale, resolved once, here
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
