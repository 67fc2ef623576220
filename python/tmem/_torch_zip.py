"""Reading torch.save's zip files (torch >= 1.6) in tmem.load, so that a
checkpoint PyTorch wrote loads as tmem tensors without PyTorch installed.

The zip holds ``<name>/data.pkl`` (the object, protocol 2, tensors as
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)``
with each storage a persistent id ``('storage', torch.FloatStorage, key,
location, numel)``) and ``<name>/data/<key>``, each storage's raw bytes
(PyTorch's serialization.py, _save and _load). This reader resolves those
names to checked rebuilds of its own, not to torch: a tensor's view of its
storage is bounds-checked and copied out (views of one storage come back
as tensors of their own, as tmem.save's do, but one view named twice is one
tensor). Dtypes tmem lacks are widened
losslessly, as load_safetensors widens them: float16 and bfloat16 to
float32; int32, int16, int8, uint8 and bool to int64.

Weights-only (the default) allows, besides tmem.load's builtins, only
those rebuilds, torch's dtypes that tmem has, torch.Size and torch.device,
and BUILD only where torch's own weights-only unpickler allows it on a
plain value: a state_dict's ``_metadata`` on an OrderedDict. Only stored
(uncompressed) entries are read, each of exactly the size its storage
needs, and the values copied out of the storages may total at most
_COPY_FACTOR times the storages' bytes (plus _COPY_SLACK), so a file
allocates no more than a small multiple of what it holds; no opcode
allocates before it reads (BYTEARRAY8 is read first), and a tensor has at
most _MAX_DIMS dims of at most 2**62 elements, checked before any product."""
import pickle as _pickle
import reprlib as _reprlib
import struct as _struct
import zipfile as _zipfile
from collections import OrderedDict as _OrderedDict

import numpy as _np

from . import _tmem

# torch's storage class -> (NumPy dtype of its bytes, NumPy dtype of the tmem tensor, tmem dtype name).
_STORAGES = {
    "FloatStorage": ("<f4", "<f4", "float32"), "DoubleStorage": ("<f8", "<f8", "float64"),
    "LongStorage": ("<i8", "<i8", "int64"), "HalfStorage": ("<f2", "<f4", "float32"),
    "BFloat16Storage": ("<u2", "<f4", "float32"), "IntStorage": ("<i4", "<i8", "int64"),
    "ShortStorage": ("<i2", "<i8", "int64"), "CharStorage": ("i1", "<i8", "int64"),
    "ByteStorage": ("u1", "<i8", "int64"), "BoolStorage": ("?", "<i8", "int64"),
}
_DTYPES = ("float32", "float64", "int64")  # torch dtypes (as values) that tmem has
_MAX_DIMS = 64
_COPY_FACTOR, _COPY_SLACK = 8, 1 << 26
_ZIP_ERRORS = (_zipfile.BadZipFile, OSError, EOFError, RuntimeError, NotImplementedError, OverflowError, ValueError)
_short = _reprlib.Repr()
_short.maxlevel, _short.maxtuple, _short.maxlist, _short.maxdict, _short.maxstring, _short.maxother = 3, 8, 8, 4, 60, 60
LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"  # torch.save before 1.6: a pickled long


class Malformed(_pickle.UnpicklingError):
    """A torch.save file whose pieces do not fit together (damaged or
    crafted), as opposed to one that names what a weights-only load refuses."""


class Unsupported(_pickle.UnpicklingError):
    """A torch.save file naming a torch type tmem does not read (complex or
    quantized storages, sparse tensors, tensor subclasses)."""


class _StorageType:
    """What a file's ``torch.<X>Storage`` global resolves to."""

    def __init__(self, name):
        self.name = name


class _Storage:
    """One storage record's values as a 1-D NumPy array, read once however
    many tensors view it, and its location."""

    def __init__(self, kind, values, location):
        self.kind, self.values, self.location = kind, values, location


