"""The prompt and answer format of passformer, the bundled pass-ordering model (`models/passformer/`).

Training writes its examples in this format (`passlm.examples`, which re-exports it) and packages it as the
model's profile.json; the stand-in model (`passlm.tiny_model`) uses it too, so tests exercise exactly what
the bundled model does. Defined here, on the runtime side, so that the runtime never imports training code.
"""

from __future__ import annotations

from optserve.engine.profile import ModelProfile
from optserve.objectives import Objective

PASSFORMER_PROFILE = ModelProfile(
    model_id="passformer-7m-v3",
    prompt_template="<ir>\n{ir}</ir>\n<objective>{objective}</objective>\n{feedback}<answer>\n",
    feedback_template="<feedback>\n{feedback}</feedback>\n",
    answer_template="{pass_list}\n{cost_before} -> {cost_after}",
    pass_syntax="optserve",
    normalize_ir=True,
    add_bos=True,
    max_new_tokens=64,
    objectives=(Objective.TEXT_SIZE.value, Objective.INSTRUCTION_COUNT.value),  # optcc's default first
)
