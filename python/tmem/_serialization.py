"""tmem.save and tmem.load: torch.save and torch.load of any picklable
object (a state_dict, a dict of them, a module, an optimizer's state).

A file is a 24-byte header (the magic ``TMEMSAVE``, a format version, the
payload's length and its CRC-32, little-endian) and the pickle, so that a
truncated or damaged file is an error naming it, never a wrong object. A
path is written atomically (a temporary file, fsync'ed and renamed: the old
file survives any failure); a file object is written where it stands.
As torch 2.6's torch.load, load unpickles only tensors and plain containers
unless weights_only=False is passed for a file you trust."""
import _codecs
import io as _io
import os as _os
import pickle as _pickle
import struct as _struct
import zlib as _zlib
from collections import OrderedDict as _OrderedDict

import numpy as _np

from . import _rebuild_tensor, _tmem

_MAGIC = b"TMEMSAVE"
_VERSION = 1
_HEADER = _struct.Struct("<8sIQI")  # magic, version, payload bytes, CRC-32 of the payload


def _is_path(f):
    return isinstance(f, (str, bytes, _os.PathLike))


def save(obj, f, pickle_protocol=_pickle.DEFAULT_PROTOCOL):
    """Saves obj to f (torch.save): a path (str, bytes or os.PathLike),
    written atomically, or a binary file object, written at its position.
    Tensors keep their values, dtype, device and requires_grad; objects
    pickle as pickle.dumps does (modules and generators by tmem's own
    pickling). Raises the pickling error for an object with no pickled form
    (an optimizer: save its state_dict()) and tmem.IOError naming the file
    when writing fails."""
    payload = _pickle.dumps(obj, protocol=pickle_protocol)
    data = _HEADER.pack(_MAGIC, _VERSION, len(payload), _zlib.crc32(payload)) + payload
    if _is_path(f):
        try:
            _tmem._write_file_atomic(_os.fsdecode(f), data)
        except _tmem.IOError as e:
            raise _tmem.IOError(f"save: {e}") from e
    elif hasattr(f, "write"):
        f.write(data)
    else:
        raise TypeError(f"save: expected a path or a binary file object for f, but got {type(f).__name__}")


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


def _no_object_dtype(*args):
    """numpy.dtype for the weights-only unpickler: no object arrays, whose
    elements would be arbitrary pickled objects."""
    dtype = _np.dtype(*args)
    if dtype.hasobject:
        raise _pickle.UnpicklingError("load: weights_only=True refuses a NumPy array of Python objects; pass "
                                      "weights_only=False for a file you trust")
    return dtype


_WEIGHTS_ONLY = {
    ("collections", "OrderedDict"): _OrderedDict,
    ("numpy.core.multiarray", "_reconstruct"): _np.core.multiarray._reconstruct,
    ("numpy.core.numeric", "_frombuffer"): _np.core.numeric._frombuffer,
    ("numpy", "ndarray"): _np.ndarray,
    ("numpy", "dtype"): _no_object_dtype,
    ("_codecs", "encode"): _codecs.encode,  # protocol 2's bytes
}


class _Unpickler(_pickle.Unpickler):
    """Maps tensors' devices and, with weights_only, refuses every global but
    tmem's tensor rebuild and those of _WEIGHTS_ONLY."""

    def __init__(self, file, device_map, weights_only, name):
        super().__init__(file)
        self._device_map, self._weights_only, self._name = device_map, weights_only, name

    def _rebuild(self, array, requires_grad, device):
        to = self._device_map(device)
        try:
            return _rebuild_tensor(array, requires_grad, to)
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
            raise _pickle.UnpicklingError(
                f"load: weights_only=True unpickles only tensors and plain containers, but {self._name} holds "
                f"{module}.{name}; pass weights_only=False if you trust the file (it can run any code)")
        return allowed


def load(f, map_location=None, weights_only=True):
    """Loads an object that save() wrote (torch.load) from a path or a binary
    file object. map_location puts the tensors on another device: a device
    name ('cpu') for all of them, or a dict from saved to new device names.
    weights_only (the default, as torch 2.6's) unpickles only tensors, NumPy
    arrays, numbers, strings and lists, tuples and dicts of them; a module or
    anything else raises pickle.UnpicklingError naming it, and needs
    weights_only=False, which runs whatever code the file names (only for
    files you trust). Raises tmem.IOError naming the file when it cannot be
    read, is not a tmem.save file (a torch.save zip file says so), was
    written by a newer format, is truncated or fails its checksum."""
    device_map = _device_map(map_location)
    if _is_path(f):
        name = _os.fsdecode(f)
        if "\0" in name:
            raise _tmem.ValueError(f"load: the path {name!r} holds a NUL byte")
        try:
            with open(name, "rb") as stream:
                payload = _read(stream, name)
        except OSError as e:
            if isinstance(e, _tmem.IOError):
                raise
            raise _tmem.IOError(f"load: cannot open {name}: {e.strerror or e}") from e
    elif hasattr(f, "read"):
        name = f"the file object {getattr(f, 'name', type(f).__name__)!s}"
        payload = _read(f, name)
    else:
        raise TypeError(f"load: expected a path or a binary file object for f, but got {type(f).__name__}")
    return _Unpickler(_io.BytesIO(payload), device_map, bool(weights_only), name).load()


def _read(stream, name):
    """The checked payload of a save() file read from stream."""
    head = stream.read(_HEADER.size)
    if head[:4] == b"PK\x03\x04":
        raise _tmem.IOError(f"load: {name} is a zip file (torch.save's format), not a tmem.save file; save the "
                            f"state_dict with safetensors and read it with tmem.load_safetensors")
    if len(head) < _HEADER.size or not head.startswith(_MAGIC):
        raise _tmem.IOError(f"load: {name} is not a tmem.save file (it does not start with {_MAGIC.decode()})")
    _, version, size, crc = _HEADER.unpack(head)
    if version != _VERSION:
        raise _tmem.IOError(f"load: {name} has format version {version}, but this tmem reads version {_VERSION}; "
                            f"load it with the tmem that wrote it")
    payload = stream.read(size)
    if len(payload) != size:
        raise _tmem.IOError(f"load: {name} is truncated: its header promises {size} bytes after it, but only "
                            f"{len(payload)} are there")
    if _zlib.crc32(payload) != crc:
        raise _tmem.IOError(f"load: {name} is damaged: its contents fail their CRC-32 check")
    return payload
