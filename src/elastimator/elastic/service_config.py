"""Where a job's shard service is, and its token: `ServiceConfig`, read from the environment the launcher (or a
Kubernetes manifest) sets. No TensorFlow: the standalone service (`elastimator shard-service`) reads it too.

This module is the only reader of ELASTIMATOR_SHARD_SERVICE / ELASTIMATOR_JOB_TOKEN.
"""

from __future__ import annotations

import dataclasses
import os

from elastimator.errors import ReaderError

ENV_ADDRESS = "ELASTIMATOR_SHARD_SERVICE"
ENV_TOKEN = "ELASTIMATOR_JOB_TOKEN"
ENV_WORKER_TIMEOUT = "ELASTIMATOR_WORKER_TIMEOUT_SECS"
ENV_STANDALONE = "ELASTIMATOR_SHARD_SERVICE_STANDALONE"
ENV_LISTEN = "ELASTIMATOR_SHARD_SERVICE_LISTEN"
ENV_REPORT_PORT = "ELASTIMATOR_SHARD_REPORT_PORT"


@dataclasses.dataclass(frozen=True)
class ServiceConfig:
    """Where the job's shard service is, and its token."""

    address: str
    token: str
    worker_timeout_secs: float = 30.0
    """A worker silent this long is failed and its shards go back."""
    standalone: bool = False
    """The service runs on its own (`elastimator shard-service`), not in the chief."""
    listen: str | None = None
    """host:port the chief binds (default: `address`), e.g. 0.0.0.0:2223 in a pod that others reach by name."""
    report_port: int | None = 0
    """The port of the service's report line (elastic/report_line_server.py) on the same host: 0 for any free one
    (the service tells its workers which), None for none (reports go over gRPC)."""

    @staticmethod
    def token_from_env() -> str:
        token = os.environ.get(ENV_TOKEN, "")
        if not token:
            raise ReaderError(f"Set {ENV_TOKEN} to the job's token; the shard service refuses calls without it.")
        return token

    @classmethod
    def from_env(cls) -> "ServiceConfig | None":
        address = os.environ.get(ENV_ADDRESS, "").strip()
        if not address:
            return None
        token = os.environ.get(ENV_TOKEN, "")
        if not token:
            raise ReaderError(f"{ENV_ADDRESS} is set but {ENV_TOKEN} is not; every process of the job needs the "
                              "job token.")
        timeout = os.environ.get(ENV_WORKER_TIMEOUT, "30")
        standalone = os.environ.get(ENV_STANDALONE, "") not in ("", "0", "false", "False")
        listen = os.environ.get(ENV_LISTEN, "").strip() or None
        try:
            timeout_secs = float(timeout)
        except ValueError:
            raise ReaderError(f"{ENV_WORKER_TIMEOUT} must be a number of seconds; got {timeout!r}.") from None
        return cls(address, token, timeout_secs, standalone, listen, report_port_from(os.environ.get(ENV_REPORT_PORT)))


def report_port_from(text: str | None) -> int | None:
    """A report line port as the environment or the command line spells it: a number, or "off"."""
    text = (text or "0").strip()
    if text.lower() == "off":
        return None
    if text.isdigit() and int(text) < 65536:
        return int(text)
    raise ReaderError(f"{ENV_REPORT_PORT} (or --report-port): expected a port number (0 for any free one) or "
                      f"'off'; got {text!r}.")
