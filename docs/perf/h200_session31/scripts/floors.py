"""Session 31 call 2: bench's floors (op bytes over the copy rate measured now) for the 15 fp32 points,
so that a config_ab run in the same call can be read against them. Writes floors.json to argv[1]."""
import json
import sys

import torch

sys.path.insert(0, ".")
from sglang_fp8ext.bench import device_uuid, measure_copy_bandwidth, op_bytes  # noqa: E402

rate = measure_copy_bandwidth(torch.device("cuda"))
floors = {f"{n}x{k}x{m}": op_bytes(n, k, m, False) / (rate * 1e12) * 1e6
          for n, k in [(5120, 4096), (4608, 4096), (4096, 2048)] for m in (1, 4, 8, 16, 32)}
json.dump({"copy_TBps": rate, "device_uuid": device_uuid(), "floor_us": floors}, open(sys.argv[1], "w"), indent=1)
print(f"copy rate {rate:.2f} TB/s")
