"""The RelJudge Django app: campaigns, pools, judgments and their scoring."""
