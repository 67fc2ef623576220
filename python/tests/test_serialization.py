"""tmem.save and tmem.load (torch.save and torch.load)."""
import base64
import io
import os
import pathlib
import pickle
import struct
import sys
import tempfile
import types
import warnings
import unittest
import zipfile
import zlib
from collections import OrderedDict

import numpy as np

import tmem

try:
    import torch
except ImportError:
    torch = None

CALLED = []


def _record_call(*args):
    CALLED.append(args)


class _Malicious:
    """Unpickles by calling _record_call: what a crafted file would do with os.system."""

    def __reduce__(self):
        return _record_call, ("ran",)


class TestSaveLoad(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "ckpt.pt")

    def tearDown(self):
        self.dir.cleanup()

    def test_a_checkpoint_round_trips_exactly(self):
        w = tmem.randn(3, 4, dtype=tmem.float64)
        shared = tmem.ones(2, requires_grad=True)
        obj = {"model": {"w": w, "steps": tmem.tensor([7, -2**62]), "b": tmem.rand(5)},
               "same": [shared, shared], "epoch": 3, "name": "run", "lr": 3e-4, "pair": (1, None)}
        tmem.save(obj, self.path)
        got = tmem.load(self.path)
        self.assertEqual(got["epoch"], 3)
        self.assertEqual(got["name"], "run")
        self.assertEqual(got["lr"], 3e-4)
        self.assertEqual(got["pair"], (1, None))
        for key in ("w", "steps", "b"):
            self.assertEqual(got["model"][key].dtype, obj["model"][key].dtype, key)
            np.testing.assert_array_equal(got["model"][key].numpy(), obj["model"][key].numpy(), err_msg=key)
        a, b = got["same"]
        self.assertIs(a, b)  # one tensor under two names stays one
        self.assertTrue(a.requires_grad and a.is_leaf)
        self.assertFalse(got["model"]["w"].requires_grad)

    def test_a_module_state_dict_loads_into_a_fresh_module(self):
        tmem.manual_seed(0)
        m = tmem.nn.Linear(4, 3)
        tmem.save(m.state_dict(), pathlib.Path(self.path))
        tmem.manual_seed(1)
        m2 = tmem.nn.Linear(4, 3)
        m2.load_state_dict(tmem.load(pathlib.Path(self.path)))
        x = tmem.randn(2, 4)
        np.testing.assert_array_equal(m2(x).detach().numpy(), m(x).detach().numpy())

    def test_file_objects_hold_several_objects_in_turn(self):
        buf = io.BytesIO()
        tmem.save({"a": tmem.arange(0, 3)}, buf)
        tmem.save([1, 2], buf)
        buf.seek(0)
        self.assertEqual(tmem.load(buf)["a"].numpy().tolist(), [0.0, 1.0, 2.0])
        self.assertEqual(tmem.load(buf), [1, 2])

    def test_a_module_needs_weights_only_false(self):
        m = tmem.nn.Sequential(tmem.nn.Linear(2, 2), tmem.nn.Linear(2, 1))
        tmem.save(m, self.path)
        with self.assertRaisesRegex(pickle.UnpicklingError, r"load: weights_only=True .* cannot be unpickled: it "
                                                            r"holds the opcode BUILD .*pass weights_only=False"):
            tmem.load(self.path)
        back = tmem.load(self.path, weights_only=False)
        x = tmem.randn(3, 2)
        np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())

    def test_weights_only_runs_no_code_from_the_file(self):
        tmem.save({"x": _Malicious()}, self.path)
        for weights_only in (True, None):  # None is the default, True as in torch 2.6
            with self.assertRaisesRegex(pickle.UnpicklingError, r"it names (python\.tests\.)?test_serialization\."
                                                                r"_record_call"):
                tmem.load(self.path, weights_only=weights_only)
        self.assertEqual(CALLED, [])
        with self.assertRaisesRegex(TypeError, "weights_only must be True, False or None, but got 'no'"):
            tmem.load(self.path, weights_only="no")
        tmem.load(self.path, weights_only=False)
        self.assertEqual(CALLED, [("ran",)])
        CALLED.clear()
        tmem.save({"a": np.zeros(3)}, self.path)  # NumPy arrays, as in torch 2.6, need weights_only=False
        with self.assertRaisesRegex(pickle.UnpicklingError, "holds the opcode BUILD|names numpy"):
            tmem.load(self.path)
        np.testing.assert_array_equal(tmem.load(self.path, weights_only=False)["a"], np.zeros(3))

    def test_crafted_pickles_are_refused_before_they_allocate_or_forge(self):
        def frame(payload):
            return struct.pack("<8sIQI", b"TMEMSAVE", 1, len(payload), zlib.crc32(payload)) + payload

        def load(payload):
            pathlib.Path(self.path).write_bytes(frame(payload))
            return tmem.load(self.path)

        data = b"\0" * 8
        cases = {
            # a tensor claiming more elements than its bytes hold (a memory bomb)
            "pieces do not fit together: 8 bytes of data, dtype 'float32', shape \(250000000,\)":
                (tmem._rebuild_tensor, (data, "float32", (250000000,), False, "cpu")),
            "pieces do not fit together.*dtype 'object'": (tmem._rebuild_tensor, (data, "object", (1,), False, "cpu")),
            "pieces do not fit together.*shape \(-1, -8\)": (tmem._rebuild_tensor, (data, "int64", (-1, -8), False, "cpu")),
            "pieces do not fit together.*device \['cpu'\]": (tmem._rebuild_tensor, (data, "int64", (1,), False, ["cpu"])),
            "bytes called with 1 arguments of types \['int'\]": (bytes, (2**40,)),
            "a pickled dtype must be one of": (tmem._rebuild_dtype, ("complex64",)),
            "_codecs.encode called with str and 'rot13'": (__import__("_codecs").encode, ("x", "rot13")),
        }
        for message, (fn, args) in cases.items():
            class Crafted:
                def __reduce__(self):
                    return fn, args
            with self.assertRaisesRegex(pickle.UnpicklingError, "load: .*ckpt.pt.*" + message):
                load(pickle.dumps(Crafted(), protocol=4))
        # Two tensors from one data object (a memo reference) would multiply the file's bytes in memory.
        data = b"\0" * 16

        class Shared:
            def __init__(self, shape):
                self.shape = shape

            def __reduce__(self):
                return tmem._rebuild_tensor, (data, "float32", self.shape, False, "cpu")
        with self.assertRaisesRegex(pickle.UnpicklingError, "two tensors are made from one data object"):
            load(pickle.dumps([Shared((4,)), Shared((2, 2))], protocol=4))
        # A NumPy dtype moved by BUILD (the opcode is refused, so no array with forged offsets exists).
        with self.assertRaisesRegex(pickle.UnpicklingError, "holds the opcode BUILD|names numpy"):
            load(pickle.dumps(np.zeros(2, dtype=[("a", "<i8")]), protocol=2))
        with self.assertRaisesRegex(pickle.UnpicklingError, "malformed pickle"):
            load(b"\x80\x04\x95")

    def test_damaged_files_are_errors_naming_them(self):
        tmem.save({"w": tmem.ones(100)}, self.path)
        data = pathlib.Path(self.path).read_bytes()
        cases = {
            "truncated: its header promises": data[:-1],
            "fail their CRC-32": data[:-1] + bytes([data[-1] ^ 1]),
            "is not a tmem.save file": b"\x80\x04junk" + data,
            "zip file \\(torch.save's format\\)": b"PK\x03\x04" + data,
            "format version 2": data[:8] + struct.pack("<I", 2) + data[12:],
            "not a tmem.save file \\(": b"",
            "3 bytes after the object its header describes": data + b"abc",
            "truncated: its header promises 18446744073709551615 bytes after it, but only":
                data[:12] + struct.pack("<Q", 2**64 - 1) + data[20:],
        }
        for message, content in cases.items():
            with open(self.path, "wb") as f:
                f.write(content)
            with self.assertRaisesRegex(tmem.IOError, "load: " + self.path + ".*" + message):
                tmem.load(self.path)
        with self.assertRaisesRegex(tmem.IOError, "load: cannot open .*missing.pt: No such file"):
            tmem.load(os.path.join(self.dir.name, "missing.pt"))
        with self.assertRaisesRegex(tmem.ValueError, "NUL byte"):
            tmem.load(self.path + "\0x")

    def test_every_pickle_protocol_round_trips_tensors_dtypes_and_builtins(self):
        obj = {"empty": tmem.zeros(0, 3), "scalar": tmem.tensor(2.5, dtype=tmem.float64), "big": tmem.tensor([2**62]),
               "view": tmem.arange(0, 6).reshape(2, 3).transpose(0, 1), "dtype": tmem.int64, "set": {1, 2},
               "frozen": frozenset("ab"), "raw": b"\x00\xff", "none": b"", "array": bytearray(b"ab"),
               "ordered": OrderedDict(b=1, a=2), "nan": tmem.tensor([float("nan"), float("-inf")])}
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            tmem.save(obj, self.path, pickle_protocol=protocol)
            got = tmem.load(self.path)
            self.assertEqual(list(got), list(obj), protocol)
            for key, want in obj.items():
                if isinstance(want, tmem.Tensor):
                    self.assertEqual((got[key].dtype, got[key].shape), (want.dtype, want.shape), (protocol, key))
                    np.testing.assert_array_equal(got[key].numpy(), want.numpy(), err_msg=f"{protocol} {key}")
                else:
                    self.assertEqual(got[key], want, (protocol, key))
                    self.assertIs(type(got[key]), type(want), (protocol, key))

    def test_raw_streams_with_short_reads_and_writes(self):
        class Trickle(io.RawIOBase):
            """Takes and gives at most 7 bytes a call, as a pipe may."""

            def __init__(self):
                self.data, self.pos = bytearray(), 0

            def writable(self):
                return True

            def readable(self):
                return True

            def write(self, b):
                self.data += bytes(b[:7])
                return min(len(b), 7)

            def readinto(self, b):
                n = min(len(b), 7, len(self.data) - self.pos)
                b[:n] = self.data[self.pos:self.pos + n]
                self.pos += n
                return n

        stream = Trickle()
        tmem.save({"w": tmem.arange(0, 50)}, stream)
        np.testing.assert_array_equal(tmem.load(stream)["w"].numpy(), np.arange(50.0))
        with open(self.path, "w") as text:
            with self.assertRaisesRegex(TypeError, "save: f is a text file; open it in binary mode \\('wb'\\)"):
                tmem.save({}, text)
        with open(self.path) as text:
            with self.assertRaisesRegex(TypeError, "load: f is a text file"):
                tmem.load(text)

    def test_a_failed_save_leaves_the_old_file(self):
        tmem.save({"w": tmem.ones(2)}, self.path)
        before = pathlib.Path(self.path).read_bytes()
        with self.assertRaises(TypeError):  # an optimizer has no pickled form
            tmem.save(tmem.optim.SGD([tmem.ones(1, requires_grad=True)], lr=0.1), self.path)
        self.assertEqual(pathlib.Path(self.path).read_bytes(), before)
        with self.assertRaisesRegex(tmem.IOError, "save: .*no/such/dir"):
            tmem.save({}, os.path.join(self.dir.name, "no", "such", "dir", "x.pt"))
        self.assertEqual(os.listdir(self.dir.name), ["ckpt.pt"])  # no temporary file left
        with self.assertRaisesRegex(TypeError, "save: expected a path or a binary file object"):
            tmem.save({}, 3)
        for protocol in (-2, 99, 2.0, True):
            with self.assertRaisesRegex(tmem.ValueError, "save: pickle_protocol must be an int in \\[-1, 5\\]"):
                tmem.save({}, self.path, pickle_protocol=protocol)
        with self.assertRaisesRegex(tmem.ValueError, "save: the path .* holds a NUL byte"):
            tmem.save({}, self.path + "\0x")
        # A link whose file does not exist yet gets it, and stays a link (as open() follows it).
        os.symlink("real.pt", os.path.join(self.dir.name, "link.pt"))
        tmem.save([1], os.path.join(self.dir.name, "link.pt"))
        self.assertTrue(os.path.islink(os.path.join(self.dir.name, "link.pt")))
        self.assertEqual(tmem.load(os.path.join(self.dir.name, "real.pt")), [1])

    def test_the_header_is_magic_version_length_and_crc(self):
        tmem.save([1, 2, 3], self.path)
        data = pathlib.Path(self.path).read_bytes()
        magic, version, size, crc = struct.unpack("<8sIQI", data[:24])
        self.assertEqual((magic, version, size), (b"TMEMSAVE", 1, len(data) - 24))
        self.assertEqual(crc, zlib.crc32(data[24:]))
        self.assertEqual(pickle.loads(data[24:]), [1, 2, 3])

    def test_map_location(self):
        tmem.save({"w": tmem.ones(2)}, self.path)
        self.assertEqual(tmem.load(self.path, map_location="cpu")["w"].device, "cpu")
        self.assertEqual(tmem.load(self.path, map_location={"cuda:0": "cpu"})["w"].device, "cpu")
        with self.assertRaisesRegex(TypeError, "map_location must be None, a device name"):
            tmem.load(self.path, map_location=0)
        with self.assertRaisesRegex(TypeError, "map_location must map device names"):
            tmem.load(self.path, map_location={"cpu": 1})