def _check_view(storage, offset, size, stride, requires_grad):
    """The element count of the view, after checking its pieces' types and
    that it stays inside storage; Malformed otherwise."""
    ints = (type(offset) is int and type(size) is tuple and type(stride) is tuple and len(size) == len(stride)
            and len(size) <= _MAX_DIMS and all(type(n) is int for n in size + stride))
    if not isinstance(storage, _Storage) or not ints or type(requires_grad) is not bool:
        kind = storage.kind if isinstance(storage, _Storage) else f"a {type(storage).__name__}"
        raise Malformed(f"a tensor's pieces have the wrong types or more than {_MAX_DIMS} dims: storage {kind}, offset "
                        f"{_short.repr(offset)}, size {_short.repr(size)}, stride {_short.repr(stride)}, "
                        f"requires_grad {_short.repr(requires_grad)}")
    if not all(0 <= n < 2**62 for n in (offset, *size, *stride)):
        raise Malformed(f"a tensor has an offset, size or stride that is negative or not below 2**62 ({offset}, "
                        f"{size}, {stride})")
    have, numel = storage.values.size, 1
    for n in size:
        numel *= n
        if numel >= 2**62:
            raise Malformed(f"a tensor of size {size} has 2**62 elements or more")
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if numel else offset - 1
    if last >= have:
        raise Malformed(f"a tensor of size {size}, stride {stride} at offset {offset} reaches element {last} of a "
                        f"storage of {have}")
    if numel > have:
        raise Malformed(f"a tensor of size {size} has {numel} elements but views a storage of {have} (an expanded "
                        f"tensor; save tensor.contiguous() with torch)")
    return numel


def _values(storage, offset, size, stride, numel):
    """The view's values as a contiguous NumPy array of the tmem dtype."""
    wide = _STORAGES[storage.kind][1]
    if not numel:
        return _np.zeros(size, dtype=wide)
    values = storage.values
    strides = tuple(s * values.itemsize if n > 1 else 0 for n, s in zip(size, stride))  # a size-1 dim's is moot
    view = _np.lib.stride_tricks.as_strided(values[offset:], shape=size, strides=strides, writeable=False)
    if storage.kind == "BFloat16Storage":  # bfloat16 is float32's upper half
        return (_np.ascontiguousarray(view).astype("<u4") << 16).view("<f4")
    out = _np.ascontiguousarray(view, dtype=wide)
    if storage.kind == "HalfStorage":  # a signalling NaN comes out quiet, as torch's .float() gives it
        bits = out.view("<u4")
        bits[_np.isnan(out)] |= 0x00400000
    return out


