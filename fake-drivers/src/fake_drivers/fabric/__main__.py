"""``python -m fake_drivers.fabric`` is the same as ``fake-fabric-manager``."""

from .cli import main

main()
