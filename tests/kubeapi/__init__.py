"""A Kubernetes API double for mxgitops tests: real HTTP, kube-apiserver semantics.

Pinned to Kubernetes v1.32.0.  The official Python client and the real
``kubectl`` use it unchanged (``kubectl create/apply/replace/patch/get/
delete/label/api-resources``).  Modules:

* :mod:`.resources` - the served resources (pods, services, events,
  configmaps, jobs.batch, leases.coordination.k8s.io), one table;
* :mod:`.store` - objects, the single resourceVersion counter, watch history;
* :mod:`.rest` - create/get/list/update/patch/delete/deletecollection and the
  status subresource, garbage collection and finalizers;
* :mod:`.schema`, :mod:`.validation`, :mod:`.defaults`, :mod:`.names` -
  decoding with fieldValidation, 422 validation, defaulting;
* :mod:`.selectors`, :mod:`.patch` - label/field selectors, patch flavours;
* :mod:`.controlplane` - explicitly stepped job controller and kubelet;
* :mod:`.faults` - seeded fault injection and the request log;
* :mod:`.discovery`, :mod:`.server` - discovery/OpenAPI and HTTP routing
  (the ``/_kubeapi/`` control endpoints are listed in :mod:`.server`);
* :mod:`.harness`, :mod:`.fixtures`, :mod:`.__main__` - the ``KubeAPI``
  handle, the ``kubeapi`` pytest fixture, ``python -m tests.kubeapi``.

Deliberate simplifications (what a real cluster does differently):

* Namespaces are implicit: every namespace exists; ``GET
  /api/v1/namespaces/{ns}`` returns it Active; namespaces cannot be listed,
  created or deleted, and there is no ``kubernetes`` Service in default.
* No authentication or authorization (any token is accepted), no admission
  plugins (no ServiceAccount injection, no default tolerations, no
  LimitRanges/quotas), no API priority and fairness except injected 429s.
* JSON only: no protobuf, no YAML bodies, no ``as=Table`` (kubectl prints its
  default NAME/AGE columns), no server-side apply (``apply-patch+yaml`` is a
  415), no ``managedFields``; ``limit``/``continue`` page a list in key order,
  but each page is read when asked (a real server serves a snapshot at the
  first page's resourceVersion); ``resourceVersion``/``resourceVersionMatch``
  on lists are ignored (lists are always current), no ``sendInitialEvents``
  or watch bookmarks.
* Deletion is immediate unless finalizers or Foreground propagation hold the
  object: ``gracePeriodSeconds`` is accepted and ignored (pods vanish without a
  terminating phase), and the garbage collector runs synchronously inside the
  DELETE request.  The Job-tracking finalizer on pods is not used.
* Validation covers the rules listed in :mod:`.validation`, not all of
  kube-apiserver's; messages that print Go structs (``field is immutable``
  on ``spec.template``) print the value as JSON instead of ``%#v``.  Duplicate
  JSON keys are not detected.  Type errors are 400 BadRequest
  (``json: cannot unmarshal ...``) as on a real server, not 422.
* OpenAPI: ``/openapi/v3`` documents carry operations, not schemas;
  ``/openapi/v2`` is a 404 (``kubectl explain`` does not work).
* Pods are never scheduled or run except through the control-plane steps;
  Jobs are only reconciled by :meth:`KubeAPI.run_job_controller` and
  :meth:`KubeAPI.kubelet`; time only passes for the control plane through
  :meth:`KubeAPI.advance_clock`.  Indexed Jobs, ttlSecondsAfterFinished,
  backoff delays, CronJobs and other controllers are not simulated.
* The watch history holds the last 200,000 events; older resourceVersions
  (or any after :meth:`KubeAPI.compact`) get a 410 ``Expired`` ERROR event,
  as from the watch cache.
"""

from .harness import KubeAPI

__all__ = ["KubeAPI"]