class TorchUnpickler(_pickle._Unpickler):
    """Unpickles a torch zip file's data.pkl (the pure-Python unpickler, so
    that BUILD, persistent ids and the opcodes weights-only refuses are
    decided here)."""

    dispatch = dict(_pickle._Unpickler.dispatch)

    def __init__(self, file, archive, prefix, byteorder, device_map, weights_only, allowed, name):
        super().__init__(file)
        self._archive, self._prefix, self._byteorder = archive, prefix, byteorder
        self._device_map, self._weights_only, self._allowed, self._name = device_map, weights_only, allowed, name
        self._storages, self._views = {}, {}
        self._copied, self._stored = 0, 0  # bytes copied out of the storages, bytes the storages hold

    def load(self):
        """The object; Malformed for a pickle the pure-Python unpickler
        stumbles on (an unknown opcode, a pop from an empty stack) or that
        leaves a storage or one of the reader's rebuilds as a value."""
        try:
            obj = super().load()
        except (KeyError, IndexError, AttributeError, _struct.error) as e:
            raise Malformed(f"its data.pkl is a malformed pickle ({type(e).__name__}: {e})") from e
        _refuse_internals(obj, self._weights_only)
        return obj

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and type(pid[2]) is str and type(pid[3]) is str and type(pid[4]) is int and pid[4] >= 0):
            raise Malformed(f"a persistent id is not a storage record: {_short.repr(pid)}")
        _, kind, key, location, numel = pid
        kind = kind.name
        if key in self._storages:
            storage = self._storages[key]
            if (storage.kind, storage.values.size, storage.location) != (kind, numel, location):
                raise Malformed(f"storage {key!r} is named as {storage.kind} of {storage.values.size} on "
                                f"{storage.location} and as {kind} of {numel} on {location}")
            return storage
        raw = _np.dtype(_STORAGES[kind][0]).newbyteorder("<" if self._byteorder == "little" else ">")
        data = read_stored(self._archive, f"{self._prefix}data/{key}", numel * raw.itemsize, self._name)
        self._stored += len(data)
        self._storages[key] = _Storage(kind, _np.frombuffer(data, dtype=raw), location)
        return self._storages[key]

    def _rebuild_tensor_v2(self, storage, offset, size, stride, requires_grad, backward_hooks, metadata=None):
        if backward_hooks or metadata:
            raise Unsupported("a tensor has backward hooks or Python attributes, which tmem.load does not restore")
        numel = _check_view(storage, offset, size, stride, requires_grad)
        key = (id(storage), offset, size, stride, requires_grad)
        if key in self._views:  # one view named twice: one tensor (torch's two would share their storage)
            return self._views[key]
        wide = _np.dtype(_STORAGES[storage.kind][1]).itemsize
        self._copied += numel * wide
        if self._copied > _COPY_FACTOR * self._stored + _COPY_SLACK:
            raise Malformed(f"its tensors' values come to {self._copied} bytes, over {_COPY_FACTOR} times the "
                            f"{self._stored} bytes of its storages (views of one storage, each copied out)")
        from . import _rebuild_tensor
        location = storage.location
        to = self._device_map(location)
        try:
            out = _rebuild_tensor(_values(storage, offset, size, stride, numel).tobytes(),
                                  _STORAGES[storage.kind][2], size, requires_grad, to)
        except _tmem.DeviceError as e:
            hint = "; pass map_location='cpu'" if to == location else ""
            raise _tmem.DeviceError(f"load: {self._name} holds a tensor saved on {location}, which cannot be loaded "
                                    f"onto {to} ({e}){hint}") from e
        self._views[key] = out
        return out

    @staticmethod
    def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
        if not isinstance(data, _tmem.Tensor) or type(requires_grad) is not bool or backward_hooks or state:
            raise Malformed(f"_rebuild_parameter got {type(data).__name__}, requires_grad "
                            f"{_short.repr(requires_grad)} and hooks or state {_short.repr(backward_hooks or state)}")
        return data.requires_grad_(requires_grad)

    @staticmethod
    def _size(dims=()):
        if type(dims) is not tuple or not all(type(n) is int for n in dims):
            raise Malformed(f"torch.Size got {_short.repr(dims)}")
        return dims

    @staticmethod
    def _device(kind, index=None):
        if type(kind) is not str or not (index is None or type(index) is int):
            raise Malformed(f"torch.device got {_short.repr(kind)}, {_short.repr(index)}")
        return kind if index is None else f"{kind}:{index}"

    def find_class(self, module, name):
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_parameter",
                                                 "_rebuild_parameter_with_state"):
            return getattr(self, name.replace("_with_state", ""))
        if module == "torch" and name in _STORAGES:
            return _StorageType(name)
        if module == "torch" and name in _DTYPES:
            from . import _rebuild_dtype
            return _rebuild_dtype(name)
        if (module, name) == ("torch", "Size"):
            return self._size
        if (module, name) == ("torch", "device"):
            return self._device
        if module == "torch" or module.startswith("torch."):
            raise Unsupported(f"it names {module}.{name}, which tmem does not read (save tensors or a state_dict with "
                              f"torch)")
        if not self._weights_only:
            return super().find_class(module, name)
        allowed = self._allowed.get((module, name))
        if allowed is None:
            raise _pickle.UnpicklingError(f"it names {module}.{name}")
        return allowed

    def _load_build(self):
        if not self._weights_only:
            return _pickle._Unpickler.load_build(self)
        state = self.stack[-1]
        inst = self.stack[-2]
        if type(inst) is not _OrderedDict or type(state) is not dict or set(state) - {"_metadata"}:
            keys = sorted(state) if type(state) is dict else type(state).__name__
            raise _pickle.UnpicklingError(f"it holds the opcode BUILD on a {type(inst).__name__} with {keys} (only a "
                                          f"state_dict's _metadata is restored)")
        self.stack.pop()
        inst.__dict__.update(state)

    dispatch[_pickle.BUILD[0]] = _load_build

    def _load_bytearray8(self):
        n, = _struct.unpack("<Q", self.read(8))
        data = self.read(n)  # as much as the pickle holds (the pure-Python opcode allocated n bytes first)
        if len(data) != n:
            raise Malformed(f"its data.pkl is truncated: a BYTEARRAY8 of {n} bytes has {len(data)}")
        self.append(bytearray(data))

    dispatch[_pickle.BYTEARRAY8[0]] = _load_bytearray8

    def _refused(name):
        def refuse(self):
            if not self._weights_only:
                return _pickle._Unpickler.dispatch[getattr(_pickle, name)[0]](self)
            raise _pickle.UnpicklingError(f"it holds the opcode {name}")
        return refuse

    for _name in ("INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER"):
        dispatch[getattr(_pickle, _name)[0]] = _refused(_name)
    del _name, _refused


