"""numadapter with the tools it runs under: PEFT and transformers, DeepSpeed ZeRO, multi-process launchers, QLoRA,
command lines.

- `peft_type`: numadapter's place in PEFT's ``PeftType`` enum and the tested peft range (imports nothing of
  numadapter, so the config can name it).
- `import_hooks`: registers numadapter with PEFT (`numadapter.tuner.registration`) and its exports with transformers'
  Auto classes and pipeline (`numadapter.serving.auto`) as soon as those libraries are imported (``import numadapter``
  runs it and imports neither).

- `deepspeed_zero`: shapes, identities and gathering of parameters that may be DeepSpeed ZeRO-3 partitioned, used by
  every module that reads a base weight.
- `launch`: the process state of a DDP / DeepSpeed launch (``torchrun``, ``accelerate launch``, CPU over gloo),
  DeepSpeed configs, and loading a base already partitioned.
- `qlora`: a 4-bit base (bitsandbytes) with the number modules and [NUM] rows kept in float32.
- `command_line`: ``name=value`` settings given on a command line (`parse_setting`, `parse_settings`), for the
  recipes' overrides and the evaluation harness.

This file imports nothing.
"""
