{% if cookiecutter.task == "multi_label" %}
"""Multi-label data: images with any number of the classes (none too), from a CSV or drawn synthetically.

A CSV names each image's classes in a labels column, separated by ";" (`a.png,cat;dog`), or has one column per
class holding 0 or 1 (`path,cat,dog` then `a.png,1,1`). Either becomes layouts' (path, labels, split) rows, the
labels being the image's sorted class names joined by ";" ("" for none). Rows without a split are held out by
iterative stratification, which balances every class at once: one image counts for each of its classes.
"""

import csv
import functools
import math
from pathlib import Path

import torch
from torch.utils.data import Dataset
from torchvision.transforms import v2

from ..core.errors import DataError
from ..core.files import replacing
from .layouts import SPLITS, Row, existing, listed_once

SEPARATOR = ";"  # between the class names of a labels cell, so class names cannot hold it
OTHER_SEPARATORS = (",", "|", "/", "\t")  # what lists are often separated with: refused, not split on
FORMATS = "path,labels[,split] or path,<class>,<class>,...[,split]"
TAG_HUES = {
    "red": (1, 0.2, 0.2),
    "green": (0.2, 1, 0.2),
    "blue": (0.2, 0.2, 1),
    "yellow": (1, 1, 0.2),
    "magenta": (1, 0.2, 1),
}
GREY = (0.5, 0.5, 0.5)  # a quadrant showing no class
SHOWN = 0.4  # the chance that a quadrant shows a class: (1 - 0.4)^4 = 13% of the images show none


def names_of(labels: str) -> list[str]:
    return labels.split(SEPARATOR) if labels else []


def classes_of(rows: list[Row]) -> list[str]:
    return sorted({name for _, labels, _ in rows for name in names_of(labels)})


