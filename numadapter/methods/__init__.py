"""Number methods: one folder per encoding (`fone`, `xval`, `digits` with the `aggregate` pieces), the interface
they implement (`base.NumberMethod`) and the registry that maps ``NumberAdapterConfig.encoding`` to one; FoNE's head
modes (`fone.modes.HeadMode`) and theirs, which maps ``fone_head_input``."""

from numadapter.methods.base import (
    GeneratedNumber,
    HeadReading,
    LossInputs,
    NumberMethod,
    NumberPlan,
    NumberSettings,
    Prediction,
)
from numadapter.methods.fone.modes import (
    HeadMode,
    get_head_mode,
    known_head_modes,
    register_head_mode,
    unregister_head_mode,
)
from numadapter.methods.registry import get_method, known_methods, register_method, unregister_method

__all__ = [
    "GeneratedNumber",
    "HeadMode",
    "HeadReading",
    "LossInputs",
    "NumberMethod",
    "NumberPlan",
    "NumberSettings",
    "Prediction",
    "get_head_mode",
    "get_method",
    "known_head_modes",
    "known_methods",
    "register_head_mode",
    "register_method",
    "unregister_head_mode",
    "unregister_method",
]
