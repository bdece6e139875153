"""The implementation under test: its profile (the contract), the harness that starts and stops it, and clients of
its fabric probe and fault injector.
"""
