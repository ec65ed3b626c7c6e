"""Remove the files of features that are off, from one declarative table.

Standard library only. Paths are relative to the generated project; `{package}` is src/<package_name>.
The template's tests read this table too, to check that each file exists exactly when its feature is on.
"""

import json
from pathlib import Path

CTX = json.loads(r"""{{ cookiecutter | tojson }}""")

# feature (a boolean answer) -> files that exist only when it is on
FEATURE_FILES = {
    "use_amp": ["{package}/amp.py", "tests/test_amp.py"],
    "use_distributed": ["{package}/distributed.py", "tests/test_distributed.py"],
    "use_sync_bn": ["{package}/sync_bn.py", "tests/test_sync_bn.py"],
    "use_freezing": ["{package}/freezing.py", "tests/test_freezing.py"],
    "use_layerwise_lr": ["tests/test_layerwise_lr.py"],
    "use_mixup": ["{package}/mixup.py", "tests/test_mixup.py"],
    "use_label_smoothing": ["tests/test_label_smoothing.py"],
    "use_grad_clipping": ["tests/test_grad_clipping.py"],
    "use_checkpointing": ["{package}/checkpoint.py", "tests/test_checkpoint.py"],
    "use_tensorboard": ["{package}/tensorboard_log.py", "tests/test_tensorboard.py"],
    "use_ema": ["{package}/ema.py", "tests/test_ema.py"],
}


# keys that describe this machine or tool (paths, cruft's template commit), not the answers
LOCAL_KEYS = {"_template", "_output_dir", "_repo_dir", "_checkout", "_commit", "__prompts__"}


def write_answers(package: Path) -> None:
    """The answers as a replay file: `cookiecutter --replay-file .cookiecutter.json <template>` renders this
    repo again. A copy inside the package goes into every run folder."""
    answers = {key: value for key, value in CTX.items() if key not in LOCAL_KEYS}
    text = json.dumps({"cookiecutter": answers}, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    for path in (Path(".cookiecutter.json"), package / "answers.json"):
        path.write_text(text, encoding="utf-8")


def main() -> None:
    package = Path("src", CTX["package_name"])
    write_answers(package)
    for feature, paths in FEATURE_FILES.items():
        if CTX[feature]:
            continue
        for path in paths:
            Path(path.format(package=package)).unlink()  # a missing file is a bug in this table: fail loudly


if __name__ == "__main__":
    main()
