import pytest

from conformance.cluster.versions import DEFAULT_VERSION, UnsupportedVersion, parse_version


@pytest.mark.parametrize("text", ["1.34", "1.35", "1.36", "1.37"])
def test_every_supported_minor_is_selectable(text: str) -> None:
    version = parse_version(text)
    assert (version.major, version.minor) == tuple(int(p) for p in text.split("."))
    assert version.tag.startswith(f"v{text}.")


def test_default_and_tags() -> None:
    version = parse_version(DEFAULT_VERSION)
    assert (version.tag, version.staging_tag) == ("v1.37.2", "v0.37.2")
    assert parse_version("v1.37.2") == version


def test_only_1_34_has_a_fixed_binding_timeout() -> None:
    assert not parse_version("1.34").release.binding_timeout_configurable
    assert parse_version("1.35.4").release.binding_timeout_configurable


@pytest.mark.parametrize("text", ["1.33.0", "2.0", "latest", "1.37.x"])
def test_unsupported_versions_say_why(text: str) -> None:
    with pytest.raises(UnsupportedVersion):
        parse_version(text)
