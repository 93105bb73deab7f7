"""Trained loose judges (AutoJudge, Garipov et al. 2025): the classifier a verifier reads
(`head`), how its training set is mined (`mining`) and how it is fitted (`training`)."""

from .head import JudgeHead, default_judge_dir

__all__ = ["JudgeHead", "default_judge_dir"]
