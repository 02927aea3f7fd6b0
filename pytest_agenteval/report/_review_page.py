"""The review page: one HTML file, no external resources. Text is set with textContent
only (a problem holding `<script>` shows as text). Keyboard first: 1-5 score the focused
dimension, Tab / Shift+Tab (or the arrows) move between dimensions, A / R / N set the
status, C edits the comment (Esc leaves it; keys typed there do nothing else),
Ctrl+Enter submits and moves on, J / K next / previous item, U the first unverified."""

from importlib import resources

PAGE = resources.files(__package__).joinpath("review_page.html").read_text(encoding="utf-8")
