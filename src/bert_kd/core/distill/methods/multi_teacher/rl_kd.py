"""RL-KD (Yuan et al., "Reinforced Multi-Teacher Selection for Knowledge Distillation", AAAI 2021): a policy
decides, per training example and per teacher, whether the student learns from that teacher.

For example j and teacher k the policy reads a state s_jk and selects the teacher with probability
π_θ(a_jk = 1 | s_jk) = σ(w_k·s_jk + b_k) (one logistic agent per teacher, as the paper's binary per-teacher
actions). The student's loss is

    L = (1−β)·CE(y_j, p_S) + β·τ²·Σ_k a_jk·softCE(p_T_k/τ, p_S/τ) / max(1, Σ_k a_jk)

(an example for which no teacher is selected learns from its label only), and the agents are updated with
REINFORCE (Williams 1992): ∇θ J = E[(R_j − b)·Σ_k ∇θ log π_θ(a_jk | s_jk)], with the reward R_j = −CE(y_j, p_S)
the student's loss on the example's gold label and b a running mean of the rewards. The policy term of the
objective, −mean_j (R_j − b)·Σ_k log π_θ(a_jk|s_jk), carries gradients to the agents only (rewards and states are
detached), so one optimiser step trains the student and the policy together.

State features (``state_features``): ``teacher_confidence`` (teacher k's probability of the gold label),
``teacher_entropy`` (of its prediction), ``student_teacher_ce`` (the student's soft cross-entropy to teacher k)
and ``teacher_cls`` (teacher k's [CLS] state, L2-normalised). Deviations from the paper, stated in
docs/fidelity.md: the reward is the student's loss on the batch it was chosen for, measured in the same step (the
paper rewards after the student's update over an episode), and student and policy are trained in the same steps
(the paper alternates them after pre-training both).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import PositiveFloat
from torch import Tensor, nn

from bert_kd.core.distill.methods.base import register_method
from bert_kd.core.distill.methods.multi_teacher.base import MultiTeacherBase, MultiTeacherOptions
from bert_kd.core.training import task_loss

#: What the policy may read of an (example, teacher) pair.
STATE_FEATURES = ("teacher_confidence", "teacher_entropy", "student_teacher_ce", "teacher_cls")
DEFAULT_FEATURES = ("teacher_confidence", "teacher_entropy", "student_teacher_ce")
#: Weight of the newest reward in the running-mean baseline.
BASELINE_MOMENTUM = 0.1


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
        ce_per_example = torch.nn.functional.cross_entropy(student.logits, labels, reduction="none")
        result = {
            "ce": task_loss(student.logits, labels),
            "pred": self.selected_distillation(student.logits, logits, actions).mean(),
        }
        if self.training:
            reward = -ce_per_example.detach()
            advantage = reward - self.baseline
            log_pi = (
                actions * probabilities.clamp_min(1e-12).log()
                + (1 - actions) * (1 - probabilities).clamp_min(1e-12).log()
            )
            result["policy"] = -(advantage[:, None] * log_pi).sum(1).mean()
            with torch.no_grad():
                self.baseline.mul_(1 - BASELINE_MOMENTUM).add_(BASELINE_MOMENTUM * reward.mean())
                for chosen, examples in ((self.chosen, self.examples), (self.epoch_chosen, self.epoch_examples)):
                    chosen.add_(actions.sum(0))
                    examples.add_(actions.shape[0])
        else:
            result["policy"] = student.logits.new_zeros(())
        return result

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
