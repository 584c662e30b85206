"""RL-KD (Yuan et al., "Reinforced Multi-Teacher Selection for Knowledge Distillation", AAAI 2021): a policy
decides, per training example and per teacher, whether the student learns from that teacher.

For example j and teacher k the policy reads a state s_jk and selects the teacher with probability
π_θ(a_jk = 1 | s_jk) = σ(w_k·s_jk + b_k) (one logistic agent per teacher, as the paper's binary per-teacher
actions). The student's loss is

    L = (1−β)·CE(y_j, p_S) + β·τ²·Σ_k a_jk·softCE(p_T_k/τ, p_S/τ) / max(1, Σ_k a_jk)

(an example for which no teacher is selected learns from its label only).

The reward is the paper's: the student's performance on the example *after* it learned from the selected
teachers. The actions drawn for a batch shape the optimiser step that follows; at the next training step the
updated student is run once more (no gradient) on that batch, and

    R_j = CE(y_j, p_S before the step) − CE(y_j, p_S′ after the step)

is how much the step that learned from example j's selected teachers lowered the student's gold-label
cross-entropy on it. (−CE after the step is the paper's performance; subtracting the loss before the step, fixed
before the actions are drawn, is a per-example baseline: the policy gradient keeps its expectation and loses the
examples' differing difficulty.) The agents are updated with REINFORCE (Williams 1992),
∇θ J = E[(R_j − b)·Σ_k ∇θ log π_θ(a_jk | s_jk)], b a running mean of the rewards; the policy term of the
objective, −mean_j (R_j − b)·Σ_k log π_θ(a_jk|s_jk), carries gradients to the agents only (rewards and states are
detached). A selection that pushed the student toward a wrong class earns a lower reward than one that pushed
it toward the gold label, so an adversarial teacher's agent learns to stop choosing it (`bert-kd mechanisms
rl_kd` checks this on a planted case).

The batch waiting for its reward is part of the method's state (its ``_extra_state``, one tensor, so the
trainer's checkpoint carries it and a resumed run rewards it as the uninterrupted one would). Under gradient
accumulation only a micro-batch followed by a parameter update is rewarded: one whose successor arrives before
the update is replaced unrewarded.

State features (``state_features``): ``teacher_confidence`` (teacher k's probability of the gold label),
``teacher_entropy`` (of its prediction), ``student_teacher_ce`` (the student's soft cross-entropy to teacher k)
and ``teacher_cls`` (teacher k's [CLS] state, L2-normalised). Deviations from the paper, stated in
docs/fidelity.md: the episode is one batch and its reward comes one step later (the paper's episode may span
more of the training set), and student and policy are trained in the same steps (the paper pre-trains both and
then alternates).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import PositiveFloat
from torch import Tensor, nn

from bert_kd.core.data.augment import NO_LABEL
from bert_kd.core.distill.methods.base import register_method
from bert_kd.core.distill.methods.multi_teacher.base import MultiTeacherBase, MultiTeacherOptions
from bert_kd.core.training import task_loss

#: What the policy may read of an (example, teacher) pair.
STATE_FEATURES = ("teacher_confidence", "teacher_entropy", "student_teacher_ce", "teacher_cls")
DEFAULT_FEATURES = ("teacher_confidence", "teacher_entropy", "student_teacher_ce")
#: Weight of the newest reward in the running-mean baseline.
BASELINE_MOMENTUM = 0.1
#: The batch columns the student reads (the reward runs it again on them).
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Length of the packed waiting batch's header: rows, sequence length, teachers, features, one flag per optional input.
HEADER = 4 + len(MODEL_INPUTS) - 1


class RLKDOptions(MultiTeacherOptions):
    policy_learning_rate: PositiveFloat | None = None
    state_features: list[Literal[STATE_FEATURES]] | None = None
    seed: int | None = None  # of the agents' sampling


class PolicyAgents(nn.Module):
    """One logistic agent per teacher over the state features: π(a = 1 | s) = σ(w_k·s + b_k). Its parameters
    train at their own learning rate (``group_learning_rate``, read by the trainer's parameter groups)."""

    def __init__(self, n_teachers: int, n_features: int, learning_rate: float):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_teachers, n_features))
        self.bias = nn.Parameter(torch.zeros(n_teachers))  # σ(0) = ½: every teacher as likely at the start
        self.group_learning_rate = float(learning_rate)

    def forward(self, states: Tensor) -> Tensor:
        """(batch, teachers, features) → (batch, teachers) selection probabilities."""
        return torch.sigmoid((states * self.weight).sum(-1) + self.bias)


