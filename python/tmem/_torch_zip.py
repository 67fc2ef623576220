"""Reading torch.save's zip files (torch >= 1.6) in tmem.load, so that a
checkpoint PyTorch wrote loads as tmem tensors without PyTorch installed.

The zip holds ``<name>/data.pkl`` (the object, protocol 2, tensors as
``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...)``
with each storage a persistent id ``('storage', torch.FloatStorage, key,
location, numel)``) and ``<name>/data/<key>``, each storage's raw bytes
(PyTorch's serialization.py, _save and _load). This reader resolves those
names to checked rebuilds of its own, not to torch: a tensor's view of its
storage is bounds-checked and copied out (views of one storage come back
as tensors of their own, as tmem.save's do). Dtypes tmem lacks are widened
losslessly, as load_safetensors widens them: float16 and bfloat16 to
float32; int32, int16, int8, uint8 and bool to int64.

Weights-only (the default) allows, besides tmem.load's builtins, only
those rebuilds, torch's dtypes that tmem has, torch.Size and torch.device,
and BUILD only where torch's own weights-only unpickler allows it on a
plain value: a state_dict's ``_metadata`` on an OrderedDict. Only stored
(uncompressed) entries are read, each of exactly the size its storage
needs, so a file allocates no more than it holds plus what its tensors'
values take."""
import pickle as _pickle
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
LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"  # torch.save before 1.6: a pickled long


class Malformed(_pickle.UnpicklingError):
    """A torch.save file whose pieces do not fit together (damaged or
    crafted), as opposed to one that names what a weights-only load refuses."""


class _StorageType:
    """What a file's ``torch.<X>Storage`` global resolves to."""

    def __init__(self, name):
        self.name = name


class _Storage:
    """One storage record's values as a 1-D NumPy array, read once however
    many tensors view it."""

    def __init__(self, kind, values):
        self.kind, self.values = kind, values


def _tensor_from(storage, offset, size, stride, requires_grad, device):
    """The tmem tensor viewing storage at offset with size and stride,
    copied out and widened; Malformed when the view does not fit in the
    storage or the pieces have the wrong types."""
    from . import _rebuild_tensor
    ints = (type(offset) is int and type(size) is tuple and type(stride) is tuple and len(size) == len(stride)
            and all(type(n) is int for n in size + stride))
    if not isinstance(storage, _Storage) or not ints or type(requires_grad) is not bool:
        kind = storage.kind if isinstance(storage, _Storage) else f"a {type(storage).__name__}"
        raise Malformed(f"a tensor's pieces have the wrong types: storage {kind}, offset {offset!r}, size {size!r}, "
                        f"stride {stride!r}, requires_grad {requires_grad!r}")
    have = storage.values.size
    if offset < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise Malformed(f"a tensor has a negative offset, size or stride ({offset}, {size}, {stride})")
    numel = 1
    for n in size:
        numel *= n
    last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if numel else offset - 1
    if last >= have:
        raise Malformed(f"a tensor of size {size}, stride {stride} at offset {offset} reaches element "
                        f"{last} of a storage of {have}")
    if numel > have:
        raise Malformed(f"a tensor of size {size} has {numel} elements but views a storage of {have} "
                        f"(an expanded tensor; save tensor.contiguous() with torch)")
    raw, wide, name = _STORAGES[storage.kind]
    values = storage.values
    item = values.itemsize
    view = _np.lib.stride_tricks.as_strided(values[offset:] if numel else values[:0], shape=size,
                                            strides=tuple(s * item for s in stride), writeable=False)
    if storage.kind == "BFloat16Storage":  # bfloat16 is float32's upper half
        out = (_np.ascontiguousarray(view).astype("<u4") << 16).view("<f4")
    else:
        out = _np.ascontiguousarray(view, dtype=wide)
    return _rebuild_tensor(out.tobytes(), name, size, requires_grad, device)


