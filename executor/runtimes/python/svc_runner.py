"""Entry of the Python runner: PYTHON -u svc_runner.py --bundle DIR --entry main.py (fd 3 open).

The runner itself is the module _svc_runner_core (next to this file), imported rather than run as a
script so that its bytecode is cached (a script is compiled on every start: ~3 ms of a cold start)."""
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
try:
    import _svc_runner_core
finally:
    sys.path.remove(_here)
_svc_runner_core.main()
