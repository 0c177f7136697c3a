"""What a sync reads back and can be lied to about (issue 37): a LIST of JobSets that
answers 404 once, a status note blob hundreds of MB large, ill-typed fields inside a
live Job's or pod's status. None of them may make a job run twice, read without bound,
or end a sync with exit 70."""

from __future__ import annotations

from typing import Any

import pytest

from mxgitops import cluster as kube
from mxgitops.changes import PlanOptions
from mxgitops.errors import ClusterClientError
from mxgitops.ledger import Ledger
from mxgitops.objects import Kind
from mxgitops.plan import plan
from tests.kubeapi.harness import KubeAPI
from tests.test_plan import job

BOTH = frozenset({"batch", "jobset"})


def test_a_jobsets_list_answering_404_keeps_jobset_in_the_ledger(
    kubeapi: KubeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger says this instance has JobSets; one LIST of them answers 404 (the CRD
    being reinstalled, a proxy gone wrong). Nothing proves none exists: were `jobset`
    dropped, no later sync would list them, and a JobSet left of a job moved to batch
    Jobs would run beside them forever."""
    api = kube.connect(kubeconfig=kubeapi.kubeconfig)
    listed = api.list_all

    def list_all(kind: Kind, selector: str, *args: Any, **kwargs: Any) -> Any:
        if kind is Kind.JOBSET:
            raise ClusterClientError("404 Not Found", status=404)
        return listed(kind, selector, *args, **kwargs)

    monkeypatch.setattr(api, "list_all", list_all)
    live = api.list_live("a=b")
    done = plan([job("a")], live, Ledger(runtimes=BOTH), PlanOptions(instance="t1"))
    assert done.ledger.runtimes == BOTH
    assert not done.ledger_changed
