"""Names as the Kubernetes API validates them: a profile is refused for what the API server refuses, no more.

Binding condition types are validated by kube-apiserver as qualified names (like label keys): an optional DNS-1123
subdomain prefix and '/', then a name of at most 63 alphanumerics, '-', '_' or '.', starting and ending with an
alphanumeric. Unprefixed names (e.g. `BindingConditions`, as the upstream example driver publishes) are valid.
The rule and its messages follow k8s.io/apimachinery/pkg/util/validation (IsQualifiedName, IsDNS1123Subdomain).
"""

from __future__ import annotations

import re

QUALIFIED_NAME_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_NAME_FORMAT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def dns1123_subdomain_problems(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        problems.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters")
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return problems


def qualified_name_problems(value: str) -> list[str]:
    """Why `value` is not a qualified name, as IsQualifiedName says it; [] when it is one."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            f"a qualified name {_NAME_FORMAT}, with an optional DNS subdomain prefix and '/' "
            "(e.g. 'example.com/MyName')"
        ]
    problems: list[str] = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += [f"prefix part {p}" for p in dns1123_subdomain_problems(prefix)]
    else:
        name = parts[0]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > QUALIFIED_NAME_MAX_LENGTH:
        problems.append(f"name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        problems.append(f"name part {_NAME_FORMAT}")
    return problems
