"""Implementation profiles: the contract between the suite and an implementation under test.

A profile says how to start the implementation (processes), what DRA driver its devices use, how the suite
reaches its optional fabric probe and fault injector, and which capabilities it claims. Unknown keys are errors
(a typo must not silently disable a scenario), and a bad profile fails with one message naming the field,
before any cluster work. The scenario catalogue (issue 5) adds capabilities and timeouts to this schema.

The schema is model.py (the document) and its parts (stack.py, accounts.py, promises.py); load.py reads a file;
placeholders.py says what each placeholder of a profile string stands for and where it may stand. Import from here.
"""

from conformance.implementation.profile.accounts import ACCOUNT_PATTERN, RUNS, Right, Runs, ServiceAccount, Users
from conformance.implementation.profile.load import (
    FULL_TEMPLATE_FILE,
    SCHEMA_FILE,
    TEMPLATE_FILE,
    LoadedProfile,
    ProfileError,
    json_schema,
    load_profile,
)
from conformance.implementation.profile.model import (
    API_VERSION,
    BINDING_MODELS,
    DEFAULT_BINDING_TIMEOUT_S,
    FABRIC_ENTRIES,
    FABRIC_MODELS,
    FAILURE_REPORTING,
    KIND,
    BindingModel,
    ConditionMeaning,
    FabricEntries,
    Profile,
)
from conformance.implementation.profile.placeholders import (
    ADDRESS_PLACEHOLDERS,
    NODE,
    PLACEHOLDER,
    PLACEHOLDERS,
    PLAIN_PLACEHOLDERS,
    Scope,
    placeholder_args,
    placeholder_problem,
    uses_placeholder,
)
from conformance.implementation.profile.promises import READ_SLACK_S, Promises, Published
from conformance.implementation.profile.stack import Controller, Endpoint, Hook, Hooks, Process, Readiness, Role

__all__ = [
    "ACCOUNT_PATTERN",
    "ADDRESS_PLACEHOLDERS",
    "API_VERSION",
    "BINDING_MODELS",
    "DEFAULT_BINDING_TIMEOUT_S",
    "FABRIC_ENTRIES",
    "FABRIC_MODELS",
    "FAILURE_REPORTING",
    "FULL_TEMPLATE_FILE",
    "KIND",
    "NODE",
    "PLACEHOLDER",
    "PLACEHOLDERS",
    "PLAIN_PLACEHOLDERS",
    "READ_SLACK_S",
    "RUNS",
    "SCHEMA_FILE",
    "TEMPLATE_FILE",
    "BindingModel",
    "ConditionMeaning",
    "Controller",
    "Endpoint",
    "FabricEntries",
    "Hook",
    "Hooks",
    "LoadedProfile",
    "Process",
    "Profile",
    "ProfileError",
    "Promises",
    "Published",
    "Readiness",
    "Right",
    "Role",
    "Runs",
    "Scope",
    "ServiceAccount",
    "Users",
    "json_schema",
    "load_profile",
    "placeholder_args",
    "placeholder_problem",
    "uses_placeholder",
]
