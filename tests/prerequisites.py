"""What the README's test command (`tox -p auto`) needs besides Python 3.11, checked in its first second: Node 20 and
npm for the TF.js column, chromium and its driver for the page's browser test, and the disk the environments take.
Without this a fresh machine learned of a missing chromium-driver 40 minutes in, when the browser test ran last
(issue 60). Chromium and its driver are installed where this user may (root, or sudo without a password), as CI
does; Node is not (which one a machine should have is its owner's choice). Exit 1 naming each missing thing and how to
get it; 0 with one line when all are there. `.ci/run` runs it first with --need-gib 8."""

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = ("chromium", "chromium-driver")
APT = "apt-get install " + " ".join(PACKAGES) + " (Debian, Ubuntu; as root)"
# tox's environments took 6.4 GiB on a fresh clone (measured); once torch's, the largest, is built, the rest is small.
FRESH_GIB, BUILT_GIB = 7, 1
BUILT = Path(".tox/torch/lib/python3.11/site-packages/torch")


def _browser_missing():
    return not (shutil.which("chromium") or shutil.which("chromium-browser")) or not shutil.which("chromedriver")


def install_browser():
    """apt-get chromium and its driver, where this user may: one line on what was done, or None when it may not."""
    as_root = [] if os.geteuid() == 0 else ["sudo", "-n"]
    if as_root and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0:
        return None
    if not shutil.which("apt-get"):
        return None
    quiet = {"capture_output": True, "env": os.environ | {"DEBIAN_FRONTEND": "noninteractive"}}
    if subprocess.run(["apt-cache", "show", "chromium-driver"], capture_output=True).returncode != 0:
        subprocess.run([*as_root, "apt-get", "update", "-qq"], **quiet)  # a fresh container's index is empty
    done = subprocess.run([*as_root, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES], **quiet)
    return f"installed {' and '.join(PACKAGES)} with apt-get" if done.returncode == 0 else None


def missing(need_gib):
    found = []
    node = shutil.which("node")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout if node else ""
    major = int(re.match(r"v(\d+)", version)[1]) if re.match(r"v(\d+)", version) else 0
    if major < 20 or not shutil.which("npm"):
        found.append(f"Node 20 or later and npm, for the tfjs column (found: {version.strip() or 'no node'})")
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        found.append(f"chromium, for the page's browser test: {APT}")
    if not shutil.which("chromedriver"):
        found.append(f"chromedriver, for the page's browser test: {APT}")
    free = shutil.disk_usage(".").free / 2**30
    if free < need_gib:
        found.append(f"disk: {free:.1f} GiB free on {Path('.').resolve()}, the environments need {need_gib:g} GiB")
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--need-gib", type=float, default=None, help="free disk needed (default: what tox builds)")
    need = parser.parse_args(argv).need_gib
    if need is None:
        need = BUILT_GIB if BUILT.is_dir() else FRESH_GIB
    if _browser_missing():
        said = install_browser()
        if said:
            print(f"prerequisites: {said}")
    lacking = missing(need)
    for line in lacking:
        print(f"error: missing {line}", file=sys.stderr)
    if lacking:
        print("what needs these fails: install, then rerun", file=sys.stderr)
        return 1
    print("prerequisites: node, npm, chromium, chromedriver and the disk found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
