_post_hooks = {}
_next = [0]


class _Handle:
    def __init__(self, table, key):
        self._table = table
        self._key = key

    def remove(self):
        self._table.pop(self._key, None)


def register_optimizer_step_post_hook(hook):
    _next[0] += 1
    _post_hooks[_next[0]] = hook
    return _Handle(_post_hooks, _next[0])


class Optimizer:
    def step(self):
        for hook in list(_post_hooks.values()):
            hook(self, (), {})