# torch.save (torch 1.13) of the object test_a_checkpoint_written_by_torch_loads expects, zlib-compressed and
# base64-encoded, so that the reader is checked against torch's own bytes where torch is not installed.
TORCH_1_13_FILE = (
    "eNqlV11TG2UU3k3IB2v5sEVF7QdWrEEpEAIBWgo00ti6tYVFNA0KbJKFXVmSnOwbkFYsHQ22N44znXHqhV554bVVb5yx/Qt65aXjlZe9"
    "1PGivh/buO8bIR3YmXDY3fM8zzlnzzmbTKn+BkkKh6Wao1U6KOmlrGmtGb05Hek9xRU7mWiW0tyx5dsEKZIKYoBt5Q29BHI2W7BtI4us"
    "Qt5RLpdyRsnITVpZpICvSwM/c143rGUTQUMWFbBGz0IZWbajLJSMTNmycwvIyDuF0sJavwKBSCQVwggHe+rLBgQZREnaBR3NsIsKhFIy"
    "9umDcMqPbbZYhkY1iECZViXVp/q34QnVr8rbcOCWSaJoQtCsQUsK5y5lLN2BVhPrmEGT8UThSbNR9SE4SPEVOKTKFWhj2KcQPK3BM+VN"
    "aE81YueFVQPppELwLL3/XIqUD57fhMM08DWj5OBawBFVdhwnQwUQHGWCbjKThXLGNqrZHKNO/dCBoziA4AUSRQPJ4rgqqw3b8CKLpBPB"
    "SxqcoCmXCuvwspvEMdMFRqbVgOqvQBcJ/xUGehVBtwYnaeqmbi9BDxfJeXypGkcvjSMGfZjOjyBK4sB0/YQuxugGEAxqEGeVXIrGYYij"
    "S9DHFI1XKYcp5QCMsAKfcgt8mlCOMsozCMY0GKeUq7qzAhM8ZaFgV+nOUrpBSLAIX3MjnCR05xhdEsHrGpxPBbCjlUexfrjA8V3I/9dG"
    "b1C6OKgsuouETlZ92/Am7iLcPpcY5WUEUxpMU8qiXtJXQduhkeldAxklBWa4FhuCt5jGrFuBt0nI7zD+FIIrGqRv0pO5T+FdDd6jY+Nk"
    "dRvP2PyjB02phmEBU8kIFjFVVxej0BFkNMjSEI3VItqAHKc/AgYG4UZcIvoSaa5lNiImI7AQvK/BCiVwkFF0wObKdrGQX67WbTXlI2PT"
    "B3kWSYEWrgJF8gcYYQmBowGihDm0UTSg7FItkR6JDyiwRp+5Y101YN29N4NPFPgAlz+wDRsVuKrBNVqKnLFmZQ340PVjpwpsVhfARxW4"
    "rsEWq0CxkDXhhhoq90ypoXAo8uPYd1iKfKZ23IDNwgbs7avdf9htXJK27mE7ge0YNthKPxOVczeXjrbjE/LZTaWbV4kmExFBZedDku5j"
    "/Y77RO9OeO4KEQjvqtcinRb0cFpDjy1Yo48PmeiFwvM//J6rr98sjfL6/cnE8F7l0zz3g3H3nwlmwq5tdW2ba9tde9i1Ha497tpO156Y"
    "IHk9CH351yI+W6yTVyefVyyZ6KiblzQmff/wGlG59M36COnrYB2VMV5lIJk4tefq4ff3+CLtna8yd4+Q2Wuooz7Bqw8mE6P7UE+nZUkm"
    "8nc//uQWmVt/HfmzvHw8mTizL/n03w/pcZ0E8dPsbWUP/Tu0z/4le4P22T/znxX3oD+8//n58x7R/zw89y2vLz2O/sh+9HfbU4eqOu5X"
    "qGSiRRSKKSTyX75eniUvIB+NXPbR2Xc5vbu+tUZF/IYror07vJlD+gKS8HYQsd59zGNNERsVsd5d2sJhf6vB1gh7FxYvTN6c/PIVsd41"
    "xGP7QgI2JmK9S4THfiFiB0SsdwPw2LawgB0Usd7B5bG3RWxcxHqHjse2NwrYIRHrHRgee0fEDj/C/v9IcbqKgB0Rdb3tzjfHlgfrDs2U"
    "Ggx2u7eP+k9WXZsE2+pn9leFWYwjv16kP1wHmV4LBBmmifoz338B5u4meQ=="
)


