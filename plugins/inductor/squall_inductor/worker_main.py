"""The compile worker process: compiles inductor regions sent by squall_inductor.worker.

Started by squall_inductor.worker with FD one end of a socket pair, at a lower priority set
before torch is imported (the threads torch starts and the C++ compilers inductor starts
inherit it). It answers requests one at a time until the socket closes:

    ("compile", payload, layouts, config, num_threads, time_budget_s, path)
      -> ("ok", torch_s, inductor_s) with the compiled region saved at `path`
         (inductor's CompiledArtifact, binary format; its FX graph and AOTAutograd cache
         entries are in inductor's on-disk caches too), or ("error", "Type: message").

The region's FX trace (make_fx, which patches torch.nn.Module.__call__ while it runs) and
inductor's lowering happen here, never in the user's process. With a time budget the region
is also timed here against its torch calls, on the same example inputs.
"""
from __future__ import annotations

import os
import signal
from multiprocessing.connection import Connection

def main(fd: int) -> None:
    """Serve compile requests on the socket `fd` until it closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the user's process's to handle
    conn = Connection(fd)
    # imported after lowering the priority: importing torch and inductor is seconds of CPU
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor import standalone_compile
    from torch.fx.experimental.proxy_tensor import make_fx

    from squall_inductor.choices import best_time
    from squall_inductor.regions import examples_for, load_region

    conn.send(("ready", os.getpid()))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the user's process closed the socket, or is gone
        _, payload, layouts, config, num_threads, time_budget_s, path = request
        try:
            torch.set_num_threads(num_threads)
            fn = load_region(payload)
            args = examples_for(layouts)
            # the user's process's inductor settings, one compiler thread (this worker has one core's share)
            with inductor_config.patch({**(config or {}), "compile_threads": 1}):
                graph = make_fx(fn, tracing_mode="fake")(*args)
                artifact = standalone_compile(graph, args, dynamic_shapes="from_example_inputs", options={})
                artifact.save(path=path, format="binary")
            artifact(*args)  # a region that compiles but cannot run fails here, not in the user's process
            torch_s = inductor_s = None
            if time_budget_s:
                device = str(layouts[0][3]) if layouts else "cpu"
                torch_s = best_time(fn, args, device=device, budget_s=time_budget_s)
                inductor_s = best_time(artifact, args, device=device, budget_s=time_budget_s)
            reply: tuple = ("ok", torch_s, inductor_s)
        except Exception as e:  # noqa: BLE001 - any failure is the parent's to report (it falls back to torch)
            text = str(e).strip()
            reply = ("error", f"{type(e).__name__}: {text.splitlines()[0] if text else ''}")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return

