"""Screenshots of each page kind, at desktop and phone width, in the light and dark themes.

    python scripts/screenshots.py [--site shipped|sample] [--edition public|member] [--out DIR]

Builds the chosen site into a temporary folder, serves it on 127.0.0.1 and drives the
system's Chromium through Playwright. Files are named <kind>-<width>-<theme>.png.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
KINDS = {
    "sample": {
        "home": "index.html", "course": "courses/demo/index.html",
        "capsule": "courses/demo/bandwidth/index.html",
        "capsule-locked": "courses/demo/tiling/index.html",
        "syllabus": "courses/demo/syllabus/index.html", "path": "paths/starter/index.html",
        "question": "questions/is-it-bound/index.html", "experiment": "experiments/bound/index.html",
        "ladder": "ladder/index.html", "search": "search/index.html?q=bandwidth", "404": "404.html",
    },
    "shipped": {
        "home": "index.html", "course": "courses/kernel-engineering/index.html",
        "capsule": "courses/kernel-engineering/roofline/index.html",
        "syllabus": "courses/kernel-engineering/syllabus/index.html",
        "path": "paths/gpu-kernels/index.html",
        "question": "questions/decode-128k/index.html",
        "experiment": "experiments/decode-economics/index.html",
        "roofline": "experiments/roofline-explorer/index.html",
        "ladder": "ladder/index.html", "search": "search/index.html?q=softmax", "404": "404.html",
    },
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", choices=sorted(KINDS), default="shipped")
    ap.add_argument("--edition", default="public")
    ap.add_argument("--out", type=Path, default=REPO / "build" / "screenshots")
    ap.add_argument("--full-page", action="store_true", help="capture the whole page, not the viewport")
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from curriculum.build import build

    root = REPO if args.site == "shipped" else REPO / "tests" / "fixtures" / "sample"
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        build(root, out_dir=Path(tmp), editions=[args.edition], templates=REPO / "templates")
        handler = functools.partial(_Quiet, directory=str(Path(tmp) / args.edition))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
            for theme in ("light", "dark"):
                for size, (w, h) in SIZES.items():
                    context = browser.new_context(viewport={"width": w, "height": h},
                                                  color_scheme=theme, device_scale_factor=1)
                    page = context.new_page()
                    for kind, rel in KINDS[args.site].items():
                        page.goto(base + rel, wait_until="networkidle")
                        name = args.out / f"{kind}-{size}-{theme}.png"
                        page.screenshot(path=str(name), full_page=args.full_page)
                        print(name)
                        if kind == "capsule" and size == "desktop":
                            # The keyboard help overlay, over the page.
                            page.keyboard.press("?")
                            name = args.out / f"help-{size}-{theme}.png"
                            page.screenshot(path=str(name))
                            print(name)
                            page.keyboard.press("Escape")
                    context.close()
            browser.close()
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