_PLAIN = (dict, _OrderedDict, list, tuple, set, frozenset, str, bytes, bytearray, int, float, complex, bool,
          type(None))


def _refuse_internals(obj, weights_only):
    """Unsupported when obj, or a container in it, holds a storage or one of
    the reader's stand-ins (a pickle that left torch.FloatStorage, a
    storage or a rebuild as a value: torch.save of t.storage(), say), or,
    weights-only, anything but tensors, dtypes and plain values."""
    seen, pending = set(), [obj]
    while pending:
        x = pending.pop()
        if isinstance(x, (_Storage, _StorageType)) or isinstance(getattr(x, "__self__", None), TorchUnpickler) \
                or getattr(x, "__qualname__", "").startswith("TorchUnpickler."):
            raise Unsupported("it holds a storage or a torch function as a value (torch.save of a storage, say), "
                              "which tmem does not read; save tensors")
        if weights_only and type(x) not in _PLAIN and not isinstance(x, (_tmem.Tensor, _tmem.dtype)):
            raise Unsupported(f"it leaves a {type(x).__name__} as a value")
        if id(x) in seen or not isinstance(x, (dict, list, tuple, set, frozenset)):
            continue
        seen.add(id(x))
        pending.extend(x.items() if isinstance(x, dict) else x)
        pending.extend(getattr(x, "__dict__", {}).values())


def read_stored(archive, entry, size, name):
    """The bytes of the zip entry, which must be stored (not compressed) and
    exactly size bytes long (size None: any length); Malformed otherwise,
    tmem.IOError naming the file when it fails zipfile's CRC-32 check."""
    try:
        info = archive.getinfo(entry)
    except KeyError:
        raise Malformed(f"it has no record {entry}") from None
    if info.compress_type != _zipfile.ZIP_STORED:
        raise Malformed(f"its record {entry} is compressed (torch.save stores its records; "
                        f"re-save the file with torch)")
    if size is not None and info.file_size != size:
        raise Malformed(f"its record {entry} has {info.file_size} bytes, but its storage needs {size}")
    try:
        return archive.read(info)
    except _ZIP_ERRORS as e:
        raise _tmem.IOError(f"load: {name} is damaged: {e}") from e


def open_archive(stream, name):
    """The zipfile.ZipFile of a torch.save file starting at stream's
    position, its records' prefix (``archive/``) and byte order;
    tmem.IOError naming it when it is not one."""
    try:
        start = stream.tell()
        archive = _zipfile.ZipFile(stream)
        infos = archive.infolist()
    except _ZIP_ERRORS as e:
        raise _tmem.IOError(f"load: {name} starts as a zip file (torch.save's format) but is not one: {e}") from e
    names = [info.filename for info in infos]
    if infos and min(info.header_offset for info in infos) != start:
        raise _tmem.IOError(f"load: {name} holds more than one zip file, or bytes before its archive (two saves "
                            f"written one after the other?), or is damaged; load each from where it starts")
    if len(set(names)) != len(names):
        raise _tmem.IOError(f"load: {name} is damaged: it has two records of one name")
    pickles = [n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
    if len(pickles) != 1:
        raise _tmem.IOError(f"load: {name} is a zip file, but not a torch.save file (it has {len(pickles)} records "
                            f"named <name>/data.pkl, not 1)")
    prefix = pickles[0][:-len("data.pkl")]
    byteorder = "little"
    if prefix + "byteorder" in names:
        byteorder = read_stored(archive, prefix + "byteorder", None, name)[:16].decode("ascii", "replace")
        if byteorder not in ("little", "big"):
            raise _tmem.IOError(f"load: {name} names the byte order {byteorder!r}")
    return archive, prefix, byteorder
