"""The note install's first sync wrote, read back as `mxgitops status` reads it."""

from __future__ import annotations

from mxgitops.commands.status import read_status
from mxgitops.errors import GitError
from mxgitops.outputs import report
from mxgitops.settings.config import SyncConfig


def first_note(config: SyncConfig) -> str:
    """The note on the synced branch's tip, as a table; or why there is none."""
    try:
        summary, sha, unreadable = read_status(config, None)
    except GitError as exc:
        return f"the note: cannot read it: {exc}"
    if summary is None:
        why = f" ({unreadable})" if unreadable else ""
        return f"no status note on {sha[:12]}{why}: see the sync's log (kubectl logs)"
    return f"the note on {sha[:12]} ({config.notes_ref}):\n{report.render_table(summary)}"
