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


TRICK_FILES, TRICK_OPTIONS, TRICK_SECTIONS = "<!-- trick files -->", "<!-- trick options -->", "<!-- trick sections -->"


def _flag_row(item: ast.AnnAssign) -> str:
    """A README row of the Options table from one field of a trick's Options: `name: type = option(default, help,
    ...)`."""
    call, name = item.value, "--" + item.target.id.replace("_", "-")
    default, help_text = (_value(arg) for arg in call.args[:2])
    metavar = next((_value(kw.value) for kw in call.keywords if kw.arg == "metavar"), None)
    if ast.unparse(item.annotation).startswith("bool"):
        flag, shown = f"`{name}` / `--no-{name[2:]}`", "on" if default else "off"
    else:
        flag = f"`{name} {metavar}...`" if metavar else f"`{name}`"
        shown = f"`{default}`" if default is not None else "auto" if "auto" in str(help_text) else "none"
    return f"| {flag} | {shown} | {help_text} |"


def _value(node: ast.expr):
    """A literal as its value; anything else (a name, an f-string) as its source text."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)


def write_trick_docs(package: Path, readme: Path) -> None:
    """The README's lines on each trick, from the trick modules this render kept (tricks/*.py): its files in the run
    folder (FILES), its flags (the fields of its Options) and its section (its docstring: a title line, whose words
    before the colon head the section, then the text)."""
    files, options, sections = [], [], []
    for module in sorted((package / "tricks").glob("[!_]*.py")):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        title, _, text = (ast.get_docstring(tree) or module.stem).partition("\n\n")
        sections.append(f"### {title.partition(':')[0]}\n\n{text.strip()}\n")  # the title's words before its colon
        for node in tree.body:
            if isinstance(node, ast.Assign) and [getattr(target, "id", "") for target in node.targets] == ["FILES"]:
                files += [f"| `{name}` | {what} |" for name, what in ast.literal_eval(node.value).items()]
            elif isinstance(node, ast.ClassDef) and node.name == "Options":
                options += [_flag_row(item) for item in node.body if isinstance(item, ast.AnnAssign)]
    text = readme.read_text(encoding="utf-8")
    for marker, lines in ((TRICK_FILES, files), (TRICK_OPTIONS, options), (TRICK_SECTIONS, sections)):
        text = text.replace(marker + "\n", "".join(line + "\n" for line in lines))
    readme.write_text(text, encoding="utf-8")


def main() -> None:
    package = Path("src", CTX["package_name"])
    write_answers(package)
    files = template_files()
    for path in files:
        if path.is_file() and not path.read_bytes().strip():
            path.unlink()
    # a folder left empty by those removals (scripts/ without distributed training) goes too, deepest first
    for folder in sorted({parent for path in files for parent in path.parents if parent.parts}, reverse=True):
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    write_trick_docs(package, Path("README.md"))
    write_code_map(package, Path("README.md"))
    print(next_steps())
    if CTX["use_amp"] and CTX["gpu_ids"].strip().lower() in ("cpu", "none"):
        print("Note: a CPU without bf16 instructions (AVX2 and older) trains in fp32, saying so: bf16 is ~8x slower.")


if __name__ == "__main__":
    main()
