"""The `sluice-operator` command: configuration, metrics, then Kopf's loop."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from dataclasses import asdict

import kopf
from kopf._core.engines import peering  # Identity is not re-exported by kopf
from kubernetes import config as kconfig

from . import metrics
from .config import Config, ConfigError


def load_kube_config() -> None:
    """load_kube_config uses the pod's service account in-cluster, else KUBECONFIG."""
    try:
        kconfig.load_incluster_config()
    except kconfig.ConfigException:
        kconfig.load_kube_config()


def identity() -> str:
    """identity names this operator instance for Kopf's peering and logs.

    Kopf's own default is user@host via getpass, which raises in the image:
    it runs as uid 65532, which has no passwd entry. The pod name is what an
    operator of the cluster recognises anyway.
    """
    return os.environ.get("POD_NAME") or socket.gethostname()


def main(argv: list[str] | None = None) -> int:
    """main runs the operator until it is stopped."""
    parser = argparse.ArgumentParser(prog="sluice-operator", description=__doc__)
    parser.add_argument("--check-config", action="store_true", help="print the configuration and exit")
    parser.add_argument("--verbose", action="store_true", help="debug logging")
    args = parser.parse_args(argv)
    try:
        cfg = Config.from_env()
    except ConfigError as exc:
        print(f"sluice-operator: {exc}", file=sys.stderr)
        return 2
    if args.check_config:
        print(json.dumps(asdict(cfg), indent=2, sort_keys=True))
        return 0
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else getattr(logging, cfg.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    load_kube_config()
    metrics.serve(cfg.metrics_port)
    from . import main as handlers  # noqa: F401  (registers the handlers)

    liveness = f"http://0.0.0.0:{cfg.liveness_port}/healthz" if cfg.liveness_port else None
    kopf.run(
        standalone=True,
        identity=peering.Identity(identity()),
        clusterwide=not cfg.watch_namespaces,
        namespaces=list(cfg.watch_namespaces),
        liveness_endpoint=liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
