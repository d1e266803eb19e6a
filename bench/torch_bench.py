"""PyTorch side of `make bench`: the same work as bench/run.lua, in groups of the same names.
Run with Debian's python3-torch (/usr/bin/python3):
  torch_bench.py THREADS [GROUP...]   runs the groups (all by default) and prints `name value`
  torch_bench.py --serve THREADS      runs the group named on each stdin line, then prints `end`
                                      (bench/run.lua alternates its rounds with this process);
                                      `pin N` / `pin` moves it to CPU N / back to all CPUs
Units match run.lua's."""
import math
import os
import sys
import time

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

@group("conv")
def bench_conv():
    torch.manual_seed(0)
    for name, n, hw in (("conv3x3_16_ms", 32, 16), ("conv3x3_8_ms", 64, 8)):
        x = torch.randn(n, 64, hw, hw, requires_grad=True)
        w = torch.randn(64, 64, 3, 3, requires_grad=True)
        b = torch.randn(64, requires_grad=True)
        g = torch.randn(n, 64, hw, hw)
        def step():
            torch.nn.functional.conv2d(x, w, b, padding=1).backward(g)
            x.grad = w.grad = b.grad = None
        report(name, timeit(step, 1.0) * 1e3)

@group("act_1m")
def bench_act_1m():
    x, m = torch.randn(1 << 20), torch.randn(1024, 1024)
    F = torch.nn.functional
    report("gelu_1m_us", timeit(lambda: F.gelu(x)) * 1e6)
    report("gelu_tanh_1m_us", timeit(lambda: F.gelu(x, approximate="tanh")) * 1e6)
    report("softmax_1m_us", timeit(lambda: m.softmax(-1)) * 1e6)

@group("char_mlp")
def bench_char_mlp():
    torch.manual_seed(0)
    nn = torch.nn
    emb = nn.Embedding(65, 32)
    mlp = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                        nn.Linear(512, 65))
    opt = torch.optim.SGD(list(emb.parameters()) + list(mlp.parameters()), lr=0.01, momentum=0.9)
    x, y = torch.randint(0, 65, (128, 16)), torch.randint(0, 65, (128,))
    def step():
        loss = torch.nn.functional.cross_entropy(mlp(emb(x).reshape(128, 512)), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    report("char_mlp_ms", timeit(step, 1.0) * 1e3)

class _Attn(torch.nn.Module):
    def __init__(self, d, nh, T):
        super().__init__()
        self.nh = nh
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, D = x.shape
        hd = D // self.nh
        q, k, v = (t.view(B, T, self.nh, hd).transpose(1, 2) for t in self.qkv(x).split(D, dim=2))
        att = ((q @ k.transpose(2, 3)) * (1 / math.sqrt(hd))).masked_fill(self.mask, float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).contiguous().view(B, T, D))

class _Block(torch.nn.Module):
    def __init__(self, d, nh, T):
        super().__init__()
        nn = torch.nn
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), _Attn(d, nh, T), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

class _GPT(torch.nn.Module):
    def __init__(self, vocab=65, T=64, d=128, nh=4, layers=2):
        super().__init__()
        nn = torch.nn
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.blocks = nn.ModuleList([_Block(d, nh, T) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))

@group("gpt")
def bench_gpt():
    torch.manual_seed(0)
    model = _GPT().train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    B, T, V = 16, 64, 65
    def step():
        seq = torch.randint(0, V, (B, T + 1))
        logits = model(seq[:, :T])
        loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, V), seq[:, 1:].reshape(B * T))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    report("gpt_step_ms", timeit(step, 2.0) * 1e3)

@group("train_cpu")
def bench_train_cpu():
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = train_step(model, opt, torch.randn(128, 784), torch.randint(0, 10, (128,)))
    for _ in range(10):
        step()
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(200):
        step()
    c1, w1 = time.process_time(), time.perf_counter()
    report("train_cpu_per_wall", (c1 - c0) / (w1 - w0))
    report("train_step_ms", (w1 - w0) / 200 * 1e3)

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
