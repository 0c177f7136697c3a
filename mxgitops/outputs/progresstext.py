"""A run's training record in a few words, for a table's row: `epoch 7/20 35%
val-accuracy 0.912 ETA 14m`.

Metric names were read plain (`record/lines.NAME`), so they are shown as they are;
values with four significant digits (`-o json` carries them as the log printed them).
"""

from __future__ import annotations

from mxgitops.record.runrecord import TrainingRecord

_VALIDATION = "validation-"


def progress_text(record: TrainingRecord | None) -> str:
    """ "" when there is no record, or it says nothing yet."""
    if record is None:
        return ""
    shown = record.progress
    words = []
    if shown.epoch is not None:
        words.append(f"epoch {shown.epoch}" + (f"/{shown.epochs}" if shown.epochs else ""))
    if shown.percent is not None:
        words.append(f"{shown.percent:g}%")
    metric = _headline(record)
    if metric:
        words.append(metric)
    if shown.eta_seconds is not None and shown.percent is not None and shown.percent < 100:
        words.append(f"ETA {duration(shown.eta_seconds)}")
    return "  ".join(words)


def _headline(record: TrainingRecord) -> str:
    """The latest value of its first validation metric, else of its first metric."""
    latest = record.log.latest
    names = sorted(latest, key=lambda n: (not n.startswith(_VALIDATION), n))
    if not names:
        return ""
    name = names[0]
    shown = "val-" + name[len(_VALIDATION) :] if name.startswith(_VALIDATION) else name
    return f"{shown} {latest[name]:.4g}"


def duration(seconds: float) -> str:
    """`45s`, `14m`, `2h05m`, `3d04h`."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
