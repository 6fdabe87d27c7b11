"""The 512-token prefill GEMMs of a Llama-3-8B shape through PyTorch (cuBLAS) on the GPU, bf16:
median time of 50 launches (four weights in turn) and TFLOPS per shape, merged widths beside
the separate ones (q/k/v as one N = 6144, gate/up as one N = 28672), for judging what luminal's
cuBLASLt calls (LUMINAL_CUDA_TUNE_LOG=1 prints their timings) could gain by running together.

    python3 benchmarks/cuda/torch_gemm_shapes.py
"""
import torch


def time_linear(m, n, k, reps=50):
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
    for w in ws:
        torch.nn.functional.linear(x, w)
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.nn.functional.linear(x, ws[i % 4])
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    times.sort()
    us = times[len(times) // 2]
    print(f"m={m} n={n} k={k}: {us:.1f} us, {2 * m * n * k / us / 1e6:.0f} TFLOPS")


if __name__ == "__main__":
    for n, k in [(1024, 4096), (4096, 4096), (6144, 4096), (14336, 4096), (28672, 4096), (4096, 14336)]:
        time_linear(512, n, k)
