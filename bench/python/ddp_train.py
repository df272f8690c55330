"""The Python peer of worker/train for train_bench: the same tasks, models,
optimizers, data and sampler (see the train contract), written the way the
PyTorch DDP tutorials write it, so the two can be timed side by side.

Run it under torchrun (or ddprun):
  python3 -m torch.distributed.run --standalone --nproc_per_node 2 ddp_train.py --task mlp

Rank 0 prints one line per epoch and, at the end, the line train_bench reads:
  throughput: samples=<global samples> seconds=<training seconds> samples_per_s=<ratio>
Snapshot flags are accepted for command-line parity with train and ignored.
--backend is train's: auto trains on cuda:LOCAL_RANK with NCCL where torch
sees a GPU, else on the CPU with Gloo; batches move to the device one at a
time, as train and the tutorials move them.
"""

import argparse
import gzip
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

DEFAULT_LR = {"mlp": 0.01, "fmnist": 0.001, "autoencoder": 0.001}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])

    def add(name, **kwargs):  # train accepts both spellings of every flag
        underscored = "--" + name[2:].replace("-", "_")
        parser.add_argument(*dict.fromkeys([name, underscored]), **kwargs)

    add("--task", choices=sorted(DEFAULT_LR), default="mlp")
    add("--total-epochs", type=int, default=10)
    add("--batch-size", type=int, default=32, help="per rank")
    add("--lr", type=float, default=None)
    add("--seed", type=int, default=0)
    add("--data-dir", default="/usr/share/datasets/fashion-mnist")
    add("--samples", type=int, default=None, help="mlp: dataset size; else first N images")
    add("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    add("--loader", choices=["dataloader", "tensor"], default="dataloader")
    add("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    add("--save-every", type=int, default=5, help="ignored")
    add("--snapshot-path", default="snapshot.pt", help="ignored")
    add("--ignore-snapshot", action="store_true", help="ignored")
    return parser.parse_args()


def read_idx(path, header_bytes):
    """One of Debian's gzipped IDX files as a flat uint8 tensor, header skipped."""
    with gzip.open(path, "rb") as f:
        data = bytearray(f.read())  # writable, so frombuffer does not warn
    return torch.frombuffer(data, dtype=torch.uint8, offset=header_bytes)


def fashion_mnist(data_dir, split, limit):
    """(images as float32 in [0, 1], shape [n, 784]; labels as int64)."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"), 16)
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"), 8)
    images = images.view(-1, 784)
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images.float() / 255.0, labels.long()


def build_data(args):
    """The training inputs and targets, and for fmnist the test set."""
    if args.task == "mlp":
        torch.manual_seed(args.seed)
        n = args.samples or 2048
        return torch.rand(n, 20), torch.rand(n, 1), None
    images, labels = fashion_mnist(args.data_dir, "train", args.samples)
    if args.task == "autoencoder":
        return images, images, None
    return images, labels, fashion_mnist(args.data_dir, "t10k", 0)


def build_model(task):
    if task == "mlp":
        return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 1)), nn.MSELoss()
    if task == "fmnist":
        layers = [nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)]
        return nn.Sequential(*layers), nn.CrossEntropyLoss()
    layers = [nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU()]
    layers += [nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 784)]
    return nn.Sequential(*layers), nn.MSELoss()


def batches(args, inputs, targets, sampler):
    """This rank's batches for the current epoch, by the chosen loader."""
    if args.loader == "dataloader":  # what the tutorials do
        loader = DataLoader(TensorDataset(inputs, targets), batch_size=args.batch_size,
                            sampler=sampler, num_workers=0)
        yield from loader
        return
    # Best-effort Python: one gather per batch straight from the whole tensors,
    # with no per-sample Dataset calls and no collate.
    indices = torch.tensor(list(iter(sampler)), dtype=torch.long)
    for batch in torch.split(indices, args.batch_size):
        yield inputs[batch], targets[batch]


def accuracy(model, test, device):
    images, labels = (t.to(device) for t in test)
    with torch.no_grad():
        predicted = model(images).argmax(dim=1)
    return 100.0 * (predicted == labels).float().mean().item()


def choose_device(backend):
    """(backend, device) as train chooses them for --backend."""
    if backend == "gloo" or (backend == "auto" and not torch.cuda.is_available()):
        return "gloo", torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    return "nccl", device


def main():
    args = parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    backend, device = choose_device(args.backend)
    dist.init_process_group(backend)  # RANK, WORLD_SIZE, MASTER_* from the launcher
    rank, world = dist.get_rank(), dist.get_world_size()

    inputs, targets, test = build_data(args)
    torch.manual_seed(args.seed)  # model init after the data, as the contract says
    model, loss_fn = build_model(args.task)
    model.to(device)
    device_ids = [device.index] if device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=device_ids)
    lr = args.lr if args.lr is not None else DEFAULT_LR[args.task]
    if args.task == "mlp":
        optimizer = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=0.9)
    else:
        optimizer = torch.optim.Adam(ddp.parameters(), lr=lr)
    sampler = DistributedSampler(TensorDataset(inputs, targets), shuffle=True, seed=args.seed)

    total_samples, total_seconds = 0, 0.0
    for epoch in range(args.total_epochs):
        start = time.perf_counter()
        sampler.set_epoch(epoch)
        loss_sum = 0.0
        for x, y in batches(args, inputs, targets, sampler):
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp(x), y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(x)
        # the loss over every rank's samples, as train reports it (one small all-reduce)
        totals = torch.tensor([loss_sum, float(len(sampler))], dtype=torch.float64, device=device)
        dist.all_reduce(totals)
        seconds = time.perf_counter() - start
        samples = len(sampler) * world  # every rank's shard, padding included
        total_samples += samples
        total_seconds += seconds
        if rank == 0:  # evaluation is outside the timed part
            # 0-based like train's, so the two logs line up
            line = f"epoch {epoch}/{args.total_epochs} | loss {(totals[0] / totals[1]).item():.6f}"
            if test is not None:
                line += f" | accuracy {accuracy(model, test, device):.2f}%"
            print(f"{line} | {samples} samples in {seconds:.3f} s", flush=True)

    if rank == 0:
        rate = total_samples / total_seconds if total_seconds > 0 else 0.0
        print(f"throughput: samples={total_samples} seconds={total_seconds:.6f} "
              f"samples_per_s={rate:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
