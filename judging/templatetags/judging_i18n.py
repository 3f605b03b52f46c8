"""Template filters for the interface's own words inside campaign data: the default grade names."""

from django import template

from judging.selectors.campaigns import grade_text_shown

register = template.Library()


@register.filter
def grade_name(value) -> str:
    """A grade's name (a Grade, or its name), the default scale's in the active language."""
    name = getattr(value, "name", value)
    return grade_text_shown(name) if isinstance(name, str) else name
