"""PeerWatchHook: a peer that refuses connections several probes in a row closes the session (which cancels the
step waiting on it); one that blips does not."""

import threading
import time

from elastimator.estimator.loops.peer_watch import PeerWatchHook


class Session:
    def __init__(self):
        self.closed = threading.Event()

    def close(self):
        self.closed.set()


def test_a_peer_gone_for_three_probes_closes_the_session_and_is_named():
    answers = {"a:1": iter([True] * 1000), "b:2": iter([True, False, True, False, False, False] + [False] * 1000)}
    hook = PeerWatchHook(["a:1", "b:2"], poll_secs=0.001, misses=3, probe=lambda peer: next(answers[peer]))
    session = Session()
    hook.after_create_session(session, coord=None)
    assert session.closed.wait(5)
    assert hook.gone == "b:2"


def test_peers_that_answer_leave_the_session_alone_and_the_watch_stops_at_the_end():
    probes, probed_enough = [], threading.Event()

    def probe(peer):
        probes.append(peer)
        if len(probes) > 5:
            probed_enough.set()
        return True

    hook = PeerWatchHook(["a:1"], poll_secs=0.001, probe=probe)
    session = Session()
    hook.after_create_session(session, coord=None)
    assert probed_enough.wait(5)
    hook.end(session)
    count = len(probes)
    time.sleep(0.05)
    assert count > 3 and len(probes) <= count + 1 and not session.closed.is_set() and hook.gone is None
