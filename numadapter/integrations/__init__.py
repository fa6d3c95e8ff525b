"""numadapter with the tools it runs under: DeepSpeed ZeRO, multi-process launchers, QLoRA.

- `deepspeed_zero`: shapes, identities and gathering of parameters that may be DeepSpeed ZeRO-3 partitioned, used by
  every module that reads a base weight.
- `launch`: the process state of a DDP / DeepSpeed launch (``torchrun``, ``accelerate launch``, CPU over gloo),
  DeepSpeed configs, and loading a base already partitioned.
- `qlora`: a 4-bit base (bitsandbytes) with the number modules and [NUM] rows kept in float32.

This file imports nothing.
"""
