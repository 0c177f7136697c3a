"""mlkube.io/v1beta1 MxJob: the seed's list form under its first API group (2017).

The same document as the seed dialect; its operator decoded it with Go's
encoding/json, so field names were matched regardless of case (`psRootPort`,
`mxreplicatype`): they are read the same way, each with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mxgitops.manifests.dialects.base import Reading, Version
from mxgitops.manifests.dialects.listform import read_list_form
from mxgitops.model import SEED_KIND, Dialect


def read(spec: Mapping[str, Any]) -> Reading:
    return read_list_form(spec, any_case=True)


VERSION = Version(
    Dialect.MLKUBE_V1BETA1, SEED_KIND, "mxjob-mlkube-v1beta1.json", "replicaSpecs", read
)
