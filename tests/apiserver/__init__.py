"""A loopback kube-apiserver for tests that drive the real `kubernetes` client over HTTP.

Why in-repo: the tests need fault injection, compaction and restarts on demand, and the wire
format checked against the recorded kube-apiserver v1.36 bodies in `tests/fixtures/recorded/`.

Use it through the pytest fixture (registered in `tests/conftest.py`)::

    def test_x(apiserver: ApiServer, tmp_path: Path) -> None:
        config.load_kube_config(str(apiserver.kubeconfig(tmp_path / "kubeconfig")))

or standalone: `server = ApiServer().start(); ...; server.stop()`.

Served over plain http on 127.0.0.1 (random port, `server.url`, `server.port`):
- Kinds (`resources.py`): core pods (+status, binding, eviction), nodes, namespaces, secrets,
  configmaps, services, events; events.k8s.io/v1 events; coordination.k8s.io/v1 leases;
  scheduling.k8s.io/v1 priorityclasses and v1alpha2 workloads/podgroups; policy/v1 PDBs;
  admissionregistration.k8s.io/v1 webhook configurations; apiextensions CRDs; apiregistration APIServices; our CRDs
  scheduling.phalanx.dev/v1alpha1 podgroups (+status), queues, workloads.
- LIST: `resourceVersion` in metadata; built-in items without kind/apiVersion; labelSelector and
  fieldSelector (`=`, `!=`); `resourceVersionMatch=Exact` older than the oldest retained RV -> 410.
- WATCH (`watch=1`): one JSON event per line; `resourceVersion` ""/"0" sends synthetic ADDED first
  (plus an `initial-events-end` BOOKMARK with `sendInitialEvents=true`); `allowWatchBookmarks`
  gives a BOOKMARK every `server.bookmark_interval` s when idle and two at the end of
  `timeoutSeconds`; a too-old RV gives one ERROR event (Status Expired 410), also mid-stream after
  `compact()`.
- GET / POST (generateName, `dryRun=All`, 409 AlreadyExists) / PUT (stale RV -> 409) / PATCH
  (json-patch incl. `test` -> 422, merge-patch, strategic-merge with merge keys) / DELETE
  (preconditions uid/resourceVersion -> 409; a bound pod with grace > 0 gets deletionTimestamp and
  is removed `server.termination_seconds` later unless `server.hold_terminating`; unbound pods and
  grace 0 go at once; finalizers hold other kinds). Status subresources split spec from status.
- Create over HTTP drops `status` for kinds with a status subresource (not Nodes), as the
  apiserver does; direct `create`/`apply` keep a given status (merged over a pod's initial one).
- Pods: Priority admission (priorityClassName or globalDefault -> spec.priority), SchedulingGated
  condition, gates may only be removed (422 as recorded), the last removal drops the key, and
  `status.nominatedNodeName` may not be set on a bound pod (422, as kube-apiserver 1.36 answers).
  pods/binding: 409 already bound / gated with the recorded bodies, sets nodeName, PodScheduled=True,
  clears `status.nominatedNodeName` and copies the node's zone label; 201 Status Success.
- events.k8s.io/v1 CREATE: `ValidateEventCreate`'s required fields, type and note length, and its
  namespace rule: an Event about a cluster-scoped object (no `regarding.namespace`) goes to `default`
  or `kube-system`, else 422.
- `/version`, `/healthz`.
- authorization.k8s.io/v1 SubjectAccessReview CREATE: allowed when `allow(user, verb, group, resource, namespace)`
  granted it (no RBAC evaluation: grants are exact), denied otherwise.
- Aggregated APIs: `aggregated["/apis/<group>/<version>"] = handler`; a GET under that prefix is answered by
  `handler(path, query) -> (code, body)`, as kube-apiserver proxies to an APIService's server.

Control from tests (no HTTP, no faults):
- `create(obj)`, `apply(obj)` (create or replace), `get(plural, name, namespace="", group="")`,
  `list(plural, namespace="", group="")`, `delete(plural, name, namespace="", group="")` (force).
- `fail(method, path_prefix, status, times=1, retry_after=None, body=None)`: next matching
  requests fail (`method` "*" for any; 429 uses the recorded "storage is (re)initializing" body;
  410 on a watch is an ERROR event). `hang(method, path_prefix, seconds, times=1)`: hold, then drop
  the connection unanswered. `delay(method, path_prefix, seconds, times=1)`: hold, then answer.
- `compact()`: new oldest retained RV; older watches and Exact lists get 410.
- `restart(down_seconds=0.0, compact=True)`: drop all connections, refuse for a while, serve again.
- Knobs: `termination_seconds` (0.05: how long a terminating bound pod stays), `hold_terminating`,
  `bookmark_interval`, `watch_timeout_default` (a watch without timeoutSeconds), `history_limit`
  (events kept for watches; older resourceVersions get 410).
- `finish_terminating()`: remove terminating pods now. `requests` / `requests_matching(method,
  prefix)`: the request log (`record_requests = False` to skip). `resource_version()`.
"""

from tests.apiserver.server import ApiServer

__all__ = ["ApiServer"]
