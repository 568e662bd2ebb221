"""Regenerate docs/report.png: the HTML report of the bundled example suite, as Debian's
chromium draws it headless.

    .venv/bin/python scripts/report_screenshot.py

Runs the README's main job three times with a flaky history in build/ (so the flaky grid
has a few runs), writes build/example-report.html, and screenshots it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("scripts/report_screenshot.py: needs chromium (apt-get install chromium)")
        return 2
    build = ROOT / "build"
    build.mkdir(exist_ok=True)
    history = build / "example-history.json"
    history.unlink(missing_ok=True)
    report = build / "example-report.html"
    for _ in range(3):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "examples",
                "-q",
                "-p",
                "no:cacheprovider",
                "--accel-cpu-devices=8",
                "--perf-baseline=examples/baseline.json",
                "--flaky-reruns=1",
                "--flaky-quarantine=examples/quarantine.txt",
                f"--flaky-history={history}",
                f"--accel-report={report}",
            ],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    shot = ROOT / "docs" / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={build / 'chromium-profile'}",
            f"--screenshot={shot}",
            "--window-size=1400,2050",
            report.as_uri(),
        ],
        check=True,
        capture_output=True,
    )
    print(f"{shot.relative_to(ROOT)}: {shot.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
