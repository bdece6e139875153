"""A test whose requirement id is not in the catalogue stops the run at collection (pytester: a real pytest)."""

import pytest

pytest_plugins = ["pytester"]


def test_unknown_requirement_id_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
        import pytest

        @pytest.mark.requirement("NOPE-1")
        def test_x():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*NOPE-1*not in the catalogue (conformance/report/catalogue/)*"])
