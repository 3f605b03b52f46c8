"""Date formats of RelJudge per language, over Django's own (settings.FORMAT_MODULE_PATH)."""
