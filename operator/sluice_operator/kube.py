"""A thin, uniform layer over the Kubernetes REST API for every kind the
operator creates: create-if-absent, patch only when the desired object
changed (tracked by a hash annotation), read, list and delete.

The official client's ApiClient does the transport, auth and retries of
connections; one table maps kinds to their REST paths so built-in and
third-party kinds are handled alike.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

HASH_ANNOTATION = "sluice.dev/applied-hash"

# kind -> (group/version, plural); every kind here is namespaced.
KINDS: dict[str, tuple[str, str]] = {
    "Secret": ("v1", "secrets"),
    "Service": ("v1", "services"),
    "Pod": ("v1", "pods"),
    "Event": ("v1", "events"),
    "ConfigMap": ("v1", "configmaps"),
    "ServiceAccount": ("v1", "serviceaccounts"),
    "Role": ("rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("rbac.authorization.k8s.io/v1", "rolebindings"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "Deployment": ("apps/v1", "deployments"),
    "PodDisruptionBudget": ("policy/v1", "poddisruptionbudgets"),
    "NetworkPolicy": ("networking.k8s.io/v1", "networkpolicies"),
    "Job": ("batch/v1", "jobs"),
    "ServiceMonitor": ("monitoring.coreos.com/v1", "servicemonitors"),
    "Redis": ("redis.redis.opstreelabs.in/v1beta2", "redis"),
    "RedisReplication": ("redis.redis.opstreelabs.in/v1beta2", "redisreplications"),
    "RedisSentinel": ("redis.redis.opstreelabs.in/v1beta2", "redissentinels"),
    "MongoDBCommunity": ("mongodbcommunity.mongodb.com/v1", "mongodbcommunity"),
    "Certificate": ("cert-manager.io/v1", "certificates"),
    "Issuer": ("cert-manager.io/v1", "issuers"),
    "Pool": ("sluice.dev/v1alpha1", "pools"),
    "Queue": ("sluice.dev/v1alpha1", "queues"),
    "Benchmark": ("sluice.dev/v1alpha1", "benchmarks"),
}

# Fields the operator owns on update; everything else (immutable StatefulSet
# claim templates, selectors, fields defaulted by the apiserver) is left alone.
MUTABLE: dict[str, tuple[str, ...]] = {
    "StatefulSet": ("replicas", "template", "persistentVolumeClaimRetentionPolicy"),
    "Deployment": ("replicas", "template", "strategy"),
    "Service": ("ports", "selector"),
}


def path(kind: str, namespace: str, name: str | None = None) -> str:
    """path is the REST path of a kind's collection in a namespace, or of one object."""
    gv, plural = KINDS[kind]
    prefix = "/api/v1" if gv == "v1" else f"/apis/{gv}"
    out = f"{prefix}/namespaces/{namespace}/{plural}"
    return f"{out}/{name}" if name else out


def object_hash(obj: dict[str, Any]) -> str:
    """object_hash fingerprints what the operator asked for, so unchanged objects are not patched."""
    body = {k: v for k, v in obj.items() if k != "metadata"}
    body["labels"] = obj.get("metadata", {}).get("labels", {})
    if obj.get("metadata", {}).get("annotations"):
        # Only when there are any: the fingerprints of objects without stay as they were.
        body["annotations"] = obj["metadata"]["annotations"]
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


_API: client.ApiClient | None = None


def _client() -> client.ApiClient:
    # One shared client: its urllib3 pool keeps connections to the apiserver alive.
    global _API
    if _API is None:
        _API = client.ApiClient()
    return _API


