"""RL-KD (Yuan et al., AAAI 2021): the policy learns which teacher helps the student.

The case: the keyword task with two teachers served from planted logits, one whose soft labels put their mass on
the gold label (+4 on it) and one adversarial teacher whose soft labels put it on the wrong class (+4 there). A
policy rewarded by the student's performance after it learned from the selected teachers stops choosing the
adversarial teacher; the trained policy (its most likely action per example) is read on every training example.
"""

from __future__ import annotations

import torch

from bert_kd.analysis.mechanisms import MechanismResult, mechanism
from bert_kd.analysis.mechanisms.toy import cpu_config, keyword_dataset, planted_teacher_cache, tiny_classifier

ROWS = 64
MARGIN = 4.0
GOOD_AT_LEAST, ADVERSARIAL_AT_MOST = 0.8, 0.2
METHOD = {"method": "rl_kd", "beta": 0.9, "temperature": 1.0, "policy_learning_rate": 0.1, "seed": 0}


def selection_shares(epochs: int = 4, seed: int = 0) -> dict[str, float]:
    """Train RL-KD on the planted case; the share of training examples the trained policy chooses each teacher
    for (``good``, ``adversarial``)."""
    from bert_kd.core.distill.methods.multi_teacher import build_multi_teacher_objective
    from bert_kd.core.distill.objective import Teacher
    from bert_kd.core.training import Collator
    from bert_kd.core.training.loop import fit

    train = keyword_dataset(ROWS, seed=seed)
    labels = torch.tensor(train["label"])
    gold = torch.nn.functional.one_hot(labels, 2).float() * MARGIN
    wrong = torch.nn.functional.one_hot(1 - labels, 2).float() * MARGIN
    student = tiny_classifier(seed=seed)
    teachers = []
    for name, logits in (("good", gold), ("adversarial", wrong)):
        model = tiny_classifier(seed=seed + 1)
        teachers.append(Teacher(model=model, cache=planted_teacher_cache(logits, 2, 16), name=name))
    objective = build_multi_teacher_objective(student, teachers, dict(METHOD, seed=seed))
    fit(
        objective,
        train,
        None,
        cpu_config(epochs=epochs, seed=seed, batch_size=8, learning_rate=3e-3),
        collator=Collator(),
        description="rl_kd check",
    )
    method = objective.method
    method.eval()
    batch = Collator()([train[i] for i in range(len(train))])
    with torch.no_grad():
        student_logits = student(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        states = method.states(student_logits, [gold, wrong], None, batch["labels"])
        chosen = (method.policy(states) > 0.5).float().mean(0)
    return {"selection_share_good": float(chosen[0]), "selection_share_adversarial": float(chosen[1])}


@mechanism("rl_kd")
def check() -> list[MechanismResult]:
    shares = selection_shares()
    holds = (
        shares["selection_share_good"] >= GOOD_AT_LEAST and shares["selection_share_adversarial"] <= ADVERSARIAL_AT_MOST
    )
    return [
        MechanismResult(
            method="rl_kd",
            quantity="share of training examples the trained policy chooses each teacher for",
            measured=shares,
            expected=f"good teacher ≥ {GOOD_AT_LEAST:.0%}, adversarial teacher ≤ {ADVERSARIAL_AT_MOST:.0%}",
            holds=holds,
        )
    ]
