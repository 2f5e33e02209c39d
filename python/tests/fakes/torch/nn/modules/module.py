from ...optim.optimizer import _Handle

_pre = {}
_post = {}
_next = [0]


def register_module_forward_pre_hook(hook):
    _next[0] += 1
    _pre[_next[0]] = hook
    return _Handle(_pre, _next[0])


def register_module_forward_hook(hook, *, always_call=False):
    _next[0] += 1
    _post[_next[0]] = hook
    return _Handle(_post, _next[0])


class Module:
    def __init__(self):
        object.__setattr__(self, "_modules", {})

    def __setattr__(self, name, value):
        if isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def named_modules(self, prefix=""):
        yield prefix, self
        for name, sub in self._modules.items():
            for item in sub.named_modules(prefix + ("." if prefix else "") + name):
                yield item

    def __call__(self, *args):
        for hook in list(_pre.values()):
            hook(self, args)
        out = self.forward(*args)
        for hook in list(_post.values()):
            hook(self, args, out)
        return out

    def __hash__(self):
        return id(self)
