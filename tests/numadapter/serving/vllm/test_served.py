"""The exports numadapter's vLLM plugin does not serve are refused by name when vLLM loads them, never served wrong.

`ServedExport.load` is what the plugin's model class calls when vLLM builds the model; it needs no vLLM, so these
run in the project's own venv on tiny exports.
"""

from __future__ import annotations

import pytest
from helpers.adapter_cases import Store
from helpers.generation_cases import build

from numadapter.config import NumberAdapterConfig
from numadapter.export import export_merged
from numadapter.serving.vllm.served import ServedExport, UnservedExportError, refusal


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(tmp_path_factory.mktemp("vllm_refusals"))


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"encoding": "xval"}, "encoding='xval'"),
        ({"encoding": "digits", "aggregate": True}, "aggregate=True"),
        ({"encoding": "fone", "fone_numbers": "all"}, "fone_numbers='all'"),
        ({"encoding": "fone", "fone_context_pointer": True}, "fone_context_pointer=True"),
        ({"encoding": "fone", "task_type": "SEQ_2_SEQ_LM"}, "encoder-decoder"),
    ],
)
def test_unserved_modes(settings, named):
    assert named in refusal(NumberAdapterConfig(**settings))


def test_fone_answers_mode_is_served():
    assert refusal(NumberAdapterConfig(encoding="fone", task_type="CAUSAL_LM")) is None


@pytest.mark.parametrize(("encoding", "named"), [("xval", "encoding='xval'"), ("fone", "fone_numbers='all'")])
def test_load_refuses_with_where_to_serve_it(store, tmp_path, encoding, named):
    model, ntok = build(store, "llama", encoding)
    export_merged(model, ntok, str(tmp_path))
    with pytest.raises(UnservedExportError) as caught:
        ServedExport.load(tmp_path, model.get_base_model().config)
    message = str(caught.value)
    assert named in message and "numadapter's vLLM plugin" in message and "load_exported" in message


def test_load_serves_an_answers_mode_export(store, tmp_path):
    model, ntok = build(store, "llama", "fone", fone_numbers="answers", sign_policy="text")
    export_merged(model, ntok, str(tmp_path))
    served = ServedExport.load(tmp_path, model.get_base_model().config)
    assert served.num_id == ntok.num_token_id
    head = model.base_model.number_modules["default"].head.state_dict()
    assert all((served.modules.head.state_dict()[k] == v).all() for k, v in head.items())
    assert served.ntok.tokenizer.decode(served.text_ids("4507")) == "4507"


def test_sampling_settings_numadapter_does_not_apply_are_named():
    from types import SimpleNamespace

    from numadapter.serving.vllm.requests import unsupported_settings

    plain = SimpleNamespace(temperature=0.7, top_p=0.9, repetition_penalty=1.0, logit_bias=None, bad_words=[])
    assert unsupported_settings(plain) == []
    penalised = SimpleNamespace(repetition_penalty=1.2, presence_penalty=0.5, logit_bias={5: 1.0})
    assert unsupported_settings(penalised) == ["repetition_penalty=1.2", "presence_penalty=0.5", "logit_bias={5: 1.0}"]


def test_reading_a_marked_config_tells_the_process_it_serves_an_export():
    """vLLM's front end reads the config and never builds the model: that read is how the logits processor knows,
    when it checks a request's settings there, that the engine serves a numadapter export."""
    from numadapter.serving.vllm import config

    config._SEEN["export"] = False
    config.NumberLlamaConfig.from_dict({"hidden_size": 64})
    assert config.serves_export()
    config._SEEN["export"] = False
