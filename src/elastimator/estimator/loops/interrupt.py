"""Ctrl-C and SIGTERM during `train()`: finish the step, save a checkpoint, then stop as the signal asked.

Kubernetes sends SIGTERM before it evicts or preempts a pod, and a person presses
Ctrl-C; either used to lose every step since the last periodic checkpoint. While a
`train()` call runs in the main thread, the first SIGINT or SIGTERM only asks the
monitored session to stop after the step under way, so the session's end saves a
checkpoint (and the checkpoint listeners seal the shard service's progress with it).
Then the signal takes its usual course: SIGINT raises `KeyboardInterrupt`, SIGTERM
ends the process by SIGTERM. A second signal, or a save that takes longer than the
grace time, does that at once.

The grace time starts when the signal arrives, even while the main thread is
inside a native call (a step waiting for a parameter server that is gone), where
Python runs no signal handler until the call returns: the signal's wake-up byte
(`signal.set_wakeup_fd`) arms the watchdog from another thread.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import tensorflow as tf

logger = logging.getLogger("elastimator")

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_SECS = 25.0
"""How long the step under way and the final save may take after the first signal (Kubernetes waits 30 s
between its SIGTERM and its SIGKILL by default)."""


def _act_now(signum: int) -> None:
    """What the signal would have done without us: KeyboardInterrupt for SIGINT, the default action otherwise."""
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


class StopOnSignalHook(tf.compat.v1.train.SessionRunHook):
    """Turns the first SIGINT/SIGTERM into a stop request (a signal the process was started with ignored stays
    ignored).

    Once the session has closed, `close()` puts the previous handlers back (always) and `deliver()`
    lets a received signal act.
    """

    def __init__(self, grace_secs: float = GRACE_SECS):
        self._grace_secs = grace_secs
        self._previous: dict[int, object] = {}
        self._watchdog: threading.Timer | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._wakeup: int | None = None
        """The write end of the pipe the C-level signal handler writes each signal's number to."""
        self._previous_wakeup = -1
        self.received: int | None = None
        """The signal that asked training to stop, if one did."""

    def begin(self):
        if threading.current_thread() is not threading.main_thread():
            return  # Signal handlers belong to the main thread; elsewhere signals keep their usual effect.
        for signum in SIGNALS:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # ignored by whoever started this process (nohup, a background job): it stays ignored
            self._previous[signum] = signal.signal(signum, self._handle)
        read, self._wakeup = os.pipe()
        os.set_blocking(self._wakeup, False)
        self._previous_wakeup = signal.set_wakeup_fd(self._wakeup, warn_on_full_buffer=False)
        threading.Thread(target=self._listen, args=(read,), name="signal-wakeup", daemon=True).start()

    def _listen(self, read: int) -> None:
        """Arms the watchdog as soon as a signal arrives; ends when the write end closes."""
        try:
            while data := os.read(read, 64):
                for signum in data:
                    if signum in SIGNALS:
                        self._arm(signum)
        finally:
            os.close(read)

    def _arm(self, signum: int) -> None:
        with self._lock:
            if self._watchdog is not None or self._closed:
                return
            self._watchdog = threading.Timer(self._grace_secs, self._expire, args=(signum,))
            self._watchdog.daemon = True
            self._watchdog.start()

    def _handle(self, signum, frame):
        del frame
        if self.received is not None:  # a second signal: no more waiting
            self._restore()
            _act_now(signum)
            return
        self.received = signum
        logger.warning("%s received: stopping after this step and saving a checkpoint (at most %.0fs; send it "
                       "again to stop at once).", signal.Signals(signum).name, self._grace_secs)
        self._arm(signum)

    def _expire(self, signum: int) -> None:
        # This runs in the watchdog's thread, where signal handlers cannot be changed: end the process directly,
        # with the exit status a shell gives a process the signal ended.
        logger.error("The step and the checkpoint did not finish within %.0fs of %s; stopping now.",
                     self._grace_secs, signal.Signals(signum).name)
        logging.shutdown()
        os._exit(128 + signum)  # pylint: disable=protected-access

    def after_run(self, run_context, run_values):
        del run_values
        if self.received is not None:
            run_context.request_stop()

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            os.close(self._wakeup)  # the listening thread reads the end of the pipe and stops
            self._wakeup = None

    def close(self) -> None:
        """Cancels the grace-time watchdog and puts the previous handlers back."""
        with self._lock:
            self._closed = True
            if self._watchdog is not None:
                self._watchdog.cancel()
        self._restore()

    def deliver(self) -> None:
        """After the session closed and saved: a received signal acts as it would have at once."""
        if self.received is not None:
            logger.warning("Stopped by %s after saving a checkpoint.", signal.Signals(self.received).name)
            _act_now(self.received)
