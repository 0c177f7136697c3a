"""Where the cluster's configuration comes from, found as kubectl finds it.

A kubeconfig file (the flag, $KUBECONFIG, ~/.kube/config) if there is one, else the
pod's service account. `cluster.connect` loads it into the official client's
`Configuration`, which the transport is built from; a dry run asks only whether
there is one (`cluster_configured`), without importing the client.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mxgitops.errors import ConfigError

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class NoClusterConfigured(ConfigError):
    """Neither a kubeconfig nor an in-cluster service account is available."""


def cluster_configured(kubeconfig: Path | None = None) -> bool:
    """Whether `connect` would find a configuration (for a dry run without a cluster)."""
    return any(_config_candidates(kubeconfig)) or _in_cluster()


def load_configuration(
    configuration: Any, kubeconfig: Path | None, context: str | None
) -> str | None:
    """Which configuration was loaded into `configuration`, or None if there is none.

    As kubectl does: a kubeconfig file if there is one (the flag, $KUBECONFIG,
    ~/.kube/config), else the pod's service account.
    """
    import kubernetes

    if kubeconfig is not None and not kubeconfig.is_file():
        raise NoClusterConfigured(f"kubeconfig {kubeconfig} does not exist")
    for candidate in _config_candidates(kubeconfig):
        kubernetes.config.load_kube_config(
            config_file=str(candidate),
            context=context,
            client_configuration=configuration,
            persist_config=False,
        )
        return str(candidate)
    if _in_cluster():
        if context is not None:
            raise ConfigError(f"--context {context} needs a kubeconfig, and none was found")
        kubernetes.config.load_incluster_config(client_configuration=configuration)
        return "in-cluster"
    return None


def _config_candidates(kubeconfig: Path | None) -> Iterator[Path]:
    if kubeconfig is not None:
        yield kubeconfig
        return
    paths = os.environ.get("KUBECONFIG", "")
    for path in [*filter(None, paths.split(os.pathsep)), "~/.kube/config"]:
        candidate = Path(path).expanduser()
        if candidate.is_file():
            yield candidate


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and IN_CLUSTER_TOKEN.is_file()
