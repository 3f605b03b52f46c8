"""The errors an import answers with: a refusal, bad input named by file, line and field, a conflict."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

__all__ = ["FormatError", "ImportConflict", "ImportRefused", "RunExists"]


class ImportRefused(ValueError):
    """An import that cannot go ahead; nothing of the file was written.

    Every interface reports it the same way: the page and the command print ``str()`` (which names the file,
    and the line and field when known), the API answers ``as_dict()`` with ``status``.
    """

    status = 400

    def __init__(self, message: str, *, filename: str, line: int | None = None, field: str | None = None) -> None:
        self.message = message
        self.filename = filename
        self.line = line
        self.field = field
        # File, line and field stay as they are (the field is the format's own name); only the words translate.
        where = {"file": filename, "line": line, "field": field, "message": message}
        if line is not None and field is not None:
            text = _("%(file)s, line %(line)s, field '%(field)s': %(message)s") % where
        elif line is not None:
            text = _("%(file)s, line %(line)s: %(message)s") % where
        elif field is not None:
            text = _("%(file)s, field '%(field)s': %(message)s") % where
        else:
            text = f"{filename}: {message}"
        super().__init__(text)

    def __reduce__(self) -> tuple[Any, tuple[str, str, int | None, str | None]]:
        # The keyword-only constructor defeats BaseException's default pickling (used by task queues).
        return type(self)._rebuilt, (self.message, self.filename, self.line, self.field)

    @classmethod
    def _rebuilt(cls, message: str, filename: str, line: int | None, field: str | None) -> ImportRefused:
        return cls(message, filename=filename, line=line, field=field)

    # What the user can do about it, named in the words of the interface they use (see ``explained``).
    remedy: str | None = None

    def explained(self, via: str) -> str:
        """``str()``, and what to do about it in the words of ``via``: "form" (the upload page's controls),
        "api" (request fields) or "command" (command-line flags)."""
        how = _remedy(self.remedy, via)
        return f"{self}; {how}" if how else str(self)

    def as_dict(self, via: str = "api") -> dict[str, Any]:
        return {"detail": self.explained(via), "file": self.filename, "line": self.line, "field": self.field}


class FormatError(ImportRefused):
    """Bad input in an imported file; ``str()`` names the file, and the line and field when known."""


class ImportConflict(ImportRefused):
    """The file is well formed but clashes with what the campaign holds (a different run under an existing
    system name without ``replace``, or a row it refers to deleted meanwhile). Nothing was written."""

    status = 409


class RunExists(ImportConflict):
    """A different run under a system name the campaign already has, imported without replacing it."""

    remedy = "replace"


def _remedy(remedy: str | None, via: str) -> str:
    if remedy != "replace":
        return ""
    if via == "form":
        # the upload page's checkbox, by its label (judging.forms.UploadForm's "replace" field)
        label = _("replace a different run of the same system")
        return _("tick “%(label)s” and upload the file again to overwrite it") % {"label": label}
    if via == "command":
        return _("pass --replace to overwrite it")
    return _("send replace=true with the file to overwrite it")
