"""Refuse bad answers before anything is written: one `ERROR:` line, exit status 1.

A project_slug that is no plain folder name is refused earlier, where the folder name is rendered
(local_extensions.folder_name): cookiecutter creates that folder before this hook runs.

Standard library only: hooks run with cookiecutter's own interpreter. The answers arrive as JSON data,
never pasted into code, so any text is safe here.
"""

import json
import keyword
import re
import sys

CTX = json.loads(r"""{{ cookiecutter | tojson }}""")
# The template's own options (local_extensions): a replay file or --extra-context can set any value.
CHOICES = json.loads(r"""{{ template_choices | tojson }}""")

# Names a generated package must not take: importing it would shadow the real module.
DEPENDENCIES = {"torch", "torchvision", "torchinfo", "tqdm", "yaml", "numpy", "PIL", "pytest", "setuptools"}
SHADOWED = set(sys.stdlib_module_names) | DEPENDENCIES | {"test", "tests", "src"}
SLUG = re.compile(r"[a-z][a-z0-9]*([-_][a-z0-9]+)*")
PACKAGE = re.compile(r"[a-z_][a-z0-9_]*")
GPU_IDS = re.compile(r"\d+(,\d+)*")


def problems(ctx: dict):
    """Yield one sentence per bad answer: what is wrong and how to fix it."""
    for key, options in CHOICES.items():
        if ctx.get(key) not in options:
            yield f"{key} {str(ctx.get(key))[:60]!r} is not one of the choices: {', '.join(options)}; pick one of them"
    if not ctx["project_name"].strip():
        yield "project_name is empty; give the project a name, e.g. 'Flower Classifier'"
    slug = ctx["project_slug"]
    if not SLUG.fullmatch(slug):
        yield (
            f"project_slug {slug!r} (the folder name, derived from the project name unless given) must be "
            "lower-case letters, digits and single - or _ separators, starting with a letter; e.g. 'flower-classifier'"
        )
    package = ctx["package_name"]
    if not PACKAGE.fullmatch(package) or keyword.iskeyword(package):
        yield f"package_name {package!r} is not a lower-case Python identifier; e.g. 'flower_classifier'"
    elif len(package) > 40:
        yield f"package_name {package!r} is longer than 40 characters; it must be at most 40 characters"
    elif package in SHADOWED:
        yield f"package_name {package!r} would shadow the module of that name; pick another, e.g. '{package}_cls'"
    gpu_ids = ctx["gpu_ids"].replace(" ", "")
    if gpu_ids.lower() in ("cpu", "none"):
        pass  # CPU only, as an empty answer
    elif gpu_ids and not GPU_IDS.fullmatch(gpu_ids):
        yield f"gpu_ids {ctx['gpu_ids']!r} must be comma-separated GPU numbers such as '0' or '0,1', or cpu"
    elif gpu_ids and len(set(gpu_ids.split(","))) < len(gpu_ids.split(",")):
        yield f"gpu_ids {ctx['gpu_ids']!r} lists a GPU twice; list each id once"
    if ctx["use_sync_bn"] and not ctx["use_distributed"]:
        yield (
            "use_sync_bn synchronises BatchNorm across the processes of a multi-GPU job, so it needs "
            "use_distributed; answer yes to use_distributed or no to use_sync_bn"
        )


def main() -> int:
    problem = next(problems(CTX), None)  # the first problem only: one line to read and fix
    if problem:
        print(f"ERROR: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
