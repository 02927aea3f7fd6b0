"""The form of a value that may be shown or written: a URL's user and password removed
(`mlflow:http://alice:s3cret@host:5000` -> `mlflow:http://host:5000`). Options whose values
may hold one (`Option.redact`) are recorded in this form (`Settings.as_dict`, the results
file's `config`); only the code that connects sees the value as given."""

from __future__ import annotations

import re

# `scheme://user:password@` (or `//user@`): the user information of a URL anywhere in a text,
# malformed URLs (`http://u:p@[::1`) included
_USERINFO = re.compile(r"(?<=//)[^/?#\s]*@")  # to the last @: a password may hold one


def without_credentials(text: str) -> str:
    """`text` with every URL's user information (user, password) removed."""
    return _USERINFO.sub("", text)
