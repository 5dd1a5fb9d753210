"""``execrl train``, ``execrl eval`` and ``execrl compare`` (cheap to import: torch loads in the handlers)."""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from execrl.config import ConfigError, TrainConfig, load_config, to_toml
from execrl.inputs import InputFileError, positive_int

if TYPE_CHECKING:
    from execrl.recipes.remote import RunMirror


def _resume_dir(args: argparse.Namespace, stack: ExitStack, mirrors: list[RunMirror]) -> Path | None:
    """``--resume`` as a local directory (``file://`` is one); a URL is downloaded to staging and mirrored
    back as it runs (the staging copy is removed after the final sync)."""
    from execrl.recipes import remote

    if args.resume is None:
        return None
    if not remote.is_url(args.resume):
        return Path(remote.local_path(args.resume))
    staging = remote.staging_root()
    try:
        run_dir = remote.download_run(args.resume, staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    mirrors.append(
        stack.enter_context(remote.RunMirror(staging, remote.parent_url(args.resume), remove_local=True))
    )
    return run_dir


def _stage_output(config: TrainConfig, stack: ExitStack, mirrors: list[RunMirror]) -> TrainConfig:
    """``run.output_dir`` on a URL: train in a local staging directory mirrored to it (removed after the
    final sync); ``file://`` is a local path."""
    from execrl.recipes import remote

    output_dir = config.run.output_dir
    if not remote.is_url(output_dir):
        if output_dir.startswith("file://"):
            return config.model_copy(
                update={"run": config.run.model_copy(update={"output_dir": remote.local_path(output_dir)})}
            )
        return config
    staging = remote.staging_root()
    mirrors.append(stack.enter_context(remote.RunMirror(staging, output_dir, remove_local=True)))
    print(f"run directory mirrored to {output_dir} (staging in {staging}, removed after the run)")
    return config.model_copy(update={"run": config.run.model_copy(update={"output_dir": str(staging)})})


def _executor_overrides(args: argparse.Namespace) -> list[str]:
    """``--executor ray --ray-address ADDR``: shorthands for ``executor.kind`` and ``executor.ray_address``."""
    out = [f"executor.kind={args.executor}"] if args.executor else []
    if args.ray_address:
        out.append(f"executor.ray_address={json.dumps(args.ray_address)}")
    return out


def _staged_source(args: argparse.Namespace) -> Path | None:
    """The config file when it is a staged run's (``[[stages]]``): ``--config``, or ``--resume``'s."""
    import tomllib

    path = args.config or (Path(args.resume) / "config.toml" if args.resume else None)
    if path is None or not Path(path).is_file():
        return None
    try:
        return Path(path) if "stages" in tomllib.loads(Path(path).read_text(encoding="utf-8")) else None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError, RecursionError):
        return None  # load_config reports it as one error line (a file nested too deep included)


def _train_staged(args: argparse.Namespace, path: Path) -> int:
    """``[[stages]]``: ``recipes/stages.py`` runs them in order; ``--resume`` continues the staged run."""
    from execrl.config import load_typed
    from execrl.config.stages import StagedConfig, check_stages

    if args.overrides or args.executor or args.ray_address or args.nproc is not None:
        raise ConfigError(
            "a staged config takes no KEY=VALUE overrides, --executor or --nproc; set them in its stages"
        )
    staged = load_typed(StagedConfig, path)
    check_stages(staged, source=str(path))
    if args.print_config:
        print(to_toml(staged, descriptions=True), end="")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from execrl.components.run import StopReason
    from execrl.recipes.stages import new_staged_dir, run_stages

    run_dir = Path(args.resume) if args.resume else new_staged_dir(staged, path.read_text(encoding="utf-8"))
    outcome = run_stages(staged, run_dir, progress=not args.no_progress, source=str(path))
    print(f"staged run directory: {outcome.run_dir} (stages done: {', '.join(outcome.finished) or 'none'})")
    if outcome.stopped_early:
        print(f"stopped early: {outcome.stopped_early}")
        return 130 if outcome.stopped_early.reason is StopReason.SIGNAL else 0
    print(f"report: {outcome.run_dir / 'report.md'}")
    return 0


