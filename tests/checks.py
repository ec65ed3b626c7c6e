"""Static checks of a render: no leftover Jinja, files that parse, imports that resolve, and ruff."""

import ast
import functools
import hashlib
import re
import subprocess
from pathlib import Path

import yaml
from render import package_of
from ruff.__main__ import find_ruff_bin

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

RUFF = find_ruff_bin()  # the binary itself: no Python start-up per check
LEFTOVER_JINJA = ("{{", "}}", "{%", "%}", "cookiecutter.")
PLUGIN_PACKAGES = ("tricks", "config")  # sub-packages whose __init__.py imports every module it finds beside it


def assert_valid_files(project: Path) -> None:
    """No empty folder; no leftover Jinja in any file; every Python file parses and its imports of the package resolve;
    every TOML and YAML file parses."""
    facts = {}
    for path in project.rglob("*"):
        assert not path.is_dir() or any(path.iterdir()), f"{path} is an empty folder"
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
    imports = tuple((node.level, node.module, tuple(a.name for a in node.names)) for node in _from_imports(tree))
    return imports, frozenset(_top_level_names(tree))


def _from_imports(node: ast.AST):
    """The `from ... import` statements in a tree, at any depth. Statements only hold statements in these fields, so
    the walk skips every expression (ast.walk visits them all: 3 times as long)."""
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(node, field, ()):
            if isinstance(child, ast.ImportFrom):
                yield child
            else:
                yield from _from_imports(child)


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level, in a top-level `with`, `if` or `try` block too (an import made
    inside `warnings.catch_warnings()`, say)."""
    names, body = set(), list(tree.body)
    for node in body:
        if isinstance(node, ast.With | ast.If | ast.Try):
            body += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            body += [statement for handler in getattr(node, "handlers", []) for statement in handler.body]
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _dotted(source: Path, path: Path) -> str:
    """A module's dotted name inside the package: "config" for config.py, "core" for core/__init__.py."""
    parts = path.relative_to(source).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(source: Path, path: Path, level: int, module: str | None, names: tuple, package: str):
    """The package's modules one `from ... import names` statement of `path` reaches, each with the names it takes
    from that module (none for a name that is a module of its own): (dotted module, names) pairs; none for an import
    from elsewhere."""
    if level == 0:
        if not module or module.split(".")[0] != package:
            return []
        base = module.partition(".")[2]
    else:
        here = _dotted(source, path).split(".") if path.name == "__init__.py" else _dotted(source, path).split(".")[:-1]
        here = [part for part in here if part]
        if level - 1 > len(here):
            return [("(above the package)", names)]  # Python refuses it: beyond the top-level package
        base = ".".join([*here[: len(here) - (level - 1)], *([module] if module else [])])
    return [(base, names)]


def assert_imports_resolve(project: Path, facts: dict[Path, tuple]) -> None:
    """Independently of the registry of tricks (tests/tricks.py): every import of the package (relative in src/,
    absolute in tests/) names a module the render has and a name that module defines, and every module is imported
    somewhere. A render that lost a needed file, or kept a file of a feature that is off, fails here."""
    package = package_of(project)
    source = project / "src" / package
    modules = {_dotted(source, path): names for path, (_, names) in facts.items() if source in path.parents}
    imported = set()
    for path, (imports, _) in facts.items():
        for level, from_module, names in imports:
            for base, taken in _targets(source, path, level, from_module, names, package):
                where = path.relative_to(project)
                assert base in modules, f"{where}: no module {package}.{base}".rstrip(".")
                imported.add(base)
                for name in taken:
                    submodule = f"{base}.{name}".lstrip(".")
                    if submodule in modules:
                        imported.add(submodule)
                    else:
                        assert name in modules[base], f"{path}: {package}.{base} lacks {name}".replace(". ", " ")
    packages = {_dotted(source, path) for path in facts if source in path.parents and path.name == "__init__.py"}
    # tricks/__init__.py and config/__init__.py import each module they find beside them
    discovered = {name for name in modules if name.partition(".")[0] in PLUGIN_PACKAGES and "." in name}
    orphans = set(modules) - imported - discovered - packages - {"__main__"}
    assert not orphans, f"modules nothing imports (left over?): {sorted(orphans)}"


def code_run_by(project: Path, test: Path) -> str:
    """What a generated test file runs, as a SHA-256 digest: its text, the conftest and pytest settings beside it, and
    every module of the package it imports, directly or through the modules it imports. Two renders whose file has the
    same digest would run the same tests on the same code."""
    package = package_of(project)
    source, seen, todo = project / "src" / package, set(), [test, project / "tests" / "conftest.py"]
    while todo:
        path = todo.pop()
        imports, _ = _file_facts(".py", path.read_text())
        for level, module, names in imports:
            context = path if source in path.parents else source / "__init__.py"
            for base, taken in _targets(
                source, context, level if source in path.parents else 0, module, names, package
            ):
                for dotted in (base, *(f"{base}.{name}".lstrip(".") for name in taken)):
                    stem = source / dotted.replace(".", "/") if dotted else source / "__init__"
                    for found in (stem.with_suffix(".py"), stem / "__init__.py"):
                        # tricks/__init__.py and config/__init__.py import every module they find beside them
                        plugins = {source / name / "__init__.py" for name in PLUGIN_PACKAGES}
                        beside = sorted(found.parent.glob("[!_]*.py")) if found in plugins else []
                        for module in [found, *beside]:
                            if module.is_file() and module not in seen:
                                seen.add(module)
                                todo.append(module)
    digest = hashlib.sha256()
    for path in [test, project / "tests" / "conftest.py", project / "pyproject.toml", *sorted(seen)]:
        digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def assert_ruff_clean(*projects: Path) -> None:
    """ruff check and ruff format --check, each project under its own pyproject settings, in one run."""
    for command in (["check", "--no-cache", "--quiet"], ["format", "--no-cache", "--check", "--quiet"]):
        done = subprocess.run([RUFF, *command, *map(str, projects)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
