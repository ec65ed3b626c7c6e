"""Data that is not split into train/ and val/ yet: one folder of class folders, or a CSV of paths and labels.

Either becomes a list of (path, label, split) rows, paths relative to the data's root (the folder, or the CSV's
folder). Rows without a split get a stratified, seeded hold-out; a run writes its rows as split.csv, which
`--split` reads back so that a later run validates on exactly the same images.
"""

import csv
import errno
import os
import stat
import unicodedata
from pathlib import Path

import torch
from torch.utils.data import Dataset
from torchvision.datasets.folder import IMG_EXTENSIONS

from ..core.errors import DataError
from ..core.files import replacing

SPLITS = ("train", "val")
Row = tuple[str, str, str | None]  # path relative to the root, class name, train/val (None: not decided yet)


def is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMG_EXTENSIONS and not path.name.startswith(".")


def image_status(path: Path) -> os.stat_result | None:
    """is_image's answer with one stat, whose st_dev and st_ino tell the file itself, however it is named."""
    if path.suffix.lower() not in IMG_EXTENSIONS or path.name.startswith("."):
        return None  # no stat for what is no image by its name
    try:
        status = path.stat()
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):  # a broken link: no image, as is_file says
            return None
        raise DataError(f"cannot read {path} ({exc.strerror}); check its permissions") from None
    return status if stat.S_ISREG(status.st_mode) else None


def read_class_folders(root: Path) -> list[Row]:
    """root/<class>/**/<image>: every image below a class folder belongs to that class, and to no other: one file
    reached under two names (a symbolic or hard link, a linked class folder) is refused, whatever the classes."""
    rows, first_seen = [], {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for path in sorted(folder.rglob("*")):
            image = image_status(path)
            if image is None:
                continue
            name = path.relative_to(root).as_posix()
            if (image.st_dev, image.st_ino) in first_seen:  # the same pixels would count twice, maybe with two labels
                first = first_seen[image.st_dev, image.st_ino]
                raise DataError(f"--data {root}: {first} and {name} are the same image; keep one")
            first_seen[image.st_dev, image.st_ino] = name
            rows.append((name, folder.name, None))
    if not rows:
        raise DataError(f"--data {root} holds no class folders with images; put images in {root}/<class>/")
    return rows


def read_csv(path: Path, root: Path, need_split: bool = False) -> list[Row]:
    """A CSV with columns path and label (a class name), and split (train or val) where `need_split` or present.
    Relative paths resolve against `root`; every listed file must exist."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as file:
            reader = csv.DictReader(file)
            columns = set(reader.fieldnames or [])
            needed = {"path", "label", "split"} if need_split else {"path", "label"}
            if not needed <= columns:
                missing = ", ".join(sorted(needed - columns))
                raise DataError(f"{path} lacks the column(s) {missing}; its first line must name path,label[,split]")
            rows, first_listed = [], {}
            for record in reader:
                line = reader.line_num  # the file's own line: blank lines and line breaks inside quotes counted
                rows.append(_row(path, root, line, record, "split" in columns))
                listed_once(path, root, rows[-1][0], line, first_listed)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"cannot read {path} ({exc}); check the file") from None
    if not rows:
        raise DataError(f"{path} lists no images; add rows of path,label")
    return rows


def listed_once(csv_path: Path, root: Path, name: str, line: int, first_listed: dict) -> None:
    """Refuse a CSV's row whose image an earlier row listed: `first_listed` maps each file seen to (name, line)."""
    image = (root / name).stat()  # the file itself, however it is named: ./a.png, a link to it, ...
    if (image.st_dev, image.st_ino) in first_listed:  # it could land in both splits, or carry two labels
        first, before = first_listed[image.st_dev, image.st_ino]
        same = os.path.normpath(root / first) == os.path.normpath(root / name)
        listed = f"list {name}" if same else f"list the same image as {first} and {name}"
        raise DataError(f"{csv_path} lines {before} and {line} {listed}; list it once")
    first_listed[image.st_dev, image.st_ino] = name, line


def existing(where: str, root: Path, name: str) -> None:
    if not (root / name).is_file():
        raise DataError(f"{where}: {root / name} does not exist; fix the path or remove the row")


def _row(csv_path: Path, root: Path, line: int, record: dict, has_split: bool) -> Row:
    where = f"{csv_path} line {line}"
    name, label = (record.get("path") or "").strip(), (record.get("label") or "").strip()
    if not name or not label:
        raise DataError(f"{where}: path and label must both be given")
    existing(where, root, name)
    split = (record.get("split") or "").strip() if has_split else None
    if has_split and split not in SPLITS:
        raise DataError(f"{where}: split {split!r} must be train or val")
    return name, label, split


def check_class_names(classes: list[str], source: str) -> None:
    """A class name becomes one line of classes.txt, a CSV cell and a plot label: one line of valid UTF-8 text."""
    for name in classes:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise DataError(f"--data {source}: class {name!r} is not valid UTF-8 text; rename it") from None
        if name != name.strip():  # a CSV cell is read back stripped: the name would not survive split.csv
            raise DataError(f"--data {source}: class {name!r} starts or ends with a space; rename it")
        if any(unicodedata.category(char) in ("Cc", "Zl", "Zp") for char in name):
            raise DataError(
                f"--data {source}: class {name!r} holds a control character (a line break, tab or terminal escape); "
                "rename it"
            )


def hold_out(rows: list[Row], fraction: float, seed: int) -> list[Row]:
    """Stratified: round(fraction x count) images of each class to val (at least one where the class has two),
    picked by a generator seeded with `seed`, so the same data and seed always give the same split."""
    generator = torch.Generator().manual_seed(seed)
    classes: dict[str, list[int]] = {}
    for i, (_, label, _) in enumerate(rows):
        classes.setdefault(label, []).append(i)
    held = set()
    for _, members in sorted(classes.items()):
        count = min(max(round(fraction * len(members)), 1), len(members) - 1)
        order = torch.randperm(len(members), generator=generator)[:count]
        held.update(members[i] for i in order.tolist())
    return [(path, label, "val" if i in held else "train") for i, (path, label, _) in enumerate(rows)]


def write_split(path: Path, rows: list[Row]) -> None:
    with replacing(path, "w") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(["path", "label", "split"])
        writer.writerows(rows)


class LabelledFiles(Dataset):
    """The images of one split, loaded with `loader`; class indices follow the sorted class names."""

    def __init__(self, root: Path, rows: list[Row], classes: list[str], loader, transform=None):
        index = {name: i for i, name in enumerate(classes)}
        self.samples = [(str(root / path), index[label]) for path, label, _ in rows]
        self.targets = [target for _, target in self.samples]
        self.classes, self.loader, self.transform = classes, loader, transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        path, target = self.samples[index]
        image = self.loader(path)
        return self.transform(image) if self.transform else image, target
