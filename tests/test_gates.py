"""Gate parsing against the real --help text of kube-apiserver v1.37.2 (tests/data)."""

from pathlib import Path

import pytest

from conformance.cluster.gates import format_gates, gates_to_enable, known_gates, parse_gate_overrides

HELP = (Path(__file__).parent / "data" / "kube-apiserver-1.37.2-feature-gates.txt").read_text()


def test_reads_stage_and_default_of_listed_gates() -> None:
    gates = known_gates(HELP)
    assert gates["DRADeviceBindingConditions"].stage == "BETA"
    assert gates["DRADeviceBindingConditions"].default is True
    assert gates["DRAResourcePoolStatus"].stage == "ALPHA"


def test_ga_gates_are_not_passed() -> None:
    # In 1.37 DRAResourceClaimDeviceStatus and DRADeviceTaints are GA: hidden from --help, on by default.
    enable = gates_to_enable(known_gates(HELP))
    assert enable == {"DRADeviceBindingConditions": True}
    assert format_gates(enable) == "DRADeviceBindingConditions=true"


def test_older_release_gets_every_gate_it_lists() -> None:
    help_1_34 = "\n".join(
        f"kube:{name}=true|false ({stage} - default={default})"
        for name, stage, default in [
            ("DRADeviceBindingConditions", "ALPHA", "false"),
            ("DRAResourceClaimDeviceStatus", "BETA", "true"),
            ("DRADeviceTaints", "ALPHA", "false"),
        ]
    )
    assert gates_to_enable(known_gates(help_1_34)) == {
        "DRAResourceClaimDeviceStatus": True,
        "DRADeviceBindingConditions": True,
        "DRADeviceTaints": True,
    }


def test_gate_overrides_parse_and_reject_bad_entries() -> None:
    assert parse_gate_overrides("DRADeviceBindingConditions=false, X=TRUE") == {
        "DRADeviceBindingConditions": False,
        "X": True,
    }
    assert parse_gate_overrides("") == {}
    for bad in ("Foo", "Foo=yes", "=true", "Fo o=true"):
        with pytest.raises(ValueError, match="bad feature gate"):
            parse_gate_overrides(bad)
