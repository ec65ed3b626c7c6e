"""The generated repo as a project of its own: CI workflow, pre-commit, .gitignore, answers file, cruft."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cookiecutter.main import cookiecutter
from render import ROOT, TEMPLATE, baked_project, package_of, render_files
from tricks import answers_for

GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t"}
GIT |= {"GIT_COMMITTER_EMAIL": "t@example.com"}


def tree(project: Path, skip=()) -> dict[str, bytes]:
    return {
        str(path.relative_to(project)): path.read_bytes()
        for path in sorted(project.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(project).parts and path.name not in skip
    }


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT})


def test_workflow_is_copied_verbatim_and_runs_lint_and_tests(default_project):
    text = (default_project / ".github" / "workflows" / "tests.yml").read_text()
    assert text == (TEMPLATE / ".github" / "workflows" / "tests.yml").read_text()
    assert "${{ matrix.python-version }}" in text
    steps = yaml.safe_load(text)["jobs"]["tests"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert any('pip install -e ".[dev]"' in run for run in runs)
    assert "ruff check . && ruff format --check ." in runs and "pytest" in runs


def test_pre_commit_runs_ruff_and_gitignore_keeps_outputs_out_and_the_renders_files_in(default_project, tmp_path):
    config = yaml.safe_load((default_project / ".pre-commit-config.yaml").read_text())
    assert [hook["id"] for hook in config["repos"][0]["hooks"]] == ["ruff", "ruff-format"]
    repo = Path(shutil.copytree(default_project, tmp_path / "repo", ignore=shutil.ignore_patterns("__pycache__")))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for output in ("runs/20260101-000000/model.pt", "data/cifar-10-batches-py/data_batch_1", "notes.pt"):
        (repo / output).parent.mkdir(parents=True, exist_ok=True)
        (repo / output).write_bytes(b"")
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=repo, capture_output=True,
                            text=True, check=True).stdout.split()  # fmt: skip
    assert sorted(listed) == render_files(default_project)  # the package's data/ is code: committed, not ignored


def test_answers_file_has_no_local_paths_and_replays_to_the_same_repo(cookies, tmp_path):
    project = baked_project(cookies, project_name="Replayed", **answers_for(["use_mixup"], "wandb"))
    text = (project / ".cookiecutter.json").read_text()
    answers = json.loads(text)["cookiecutter"]
    assert answers["use_mixup"] and answers["tracker"] == "wandb" and not answers["use_amp"]
    assert not {"_template", "_output_dir", "_repo_dir", "_checkout"} & set(answers)
    assert str(ROOT) not in text and str(project.parent) not in text
    assert (project / "src" / package_of(project) / "answers.json").read_text() == text

    again = Path(cookiecutter(str(ROOT), replay=str(project / ".cookiecutter.json"), output_dir=str(tmp_path)))
    assert tree(again) == tree(project)  # rendering is deterministic and the answers are complete


@pytest.mark.skipif(shutil.which("git") is None, reason="cruft needs git")
def test_cruft_creates_checks_and_updates_a_trick_on(cookies, tmp_path):
    template = tmp_path / "template"  # cruft works from a git repository: the template as it is now
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True)
    for name in filter(None, files.stdout.decode().split("\0")):
        if not (ROOT / name).is_file():  # tracked but deleted in the working tree: not in the template as it is now
            continue
        (template / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, template / name)
    git("init", "-q", cwd=template)
    git("add", "-A", cwd=template)
    git("commit", "-qm", "template", cwd=template)

    cruft = [sys.executable, "-m", "cruft"]
    context = json.dumps({"project_name": "Crufty", "tracker": "none"})
    create = [*cruft, "create", str(template), "--no-input", "--extra-context", context, "--output-dir", str(tmp_path)]
    subprocess.run(create, check=True, capture_output=True)
    project = tmp_path / "crufty"
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "generated", cwd=project)
    check = subprocess.run([*cruft, "check"], cwd=project, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

    update = [*cruft, "update", "--variables-to-update", '{"tracker": "tensorboard"}', "--skip-apply-ask"]
    done = subprocess.run(update, cwd=project, capture_output=True, text=True, env={**os.environ, **GIT})
    assert done.returncode == 0, done.stdout + done.stderr
    direct = baked_project(cookies, project_name="Crufty", tracker="tensorboard")
    assert tree(project, skip={".cruft.json"}) == tree(direct)  # the update equals a fresh render
