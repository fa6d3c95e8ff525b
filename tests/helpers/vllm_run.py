"""Runs vLLM on an export inside ``.venv-vllm`` for the serving tests; prints one JSON line on stdout.

``python tests/helpers/vllm_run.py '<json>'`` with ``{"path", "prompts", "max_tokens", "engine": {...}}``:
``LLM(path, **engine)`` generates greedily for every prompt at once, and the line holds each output's text and token
ids (``{"texts", "ids"}``; with ``"disable_log_stats": false`` in the engine settings also ``"preemptions"``, how
many times vLLM's scheduler preempted a request), or ``{"error": "<type>: <message>"}`` when the engine refuses the
export. Run with ``VLLM_PLUGINS=none`` to load vLLM without numadapter's plugin (a name that matches no plugin turns
all off).
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    spec = json.loads(sys.argv[1])
    from vllm import LLM, SamplingParams

    try:
        llm = LLM(model=spec["path"], **spec.get("engine", {}))
    except Exception as error:  # the refusal the test checks: every line of the chain, so the cause is kept
        chain, seen = [], error
        while seen is not None:
            chain.append(f"{type(seen).__name__}: {seen}")
            seen = seen.__cause__ or seen.__context__
        print(json.dumps({"error": " <- ".join(chain)}))
        return
    outputs = llm.generate(spec["prompts"], SamplingParams(temperature=0.0, max_tokens=spec["max_tokens"]))
    result = {"texts": [o.outputs[0].text for o in outputs], "ids": [list(o.outputs[0].token_ids) for o in outputs]}
    if spec.get("engine", {}).get("disable_log_stats") is False:
        counts = [m.value for m in llm.get_metrics() if m.name == "vllm:num_preemptions"]
        result["preemptions"] = sum(counts)
    print(json.dumps(result))


if __name__ == "__main__":  # vLLM starts its engine in a new process: the guard keeps it from re-running this
    main()
