"""Memory by kind (`vramscope._torch_categories`) against PyTorch's own `MemTracker`, on the
real torch from PyPI: the same models, the same moments (after each optimizer step, before
`zero_grad`), on CPU tensors, where `MemTracker` runs on this machine. Parameters, buffers,
gradients and optimizer state must equal its figures to the byte.

`tests/python_package.rs` runs this module with the venv `.ci/run` installs.
"""

import sys
import unittest

import _support  # noqa: F401  (puts the package on the path)

try:
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker
except ImportError:
    raise unittest.SkipTest("the real torch is not installed for %s" % sys.executable)

from torch.utils.checkpoint import checkpoint

from vramscope import _torch_categories as C

CPU = ("cpu", None)
REFERENCE = {
    C.PARAMETERS: "PARAM",
    C.BUFFERS: "BUFFER",
    C.GRADIENTS: "GRAD",
    C.OPTIMIZER: "OPT",
}


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)
        )

    def forward(self, x):
        return self.net(x)

    @staticmethod
    def batch():
        return torch.randn(32, 64)


class TiedLm(torch.nn.Module):
    """Embedding and output head share one weight; a registered buffer beside them."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(500, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.head = torch.nn.Linear(64, 500, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("scale", torch.ones(64))

    def forward(self, x):
        return self.head(self.norm(self.emb(x)) * self.scale)

    @staticmethod
    def batch():
        return torch.randint(0, 500, (8, 16))


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(300, 64)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True, dropout=0.0)
            for _ in range(2)
        )
        self.out = torch.nn.Linear(64, 300)

    def forward(self, x):
        h = self.emb(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)

    @staticmethod
    def batch():
        return torch.randint(0, 300, (4, 24))


class Cnn(torch.nn.Module):
    """Batch norm: running statistics and a batch counter as buffers."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, 8, 3, padding=1),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(8, 10),
        )

    def forward(self, x):
        return self.net(x)

    @staticmethod
    def batch():
        return torch.randn(4, 3, 16, 16)


