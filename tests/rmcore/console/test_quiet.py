"""rmcore.console.quiet: quiet_libraries imports neither transformers nor datasets, and each is set (warnings
only, no progress bars) when it is imported later, as an eager import used to set it at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

from rmcore.console.quiet import after_import

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import json, logging, sys
from rmcore.console.quiet import quiet_libraries
quiet_libraries()
loaded = sorted({"transformers", "datasets"} & set(sys.modules))
import transformers, datasets
tl = transformers.utils.logging
print(json.dumps({"loaded_before": loaded, "verbosity": tl.get_verbosity(), "bars": tl.is_progress_bar_enabled(),
                  "datasets_bars": not datasets.are_progress_bars_disabled(),
                  "datasets_verbosity": datasets.logging.get_verbosity()}))
"""


def test_the_libraries_are_quieted_when_they_load():
    # the environment asks for INFO: WARNING afterwards is quiet_libraries' doing
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRANSFORMERS_VERBOSITY": "info", "DATASETS_VERBOSITY": "info"}
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"loaded_before": [], "verbosity": 30, "bars": False, "datasets_bars": False,
                   "datasets_verbosity": 30}


def test_after_import_runs_at_once_for_a_loaded_module_and_once_on_a_later_import(tmp_path, monkeypatch):
    seen = []
    after_import("json", lambda m: seen.append(m.__name__))  # imported already: at once
    assert seen == ["json"]
    (tmp_path / "quiet_probe_mod.py").write_text("VALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    after_import("quiet_probe_mod", lambda m: seen.append(m.VALUE))
    assert seen == ["json"]  # not imported yet
    import quiet_probe_mod  # noqa: F401

    assert seen == ["json", 7]
    del sys.modules["quiet_probe_mod"]
    import quiet_probe_mod  # noqa: F401, F811  (a second import does not run the hook again)

    assert seen == ["json", 7]
    assert isinstance(sys.modules["quiet_probe_mod"], types.ModuleType)
    del sys.modules["quiet_probe_mod"]
