"""The only module that talks to the Kubernetes API.

It speaks plain JSON objects (`objects.KubeObject`), so the rest of mxgitops never
sees a client model or an HTTP library. The official client loads the
configuration (kubeconfig contexts, exec plugins, client certificates, token
files, the pod's service account); `transport` sends each request over the one
connection pool the client builds from it; `listdecode` reads each LIST page as
it arrives. Which requests are made, their retries and deadlines, and tenancy
are decided here and in its parts: the request core (`kube/calls.py`), the read
path (`kube/reads.py`), the write path (`kube/writes.py`) and the webhook receiver's
requests (`kube/cronjobs.py`) and install's (`kube/installs.py`), which `Cluster`
joins. What it promises the planner and apply:

- live state costs one LIST per kind, across namespaces, filtered by the
  ownership selector (none of JobSets where the ledger says this instance has
  none, `runtimes.unlisted`), read in pages of `LIST_PAGE_SIZE` objects (`limit` and
  `continue`); each page is decoded as it arrives, one item at a time, and each
  item trimmed to what planning reads before the next is decoded, so memory
  grows with the objects kept, never with a page's body; a LIST is bounded in
  pages, items, restarts and time, whatever the server sends (`listing.py`);
- writes run with bounded parallelism and are idempotent: AlreadyExists on
  create and NotFound on delete count as success, so a retried write (after a
  429, a 5xx or a dropped connection) never duplicates anything, and no GET is
  needed before a create;
- every failure becomes an `errors.ClusterError` with the cause chained;
- no call takes longer than its timeout, retries included: an API server that
  accepts connections but never answers is unreachable (exit 4), not a hang;
  while the sync holds its Lease, no write is sent or waited for past the Lease's
  renew deadline (`lease.Fence`): then the sync stops (`LeaseLostError`, exit 4);
- under tenancy (`tenant_service_account`), a request about a job's objects in
  namespace N is made as that service account of N (`Impersonate-User`): N's
  RBAC and Pod Security admission judge it, and a refusal is that job's error;
- once `stop()` is called (SIGTERM), no further write starts and what is left
  (releasing the Lease) gets a short deadline; writes run on daemon threads, so
  a write in flight never keeps the process from exiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import yaml

from mxgitops.errors import ConfigError
from mxgitops.kube import transport
from mxgitops.kube.calls import DEFAULT_PARALLELISM, DEFAULT_REQUEST_TIMEOUT, RetryPolicy
from mxgitops.kube.cronjobs import CronJobRuns
from mxgitops.kube.installs import Installs
from mxgitops.kube.kubeconfig import NoClusterConfigured, load_configuration
from mxgitops.kube.reads import Reads
from mxgitops.kube.writes import Writes


class Cluster(Reads, Writes, CronJobRuns, Installs):
    """A connection to one cluster; cheap to share between threads. Its requests are
    made in one place (`kubecalls.Calls`), its reads and writes are `kubereads.Reads`
    and `kubewrites.Writes`; the webhook receiver's, `kubecronjobs.CronJobRuns`;
    install's, `installs.Installs`."""


def connect(
    *,
    kubeconfig: Path | None = None,
    context: str | None = None,
    parallelism: int = DEFAULT_PARALLELISM,
    retry: RetryPolicy | None = None,
    sleep: Callable[[float], None] | None = None,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    tenant_service_account: str | None = None,
) -> Cluster:
    """Connect like any Kubernetes tool: a kubeconfig (this one, else $KUBECONFIG or
    ~/.kube/config) with its current or the given context, else the pod's service
    account when running in a cluster.

    The official client is imported here, not with this module: it takes most of a
    second, and validate, convert and a dry run without a cluster never need it."""
    import kubernetes

    configuration = kubernetes.client.Configuration()
    try:
        source = load_configuration(
            configuration, kubeconfig, context, plugin_timeout=request_timeout
        )
    except (kubernetes.config.ConfigException, yaml.YAMLError, OSError, ValueError) as exc:
        # A kubeconfig that is not YAML, or not readable, is the user's to fix: no traceback.
        detail = " ".join(str(exc).split())
        raise ConfigError(f"cannot load the cluster configuration: {detail}") from exc
    if source is None:
        raise NoClusterConfigured(
            "no cluster configured: pass --kubeconfig, set KUBECONFIG, or run in a pod "
            "with a service account"
        )
    configuration.retries = 0  # retries are ours: idempotent and aware of Retry-After
    # A connection per writer, and one for the main thread (the Lease, the LISTs).
    configuration.connection_pool_maxsize = max(parallelism + 1, 4)
    return Cluster(
        api_client=transport.Transport(configuration),
        parallelism=parallelism,
        retry=retry or RetryPolicy(),
        sleep=sleep or time.sleep,
        server=configuration.host,
        timeout=request_timeout,
        tenant_service_account=tenant_service_account or "",
    )
