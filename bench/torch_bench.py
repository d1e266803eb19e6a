"""PyTorch side of `make bench`: the same work as bench/run.lua, in groups of the same names.
Run with Debian's python3-torch (/usr/bin/python3):
  torch_bench.py THREADS [GROUP...]   runs the groups (all by default) and prints `name value`
  torch_bench.py --serve THREADS      runs the group named on each stdin line, then prints `end`
                                      (bench/run.lua alternates its rounds with this process);
                                      `pin N` / `pin` moves it to CPU N / back to all CPUs
Units match run.lua's."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serial_bench  # noqa: E402  (its timeit is shared)

serve = len(sys.argv) > 1 and sys.argv[1] == "--serve"
args = sys.argv[2:] if serve else sys.argv[1:]
torch.set_num_threads(int(args[0]) if args else 1)


def timeit(fn, min_time=0.3, warm=3):
    """Seconds of the fastest call made within min_time (at least 3, after warm-up calls)."""
    return serial_bench.timeit(fn, min_time, warm)


def train_step(model, opt, x, y):
    """One cross-entropy training step of model on (x, y), as a function to time."""
    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return step


def report(name, value):
    print(f"{name} {value:.6g}", flush=True)


GROUPS = {}


def group(name):
    def register(fn):
        GROUPS[name] = fn
        return fn
    return register


@group("small_add")
def bench_small_add():
    a, b = torch.randn(16), torch.randn(16)
    n = 20000
    def loop():
        for _ in range(n):
            a + b
    report("small_add_ns", timeit(loop) / n * 1e9)

@group("add_16m")
def bench_add_16m():
    a, b = torch.randn(16 << 20), torch.randn(16 << 20)
    # the same code as Lantern's (a fresh output each time, which PyTorch's allocator maps
    # and faults in anew), and PyTorch's best case writing into a kept output
    report("add_16m_gbs", 3 * 4 * (16 << 20) / timeit(lambda: a + b) / 1e9)
    out = torch.empty(16 << 20)
    t = timeit(lambda: torch.add(a, b, out=out))
    report("add_16m_out_gbs", 3 * 4 * (16 << 20) / t / 1e9)

@group("gemm")
def bench_gemm():
    for n in (256, 512, 1024):
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = timeit(lambda: a @ b)
        report(f"gemm_{n}_gflops", 2 * n ** 3 / t / 1e9)

@group("mlp_small")
def bench_mlp_small():
    torch.manual_seed(0)
    w1 = torch.randn(16, 32, requires_grad=True)
    b1 = torch.zeros(32, requires_grad=True)
    w2 = torch.randn(32, 1, requires_grad=True)
    b2 = torch.zeros(1, requires_grad=True)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    def step():
        h = torch.relu(x @ w1 + b1)
        loss = ((h @ w2 + b2 - y) ** 2).mean()
        loss.backward()
        for p in (w1, b1, w2, b2):
            p.grad = None
    report("mlp_small_us", timeit(step, 0.5) * 1e6)

@group("mlp_784")
def bench_mlp_784():
    torch.manual_seed(0)
    sizes = [784, 512, 512, 10]
    ws = [(torch.randn(sizes[i], sizes[i + 1]) * 0.05).requires_grad_() for i in range(3)]
    bs = [torch.zeros(sizes[i + 1], requires_grad=True) for i in range(3)]
    params = ws + bs
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))
    def step():
        h = x
        for i in range(3):
            h = h @ ws[i] + bs[i]
            if i < 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    report("mlp_784_ms", timeit(step, 1.0) * 1e3)

@group("lenet")
def bench_lenet():
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                          nn.Linear(84, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = train_step(model, opt, torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    report("lenet_ms", timeit(step, 1.0) * 1e3)

@group("demo")
def bench_demo():
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = train_step(model, opt, torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))
    report("demo_img_per_s", 64 / timeit(step, 1.0))

@group("serial")
def bench_serial():
    serial_bench.run(report)


def main():
    if serve:
        print("ready", flush=True)   # torch is imported: the caller starts its rounds now
        for line in sys.stdin:
            words = line.split()
            if words and words[0] == "pin":   # "pin 0": run on CPU 0 only; "pin": on all again
                os.sched_setaffinity(0, {int(words[1])} if len(words) > 1 else range(os.cpu_count()))
            elif words and words[0] in GROUPS:
                GROUPS[words[0]]()
            print("end", flush=True)
    else:
        wanted = args[1:]
        for name, fn in GROUPS.items():
            if not wanted or any(name.startswith(w) for w in wanted):
                fn()


main()
