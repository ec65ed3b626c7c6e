"""Rendering the template: its prompts, renders baked with pytest-cookies or with cookiecutter itself, refusals, and
the pre-generation hook's own rules loaded as code."""

import functools
import json
import os
import tempfile
import types
from pathlib import Path

import pytest
from cookiecutter.exceptions import FailedHookException
from cookiecutter.generate import generate_context
from cookiecutter.main import cookiecutter
from cookiecutter.prompt import prompt_for_config
from cookiecutter.utils import create_env_with_context

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "{{cookiecutter.project_slug|folder_name}}"
GENERATED_TESTS = TEMPLATE / "tests"
CONTEXT = json.loads((ROOT / "cookiecutter.json").read_text())
# read before conftest redirects this process's temp dir, or from the run's first process, which gives its children
# (xdist's workers too) a private TMPDIR
SYSTEM_TEMP_VARIABLE = "TORCH_TEMPLATE_SYSTEM_TEMP"
SYSTEM_TEMP = Path(os.environ.get(SYSTEM_TEMP_VARIABLE) or tempfile.gettempdir())
CHOICES = {key: value for key, value in CONTEXT.items() if isinstance(value, list) and not key.startswith("_")}
YES_NO = sorted(key for key, value in CONTEXT.items() if isinstance(value, bool))


def bake(cookies, **answers):
    """Render with the given answers; unknown keys would be silently ignored by cookiecutter."""
    unknown = set(answers) - set(CONTEXT)
    assert not unknown, f"not in cookiecutter.json: {unknown}"
    return cookies.bake(extra_context=answers)


def baked_project(cookies, **answers) -> Path:
    result = bake(cookies, **answers)
    assert result.exit_code == 0, result.exception
    return Path(result.project_path)


def package_of(project: Path) -> str:
    return next(path.parent.name for path in (project / "src").glob("*/__init__.py"))


def render_files(project: Path) -> list[str]:
    """A render's files, relative to it, sorted (no bytecode)."""
    files = (path.relative_to(project) for path in project.rglob("*") if path.is_file())
    return sorted(str(path) for path in files if "__pycache__" not in path.parts)


def replay_file(tmp_path: Path, **answers) -> Path:
    """A replay file holding every answer: the defaults, the first option of each choice, then `answers`."""
    context = {key: value for key, value in CONTEXT.items() if key != "__prompts__"}
    context |= {key: options[0] for key, options in CHOICES.items()} | answers
    replay = tmp_path / "replay.json"
    replay.write_text(json.dumps({"cookiecutter": context}))
    return replay


def render(tmp_path: Path, via: str, **answers) -> Path:
    """Render into tmp_path/out from a replay file holding every answer, or with --no-input and extra_context."""
    unknown = set(answers) - set(CONTEXT)
    assert not unknown, f"not in cookiecutter.json: {unknown}"
    out = tmp_path / "out"
    if via == "replay":
        replay = replay_file(tmp_path, **{"project_slug": "replayed", "package_name": "replayed", **answers})
        return Path(cookiecutter(str(ROOT), replay=str(replay), output_dir=str(out)))
    return Path(cookiecutter(str(ROOT), no_input=True, extra_context=answers, output_dir=str(out)))


def assert_refused(tmp_path: Path, capfd, via: str, **answers) -> str:
    """The render stops with exactly one `ERROR:` line, no traceback, and nothing on disk (its output folder, which
    this process owns, holds nothing afterwards); returns that line."""
    with pytest.raises(FailedHookException):
        render(tmp_path, via, **answers)
    err = capfd.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ") and "hook script" not in line]
    assert len(errors) == 1, err
    assert "Traceback" not in err, err
    out = tmp_path / "out"
    assert not out.exists() or list(out.iterdir()) == [], sorted(out.rglob("*"))
    return errors[0]


@functools.cache
def default_answers() -> dict:
    """Every answer as `cookiecutter --no-input` settles it (derived ones such as the slug rendered)."""
    return dict(prompt_for_config(generate_context(context_file=str(ROOT / "cookiecutter.json")), no_input=True))


@functools.cache
def pre_gen_hook() -> types.ModuleType:
    """hooks/pre_gen_project.py as cookiecutter runs it (rendered in cookiecutter's own Jinja environment for the
    default answers), loaded as a module without running its main: its `problems(ctx)` is the hook's rules."""
    context = {"cookiecutter": default_answers()}
    source = (ROOT / "hooks" / "pre_gen_project.py").read_text(encoding="utf-8")
    code = create_env_with_context(context).from_string(source).render(**context)
    module = types.ModuleType("pre_gen_project")
    exec(compile(code, str(ROOT / "hooks" / "pre_gen_project.py"), "exec"), module.__dict__)
    return module


def refused_by_the_hook(**answers) -> bool:
    """Whether the pre-generation hook's rules refuse the default answers with these changed."""
    return next(pre_gen_hook().problems({**default_answers(), **answers}), None) is not None
