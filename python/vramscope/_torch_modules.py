"""Module attribution (VRAMSCOPE_MODULES=1): the status label follows the module running,
`forward/GPT.blocks.3.attn` in the forward pass and `backward/...` in the backward pass.

Global forward hooks give the forward path. The backward path comes from multi-grad hooks
on each module's outputs (its backward starts when their gradients are ready) and inputs
(it ends when theirs are), as PyTorch's ModTracker does; full backward hooks are avoided
because they break in-place operations. Costly (hooks on every module call), hence opt-in.
"""

import threading
import weakref


def _tensors(value, tensor_type, out):
    if isinstance(value, tensor_type):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors(item, tensor_type, out)
    elif isinstance(value, dict):
        for item in value.values():
            _tensors(item, tensor_type, out)
    return out


class ModuleTracker:
    def __init__(self, torch, set_label):
        self._torch = torch
        self._set_label = set_label
        self._names = weakref.WeakKeyDictionary()
        self._local = threading.local()
        self._backward = True
        compiler = getattr(torch, "compiler", None)
        self._compiling = getattr(compiler, "is_compiling", None) or (lambda: False)

    def install(self):
        hooks = self._torch.nn.modules.module
        pre = hooks.register_module_forward_pre_hook(self._pre)
        try:
            post = hooks.register_module_forward_hook(self._post, always_call=True)
        except TypeError:
            post = hooks.register_module_forward_hook(self._post)

        def remove():
            pre.remove()
            post.remove()

        return remove

    def _stack(self):
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _name(self, module, stack):
        name = self._names.get(module)
        if name is not None:
            return name
        root = stack[0][0] if stack else module
        root_name = self._names.get(root) or type(root).__name__
        try:
            for sub_name, sub in root.named_modules():
                if sub not in self._names:
                    self._names[sub] = root_name + "." + sub_name if sub_name else root_name
        except Exception:
            pass
        name = self._names.get(module)
        if name is None:
            parent = stack[-1][1] if stack else ""
            name = (parent + "." if parent else "") + type(module).__name__
            self._names[module] = name
        return name

    def _pre(self, module, args):
        if self._compiling():
            return None
        try:
            stack = self._stack()
            path = self._name(module, stack)
            parent = stack[-1][1] if stack else ""
            stack.append((module, path))
            self._set_label("forward/" + path)
            self._on_backward(args, "backward/" + parent if parent else "")
        except Exception:
            pass
        return None

    def _post(self, module, args, output):
        if self._compiling():
            return None
        try:
            stack = self._stack()
            if stack and stack[-1][0] is module:
                path = stack.pop()[1]
                self._set_label("forward/" + stack[-1][1] if stack else "")
                self._on_backward(output, "backward/" + path)
        except Exception:
            pass
        return None

    def _on_backward(self, value, label):
        """Sets `label` when the gradients of the tensors in `value` are being computed."""
        torch = self._torch
        if not self._backward or not torch.is_grad_enabled():
            return
        tensors = [t for t in _tensors(value, torch.Tensor, []) if t.requires_grad]
        if not tensors:
            return
        set_label = self._set_label

        def on_gradients(*grads):
            set_label(label)

        try:
            torch.autograd.graph.register_multi_grad_hook(tensors, on_gradients, mode="any")
        except Exception:
            # Older torch has no mode="any"; forward attribution still works.
            self._backward = False
