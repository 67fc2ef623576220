"""tmem.save and tmem.load (torch.save and torch.load)."""
import io
import os
import pathlib
import pickle
import struct
import tempfile
import unittest
import zlib
from collections import OrderedDict

import numpy as np

import tmem

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


if __name__ == "__main__":
    unittest.main()