@register_method("rl_kd")
class ReinforcedTeacherSelection(MultiTeacherBase):
    """RL-KD: per-example teacher selection by REINFORCE-trained agents (see the module)."""

    term_names = ("ce", "pred", "policy")
    Options = RLKDOptions
    teacher_needs = {"cls": True}
    #: the reward is the student's gain after the step that learned from the selected teachers (2026-12-07;
    #: before, the action-independent −CE of the same forward pass): students trained before have other keys
    key_material = {"reward": "gain_after_update", "baseline": "leave_one_out"}

    def __init__(self, config, student, teachers, regression=False):
        super().__init__(config, student, teachers, regression)
        if regression:
            raise ValueError("rl_kd rewards the gold label's cross-entropy: classification tasks only")
        features = tuple(self.config.get("state_features") or DEFAULT_FEATURES)
        unknown = [f for f in features if f not in STATE_FEATURES]
        if unknown:
            raise ValueError(f"unknown state feature(s) {unknown}; valid: {', '.join(STATE_FEATURES)}")
        rate = self.config.get("policy_learning_rate", 1.0e-3)
        if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate <= 0:
            raise ValueError(f"policy_learning_rate must be a positive number, got {rate!r}")
        self.features = features
        width = max(self.teacher_widths) if "teacher_cls" in features else 0
        self.cls_width = width
        n_features = sum(1 for f in features if f != "teacher_cls") + width
        self.policy = PolicyAgents(self.n_teachers, n_features, rate)
        self.seed = int(self.config.get("seed", 42))
        self.register_buffer("draw_step", torch.zeros((), dtype=torch.long))
        self.register_buffer("baseline", torch.zeros(()))
        self.register_buffer("chosen", torch.zeros(self.n_teachers))  # examples each teacher was chosen for
        self.register_buffer("examples", torch.zeros(()))
        self.register_buffer("epoch_chosen", torch.zeros(self.n_teachers))  # the same over the current epoch
        self.register_buffer("epoch_examples", torch.zeros(()))
        # the student the objective trains, run again on the batch waiting for its reward; not a submodule (the
        # objective owns it: its parameters are trained and saved once)
        object.__setattr__(self, "student_model", student)
        self.pending: dict[str, Tensor] | None = None  # the last training batch, waiting for its reward
        self.pending_snapshot: Tensor | None = None  # a student parameter as it was when that batch was drawn

    @classmethod
    def derived_weights(cls, alpha, beta):
        return {"ce": 1.0 - beta, "pred": beta, "policy": 1.0}

    # ------------------------------------------------------------------ state and actions
    def states(self, student_logits: Tensor, teacher_logits: list[Tensor], teacher_cls, labels: Tensor) -> Tensor:
        """(batch, teachers, features): each (example, teacher) pair's state, detached."""
        per_teacher = []
        t = self.temperature
        log_p_student = torch.log_softmax(student_logits.detach() / t, dim=-1)
        for k, logits in enumerate(teacher_logits):
            p = torch.softmax(logits.detach(), dim=-1)
            columns = []
            for feature in self.features:
                if feature == "teacher_confidence":
                    columns.append(p.gather(-1, labels[:, None]))
                elif feature == "teacher_entropy":
                    columns.append(-(p * p.clamp_min(1e-12).log()).sum(-1, keepdim=True))
                elif feature == "student_teacher_ce":
                    soft = torch.softmax(logits.detach() / t, dim=-1)
                    columns.append(-(soft * log_p_student).sum(-1, keepdim=True))
                else:  # teacher_cls, padded to the widest teacher
                    cls = torch.nn.functional.normalize(teacher_cls[k].detach().float(), dim=-1)
                    columns.append(torch.nn.functional.pad(cls, (0, self.cls_width - cls.shape[-1])))
            per_teacher.append(torch.cat(columns, dim=-1))
        return torch.stack(per_teacher, dim=1).float()

    def act(self, probabilities: Tensor) -> Tensor:
        """Bernoulli draws of the agents while training (a seeded generator and a step counter kept in the state,
        so a resumed run draws what the uninterrupted one would); the most likely action in evaluation."""
        if not self.training:
            return (probabilities > 0.5).float()
        generator = torch.Generator().manual_seed((self.seed * 1_000_003 + int(self.draw_step)) % (2**63))
        self.draw_step.add_(1)
        uniform = torch.rand(probabilities.shape, generator=generator).to(probabilities.device)
        return (uniform < probabilities.detach()).float()

    # ------------------------------------------------------------------ loss
    def selected_distillation(self, student_logits: Tensor, teacher_logits: list[Tensor], actions: Tensor) -> Tensor:
        """Per example, the mean soft-CE(τ)·τ² to its selected teachers (0 where none is selected)."""
        t = self.temperature
        log_p = torch.log_softmax(student_logits / t, dim=-1)
        per_teacher = torch.stack(
            [-(torch.softmax(z / t, dim=-1) * log_p).sum(-1) for z in teacher_logits], dim=1
        )  # (batch, teachers)
        scale = t * t if self.scale_by_t2 else 1.0
        return scale * (per_teacher * actions).sum(1) / actions.sum(1).clamp_min(1.0)

    def terms(self, student, teachers, batch):
        labels = batch["labels"]
        order = sorted(teachers)
        logits = [teachers[k].logits for k in order]
        cls = [teachers[k].cls()[:, -1] for k in order] if "teacher_cls" in self.features else None
        states = self.states(student.logits, logits, cls, labels)
        probabilities = self.policy(states)
        actions = self.act(probabilities)
        result = {
            "ce": task_loss(student.logits, labels),
            "pred": self.selected_distillation(student.logits, logits, actions).mean(),
        }
        if not self.training:
            result["policy"] = student.logits.new_zeros(())
            return result
        result["policy"] = self.policy_loss(student.logits)
        with torch.no_grad():
            for chosen, examples in ((self.chosen, self.examples), (self.epoch_chosen, self.epoch_examples)):
                chosen.add_(actions.sum(0))
                examples.add_(actions.shape[0])
        self.remember(batch, states, actions, student.logits)
        return result

    # ------------------------------------------------------------------ the reward
    def rewards(self, record: dict[str, Tensor]) -> Tensor:
        """R_j of the waiting batch: its gold-label cross-entropy before the step that learned from its selected
        teachers less the updated student's (a second forward, without gradient, in the student's current mode)."""
        inputs = {name: record[name] for name in MODEL_INPUTS if name in record}
        with torch.no_grad():
            after = self.student_model(**inputs).logits.float()
        ce_after = torch.nn.functional.cross_entropy(after, record["labels"].clamp_min(0), reduction="none")
        return record["ce_before"] - ce_after

    def policy_loss(self, like: Tensor) -> Tensor:
        """REINFORCE for the waiting batch's actions, now that the student has learned from them (0 while no
        batch waits, or while the student has not been updated since it was drawn)."""
        record = self.pending
        if record is None or not self.updated_since_drawn():
            return like.new_zeros(())
        self.pending = None
        gold = record["labels"] != NO_LABEL  # a transfer-set row has no gold label to reward
        if not bool(gold.any()):
            return like.new_zeros(())
        reward = self.rewards(record)[gold]
        advantage = reward - self.reward_baseline(reward)
        probabilities = self.policy(record["states"][gold])
        actions = record["actions"][gold]
        log_pi = (
            actions * probabilities.clamp_min(1e-12).log() + (1 - actions) * (1 - probabilities).clamp_min(1e-12).log()
        )
        with torch.no_grad():
            self.baseline.mul_(1 - BASELINE_MOMENTUM).add_(BASELINE_MOMENTUM * reward.mean())
        return -(advantage[:, None] * log_pi).sum(1).mean()

    def reward_baseline(self, reward: Tensor) -> Tensor:
        """Per example, the mean reward of the batch's other examples (leave-one-out: it does not depend on the
        example's own actions, so the gradient keeps its expectation, and it removes what the step did to every
        example alike); the running mean of the rewards for a batch of one."""
        rows = reward.shape[0]
        if rows < 2:
            return self.baseline.expand_as(reward)
        return (reward.sum() - reward) / (rows - 1)

    def updated_since_drawn(self) -> bool:
        """Whether an optimiser step changed the student since the waiting batch was drawn (its last trainable
        tensor, the classifier's bias in a BERT classifier, against a copy taken then; a batch restored from a
        checkpoint counts as updated)."""
        if self.pending_snapshot is None:
            return True
        current = self._watched_parameter()
        return current is None or not torch.equal(current, self.pending_snapshot)

    def _watched_parameter(self) -> Tensor | None:
        trainable = [p for p in self.student_model.parameters() if p.requires_grad]
        return trainable[-1].detach() if trainable else None

    def remember(self, batch: dict[str, Tensor], states: Tensor, actions: Tensor, student_logits: Tensor) -> None:
        """Keep this batch (the student's inputs, labels, states, actions and its cross-entropy before the step)
        until the student has learned from it."""
        labels = batch["labels"]
        ce_before = torch.nn.functional.cross_entropy(
            student_logits.detach().float(), labels.clamp_min(0), reduction="none"
        )
        if "input_ids" not in batch:
            raise ValueError(
                "rl_kd rewards the student's performance after its update, which runs the student again on the "
                "batch: the batch lacks the student's input_ids"
            )
        record = {name: batch[name].detach() for name in MODEL_INPUTS if name in batch}
        record.update(labels=labels.detach(), states=states.detach(), actions=actions.detach(), ce_before=ce_before)
        self.pending = record
        watched = self._watched_parameter()
        self.pending_snapshot = None if watched is None else watched.clone()

    # ------------------------------------------------------------------ the waiting batch in the checkpoint
    def get_extra_state(self) -> Tensor:
        """The waiting batch as one float64 tensor (a checkpoint stores tensors only): a header (rows, sequence
        length, teachers, features, whether token types are present) and the record's tensors, flattened."""
        record = self.pending
        if record is None:
            return torch.zeros(0, dtype=torch.float64)
        rows, length = record["input_ids"].shape
        _, teachers, features = record["states"].shape
        flags = [float(name in record) for name in MODEL_INPUTS[1:]]
        header = torch.tensor([rows, length, teachers, features, *flags], dtype=torch.float64)
        parts = [header] + [record[name].detach().double().flatten().cpu() for name in self._packed(record)]
        return torch.cat(parts)

    def set_extra_state(self, state: Tensor) -> None:
        if state is None or state.numel() == 0:
            self.pending, self.pending_snapshot = None, None
            return
        rows, length, teachers, features, *flags = (int(v) for v in state[:HEADER].tolist())
        present = {"input_ids"} | {name for name, flag in zip(MODEL_INPUTS[1:], flags) if flag}
        device = self.baseline.device
        shapes = {
            "input_ids": (rows, length), "attention_mask": (rows, length), "token_type_ids": (rows, length),
            "labels": (rows,), "states": (rows, teachers, features), "actions": (rows, teachers), "ce_before": (rows,),
        }  # fmt: skip
        record, offset = {}, HEADER
        for name in self._packed(present):
            size = math.prod(shapes[name])
            value = state[offset : offset + size].reshape(shapes[name])
            offset += size
            integer = name in MODEL_INPUTS or name == "labels"
            record[name] = value.to(device=device, dtype=torch.long if integer else torch.float32)
        self.pending, self.pending_snapshot = record, None

    @staticmethod
    def _packed(present) -> tuple[str, ...]:
        """The record's tensors in their packed order (the student's inputs it has, then the rest)."""
        return (*(name for name in MODEL_INPUTS if name in present), "labels", "states", "actions", "ce_before")

    # ------------------------------------------------------------------ reports
    def selection_shares(self) -> dict[str, float | None]:
        """The share of training examples each teacher was chosen for so far."""
        seen = float(self.examples)
        return {name: float(self.chosen[k]) / seen if seen else None for k, name in enumerate(self.teacher_names)}

    def epoch_report(self) -> dict[str, float]:
        """The share of the epoch's training examples each teacher was chosen for (``selection_share/<teacher>``;
        the training loop logs it per epoch); the epoch's counts then restart."""
        seen = float(self.epoch_examples)
        if not seen:  # an epoch that trained on no example (cut by max_steps) chose no teacher
            return {}
        report = {
            f"selection_share/{name}": float(self.epoch_chosen[k]) / seen for k, name in enumerate(self.teacher_names)
        }
        self.epoch_chosen.zero_()
        self.epoch_examples.zero_()
        return report

    def alignment_report(self) -> dict:
        shares = self.selection_shares()
        return {
            name: dict(self.describe_teacher(k), level="prediction", selection_share=shares[name])
            for k, name in enumerate(self.teacher_names)
        }

    def diagnostics(self):
        return {"selection_shares": self.selection_shares()}
