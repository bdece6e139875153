import pytest

from conformance.cluster.versions import (
    DEFAULT_VERSION,
    RELEASES,
    UnsupportedVersion,
    parse_server_version,
    parse_version,
)


@pytest.mark.parametrize("text", ["1.34", "1.35", "1.36", "1.37", "1.38"])
def test_every_supported_minor_is_selectable(text: str) -> None:
    version = parse_version(text)
    assert (version.major, version.minor) == tuple(int(p) for p in text.split("."))
    assert version.tag.startswith(f"v{text}.")


def test_default_and_tags() -> None:
    version = parse_version(DEFAULT_VERSION)
    assert (version.tag, version.staging_tag) == ("v1.37.2", "v0.37.2")
    assert parse_version("v1.37.2") == version


@pytest.mark.parametrize("pre", ["beta.0", "rc.1", "alpha.3"])
def test_pre_releases_keep_their_suffix_in_every_tag(pre: str) -> None:
    version = parse_version(f"1.38.0-{pre}")
    assert (version.tag, version.staging_tag, str(version)) == (
        f"v1.38.0-{pre}",
        f"v0.38.0-{pre}",
        f"1.38.0-{pre}",
    )
    assert parse_version("1.38.0").tag == "v1.38.0"  # the final release, later


def test_a_minor_alone_means_the_newest_known_version_even_a_pre_release() -> None:
    assert parse_version("1.38").tag == "v1.38.0-beta.0"


@pytest.mark.parametrize(
    ("reported", "expected"),
    [("v1.38.0-beta.0", "1.38.0-beta.0"), ("v1.37.2-gke.1200", "1.37.2"), ("v1.36.3+k3s1", "1.36.3")],
)
def test_server_versions_keep_pre_releases_and_drop_vendor_suffixes(reported: str, expected: str) -> None:
    assert str(parse_server_version(reported)) == expected


def test_only_1_34_has_a_fixed_binding_timeout() -> None:
    assert not parse_version("1.34").release.binding_timeout_configurable
    assert all(r.binding_timeout_configurable for m, r in RELEASES.items() if m != (1, 34))


def test_locked_gates_cannot_be_turned_off_and_say_why() -> None:
    release = parse_version("1.38").release
    assert release.gates == ()
    reason = release.gate_off_reason("DRADeviceBindingConditions")
    assert reason and "locked" in reason and "1.38" in reason
    assert parse_version("1.37").release.gate_off_reason("DRADeviceBindingConditions") is None


@pytest.mark.parametrize("text", ["1.33.0", "2.0", "latest", "1.37.x", "1.38.0-gamma.1", "1.38-beta.0"])
def test_unsupported_versions_say_why(text: str) -> None:
    with pytest.raises(UnsupportedVersion):
        parse_version(text)
