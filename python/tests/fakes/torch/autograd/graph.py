registered = []


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    registered.append((tuple(tensors), fn, mode))
