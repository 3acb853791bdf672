"""The HTML report (`undobench report DIR --html`, `undobench view DIR`): one self-contained
report.html with the summary, the breakdown tables, the plots and a pair viewer.

`pairs` turns trial records into what the page shows; `page` renders it (Jinja2 template
and inlined static files under templates/ and static/, shipped as package data).
"""

from undobench_gym.evaluation.html.page import REPORT_FILE, render_html, write_html

__all__ = ["REPORT_FILE", "render_html", "write_html"]
