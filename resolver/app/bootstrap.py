"""The first import of the `resolver` command (resolver.app.cli): its import phase runs without
garbage-collector passes.

Start-up is mostly imports, paid again by every replica that starts. They
allocate some 50,000 objects that live until exit (modules, classes, functions); the
collector's passes over them while they are made find a few hundred unreachable ones and
cost 20 to 50 ms of CPU per process here (a full pass whenever the heap has grown by a
quarter since the last). So the collector is off while the command imports, and the import
phase ends with `gc.freeze()`: what it made is moved out of the collector's generations, so
later full passes do not walk it again either (disabling alone only moved the cost to the
first pass after start-up).
"""

import gc

_collector_was_enabled = gc.isenabled()


def imports_done() -> None:
    """End of the command's import phase: the collector resumes without the objects the
    imports made in its generations. The few hundred unreachable objects the imports left
    are frozen with them: kept, never collected."""
    gc.freeze()
    if _collector_was_enabled:
        gc.enable()


gc.disable()
