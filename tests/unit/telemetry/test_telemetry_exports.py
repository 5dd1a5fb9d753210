import subprocess
import sys

import execrl.telemetry


def test_all_names_exist():
    assert execrl.telemetry.__all__
    for name in execrl.telemetry.__all__:
        assert hasattr(execrl.telemetry, name), name


def test_import_is_cheap():
    """The training loop and the CLI import telemetry; plotting, aiohttp and torch must stay out of it."""
    code = (
        "import sys, execrl.telemetry, execrl.telemetry.cli, execrl.eval.passk; "
        "print(sorted(m for m in ('matplotlib', 'aiohttp', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
