"""Writing a file whole or not at all, and one line when the machine refuses.

Every file the suite writes for a user (reports, the matrix, the page, published tables, fuzz findings,
the benchmark's and the portability run's records) goes through `whole`: the bytes go to a hidden file of
its own beside the target and are renamed over it, so a reader never sees half a file, two writers never
mix theirs (the last to finish wins, whole), and a full or read-only disk leaves the last complete file
where it was. A refusal is `Refused`: one line that names the path, what the system said and what to
do; every command exits with EXIT on it (docs/testing.md lists the faults tried).
"""

import contextlib
import errno
import os
import secrets
from pathlib import Path

EXIT = 74  # sysexits.h's EX_IOERR: not a verdict (1), nor a wrong command line (2), nor one of pytest's (3-5)

_WHAT_TO_DO = {
    errno.EROFS: "choose a folder on a writable file system",
    errno.ENOSPC: "free space on that disk or choose a folder on another",
    errno.EDQUOT: "free space within your quota or choose a folder elsewhere",
    errno.EACCES: "choose a folder you may write to",
    errno.EPERM: "choose a folder you may write to",
    errno.ENOTDIR: "a file stands where a folder of that path should be: choose another path",
}


class Refused(Exception):
    """A file the machine would not let the suite write; the message is the one line to show."""


def refusal(path, exc, option=None):
    """`Refused` for `exc`, an OSError met writing `path`; `option` is the argument that chose the place."""
    if exc.errno == errno.EEXIST and not Path(exc.filename or path).is_dir():  # mkdir met a file: the path's fault
        exc = NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), exc.filename)
    said = exc.strerror or str(exc)
    do = _WHAT_TO_DO.get(exc.errno, "check that folder")
    return Refused(f"{path}: cannot write ({said}): {do}" + (f" ({option})" if option else ""))


def whole(path, data, option=None):
    """Write `data` (bytes) to `path` whole or not at all; Refused if the machine will not."""
    path = Path(path)
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Named per writer; created as open() creates files (0666 less the umask), where mkstemp would make it 0600.
        temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
        temporary = None
    except OSError as exc:
        raise refusal(path, exc, option) from None
    finally:
        if temporary is not None:  # a failed write or rename leaves nothing beside the file
            with contextlib.suppress(OSError):
                os.unlink(temporary)
