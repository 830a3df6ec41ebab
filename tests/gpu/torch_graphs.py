"""CUDA graphs in PyTorch on a real GPU, for make test-gpu.

    torch_graphs.py OUT.json

A small MLP step captured with torch.cuda.graph (capture_error_mode
"global", PyTorch's default: any call the capture forbids, from any
thread, breaks it) and replayed. Under PYTORCH_CUDA_ALLOC_CONF=
backend:cudaMallocAsync the tensors made inside the capture are
cudaMallocAsync calls on the capturing stream: graph nodes, which the
trace must flag `captured` and hold no memory for. Prints a checksum of
the replays (the same with and without the shim, or the shim changed what
the program computed) and writes torch's figures to OUT.json.
"""
import json
import sys

import torch


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    dev = torch.device("cuda")
    w1 = torch.randn(1024, 4096, device=dev)
    w2 = torch.randn(4096, 1024, device=dev)
    static_in = torch.randn(64, 1024, device=dev)

    def step(x):
        h = torch.relu(x @ w1)
        return torch.tanh(h @ w2)

    # Warm-up on a side stream, as torch.cuda.graph's documentation asks.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(static_in)
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = step(static_in)
    sums = []
    for i in range(4):
        static_in.copy_(torch.full((64, 1024), 0.01 * (i + 1), device=dev))
        graph.replay()
        sums.append(float(static_out.double().sum().item()))
    torch.cuda.synchronize()
    print("replays: " + " ".join("%.6e" % s for s in sums))
    with open(out, "w") as f:
        json.dump({"max_memory_allocated": torch.cuda.max_memory_allocated(),
                   "max_memory_reserved": torch.cuda.max_memory_reserved()}, f)


if __name__ == "__main__":
    main()
