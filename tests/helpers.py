"""Helpers for the template's tests: baking renders and running what they contain."""

import ast
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from ruff.__main__ import find_ruff_bin

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # noqa: F401 (re-exported for the tests)

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "{{cookiecutter.project_slug|folder_name}}"
GENERATED_TESTS = TEMPLATE / "tests"
CONTEXT = json.loads((ROOT / "cookiecutter.json").read_text())
SYSTEM_TEMP = Path(tempfile.gettempdir())  # read before conftest redirects this process's temp dir
RUFF = find_ruff_bin()  # the binary itself: no Python start-up per check
CHOICES = {key: value for key, value in CONTEXT.items() if isinstance(value, list) and not key.startswith("_")}


def bake(cookies, **answers):
    """Render with the given answers; unknown keys would be silently ignored by cookiecutter."""
    unknown = set(answers) - set(CONTEXT)
    assert not unknown, f"not in cookiecutter.json: {unknown}"
    return cookies.bake(extra_context=answers)


def baked_project(cookies, **answers) -> Path:
    result = bake(cookies, **answers)
    assert result.exit_code == 0, result.exception
    return Path(result.project_path)


def run_in(project: Path, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
    """Run `python args...` inside a rendered project with its src/ importable, as a user would."""
    env = {**os.environ, "PYTHONPATH": str(project / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, *args], cwd=project, env=env, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert done.returncode == 0, f"{args} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def own_pytest_run() -> list[str]:
    """pytest options for running a render's own suite: no cache, and a temp root of its own. By default every
    pytest run of a user shares /tmp/pytest-of-<user> and deletes all but its 3 newest folders, so generated
    suites running side by side deleted each other's tmp_path mid-test (a two-rank test then waited forever for
    its deleted store file: the all-on suite's 600 s timeout in CI)."""
    # --timeout: a case that hangs fails with the stack where it hangs, instead of timing out the whole suite
    return ["-p", "no:cacheprovider", "--basetemp", tempfile.mkdtemp(prefix="suite-"), "--timeout", "300"]


def epochs_trained(output: str) -> list[int]:
    """The epochs a run printed a result line for ("epoch 3  train_loss ..."): a resumed run must print
    exactly those after its checkpoint's epoch, which tells a resume from a restart that reproduces it."""
    return [int(line.split()[1]) for line in output.splitlines() if line.startswith("epoch ") and line[6:7].isdigit()]


LEFTOVER_JINJA = ("{{", "}}", "{%", "%}", "cookiecutter.")


def assert_valid_files(project: Path) -> None:
    """No leftover Jinja in any file; every Python file parses and its imports of the package resolve;
    every TOML and YAML file parses."""
    facts = {}
    for path in project.rglob("*"):
        if path.is_file():
            text = path.read_text()
            if ".github" in path.parts:  # GitHub's own ${{ expressions }} are copied without rendering
                text = re.sub(r"\$\{\{[^{}]*\}\}", "", text)
            text = text.replace(".cookiecutter.json", "")  # the answers file's name is not a leftover
            assert not [token for token in LEFTOVER_JINJA if token in text], path
            try:
                found = _file_facts(path.suffix, text)
            except Exception as exc:  # noqa: BLE001 (any parse error fails the render, named)
                raise AssertionError(f"{path}: {exc}") from exc
            if found is not None:
                facts[path] = found
    assert_imports_resolve(project, facts)


@functools.lru_cache(maxsize=4096)
def _file_facts(suffix: str, text: str) -> tuple | None:
    """Parse one file; for Python, what resolving imports needs: (its imports from modules, its top-level names).
    Cached by content: across the matrix most files repeat word for word, so each distinct text parses once."""
    if suffix == ".toml":
        tomllib.loads(text)
    elif suffix in (".yaml", ".yml"):
        yaml.safe_load(text)
    if suffix != ".py":
        return None
    tree = ast.parse(text)  # what else the compiler would refuse, ruff reports: every render is ruffed too
    imports = tuple(
        (node.level, node.module, tuple(alias.name for alias in node.names))
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    )
    return imports, frozenset(_top_level_names(tree))


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def assert_imports_resolve(project: Path, facts: dict[Path, tuple]) -> None:
    """Independently of the hook's table: every import of the package (relative in src/, absolute in tests/)
    names a module the render has and a name that module defines, and every module is imported somewhere.
    A table that deleted a needed file, or kept a file of a feature that is off, fails here."""
    package = package_of(project)
    modules = {path.stem: names for path, (_, names) in facts.items() if path.parent == project / "src" / package}
    imported = set()
    for path, (imports, _) in facts.items():
        for level, from_module, names in imports:
            if level == 1:
                module = from_module or ""
            elif level == 0 and from_module and from_module.split(".")[0] == package:
                module = from_module.partition(".")[2]
            else:
                continue
            for name in names:
                if module:
                    assert module in modules, f"{path.relative_to(project)}: no module {package}.{module}"
                    assert name in modules[module], f"{path}: {module} lacks {name}"
                    imported.add(module)
                else:
                    assert name in modules, f"{path.relative_to(project)}: no module {package}.{name}"
                    imported.add(name)
    orphans = set(modules) - imported - {"__init__", "__main__"}
    assert not orphans, f"modules nothing imports (left over?): {sorted(orphans)}"


def assert_ruff_clean(*projects: Path) -> None:
    """ruff check and ruff format --check, each project under its own pyproject settings, in one run."""
    for command in (["check", "--no-cache", "--quiet"], ["format", "--no-cache", "--check", "--quiet"]):
        done = subprocess.run([RUFF, *command, *map(str, projects)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr


def package_of(project: Path) -> str:
    return next(path.parent.name for path in (project / "src").glob("*/__init__.py"))


def last_output_dir(cookies) -> Path:
    """pytest-cookies bakes into <root>/bakeNN, one new folder per bake."""
    return Path(str(cookies._output_factory.__self__)) / f"bake{cookies._counter - 1:02d}"


TRICKS = sorted(key for key, value in CONTEXT.items() if isinstance(value, bool))

# What each trick adds: words that must appear in a render exactly when it is on (case-insensitive),
# the config keys it adds, and the train flags that exercise it in a smoke run.
TRACES = {
    "use_amp": ["autocast", "gradscaler", "--precision"],
    "use_distributed": ["torchrun", "distributeddataparallel", "--nproc"],
    "use_sync_bn": ["syncbatchnorm", "sync_bn", "sync-bn"],
    "use_freezing": ["freeze", "frozen"],
    "use_layerwise_lr": ["lr_mult", "lr-mult", "layer-wise"],
    "use_mixup": ["mixup", "cutmix"],
    "use_label_smoothing": ["label_smoothing", "label-smoothing", "label smoothing"],
    "use_grad_clipping": ["clip_grad", "clip-grad", "grad_norm"],
    "use_checkpointing": ["last.pt", "best.pt", "resume"],
    "use_tensorboard": ["tensorboard", "summarywriter"],
    "use_ema": ["averagedmodel", "ema_decay", "ema-decay", "ema.pt"],
}
CONFIG_KEYS = {
    "use_amp": ["precision"],
    "use_distributed": ["nproc", "dist_timeout"],
    "use_sync_bn": ["sync_bn"],
    "use_freezing": ["freeze"],
    "use_layerwise_lr": ["lr_mult"],
    "use_mixup": ["mixup_alpha", "cutmix_alpha", "cutmix_prob"],
    "use_label_smoothing": ["label_smoothing"],
    "use_grad_clipping": ["clip_grad_norm", "clip_grad_norm_type"],
    "use_checkpointing": [],  # --resume is a flag of one command: config.yaml never keeps it
    "use_tensorboard": ["tensorboard"],
    "use_ema": ["ema_decay"],
}
# Per model: a real module to freeze and the head that gets a learning-rate multiplier.
MODEL_PARTS = {
    "small_cnn": ("features.0", "fc"),
    "resnet18": ("layer1", "fc"),
    "mobilenet_v3_small": ("features.0", "classifier"),
    "efficientnet_b0": ("features.0", "classifier"),
}


CLIP = 0.01  # below every smoke run's gradient norm: each step is visibly clipped to it
SMOOTHING = 0.1


def smoke_flags(tricks, model: str) -> list[str]:
    """Train flags that switch every chosen trick on for real."""
    frozen, head = MODEL_PARTS[model]
    flags = {
        "use_amp": [],  # the render's own default precision
        "use_distributed": [],  # the smoke runs join a one-process group (see smoke_child)
        "use_sync_bn": ["--sync-bn"],
        "use_freezing": ["--freeze", frozen],
        "use_layerwise_lr": ["--lr-mult", f"{head}=10"],
        "use_mixup": ["--mixup-alpha", "0.4", "--cutmix-alpha", "1.0"],
        "use_label_smoothing": ["--label-smoothing", str(SMOOTHING)],
        "use_grad_clipping": ["--clip-grad-norm", str(CLIP)],
        "use_checkpointing": [],
        "use_tensorboard": [],  # on by default when the prompt put it in
        "use_ema": ["--ema-decay", "0.9"],
    }
    return [flag for trick in tricks for flag in flags[trick]]


# Answers that a trick needs from other prompts.
REQUIRES = {"use_sync_bn": "use_distributed"}


def with_requirements(tricks_on) -> list[str]:
    """The tricks plus those they need (SyncBN needs distributed training)."""
    return sorted({*tricks_on, *(REQUIRES[t] for t in tricks_on if t in REQUIRES)})


def answers_for(tricks_on) -> dict:
    return {trick: trick in with_requirements(tricks_on) for trick in TRICKS}


def feature_files() -> dict[str, list[str]]:
    """The post-generation hook's table, read from its source: one truth for which files belong to what."""
    source = (ROOT / "hooks" / "post_gen_project.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and node.targets[0].id == "FEATURE_FILES":
            return ast.literal_eval(node.value)
    raise AssertionError("FEATURE_FILES not found in post_gen_project.py")
