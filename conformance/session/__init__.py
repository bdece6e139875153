"""The pytest session beneath the plugin: its fixtures by job, the requirement reporter, the terminal summary and
interrupt handling. The plugin (conformance/plugin.py) registers these; nothing below it imports them."""
