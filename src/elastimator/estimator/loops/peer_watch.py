"""Ending a training step that waits on a process that is gone.

Under a strategy over several processes (MultiWorkerMirroredStrategy), every step all-reduces with every other
worker. When one dies, TensorFlow's coordination service notices (its log says so), but a step already running
in a TF1 session waits on the dead peer forever. `PeerWatchHook` watches the peers' servers from a thread of its
own; once one has refused connections `misses` times in a row, it closes the session, which cancels the waiting
step, and the training loop raises a ClusterError naming the peer (`gone`).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence

import tensorflow as tf

from elastimator._network import reachable

logger = logging.getLogger("elastimator")


class PeerWatchHook(tf.compat.v1.train.SessionRunHook):
    """Closes the training session once a peer's server stops accepting connections (see the module doc).

    Args:
        peers: "host:port" of every other process the steps all-reduce with.
        poll_secs: How often each peer is probed.
        misses: Probes in a row a peer must fail to count as gone (a restarting network blips).
        probe: Whether an address accepts connections now (tests give their own).
    """

    def __init__(self, peers: Sequence[str], poll_secs: float = 0.5, misses: int = 3,
                 probe: Callable[[str], bool] = reachable):
        self._peers = list(peers)
        self._poll_secs, self._misses, self._probe = poll_secs, misses, probe
        self._stop = threading.Event()
        self.gone: str | None = None
        """The first peer found gone (None: all answer)."""

    def after_create_session(self, session, coord):
        self._stop.clear()
        threading.Thread(target=self._watch, args=(session,), name="peer-watch", daemon=True).start()

    def end(self, session):
        self._stop.set()

    def _watch(self, session) -> None:
        failed = dict.fromkeys(self._peers, 0)
        while not self._stop.wait(self._poll_secs):
            for peer in self._peers:
                failed[peer] = 0 if self._probe(peer) else failed[peer] + 1
                if failed[peer] >= self._misses:
                    self.gone = peer
                    logger.error("%s stopped accepting connections; ending this training's session, whose steps "
                                 "wait on it.", peer)
                    session.close()  # cancels the step that waits on the peer
                    return
