"""A staged run (issue 39): ``execrl train --config staged.toml`` with ``[[stages]]`` runs ``sft``, ``sample``
and ``train`` stages in order, each stage's model the next one's (``config/stages.py`` for the format).

    runs/tools-staged-20261207-180000/
        config.toml              the staged config as given (what --resume reads back)
        stages.json              each finished stage: its run directory, its model, its rows
        stages/0-sft/            the stage's own output_dir: its run directory (execrl sft's), model/
        stages/1-rft-rows/       rows.jsonl, rows.counts.json
        stages/2-rl/             execrl train's run directory, model/
        report.md                every stage's run and its base -> trained comparison

A stage runs exactly what its command runs (``recipes/sft.py``, ``recipes/sample.py``, the config's RL
recipe), in this process. After an ``sft`` or ``train`` stage its model is exported as a plain Hugging Face
directory (``stages/<i>-<name>/model``, LoRA folded in: ``execrl export``) and becomes the next stages'
``model.path``; a ``sample`` stage's rows feed the ``sft`` stages that name it in ``rows_from``.

Resume (``execrl train --resume STAGED_RUN_DIR``): finished stages (``stages.json``, written whole after
each) are skipped; the first unfinished one continues from its run directory's newest checkpoint when it
has one (inside the stage, bit-exact as its command's own ``--resume``), else starts again; a ``sample``
stage reruns whole (it writes its rows at the end). A signal stops the current stage as its command does
(checkpoint, exit 130) and the staged run there.

Limits: in process only (no Ray executor, no ``s3://`` output for stages); each stage loads its model afresh.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from execrl.components.run import Stop
from execrl.config import ConfigError, TrainConfig
from execrl.config.stages import StagedConfig, StageSection, check_stages, stage_config
from execrl.inputs import read_text_file

__all__ = ["STATE_FILE", "StagedOutcome", "new_staged_dir", "run_stages"]

log = logging.getLogger("execrl.stages")
STATE_FILE = "stages.json"


@dataclass(frozen=True)
class StagedOutcome:
    run_dir: Path
    finished: tuple[str, ...]  # the stages done, in order
    stopped_early: Stop | None = None  # the stage's own stop (a signal): the staged run stops there


def new_staged_dir(staged: StagedConfig, config_text: str) -> Path:
    """``output_dir/<name>-<UTC time>`` holding the staged config as given."""
    if "://" in staged.run.output_dir:
        raise ConfigError(f"run.output_dir={staged.run.output_dir!r}: a staged run writes local directories")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    base = Path(staged.run.output_dir) / f"{staged.run.name}-{stamp}"
    path, n = base, 1
    while path.exists():
        path, n = base.with_name(f"{base.name}-{n}"), n + 1
    path.mkdir(parents=True)
    (path / "config.toml").write_text(config_text, encoding="utf-8")
    return path


def _read_state(run_dir: Path) -> dict[str, dict[str, Any]]:
    path = run_dir / STATE_FILE
    if not path.exists():
        return {}
    state = json.loads(read_text_file(path, "staged run state", max_bytes=1 << 20))
    return dict(state.get("stages", {}))


def _write_state(run_dir: Path, state: dict[str, dict[str, Any]]) -> None:
    tmp = run_dir / f"{STATE_FILE}.tmp"
    tmp.write_text(json.dumps({"stages": state}, indent=1), encoding="utf-8")
    tmp.replace(run_dir / STATE_FILE)


def _stage_run_dir(stage_dir: Path) -> Path | None:
    """The newest run directory a stage's command made in its output_dir that has a checkpoint."""
    from execrl.trainer import latest_checkpoint

    runs = sorted((p for p in stage_dir.glob("*/config.toml")), key=lambda p: p.stat().st_mtime)
    for config in reversed(runs):
        if latest_checkpoint(config.parent) is not None:
            return config.parent
    return None


def _export(run_dir: Path, stage_dir: Path) -> str:
    """The stage's trained model as a plain HF directory: what the next stage loads."""
    from execrl.serve.export import export_model

    return str(export_model(str(run_dir), stage_dir / "model", force=True))


