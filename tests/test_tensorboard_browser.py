"""TensorBoard for real: a 2-step smoke comp_rl run's event files served by ``tensorboard`` on a loopback port and
read in headless Chromium, where the run's three groups (``actor``, ``experience``, ``eval``) each show a chart
with a drawn line.

Needs Debian's ``chromium`` on PATH (``scripts/setup.sh`` installs it when it runs as root or with passwordless
sudo) and Playwright (the dev extra), which drives it and never downloads a browser of its own; without either the
test is skipped. With ``COMPRL_SCREENSHOT=1`` it also writes :data:`SCREENSHOT` (committed, as a picture of what a
run shows in TensorBoard)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from comprl.config import make_config
from comprl.kit.notebook_runner import REPO_ROOT
from comprl.loop import run_experiment
from comprl.runs import Run

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="needs Debian's chromium on PATH (apt-get install chromium; scripts/setup.sh does it as root)",
)
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="needs Playwright to drive chromium (pip install -e '.[dev]')"
)

GROUPS = ("actor", "experience", "eval")
"""The tracker's groups of a comp_rl run's scalars (:func:`comprl.tracking.tag`)."""
SHOWN = ("actor/tokens_per_second", "eval/guided_with_entry", "experience/bank_size")
"""One chart of each group for the screenshot, of values that change over the run's steps."""
SCREENSHOT = REPO_ROOT / "results" / "tensorboard" / "smoke_run.png"
"""Where ``COMPRL_SCREENSHOT=1`` leaves the picture of the run's charts (committed)."""
READY_S = 120
"""Seconds to wait for TensorBoard to serve the run's scalars, and for the page to draw them (a cold 2-core machine)."""
LINE = ".series-view > svg > path[d*=L]"
"""A drawn line of a chart, as TensorBoard's SVG renderer (``?forceSVG=true``) writes it: a series' path that joins
two points or more (its ``d`` goes on with an ``L``)."""


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory, seeded_bank) -> Run:
    """A finished 2-step comp_rl run of the smoke profile, its rows streamed to TensorBoard (the default tracker);
    its bank starts from three Room lessons, so that the experience side's charts have entries to count."""
    config = make_config("smoke", method="comp_rl", steps=2, tracker="tensorboard",
                         **{"bank.init_from": str(seeded_bank)})
    return run_experiment(config, output_dir=tmp_path_factory.mktemp("runs"), name="comp_rl_seed0", progress=False)


def _free_port() -> int:
    """A loopback port no process listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_scalars(server: subprocess.Popen, url: str, log: Path) -> None:
    """Return once TensorBoard serves scalars of every group in :data:`GROUPS`; fail with its log if it exits or takes
    longer than :data:`READY_S`."""
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"tensorboard exited with status {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}data/plugin/scalars/tags", timeout=5) as response:
                runs = json.load(response)
            if {tag.split("/")[0] for tags in runs.values() for tag in tags} >= set(GROUPS):
                return
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError):
            pass
        time.sleep(0.2)
    pytest.fail(f"tensorboard did not serve the groups {GROUPS} within {READY_S} s:\n{log.read_text()}")


@pytest.fixture()
def tensorboard(smoke_run, tmp_path):
    """The base URL of ``tensorboard --logdir <run folder>`` on a free loopback port; the server is killed after."""
    port = _free_port()
    command = [
        sys.executable, "-m", "tensorboard.main", "--logdir", str(smoke_run.path), "--host", "127.0.0.1",
        "--port", str(port),
    ]
    log = tmp_path / "tensorboard.log"
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_for_scalars(server, url, log)
        yield url
    finally:
        server.kill()
        server.wait(timeout=30)


def _scroll_until_drawn(page, group, name: str) -> None:
    """Open ``group`` (a card group) if it is collapsed and scroll it to the top until one of its charts has a drawn
    line: TensorBoard draws a card only once it comes into view, and the cards drawn above a group push it down
    again. Fails after :data:`READY_S`."""
    collapsed = group.locator(".group-toolbar mat-icon[data-mat-icon-name=expand_more_24px]")
    if collapsed.count():  # TensorBoard opens the first two groups only: open it as a user does, with a click
        collapsed.click()
    deadline = time.monotonic() + READY_S
    while not group.locator(f"scalar-card {LINE}").count():
        if time.monotonic() > deadline:
            pytest.fail(f"no chart of the {name} group drew a line within {READY_S} s")
        group.evaluate("element => element.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(200)


def test_tensorboard_shows_the_actor_experience_and_eval_groups_each_with_a_drawn_line(tensorboard):
    expect, wait = sync_api.expect, READY_S * 1000  # every wait in milliseconds
    with sync_api.sync_playwright() as playwright:
        # Playwright starts Chromium without its sandbox unless asked, so it runs as root too.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, timeout=wait)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(wait)
            page.goto(f"{tensorboard}?forceSVG=true#timeseries")  # SVG paths instead of a WebGL canvas
            for name in GROUPS:
                group = page.locator(".card-group").filter(
                    has=page.locator(".group-title", has_text=re.compile(f"^{name}$"))
                )
                expect(group).to_have_count(1, timeout=wait)
                _scroll_until_drawn(page, group, name)
                expect(group.locator(".group-title")).to_be_visible(timeout=wait)

            if os.environ.get("COMPRL_SCREENSHOT") == "1":
                page.get_by_role("button", name="Close side pane").click(timeout=5000)
                tags = page.get_by_role("combobox", name="Filter tags (regex)")
                tags.fill("^(" + "|".join(SHOWN) + ")$")
                tags.press("Escape")  # the suggestions list would cover the charts
                cards = page.locator("metrics-filtered-view scalar-card")  # the charts of the tags it matches
                expect(cards).to_have_count(len(SHOWN), timeout=wait)
                for card in cards.all():
                    expect(card.locator(LINE)).not_to_have_count(0, timeout=wait)
                page.set_viewport_size({"width": 1400, "height": 620})  # the three charts, not the space below
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()
