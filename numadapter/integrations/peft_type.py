"""numadapter's place in PEFT's `PeftType` enum: its name and value, the tested peft range, the enum member.

Kept apart from `numadapter.tuner.registration` (which fills PEFT's mappings with `NumberAdapterConfig` and
`NumberAdapterModel`, and so imports them) so that `numadapter.config`, `numadapter.tuner.integrity` and
`numadapter.tuner.peft_load_hooks` can name the peft type without importing the registration: this module imports
nothing of numadapter, and the registration no longer closes an import cycle through the config.

The enum *value* is the string written to ``adapter_config.json`` as ``peft_type``. PEFT looks it up in
``PEFT_TYPE_TO_CONFIG_MAPPING[<value>]`` when loading, so in a process that did not ``import numadapter`` the failure
is ``KeyError: 'NUMADAPTER (requires `import numadapter` before loading)'``: the error names its own fix.
"""

from __future__ import annotations

import peft
from packaging.version import Version
from peft.utils.peft_types import PeftType

PEFT_TYPE_NAME = "NUMADAPTER"
PEFT_TYPE_VALUE = "NUMADAPTER (requires `import numadapter` before loading)"
SUPPORTED_PEFT = (Version("0.21"), Version("0.22"))  # [low, high)


def peft_version_supported(version: str | None = None) -> bool:
    """Whether a peft version (default: the installed one) is in the tested range ``>=0.21,<0.22``."""
    parsed = Version(version or peft.__version__)
    return SUPPORTED_PEFT[0] <= Version(parsed.base_version) < SUPPORTED_PEFT[1]


def supported_range() -> str:
    """The tested peft range as a pip requirement, ``peft>=0.21,<0.22``."""
    return f"peft>={SUPPORTED_PEFT[0]},<{SUPPORTED_PEFT[1]}"


def add_enum_member() -> PeftType:
    """Adds ``PeftType.NUMADAPTER`` (idempotent) and returns it.

    The same bookkeeping `enum` does for a member defined in the class body: ``_member_map_``,
    ``_value2member_map_``, ``_member_names_`` and the class attribute.
    """
    existing = PeftType.__members__.get(PEFT_TYPE_NAME)
    if existing is not None:
        return existing
    member = str.__new__(PeftType, PEFT_TYPE_VALUE)
    member._name_ = PEFT_TYPE_NAME
    member._value_ = PEFT_TYPE_VALUE
    member.__objclass__ = PeftType
    if hasattr(PeftType, "_add_member_"):  # Python >= 3.13
        PeftType._add_member_(PEFT_TYPE_NAME, member)
    else:
        PeftType._member_map_[PEFT_TYPE_NAME] = member
        PeftType._member_names_.append(PEFT_TYPE_NAME)
        type.__setattr__(PeftType, PEFT_TYPE_NAME, member)
    PeftType._value2member_map_[PEFT_TYPE_VALUE] = member
    return member


def config_peft_type() -> PeftType | str:
    """The ``peft_type`` a new `NumberAdapterConfig` carries: ``PeftType.NUMADAPTER`` once numadapter is registered
    with PEFT, else the plain value (a peft outside the tested range, where registration waits for
    ``numadapter.get_peft_model``).

    Registration itself happens as soon as PEFT is imported in a process that imported numadapter
    (`numadapter.integrations.import_hooks`), so a config built after its module was imported finds the member.
    """
    return PeftType.__members__.get(PEFT_TYPE_NAME, PEFT_TYPE_VALUE)
