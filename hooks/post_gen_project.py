"""Remove the files of features that are off, map the modules left in the README; then say what to type next.

Standard library only. A file that belongs to one feature sits wholly inside that feature's Jinja `if` block, so it
renders empty when the feature is off: each of the template's files that rendered to nothing is removed (files that
were here before, on a render over an existing project, are left alone). The template's tests list each feature's
files (tests/tricks.py) and check that each exists exactly when its feature is on.
"""

import ast
import json
import os
import re
import shlex
from pathlib import Path

CTX = json.loads(r"""{{ cookiecutter | tojson }}""")
TEMPLATE_DIR = Path(json.loads(r"""[{{ template_dir | tojson }}]""")[0])  # absolute, wherever cookiecutter ran


# keys that describe this machine or tool (paths, cruft's template commit), not the answers
LOCAL_KEYS = {"_template", "_output_dir", "_repo_dir", "_checkout", "_commit", "__prompts__"}


def write_answers(package: Path) -> None:
    """The answers as a replay file: `cookiecutter --replay-file .cookiecutter.json <template>` renders this
    repo again. A copy inside the package goes into every run folder."""
    answers = {key: value for key, value in CTX.items() if key not in LOCAL_KEYS}
    text = json.dumps({"cookiecutter": answers}, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    for path in (Path(".cookiecutter.json"), package / "answers.json"):
        path.write_text(text, encoding="utf-8")


def next_steps() -> str:
    """What to type next, printed after a render. This hook runs inside the new folder: `cd <slug>` when the
    shell's folder ($PWD) is the one it was created in, its full path otherwise."""
    here, shell = Path.cwd(), os.environ.get("PWD")
    folder = here.name if shell and Path(shell).resolve() == here.parent.resolve() else shlex.quote(str(here))
    return (
        f'Next: cd {folder} && pip install -e ".[dev]" && {CTX["project_slug"]} train\n'
        "On a CPU-only machine, `pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu` "
        "first avoids the 5 GB CUDA build."
    )


VARIABLE = re.compile(r"\{\{\s*cookiecutter\.(\w+)\s*\}\}")  # in the template's folder and file names


def template_files() -> list[Path]:
    """This render's paths of the files in the template's project folder (its names' variables filled in)."""
    template = next(path for path in TEMPLATE_DIR.iterdir() if path.is_dir() and "cookiecutter." in path.name)
    return [
        Path(*(VARIABLE.sub(lambda match: CTX[match.group(1)], part) for part in file.relative_to(template).parts))
        for file in sorted(template.rglob("*"))
        if file.is_file()
    ]


CODE_MAP = "<!-- code map -->"


def write_code_map(package: Path, readme: Path) -> None:
    """The README's map of the package, from the sub-packages and modules this render kept: each with the first
    sentence of its docstring."""
    rows = ["| module | what it does |", "|---|---|"]
    sub_packages = {path.parent.relative_to(package).as_posix() + "/": path for path in package.glob("*/__init__.py")}
    modules = {path.relative_to(package).as_posix(): path for path in package.rglob("*.py") if path.name[0] != "_"}
    for name, module in sorted((sub_packages | modules).items()):  # a sub-package's row before its modules'
        docstring = " ".join((ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or "").split())
        first_sentence = docstring.split(". ")[0].removesuffix(".").replace("|", "\\|")  # a bare | would end the cell
        rows.append(f"| `{name}` | {first_sentence} |")
    readme.write_text(readme.read_text(encoding="utf-8").replace(CODE_MAP, "\n".join(rows)), encoding="utf-8")


def main() -> None:
    package = Path("src", CTX["package_name"])
    write_answers(package)
    files = template_files()
    for path in files:
        if path.is_file() and not path.read_bytes().strip():
            path.unlink()
    # a sub-package left with its __init__.py alone (tricks/ with every trick off) goes too, as does a folder left
    # empty by those removals (scripts/ without distributed training), deepest first
    for init in sorted(package.glob("*/__init__.py")):
        if init in files and [path.name for path in init.parent.iterdir()] == ["__init__.py"]:
            init.unlink()
    for folder in sorted({parent for path in files for parent in path.parents if parent.parts}, reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    write_code_map(package, Path("README.md"))
    print(next_steps())
    if CTX["use_amp"] and CTX["gpu_ids"].strip().lower() in ("cpu", "none"):
        print("Note: a CPU without bf16 instructions (AVX2 and older) trains in fp32, saying so: bf16 is ~8x slower.")


if __name__ == "__main__":
    main()
