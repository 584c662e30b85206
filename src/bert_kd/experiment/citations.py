"""The paper each registered method comes from, as BibTeX: what a model card asks its readers to cite.

The entries are bibliographic facts of the papers (authors, title, venue, year); a method with no paper of its
own (``nkd``: the student fine-tuned without a teacher) cites none.
"""

from __future__ import annotations

_HINTON = """@article{hinton2015distilling,
  title   = {Distilling the Knowledge in a Neural Network},
  author  = {Hinton, Geoffrey and Vinyals, Oriol and Dean, Jeff},
  journal = {arXiv preprint arXiv:1503.02531},
  year    = {2015}
}"""
_ALP = """@inproceedings{passban2021alpkd,
  title     = {{ALP-KD}: Attention-Based Layer Projection for Knowledge Distillation},
  author    = {Passban, Peyman and Wu, Yimeng and Rezagholizadeh, Mehdi and Liu, Qun},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  year      = {2021}
}"""
_PKD = """@inproceedings{sun2019pkd,
  title     = {Patient Knowledge Distillation for {BERT} Model Compression},
  author    = {Sun, Siqi and Cheng, Yu and Gan, Zhe and Liu, Jingjing},
  booktitle = {Proceedings of EMNLP-IJCNLP},
  year      = {2019}
}"""
_CKD = """@inproceedings{wu2020ckd,
  title     = {Why Skip If You Can Combine: A Simple Knowledge Distillation Technique for Intermediate Layers},
  author    = {Wu, Yimeng and Passban, Peyman and Rezagholizadeh, Mehdi and Liu, Qun},
  booktitle = {Proceedings of EMNLP},
  year      = {2020}
}"""
_TINYBERT = """@inproceedings{jiao2020tinybert,
  title     = {{TinyBERT}: Distilling {BERT} for Natural Language Understanding},
  author    = {Jiao, Xiaoqi and Yin, Yichun and Shang, Lifeng and Jiang, Xin and Chen, Xiao and Li, Linlin and
               Wang, Fang and Liu, Qun},
  booktitle = {Findings of EMNLP},
  year      = {2020}
}"""
_TANG = """@article{tang2019distilling,
  title   = {Distilling Task-Specific Knowledge from {BERT} into Simple Neural Networks},
  author  = {Tang, Raphael and Lu, Yao and Liu, Linqing and Mou, Lili and Vechtomova, Olga and Lin, Jimmy},
  journal = {arXiv preprint arXiv:1903.12136},
  year    = {2019}
}"""
_TED = """@inproceedings{liang2023ted,
  title     = {Less is More: Task-aware Layer-wise Distillation for Language Model Compression},
  author    = {Liang, Chen and Zuo, Simiao and Zhang, Qingru and He, Pengcheng and Chen, Weizhu and Zhao, Tuo},
  booktitle = {Proceedings of ICML},
  year      = {2023}
}"""
_MULTI_TEACHER = """@article{shi2023multiteacher,
  title   = {Multi-teacher {BERT} model distillation for natural language understanding},
  author  = {Shi, Jialai and Guo, Weibin},
  journal = {East China University of Science and Technology (paper in Chinese)},
  year    = {2023}
}"""

#: The registered method (``info["algorithm"]``) → the BibTeX of its paper.
CITATIONS = {
    "rkd": _HINTON,
    "kd": _HINTON,
    "logits_mse": _TANG,
    "pkd": _PKD,
    "ckd": _CKD,
    "alp": _ALP,
    "tinybert": _TINYBERT,
    "lwd": _TED,
    "ted": _TED,
    "ted_kl": _TED,
    "multi_teacher": _MULTI_TEACHER,
    "okd": _MULTI_TEACHER,
    "multi_pkd": _MULTI_TEACHER,
    "rse_kd": _MULTI_TEACHER,
}


def citation(algorithm: str | None) -> str | None:
    """The BibTeX of ``algorithm``'s paper, or None (a method without a paper of its own, or unknown)."""
    return CITATIONS.get(str(algorithm or ""))
