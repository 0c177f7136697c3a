"""mxnet.mlkube.io/v1beta1 MxJob: the seed dialect, the operator this project grew from.

The list form (`listform.py`) exactly as the seed wrote it: field names as
spelled, the restart policy in each pod template. Current: read without a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Reading, Version
from mxgitops.manifests.dialects.listform import read_list_form
from mxgitops.model import SEED_KIND, Dialect


def read(spec: Mapping[str, Any]) -> Reading:
    return read_list_form(spec)


VERSION = Version(
    Dialect.SEED, SEED_KIND, "mxjob-seed-v1beta1.json", "replicaSpecs", read, current=True
)
