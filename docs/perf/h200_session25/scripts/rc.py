import torch, sglang_fp8ext as fx
dev = torch.device("cuda"); g = torch.Generator().manual_seed(5)
for n, k, m in ((5120, 4096, 24), (4096, 2048, 32)):
    w = (torch.randn(n, k, generator=g) * 0.5).to(torch.float8_e4m3fn).to(dev)
    ws = (torch.rand((n + 127) // 128, k // 128, generator=g) * 1e-2 + 1e-3).to(dev)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16).to(dev)
    fx.smallm_gemm(x, w, ws, False, None)
torch.cuda.synchronize(); print("ran")
