"""JupyterLab for real: notebook 06 runs in a JupyterLab server, in headless Chromium, and its bank explorer follows
the step slider moved with the keyboard.

Needs Debian's ``chromium`` on PATH (``scripts/setup.sh`` installs it when it runs as root or with passwordless sudo);
Playwright drives it and never downloads a browser of its own. Without chromium the test is skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from secrets import token_hex

import papermill.iorw
import pytest
from papermill.parameterize import parameterize_notebook
from playwright.sync_api import expect, sync_playwright

from comprl import console
from comprl.kit.notebook_runner import NOTEBOOKS, REPO_ROOT
from comprl.config import make_config
from comprl.runs import Run
from comprl.loop import run_experiment
from comprl.kit.widgets import BankExplorer

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="needs Debian's chromium on PATH (apt-get install chromium; scripts/setup.sh does it as root)",
)

NOTEBOOK = "06_bank_explorer.ipynb"
SCREENSHOT = REPO_ROOT / "results" / "jupyterlab" / "bank_explorer.png"
"""Where the test leaves a picture of the explorer in JupyterLab (results/ is git-ignored)."""
READY_S = 120
"""Seconds to wait for the server, the kernel, and the notebook's outputs (each on a cold 2-core machine)."""


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, seeded_bank) -> Run:
    """A finished comp_rl run of the smoke profile (2 steps) whose bank starts from three Room lessons."""
    config = make_config("smoke", method="comp_rl", **{"bank.init_from": str(seeded_bank)})
    return run_experiment(config, output_dir=tmp_path_factory.mktemp("runs"), name="comp_rl_seed0", progress=False)


def _wait_ready(server: subprocess.Popen, runtime: Path, token: str, log: Path) -> str:
    """The server's base URL once it answers ``/api/status``; fails with its log if it exits or takes too long."""
    info = runtime / f"jpserver-{server.pid}.json"
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"jupyter lab exited with status {server.returncode}:\n{log.read_text()}")
        if info.is_file():
            url = json.loads(info.read_text())["url"]
            try:
                with urllib.request.urlopen(f"{url}api/status?token={token}", timeout=5) as response:
                    if response.status == 200:
                        return url
            except (urllib.error.URLError, ConnectionError):
                pass
        time.sleep(0.2)
    pytest.fail(f"jupyter lab did not answer within {READY_S} s:\n{log.read_text()}")


@pytest.fixture()
def jupyter_lab(tmp_path):
    """(base URL, token, served folder) of a JupyterLab server on a free loopback port.

    Its config, data, runtime, settings and workspace folders, and the kernel's IPython folder, are under
    ``tmp_path``: nothing in the user's home is read or written.
    """
    home = tmp_path / "jupyter"
    folders = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "lab-settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "lab-workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    # No news or update toasts: they would cover the notebook, and fetching them needs the internet.
    notifications = folders["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
    notifications.mkdir(parents=True)
    (notifications / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    served = tmp_path / "served"
    served.mkdir()
    # The kernel runs as in a user's JupyterLab, not headless, even after a test in this process ran `comprl run`.
    env = {k: v for k, v in os.environ.items() if k != console.HEADLESS} | {k: str(v) for k, v in folders.items()}
    token = token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", "--port=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={served}",
    ]
    log = home / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield _wait_ready(server, folders["JUPYTER_RUNTIME_DIR"], token, log), token, served
    finally:
        server.terminate()  # the server shuts its kernels down on SIGTERM
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_bank_explorer_renders_in_jupyterlab_and_follows_the_step_slider(jupyter_lab, smoke_run):
    url, token, served = jupyter_lab
    notebook = parameterize_notebook(
        papermill.iorw.load_notebook_node(str(NOTEBOOKS / NOTEBOOK)), {"run_dir": str(smoke_run.path)}
    )
    papermill.iorw.write_ipynb(notebook, str(served / NOTEBOOK))
    with BankExplorer(smoke_run) as truth:
        first, last = truth.steps
        tables = {step: truth.table(step) for step in range(first, last + 1)}
    assert last - first >= 2, f"the smoke run should log steps {first}..{first + 2} at least, got {first}..{last}"
    ids = {
        step: [str(i) for i in table["id"].sort_values(ascending=False)] for step, table in tables.items()
    }  # newest first
    assert ids[first] != ids[last], "the bank should differ between the first and the last step"

    with sync_playwright() as playwright:
        # Playwright starts Chromium without its sandbox unless asked, so it runs as root too.
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{url}lab/tree/{NOTEBOOK}?token={token}")
            expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=READY_S * 1000)  # kernel up
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

            explorer = page.locator(".jp-OutputArea-output").filter(has=page.locator(".widget-tab"))
            expect(explorer).to_have_count(1, timeout=READY_S * 1000)
            history = page.locator(".jp-OutputArea-output", has_text="extractor_rejected")  # the last cell's table
            expect(history).to_have_count(1, timeout=READY_S * 1000)
            expect(page.locator(".jp-OutputArea-output", has_text="Traceback")).to_have_count(0)

            expect(explorer.get_by_role("tab")).to_have_text(["Entries", "Changes", "Provenance", "Retrieval"])
            step_slider = explorer.locator(".widget-slider").filter(has=page.get_by_text("step", exact=True))
            handle = step_slider.get_by_role("slider")
            entries = explorer.locator(".widget-tab .widget-html-content").first

            def expect_entries_at(step: int) -> None:
                """The slider shows ``step`` and the entries panel the bank's live entries at that step."""
                expect(handle).to_have_attribute("aria-valuetext", str(step))
                expect(entries).to_contain_text(f"{len(tables[step])} live entries at the end of step {step}")
                expect(entries.locator("tbody tr td:first-child")).to_have_text(ids[step])

            expect_entries_at(last)
            handle.focus()
            page.keyboard.press("Home")
            expect_entries_at(first)
            page.keyboard.press("ArrowRight")
            expect_entries_at(first + 1)

            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            explorer.scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()
