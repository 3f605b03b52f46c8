"""English dates as the team has always read them on these pages: ISO day, 24-hour clock (Django's English
default would be "12/01/2026 4:10 a.m.")."""

DATETIME_FORMAT = "Y-m-d H:i:s"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
