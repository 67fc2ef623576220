"""tmem.save and tmem.load: torch.save and torch.load of any picklable
object (a state_dict, a dict of them, a module); load also reads
torch.save's own zip files (_torch_zip).

A file is a 24-byte header (the magic ``TMEMSAVE``, a format version, the
payload's length and its CRC-32, little-endian) and the pickle, so that a
truncated or damaged file is an error naming it, never a wrong object. A
path is written atomically (a temporary file, fsync'ed and renamed: the old
file survives any failure); a file object is written where it stands.

As torch 2.6's torch.load, load is weights-only unless told otherwise: the
pickle may then hold only opcodes that build values (no BUILD, INST, OBJ,
NEWOBJ, persistent ids, extensions or out-of-band buffers) and call only
tmem's tensor and dtype rebuilds, which check their arguments, and a few
builtins whose arguments are checked (set, frozenset, bytes, bytearray,
OrderedDict, protocol 2's _codecs.encode). So a file runs no code, builds
no object with forged internals, and allocates no more than it holds."""
import _codecs
import io as _io
import os as _os
import pickle as _pickle
import pickletools as _pickletools
import stat as _stat
import struct as _struct
import zlib as _zlib
from collections import OrderedDict as _OrderedDict

from . import _device, _rebuild_dtype, _rebuild_tensor, _tmem, _torch_zip

_MAGIC = b"TMEMSAVE"
_VERSION = 1
_HEADER = _struct.Struct("<8sIQI")  # magic, version, payload bytes, CRC-32 of the payload
_CHUNK = 1 << 26  # bytes per read: a forged length costs no more memory than the stream holds


def _is_path(f):
    return isinstance(f, (str, bytes, _os.PathLike))


def _check_binary(f, who, mode):
    if isinstance(f, _io.TextIOBase):
        raise TypeError(f"{who}: f is a text file; open it in binary mode ({mode!r})")


def _write_all(f, data):
    """Writes all of data to the file object f, through short writes."""
    view = memoryview(data)
    while view:
        n = f.write(view)
        if n is None:
            raise _tmem.IOError("save: the file object took no bytes (a non-blocking stream that is full); "
                                "write to a blocking one")
        view = view[n:]


def save(obj, f, pickle_protocol=_pickle.DEFAULT_PROTOCOL):
    """Saves obj to f (torch.save): a path (str, bytes or os.PathLike),
    written atomically, or a binary file object, written at its position.
    Tensors keep their values, dtype, shape, device and requires_grad (not
    .grad, and views come back as tensors of their own, as copy.deepcopy
    gives them); other objects pickle as pickle.dumps does (modules and
    generators by tmem's own pickling). Raises the pickling error for an
    object with no pickled form (an optimizer: save its state_dict()),
    TypeError for a text file, tmem.ValueError for a path holding a NUL byte
    or a pickle_protocol outside [-1, pickle.HIGHEST_PROTOCOL], and
    tmem.IOError naming the file when writing fails."""
    if type(pickle_protocol) is not int or not -1 <= pickle_protocol <= _pickle.HIGHEST_PROTOCOL:
        raise _tmem.ValueError(f"save: pickle_protocol must be an int in [-1, {_pickle.HIGHEST_PROTOCOL}] (-1: the "
                               f"highest), but got {pickle_protocol!r}")
    path = _os.fsdecode(f) if _is_path(f) else None
    if path is not None and "\0" in path:
        raise _tmem.ValueError(f"save: the path {path!r} holds a NUL byte")
    if path is None:
        if not hasattr(f, "write"):
            raise TypeError(f"save: expected a path or a binary file object for f, but got {type(f).__name__}")
        _check_binary(f, "save", "wb")
    payload = _pickle.dumps(obj, protocol=pickle_protocol)
    data = _HEADER.pack(_MAGIC, _VERSION, len(payload), _zlib.crc32(payload)) + payload
    if path is None:
        _write_all(f, data)
        return
    try:
        _tmem._write_file_atomic(path, data)
    except _tmem.IOError as e:
        raise _tmem.IOError(f"save: {e}") from e


def _device_map(map_location):
    """The function from a saved device to the device to load onto."""
    if map_location is None:
        return lambda device: device
    if isinstance(map_location, str):
        return lambda device: map_location
    if isinstance(map_location, dict):
        for k, v in map_location.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"load: map_location must map device names to device names, but got {k!r}: {v!r}")
        return lambda device: map_location.get(device, device)
    raise TypeError(f"load: map_location must be None, a device name ('cpu', 'cuda:0') or a dict of device "
                    f"names, but got {type(map_location).__name__}")


def _sized(cls):
    """cls (set, bytes, ...) called only on an iterable the pickle holds: an
    int argument (bytes(2**40)) would allocate what the file does not hold."""
    def build(*args):
        if len(args) > 1 or (args and not isinstance(args[0], (list, tuple, str, bytes))):
            raise _pickle.UnpicklingError(f"{cls.__name__} called with {len(args)} arguments of types "
                                          f"{[type(a).__name__ for a in args]}")
        return cls(*args)
    return build


