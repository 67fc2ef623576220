# Python-side module paths (bench/RESULTS.md): a registered buffer assigned in a loop, a buffer
# registered and unregistered explicitly, and a deep copy of a chain of Python modules. Run: PYTHONPATH=build/python /usr/bin/python3 bench/python_module_paths.py
import time, tmem, tmem.nn as nn
class Net(nn.Module):
    def __init__(s):
        super().__init__()
        s.blocks = [nn.Linear(64, 64) for _ in range(50)]
        for i, b in enumerate(s.blocks): setattr(s, f"b{i}", b)
        s.register_buffer("count", tmem.zeros(1))
m = Net(); t = time.time()
for _ in range(2000): m.count = tmem.zeros(1)
print(f"{(time.time() - t) / 2000 * 1e6:.1f} us per buffer assignment (50 Linear children)")
t = time.time()
for _ in range(2000):
    m.register_buffer("extra", tmem.zeros(1))
    m.unregister("extra")
print(f"{(time.time() - t) / 2000 * 1e6:.1f} us per register_buffer + unregister pair (50 Linear children)")


class Level(nn.Module):
    def __init__(s, child=None):
        super().__init__()
        s.w = nn.Parameter(tmem.ones(2))
        if child is not None:
            s.c = child


import copy  # noqa: E402

chain = Level()
for _ in range(400):
    chain = Level(chain)
t = time.time()
copy.deepcopy(chain)
print(f"{time.time() - t:.2f} s to deep-copy a 400-level chain of Python modules")
