"""The scenario player in a real browser (issue 18, items 1 and 6).

view: `mastemu view` of gms-failover opened in headless Chromium jumps to
the GMS crash, steps to the new leader and shows its epoch, with no script
error, and plays; names from a scenario, its tenants, its workloads and a
cluster trace's jobs that are markup (`</script><script>…`,
`<img onerror=…>`) show as text and run nothing, in the player and in the
report; chaos's report shows what happened and its plots side by side
(item 5). Screenshots go to the test's
tmp_path. Skipped only where Debian's chromium is not installed (`.ci/run`
installs it).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from actors.mast.scripted import job, scenario, workload
from emulator.cli.main import main
from emulator.registry import REPORTERS, load_plugins
from emulator.run.runner import execute, plan_run
from emulator.run.scenario import convert_scenario
from emulator.testing import run_scenario

load_plugins()

CHROMIUM = Path("/usr/bin/chromium")
DRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
# What a hostile name would run if it reached the page as markup.
SCRIPT = "</script><script>window.__pwned = 'script'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'\">"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.TemporaryDirectory(prefix="mastemu-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile.name}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        profile.cleanup()


def script_errors(driver: Any) -> list[str]:
    """The console's errors since the last call (uncaught exceptions are SEVERE)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def press(driver: Any, keys: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.TAG_NAME, "body").send_keys(keys)


def role_row(driver: Any, role: str) -> tuple[str, str]:
    """(leader, epoch) shown for `role` in the control-plane table, once rendered."""
    return driver.execute_script(
        "const r = [...document.querySelectorAll('#roles tbody tr')]"
        ".find((tr) => tr.dataset.role === arguments[0]);"
        "return r ? [r.querySelector('.leader').textContent, r.querySelector('.epoch').textContent]"
        " : null;",
        role,
    )


def settle(driver: Any) -> None:
    # The page renders on the next animation frame; wait for two.
    driver.execute_async_script(
        "const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(done));"
    )


def test_view_gms_failover_steps_from_the_crash_to_the_new_leader_s_epoch(
    browser: Any, tmp_path: Path
) -> None:
    run = run_scenario("gms-failover", out_dir=tmp_path)
    page = tmp_path / "player.html"
    assert main(["view", str(run.db), "--out", str(page)]) == 0
    browser.get(page.as_uri())
    settle(browser)
    press(browser, "f")  # the next fault: the GMS leader's crash at 46m10s
    settle(browser)
    assert role_row(browser, "gms") == ["gms/0", "1"]  # its lease has not run out yet
    now = browser.execute_script("return document.querySelector('#log tr.now').textContent")
    assert "crash" in now and "gms/0" in now
    clock = browser.execute_script("return document.getElementById('clock').textContent")
    assert clock.startswith("0:46:10")
    browser.save_screenshot(str(tmp_path / "gms-failover-crash.png"))
    press(browser, "l")  # the next leader change: the follower takes the lease
    settle(browser)
    assert role_row(browser, "gms") == ["gms/1", "2"]
    browser.save_screenshot(str(tmp_path / "gms-failover-new-leader.png"))
    # The position is in the URL: a link opens at the same instant.
    link = browser.current_url
    assert "#s=" in link
    browser.get("about:blank")
    browser.get(link)
    settle(browser)
    assert role_row(browser, "gms") == ["gms/1", "2"]
    # Play from there a moment, then pause: time moved on.
    position = "return document.getElementById('position').textContent"
    before = browser.execute_script(position)
    # At the default 5 emulated minutes a second the end (44 minutes on) is 9 s of
    # frames away: under load, a faster speed reached it before the pause key came
    # (playing stops at the end, and that key started it again).
    press(browser, " ")
    time.sleep(0.3)
    press(browser, " ")
    settle(browser)
    assert browser.execute_script(position) != before
    assert browser.execute_script("return document.getElementById('b-play').textContent") == "play"
    assert script_errors(browser) == []


def hostile_run(out: Path) -> Path:
    """A run whose description, tenant, workload and job names are markup."""
    raw = scenario([workload(SCRIPT, IMG, 0, job(IMG, gpus=8))], duration="30m")
    raw["name"] = "hostile"  # a run database's name: letters, digits and _.+=,@- only
    raw["description"] = f"{IMG} {SCRIPT}"
    raw["system"]["tenant_list"][0]["name"] = IMG
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, "hostile"), text, "hostile")
    result = asyncio.run(execute(plan, seed=1, out=out))
    assert result.status == "ok"
    return out


