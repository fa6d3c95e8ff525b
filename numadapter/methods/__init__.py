"""Number methods: one folder per encoding (`fone`, `xval`, `digits` with the `aggregate` pieces), the interface
they implement (`base.NumberMethod`) and the registry that maps ``NumberAdapterConfig.encoding`` to one."""

from numadapter.methods.base import HeadReading, LossInputs, NumberMethod
from numadapter.methods.registry import get_method, known_methods, register_method, unregister_method

__all__ = [
    "HeadReading",
    "LossInputs",
    "NumberMethod",
    "get_method",
    "known_methods",
    "register_method",
    "unregister_method",
]