def _rank_argv(args: argparse.Namespace) -> list[str]:
    """``execrl train`` arguments for each rank of ``--nproc`` (the flags as given, sharded)."""
    argv = ["--config", str(args.config)] if args.config else []
    argv += ["--resume", args.resume] if args.resume else []
    argv += ["--no-progress"] if args.no_progress else []
    return [*argv, *args.overrides, *_executor_overrides(args), "trainer.strategy=fsdp"]


def _train_ranks(args: argparse.Namespace) -> int:
    """``--nproc N``: check the run and the machine, then start the ranks (``launch.py``; with
    ``--executor ray``, ranks 1..N-1 are Ray actors and this process is rank 0)."""
    from execrl.recipes import launch, remote

    try:
        if launch.under_launcher():
            raise ConfigError("--nproc: this process is already a trainer rank (torchrun); drop --nproc")
        if args.resume is not None and remote.is_url(args.resume):
            raise ConfigError("--nproc with --resume URL: download the run first (every rank reads it)")
        resume = Path(args.resume) if args.resume is not None else None
        if resume is not None and not (resume / "config.toml").is_file():
            raise ConfigError(f"--resume {args.resume}: no config.toml there (not an execrl run directory)")
        overrides = [*args.overrides, *_executor_overrides(args), "trainer.strategy=fsdp"]
        config = load_config(args.config or (resume / "config.toml" if resume else None), overrides)
        launch.check_nproc(args.nproc, config)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config.executor.kind == "ray":
        from execrl.distributed.ray_trainers import trainer_rank_actors
        from execrl.recipes import load_recipe, recipe_name

        with trainer_rank_actors(config, args.nproc, load_recipe(recipe_name(config)).PARTS):
            rank0 = {
                **vars(args),
                "nproc": None,
                "executor": None,
                "ray_address": None,
                "overrides": overrides,
            }
            return _train(argparse.Namespace(**rank0))
    return launch.launch_ranks(
        args.nproc, _rank_argv(args), shutdown_timeout_s=config.trainer.collective_timeout_s
    )


