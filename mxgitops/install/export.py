"""`mxgitops install --export`: the manifests as YAML for a cluster that is itself
managed by GitOps. Only YAML goes to stdout: the Secrets the manifests read are named
in its leading comments, each with the kubectl command that creates it (never their
data: install --export reads no file of them)."""

from __future__ import annotations

import yaml

from mxgitops.install.overlay import Installation
from mxgitops.install.render import render


def export(installation: Installation) -> str:
    namespace = installation.namespace
    lines = ["# mxgitops: the Secrets these manifests read, which you create:"]
    for secret, keys in installation.expected_secrets().items():
        sources = " ".join(f"--from-file={key}=FILE" for key in keys)
        lines.append(f"#   kubectl -n {namespace} create secret generic {secret} {sources}")
    if len(lines) == 1:
        lines.append(
            f"#   none needed; a private repository's token: kubectl -n {namespace} "
            "create secret generic mxgitops-git --from-file=token=FILE"
        )
    documents = yaml.safe_dump_all(render(installation), sort_keys=False)
    return "\n".join(lines) + "\n" + documents
