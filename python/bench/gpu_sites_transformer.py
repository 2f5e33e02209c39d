"""A small transformer with a deliberate oversized temporary in one layer, for checking
`vramscope run --sites` on a real GPU (issue 14 §4). Needs CUDA.

    python3 python/bench/gpu_sites_transformer.py --steps 40            # step times
    vramscope run --no-monitor --sites -- python3 python/bench/gpu_sites_transformer.py \
        --steps 12 --oom-step 10                                        # dies of an OOM

Layer `--big-layer` (default 3 of 6) builds its causal mask as a dense float tensor of
B x H x T x T (the classic mistake: `torch.full(..., -inf).triu(1)`, two tensors of 4 GiB
at the defaults, against about 2 GiB for the largest other line) on the line marked OVERSIZED below; SDPA keeps it for the backward pass. At `--oom-step` the
batch's sequence is long enough that the same line asks for more than the card holds, and
the job dies of torch.OutOfMemoryError, as a real one would.

Prints one JSON line per run: the line number of the oversized temporary, the median and
mean step time after `--warmup` steps, the allocator's peak, and, with `--request-snapshot`
under vramscope, how long `vramscope.snapshot()` took on the training thread. With
`--alloc-bench N` it also times N allocate-and-free pairs of a 4 KiB tensor with the
allocator's history off and then on (`context="alloc"`, `stacks="python"`), the cost the
history adds to each allocation.
"""

import argparse
import inspect
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim, heads, oversized):
        super().__init__()
        self.heads = heads
        self.oversized = oversized
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        if self.oversized:
            # An additive causal mask, dense: 0 on and below the diagonal, -inf above.
            mask = torch.full((b, self.heads, t, t), float("-inf"), device=x.device).triu(1)  # OVERSIZED
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Model(nn.Module):
    def __init__(self, vocab, dim, heads, layers, big_layer):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, i == big_layer) for i in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def oversized_line():
    source, first = inspect.getsourcelines(Block.forward)
    return next(first + i for i, line in enumerate(source) if line.rstrip().endswith("# OVERSIZED"))


def oom_length(args):
    """The shortest doubled sequence length whose mask (one B x H x T x T float tensor) is
    larger than the card: the OVERSIZED line's first request fails."""
    total = torch.cuda.get_device_properties(0).total_memory
    t = args.seq
    while args.batch * args.heads * t * t * 4 <= total:
        t *= 2
    return t


def alloc_bench(n):
    """Seconds per allocate-and-free pair of a 4 KiB tensor, history off then on (run it
    without `--sites`, so that off is off)."""

    def run():
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            torch.empty(1024, device="cuda")
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / n

    run()
    off = min(run() for _ in range(3))
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=100_000)
    on = min(run() for _ in range(3))
    torch.cuda.memory._record_memory_history(enabled=None)
    return off, on


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--oom-step", type=int, default=None)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--big-layer", type=int, default=3)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--request-snapshot", action="store_true")
    p.add_argument("--alloc-bench", type=int, default=0)
    p.add_argument("--label", default="")
    args = p.parse_args()

    torch.manual_seed(0)
    model = Model(args.vocab, args.dim, args.heads, args.layers, args.big_layer).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    out = {"label": args.label, "oversized_line": oversized_line(), "file": __file__}
    print(json.dumps({"start": out}), flush=True)
    times = []
    for step in range(args.steps):
        t = args.seq
        if args.oom_step is not None and step == args.oom_step:
            t = oom_length(args)
            print(json.dumps({"oom_step": step, "seq": t}), flush=True)
        tokens = torch.randint(0, args.vocab, (args.batch, t), device="cuda")
        torch.cuda.synchronize()
        start = time.perf_counter()
        logits = model(tokens)
        loss = F.cross_entropy(logits.view(-1, args.vocab), tokens.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del logits, loss
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    steady = times[args.warmup :] or times
    out.update(
        steps=len(times),
        step_ms_median=round(statistics.median(steady) * 1e3, 3),
        step_ms_mean=round(statistics.fmean(steady) * 1e3, 3),
        max_allocated=torch.cuda.max_memory_allocated(),
        max_reserved=torch.cuda.max_memory_reserved(),
    )
    if args.request_snapshot:
        import vramscope

        start = time.perf_counter()
        path = vramscope.snapshot()
        out.update(snapshot_s=round(time.perf_counter() - start, 4), snapshot_path=path)
    if args.alloc_bench:
        off, on = alloc_bench(args.alloc_bench)
        out.update(alloc_free_us_history_off=round(off * 1e6, 3), alloc_free_us_history_on=round(on * 1e6, 3))
    print(json.dumps({"done": out}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
