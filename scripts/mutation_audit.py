"""Helper of scripts/mutation-audit.sh: mutmut configuration, mutant listing and sampling, and the result table.

Pinned to mutmut 3.8.1 (its `.meta` files and its mutant generator are read directly).

    mutation_audit.py configure PYPROJECT PACKAGE MODULE TEST_ARG...   append a [tool.mutmut] table for one module
    mutation_audit.py names RENDER PACKAGE MODULE                      print every mutant name of the module
    mutation_audit.py sample RENDER PACKAGE N SEED MODULE...           print "MODULE NAME" for a seeded sample of N
    mutation_audit.py table WORKDIR PACKAGE OUTFILE MIN_KILLED [SAMPLEFILE]
                                                                      print and write the table; exit 1 below MIN_KILLED
"""

import json
import os
import random
import sys
from collections import Counter
from pathlib import Path

# mutmut's exit-code classes (mutmut/stats.py, 3.8.1), folded into the table's columns
STATUS = {
    1: "killed",
    3: "killed",
    0: "survived",
    36: "timeout",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    35: "suspicious",
    37: "killed",  # caught by a type checker (none is configured here)
    -11: "crashed",
    -9: "crashed",
    None: "not checked",
}


def module_file(root: str | Path, package: str, module: str) -> Path:
    """src/<package>/<sub-package>/<module>.py (or <module>/__init__.py, a package's), relative to the render: the
    module of that name wherever it lives."""
    (path,) = [
        *Path(root, "src", package).glob(f"**/{module}.py"),
        *Path(root, "src", package).glob(f"{module}/__init__.py"),
    ]
    return path.relative_to(root)


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def configure(pyproject: str, package: str, module: str, *tests: str) -> None:
    """One module per render copy: mutmut 3 keeps one configuration (and one result cache) per folder."""
    source = module_file(Path(pyproject).parent, package, module).as_posix()
    table = f"""

[tool.mutmut]
source_paths = ["src"]                               # the whole package is copied, so imports keep working
only_mutate = ["{source}"]          # ... but only this module gets mutants
pytest_add_cli_args_test_selection = {toml_list(list(tests))}
pytest_add_cli_args = ["-p", "no:cacheprovider"]
timeout_multiplier = 4.0                             # wall limit per mutant: (tests' time + 3 s) x 4
timeout_constant = 3.0
use_git_change_detection = false
"""
    with open(pyproject, "a") as file:
        file.write(table)


def names(render: str, package: str, module: str) -> list[str]:
    """The mutants mutmut generates for the module, named as `mutmut run` and `mutmut show` take them."""
    from mutmut.mutation.file_mutation import mutate_file_contents
    from mutmut.utils.format_utils import get_mutant_name

    os.chdir(render)  # mutmut's generator reads its configuration (here: none, so it finds src/) from the cwd
    relative = module_file(".", package, module)
    source = relative.read_text()
    return [get_mutant_name(relative, name) for name in mutate_file_contents(str(relative), source).mutant_names]


def sample(render: str, package: str, count: str, seed: str, *modules: str) -> None:
    pool = [(module, name) for module in modules for name in names(render, package, module)]
    chosen = random.Random(int(seed)).sample(pool, min(int(count), len(pool)))
    for module, name in sorted(chosen):
        print(module, name)


def table(workdir: str, package: str, outfile: str, min_killed: str, samplefile: str = "") -> int:
    """One row per module folder run; with a sample file only the sampled mutants count."""
    work = Path(workdir)
    wanted: dict[str, set[str]] | None = None
    if samplefile:
        wanted = {}
        for line in Path(samplefile).read_text().split("\n"):
            if line.strip():
                module, name = line.split()
                wanted.setdefault(module, set()).add(name)
    seconds = {}
    if (work / "seconds.txt").exists():
        for line in (work / "seconds.txt").read_text().split("\n"):
            if line.strip():
                module, value = line.split()
                seconds[module] = int(value)
    header = "| module | mutants | killed | survived | timeout | suspicious | no tests | killed share | seconds |"
    lines = [header, "|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    total: Counter = Counter()
    survivors = []
    for module in seconds:
        copy = work / f"mod-{module}"
        meta = copy / "mutants" / f"{module_file(copy, package, module)}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        if wanted is not None:
            codes = {name: code for name, code in codes.items() if name in wanted.get(module, set())}
        counts = Counter(STATUS.get(code, "suspicious") for code in codes.values())
        counts["mutants"] = len(codes)
        total.update(counts)
        survivors += [name for name, code in codes.items() if STATUS.get(code) == "survived"]
        lines.append(row(module, counts, seconds[module]))
    lines.append(row("**total**", total, sum(seconds.values())))
    text = "\n".join(lines) + "\n"
    print(text)
    Path(outfile).write_text(text)
    (work / "survivors.txt").write_text("".join(name + "\n" for name in survivors))
    share = 100 * total["killed"] / max(total["mutants"], 1)
    if share < float(min_killed):
        print(f"killed share {share:.1f}% is below the threshold {min_killed}%", file=sys.stderr)
        return 1
    return 0


def row(module: str, counts: Counter, seconds: int) -> str:
    share = 100 * counts["killed"] / max(counts["mutants"], 1)
    cells = [counts[key] for key in ("mutants", "killed", "survived", "timeout", "suspicious", "no tests")]
    others = counts["mutants"] - sum(cells[1:])  # crashed, skipped or not checked: never hidden
    extra = f" (+{others} other)" if others else ""
    return f"| {module} | " + " | ".join(map(str, cells)) + f"{extra} | {share:.1f}% | {seconds} |"


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    if command == "configure":
        configure(*arguments)
    elif command == "dotted":  # RENDER PACKAGE MODULE: the module's dotted name, as mutmut's mutant names start
        print(".".join(part for part in module_file(*arguments).with_suffix("").parts[1:] if part != "__init__"))
    elif command == "names":
        print("\n".join(names(*arguments)))
    elif command == "sample":
        sample(*arguments)
    elif command == "table":
        sys.exit(table(*arguments))
    else:
        sys.exit(f"unknown command {command}")
