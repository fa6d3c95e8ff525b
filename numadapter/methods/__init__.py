"""Number methods: one folder per encoding (`fone`, `xval`, `digits` with the `aggregate` pieces), the interface
they implement (`base.NumberMethod`) and the registry that maps ``NumberAdapterConfig.encoding`` to one."""

from numadapter.methods.base import (
    GeneratedNumber,
    HeadReading,
    LossInputs,
    NumberMethod,
    NumberPlan,
    NumberSettings,
    Prediction,
)
from numadapter.methods.registry import get_method, known_methods, register_method, unregister_method

__all__ = [
    "GeneratedNumber",
    "HeadReading",
    "LossInputs",
    "NumberMethod",
    "NumberPlan",
    "NumberSettings",
    "Prediction",
    "get_method",
    "known_methods",
    "register_method",
    "unregister_method",
]
