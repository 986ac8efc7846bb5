"""Session 25: which kernel and grid the default plan of one shape launches, after which calls (one process per scenario)."""
import os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "tools"))
import torch
from sglang_fp8ext import linear, tune
from sglang_fp8ext.bench import make_weight
from config_ab import launched_kernels

dev = torch.device("cuda"); g = torch.Generator(device=dev).manual_seed(0)
n, k = (int(v) for v in sys.argv[1].split("x"))
w, s, _ = make_weight(n, k, False, dev, g)
for step in sys.argv[2:]:  # "M" (default) or "M:config" ; "prof:M" profiles before the plain call
    prof_first = step.startswith("prof:")
    step = step[5:] if prof_first else step
    m, _, cfg = step.partition(":")
    config = None if not cfg else [int(v) for v in cfg.split(",")]
    x = tune.activations(int(m), k, g, dev)
    fn = lambda: linear.run_path("fused", config, x, w, s, False, None)
    if not prof_first:
        fn(); torch.cuda.synchronize()
    ks = launched_kernels(fn)
    print(f"  {n}x{k} M={m} config={config}{' (profiled first)' if prof_first else ''}: " +
          "; ".join(f"{kk['name'][28:70]} grid {kk['grid']} smem {kk['smem']}" for kk in ks), flush=True)
