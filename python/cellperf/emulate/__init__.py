"""`cellperf emulate`: a command behind an emulated cellular link (mahimahi-style, one process).

The cell model and the forwarding loop are Rust (`cellperf-link`, bound as
`cellperf._native.LinkEmulator`); this package turns the command line and the built-in
profiles into the emulator's JSON specification (`spec`, `profiles`), creates and removes the
network namespaces (`netns`) and runs the user's command inside them (`runner`).
"""

from cellperf.emulate.runner import EmulationResult, run_emulation
from cellperf.emulate.spec import EmulationConfig

__all__ = ["EmulationConfig", "EmulationResult", "run_emulation"]
