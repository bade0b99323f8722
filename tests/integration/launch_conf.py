"""The census job, for launcher tests; with HANG_ROLE set, that role's process hangs while importing it."""

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "census"))

from census_conf import CensusConf  # noqa: E402

_task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("type")
if _task is not None and _task == os.environ.get("HANG_ROLE"):
    time.sleep(3600)


class LaunchConf(CensusConf):
    save_steps = 500
