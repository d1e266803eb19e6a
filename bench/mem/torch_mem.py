"""PyTorch twins of bench/mem/{mlp,cnn,gpt}.lua: the same models, shapes, optimisers and step
counts, each printing the same one-line `mem loop=NAME impl=pytorch ...` record (fields:
bench/mem/harness.lua, less lua_mb). Run with Debian's python3-torch, one loop per fresh process:
  /usr/bin/python3 bench/mem/torch_mem.py LOOP [THREADS=2] [STEPS]
bench/mem.lua runs it beside Lantern's loops."""
import math
import os
import sys

LOOP = sys.argv[1] if len(sys.argv) > 1 else ""
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else 2
# OpenBLAS inside PyTorch ignores torch.set_num_threads: give it the same count before loading.
# PyTorch's OpenMP workers spin after each parallel region (the default wait policy) and then
# compete with OpenBLAS's own threads for this machine's 2 cores: with 2 threads an nn.Linear
# forward (addmm, whose bias copy runs under OpenMP) took 26 ms instead of 3.7. Passive waiting
# avoids that; set OMP_WAIT_POLICY to override.
os.environ["OPENBLAS_NUM_THREADS"] = str(THREADS)
os.environ["OMP_NUM_THREADS"] = str(THREADS)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(THREADS)


def rss():
    """(VmRSS, VmHWM) of this process in MB."""
    with open("/proc/self/status") as f:
        fields = dict(line.split(":", 1) for line in f if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def run(loop, steps, base_mb, step, early_step=10):
    """Runs step(i) (one training step, returns the loss as a float) `steps` times; prints the
    record as bench/mem/harness.lua does."""
    times, loss_first, loss_last, rss_early = [], None, None, None
    early = min(early_step, steps)
    for i in range(1, steps + 1):
        t0 = time.perf_counter()
        loss = step(i)
        times.append(time.perf_counter() - t0)
        if i == 1:
            loss_first = loss
        loss_last = loss
        if i == early:
            rss_early = rss()[0]
    rss_late, peak = rss()
    tail = sorted(times[steps // 2:])
    n = len(tail)
    median = tail[(n - 1) // 2] if n % 2 == 1 else (tail[n // 2 - 1] + tail[n // 2]) / 2
    print(f"mem loop={loop} impl=pytorch threads={THREADS} steps={steps} step_ms={median * 1e3:.3f} "
          f"base_mb={base_mb:.1f} early_step={early} rss_early_mb={rss_early:.1f} "
          f"rss_late_mb={rss_late:.1f} peak_mb={peak:.1f} "
          f"loss_first={loss_first:.4f} loss_last={loss_last:.4f}", flush=True)


def train(model, opt, batch):
    """A step function: batch() gives a fresh (input, target); cross-entropy loss."""
    def step(_):
        x, y = batch()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def loop_mlp(steps, base_mb):
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    run("mlp", steps, base_mb,
        train(model, opt, lambda: (torch.randn(128, 784), torch.randint(0, 10, (128,)))))


def loop_cnn(steps, base_mb):
    class Net(nn.Module):   # examples/fashion_mnist.lua's model
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.classifier = nn.Sequential(
                nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2),
                nn.Linear(128, 10))

        def forward(self, x):
            return self.classifier(self.features(x))

    model = Net().train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    run("cnn", steps, base_mb,
        train(model, opt, lambda: (torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,)))))


GPT_CFG = dict(vocab=65, block_size=64, d_model=128, n_head=4, n_layer=2, batch=16)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t attends to positions 0..t only."""

    def __init__(self, c):
        super().__init__()
        self.n_head = c["n_head"]
        self.qkv = nn.Linear(c["d_model"], 3 * c["d_model"])
        self.proj = nn.Linear(c["d_model"], c["d_model"])
        bs = c["block_size"]
        # true above the diagonal: the future positions that a query may not see
        self.register_buffer("mask", torch.ones(bs, bs, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        nh = self.n_head
        hd = C // nh
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, nh, hd).transpose(1, 2)   # (B, nh, T, hd)
        k = k.view(B, T, nh, hd).transpose(1, 2)
        v = v.view(B, T, nh, hd).transpose(1, 2)
        att = (q @ k.transpose(2, 3)) * (1 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(c)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok_emb = nn.Embedding(c["vocab"], c["d_model"])
        self.pos_emb = nn.Embedding(c["block_size"], c["d_model"])
        self.blocks = nn.ModuleList([Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["d_model"])
        self.head = nn.Linear(c["d_model"], c["vocab"], bias=False)

    def forward(self, idx):
        T = idx.size(1)
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def loop_gpt(steps, base_mb):
    c = GPT_CFG
    model = GPT(c).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    B, T, V = c["batch"], c["block_size"], c["vocab"]

    def batch():
        # a fresh batch of random token sequences; targets are the inputs shifted by one
        seq = torch.randint(0, V, (B, T + 1))
        return seq[:, :T], seq[:, 1:]
    run("gpt", steps, base_mb, train(model, opt, batch))


LOOPS = {"mlp": (loop_mlp, 300), "cnn": (loop_cnn, 300), "gpt": (loop_gpt, 100)}

if __name__ == "__main__":
    if LOOP not in LOOPS:
        sys.exit(f"usage: torch_mem.py {{{','.join(LOOPS)}}} [threads] [steps]")
    fn, default_steps = LOOPS[LOOP]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else default_steps
    base = rss()[0]
    torch.manual_seed(0)
    fn(steps, base)
