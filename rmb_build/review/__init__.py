"""``rmb review``: people label a sample of a release's items on a local web page; their labels become the
figures of agreement (with each other and with the release) and a gold release.

``sample`` (which items, and who sees them), ``choices`` (the answers' order per person, mapped back to the
release's terms), ``store`` (the SQLite file that holds the plan and every label), ``render`` (item text
as safe HTML), ``app`` (the web page), ``agreement`` (Krippendorff's alpha, Cohen's kappa, agreement with
the release), ``export`` (labels.jsonl, agreement.json/.md, the gold release), ``label_studio`` (tasks
and config for Label Studio, and its JSON export read back).
"""
