"""Queue.spec.subscriptions reconciled into the server through Zaqar's
subscription API, and the queue's delivery health read from the server's
deliveries endpoint.

The operator manages only the subscriptions a Queue declares: it remembers
their ids in status.subscriptions, so a subscription an application created
through the API is never touched, and one removed from the spec is deleted.
A signing secret comes from a Secret (secretRef) and goes into the server's
options.secret; it never appears in the status, a condition, an event or a log.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from .. import conditions as cond
from .. import events, kube
from ..serverapi import ServerAPI, ServerError

CONDITION = "Subscribed"
# The ttl of a subscription whose spec gives none: ten years, so it lasts as long
# as the Queue (the server re-sets a subscription's expiry only when its ttl
# changes, so there is nothing to renew it with).
LASTING_TTL = 10 * 365 * 24 * 3600


@dataclass
class Wanted:
    """Wanted is one declared subscription with its secret resolved."""

    subscriber: str
    ttl: int
    options: dict[str, Any]
    # The Secret's resourceVersion: the server never shows a secret back, so a
    # rotated Secret is recognised by its version, never by its value.
    secret_version: str = ""


@dataclass
class Outcome:
    """Outcome of one sync: the managed subscriptions (subscriber -> id) and what went wrong."""

    managed: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)  # subscriber -> Secret resourceVersion sent
    problems: list[tuple[str, str]] = field(default_factory=list)  # (reason, message)
    secrets: list[str] = field(default_factory=list)

    def redact(self, text: str) -> str:
        """redact hides every resolved secret value in `text`."""
        for s in self.secrets:
            text = text.replace(s, "***")
        return text


def _secret_value(ns: str, ref: dict[str, Any]) -> tuple[str | None, str, str]:
    """(value at ref.key of Secret ref.name, the Secret's resourceVersion, ""),
    or (None, "", why not)."""
    secret = kube.get("Secret", ns, ref["name"])
    if secret is None:
        return None, "", f"Secret {ref['name']} does not exist"
    raw = (secret.get("data") or {}).get(ref["key"])
    if not raw:
        return None, "", f"Secret {ref['name']} has no key {ref['key']}"
    try:
        value = base64.b64decode(raw).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None, "", f"Secret {ref['name']} key {ref['key']} is not UTF-8 text"
    return value, str(secret["metadata"].get("resourceVersion") or ""), ""


def wanted(ns: str, spec: dict[str, Any], out: Outcome) -> list[Wanted]:
    """wanted resolves the declared subscriptions; one whose Secret cannot be read is
    left out (and reported), never created without its signing secret."""
    result = []
    for item in spec.get("subscriptions") or []:
        options = dict(item.get("options") or {})
        ref, version = item.get("secretRef"), ""
        if ref:
            value, version, why = _secret_value(ns, ref)
            if value is None:
                out.problems.append(("SecretNotFound", f"{item['subscriber']}: {why}"))
                continue
            options["secret"] = value
            out.secrets.append(value)
        result.append(Wanted(item["subscriber"], int(item.get("ttl") or LASTING_TTL), options, version))
    return result


def _plain(options: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (options or {}).items() if k != "secret"}


def _needs_update(w: Wanted, have: dict[str, Any], sent_version: str | None) -> bool:
    """The server answers options.secret redacted: the secret is compared by the
    Secret's resourceVersion last sent, everything else by value."""
    opts = have.get("options") or {}
    if have.get("ttl") != w.ttl or _plain(opts) != _plain(w.options) or ("secret" in opts) != ("secret" in w.options):
        return True
    return "secret" in w.options and w.secret_version != sent_version


def sync(api: ServerAPI, body: dict[str, Any], project: str, qname: str) -> Outcome:
    """sync creates missing, updates changed and deletes removed subscriptions of the
    queue. A subscriber the server rejects is reported and the others still synced.
    Unavailable (server down) propagates: nothing is known then."""
    meta, spec = body["metadata"], body["spec"]
    status = body.get("status") or {}
    out = Outcome()
    want = wanted(meta["namespace"], spec, out)
    declared = {item["subscriber"] for item in spec.get("subscriptions") or []}
    before = {s["subscriber"]: s["id"] for s in status.get("subscriptions") or [] if s.get("id")}
    sent = {s["subscriber"]: s.get("secretVersion") for s in status.get("subscriptions") or []}
    if not want and not before:
        return out
    have = {s["subscriber"]: s for s in api.list_subscriptions(project, qname)}
    for w in want:
        cur = have.get(w.subscriber)
        try:
            if cur is None:
                out.managed[w.subscriber] = api.create_subscription(project, qname, w.subscriber, w.ttl, w.options)
                out.versions[w.subscriber] = w.secret_version
                events.info(body, reason="SubscriptionCreated", message=f"{w.subscriber} subscribed to {qname}")
                continue
            out.managed[w.subscriber] = str(cur["id"])
            out.versions[w.subscriber] = sent.get(w.subscriber) or ""
            if _needs_update(w, cur, sent.get(w.subscriber)):
                api.update_subscription(project, qname, str(cur["id"]), w.ttl, w.options)
                out.versions[w.subscriber] = w.secret_version
        except ServerError as exc:
            out.problems.append(("SubscriptionRejected", out.redact(f"{w.subscriber}: {exc.description or exc.title}")))
    # Subscriptions whose Secret is missing stay as they are on the server.
    for subscriber in declared - set(out.managed):
        if subscriber in before:
            out.managed[subscriber] = before[subscriber]
            out.versions[subscriber] = sent.get(subscriber) or ""
    for subscriber, sid in before.items():
        if subscriber in declared:
            continue
        if str((have.get(subscriber) or {}).get("id")) == sid:
            api.delete_subscription(project, qname, sid)
            events.info(body, reason="SubscriptionDeleted", message=f"{subscriber} unsubscribed from {qname}")
    return out


def remove_managed(api: ServerAPI, body: dict[str, Any], project: str, qname: str) -> None:
    """remove_managed deletes the subscriptions the Queue declared (its queue is being
    deleted; Zaqar keeps a queue's subscriptions after the queue itself is gone)."""
    for s in (body.get("status") or {}).get("subscriptions") or []:
        if s.get("id"):
            api.delete_subscription(project, qname, str(s["id"]))


def _health(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: int(d.get(k) or 0) for k in ("pending", "failed", "delivered")}
    if d.get("last_error"):
        out["lastError"] = str(d["last_error"])[:400]
    if d.get("last_error_at"):
        out["lastErrorAt"] = str(d["last_error_at"])
    return out


def status_fields(
    out: Outcome, deliveries: dict[str, Any] | None, conds: list[dict[str, Any]], gen: Any, declared: int
) -> dict[str, Any]:
    """status_fields are the Queue's subscriptions, delivery health and Subscribed
    condition, with every resolved secret redacted from the texts."""
    new: dict[str, Any] = {}
    by_id = {str(s.get("id")): s for s in (deliveries or {}).get("subscriptions") or []}
    subs = []
    for subscriber, sid in sorted(out.managed.items()):
        entry: dict[str, Any] = {"subscriber": subscriber, "id": sid}
        if out.versions.get(subscriber):
            entry["secretVersion"] = out.versions[subscriber]
        if sid in by_id:
            entry.update(_health(by_id[sid]))
        subs.append(entry)
    new["subscriptions"] = subs
    if deliveries is not None:
        new["deliveries"] = _health(deliveries)
    for obj in [new.get("deliveries") or {}, *subs]:
        if "lastError" in obj:
            obj["lastError"] = out.redact(obj["lastError"])
    if out.problems:
        reason = out.problems[0][0]
        msg = "; ".join(m for _, m in out.problems)[:400]
        new["conditions"] = cond.set_condition(conds, CONDITION, False, reason, msg, gen)
    elif declared or cond.get_condition(conds, CONDITION):
        msg = f"{len(out.managed)} subscription(s) in place"
        new["conditions"] = cond.set_condition(conds, CONDITION, True, "Synced", msg, gen)
    return new
