"""How often one spec of a job ran again for a disruption, in a row: pure.

A disruption is not the job's failure: the job runs again (`disruption.py`), and
backoffLimit does not count it. Unbounded, a job that Kubernetes keeps taking away
(a node that keeps failing; a node-pressure eviction caused by the job's own use,
where the kubelet did not say so) would run again for ever. So each run the planner
makes anew after a disruption carries the disruptions before it on its objects
(`DISRUPTIONS_ANNOTATION`: a JSON list of what each was); the runs Kubernetes makes
anew itself are counted from what it keeps of them (a local job's disrupted pods that
its batch Job replaced, a JobSet's restarts by its disruption rule). A new spec starts
with none. Past the operator's `--max-disruption-runs` the job is Failed, its failure
listing them (`runpolicy.disrupted_too_often`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mxgitops.objects import KubeObject
from mxgitops.runtime.disruption import MAX_SAID, plain

DISRUPTIONS_ANNOTATION = "mxgitops.io/disruptions"
DEFAULT_MAX_DISRUPTION_RUNS = 5
MAX_DISRUPTION_RUNS = 100  # the most an operator may allow, and the most a list keeps
_REPLICA = re.compile(r"(?P<replica>[A-Z]+ [0-9]+) ")


def disruptions_of(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """What the disruptions before this run were, as its object records them: each
    bounded, printable, the last `MAX_DISRUPTION_RUNS`; none if unreadable."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if DISRUPTIONS_ANNOTATION not in annotations:
        return ()  # most runs met none: nothing to parse
    try:
        said = json.loads(str(annotations[DISRUPTIONS_ANNOTATION] or "[]"))
    except ValueError:
        return ()
    if not isinstance(said, list) or not all(isinstance(s, str) for s in said):
        return ()
    return tuple(plain(s, MAX_SAID) for s in said[-MAX_DISRUPTION_RUNS:])


def recorded(objects: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The longest record of the objects of one run (an object made again by a repair
    carries none)."""
    return max((disruptions_of(o) for o in objects), key=len, default=())


def with_disruptions(objects: Iterable[KubeObject], said: Sequence[str]) -> tuple[KubeObject, ...]:
    """`objects` (rendered anew) recording the disruptions `said` before their run."""
    kept = json.dumps([plain(s, MAX_SAID) for s in said[-MAX_DISRUPTION_RUNS:]])
    stamped = []
    for obj in objects:
        metadata = dict(obj.get("metadata") or {})
        metadata["annotations"] = {
            **(metadata.get("annotations") or {}),
            DISRUPTIONS_ANNOTATION: kept,
        }
        stamped.append({**obj, "metadata": metadata})
    return tuple(stamped)


def replica_of(said: str) -> str:
    """The replica a recorded disruption names (`WORKER 1 evicted ...`), else ""."""
    found = _REPLICA.match(said)
    return found["replica"] if found else ""
