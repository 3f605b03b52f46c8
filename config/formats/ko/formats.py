"""Korean dates: Django's Korean formats ("2026-12-1 16:10"), with a 24-hour clock in the long form too
(Django's "g:i A" puts 오전/오후 after the time, where Korean puts it before)."""

DATETIME_FORMAT = "Y년 n월 j일 H:i:s"
TIME_FORMAT = "H:i"