def _run_training(
    stage: StageSection, config: Any, stage_dir: Path, progress: bool
) -> tuple[dict[str, Any], Stop | None]:
    resume = _stage_run_dir(stage_dir)
    if resume is not None:
        log.info("stage %s: resuming %s", stage.name, resume)
    if stage.kind == "sft":
        from execrl.recipes.sft import train as sft_train

        outcome = sft_train(config, resume_dir=resume, progress=progress)
    else:
        from execrl.recipes import load_recipe, recipe_name

        outcome = load_recipe(recipe_name(config)).train(config, resume_dir=resume, progress=progress)
    from execrl.components.run import StopReason

    if outcome.stopped_early is not None and outcome.stopped_early.reason is not StopReason.WALL_TIME:
        return {}, outcome.stopped_early
    return {"run_dir": str(outcome.run_dir), "model": _export(outcome.run_dir, stage_dir)}, None


def _run_sample(stage: StageSection, config: TrainConfig, stage_dir: Path) -> dict[str, Any]:
    from execrl.recipes.sample import sample, write_rows

    result = sample(config, min_reward=stage.min_reward, limit=stage.limit)
    rows = stage_dir / "rows.jsonl"
    counts = write_rows(rows, result)
    log.info("stage %s: %d rows (%d of %d episodes kept)", stage.name, len(result.rows), result.passed,
             result.samples)  # fmt: skip
    return {"rows": str(rows), "counts": str(counts), "row_count": len(result.rows)}


def run_stages(
    staged: StagedConfig, run_dir: Path, *, progress: bool = True, source: str = "config"
) -> StagedOutcome:
    """Every stage in order from what ``run_dir/stages.json`` says is done (module docstring)."""
    check_stages(staged, source=source)
    run_dir = run_dir.resolve()  # stages.json holds absolute paths: a resume from elsewhere finds them
    state = _read_state(run_dir)
    model: str | None = None
    rows: dict[str, str] = {}
    finished: list[str] = []
    for index, stage in enumerate(staged.stages):
        stage_dir = run_dir / "stages" / f"{index}-{stage.name}"
        record = state.get(stage.name)
        if record is None:
            stage_dir.mkdir(parents=True, exist_ok=True)
            config = stage_config(staged, index, output_dir=str(stage_dir), model_path=model, rows=rows,
                                  source=source)  # fmt: skip
            log.info("stage %d/%d: %s (%s)", index + 1, len(staged.stages), stage.name, stage.kind)
            if stage.kind == "sample":
                record = _run_sample(stage, config, stage_dir)  # type: ignore[arg-type]
            else:
                record, stop = _run_training(stage, config, stage_dir, progress)
                if stop is not None:
                    return StagedOutcome(run_dir, tuple(finished), stop)
            record = {"kind": stage.kind, **record}
            state[stage.name] = record
            _write_state(run_dir, state)
        model = record.get("model", model)
        if "rows" in record:
            rows[stage.name] = record["rows"]
        finished.append(stage.name)
    write_staged_report(run_dir, staged, state)
    return StagedOutcome(run_dir, tuple(finished))


def _comparisons(run_dir: Path) -> list[str]:
    """Each ``eval/*comparison.json`` of a stage's run: per suite and metric, base -> trained and the delta."""
    lines = []
    for path in sorted((run_dir / "eval").glob("*comparison.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for suite, body in data.items():
            if not isinstance(body, dict) or "delta" not in body:
                continue
            for metric, delta in body["delta"].items():
                base = body["models"]["base"][metric]
                trained = body["models"]["trained"][metric]
                lines.append(f"  - `{path.name}` {suite} {metric}: {_value(base)} -> {_value(trained)}, "
                             f"delta {_value(delta)}")  # fmt: skip
    return lines


def _value(d: dict[str, Any]) -> str:
    """An interval (``eval.stats``' ``as_dict``) as ``value [low, high]``."""
    return f"{d['value']:.4f} [{d['ci_low']:.4f}, {d['ci_high']:.4f}]"


def write_staged_report(run_dir: Path, staged: StagedConfig, state: dict[str, dict[str, Any]]) -> Path:
    """``report.md``: every stage, what it wrote, and its own base -> trained comparisons."""
    lines = [f"# Staged run `{run_dir.name}`", ""]
    for index, stage in enumerate(staged.stages):
        record = state.get(stage.name, {})
        lines.append(f"## {index + 1}. {stage.name} ({stage.kind})")
        if "run_dir" in record:
            lines.append(f"- run: `{record['run_dir']}` (its `report.md`), model: `{record['model']}`")
            lines += _comparisons(Path(record["run_dir"]))
        if "rows" in record:
            lines.append(
                f"- rows: `{record['rows']}` ({record.get('row_count', '?')}), counts: `{record['counts']}`"
            )
        lines.append("")
    path = run_dir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