def _torch_module_names(fake):
    """Puts the fake torch and torch._utils modules of fake into sys.modules
    (what pickle.Pickler looks globals up in), returning what was there."""
    saved = {name: sys.modules.get(name) for name in ("torch", "torch._utils")}
    sys.modules.update(fake)
    return saved


class FakeStorage:
    """A storage record of a crafted torch.save file: its torch class name, key and values' bytes."""

    def __init__(self, kind, key, data, numel, location="cpu"):
        self.kind, self.key, self.data, self.numel, self.location = kind, key, data, numel, location


class FakeTensor:
    """Pickles as torch's _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)."""

    def __init__(self, storage, offset, size, stride, requires_grad=False, hooks=()):
        self.args = (storage, offset, size, stride, requires_grad, OrderedDict(hooks))

    def __reduce__(self):
        return sys.modules["torch._utils"]._rebuild_tensor_v2, self.args


def crafted_torch_file(obj, compress=False, record_sizes=None, byteorder=None, kinds=()):
    """The bytes of a zip file laid out as torch.save's (archive/data.pkl,
    archive/data/<key>, archive/version), whose pickle holds obj, built with
    stand-ins for torch's globals; record_sizes overrides a storage record's
    byte count (key -> bytes); byteorder, when given, is written as
    torch 2 writes it (archive/byteorder)."""
    torch_mod, utils = types.ModuleType("torch"), types.ModuleType("torch._utils")
    for kind in ("FloatStorage", "DoubleStorage", "LongStorage", "ComplexFloatStorage", *kinds):
        setattr(torch_mod, kind, type(kind, (), {"__module__": "torch"}))

    def _rebuild_tensor_v2(*args):
        raise AssertionError("only pickled")
    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch_mod._utils = utils
    storages = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, FakeStorage):
                storages[o.key] = o.data
                return ("storage", getattr(torch_mod, o.kind), o.key, o.location, o.numel)
            return None
    saved = _torch_module_names({"torch": torch_mod, "torch._utils": utils})
    try:
        buf = io.BytesIO()
        Pickler(buf, protocol=2).dump(obj)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    out = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(out, "w", method) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for key, data in storages.items():
            z.writestr(f"archive/data/{key}", data[:(record_sizes or {}).get(key, len(data))])
        z.writestr("archive/version", "3\n")
        if byteorder is not None:
            z.writestr("archive/byteorder", byteorder)
    return out.getvalue()