def _call(method: str, url: str, body: Any = None, content_type: str = "application/json", query: Any = None) -> Any:
    api = _client()
    headers = {"Accept": "application/json", "Content-Type": content_type}
    m, full_url, hdrs, payload, _ = api.param_serialize(
        method=method,
        resource_path=url,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(m, full_url, header_params=hdrs, body=payload, _request_timeout=(5, 30))
    resp.read()
    text = resp.data.decode("utf-8") if resp.data else ""
    if not 200 <= resp.status <= 299:
        raise ApiException(http_resp=resp, body=text)
    return json.loads(text) if text else {}


def get(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    """get reads one object, or None when it does not exist."""
    try:
        return _call("GET", path(kind, namespace, name))
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def list_objects(kind: str, namespace: str, label_selector: str | None = None) -> list[dict[str, Any]]:
    """list_objects lists a kind in a namespace, optionally by label selector."""
    query = [("labelSelector", label_selector)] if label_selector else []
    data = _call("GET", path(kind, namespace), query=query)
    return list(data.get("items") or [])


def delete(kind: str, namespace: str, name: str) -> bool:
    """delete removes an object in the background; False when it was already gone."""
    try:
        _call("DELETE", path(kind, namespace, name), body={"propagationPolicy": "Background"})
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def delete_pod(namespace: str, name: str, grace_seconds: int | None = None) -> bool:
    """delete_pod deletes a pod, with its own grace period or the one given
    (0: SIGKILL at once); False when it was already gone."""
    body: dict[str, Any] = {} if grace_seconds is None else {"gracePeriodSeconds": grace_seconds}
    try:
        _call("DELETE", path("Pod", namespace, name), body=body)
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def patch_status(kind: str, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
    """patch_status merges fields into an object's status subresource at once
    (for what must be recorded before the handler returns)."""
    return _call(
        "PATCH",
        path(kind, namespace, name) + "/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )


def evict(namespace: str, name: str) -> None:
    """evict asks for a pod's eviction, which honours PodDisruptionBudgets."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
    _call("POST", path("Pod", namespace, name) + "/eviction", body=body)


def add_ephemeral_container(namespace: str, pod: str, container: dict[str, Any]) -> None:
    """add_ephemeral_container adds a container to a running pod (its
    ephemeralcontainers subresource); the pod keeps it, ended, for its life."""
    _call(
        "PATCH",
        path("Pod", namespace, pod) + "/ephemeralcontainers",
        body={"spec": {"ephemeralContainers": [container]}},
        content_type="application/strategic-merge-patch+json",
    )


def can_i(verb: str, resource: str, namespace: str = "", group: str = "", subresource: str = "") -> bool:
    """can_i asks the apiserver whether the operator itself may do something
    (a SelfSubjectAccessReview, which every authenticated identity may create)."""
    attrs = {"verb": verb, "resource": resource, "group": group, "subresource": subresource, "namespace": namespace}
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {k: v for k, v in attrs.items() if v}},
    }
    out = _call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review)
    return bool((out.get("status") or {}).get("allowed"))


def cordon(node: str, unschedulable: bool) -> None:
    """cordon marks a node (un)schedulable."""
    _call(
        "PATCH",
        f"/api/v1/nodes/{node}",
        body={"spec": {"unschedulable": unschedulable}},
        content_type="application/merge-patch+json",
    )


def patch(kind: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """patch applies a JSON merge patch."""
    return _call("PATCH", path(kind, namespace, name), body=body, content_type="application/merge-patch+json")


def merge_owners(existing: list[dict[str, Any]], wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """merge_owners is the union of owner references by uid, keeping existing ones first."""
    seen = {o.get("uid") for o in existing}
    return list(existing) + [o for o in wanted if o.get("uid") not in seen]


class Refused(Exception):
    """Refused: the apiserver refused an object as invalid (HTTP 422). Retrying cannot help
    and a spec change can, so the caller reports it; the message is the apiserver's own,
    which names the object and the field."""


def apply(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """apply creates obj if absent, else patches the fields the operator owns when the
    desired object changed. Returns the live object and "created", "updated" or "unchanged".
    Owner references are merged, never dropped: a namespace's server has many Pool owners.
    Raises Refused when the apiserver refuses the object as invalid."""
    try:
        return _apply(obj)
    except ApiException as exc:
        if exc.status != 422:
            raise
        try:
            message = json.loads(exc.body or "{}").get("message")
        except ValueError:
            message = None
        raise Refused(message or f"{obj['kind']} {obj['metadata']['name']}: {exc.status} {exc.reason}") from exc


def _apply(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    kind, meta = obj["kind"], obj["metadata"]
    ns, name = meta["namespace"], meta["name"]
    digest = object_hash(obj)
    desired = json.loads(json.dumps(obj))
    desired["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = digest
    live = get(kind, ns, name)
    if live is None:
        try:
            return _call("POST", path(kind, ns), body=desired), "created"
        except ApiException as exc:
            if exc.status != 409:
                raise
            live = get(kind, ns, name)
            if live is None:
                raise
    live_meta = live.get("metadata", {})
    owners = merge_owners(live_meta.get("ownerReferences") or [], meta.get("ownerReferences") or [])
    same_hash = (live_meta.get("annotations") or {}).get(HASH_ANNOTATION) == digest
    if same_hash and owners == (live_meta.get("ownerReferences") or []):
        return live, "unchanged"
    body: dict[str, Any] = {
        "metadata": {
            "labels": meta.get("labels") or {},
            # The annotations the operator sets (a merge patch: others stay).
            "annotations": {**(meta.get("annotations") or {}), HASH_ANNOTATION: digest},
            "ownerReferences": owners,
        }
    }
    if not same_hash:
        if kind in MUTABLE:
            body["spec"] = {k: desired["spec"][k] for k in MUTABLE[kind] if k in desired.get("spec", {})}
        elif kind == "Secret":
            pass  # generated credentials are never rotated behind the user's back
        elif kind == "Role":
            body["rules"] = desired["rules"]
        elif kind == "ConfigMap":
            # A merge patch: keys the operator no longer writes are removed (None).
            have = live.get("data") or {}
            body["data"] = {**{k: None for k in have}, **(desired.get("data") or {})}
        elif "spec" in desired:
            body["spec"] = desired["spec"]
    return patch(kind, ns, name, body), "updated"


def group_served(group_version: str) -> bool:
    """group_served tells whether the apiserver serves an API group/version (a CRD is installed).
    Discovery needs no RBAC grant, unlike reading CustomResourceDefinitions."""
    try:
        _call("GET", f"/apis/{group_version}")
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def namespace_terminating(namespace: str) -> bool:
    """namespace_terminating tells whether a namespace is being deleted, when nothing in
    it may block on finalizers. A namespace already gone counts as terminating; any other
    failure to read it is raised (the handler retries) rather than taken as "no"."""
    try:
        data = _call("GET", f"/api/v1/namespaces/{namespace}")
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return bool(data.get("metadata", {}).get("deletionTimestamp"))


def node_count(label_key: str, value: str | None = None) -> int:
    """node_count counts nodes carrying a label (with a value, when given)."""
    sel = f"{label_key}={value}" if value else label_key
    data = _call("GET", "/api/v1/nodes", query=[("labelSelector", sel)])
    return len(data.get("items") or [])