def read_csv(path: Path, root: Path, need_split: bool = False) -> list[Row]:
    """A CSV in either form, with a split column (train or val) where `need_split` or present. Relative paths resolve
    against `root`; every listed file must exist, listed once. With splits, each class needs a training image."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            columns = reader.fieldnames or []
            class_columns = _class_columns(path, columns, need_split)
            rows, lines, first_listed = [], [], {}
            for record in reader:
                line = reader.line_num  # the file's own line: blank lines and line breaks inside quotes counted
                where = f"{path} line {line}"
                if None in record:  # cells past the last column: most likely class names separated by commas
                    raise DataError(f"{where}: more cells than columns; separate class names with {SEPARATOR}")
                name = (record.get("path") or "").strip()
                if not name:
                    raise DataError(f"{where}: the path is empty; give the image's path or remove the row")
                existing(where, root, name)
                labels = _labels(where, record, class_columns)
                split = (record.get("split") or "").strip() if "split" in columns else None
                if split is not None and split not in SPLITS:
                    raise DataError(f"{where}: split {split!r} must be train or val")
                listed_once(path, root, name, line, first_listed)
                rows.append((name, labels, split))
                lines.append(line)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"cannot read {path} ({exc}); check the file") from None
    if not rows:
        raise DataError(f"{path} lists no images; add rows of {FORMATS}")
    trained = {name for _, labels, split in rows if split == "train" for name in names_of(labels)}
    for (_, labels, split), line in zip(rows, lines, strict=True):
        untrained = [name for name in names_of(labels) if name not in trained]
        if split and untrained:  # a class in val only could never be learned
            raise DataError(
                f"{path} line {line}: class {untrained[0]!r} is in no train row; make one of its images train"
            )
    return rows


def _class_columns(path: Path, columns: list[str], need_split: bool) -> list[tuple[str, str]]:
    """The (column, class name) pairs of the 0/1 form; none where a labels column holds the class names."""
    missing = [name for name in (["path", "split"] if need_split else ["path"]) if name not in columns]
    if missing:
        raise DataError(f"{path} lacks the column(s) {', '.join(missing)}; its first line must name {FORMATS}")
    twice = next((name for i, name in enumerate(columns) if name in columns[:i]), None)
    if twice is not None:
        raise DataError(f"{path} line 1: column {twice!r} appears twice; name each column once")
    if "labels" in columns:
        return []
    pairs = [(column, column.strip()) for column in columns if column not in ("path", "split")]
    if not pairs or "label" in columns:  # a single-label CSV, most likely
        raise DataError(f"{path} line 1: name a labels column (class names separated by ;) or one 0/1 column per class")
    for column, name in pairs:
        if not name or any(char in name for char in (SEPARATOR, *OTHER_SEPARATORS)):
            raise DataError(
                f"{path} line 1: class column {column!r} must be named, without , ; | / or a tab; rename it"
            )
    return pairs


def _labels(where: str, record: dict, class_columns: list[tuple[str, str]]) -> str:
    if class_columns:
        for column, _ in class_columns:
            value = (record.get(column) or "").strip()  # None: a short row
            if value not in ("0", "1"):
                raise DataError(f"{where}: {column} is {value!r}; a class column holds 0 or 1")
        names = [name for column, name in class_columns if record[column].strip() == "1"]
    else:
        cell = (record.get("labels") or "").strip()
        if any(char in cell for char in OTHER_SEPARATORS):
            raise DataError(f"{where}: labels {cell!r}: separate class names with {SEPARATOR}")
        names = [name.strip() for name in cell.split(SEPARATOR)] if cell else []
        if "" in names:
            raise DataError(f"{where}: labels {cell!r} holds an empty class name; remove the extra {SEPARATOR}")
    return SEPARATOR.join(sorted(set(names)))


def hold_out(rows: list[Row], fraction: float, seed: int) -> list[Row]:
    """Iterative stratification (Sechidis, Tsoumakas and Vlahavas, 2011) into train and val, seeded with `seed`.

    The class with the fewest images left goes first: each of its images to the part wanting that class most (then
    wanting images most). A class wants round(fraction x count) images in val as in layouts' hold-out: at least one
    where it has two, none where it has one. An image without labels counts as one of a class of its own, so that
    `fraction` of them goes to val. A class of two images or more left in one part (its images placed for their
    other classes) gets one moved where no class loses its last image of that part; only rare overlaps, such as three
    images labelled a;b, b;c and a;c, cannot be split so."""
    generator = torch.Generator().manual_seed(seed)
    labels = [names_of(label) or [""] for _, label, _ in rows]  # "": no label, a class of its own here
    members: dict[str, list[int]] = {}
    for i in torch.randperm(len(rows), generator=generator).tolist():  # a seeded order within each class
        for name in labels[i]:
            members.setdefault(name, []).append(i)
    names = sorted(members)  # no set or hash order: the same split under any PYTHONHASHSEED
    priority = dict(zip(names, torch.randperm(len(names), generator=generator).tolist(), strict=True))  # ties
    wanted = {}  # images each class still wants in train and in val
    for name in names:
        val = min(max(round(fraction * len(members[name])), 1), len(members[name]) - 1)
        wanted[name] = [len(members[name]) - val, val]
    overall, part = [len(rows) * (1 - fraction), len(rows) * fraction], [None] * len(rows)
    left = {name: len(members[name]) for name in names}  # images not placed yet
    while left:
        name = min(left, key=lambda n: (left[n], priority[n]))
        for i in (i for i in members[name] if part[i] is None):
            want = wanted[name] if wanted[name][0] != wanted[name][1] else overall
            if want[0] != want[1]:
                chosen = int(want[1] > want[0])
            else:
                chosen = int(torch.randint(2, (), generator=generator))
            part[i], overall[chosen] = chosen, overall[chosen] - 1
            for other in labels[i]:
                wanted[other][chosen] -= 1
                left[other] -= 1
        left = {name: count for name, count in left.items() if count}
    count = {name: [0, 0] for name in names}
    for i, chosen in enumerate(part):
        for name in labels[i]:
            count[name][chosen] += 1
    for name in names:
        if len(members[name]) < 2 or 0 not in count[name]:
            continue
        empty = count[name].index(0)
        movable = [i for i in members[name] if all(count[other][1 - empty] > 1 for other in labels[i])]
        if movable:
            part[movable[0]] = empty
            for other in labels[movable[0]]:
                count[other][1 - empty] -= 1
                count[other][empty] += 1
    for name in names:  # last: a class of which no image trains could never be learned (its images placed for others)
        if name and not count[name][0]:
            moved = members[name][0]
            part[moved] = 0
            for other in labels[moved]:
                count[other][1] -= 1
                count[other][0] += 1
    return [(path, label, SPLITS[chosen]) for (path, label, _), chosen in zip(rows, part, strict=True)]


def write_split(path: Path, rows: list[Row]) -> None:
    with replacing(path, "w") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(["path", "labels", "split"])
        writer.writerows(rows)


def multi_hot(rows: list[Row], classes: list[str]) -> torch.Tensor:
    index = {name: i for i, name in enumerate(classes)}
    targets = torch.zeros(len(rows), len(classes))
    for i, (_, labels, _) in enumerate(rows):
        targets[i, [index[name] for name in names_of(labels)]] = 1
    return targets


class MultiLabelFiles(Dataset):
    """The images of one split, loaded with `loader`; targets are multi-hot rows over the sorted class names."""

    def __init__(self, root: Path, rows: list[Row], classes: list[str], loader, transform=None):
        self.targets = multi_hot(rows, classes)
        self.samples = [(str(root / path), target) for (path, _, _), target in zip(rows, self.targets, strict=True)]
        self.classes, self.loader, self.transform = classes, loader, transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        image = self.loader(path)
        return self.transform(image) if self.transform else image, target.clone()  # not a view of all targets


class SyntheticTags(Dataset):
    """Four quadrants, each of coloured stripes (a class, with chance SHOWN) or grey ones; an image's labels are the
    classes it shows, none for 13% of them. Orientation, phase, brightness and noise vary per quadrant; deterministic
    from the seed, uint8 like photos. Self-contained: sources.py imports this module, so nothing comes from there."""

    classes = list(TAG_HUES)

    def __init__(self, num_samples: int, seed: int, size: int = 32, transform=None):
        self.images, self.targets = _tags(num_samples, seed, size)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        image = v2.functional.to_image(self.images[index])
        return self.transform(image) if self.transform else image, self.targets[index].clone()


@functools.lru_cache(maxsize=4)  # the same images serve statistics, training and every later run in a process
def _tags(num_samples: int, seed: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g, tile, quadrants = torch.Generator().manual_seed(seed), (size + 1) // 2, (num_samples, 4)
    classes = len(SyntheticTags.classes)
    tags = torch.where(torch.rand(quadrants, generator=g) < SHOWN, torch.randint(classes, quadrants, generator=g), -1)
    angle = torch.rand(quadrants, generator=g) * math.pi
    phase = torch.rand(quadrants, generator=g) * 2 * math.pi
    brightness = 0.6 + 0.4 * torch.rand(quadrants, generator=g)
    grid = torch.linspace(0, 1, tile)
    y, x = torch.meshgrid(grid, grid, indexing="ij")
    along = x * angle.cos()[..., None, None] + y * angle.sin()[..., None, None]
    stripes = 0.5 + 0.5 * torch.sin(2 * math.pi * 2 * along + phase[..., None, None])  # (N, 4, tile, tile)
    hues = torch.tensor([*TAG_HUES.values(), GREY])[tags]  # -1: the last, grey
    tiles = (hues * brightness[..., None])[..., None, None] * stripes[:, :, None]  # (N, 4, 3, tile, tile)
    images = tiles.view(num_samples, 2, 2, 3, tile, tile).permute(0, 3, 1, 4, 2, 5).reshape(-1, 3, 2 * tile, 2 * tile)
    images = images[..., :size, :size] + 0.35 * torch.randn(num_samples, 3, size, size, generator=g)
    targets = torch.zeros(num_samples, classes + 1).scatter_(1, tags % (classes + 1), 1)[:, :classes]
    return (images.clamp(0, 1) * 255).round().to(torch.uint8), targets
{% endif %}
