"""A script that calls get_client() at module level: one line, before any worker starts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from dkernel.runtime import in_main_block


def test_module_level_get_client_is_refused_with_one_line(tmp_path):
    script = tmp_path / "bad.py"
    script.write_text("from dkernel.runtime import get_client\n\nclient = get_client()\n")
    env = {**os.environ, "DASK_CONFIG": str(tmp_path / "cfg")}
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert "get_client() at the top level of bad.py (line 3)" in last
    assert 'if __name__ == "__main__":' in last
    assert "Nanny" not in run.stderr and len(run.stderr.splitlines()) < 20


def test_in_main_block(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(
        textwrap.dedent(
            """\
            import os
            x = 1
            if __name__ == "__main__":
                y = 2
                z = 3
            w = 4
            """
        )
    )
    assert not in_main_block(str(script), 2)
    assert in_main_block(str(script), 4) and in_main_block(str(script), 5)
    assert not in_main_block(str(script), 6)
