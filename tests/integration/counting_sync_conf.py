"""The counting conf trained synchronously, its strategy written where `k8s manifest` reads it (the counting conf
chooses its strategy from COUNT_SYNC as it is imported, which a reading of its source cannot tell)."""

import os
import sys

os.environ["COUNT_SYNC"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from counting_conf import CountingConf  # noqa: E402  (after COUNT_SYNC: the model reads it as it is imported)


class CountingSyncConf(CountingConf):
    strategy = "multi_worker_mirrored"
