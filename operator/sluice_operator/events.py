"""Kubernetes Events on sluice objects, posted through Kopf's event queue."""

from __future__ import annotations

from typing import Any, cast

import kopf


def info(body: dict[str, Any], reason: str, message: str) -> None:
    """info posts a Normal event on the object."""
    kopf.info(cast(Any, body), reason=reason, message=message)


def warn(body: dict[str, Any], reason: str, message: str) -> None:
    """warn posts a Warning event on the object."""
    kopf.warn(cast(Any, body), reason=reason, message=message)
