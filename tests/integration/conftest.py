import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared"
# Set by scripts/test_server_sanitized.sh, which runs the server tests against the ASan + UBSan
# CLI: there the process's memory figures are mostly ASan's (quarantine, shadow), not ours.
SANITIZED = os.environ.get("DEEPINFER_SANITIZED") == "1"


@pytest.fixture(scope="session")
def deepinfer_bin():
    path = pathlib.Path(os.environ.get("DEEPINFER_BIN", ROOT / "build" / "deepinfer"))
    if not path.exists():
        pytest.fail(f"{path} not built: run scripts/build.sh release first")
    return str(path)


@pytest.fixture
def run_cli(deepinfer_bin):
    """Runs the CLI; returns CompletedProcess with text stdout/stderr."""

    def run(*args, check=False, timeout=120):
        proc = subprocess.run([deepinfer_bin, *map(str, args)], capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"deepinfer {args} failed ({proc.returncode}): {proc.stderr}")
        return proc

    return run


def load_golden(model):
    return json.loads((DATA / model / "golden.json").read_text(encoding="utf-8"))
