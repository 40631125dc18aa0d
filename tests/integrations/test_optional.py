"""The frameworks stay optional: seakr imports without them, and a missing one is named in one line with the
extra that brings it."""

import subprocess
import sys

import pytest

BLOCK = "import sys; sys.modules['haystack'] = None; sys.modules['langchain_core'] = None; "


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=120)


def test_seakr_and_its_service_import_without_either_framework():
    r = python("import seakr, seakr.serve.app, seakr.integrations; print('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


@pytest.mark.parametrize("module, extra", [("haystack", "haystack"), ("langchain", "langchain")])
def test_a_missing_framework_says_which_extra_to_install(module, extra):
    r = python(f"import seakr.integrations.{module}")
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode != 0 and last.startswith("ImportError: ") and f"pip install 'seakr[{extra}]'" in last
