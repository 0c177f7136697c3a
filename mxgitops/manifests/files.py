"""Finding and reading manifest files: which files a path holds, and their text.

What a walk of a jobs repository may meet is hostile or just odd (symlinks out of it,
loops, FIFOs, huge or non-UTF-8 files, unreadable directories), so each of these is a
`Problem` of that one file, never a crash and never a read outside the repository.
`manifests/loading.py` validates what is read here; `policy.py`, `config.py` and `repofile.py`
read operators' settings files through :func:`read_section` and :func:`read_text`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mxgitops.errors import ConfigError
from mxgitops.manifests.yamldoc import YamlError, documents

MAX_FILE_SIZE = 1024 * 1024
SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Problem:
    """One thing wrong, as `FILE:LINE: job NAME: field.path: message`."""

    file: str
    line: int  # 1-based; 0 when it concerns the whole file
    job: str | None
    field: str  # "" when it concerns no field
    message: str
    warning: bool = False  # a warning never makes a manifest invalid (unless --strict)

    def __str__(self) -> str:
        parts = [f"{self.file}:{self.line}" if self.line else self.file]
        if self.job:
            parts.append(f"job {self.job}")
        if self.field:
            parts.append(self.field)
        return ": ".join([*parts, f"warning: {self.message}" if self.warning else self.message])

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "job": self.job,
            "field": self.field,
            "message": self.message,
        }


def manifest_files(root: Path) -> tuple[list[tuple[str, Path]], list[Problem]]:
    """(name relative to root, real path) of every manifest file, and problems of the walk.

    Hidden files and directories (.git, .github, .mxgitops.yaml) are skipped.
    Symlinks are followed only when they stay inside `root`.
    """
    if not root.exists():
        raise ConfigError(f"{root}: no such file or directory")
    if not root.is_dir():
        return [(str(root), _real(root))], []
    top = _real(root)
    found: list[tuple[str, Path, bool]] = []
    problems: list[Problem] = []

    def walk_error(error: OSError) -> None:
        name = os.path.relpath(error.filename or root, root)
        problems.append(Problem(name, 0, None, "", f"cannot read directory: {error.strerror}"))

    for directory, dirs, files in os.walk(root, onerror=walk_error):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in dirs:
            path = Path(directory, name)
            if path.is_symlink() and not _inside(_real(path), top):
                problems.append(_outside(path, root))
        # Names are joined as text, once per directory: pathlib per file costs more than
        # the walk itself in a repository of thousands of manifests.
        prefix = Path(directory).relative_to(root).as_posix() + "/"
        prefix = "" if prefix == "./" else prefix
        for name in sorted(files):
            if name.startswith(".") or not name.endswith(SUFFIXES):
                continue
            relative = prefix + name
            # os.walk does not enter linked directories: only a linked file needs resolving.
            linked = os.path.islink(os.path.join(directory, name))
            real = _real(Path(directory, name)) if linked else top / relative
            if linked and not _inside(real, top):
                problems.append(_outside(Path(directory, name), root))
            else:
                found.append((relative, real, linked))
    # A file reached through a symlink too is read once, under its own name.
    found.sort(key=lambda item: item[2])
    chosen: dict[Path, str] = {}
    for relative, real, _ in found:
        chosen.setdefault(real, relative)
    files_found = sorted((relative, real) for real, relative in chosen.items())
    return files_found, problems


def _real(path: Path) -> Path:
    """Symlinks resolved; unlike Path.resolve, no error for a loop (reading it reports it)."""
    return Path(os.path.realpath(path))


def _inside(path: Path, top: Path) -> bool:
    return path == top or path.is_relative_to(top)


def _outside(path: Path, root: Path) -> Problem:
    target = os.readlink(path)
    return Problem(
        path.relative_to(root).as_posix(),
        0,
        None,
        "",
        f"symlink to {target} points outside {root}; not followed",
    )


def read_text(path: Path, max_file_size: int) -> str:
    """The file's text; raise YamlError (line 0 = whole file) when it cannot be used."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise YamlError(0, "not a regular file")
        if info.st_size > max_file_size:
            raise YamlError(0, _too_big(info.st_size, max_file_size))
        with path.open("rb") as stream:
            # Asking for the size stat gave, not the limit: a buffer of the limit per file
            # costs more than reading. A file grown since is read on, up to the limit.
            data = stream.read(info.st_size + 1)
            if len(data) > info.st_size:
                data += stream.read(max_file_size + 1 - len(data))
    except FileNotFoundError as error:
        raise YamlError(0, "cannot read: broken symlink or file removed") from error
    except OSError as error:
        raise YamlError(0, f"cannot read: {error.strerror or error}") from error
    if len(data) > max_file_size:
        raise YamlError(0, _too_big(len(data), max_file_size))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        byte = data[error.start : error.start + 1].hex()
        raise YamlError(line, f"not UTF-8 text (byte 0x{byte}); save the file as UTF-8") from error


def read_section(path: Path, key: str, max_file_size: int, what: str) -> Any:
    """The `key` section of an operator's settings file (YAML: one mapping with that
    one key); a file that cannot be read, or has another shape, is a ConfigError
    naming it (`what`: "policy file", ...)."""
    where = f"{what} {path}"
    try:
        text = read_text(path, max_file_size)
        docs = list(documents(text, max_values=10_000, max_depth=16))
    except YamlError as error:
        line = f" (line {error.line})" if error.line else ""
        raise ConfigError(f"{where}{line}: {error.message}") from error
    data = docs[0].data if len(docs) == 1 else None
    if not isinstance(data, dict) or set(data) != {key}:
        raise ConfigError(f"{where}: must be one YAML mapping with a single key, {key}")
    return data[key]


def _too_big(size: int, limit: int) -> str:
    return f"file is {_size(size)}, over the limit of {_size(limit)} (see --max-file-size)"


def _size(number: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if number >= factor:
            return f"{number / factor:.1f} {unit}".replace(".0 ", " ")
    return f"{number} bytes"
