"""PyTorch side of bench/serial_bench.lua: torch.save / torch.load of the same ~100 MB float32
state_dict (50 tensors of 512 x 1024), printed as `name value` lines in MB/s.
Run with Debian's python3-torch:  /usr/bin/python3 bench/serial_bench.py [dir]
or from bench/torch_bench.py, which imports it (and its timeit): serial_bench.run(report).
(safetensors is not installed here, so only the .pt numbers have a PyTorch counterpart.)"""
import collections
import os
import sys
import tempfile
import time

import torch

N_TENSORS, ROWS, COLS = 50, 512, 1024
MB = N_TENSORS * ROWS * COLS * 4 / 1e6


def timeit(fn, min_time=1.0, warm=1):
    """Seconds of the fastest call made within min_time (at least 3, after warm-up calls), as in
    bench/run.lua; bench/torch_bench.py uses it too."""
    for _ in range(warm):
        fn()
    best, n, start = float("inf"), 0, time.perf_counter()
    while n < 3 or time.perf_counter() - start <= min_time:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        n += 1
    return best


def run(report, d=None):
    """Reports serial_save_mbs and serial_load_mbs through report(name, value)."""
    d = d or tempfile.gettempdir()
    torch.manual_seed(0)
    sd = collections.OrderedDict(("layers.%d.weight" % i, torch.randn(ROWS, COLS))
                                 for i in range(N_TENSORS))
    path = os.path.join(d, "torch_bench.pt")
    report("serial_save_mbs", MB / timeit(lambda: torch.save(sd, path)))
    report("serial_load_mbs", MB / timeit(lambda: torch.load(path)))
    os.remove(path)


if __name__ == "__main__":
    run(lambda name, v: print("%s %.6g" % (name, v), flush=True),
        sys.argv[1] if len(sys.argv) > 1 else None)
