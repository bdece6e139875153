"""Fake fabric manager: owns which fabric device is attached to which node, with persistent state and faults.

Modules: ``config`` (fabric YAML), ``store`` (SQLite state), ``faults`` (fault book), ``manager`` (attach/detach
operations), ``api`` (JSON shapes), ``service`` (FastAPI app), ``server`` (uvicorn runner), ``cli`` (entry point).
"""
