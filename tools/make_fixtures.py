#!/usr/bin/python3
"""Regenerates the PyTorch reference fixtures in tests/fixtures/.

Run with Debian's python3-torch:  /usr/bin/python3 tools/make_fixtures.py
Each module in tools/fixtures/ has a generate() that returns a dict of named
cases; this writes them to tests/fixtures/<module>.json. A module may also have
a files() that returns {file name: bytes}, written to tests/fixtures/ as they
are (a file in another format, e.g. a safetensors file). Name modules on the
command line to regenerate only those. A tensor is stored as
{"shape": [...], "data": [...]} (row-major, float64 values), so the C++ tests
read it with tmem::test::fixture_tensor.
"""
import importlib
import json
import pathlib
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))


def main():
    torch.manual_seed(0)
    out_dir = ROOT / "tests" / "fixtures"
    out_dir.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    for path in sorted((ROOT / "tools" / "fixtures").glob("*.py")):
        if path.stem.startswith("_") or (only and path.stem not in only):
            continue
        module = importlib.import_module(f"fixtures.{path.stem}")
        cases = module.generate()
        target = out_dir / f"{path.stem}.json"
        target.write_text(json.dumps(cases, indent=None, separators=(",", ":")) + "\n")
        print(f"wrote {target.relative_to(ROOT)}: {len(cases)} cases, torch {torch.__version__}")
        for name, data in getattr(module, "files", dict)().items():
            (out_dir / name).write_bytes(data)
            print(f"wrote {(out_dir / name).relative_to(ROOT)}: {len(data)} bytes")


if __name__ == "__main__":
    main()