def _latin1(text, encoding):
    """Protocol 2's bytes: _codecs.encode(text, 'latin1') only."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _pickle.UnpicklingError(f"_codecs.encode called with {type(text).__name__} and {encoding!r}")
    return _codecs.encode(text, encoding)


_WEIGHTS_ONLY = {("tmem", "_rebuild_dtype"): _rebuild_dtype, ("collections", "OrderedDict"): _OrderedDict,
                 ("_codecs", "encode"): _latin1, ("tmem._device", "device"): _device.device}
for _module in ("builtins", "__builtin__"):  # protocol 2 names builtins by their Python 2 module
    for _cls in (set, frozenset, bytes, bytearray):
        _WEIGHTS_ONLY[(_module, _cls.__name__)] = _sized(_cls)
_REFUSED_OPCODES = {"BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "PERSID", "BINPERSID", "EXT1", "EXT2", "EXT4",
                    "NEXT_BUFFER", "READONLY_BUFFER"}


class _Unpickler(_pickle.Unpickler):
    """Maps tensors' devices, refuses two tensors made from one data object
    (which save() never writes: it would multiply a file's bytes in memory)
    and, weights-only, refuses every global but those of _WEIGHTS_ONLY."""

    def __init__(self, file, device_map, weights_only, name):
        super().__init__(file)
        self._device_map, self._weights_only, self._name = device_map, weights_only, name
        self._data_used = {}  # id -> the object, kept so that its id is not reused

    def _rebuild(self, data, dtype, shape, requires_grad, device):
        if id(data) in self._data_used:
            raise _pickle.UnpicklingError("two tensors are made from one data object, which save() never writes")
        self._data_used[id(data)] = data
        to = self._device_map(device) if isinstance(device, str) else device
        try:
            return _rebuild_tensor(data, dtype, shape, requires_grad, to)
        except _tmem.DeviceError as e:
            hint = "; pass map_location='cpu'" if to == device else ""
            raise _tmem.DeviceError(f"load: {self._name} holds a tensor saved on {device}, which cannot be loaded "
                                    f"onto {to} ({e}){hint}") from e

    def find_class(self, module, name):
        if (module, name) == ("tmem", "_rebuild_tensor"):
            return self._rebuild
        if not self._weights_only:
            return super().find_class(module, name)
        allowed = _WEIGHTS_ONLY.get((module, name))
        if allowed is None:
            raise _pickle.UnpicklingError(f"it names {module}.{name}")
        return allowed


def _check_opcodes(payload):
    """Raises UnpicklingError naming the first opcode a weights-only load
    refuses (read, not run, by pickletools)."""
    for opcode, _, pos in _pickletools.genops(payload):
        if opcode.name in _REFUSED_OPCODES:
            raise _pickle.UnpicklingError(f"it holds the opcode {opcode.name} at byte {pos}")


def load(f, map_location=None, weights_only=None):
    """Loads an object that save() wrote (torch.load) from a path or a binary
    file object. map_location puts the tensors on another device: a device
    name ('cpu') for all of them, or a dict from saved to new device names.
    weights_only (None: True, as torch 2.6) unpickles only tensors, dtypes,
    numbers, strings, bytes, sets and lists, tuples and dicts of them (see
    the module comment); anything else, a module included, raises
    pickle.UnpicklingError naming it and needs weights_only=False, which
    runs whatever code the file names (only for files you trust). It also
    reads torch.save's zip files (torch >= 1.6; _torch_zip), dtypes tmem
    lacks widened. Raises tmem.IOError naming the file when it cannot be
    read, is neither a tmem.save nor a torch.save file (torch's format
    before 1.6 says so), was written by a newer format, is truncated, has
    bytes after its object or fails its checksum; pickle.UnpicklingError
    naming it when its pickle is malformed or a torch file's tensors do not
    fit their storages; TypeError for a text file or a weights_only that is
    not a bool or None."""
    if weights_only is not None and type(weights_only) is not bool:
        raise TypeError(f"load: weights_only must be True, False or None, but got {weights_only!r}")
    device_map = _device_map(map_location)
    if _is_path(f):
        name = _os.fsdecode(f)
        if "\0" in name:
            raise _tmem.ValueError(f"load: the path {name!r} holds a NUL byte")
        try:
            stream = open(name, "rb")
        except OSError as e:
            raise _tmem.IOError(f"load: cannot open {name}: {e.strerror or e}") from e
        with stream:
            st = _os.fstat(stream.fileno())
            return _load(stream, name, st.st_size if _stat.S_ISREG(st.st_mode) else None, device_map, weights_only)
    if not hasattr(f, "read"):
        raise TypeError(f"load: expected a path or a binary file object for f, but got {type(f).__name__}")
    _check_binary(f, "load", "rb")
    return _load(f, f"the file object {getattr(f, 'name', type(f).__name__)!s}", None, device_map, weights_only)


def _load(stream, name, file_size, device_map, weights_only):
    """load() of the open binary stream, named name in errors."""
    try:
        payload, stream = _read(stream, name, file_size)
    except OSError as e:
        if isinstance(e, _tmem.IOError):
            raise
        raise _tmem.IOError(f"load: cannot read {name}: {e.strerror or e}") from e
    weights_only = weights_only is not False
    try:
        if payload is None:
            return _load_zip(stream, name, device_map, weights_only)
        if weights_only:
            _check_opcodes(payload)
        return _Unpickler(_io.BytesIO(payload), device_map, weights_only, name).load()
    except _torch_zip.Malformed as e:
        raise _pickle.UnpicklingError(f"load: {name} is not a well-formed torch.save file: {e}") from e
    except _torch_zip.Unsupported as e:
        raise _pickle.UnpicklingError(f"load: {name} holds what tmem cannot read: {e}") from e
    except _pickle.UnpicklingError as e:
        how = ("weights_only=True unpickles only tensors and plain containers, and " if weights_only else "")
        hint = "; pass weights_only=False if you trust the file (it can run any code)" if weights_only else ""
        raise _pickle.UnpicklingError(f"load: {how}{name} cannot be unpickled: {e}{hint}") from e
    except (EOFError, ValueError, TypeError) as e:  # a user class's own errors pass, weights_only=False
        if not weights_only and not isinstance(e, EOFError):
            raise
        raise _pickle.UnpicklingError(f"load: {name} holds a malformed pickle ({type(e).__name__}: {e})") from e


def _load_zip(stream, name, device_map, weights_only):
    """The object of a torch.save zip file (_torch_zip)."""
    archive, prefix, byteorder = _torch_zip.open_archive(stream, name)
    with archive:
        data = _torch_zip.read_stored(archive, prefix + "data.pkl", None, name)
        return _torch_zip.TorchUnpickler(_io.BytesIO(data), archive, prefix, byteorder, device_map, weights_only,
                                         _WEIGHTS_ONLY, name).load()


def _read(stream, name, file_size):
    """(the checked payload, stream) of a save() file read from stream, or
    (None, a seekable stream at its start) of a torch.save zip file;
    file_size, when known (a regular file), must be exactly header +
    payload."""
    head = _read_exactly(stream, _HEADER.size, name)
    if head[:4] == b"PK\x03\x04":
        return None, _rewound(stream, head, name)
    if head.startswith(_torch_zip.LEGACY_MAGIC):
        raise _tmem.IOError(f"load: {name} is a torch.save file of torch's format before 1.6, which tmem does not "
                            f"read; load it with torch and save it again with torch.save's default")
    if len(head) < _HEADER.size or not head.startswith(_MAGIC):
        raise _tmem.IOError(f"load: {name} is not a tmem.save file (it does not start with {_MAGIC.decode()})")
    _, version, size, crc = _HEADER.unpack(head)
    if version != _VERSION:
        raise _tmem.IOError(f"load: {name} has format version {version}, but this tmem reads version {_VERSION}; "
                            f"load it with the tmem that wrote it")
    if file_size is not None and file_size > _HEADER.size + size:
        raise _tmem.IOError(f"load: {name} has {file_size - _HEADER.size - size} bytes after the object its "
                            f"header describes (another file appended to it?)")
    have = file_size - _HEADER.size if file_size is not None else None
    payload = _read_exactly(stream, size, name) if have is None or have >= size else b""
    if len(payload) != size:
        found = have if have is not None else len(payload)
        raise _tmem.IOError(f"load: {name} is truncated: its header promises {size} bytes after it, but only "
                            f"{found} are there")
    if _zlib.crc32(payload) != crc:
        raise _tmem.IOError(f"load: {name} is damaged: its contents fail their CRC-32 check")
    return payload, stream


def _rewound(stream, head, name):
    """stream moved back to before head, the bytes just read from it; a
    stream that cannot seek is read to its end into memory."""
    if getattr(stream, "seekable", lambda: False)():
        stream.seek(-len(head), _io.SEEK_CUR)
        return stream
    rest = []
    while chunk := _read_exactly(stream, _CHUNK, name):
        rest.append(chunk)
    return _io.BytesIO(head + b"".join(rest))


def _read_exactly(stream, n, name):
    """Up to n bytes from stream, through short reads, in chunks (so a forged
    n allocates no more than the stream holds); fewer only at its end."""
    chunks, left = [], n
    while left:
        chunk = stream.read(min(left, _CHUNK))
        if chunk is None:
            raise _tmem.IOError(f"load: {name} has no bytes ready (a non-blocking stream); read from a blocking one")
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
