"""A user's FILE.npz read at its disk's speed, and refused in one line when it is none. np.load reads a member 256 KiB
at a time through zipfile into a Python buffer, 5.8 of a 131,072-key decode's 30 seconds for its 1 GB (profiled, issue
73). np.savez stores each array uncompressed, so its bytes lie in the file as they are: read with np.fromfile from
where the member starts, and checked against the member's CRC as zipfile would. A member compressed
(np.savez_compressed), encrypted or in an .npy version other than 1.0 and 2.0 is read by np.load."""

import struct
import zipfile
import zlib

import numpy as np

_LOCAL_HEADER = struct.Struct("<4s22xHH")  # a zip member's local header: signature, ..., name and extra lengths
_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


class Unreadable(Exception):
    """Why a file is no .npz explain reads, in one line (the caller names the file)."""


def read(path):
    """{name: array} of the .npz at `path`, nothing unpickled. Raises Unreadable, or FileNotFoundError."""
    try:
        with open(path, "rb") as file:  # ours to close: np.load leaves a file it opened open when it is no zip
            start = file.read(6)
            if not start.startswith((b"PK", b"\x93NUMPY")):  # else np.load says "pickled data... allow_pickle"
                raise Unreadable("empty" if not start else "not an .npz: no zip archive (np.savez writes one), no .npy")
            file.seek(0)
            stored = np.load(file, allow_pickle=False)
            if not isinstance(stored, np.lib.npyio.NpzFile):  # np.save's .npy: one array, no names
                raise Unreadable(
                    "holds one array (np.save's .npy), not named arrays: save them with np.savez(path, q=q)"
                )
            with stored:
                return arrays(stored, file)
    except zipfile.BadZipFile as exc:
        raise Unreadable(f"not a readable .npz, damaged or cut short: {exc} (write it again with np.savez)") from None
    except (ValueError, EOFError) as exc:
        raise Unreadable(f"not a readable .npz (np.savez writes one): {type(exc).__name__}: {exc}") from None


def arrays(stored, file):
    """{name: array} of `stored`, np.load's NpzFile of the open `file`."""
    members = {info.filename: info for info in stored.zip.infolist()}
    found = {}
    for name in stored.files:
        direct = _direct(file, members.get(f"{name}.npy"))
        found[name] = stored[name] if direct is None else direct
    return found


def _direct(file, info):
    """The array a member holds, read straight from `file`; None where np.load must read it."""
    if info is None or info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:
        return None
    file.seek(info.header_offset)
    head = file.read(_LOCAL_HEADER.size)
    if len(head) < _LOCAL_HEADER.size:
        return None
    signature, name_length, extra_length = _LOCAL_HEADER.unpack(head)
    if signature != b"PK\x03\x04":
        return None
    start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
    file.seek(start)
    read_header = _HEADERS.get(np.lib.format.read_magic(file))
    if read_header is None:
        return None
    shape, fortran_order, dtype = read_header(file)
    if dtype.hasobject:
        return None  # np.load refuses it, saying why
    header_length = file.tell() - start
    file.seek(start)
    crc = zlib.crc32(file.read(header_length))
    count = int(np.prod(shape, dtype=np.int64))
    flat = np.fromfile(file, dtype=dtype, count=count)
    if flat.size != count or header_length + flat.nbytes != info.file_size:
        return None  # cut short or padded: np.load says what is wrong
    if zlib.crc32(flat.data, crc) != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    return flat.reshape(shape, order="F" if fortran_order else "C")
