"""MkDocs hooks of the manual (mkdocs.yml): links from a page to the repository's files.

A page links to `cronjob/`, `bench/bench_sync.py` or `tests/...` with a relative path,
which works where people read the pages in a checkout or on the forge. The site holds
only docs/, so such a link would be broken there: this hook fails the build when the
file does not exist in the repository (a link that went stale), and otherwise shows
it in the site as its path in the repository (a link to `repo_url` when one is set).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    here = (docs / page.file.src_uri).parent
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def replace(match: re.Match[str]) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"^[a-z]+:|^#", target):
            return match.group(0)
        path, _, _anchor = target.partition("#")
        resolved = Path(posixpath.normpath(here / path))
        if resolved.is_relative_to(docs):
            return match.group(0)  # a page of the manual: MkDocs checks it
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            where = f"{page.file.src_uri}: link to {target}"
            raise PluginError(f"{where}: no such file in the repository")
        relative = resolved.relative_to(ROOT).as_posix() + ("/" if resolved.is_dir() else "")
        if repo_url:
            return f"[{text}]({repo_url}/blob/main/{relative})"
        if relative.rstrip("/") in text:
            return f"`{text.strip('`')}`"  # the text names the file already
        return f"{text} (`{relative}`)"

    return _LINK.sub(replace, markdown)
