"""A test that opens a file outside the checkout fails: the tests carry what they read,
so a clone of the project alone runs them (issue 42).

How: an audit hook (``sys.addaudithook``) sees every ``open`` of this process, and every
directory listed (``os.listdir``, ``os.scandir``: how a glob finds fixtures), while a
test's setup, call or teardown, or a test module's collection, runs. What it sees outside
the allowed places is kept, and that test's report (or the module's collection) fails,
naming each path. The hook records instead of raising: an exception raised in it would
surface in whichever library or thread opened the file, as something else.

Why a hook and not a static scan of tests/ for paths that climb out (``parents[2]``,
``../shared``): a scan judges spellings, not reads. A path built in a helper, taken from
the environment or opened by a library slips past it, and a harmless ``parents[2]`` that
stays inside the checkout is flagged. The hook judges the file actually opened, whoever
built its path (symlinks resolved), for about a string comparison per event: audit
events are few (imports, opens, subprocesses), so the suite is no slower to measure.
It sees this process only: what git, kubectl or the built servers read is theirs.

Allowed: the checkout; the external corpus (``tests/helpers/corpus.py`` reads it where it
is present); the temporary directory (pytest's ``tmp_path`` and what ``tempfile`` makes);
the build cache ``~/.cache/mxgitops`` and Go's caches; Python's installation (the venv,
``sys.prefix``, site-packages); and the machine's own directories (/proc, /sys, /dev,
/etc, the tools under /usr, /bin, /lib, /opt, and /var, /run, where the real node keeps
its state). Anything else (the checkout's siblings, the rest of the home directory,
another tree) fails the test.

Registered by ``tests/conftest.py`` through ``pytest_plugins``.
"""

from __future__ import annotations

import os
import site
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.corpus import CHECKOUT, EXTERNAL_ROOT

EVENTS = frozenset({"open", "os.listdir", "os.scandir"})
MACHINE = (
    "/proc", "/sys", "/dev", "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
    "/libx32", "/opt", "/var", "/run",
)  # fmt: skip
MAX_SHOWN = 10  # paths named in one failure; the count says the rest


def allowed_roots(basetemp: Path | None = None) -> tuple[str, ...]:
    """Every directory a test may read under, resolved."""
    home = Path.home()
    env = os.environ
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    places: list[str | Path] = [
        CHECKOUT,
        EXTERNAL_ROOT,
        tempfile.gettempdir(),
        home / ".cache" / "mxgitops",
        cache / "mxgitops",
        env.get("GOPATH") or home / "go",
        env.get("GOMODCACHE") or home / "go" / "pkg" / "mod",
        env.get("GOCACHE") or cache / "go-build",
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        *site.getsitepackages(),
        site.getusersitepackages(),
        *MACHINE,
    ]
    if basetemp is not None:
        places.append(basetemp)
    return tuple(sorted({os.path.realpath(p) for p in places}))


def inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


class Confinement:
    """Keeps what is opened or listed outside `roots` while watching."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots
        self.breaches: list[str] = []

    def judge(self, target: Any) -> None:
        if target is None:  # os.listdir() / os.scandir(): the working directory
            target = "."
        if isinstance(target, int):  # a file descriptor: already opened
            return
        path = os.path.realpath(os.fsdecode(target))
        if not inside(path, self.roots) and path not in self.breaches:
            self.breaches.append(path)

    def take(self) -> list[str]:
        taken, self.breaches = self.breaches, []
        return taken


_watching: Confinement | None = None
_installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    watching = _watching
    if watching is None or event not in EVENTS or not args:
        return
    with suppress(TypeError, ValueError, OSError):  # a path it cannot judge: the opener's error
        watching.judge(args[0])


def install() -> None:
    """The hook, once a process: an audit hook cannot be removed, only left idle."""
    global _installed
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True


@contextmanager
def watching(confinement: Confinement) -> Iterator[Confinement]:
    """`confinement` judges what this process opens until the block ends."""
    global _watching
    install()
    before, _watching = _watching, confinement
    try:
        yield confinement
    finally:
        _watching = before


def message(breaches: list[str]) -> str:
    shown = "\n".join(f"  {path}" for path in breaches[:MAX_SHOWN])
    more = len(breaches) - MAX_SHOWN
    return (
        "read outside the checkout (tests carry what they read: tests/data/, "
        "tests/helpers/corpus.py; tests/session/checkoutguard.py says what is allowed):\n"
        + shown
        + (f"\n  ... and {more} more" if more > 0 else "")
    )


SESSION = pytest.StashKey[Confinement]()
FOUND = pytest.StashKey[dict[str, list[str]]]()


def pytest_configure(config: pytest.Config) -> None:
    basetemp = config.option.basetemp
    config.stash[SESSION] = Confinement(allowed_roots(Path(basetemp) if basetemp else None))
    install()


def _phase(item: pytest.Item, when: str) -> Iterator[None]:
    confinement = item.config.stash[SESSION]
    with watching(confinement):
        yield
    found = confinement.take()
    if found:
        item.stash.setdefault(FOUND, {})[when] = found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _phase(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _phase(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield from _phase(item, "teardown")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    found = item.stash.get(FOUND, {}).pop(call.when, None)
    if not found:
        return
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("checkout guard", message(found)))
    else:
        report.outcome = "failed"
        report.longrepr = message(found)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    if not isinstance(collector, pytest.Module):
        yield
        return
    confinement = collector.config.stash[SESSION]
    with watching(confinement):
        outcome = yield
    found = confinement.take()
    if found:
        report = outcome.get_result()
        if not report.failed:
            report.outcome = "failed"
            report.longrepr = message(found)