def test_view_names_that_are_markup_show_as_text_and_run_nothing(
    browser: Any, tmp_path: Path
) -> None:
    db = hostile_run(tmp_path / "hostile.db")
    page = tmp_path / "player.html"
    assert main(["view", str(db), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.count("</script>") == 2  # the data's element and the player's own
    browser.get(page.as_uri())
    settle(browser)
    press(browser, "d")  # the first decision: the workload is in the queue by then
    settle(browser)
    shown = browser.execute_script("return document.body.innerText")
    assert f"{IMG} {SCRIPT}" in shown  # the description, as text
    assert SCRIPT in shown and IMG in shown
    counts = browser.execute_script(
        "return [document.images.length, document.scripts.length, window.__pwned === undefined]"
    )
    assert counts == [0, 2, True]
    browser.save_screenshot(str(tmp_path / "hostile-player.png"))
    assert script_errors(browser) == []

    # The report of the same run: its page escapes them too.
    reporter = REPORTERS["mast"]
    report = asyncio.run(reporter.report(db))
    report_page = reporter.render_html(report, db, tmp_path / "report")
    browser.get(report_page.as_uri())
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.scripts.length") == 0
    # The description at the top of the report, as text; its only images are the plots.
    assert f"{IMG} {SCRIPT}" in browser.execute_script("return document.body.innerText")
    sources = browser.execute_script("return [...document.images].map(i => i.src)")
    assert all(src.endswith(".png") for src in sources)
    browser.save_screenshot(str(tmp_path / "hostile-report.png"))
    assert script_errors(browser) == []


def test_view_trace_job_names_that_are_markup_show_as_text_and_run_nothing(
    browser: Any, tmp_path: Path
) -> None:
    # A cluster run from a Tiresias trace whose job ids are markup.
    trace = tmp_path / "jobs.csv"
    quoted = SCRIPT.replace('"', '""')
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
        f'"{quoted}",4,0,1000,resnet50,100,10\n'
        f'"{IMG.replace(chr(34), chr(34) * 2)}",4,10,1000,vgg19,50,10\n',
        encoding="utf-8",
    )
    raw = {
        "name": "hostile-trace",
        "duration": "10m",
        "system": {
            "kind": "cluster",
            "policy": "fifo",
            "machines": 2,
            "gpus_per_machine": 4,
            "machines_per_rack": 2,
            "workload": {"trace": {"file": str(trace), "format": "tiresias"}},
        },
    }
    text = msgspec.json.encode(raw).decode()
    plan = plan_run(convert_scenario(raw, "hostile-trace"), text, "hostile-trace")
    db = tmp_path / "hostile-trace.db"
    assert asyncio.run(execute(plan, seed=1, out=db)).status == "ok"
    page = tmp_path / "player.html"
    assert main(["view", str(db), "--out", str(page)]) == 0
    browser.get(page.as_uri())
    settle(browser)
    press(browser, "d")  # the first decision: both jobs are in the queue by then
    settle(browser)
    shown = browser.execute_script("return document.body.innerText")
    assert SCRIPT in shown and IMG in shown
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return [document.images.length, document.scripts.length]") == [
        0,
        2,
    ]
    browser.save_screenshot(str(tmp_path / "hostile-trace-player.png"))
    assert script_errors(browser) == []

    reporter = REPORTERS["cluster"]
    report_page = reporter.render_html(asyncio.run(reporter.report(db)), db, tmp_path / "report")
    browser.get(report_page.as_uri())
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.scripts.length") == 0
    browser.save_screenshot(str(tmp_path / "hostile-trace-report.png"))
    assert script_errors(browser) == []


def test_view_report_of_chaos_shows_what_happened_and_its_plots_side_by_side(
    browser: Any, tmp_path: Path
) -> None:
    # The page docs/report-chaos.png shows: every plot loads, two of them share a row.
    db = run_scenario("chaos", out_dir=tmp_path).db
    reporter = REPORTERS["mast"]
    report = asyncio.run(reporter.report(db))
    page = reporter.render_html(report, db, tmp_path / "report")
    browser.get(page.as_uri())
    loaded = browser.execute_script(
        "return [...document.images].map(i => [i.complete && i.naturalWidth > 0, "
        "Math.round(i.getBoundingClientRect().top)])"
    )
    assert loaded and all(ok for ok, _ in loaded)
    tops = [top for _, top in loaded]
    assert len(set(tops)) < len(tops)  # a CSS grid: plots side by side at 1400 px
    faults = browser.execute_script("return document.querySelectorAll('.faults li').length")
    assert faults == len(report["fault_windows"]) > 0
    shown = browser.execute_script("return document.body.innerText")
    assert "What happened" in shown and "seeded random nemesis" in shown
    browser.save_screenshot(str(tmp_path / "chaos-report.png"))
    assert script_errors(browser) == []
