"""The number task suite: every encoding judged on many task families, on SmolLM2-135M, through the product path.

How to run it (from the repository root)::

    python -m eval_harness.suite list                                  # the families
    python -m eval_harness.suite run --families copy,maxmin --arms lora_digits,fone_context --seconds 300
    python -m eval_harness.suite run --families all --steps 400         # the same steps instead of the same time
    python -m eval_harness.suite report                                # README.md, bars.png, curves.png
    python -m eval_harness.suite coverage                              # what the context head can form, per family

``run`` trains each arm (default: ``lora_digits``, ``digits_ntl``, ``fone_tool_compute`` = FoNE as the library builds
it since round 6, its default settings written out (numbers in digits, the head for the answers it computes), and
``xval``; any arm of `eval_harness.study.ARMS`) on each family with
`eval_harness.study.run_arm`: `NumberAdapterConfig` -> `numadapter.get_peft_model` -> `NumberTokenizer` ->
`NumberSFTTrainer` -> `numadapter.evaluation.generate_answers`. Every arm gets the same training seconds
(``--seconds``, default 300: training stops at the first step past the budget, scoring excluded) or the same
optimizer steps (``--steps``; with both, the steps are a cap), the same rows, batch (32) and seed. The rate warms up
over a tenth of the steps (at most 20) and then stays flat, or decays over ``--steps`` with ``--schedule linear`` or
``cosine`` (with ``--seconds``, set ``--steps`` to what the budget fits). Each run writes
``eval_harness/results/suite/<family>/<arm>.json`` (settings, the curve every ``--eval-every`` steps and at the end,
the final figures) and, with ``--retention`` (default), how many held-out base-known facts the trained adapter still
answers. ``--out`` writes elsewhere (a smoke run: ``--out /tmp/suite``). ``STUDY_THREADS`` sets torch's threads (2).

The families (`eval_harness.suite.families`; each row ``{"prompt", "completion"}``, the completion a space and then
the answer, or the scratchpad ending in the answer). Every family draws its train rows from ``Random(seed)`` and its
held-out rows from ``Random(seed + 1)`` without the train prompts, and computes each answer from its own prompt.
Each declares the number places its rows need, which the run sets on every arm (``int_digits`` / ``frac_digits``),
and xVal's scale, ``10^int_digits / 5``, so that every value lies within xVal's clip of 5:

=======================  ==============================================================  ==========  ======
family                   a row                                                           int / frac  scored
=======================  ==============================================================  ==========  ======
copy                     ``Repeat the number 48213907:`` -> 7-12 digit integers           12 / 0     exact
copy_decimal             ``Repeat the number 402.0457:`` -> 1-6 / 1-4 digits              6 / 4      exact
maxmin                   ``max(381, 9024, 77) =``, or ``min(...)``, 3-6 numbers            6 / 0      exact
ledger                   ``Account 48213, 2021-05-12. Opening balance 5000. 1) deposit     5 / 0      exact
                         382 2) withdrawal 517. Closing balance:``: 2-6 operands among
                         an id, a date and list numbers
powers_of_ten            ``3.82 * 100 =``, ``4510 / 1000 =``                               6 / 4      exact
units                    ``Convert 37 h to min:`` (integer factors: km, kg, L, h, ft ...)  6 / 0      exact
times_one_digit          ``48213 * 7 =``                                                   7 / 0      exact
k_by_k                   ``38 * 71 =``, ``382 * 917 =``                                    6 / 0      exact
percent                  ``15% of 240 =`` (answers with up to 2 decimals)                  4 / 2      exact
divmod                   ``317 divided by 12: quotient =`` / ``remainder =``               5 / 0      exact
words                    ``Write in digits: four thousand two hundred six.``               6 / 0      exact
expression               ``Compute (12 + 7) * 3 - 5:`` -> `` 52``                          6 / 0      exact
expression_scratchpad    the same, `` 12 + 7 = 19, 19 * 3 = 57, 57 - 5 = 52. Answer: 52`` 6 / 0      exact
worked_solution          ``Question: A tent costs $1,248. It is on sale for 25% off. ...   9 / 2      exact,
                         Answer:`` -> `` The discount is 25% * $1,248 = $312. ...                     equations
                         #### 936``: a whole GSM8K-style solution of 2-4 step lines
                         ($ and cents, separators, %, 100M+, rates, hours * 60, 3
                         operands, numbers restated in prose)
gsm8k                    public GSM8K problems and their worked solutions as published     8 / 2      exact,
                         (calculator notes removed; 2,000 train / 150 held-out rows                   equations
                         shipped in ``data/gsm8k``, MIT; ``--n-train`` / ``--n-eval``
                         at most those)
gsm8k_line               a line of those solutions up to its result, the question and the   8 / 2      exact
                         lines before it the prompt (issue 36's public lines)
miles_km                 ``Convert 37.5 miles to km:`` -> `` 60.35`` (x 1.609344, 2 dp)    4 / 2      MAE, MAPE
facts                    ``The number of minutes in an hour is`` -> `` 60``                6 / 3      exact
=======================  ==============================================================  ==========  ======

``facts`` (`eval_harness.suite.facts`): of a hand-written list of ~95 facts, the run keeps those the base (no
adapter, greedy) answers right, caches them with the base's answers in ``<out>/facts/base_known.json``, and splits
them in two seeded halves (train / held out). `eval_harness.suite.facts.score_facts` scores any trained adapter on
the facts it did not train on: all of them after a task family, the held-out half after ``facts`` (``facts_retained``
and each ``fact_answers`` in every record; records before round 6 scored the held-out half only).

Scoring: the last number of the generated answer against the reference's (`numadapter.evaluation.answer_metrics`):
exact match and MAE; every point also has MAPE (`eval_harness.metrics.mape`), the regression family's score. A family
of whole worked solutions (``equations=True``: ``worked_solution``, ``gsm8k``) is also scored after training on the
equations its held-out answers write (`numadapter.evaluation.equation_score`): ``equations_share``, the share of the
``expression = number`` steps that are right, since a right last number can follow wrong steps; the record keeps
every answer.
"""
