"""forge autoload: makes `import torch` load forge's libraries.

torch calls every entry point of the group "torch.backends" at the end of
`import torch` (torch/__init__.py, _import_device_backends). This directory,
put on PYTHONPATH, declares one (forge_autoload-0.1.dist-info/entry_points.txt)
naming load() below, which loads each library in FORGE_LOAD_LIBS (a
colon-separated list of absolute paths) with torch.ops.load_library. Child
processes inherit the environment, so they load the libraries too.

An exception raised here would abort `import torch` in the user's program, so
every failure becomes one line "forge: warning: ..." on stderr instead. With
FORGE_LOAD_LIBS unset or empty this does nothing.

When the capture library (libforge_capture.so) is among the libraries, an
atexit hook calls torch.ops.forge_capture.flush(), which writes the capture
JSON while the interpreter and torch are still intact; the library's own C++
exit hook is only a fallback (it rewrites the file if ops ran after the flush).
Global forward hooks on every nn.Module tell it which module each op runs
under (forge_capture.enter_module / exit_module, runtime/capture/modules.h).

With a forge package (libforge.so beside package.json) this also installs its
torch.compile routing (compile.py) and replaces the forwards of the module
classes whose whole forward is a packaged chain (modules.py).
"""

import os
import sys

_loaded = []
_atexit_registered = False


class _ForkHook:
    """Kept alive for multiprocessing.util.register_after_fork (a weak reference)."""


_fork_hook = _ForkHook()


def _warn(msg):
    try:
        sys.stderr.write("forge: warning: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


def _flush_capture():
    try:
        import torch

        ns = torch.ops.forge_capture
        if bool(ns.enabled()):
            ns.flush()
    except Exception as e:  # never let the user's exit fail because of us
        _warn("capture flush failed: %s" % (e,))


def _module_name(m):
    t = type(m)
    return "%s.%s" % (t.__module__, t.__qualname__)


def _install_module_hooks(torch):
    """Every module's forward, entered and left, reported to the capture; and
    once per class the digest of its forward's code (info "module_code:<class>"),
    which a packaged chain names to replace that forward (modules.py)."""
    from forge_autoload.modules import code_digest

    ns = torch.ops.forge_capture
    enter, leave, note = ns.enter_module, ns.exit_module, ns.note
    seen = set()

    def pre(module, args):
        cls = type(module)
        name = _module_name(module)
        if cls not in seen:
            seen.add(cls)
            note("module_code:" + name, code_digest(getattr(cls, "forward", None)))
        enter(name)

    def post(module, args, output):
        leave()

    from torch.nn.modules import module as nn_module

    nn_module.register_module_forward_pre_hook(pre)
    # always_call: the exit runs when the forward raises, so the stack stays balanced.
    nn_module.register_module_forward_hook(post, always_call=True)


def load():
    global _atexit_registered
    try:
        libs = os.environ.get("FORGE_LOAD_LIBS", "")
        if not libs.strip():
            return
        import torch

        for path in libs.split(":"):
            path = path.strip()
            if not path or path in _loaded:
                continue
            try:
                torch.ops.load_library(path)
                _loaded.append(path)
            except Exception as e:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                if e.__cause__ is not None and str(e.__cause__):
                    msg += " (%s)" % str(e.__cause__).splitlines()[0]
                _warn("cannot load %s: %s" % (path, msg))
        if not _loaded:
            return
        # A forge package (libforge.so beside package.json): compiled graphs too.
        for path in _loaded:
            pkg = os.path.join(os.path.dirname(path), "package.json")
            if os.path.basename(path) == "libforge.so" and os.path.exists(pkg):
                try:
                    from forge_autoload.compile import install_on_first_compile

                    install_on_first_compile(pkg)
                except Exception as e:
                    _warn("torch.compile integration not installed: %s" % (e,))
                try:
                    from forge_autoload.modules import install as install_modules

                    install_modules(pkg)
                except Exception as e:
                    _warn("module forwards not replaced: %s" % (e,))
        try:
            capture = hasattr(torch.ops.forge_capture, "flush")
        except Exception:
            capture = False
        if capture:
            try:
                torch.ops.forge_capture.note("torch_version_python", str(torch.__version__))
                torch.ops.forge_capture.note("python", sys.executable or "")
            except Exception:
                pass
            try:
                _install_module_hooks(torch)
            except Exception as e:
                _warn("capture: module paths not recorded: %s" % (e,))
            if not _atexit_registered:
                import atexit

                atexit.register(_flush_capture)
                _atexit_registered = True
                # multiprocessing's fork children leave through os._exit, which
                # skips atexit; its finalizers do run there.
                try:
                    import multiprocessing.util as mpu

                    mpu.register_after_fork(
                        _fork_hook, lambda _: mpu.Finalize(None, _flush_capture, exitpriority=0)
                    )
                except Exception:
                    pass
    except Exception as e:  # an exception here would abort `import torch`
        _warn("autoload failed: %s" % (e,))