def floats(*values):
    return FakeStorage("FloatStorage", "0", np.array(values, dtype="<f4").tobytes(), len(values))


class TestTorchFiles(unittest.TestCase):
    """tmem.load of torch.save's zip files."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "torch.pt")

    def tearDown(self):
        self.dir.cleanup()

    def load_bytes(self, data, **kwargs):
        with open(self.path, "wb") as f:
            f.write(data)
        return tmem.load(self.path, **kwargs)

    def check(self, tensor, dtype, values):
        self.assertEqual(tensor.dtype, dtype)
        np.testing.assert_array_equal(tensor.numpy(), np.array(values))
        self.assertEqual(tensor.shape, np.array(values).shape)

    def test_a_checkpoint_written_by_torch_loads(self):
        data = zlib.decompress(base64.b64decode("".join(TORCH_1_13_FILE)))
        for got in (self.load_bytes(data), tmem.load(io.BytesIO(data))):
            linear = got["linear"]
            self.assertIs(type(linear), OrderedDict)
            self.assertEqual(list(linear), ["weight", "bias"])
            self.assertEqual(linear._metadata, OrderedDict([("", {"version": 1})]))
            self.check(linear["weight"], tmem.float32, [[0.5, -1.0, 2.0], [0.25, 3.0, -0.125]])
            self.check(linear["bias"], tmem.float32, [1.5, -2.5])
            x = np.arange(12.0).reshape(3, 4)
            self.check(got["t"], tmem.float64, x.T)  # a transposed view: strides (1, 4)
            self.check(got["row"], tmem.float64, x[1, 1:])  # a view at offset 5 of the same storage
            self.check(got["half"], tmem.float32, [1.5, -0.25, 65504.0])  # widened, exactly
            self.check(got["bf16"], tmem.float32, [1.0, -3.5])
            self.check(got["mask"], tmem.int64, [1, 0, 1])
            self.check(got["int32"], tmem.int64, [[-7, 2**31 - 1]])
            self.check(got["param"], tmem.float32, [2.0, 4.0])
            self.assertTrue(got["param"].requires_grad and got["param"].is_leaf)
            self.assertFalse(linear["weight"].requires_grad)
            self.check(got["scalar"], tmem.float64, -0.75)
            self.check(got["empty"], tmem.float32, np.zeros((0, 3)))
            self.check(got["steps"], tmem.int64, [2**40])
            self.assertEqual(got["dtype"], tmem.float64)
            self.assertEqual(got["size"], (2, 5))
            self.assertEqual(got["device"], "cpu")
            self.assertEqual(got["epoch"], 7)
        m = tmem.nn.Linear(3, 2)
        m.load_state_dict(self.load_bytes(data)["linear"])
        self.check(m(tmem.tensor([[1.0, 1.0, 1.0]])).detach(), tmem.float32, [[3.0, 0.625]])

    @unittest.skipIf(torch is None, "torch does not import (Debian: python3-torch)")
    def test_torch_files_of_every_dtype_and_layout_match_torch(self):
        gen = torch.Generator().manual_seed(3)
        base = torch.randn(4, 6, 5, generator=gen, dtype=torch.float64)
        obj = {"permuted": base.permute(2, 0, 1), "sliced": base[1:, ::2, 3], "narrow": base.narrow(2, 1, 3),
               "float": base.float().transpose(0, 2), "half": base.half()[1:3], "bf16": base.bfloat16()[2],
               "long": (base * 1000).long(), "int16": (base * 100).short(), "int8": (base * 10).char(),
               "uint8": (base * 10).abs().byte(), "bool": base > 0, "params": torch.nn.Linear(5, 7).state_dict()}
        torch.save(obj, self.path)
        got = tmem.load(self.path)
        wide = {torch.float16: np.float32, torch.bfloat16: np.float32, torch.int16: np.int64, torch.int8: np.int64,
                torch.uint8: np.int64, torch.bool: np.int64}
        for key, want in list(obj.items())[:-1] + list(obj["params"].items()):
            have = got["params"][key] if key in obj["params"] else got[key]
            ref = want.float() if want.dtype == torch.bfloat16 else want
            ref = ref.numpy().astype(wide.get(want.dtype, ref.numpy().dtype))
            self.assertEqual(have.dtype.name, {np.float32: "float32", np.float64: "float64",
                                               np.int64: "int64"}[ref.dtype.type], key)
            np.testing.assert_array_equal(have.numpy(), ref, err_msg=key)
        self.assertEqual(got["params"]._metadata, obj["params"]._metadata)

    def test_crafted_files_are_refused_with_the_fault_named(self):
        storage = floats(1, 2, 3, 4, 5, 6)
        good = crafted_torch_file({"x": FakeTensor(storage, 1, (2, 2), (1, 2))})
        self.check(self.load_bytes(good)["x"], tmem.float32, [[2, 4], [3, 5]])
        # One storage viewed by two tensors: each gets its own copy of its values.
        both = self.load_bytes(crafted_torch_file([FakeTensor(storage, 0, (3,), (2,)), FakeTensor(storage, 5, (), ())]))
        self.check(both[0], tmem.float32, [1, 3, 5])
        self.check(both[1], tmem.float32, 6)
        malformed = {
            "reaches element 6 of a storage of 6": {"x": FakeTensor(storage, 2, (2, 2), (1, 3))},
            "negative or not below 2\\*\\*62": {"x": FakeTensor(storage, 0, (2,), (-1,))},
            "negative or not below 2\\*\\*62 \\(0, \\(0, 1180591620717411303424\\)":
                {"x": FakeTensor(storage, 0, (0, 2**70), (1, 1))},
            "more than 64 dims": {"x": FakeTensor(storage, 0, (2**64,) * 40000, (1,) * 40000)},
            "has 1000000000000 elements but views a storage of 6 \\(an expanded tensor":
                {"x": FakeTensor(storage, 0, (10**12,), (0,))},
            "wrong types or more than 64 dims: storage a int": {"x": FakeTensor(5, 0, (1,), (1,))},
            "wrong types or more than 64 dims: storage FloatStorage, offset 0, size \\(2.0,\\)":
                {"x": FakeTensor(storage, 0, (2.0,), (1,))},
        }
        for message, obj in malformed.items():
            with self.assertRaisesRegex(pickle.UnpicklingError, "load: .*torch.pt is not a well-formed torch.save "
                                                                "file: .*" + message):
                self.load_bytes(crafted_torch_file(obj))
        records = {
            "its record archive/data/0 has 20 bytes, but its storage needs 24": dict(record_sizes={"0": 20}),
            "its record archive/data.pkl is compressed": dict(compress=True),
        }
        for message, kwargs in records.items():
            with self.assertRaisesRegex(pickle.UnpicklingError, "not a well-formed torch.save file: " + message):
                self.load_bytes(crafted_torch_file({"x": FakeTensor(storage, 0, (6,), (1,))}, **kwargs))
        with self.assertRaisesRegex(pickle.UnpicklingError, "it names torch.ComplexFloatStorage"):
            self.load_bytes(crafted_torch_file(FakeTensor(FakeStorage("ComplexFloatStorage", "0", b"", 0), 0, (0,),
                                                          (1,))))
        with self.assertRaisesRegex(pickle.UnpicklingError, "backward hooks"):
            self.load_bytes(crafted_torch_file(FakeTensor(storage, 0, (1,), (1,), hooks=[(0, 1)])))
        with self.assertRaisesRegex(pickle.UnpicklingError, "it names [\\w.]*_record_call"):
            self.load_bytes(crafted_torch_file({"x": _Malicious()}))
        self.assertEqual(CALLED, [])
        flagged = OrderedDict(a=1)
        flagged._metadata, flagged.keys = {}, "would shadow OrderedDict.keys"
        with self.assertRaisesRegex(pickle.UnpicklingError, "opcode BUILD on a OrderedDict with \\['_metadata', "
                                                            "'keys'\\]"):
            self.load_bytes(crafted_torch_file(flagged))
        on_gpu = FakeTensor(FakeStorage("FloatStorage", "0", b"\0" * 4, 1, "cuda:0"), 0, (1,), (1,))
        try:
            self.assertEqual(self.load_bytes(crafted_torch_file(on_gpu)).device, "cuda:0")  # where a GPU is
        except tmem.DeviceError as e:
            self.assertRegex(str(e), "torch.pt holds a tensor saved on cuda:0, which cannot be loaded onto cuda:0 "
                                     ".*map_location='cpu'")
        self.check(self.load_bytes(crafted_torch_file(on_gpu), map_location="cpu"), tmem.float32, [0])

    def test_byte_order_and_weights_only_false(self):
        big = FakeTensor(FakeStorage("DoubleStorage", "0", np.array([1.5, -2.0], dtype=">f8").tobytes(), 2), 0, (2,),
                         (1,))
        self.check(self.load_bytes(crafted_torch_file(big, byteorder="big")), tmem.float64, [1.5, -2.0])
        little = FakeTensor(FakeStorage("LongStorage", "0", np.array([3, -4], dtype="<i8").tobytes(), 2), 0, (2,), (1,))
        self.check(self.load_bytes(crafted_torch_file(little, byteorder="little")), tmem.int64, [3, -4])
        with self.assertRaisesRegex(tmem.IOError, "torch.pt names the byte order 'middle'"):
            self.load_bytes(crafted_torch_file(little, byteorder="middle"))
        got = self.load_bytes(crafted_torch_file({"x": little, "obj": _Malicious()}), weights_only=False)
        self.check(got["x"], tmem.int64, [3, -4])
        self.assertEqual(CALLED, [("ran",)])  # a trusted file's objects are built, as torch.load(weights_only=False)
        CALLED.clear()

    def test_what_a_small_file_cannot_make_load_do(self):
        """Found by a tester: each allocated gigabytes, hung, or gave a raw or recursive error."""
        def pickled(body):
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w") as z:
                z.writestr("archive/data.pkl", b"\x80\x02" + body + b".")
            return out.getvalue()
        with self.assertRaisesRegex(pickle.UnpicklingError, "truncated: a BYTEARRAY8 of 2147483648 bytes has 1"):
            self.load_bytes(pickled(b"\x96" + struct.pack("<Q", 2**31)))
        with self.assertRaisesRegex(pickle.UnpicklingError,
                                    r"a persistent id is not a storage record: \[\[\[\[\.\.\.\]\]\]\]"):
            self.load_bytes(pickled(b"]" * 100000 + b"a" * 99999 + b"Q"))
        storage = floats(1, 2, 3)
        self.check(self.load_bytes(crafted_torch_file(FakeTensor(storage, 2, (1,), (2**61,)))), tmem.float32, [3])
        with self.assertRaisesRegex(pickle.UnpicklingError, "holds what tmem cannot read: it holds a storage or a "
                                                            "torch function as a value"):
            self.load_bytes(crafted_torch_file({"s": storage}))
        one, same = self.load_bytes(crafted_torch_file([FakeTensor(storage, 0, (3,), (1,))] * 2))
        self.assertIs(one, same)  # one view named twice is one tensor, not two copies
        big = floats(*range(1 << 18))  # 1 MB; 80 views of almost all of it would copy 80 MB
        with self.assertRaisesRegex(pickle.UnpicklingError, "over 8 times the 1048576 bytes of its storages"):
            self.load_bytes(crafted_torch_file([FakeTensor(big, i, ((1 << 18) - 80,), (1,)) for i in range(80)]))
        half = FakeTensor(FakeStorage("HalfStorage", "0", struct.pack("<H", 0x7C01), 1), 0, (1,), (1,))
        with open(self.path, "wb") as f:
            f.write(crafted_torch_file(half, kinds=("HalfStorage",)))
        self.assertEqual(tmem.load(self.path).numpy().view("<u4").tolist(), [0x7FC02000])  # quiet, as torch's .float()

    def test_zip_faults_are_errors_naming_the_file(self):
        data = crafted_torch_file({"x": FakeTensor(floats(1, 2), 0, (2,), (1,))})
        central = data.index(b"PK\x01\x02")
        encrypted = data[:central + 8] + bytes([data[central + 8] | 1]) + data[central + 9:]
        with self.assertRaisesRegex(tmem.IOError, "torch.pt is damaged: .*encrypted"):
            self.load_bytes(encrypted)
        with self.assertRaisesRegex(tmem.IOError, "holds more than one zip file, or bytes before its archive"):
            self.load_bytes(data + data)
        mid = io.BytesIO(b"head" + data)
        mid.seek(4)
        self.check(tmem.load(mid)["x"], tmem.float32, [1, 2])  # a file object positioned where the zip starts
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as z:
            z.writestr("archive/xdata.pkl", b"\x80\x02K\x01.")
        with self.assertRaisesRegex(tmem.IOError, "not a torch.save file \\(it has 0 records"):
            self.load_bytes(out.getvalue())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zipfile warns of the duplicate it writes
            with zipfile.ZipFile(out, "a") as z:
                z.writestr("archive/xdata.pkl", b"\x80\x02K\x02.")
        with self.assertRaisesRegex(tmem.IOError, "two records of one name"):
            self.load_bytes(out.getvalue())

    def test_damaged_and_legacy_files_are_errors_naming_them(self):
        data = crafted_torch_file({"x": FakeTensor(floats(1, 2), 0, (2,), (1,))})
        at = data.index(np.array([1, 2], dtype="<f4").tobytes())
        damaged = data[:at] + b"\xff" + data[at + 1:]
        with self.assertRaisesRegex(tmem.IOError, "load: .*torch.pt is damaged: Bad CRC-32"):
            self.load_bytes(damaged)
        with self.assertRaisesRegex(tmem.IOError, "starts as a zip file .* but is not one"):
            self.load_bytes(data[:len(data) // 2])
        with self.assertRaisesRegex(tmem.IOError, "is a zip file, but not a torch.save file \\(it has 0 records"):
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w") as z:
                z.writestr("notes.txt", "hello")
            self.load_bytes(out.getvalue())
        legacy = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."
        with self.assertRaisesRegex(tmem.IOError, "torch's format before 1.6"):
            self.load_bytes(legacy + b"\0" * 16)

    def test_a_stream_that_cannot_seek_is_read_whole(self):
        data = crafted_torch_file({"x": FakeTensor(floats(1, 2), 0, (2,), (1,))})

        class Pipe(io.RawIOBase):
            def __init__(self):
                self.data = memoryview(data)

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), 5, len(self.data))
                b[:n] = self.data[:n]
                self.data = self.data[n:]
                return n
        self.check(tmem.load(Pipe())["x"], tmem.float32, [1, 2])


if __name__ == "__main__":
    unittest.main()
