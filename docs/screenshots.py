"""Screenshots of the HTML report for the docs: ``docs/img/report_index.png`` and
``docs/img/report_instance.png``, taken with Debian's headless Chromium (selenium).

    collsynth report --store results/quick-store --out /tmp/quick-report
    python docs/screenshots.py /tmp/quick-report mesh4x4-failed-allgather
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1")
OUT = Path(__file__).resolve().parent / "img"


def shoot(report: Path, instance: str, width: int = 1400) -> list[Path]:
    """Screenshot the report's index (its first screens) and one instance page (whole)."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    profile = tempfile.mkdtemp(prefix="collsynth-shots-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    shots = [(report / "index.html", OUT / "report_index.png", 1500),
             (report / "instances" / f"{instance}.html", OUT / "report_instance.png", None)]
    try:
        for page, png, height in shots:
            driver.set_window_size(width, 1000)
            driver.get(page.resolve().as_uri())
            full = driver.execute_script("return document.documentElement.scrollHeight")
            driver.set_window_size(width, height or full)
            driver.save_screenshot(str(png))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
    return [png for _, png, _ in shots]


if __name__ == "__main__":
    print(*shoot(Path(sys.argv[1]), sys.argv[2]), sep="\n")
