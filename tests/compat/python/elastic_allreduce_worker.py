"""A python3-torch worker for ddprun's elastic jobs: joins the gloo process
group from the environment the agent gave it (the round's workers' store),
all-reduces its rank and prints what every rank must agree on."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank())])
dist.all_reduce(total)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {int(total.item())}, "
      f"attempt {os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
dist.destroy_process_group()
