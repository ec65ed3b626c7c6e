"""The template itself: every file and path is valid Jinja, every variable is declared and prompted."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from checks import assert_ruff_clean
from cookiecutter.environment import StrictEnvironment
from matrix import ACCEPTED, REJECTED
from render import CHOICES, CONTEXT, ROOT, TEMPLATE

TEMPLATE_FILES = sorted(p for p in TEMPLATE.rglob("*") if p.is_file()) + sorted((ROOT / "hooks").glob("*.py"))
VARIABLE = re.compile(r"cookiecutter\.(\w+)")


@pytest.fixture(scope="module")
def env():
    options = CONTEXT["_jinja2_env_vars"]
    return StrictEnvironment(context={"cookiecutter": CONTEXT}, keep_trailing_newline=True, **options)


def copied_verbatim(path: Path) -> bool:
    """Matches `_copy_without_render` (GitHub's ${{ }} expressions are not Jinja for cookiecutter)."""
    relative = path.relative_to(TEMPLATE) if TEMPLATE in path.parents else None
    return relative is not None and any(relative.match(pattern) for pattern in CONTEXT["_copy_without_render"])


@pytest.mark.parametrize("path", TEMPLATE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_template_file_and_path_parses(env, path: Path):
    env.parse(str(path.relative_to(ROOT)))
    text = path.read_text(encoding="utf-8")  # also refuses binary files such as stray caches
    if not copied_verbatim(path):
        env.parse(text)


def test_verbatim_files_are_the_github_workflows_only():
    assert [p.name for p in TEMPLATE_FILES if copied_verbatim(p)] == ["tests.yml"]


def test_every_variable_used_is_declared():
    used = set()
    for path in [*TEMPLATE_FILES, *TEMPLATE.rglob("*")]:
        text = str(path.relative_to(ROOT)) + (path.read_text() if path.is_file() else "")
        text = text.replace(".cookiecutter.json", "")  # the answers file's name, not a variable
        used |= set(VARIABLE.findall(text))
    assert used - set(CONTEXT) == set()
    unused = {k for k in CONTEXT if not k.startswith("_")} - used
    assert unused == set(), "answers that change nothing"


def test_every_variable_has_a_prompt_and_every_choice_a_label():
    prompts = CONTEXT["__prompts__"]
    assert {k for k in CONTEXT if not k.startswith("_")} == set(prompts)
    for name, options in CHOICES.items():
        assert set(prompts[name]) == {"__prompt__", *options}
    assert CHOICES["model"][0] == "small_cnn"


def test_both_readmes_say_how_to_install_cpu_only_wheels():
    """A CPU-only machine otherwise downloads the 5 GB CUDA build of torch (issue 23, item 29)."""
    cpu_wheels = "--index-url https://download.pytorch.org/whl/cpu"
    assert cpu_wheels in (ROOT / "README.md").read_text()
    assert cpu_wheels in (TEMPLATE / "README.md").read_text()


def test_the_readme_starts_with_the_users_path_and_no_placeholder():
    """Rendering and training come first; the suite's internals are for the template's developers (issue 36)."""
    text = (ROOT / "README.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Use" and headings[-1] == "## Developing the template", headings
    assert "<org>" not in text and "bash scripts/demo.sh" in text.split("### Prompts")[0]


def test_the_template_own_code_is_ruff_clean():
    """Its tests, hooks and scripts under the root pyproject's settings (the template folder is ruffed per render)."""
    assert_ruff_clean(ROOT)


def test_renders_cite_no_catalogue_they_do_not_ship():
    """The template's own catalogue (../shared/TRICKS.md) numbers the tricks T01..T48; a render does not ship it."""
    cited = [
        f"{path.relative_to(TEMPLATE)}: {match}"
        for path in TEMPLATE_FILES
        if TEMPLATE in path.parents
        for match in re.findall(r"\bT\d\d\b|TRICKS\.md", path.read_text())
    ]
    assert not cited, cited


def test_the_readme_gives_the_matrixs_counts_as_the_suite_computes_them():
    """The README's counts of combinations are the matrix's own, so that a new prompt cannot leave them stale."""
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    total, accepted, refused = len(ACCEPTED) + len(REJECTED), len(ACCEPTED), len(REJECTED)
    assert (
        f"every combination of the boolean prompts ({total:,} today, of which the pre-generation hook accepts "
        f"{accepted};" in readme
    )
    assert f"(every accepted combination, {accepted} today," in readme
    assert f"distributed training: {refused} today)" in readme


FAKE_PYTHON = """#!/bin/sh
echo "$*" >> "$CALLS"
case "$*" in
    *urlopen*) exit "$INDEX_DOWN" ;;  # the CPU wheels' index, reachable or not
    "-c import torch") exit 1 ;;  # no torch yet
esac
"""


@pytest.mark.parametrize(
    ("machine", "gpu", "index_down", "cpu_wheels"),
    [("Linux", False, 0, True), ("Linux", False, 1, False), ("Linux", True, 0, False), ("Darwin", False, 0, False)],
)
def test_setup_installs_the_cpu_wheels_on_linux_without_a_gpu_where_their_index_answers(
    tmp_path, machine, gpu, index_down, cpu_wheels
):
    """scripts/setup.sh (demo.sh and test.sh source it) against a stand-in for .venv's python that logs its calls:
    PyPI's torch for Linux is the 5 GB CUDA build, which a machine without an NVIDIA GPU cannot use."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_text((ROOT / "scripts" / "setup.sh").read_text())
    tools = tmp_path / "bin"
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    tools.mkdir()
    for name, text in {".venv/bin/python": FAKE_PYTHON, "bin/uname": f"#!/bin/sh\necho {machine}\n"}.items():
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    if gpu:
        (tools / "nvidia-smi").write_text("#!/bin/sh\n")
        (tools / "nvidia-smi").chmod(0o755)
    (tools / "dirname").symlink_to(shutil.which("dirname"))
    env = {"PATH": str(tools), "CALLS": str(tmp_path / "calls"), "INDEX_DOWN": str(index_down)}
    done = subprocess.run(
        [shutil.which("bash"), "-c", "source scripts/setup.sh"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    cpu = "-m pip install --quiet torch torchvision --index-url https://download.pytorch.org/whl/cpu"
    assert (cpu in calls) == cpu_wheels, calls
    assert "-m pip install --quiet --group dev" in calls  # then the rest, torch from there if not yet installed
    assert ("is unreachable" in done.stdout) == (machine == "Linux" and not gpu and index_down == 1), done.stdout