def _train(args: argparse.Namespace) -> int:
    staged = _staged_source(args)
    if staged is not None:
        try:
            return _train_staged(args, staged)
        except (ConfigError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.nproc is not None and not args.print_config:
        return _train_ranks(args)
    from execrl.recipes.launch import exit_with_launcher, note_rank_exit

    exit_with_launcher()  # a rank of --nproc: gone with its launcher
    code = 1  # an exception: main prints its error line, or Python its traceback
    try:
        code = _train_here(args)
        return code
    finally:
        note_rank_exit(code)  # rank 0 under --nproc: the launcher adds no line of its own


def _train_here(args: argparse.Namespace) -> int:
    mirrors: list[RunMirror] = []
    with ExitStack() as stack:
        try:
            resume = _resume_dir(args, stack, mirrors)
            if resume is not None and (not resume.is_dir() or not (resume / "config.toml").exists()):
                what = "not a directory" if not resume.is_dir() else "no config.toml there"
                print(f"error: --resume {args.resume}: {what} (not an execrl run directory)", file=sys.stderr)
                return 2
            config = load_config(
                args.config or (resume / "config.toml" if resume else None),
                [*args.overrides, *_executor_overrides(args)],
            )
            if args.print_config:
                print(to_toml(config, descriptions=True), end="")
                return 0
            if resume is None:
                config = _stage_output(config, stack, mirrors)
        except (ConfigError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        from execrl.components import sharding
        from execrl.recipes import load_recipe, recipe_name
        from execrl.recipes.launch import check_trainer

        check_trainer(config)  # before the run directory exists
        name = recipe_name(config)  # grpo, ppo or async (the environment is the config's)
        if sharding.is_follower(config):  # trainer ranks 1..N-1: rank 0 runs the recipe
            return sharding.follow(config, load_recipe(name).PARTS)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        from execrl.components.run import StopReason
        from execrl.trainer.ranks import RankFailure

        logging.getLogger("execrl.train").info("recipe: %s", name)
        from execrl.rollout.vllm_engine import EngineUnavailable
        from execrl.rollout.vllm_sync import SyncError

        try:
            outcome = load_recipe(name).train(config, resume_dir=resume, progress=not args.no_progress)
        except EngineUnavailable as exc:  # rollout.engine=vllm without its environment: how to build it
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except (RankFailure, SyncError) as exc:
            # a trainer rank died or hung, or a weight sync did not verify: the run stops (the last
            # checkpoint stays), the cause named
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if mirrors:  # the staging copy is gone: name the run where it now lives
        print(f"run directory: {mirrors[0].remote(outcome.run_dir)}")
    else:
        print(f"run directory: {outcome.run_dir}")
        report = outcome.run_dir / "report.md"
        if report.exists():
            print(f"report: {report}")
    if outcome.stopped_early:
        print(f"stopped early after step {outcome.last_step}: {outcome.stopped_early}")
        return 130 if outcome.stopped_early.reason is StopReason.SIGNAL else 0
    return 0


def _eval(args: argparse.Namespace) -> int:
    from execrl.eval.harness import EvalConfig
    from execrl.recipes.evaluate import eval_command
    from execrl.serve.export import resolve_model_source
    from execrl.tasks.registry import suite_splits

    if args.as_run is not None:
        return _eval_as_run(args)
    if args.suite is None:
        print("error: execrl eval needs --suite (or --as-run RUN_DIR)", file=sys.stderr)
        return 2
    if args.split not in suite_splits(args.suite):  # unknown suites raise SuiteError (exit 2)
        print(f"error: suite {args.suite!r} has no split {args.split!r}", file=sys.stderr)
        return 2
    resolve_model_source(args.model)  # a model, run or checkpoint; a bad path fails here, before loading
    _check_output(args.json)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        eval_config = EvalConfig(
            samples_per_task=args.samples_per_task,
            temperature=args.temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            prompts_per_batch=args.prompts_per_batch,
            seed=args.seed,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        result = eval_command(
            model=args.model,
            suite=args.suite,
            split=args.split,
            eval_config=eval_config,
            limit=args.limit,
            json_path=args.json,
            sandbox_workers=args.sandbox_workers,
        )
    except ConfigError as exc:  # --model names no model, run or checkpoint
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"suite {result.suite}: {len(result.tasks)} tasks, model {result.model}")
    for name, est in result.pass_at_k.items():
        print(f"  {name:>9}: {est.value:.4f}  (95% CI {est.ci_low:.4f} .. {est.ci_high:.4f})")
    print(f"  reward   : {result.mean_reward.value:.4f}")
    for key in (
        "truncation_rate",
        "extraction_failure_rate",
        "invalid_rate",
        "length_mean_tokens",
        "rescoring_agreement",
        "tokens_per_s",
    ):
        print(f"  {key}: {result.diagnostics[key]:.4f}")
    if args.json:
        print(f"per-task results: {args.json}")
    return 0


def _check_output(path: Path | None, *, directory: bool = False) -> None:
    """An output path must not be the wrong kind of thing (a directory where a file goes, or back)."""
    if path is not None and path.exists() and path.is_dir() != directory:
        want = "a directory" if directory else "a file path"
        raise InputFileError(f"{path}: exists and is not {want}")


def _compare(args: argparse.Namespace) -> int:
    from execrl.telemetry.reader import read_metrics
    from execrl.telemetry.report import compare_runs

    out_dir = args.out or Path(f"compare-{args.run_a.name}-{args.run_b.name}")
    _check_output(out_dir, directory=True)
    for run in (args.run_a, args.run_b):
        if not read_metrics(run):  # errors name the file and line
            raise InputFileError(f"{run}/metrics.jsonl: no metrics rows (the file is empty)")
    out = compare_runs(args.run_a, args.run_b, out_dir)
    print(out.read_text(encoding="utf-8") if out.suffix == ".md" else f"written: {out}")
    return 0


def _eval_as_run(args: argparse.Namespace) -> int:
    """``--as-run RUN_DIR``: the run's held-out evaluation on ``--model``, compared with the run's own."""
    from execrl.recipes.evaluate import eval_as_run
    from execrl.serve.export import resolve_model_source

    run_dir = Path(args.as_run)
    if not (run_dir / "config.toml").is_file():
        print(
            f"error: --as-run {run_dir}: no config.toml there (not an execrl run directory)", file=sys.stderr
        )
        return 2
    try:
        load_config(run_dir / "config.toml", [])  # a bad config fails here, before the model loads
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    resolve_model_source(args.model)
    _check_output(args.json)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        out, differences = eval_as_run(
            model=args.model, run_dir=run_dir, json_path=args.json, sandbox_workers=args.sandbox_workers
        )
    except (ConfigError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for suite, result in out["suites"].items():
        passk = ", ".join(f"{k} {v['value']:.4f}" for k, v in result["pass_at_k"].items())
        print(
            f"suite {suite}: {result['n_tasks']} tasks: {passk}, reward {result['mean_reward']['value']:.4f}"
        )
    if differences:
        print(f"differs from {run_dir}/eval/trained.json on {len(differences)} task(s):", file=sys.stderr)
        for line in differences:
            print(f"  {line}", file=sys.stderr)
        return 1
    print(f"identical to {run_dir}/eval/trained.json: every task's verdicts and rewards")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser("train", help="GRPO post-training from execution feedback (the main job)")
    p.add_argument("--config", type=Path, help="TOML config file (defaults are the README's main job)")
    p.add_argument(
        "--resume", metavar="RUN_DIR", help="continue a run from its newest checkpoint (a directory or a URL)"
    )
    p.add_argument(
        "--print-config", action="store_true", help="print the resolved config, each key with its description"
    )
    p.add_argument(
        "--executor", choices=("inprocess", "ray"), help="where generate-and-score runs (executor.kind)"
    )
    p.add_argument("--ray-address", metavar="ADDR", help="an existing Ray cluster (executor.ray_address)")
    p.add_argument(
        "--nproc", type=positive_int, metavar="N",
        help="train on N ranks of this machine (FSDP2, trainer.strategy=fsdp; gloo on CPU, NCCL on GPUs; "
        "with --executor ray ranks 1..N-1 are Ray actors); over nodes use torchrun (docs/sharded.md)",
    )  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="e.g. rollout.samples_per_prompt=8")
    p.set_defaults(func=_train)

    e = subparsers.add_parser("eval", help="pass@k of a model on a suite (e.g. humaneval)")
    e.add_argument(
        "--model",
        required=True,
        help="'smollm2-135m-instruct', a HF dir, an execrl run dir (newest checkpoint) or a checkpoint dir",
    )
    e.add_argument("--suite", help="suite name, e.g. humaneval, functions")
    e.add_argument(
        "--as-run",
        metavar="RUN_DIR",
        help="instead of --suite: the run's own held-out evaluation (its tasks, decoding, seed, reward) "
        "on --model, compared task by task with the run's eval/trained.json (exit 1 where it differs)",
    )
    e.add_argument("--split", default="test")
    e.add_argument("--samples-per-task", type=int, default=1)
    e.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    e.add_argument("--top-p", type=float, default=1.0)
    e.add_argument("--max-new-tokens", type=int, default=384)
    e.add_argument("--prompts-per-batch", type=int, default=8)
    e.add_argument("--limit", type=positive_int, help="evaluate only the first N tasks")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--sandbox-workers", type=int, default=2)
    e.add_argument("--json", type=Path, help="write the summary and per-task results here")
    e.set_defaults(func=_eval)

    c = subparsers.add_parser("compare", help="side-by-side table and plot of two runs")
    c.add_argument("run_a", type=Path)
    c.add_argument("run_b", type=Path)
    c.add_argument("--out", type=Path, help="output directory (default compare-A-B)")
    c.set_defaults(func=_compare)
