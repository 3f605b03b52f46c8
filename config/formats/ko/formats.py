"""Korean dates: Django's Korean formats, with zero-padded months and days in the short forms ("2026-12-06 16:10",
as ISO dates and the other pages' timestamps read) and a 24-hour clock in the long form too (Django's "g:i A"
puts 오전/오후 after the time, where Korean puts it before)."""

DATETIME_FORMAT = "Y년 n월 j일 H:i:s"
TIME_FORMAT = "H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
