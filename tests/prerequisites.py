"""What the README's test command (`tox -p auto`) needs besides Python 3.11, checked in its first second: Node 20 and
npm for the TF.js column, chromium and its driver for the page's browser test. Without this a fresh machine learned
of a missing chromium-driver 40 minutes in, when the browser test ran last (issue 60). Exit 1 naming each missing
tool and how to install it; 0 with one line when all are there."""

import re
import shutil
import subprocess
import sys

APT = "apt-get install chromium chromium-driver (Debian, Ubuntu; as root)"


def missing():
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
    return found


if __name__ == "__main__":
    lacking = missing()
    for line in lacking:
        print(f"error: missing {line}", file=sys.stderr)
    if lacking:
        print("the others run on; those needing these fail at their end: install, then rerun", file=sys.stderr)
        sys.exit(1)
    print("prerequisites: node, npm, chromium and chromedriver found")
