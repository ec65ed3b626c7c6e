"""How a configuration field is declared (its default, and the help and argparse settings of its flag), and how the
packages of plug-in modules (config/, tricks/) find theirs."""

import importlib
import pkgutil
from dataclasses import field


def option(default, help, **argparse_kwargs):
    return field(default=default, metadata={"help": help, **argparse_kwargs})


def plugin_modules(package: str, path, needs: tuple[str, ...], what: str) -> list:
    """The modules of a package, by name, each with the attributes it `needs`; a helper module's name starts with _."""
    modules = []
    for found in pkgutil.iter_modules(path):
        if not found.name.startswith("_"):
            module = importlib.import_module(f"{package}.{found.name}")
            lacking = [name for name in needs if not hasattr(module, name)]
            if lacking:  # one line, even for --help: the module is the project's own code
                where = f"src/{package.replace('.', '/')}/{found.name}.py"
                raise SystemExit(
                    f"error: {where} has no {' and no '.join(lacking)}; {what} needs {' and '.join(needs)} (see "
                    f"{package.rpartition('.')[2]}/__init__.py), a helper module's name starts with _"
                )
            modules.append(module)
    return modules
