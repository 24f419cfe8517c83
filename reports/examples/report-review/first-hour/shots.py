"""Screenshots of a report: its first screen (W x 900) and one figure element, at 1400 and 900 px wide."""
import sys
from pathlib import Path
from playwright.sync_api import sync_playwright
html, prefix = Path(sys.argv[1]), sys.argv[2]
figure = sys.argv[3] if len(sys.argv) > 3 else None
with sync_playwright() as p:
    b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox", "--disable-gpu"])
    for width in (1400, 900):
        page = b.new_page(viewport={"width": width, "height": 900})
        page.goto(html.resolve().as_uri(), wait_until="load")
        page.screenshot(path=f"{prefix}-first-screen-{width}.png")
        if figure:
            page.locator(f"#figure-{figure}").screenshot(path=f"{prefix}-{figure}-{width}.png")
        page.close()
    b.close()
