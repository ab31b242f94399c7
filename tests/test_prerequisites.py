"""tests/prerequisites.py, the README's test command's first environment: each missing tool or a short disk is one
line that says how to get it, and chromium is installed only where this user may."""

import shutil
from collections import namedtuple

import prerequisites


def test_each_missing_tool_and_a_short_disk_is_one_line_saying_how_to_get_it(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(0, 0, 2 * 2**30))
    lines = prerequisites.missing(need_gib=7)
    assert [line.split(",")[0].split(":")[0] for line in lines] == [
        "Node 20 or later and npm",
        "chromium",
        "chromedriver",
        "disk",
    ]
    assert "apt-get install chromium chromium-driver" in lines[1] and "need 7 GiB" in lines[3]
    assert "\n" not in "".join(lines)
    assert prerequisites.missing(need_gib=1)[-1].startswith("chromedriver")  # 2 GiB free is enough once built


def test_chromium_is_installed_only_where_this_user_may(monkeypatch):
    calls = []
    monkeypatch.setattr(prerequisites.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(prerequisites.subprocess, "run", lambda args, **kw: calls.append(args) or _Done(1))
    assert prerequisites.install_browser() is None
    assert calls == [["sudo", "-n", "true"]]  # asked, and stopped at the refusal: nothing installed


class _Done:
    def __init__(self, code):
        self.returncode = code