class Checkpointed(torch.nn.Module):
    """Its blocks' activations recomputed in the backward pass."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.GELU()) for _ in range(3)
        )

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x

    @staticmethod
    def batch():
        return torch.randn(16, 128)


def reference(tracker):
    snapshot = tracker.get_tracker_snapshot()[torch.device("cpu")]
    by_name = {str(k).rsplit(".", 1)[-1]: v for k, v in snapshot.items()}
    return {kind: by_name.get(name, 0) for kind, name in REFERENCE.items()}


class AgainstMemTracker(unittest.TestCase):
    def check(self, model_type, make_optimizer, steps=3, with_modules=True):
        torch.manual_seed(0)
        model = model_type()
        optimizer = make_optimizer(model.parameters())
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        categories = C.Categories(torch)
        seen = []
        with tracker:
            for step in range(steps):
                model(model.batch()).float().sum().backward()
                optimizer.step()
                ours = categories.measure([optimizer], [model] if with_modules else [])[CPU]
                theirs = reference(tracker)
                if not with_modules:
                    theirs[C.BUFFERS] = 0
                self.assertEqual(ours, theirs, "%s, step %d" % (model_type.__name__, step))
                seen.append(ours)
                optimizer.zero_grad(set_to_none=True)
                tracker.reset_mod_stats()
        return seen

    def test_an_mlp_under_sgd_with_momentum(self):
        seen = self.check(Mlp, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9))
        params = sum(p.numel() * 4 for p in Mlp().parameters())
        self.assertEqual(seen[-1][C.PARAMETERS], params)
        self.assertEqual(seen[-1][C.OPTIMIZER], params, "one momentum buffer per parameter")

    def test_tied_weights_are_counted_once_and_adamw_state_appears_at_the_first_step(self):
        seen = self.check(TiedLm, lambda p: torch.optim.AdamW(p, lr=1e-3))
        model = TiedLm()
        unique = {id(p): p for p in model.parameters()}
        params = sum(p.numel() * 4 for p in unique.values())
        self.assertEqual(seen[0][C.PARAMETERS], params, "the shared weight once")
        self.assertEqual(seen[0][C.BUFFERS], 64 * 4)
        # exp_avg and exp_avg_sq per parameter, and a 4-byte `step` tensor each.
        self.assertEqual(seen[0][C.OPTIMIZER], 2 * params + 4 * len(unique))

    def test_a_small_transformer_under_adamw(self):
        self.check(Transformer, lambda p: torch.optim.AdamW(p, lr=1e-3))

    def test_a_cnn_with_batch_norm_buffers(self):
        seen = self.check(Cnn, lambda p: torch.optim.Adam(p, lr=1e-3))
        # running_mean and running_var (16 floats each), num_batches_tracked (one int64).
        self.assertEqual(seen[0][C.BUFFERS], 16 * 4 * 2 + 8)

    def test_a_model_under_activation_checkpointing(self):
        self.check(Checkpointed, lambda p: torch.optim.SGD(p, lr=0.1))

    def test_a_compiled_model(self):
        torch.manual_seed(0)
        model = Mlp()
        compiled = torch.compile(model, backend="aot_eager")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        categories = C.Categories(torch)
        for _ in range(2):
            compiled(Mlp.batch()).sum().backward()
            optimizer.step()
            got = categories.measure([optimizer], [model])[CPU]
            params = sum(p.numel() * 4 for p in model.parameters())
            self.assertEqual(got[C.PARAMETERS], params)
            self.assertEqual(got[C.GRADIENTS], params)
            self.assertEqual(got[C.OPTIMIZER], 2 * params + 4 * 4)
            optimizer.zero_grad(set_to_none=True)

    def test_without_the_modules_the_optimizer_still_gives_parameters_and_gradients(self):
        self.check(TiedLm, lambda p: torch.optim.AdamW(p, lr=1e-3), with_modules=False)


class CountedOncePerChange(unittest.TestCase):
    def test_parameters_and_optimizer_state_are_counted_again_only_when_they_change(self):
        model = Mlp()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        categories = C.Categories(torch)
        counts = []
        original = categories._count_stable

        def counting(*args):
            counts.append(1)
            return original(*args)

        categories._count_stable = counting
        for _ in range(5):
            model(Mlp.batch()).sum().backward()
            optimizer.step()
            categories.measure([optimizer], [model])
            optimizer.zero_grad(set_to_none=True)
        # Once before the state existed would be one more; the first measure comes after the
        # first step, so once in all.
        self.assertEqual(len(counts), 1)
        optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(10))]})
        categories.measure([optimizer], [model])
        self.assertEqual(len(counts), 2, "a new parameter group is a change")

    def test_a_checkpoint_loaded_or_a_parameter_cast_is_counted_again(self):
        model = Mlp()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        categories = C.Categories(torch)
        model(Mlp.batch()).sum().backward()
        optimizer.step()
        before = categories.measure([optimizer], [model])[CPU]
        # A rollback: every state tensor replaced, as many as before.
        optimizer.load_state_dict(optimizer.state_dict())
        for state in optimizer.state.values():
            state["exp_avg"] = torch.zeros(state["exp_avg"].numel() * 2)
        grown = categories.measure([optimizer], [model])[CPU]
        self.assertGreater(grown[C.OPTIMIZER], before[C.OPTIMIZER])
        # `p.data = ...` keeps the parameter and changes its storage.
        for param in model.parameters():
            param.data = param.data.double()
        cast = categories.measure([optimizer], [model])[CPU]
        self.assertEqual(cast[C.PARAMETERS], 2 * before[C.PARAMETERS])

    def test_a_dropped_model_is_not_kept_alive_by_its_count(self):
        import gc
        import weakref

        model = Mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        categories = C.Categories(torch)
        categories.measure([optimizer], [model])
        gone = weakref.ref(next(model.parameters()))
        del model, optimizer
        gc.collect()
        self.assertIsNone(gone(), "the count holds the parameters weakly")

    def test_gradients_follow_zero_grad_at_every_measure(self):
        model = Mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        categories = C.Categories(torch)
        model(Mlp.batch()).sum().backward()
        params = sum(p.numel() * 4 for p in model.parameters())
        self.assertEqual(categories.measure([optimizer], [model])[CPU][C.GRADIENTS], params)
        optimizer.zero_grad(set_to_none=True)
        self.assertEqual(categories.measure([optimizer], [model])[CPU][C.GRADIENTS], 0)


if __name__ == "__main__":
    unittest.main()
