"""PyTorch's side of bench/ddp.lua: the demo CNN, Adam, global batch 64 split over N processes
(torch.distributed with gloo on this machine, DistributedDataParallel), one thread each; prints
"images_per_s <n>". A world of one trains the plain module.
  /usr/bin/python3 bench/ddp_torch.py N [steps]"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F

BATCH, WARM = 64, 5


def run(rank, world, steps, port):
    torch.set_num_threads(1)
    if world > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    per = BATCH // world
    x, y = torch.randn(per, 1, 28, 28), torch.randint(0, 10, (per,))

    def step():
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(WARM):
        step()
    if world > 1:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if world > 1:
        dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        print("images_per_s %.1f" % (steps * BATCH / dt), flush=True)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    world = int(sys.argv[1])
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    port = 29500 + os.getpid() % 1000
    if world == 1:
        run(0, 1, steps, port)
    else:
        mp.spawn(run, args=(world, steps, port), nprocs=world)