class TorchUnpickler(_pickle._Unpickler):
    """Unpickles a torch zip file's data.pkl (the pure-Python unpickler, so
    that BUILD, persistent ids and the opcodes weights-only refuses are
    decided here)."""

    dispatch = dict(_pickle._Unpickler.dispatch)

    def __init__(self, file, archive, prefix, byteorder, device_map, weights_only, allowed, name):
        super().__init__(file)
        self._archive, self._prefix, self._byteorder = archive, prefix, byteorder
        self._device_map, self._weights_only, self._allowed, self._name = device_map, weights_only, allowed, name
        self._storages = {}

    def load(self):
        """The object; Malformed for a pickle the pure-Python unpickler
        stumbles on (an unknown opcode, a pop from an empty stack)."""
        try:
            return super().load()
        except (KeyError, IndexError, AttributeError, _struct.error) as e:
            raise Malformed(f"its data.pkl is a malformed pickle ({type(e).__name__}: {e})") from e

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)
                and type(pid[2]) is str and type(pid[3]) is str and type(pid[4]) is int and pid[4] >= 0):
            raise Malformed(f"a persistent id is not a storage record: {pid!r}")
        _, kind, key, location, numel = pid
        kind = kind.name
        if key in self._storages:
            storage = self._storages[key]
            if storage.kind != kind or storage.values.size != numel:
                raise Malformed(f"storage {key} is named as {storage.kind} of {storage.values.size} and "
                                f"as {kind} of {numel}")
            return storage, location
        raw = _np.dtype(_STORAGES[kind][0]).newbyteorder("<" if self._byteorder == "little" else ">")
        data = read_stored(self._archive, f"{self._prefix}data/{key}", numel * raw.itemsize, self._name)
        self._storages[key] = _Storage(kind, _np.frombuffer(data, dtype=raw))
        return self._storages[key], location

    def _rebuild_tensor_v2(self, storage_location, offset, size, stride, requires_grad, backward_hooks,
                           metadata=None):
        if backward_hooks or metadata:
            raise _pickle.UnpicklingError("a tensor has backward hooks or Python attributes, which tmem.load does "
                                          "not restore")
        if not (type(storage_location) is tuple and len(storage_location) == 2):
            raise Malformed(f"_rebuild_tensor_v2 got {type(storage_location).__name__} for a storage")
        storage, location = storage_location
        to = self._device_map(location)
        try:
            return _tensor_from(storage, offset, size, stride, requires_grad, to)
        except _tmem.DeviceError as e:
            hint = "; pass map_location='cpu'" if to == location else ""
            raise _tmem.DeviceError(f"load: {self._name} holds a tensor saved on {location}, which cannot be loaded "
                                    f"onto {to} ({e}){hint}") from e

    @staticmethod
    def _rebuild_parameter(data, requires_grad, backward_hooks, state=None):
        if not isinstance(data, _tmem.Tensor) or type(requires_grad) is not bool or backward_hooks or state:
            raise Malformed(f"_rebuild_parameter got {type(data).__name__}, requires_grad "
                            f"{requires_grad!r} and hooks or state {backward_hooks or state!r}")
        return data.requires_grad_(requires_grad)

    @staticmethod
    def _size(dims=()):
        if type(dims) is not tuple or not all(type(n) is int for n in dims):
            raise Malformed(f"torch.Size got {dims!r}")
        return dims

    @staticmethod
    def _device(kind, index=None):
        if type(kind) is not str or not (index is None or type(index) is int):
            raise Malformed(f"torch.device got {kind!r}, {index!r}")
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

    def _refused(name):
        def refuse(self):
            if not self._weights_only:
                return _pickle._Unpickler.dispatch[getattr(_pickle, name)[0]](self)
            raise _pickle.UnpicklingError(f"it holds the opcode {name}")
        return refuse

    for _name in ("INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER"):
        dispatch[getattr(_pickle, _name)[0]] = _refused(_name)
    del _name, _refused


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
    except (_zipfile.BadZipFile, OSError, EOFError) as e:
        raise _tmem.IOError(f"load: {name} is damaged: {e}") from e


def open_archive(stream, name):
    """The zipfile.ZipFile of a torch.save file, its records' prefix
    (``archive/``) and byte order; tmem.IOError naming it when it is not
    one."""
    try:
        archive = _zipfile.ZipFile(stream)
    except (_zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise _tmem.IOError(f"load: {name} starts as a zip file (torch.save's format) but is not one: {e}") from e
    pickles = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") == 1]
    if len(pickles) != 1:
        raise _tmem.IOError(f"load: {name} is a zip file, but not a torch.save file (it has {len(pickles)} records "
                            f"named <name>/data.pkl, not 1)")
    prefix = pickles[0][:-len("data.pkl")]
    byteorder = "little"
    if prefix + "byteorder" in archive.namelist():
        byteorder = read_stored(archive, prefix + "byteorder", None, name)[:16].decode("ascii", "replace")
        if byteorder not in ("little", "big"):
            raise _tmem.IOError(f"load: {name} names the byte order {byteorder!r}")
    return archive, prefix, byteorder
