"""The Korean demo's vocabulary (``load_demo --lang ko``): an online shop's product search, written for the demo.

The same kind of world as the English demo (judging/demo/catalogue.py), in Korean, made by the same generator
(judging/demo/generator.py): queries a Korean shopper types ("야식 배달", "겨울 패딩", "무선 이어폰 노이즈 캔슬링"),
listings generated from brands, categories and attributes into sentences that read like a Korean shop's product
pages, three rankers of clearly different quality and three annotators who judge the way the English demo's do
(the rules of relevance and the annotators' habits are the generator's). The Korean words are data, not gettext:
the demo's campaign is in Korean whatever language the interface is in.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from judging.demo.generator import (
    DemoData,
    Need,
    Product,
    Profile,
    Spec,
    Trait,
    Verdict,
    Vocabulary,
    Words,
    generate,
    need,
)

SLUG = "shopping-ko"


NAME = "쇼핑 검색 품질 평가 — 패션·디지털·식품"


SEED = 2027


# A good ranker (lexical and semantic signals), a BM25 over character bigrams (the usual first Korean search
# engine: no morphological analyser, so "패딩" also matches "롱패딩"), and a weak exact-keyword matcher.
SYSTEMS = ("hybrid-v3", "bm25-bigram", "keyword-match")


LEAD = "jiwoo"


ANNOTATORS = ("minji", "junho", "seoyeon")
# The interface language kept on the demo team's accounts (the lead and the annotators): a Korean team
# opens the app in Korean whatever the browser asks for.
LANGUAGE = "ko"


# Demo logins, printed by load_demo; they pass Django's password validators like the English demo's.
PASSWORDS = {
    "jiwoo": "demo-jiwoo-2026",
    "minji": "demo-minji-2026",
    "junho": "demo-junho-2026",
    "seoyeon": "demo-seoyeon-2026",
    "admin": "demo-admin-2026",
}


ROLES = {
    "jiwoo": "캠페인 리드 (캠페인을 운영합니다)",
    "minji": "판정자",
    "junho": "판정자",
    "seoyeon": "판정자 (일부 겹치는 표본만 판정)",
    "admin": "관리자 (superuser)",
}


# Who judged what, as a lead would find it a few days in (annotators by position, see loader._judge): queries
# done twice over, some by one annotator so far, one in progress, the rest untouched.
PLAN = {
    "both": ("q01", "q02", "q03", "q04", "q05", "q12"),
    "first_more": ("q07", "q08", "q10", "q14"),
    "second_only": ("q22", "q23", "q24"),
    "started": ("q25",),
}


FILE_STEM = "shopping-ko"


DESCRIPTION = (
    # Annotators read this on their home page: it must not say which rankers are compared.
    "종합 쇼핑몰 상품 검색의 적합성 판정 캠페인입니다. 여러 검색 모델이 내놓은 상위 10개 결과를 모아, 상품마다 "
    "두 명이 어느 모델이 찾은 결과인지 모르는 상태로 판정합니다."
)


SCALE = [
    {
        "value": 0,
        "name": "부적합",
        "description": "다른 종류의 상품이거나, 종류는 맞아도 검색어의 조건을 많이 놓쳐서 검색한 사람이 고려하지 "
        "않을 상품입니다.",
        "examples": "“캐시미어 니트” → 아크릴 니트, 캐시미어 코트\n"
        "“아동 패딩” → 성인 남성용 패딩\n"
        "“블루투스 헤드폰” → 유선 헤드폰",
    },
    {
        "value": 1,
        "name": "부분 적합",
        "description": "종류는 맞지만 검색어의 조건 하나(소재, 대상, 기능, 용량 등)를 놓친 상품, 또는 나머지 조건은 "
        "맞는 가까운 대체 상품입니다.",
        "examples": "“캐시미어 니트” → 울 니트, 캐시미어 가디건\n"
        "“야식 배달” → 택배로 1~2일 뒤에 오는 냉동 족발\n"
        "“무선 이어폰 노이즈 캔슬링” → 노이즈 캔슬링이 없는 무선 이어폰",
    },
    {
        "value": 2,
        "name": "적합",
        "description": "검색한 사람이 찾던 바로 그 상품입니다. 상품 종류와 검색어의 모든 조건이 맞습니다.",
        "examples": "“겨울 패딩” → 충전량이 넉넉한 구스다운 헤비 패딩\n"
        "“순살 치킨” → 순살 후라이드 치킨\n"
        "“물걸레 로봇청소기” → 회전 물걸레가 달린 로봇청소기",
    },
]


GUIDELINES = """\
## 무엇을 판정하나요

판정 화면에는 검색어(질의) 하나와 쇼핑몰 상품 페이지 하나가 나옵니다. 그 검색어를 입력한 평범한 구매자에게 이 \
상품이 얼마나 맞는지 판정해 주세요. 먼저 **질의 설명**을 읽으세요. 무엇이 적합하고 무엇이 아닌지는 질의 설명이 \
정하며, 개인 취향보다 우선합니다. 브랜드나 가격, 내가 살지 말지가 아니라 상품명과 상세 설명에 적힌 내용으로 \
판정합니다.

## 등급 기준

### 2 적합

상품 종류가 맞고 검색어의 조건(소재, 대상, 기능, 용량, 배송)이 모두 맞습니다.

- “겨울 패딩” → 구스다운을 넉넉히 넣은 헤비 패딩
- “무선 이어폰 노이즈 캔슬링” → 액티브 노이즈 캔슬링(ANC)을 지원하는 무선 이어폰
- “야식 배달” → 밤 9시 전 주문 시 당일 밤에 도착하는 순살 치킨

### 1 부분 적합

종류는 맞지만 조건 하나를 놓쳤거나, 나머지 조건은 맞는 가까운 대체 상품입니다.

- “캐시미어 니트” → 울 니트 (소재가 다름), 캐시미어 가디건 (대체 상품)
- “여성 롱패딩” → 남성용 롱패딩, 여성용 숏패딩
- “야식 배달” → 택배로 1~2일 뒤에 도착하는 냉동 족발

### 0 부적합

다른 종류의 상품이거나 조건을 두 개 이상 놓친 상품입니다. 성인용 검색어에 아동용 상품(또는 그 반대)은 \
부적합입니다.

- “아동 패딩” → 성인 남성용 패딩
- “가벼운 노트북” → 2kg이 넘는 게이밍 노트북
- “냉동 피자” → 피자 커팅기

## 확신이 없을 때

억지로 등급을 고르지 마세요. 상품 페이지에 판단할 근거가 없다면(누구를 위한 상품인지, 소재가 무엇인지 적혀 있지 \
않거나 본문이 잘려 있다면) **확신 없음**을 누르고, 짐작 가는 등급이 있으면 잠정 등급으로 남긴 뒤 무엇이 \
빠졌는지 짧게 메모하세요. 예: “아동용인지 알 수 없음 — 상세 설명에 사이즈가 없습니다.” 확신 없음으로 둔 판정은 \
점수에 들어가지 않고 리드가 검토합니다. 확신 없음은 근거가 부족할 때 쓰는 것이지 어려운 결정을 미루는 데 쓰는 \
것이 아닙니다. 정보가 다 있는데도 1과 2 사이에서 망설여진다면 질의 설명이 뒷받침하는 등급을 고르세요.

## 참고

- 외부 판매처에서 가져온 상품에는 `<b>` 같은 HTML 태그나 스크립트가 섞여 있을 수 있습니다. 태그는 무시하고 \
내용으로 판정하세요.
- 같은 상품이 다른 번호로 다시 올라온 경우(상품명과 설명이 같음) 같은 등급을 주세요.
- 한 쌍에 10~20초를 목표로 하고, 30분마다 쉬어 주세요. 피로는 판정자 간 일치도에 그대로 드러납니다.
"""


MATERIALS = {
    "goose-down": Trait(
        "구스다운",
        (
            "구스다운 80:20 충전재를 넣어 가볍고 따뜻합니다.",
            "솜털 비율이 높은 구스다운을 사용해 보온성이 뛰어납니다.",
        ),
    ),
    "duck-down": Trait(
        "덕다운",
        (
            "덕다운 충전재로 가격 부담은 줄이고 따뜻함은 살렸습니다.",
            "RDS 인증을 받은 덕다운만 사용했습니다.",
        ),
    ),
    "synthetic-fill": Trait(
        "웰론",
        (
            "동물성 소재 대신 웰론 충전재를 넣어 집에서 물세탁할 수 있습니다.",
            "젖어도 보온력이 크게 떨어지지 않는 합성 충전재를 넣었습니다.",
        ),
    ),
    "cashmere": Trait(
        "캐시미어",
        (
            "캐시미어 100% 원사로 짜서 가볍고 포근합니다.",
            "부드러운 캐시미어 소재라 맨살에 닿아도 따갑지 않습니다.",
        ),
    ),
    "wool": Trait(
        "울",
        (
            "울 함량이 높아 보온성이 좋고 보풀이 적습니다.",
            "울 70% 혼방 원단이라 따뜻하면서도 형태가 잘 잡힙니다.",
        ),
    ),
    "acrylic": Trait(
        "",
        (
            "아크릴 원사로 만들어 세탁기에 돌려도 늘어나지 않습니다.",
            "관리가 쉬운 아크릴 혼방 소재입니다.",
        ),
    ),
    "cotton": Trait(
        "코튼",
        (
            "면 100% 소재라 통기성이 좋고 피부에 자극이 적습니다.",
            "도톰한 코튼 원사로 짜서 봄가을에 입기 좋습니다.",
        ),
    ),
    "polyester": Trait(
        "",
        (
            "폴리에스터 혼방 원단이라 구김이 적고 가볍습니다.",
            "겉감은 폴리에스터 100%로 관리가 쉽습니다.",
        ),
    ),
    "leather": Trait(
        "가죽",
        (
            "천연 소가죽 갑피라 신을수록 발에 맞게 길이 듭니다.",
            "누벅 가죽을 사용해 튼튼하고 고급스럽습니다.",
        ),
    ),
    "mesh": Trait(
        "메쉬",
        (
            "통기성 좋은 엔지니어드 메쉬 갑피가 오래 달려도 발을 시원하게 지켜 줍니다.",
            "가벼운 니트 메쉬 갑피가 발을 부드럽게 감쌉니다.",
        ),
    ),
    "synthetic": Trait(
        "",
        (
            "합성 소재 갑피라 가볍고 빨리 마릅니다.",
            "내구성이 좋은 합성 소재로 만들었습니다.",
        ),
    ),
    "": Trait("", ()),
}


FEATURES = {
    "heavy": Trait(
        "헤비",
        (
            "충전량을 넉넉히 넣은 헤비 다운이라 영하 10도 아래 한파에도 든든합니다.",
            "한겨울 칼바람도 막아 주는 두툼한 충전량이 특징입니다.",
        ),
    ),
    "light": Trait(
        "경량",
        (
            "얇고 가벼운 경량 패딩이라 간절기 외투나 코트 속 이너로 입기 좋습니다.",
            "한 손에 쥐어지는 경량 패딩으로 파우치에 넣어 다닐 수 있습니다.",
        ),
    ),
    "long": Trait("롱기장", ("무릎 아래까지 덮는 롱기장이라 하체까지 따뜻합니다.",)),
    "short": Trait("숏기장", ("엉덩이를 살짝 덮는 숏기장이라 활동하기 편합니다.",)),
    "hooded": Trait(
        "후드",
        (
            "모자는 탈부착할 수 있어 날씨에 맞게 연출할 수 있습니다.",
            "퍼 트리밍 후드가 얼굴 주변의 찬바람을 막아 줍니다.",
        ),
    ),
    "water-repellent": Trait("발수", ("겉감에 발수 가공을 해 눈비에도 쉽게 젖지 않습니다.",)),
    "wireless": Trait(
        "무선",
        (
            "블루투스 5.3으로 스마트폰과 빠르고 안정적으로 연결됩니다.",
            "선 없이 블루투스로 연결해 출퇴근길에 편하게 쓸 수 있습니다.",
        ),
    ),
    "wired": Trait("유선", ("3.5mm 유선 연결이라 충전 걱정 없이 음악을 들을 수 있습니다.",)),
    "anc": Trait(
        "노이즈캔슬링",
        (
            "액티브 노이즈 캔슬링(ANC)이 지하철 소음까지 줄여 줍니다.",
            "주변 소음을 최대 40dB까지 줄여 주는 노이즈 캔슬링을 지원합니다.",
        ),
    ),
    "ipx4": Trait("방수", ("IPX4 생활 방수라 운동할 때 땀이나 비에도 안심입니다.",)),
    "ultralight": Trait(
        "초경량",
        (
            "무게가 990g에 불과해 가방에 넣어도 부담이 없습니다.",
            "1.1kg의 가벼운 무게로 카페와 강의실을 오가기 좋습니다.",
        ),
    ),
    "midweight": Trait("", ("무게는 1.5kg으로 들고 다니기에 무난합니다.",)),
    "heavyweight": Trait("", ("2.4kg의 묵직한 본체에 대형 냉각팬을 넣었습니다.",)),
    "gaming": Trait(
        "게이밍",
        (
            "RTX 4060 그래픽으로 최신 게임도 높은 옵션으로 즐길 수 있습니다.",
            "165Hz 주사율 디스플레이와 외장 그래픽을 갖춘 게이밍 사양입니다.",
        ),
    ),
    "10000mah": Trait("10000mAh", ("10000mAh 용량이라 스마트폰을 두 번 정도 충전할 수 있습니다.",)),
    "20000mah": Trait("20000mAh", ("20000mAh 대용량이라 스마트폰을 네 번 이상 충전할 수 있습니다.",)),
    "fast-charge": Trait("고속충전", ("PD 22.5W 고속충전을 지원해 30분 만에 절반 넘게 충전됩니다.",)),
    "mop": Trait(
        "물걸레",
        (
            "회전 물걸레 패드가 바닥의 얼룩까지 닦아 냅니다.",
            "흡입과 물걸레 청소를 한 번에 끝낼 수 있습니다.",
        ),
    ),
    "auto-empty": Trait("자동먼지비움", ("청소가 끝나면 스테이션이 먼지통을 자동으로 비워 줍니다.",)),
    "large": Trait("대용량", ("12L 대용량이라 통닭 한 마리도 거뜬히 들어갑니다.",)),
    "medium": Trait("", ("5.5L 용량으로 2~3인 가족에게 알맞습니다.",)),
    "mini": Trait("미니", ("2L 미니 사이즈라 1인 가구 주방에도 자리를 많이 차지하지 않습니다.",)),
    "heated": Trait("가열식", ("물을 끓여 수증기를 내보내는 가열식이라 세균 걱정을 덜었습니다.",)),
    "ultrasonic": Trait("초음파", ("초음파 방식이라 소음이 적고 전기료 부담이 작습니다.",)),
    "hybrid-humid": Trait("복합식", ("가열과 초음파를 함께 쓰는 복합식이라 가습량이 풍부합니다.",)),
    "mineral": Trait("무기자차", ("징크옥사이드만 사용한 무기자차 선크림입니다.",)),
    "chemical": Trait("유기자차", ("발림성이 가볍고 백탁이 없는 유기자차 제형입니다.",)),
    "hybrid-sun": Trait("혼합자차", ("무기자차와 유기자차 성분을 함께 담은 혼합자차입니다.",)),
    "sensitive": Trait("저자극", ("약산성 저자극 포뮬러로 민감한 피부도 편안하게 세안할 수 있습니다.",)),
    "cushion": Trait("쿠셔닝", ("두툼한 미드솔 쿠셔닝이 착지 충격을 흡수해 무릎 부담을 덜어 줍니다.",)),
    "wide": Trait("와이드", ("발볼이 넓은 분들을 위한 와이드 라스트로 만들었습니다.",)),
    "waterproof": Trait("방수", ("고어텍스 방수 멤브레인으로 비 오는 산길에서도 발이 젖지 않습니다.",)),
    "boneless": Trait("순살", ("뼈 없는 순살 정육만 사용해 먹기 편합니다.",)),
    "bone-in": Trait("", ("한 마리를 통째로 튀겨 뼈째 보내 드립니다.",)),
    "tonight": Trait(
        "오늘밤도착",
        (
            "밤 9시 전에 주문하면 당일 밤 자정 전까지 받아 보실 수 있습니다.",
            "야간 배송으로 오늘 밤 현관 앞까지 따뜻하게 도착합니다.",
        ),
    ),
    "parcel": Trait(
        "",
        (
            "주문 후 1~2일 안에 냉동 택배로 발송됩니다.",
            "급속 냉동해 택배로 보내 드리며 도착까지 1~2일 걸립니다.",
        ),
    ),
}


@dataclass(frozen=True)
class Kind:
    """A product category: what its listings are called, what they can say, and who sells them."""

    department: str  # the query tag (segment) of the queries about it
    nouns: tuple[str, ...]
    brands: tuple[str, ...]
    uses: tuple[str, ...]  # adnominal phrases: "{use} {noun}입니다."
    extras: tuple[str, ...]
    materials: tuple[str, ...] = ("",)
    audiences: tuple[str, ...] = ()  # () for things that are not for anyone in particular
    one_of: tuple[tuple[str, ...], ...] = ()  # exactly one feature of each group (length, capacity, delivery)
    optional: tuple[str, ...] = ()
    colours: tuple[str, ...] = ()  # the colours its listings come in (none: the title names no colour)
    footwear: bool = False


# (name in a listing, colour family); clothes and shoes come in all of them, devices in DEVICE_COLOURS
COLOURS = (
    ("블랙", "black"),
    ("차콜", "grey"),
    ("멜란지 그레이", "grey"),
    ("네이비", "blue"),
    ("스카이 블루", "blue"),
    ("카키", "green"),
    ("아이보리", "neutral"),
    ("베이지", "neutral"),
    ("화이트", "white"),
    ("브라운", "brown"),
    ("카멜", "brown"),
    ("버건디", "red"),
    ("실버", "grey"),
    ("스페이스 그레이", "grey"),
)
WEAR_COLOURS = tuple(name for name, _ in COLOURS[:12])
DEVICE_COLOURS = ("블랙", "화이트", "실버", "스페이스 그레이", "네이비")


FASHION = ("노스힐", "한결", "모노웨어", "스노우라인", "다온", "바른옷", "어반핏", "로우클래식")
KIDS_BRANDS = ("꼬마숲", "토리키즈")
DIGITAL = ("소리랩", "코어텍", "하이노트", "미르전자", "에이펙스", "누리디지털")
CHICKEN = ("달빛치킨", "밤참식당", "바삭공방")
PIZZA = ("한입상회", "밤참식당", "도우공방")
JOKBAL = ("고향족발", "장충본가", "밤참식당")
TTEOKBOKKI = ("신당골", "한입상회", "밤참식당")
MEALS = ("한입상회", "오늘한끼", "그린밀")
BEAUTY = ("순한결", "데일리랩", "비건랩")
LIVING = ("깔끔하우스", "온기", "숨결")
MODELS = ("에어 S2", "프로 3", "라이트", "맥스", "S9", "플러스")


KINDS = {
    "padding": Kind(
        "패션",
        ("패딩", "패딩 점퍼", "다운 재킷"),
        FASHION,
        ("한겨울 출퇴근길에 입기 좋은", "주말 나들이에 가볍게 걸치기 좋은", "눈 오는 날에도 든든한"),
        ("양쪽 손난로 주머니가 있습니다.", "소매 안쪽 시보리가 찬바람을 막아 줍니다.", "드라이클리닝을 권장합니다."),
        materials=("goose-down", "duck-down", "synthetic-fill"),
        audiences=("women", "men", "kids", "unisex"),
        one_of=(("heavy", "light"), ("long", "short")),
        optional=("hooded", "water-repellent"),
        colours=WEAR_COLOURS,
    ),
    "coat": Kind(
        "패션",
        ("코트", "싱글 코트", "핸드메이드 코트"),
        FASHION,
        ("출근룩에 단정하게 어울리는", "늦가을부터 초겨울까지 입기 좋은", "어떤 옷에도 잘 어울리는"),
        ("안감이 있어 니트 위에 입어도 매끄럽습니다.", "드라이클리닝만 가능합니다.", "어깨선이 자연스럽게 떨어집니다."),
        materials=("wool", "cashmere", "polyester"),
        audiences=("women", "men", "kids", "unisex"),
        colours=WEAR_COLOURS,
    ),
    "knit": Kind(
        "패션",
        ("니트", "라운드 니트", "꽈배기 니트", "터틀넥 스웨터"),
        FASHION,
        ("쌀쌀한 아침에 입기 좋은", "셔츠 위에 레이어드하기 좋은", "집에서도 밖에서도 편한"),
        ("손세탁 후 뉘어서 건조해 주세요.", "밑단과 소매 립 조직이 형태를 잡아 줍니다.", "여유 있는 핏입니다."),
        materials=("cashmere", "wool", "acrylic", "cotton"),
        audiences=("women", "men", "kids", "unisex"),
        colours=WEAR_COLOURS,
    ),
    "cardigan": Kind(
        "패션",
        ("가디건", "니트 가디건", "롱 가디건"),
        FASHION,
        ("냉방이 센 사무실에서 걸치기 좋은", "원피스 위에 가볍게 걸치는", "쌀쌀한 저녁에 꺼내 입기 좋은"),
        ("자개 단추와 포켓 두 개가 있습니다.", "손세탁 후 뉘어서 건조해 주세요."),
        materials=("cashmere", "wool", "acrylic", "cotton"),
        audiences=("women", "men", "kids"),
        colours=WEAR_COLOURS,
    ),
    "running-shoes": Kind(
        "패션",
        ("러닝화", "런닝화", "조깅화"),
        FASHION,
        ("매일 5km를 달리는 러너에게 맞는", "마라톤 대회를 준비하는", "가벼운 조깅과 산책에 좋은"),
        ("뒤꿈치 반사 소재로 밤에도 잘 보입니다.", "끈 묶는 구멍이 하나 더 있어 발목을 단단히 잡아 줍니다."),
        materials=("mesh", "synthetic"),
        audiences=("women", "men", "kids", "unisex"),
        optional=("cushion", "wide"),
        footwear=True,
        colours=WEAR_COLOURS,
    ),
    "hiking-boots": Kind(
        "패션",
        ("등산화", "트레킹화", "미드컷 등산화"),
        FASHION,
        ("돌이 많은 산길에 맞는", "장거리 종주에 좋은", "주말 둘레길 산행에 알맞은"),
        ("접지력이 좋은 비브람 밑창을 썼습니다.", "여분의 끈을 함께 드립니다.", "발목 패드가 복사뼈를 보호합니다."),
        materials=("leather", "synthetic"),
        audiences=("women", "men", "unisex"),
        optional=("waterproof",),
        footwear=True,
        colours=WEAR_COLOURS,
    ),
    "earbuds": Kind(
        "디지털",
        ("블루투스 이어폰", "무선 이어폰", "이어버드"),
        DIGITAL,
        ("출퇴근 지하철에서 쓰기 좋은", "운동할 때 귀에서 잘 빠지지 않는", "통화가 잦은 직장인에게 맞는"),
        ("케이스 포함 최대 30시간 재생됩니다.", "USB-C로 충전합니다.", "귀 크기에 맞게 이어팁 3종을 드립니다."),
        one_of=(("wireless",),),
        optional=("anc", "ipx4"),
        colours=DEVICE_COLOURS,
    ),
    "headphones": Kind(
        "디지털",
        ("헤드폰", "오버이어 헤드폰", "헤드셋"),
        DIGITAL,
        ("음악 감상에 집중하고 싶은 분께 맞는", "재택근무 화상회의에 좋은", "장시간 써도 귀가 편한"),
        ("폭신한 이어쿠션이 귀를 부드럽게 감쌉니다.", "접이식이라 파우치에 쏙 들어갑니다."),
        one_of=(("wireless", "wired"),),
        optional=("anc",),
        colours=DEVICE_COLOURS,
    ),
    "laptop": Kind(
        "디지털",
        ("노트북", "울트라북", "노트북 PC"),
        DIGITAL,
        ("대학생 과제용으로 좋은", "업무용으로 두루 쓰기 좋은", "영상 편집까지 거뜬한"),
        (
            "16GB 메모리와 512GB SSD를 기본으로 넣었습니다.",
            "지문 인식 전원 버튼을 달았습니다.",
            "윈도우 11 홈이 설치되어 있습니다.",
        ),
        one_of=(("ultralight", "midweight", "heavyweight"),),
        optional=("gaming",),
        colours=DEVICE_COLOURS,
    ),
    "power-bank": Kind(
        "디지털",
        ("보조배터리", "휴대용 충전기"),
        DIGITAL,
        ("여행 갈 때 챙기기 좋은", "하루 종일 밖에 있는 날 든든한", "가방에 늘 넣어 다니는"),
        ("USB-C 포트 두 개로 두 기기를 함께 충전합니다.", "기내 반입이 가능합니다.", "잔량이 숫자로 표시됩니다."),
        one_of=(("10000mah", "20000mah"),),
        optional=("fast-charge",),
        colours=DEVICE_COLOURS,
    ),
    "robot-vacuum": Kind(
        "생활",
        ("로봇청소기", "로봇 청소기"),
        LIVING,
        ("반려동물 털 많은 집에 맞는", "맞벌이 가정의 청소 시간을 줄여 주는", "원룸부터 넓은 거실까지 쓰기 좋은"),
        (
            "앱으로 청소 구역과 시간을 예약할 수 있습니다.",
            "문턱 2cm까지 넘어갑니다.",
            "라이다 센서로 집 구조를 그립니다.",
        ),
        optional=("mop", "auto-empty"),
        colours=DEVICE_COLOURS,
    ),
    "air-fryer": Kind(
        "생활",
        ("에어프라이어", "에어 프라이어", "오븐형 에어프라이어"),
        LIVING,
        ("기름 없이 바삭한 요리를 즐기고 싶은 분께 맞는", "냉동식품을 자주 데워 먹는", "자취 요리에 꼭 필요한"),
        ("바스켓은 식기세척기에 넣어도 됩니다.", "온도는 80도부터 200도까지 조절됩니다."),
        one_of=(("large", "medium", "mini"),),
        colours=DEVICE_COLOURS,
    ),
    "humidifier": Kind(
        "생활",
        ("가습기", "대용량 가습기", "미니 가습기"),
        LIVING,
        ("건조한 겨울 침실에 두기 좋은", "아기 방에 두기 좋은", "사무실 책상 위에 올려 두는"),
        ("물통은 입구가 넓어 손을 넣어 씻을 수 있습니다.", "수면 모드에서는 조명이 꺼집니다."),
        one_of=(("heated", "ultrasonic", "hybrid-humid"),),
        colours=DEVICE_COLOURS,
    ),
    "wipes": Kind(
        "생활",
        ("물티슈", "캡형 물티슈", "엠보싱 물티슈"),
        LIVING,
        ("외출할 때 가방에 넣어 다니기 좋은", "도톰해서 한 장으로도 충분한", "매일 쓰기 부담 없는"),
        ("100매씩 10팩 구성입니다.", "캡이 있어 마지막 장까지 촉촉합니다."),
        audiences=("kids", "unisex"),
    ),
    "sunscreen": Kind(
        "뷰티",
        ("선크림", "선블록", "톤업 선크림"),
        BEAUTY,
        ("매일 바르기 좋은", "야외 활동이 많은 날 든든한", "화장 전에 바르기 좋은"),
        ("SPF50+ PA++++입니다.", "50mL 용량입니다.", "끈적임 없이 흡수됩니다."),
        one_of=(("mineral", "chemical", "hybrid-sun"),),
    ),
    "cleanser": Kind(
        "뷰티",
        ("클렌징폼", "폼클렌저", "약산성 클렌저"),
        BEAUTY,
        ("아침저녁 매일 쓰기 좋은", "메이크업 후 이중 세안에 알맞은", "건조한 피부에 맞는"),
        ("150mL 대용량입니다.", "쫀쫀한 거품이 모공 속까지 닦아 냅니다."),
        optional=("sensitive",),
    ),
    "chicken": Kind(
        "식품",
        ("후라이드 치킨", "양념 치킨", "간장 치킨"),
        CHICKEN,
        ("늦은 밤 출출할 때 생각나는", "맥주와 함께 즐기기 좋은", "가족이 함께 나눠 먹기 좋은"),
        ("치킨무와 소스를 함께 보내 드립니다.", "에어프라이어에 5분 데우면 더 바삭합니다."),
        one_of=(("boneless", "bone-in"), ("tonight", "parcel")),
    ),
    "pizza": Kind(
        "식품",
        ("피자", "페퍼로니 피자", "불고기 피자"),
        PIZZA,
        ("늦은 밤 출출할 때 생각나는", "친구들과 파티할 때 좋은", "아이 간식으로도 좋은"),
        ("모차렐라 치즈를 듬뿍 올렸습니다.", "오븐이나 에어프라이어에 데워 드세요."),
        one_of=(("tonight", "parcel"),),
    ),
    "jokbal": Kind(
        "식품",
        ("족발", "불족발", "미니 족발"),
        JOKBAL,
        ("늦은 밤 출출할 때 생각나는", "술안주로 딱인", "쫄깃한 식감이 살아 있는"),
        ("막국수와 쌈채소를 함께 드립니다.", "국내산 앞다리만 씁니다."),
        one_of=(("tonight", "parcel"),),
    ),
    "tteokbokki": Kind(
        "식품",
        ("떡볶이 밀키트", "국물떡볶이 밀키트", "로제 떡볶이 밀키트"),
        TTEOKBOKKI,
        ("10분이면 완성되는", "늦은 밤 출출할 때 생각나는", "매콤한 맛이 당길 때 좋은"),
        ("쌀떡, 어묵, 소스가 2인분씩 들어 있습니다.", "당면 사리를 추가할 수 있습니다."),
        one_of=(("tonight", "parcel"),),
    ),
    "lunchbox": Kind(
        "식품",
        ("도시락", "닭가슴살 도시락", "샐러드 도시락"),
        MEALS,
        ("식단 관리 중인 분께 맞는", "점심을 간편하게 해결하는", "운동 후 단백질 보충에 좋은"),
        ("전자레인지에 2분 데우면 됩니다.", "한 끼 400kcal 안팎입니다."),
        one_of=(("parcel",),),
    ),
}


AUDIENCE_WORDS = {"women": "여성", "men": "남성", "kids": "아동", "unisex": "남녀공용", "unspecified": ""}


FITS = {
    "women": ("여성 정사이즈로 나왔습니다.", "여성 55부터 77 사이즈까지 있습니다."),
    "men": ("남성 M부터 3XL까지 준비했습니다.", "남성 체형에 맞춘 레귤러 핏입니다."),
    "kids": ("아동 110부터 160 사이즈까지 있습니다.", "초등학생 아이들이 입기 좋은 110~150 사이즈입니다."),
    "unisex": ("남녀공용 사이즈라 여성분은 한 치수 작게 고르시길 권합니다.",),
}


SHOE_FITS = {
    "women": ("여성 225~250mm 사이즈로 나왔습니다.",),
    "men": ("남성 250~290mm 사이즈로 나왔습니다.",),
    "kids": ("아동 160~220mm 사이즈로 나왔습니다.",),
    "unisex": ("남녀공용 225~290mm 사이즈입니다.",),
}


WIPES_FITS = {
    "kids": (
        "신생아부터 쓸 수 있도록 피부 자극 테스트를 마쳤습니다.",
        "아기 손과 입 주변을 닦기 좋은 무향 제품입니다.",
    ),
    "unisex": ("온 가족이 함께 쓰는 대용량 물티슈입니다.",),
}


OPENINGS = (
    "{use} {noun}입니다.",
    "{use} {noun}, 재구매가 많은 스테디셀러입니다.",
    "{use} {noun}{eul} 소개합니다.",
    "{use} {noun}{eul} 만나 보세요.",
)


def _final_consonant(word: str) -> bool:
    """Whether a word ends in a Hangul syllable with a final consonant (받침): 패딩 yes, 가디건 yes, 피자 no."""
    last = word.rstrip()[-1:]
    return "가" <= last <= "힣" and (ord(last) - ord("가")) % 28 != 0


def josa(word: str, with_final: str, without: str) -> str:
    """The particle that follows ``word``: ``josa("패딩", "을", "를")`` is "을", ``josa("피자", "을", "를")`` "를"."""
    return with_final if _final_consonant(word) else without


QUERIES = (
    need(
        "q01",
        "야식 배달",
        "밤늦게 시켜 먹을 야식을 찾는 검색입니다. 적합: 치킨·피자·족발·떡볶이처럼 바로 먹을 수 있는 야식 메뉴이면서 "
        "‘오늘밤 도착’(당일 야간 배송)인 상품. 부분 적합: 야식 메뉴이지만 택배로 1~2일 뒤에 도착하는 상품. "
        "부적합: 도시락처럼 야식이 아닌 음식, 주방 가전.",
        "chicken pizza jokbal tteokbokki",
        features="tonight",
        near_features="parcel",
    ),
    need(
        "q02",
        "겨울 패딩",
        "한겨울에 입을 따뜻한 패딩입니다. 적합: 충전량이 넉넉한 헤비 패딩(길이와 성별은 상관없음). 부분 적합: "
        "간절기용 경량 패딩. 부적합: 코트, 니트 등 패딩이 아닌 옷.",
        "padding",
        features="heavy",
        near_features="light",
    ),
    need(
        "q03",
        "무선 이어폰 노이즈 캔슬링",
        "노이즈 캔슬링이 되는 무선 이어폰입니다. 적합: 액티브 노이즈 캔슬링(ANC)을 지원하는 무선 이어폰. 부분 "
        "적합: 노이즈 캔슬링이 없는 무선 이어폰, 노이즈 캔슬링 헤드폰. 부적합: 노이즈 캔슬링이 없는 헤드폰, "
        "다른 기기.",
        "earbuds",
        related="headphones",
        features="anc",
    ),
    need(
        "q04",
        "여성 롱패딩",
        "여성이 입을 긴 기장의 패딩입니다. 적합: 여성용 또는 남녀공용 롱기장 패딩. 부분 적합: 여성용 숏패딩, "
        "남성용 롱패딩, 누구를 위한 상품인지 적혀 있지 않은 롱패딩. 부적합: 아동용 패딩, 코트.",
        "padding",
        audiences="women unisex",
        features="long",
    ),
    need(
        "q05",
        "캐시미어 니트",
        "캐시미어로 짠 니트나 스웨터입니다. 적합: 캐시미어 니트. 부분 적합: 울 니트, 캐시미어 가디건. "
        "부적합: 아크릴·면 니트, 캐시미어 코트.",
        "knit",
        related="cardigan",
        materials="cashmere",
        near_materials="wool",
    ),
    need(
        "q06",
        "남성 울 코트",
        "남성이 입을 울 또는 캐시미어 코트입니다. 적합: 남성용이나 남녀공용 울·캐시미어 코트. 부분 적합: "
        "여성용 울 코트, 폴리에스터 혼방 코트, 대상이 적혀 있지 않은 울 코트. 부적합: 아동 코트, 패딩.",
        "coat",
        materials="wool cashmere",
        audiences="men unisex",
    ),
    need(
        "q07",
        "쿠셔닝 좋은 러닝화",
        "쿠셔닝이 좋은 달리기용 신발입니다. 적합: 쿠셔닝을 내세운 러닝화. 부분 적합: 쿠셔닝 언급이 없는 "
        "러닝화. 부적합: 등산화, 다른 신발.",
        "running-shoes",
        features="cushion",
    ),
    need(
        "q08",
        "방수 등산화",
        "비 오는 산행에도 발이 젖지 않는 등산화입니다. 적합: 방수 기능이 있는 등산화. 부분 적합: 방수 기능이 "
        "없는 등산화. 부적합: 러닝화.",
        "hiking-boots",
        features="waterproof",
    ),
    need(
        "q09",
        "블루투스 헤드폰",
        "선 없이 블루투스로 연결하는 헤드폰입니다. 적합: 무선(블루투스) 헤드폰. 부분 적합: 무선 이어폰. "
        "부적합: 유선 헤드폰.",
        "headphones",
        related="earbuds",
        features="wireless",
        near_features="",
    ),
    need(
        "q10",
        "가벼운 노트북",
        "들고 다니기 가벼운 노트북입니다. 적합: 1.3kg 이하의 초경량 노트북. 부분 적합: 1.5kg 안팎의 노트북. "
        "부적합: 2kg이 넘는 노트북, 노트북 가방 같은 액세서리.",
        "laptop",
        features="ultralight",
        near_features="midweight",
    ),
    need(
        "q11",
        "게이밍 노트북",
        "게임을 하기 위한 고사양 노트북입니다. 적합: 외장 그래픽을 갖춘 게이밍 노트북. 부적합: 게이밍 사양이 "
        "아닌 일반 노트북.",
        "laptop",
        features="gaming",
        near_features="",
    ),
    need(
        "q12",
        "보조배터리 20000mAh",
        "용량 20000mAh의 보조배터리입니다. 적합: 20000mAh 보조배터리. 부분 적합: 10000mAh 보조배터리. "
        "부적합: 충전 케이블, 충전기.",
        "power-bank",
        features="20000mah",
        near_features="10000mah",
    ),
    need(
        "q13",
        "고속충전 보조배터리",
        "고속충전을 지원하는 보조배터리입니다. 적합: PD 고속충전을 지원하는 보조배터리. 부분 적합: 고속충전 "
        "언급이 없는 보조배터리.",
        "power-bank",
        features="fast-charge",
    ),
    need(
        "q14",
        "물걸레 로봇청소기",
        "물걸레 청소까지 하는 로봇청소기입니다. 적합: 물걸레 기능이 있는 로봇청소기. 부분 적합: 흡입만 하는 "
        "로봇청소기.",
        "robot-vacuum",
        features="mop",
    ),
    need(
        "q15",
        "에어프라이어 대용량",
        "용량이 큰 에어프라이어입니다. 적합: 10L 이상 대용량 에어프라이어. 부분 적합: 5L 안팎의 에어프라이어. "
        "부적합: 2L 미니 에어프라이어.",
        "air-fryer",
        features="large",
        near_features="medium",
    ),
    need(
        "q16",
        "가열식 가습기",
        "물을 끓이는 가열식 가습기입니다. 적합: 가열식 가습기. 부분 적합: 가열과 초음파를 함께 쓰는 복합식 "
        "가습기. 부적합: 초음파 가습기.",
        "humidifier",
        features="heated",
        near_features="hybrid-humid",
    ),
    need(
        "q17",
        "무기자차 선크림",
        "무기자차(물리적 자외선 차단제) 선크림입니다. 적합: 무기자차 선크림. 부분 적합: 혼합자차 선크림. "
        "부적합: 유기자차 선크림.",
        "sunscreen",
        features="mineral",
        near_features="hybrid-sun",
    ),
    need(
        "q18",
        "민감성 피부 클렌징폼",
        "민감한 피부에 쓸 세안제입니다. 적합: 저자극·약산성을 내세운 클렌징폼. 부분 적합: 저자극 언급이 없는 클렌징폼.",
        "cleanser",
        features="sensitive",
    ),
    need(
        "q19",
        "순살 치킨",
        "뼈 없는 순살 치킨입니다. 적합: 순살 치킨(배송 방식은 상관없음). 부분 적합: 뼈 있는 치킨. "
        "부적합: 닭가슴살 도시락.",
        "chicken",
        features="boneless",
        near_features="bone-in",
    ),
    need(
        "q20",
        "떡볶이 밀키트",
        "집에서 끓여 먹는 떡볶이 밀키트입니다. 적합: 떡볶이 밀키트(맛과 배송 방식은 상관없음). 부적합: "
        "떡볶이가 아닌 음식.",
        "tteokbokki",
    ),
    need(
        "q21",
        "냉동 피자",
        "냉동 상태로 받아 집에서 데워 먹는 피자입니다. 적합: 택배로 오는 냉동 피자. 부분 적합: 당일 배달되는 "
        "피자. 부적합: 피자가 아닌 음식.",
        "pizza",
        features="parcel",
        near_features="tonight",
    ),
    need(
        "q22",
        "아기 물티슈",
        "아기에게 쓰는 물티슈입니다. 적합: 아기용이라고 밝힌 물티슈. 부분 적합: 누구를 위한 제품인지 적혀 "
        "있지 않은 물티슈. 부적합: 성인용·가족용 일반 물티슈.",
        "wipes",
        audiences="kids",
    ),
    need(
        "q23",
        "아동 패딩",
        "아이가 입을 패딩입니다. 적합: 아동용 패딩(기장과 두께는 상관없음). 부분 적합: 대상이 적혀 있지 않은 "
        "패딩. 부적합: 성인용 패딩.",
        "padding",
        audiences="kids",
    ),
    need(
        "q24",
        "남성 러닝화",
        "남성이 신을 러닝화입니다. 적합: 남성용이나 남녀공용 러닝화. 부분 적합: 여성용 러닝화, 대상이 적혀 "
        "있지 않은 러닝화. 부적합: 아동 러닝화, 등산화.",
        "running-shoes",
        audiences="men unisex",
    ),
    need(
        "q25",
        "여성 니트 가디건",
        "여성이 입을 니트 가디건입니다. 적합: 여성용 가디건. 부분 적합: 여성용 니트(가디건이 아닌 것), "
        "남성용 가디건, 대상이 적혀 있지 않은 가디건. 부적합: 아동 가디건.",
        "cardigan",
        related="knit",
        audiences="women unisex",
    ),
)


def _spec(
    rng: random.Random,
    kind: str,
    *,
    audience: str | None = None,
    material: str | None = None,
    features: Iterable[str] = (),
    avoid_features: Iterable[str] = (),
) -> Spec:
    k = KINDS[kind]
    if audience is None:
        audience = rng.choice(k.audiences) if k.audiences else "unisex"
        if k.audiences and rng.random() < 0.15:
            audience = "unspecified"  # pages that never say who they are for
    material = material if material is not None else rng.choice(k.materials)
    chosen = set(features)
    avoid = set(avoid_features)
    for group in k.one_of:
        if not chosen & set(group):
            chosen.add(rng.choice([f for f in group if f not in avoid] or list(group)))
    chosen |= {f for f in k.optional if f not in avoid and rng.random() < 0.35}
    colour = rng.choice(k.colours) if k.colours else ""
    return Spec(kind, audience, material, colour, frozenset(chosen))


def _variants(rng: random.Random, need: Need) -> list[Spec]:
    """Listings written to sit near one query: four that meet it and up to four that miss one requirement."""
    kinds = sorted(need.kinds)

    def meets(**overrides: Any) -> Spec:
        kind = overrides.pop("kind", rng.choice(kinds))
        k = KINDS[kind]
        audiences = [a for a in k.audiences if not need.audiences or a in need.audiences]
        materials = [m for m in k.materials if not need.materials or m in need.materials]
        args: dict[str, Any] = {
            "audience": rng.choice(audiences or list(k.audiences) or ["unisex"]),
            "material": rng.choice(materials or list(k.materials)),
            "features": need.features,
        }
        args.update(overrides)
        return _spec(rng, kind, **args)

    specs = [meets() for _ in range(4)]
    misses = []
    if need.related:
        related = sorted(need.related)
        misses.append(lambda: meets(kind=rng.choice(related), audience=None))
    if need.audiences:
        others = [a for a in KINDS[kinds[0]].audiences if a not in need.audiences]
        if others:
            misses.append(lambda: meets(audience=rng.choice(others)))
        misses += [lambda: meets(audience="unspecified")] * 2  # pages that never say who they are for are common
    if need.materials:
        materials = [m for k in kinds for m in KINDS[k].materials if m not in need.materials]
        misses.append(lambda: meets(material=rng.choice(materials)))
    if need.features:
        near = sorted(need.near_features or ())
        misses.append(lambda: meets(features=near[:1], avoid_features=need.features))
        misses.append(lambda: meets(features=(), avoid_features=need.features))
    while misses and len(specs) < 8:
        for miss in misses[: 8 - len(specs)]:
            specs.append(miss())
    return specs


def _words(rng: random.Random, spec: Spec) -> tuple[str, str]:
    """A title as Korean shops write them ("[브랜드] 여성 구스다운 롱기장 후드 패딩 블랙") and a 3-4 sentence page."""
    k = KINDS[spec.kind]
    noun = rng.choice(k.nouns)
    brands = KIDS_BRANDS if spec.audience == "kids" and k.department == "패션" and rng.random() < 0.5 else k.brands
    parts = [f"[{rng.choice(brands)}]"]
    if k.department == "디지털" and rng.random() < 0.5:
        parts.append(rng.choice(MODELS))
    if spec.kind == "wipes":
        parts.append({"kids": "아기", "unisex": "가족용"}.get(spec.audience, ""))
    elif k.audiences:
        parts.append(AUDIENCE_WORDS[spec.audience])
    material_word = MATERIALS[spec.material].word
    if material_word and material_word not in noun:
        parts.append(material_word)
    order = [f for f in FEATURES if f in spec.features]
    words = [FEATURES[f].word for f in order if FEATURES[f].word and FEATURES[f].word not in noun]
    parts.extend(words[:3])
    parts.append(noun)
    if spec.colour:
        parts.append(spec.colour)
    title = " ".join(p for p in parts if p)

    use = rng.choice(k.uses)
    opening = rng.choice(OPENINGS).format(use=use, noun=noun, eul=josa(noun, "을", "를"))
    sentences = [opening]
    if MATERIALS[spec.material].sentences:
        sentences.append(rng.choice(MATERIALS[spec.material].sentences))
    feature_sentences = [rng.choice(FEATURES[f].sentences) for f in order]
    rng.shuffle(feature_sentences)
    sentences.extend(feature_sentences[:2])
    fits = (WIPES_FITS if spec.kind == "wipes" else SHOE_FITS if k.footwear else FITS).get(spec.audience, ())
    if k.audiences and fits and rng.random() < 0.8:
        sentences.append(rng.choice(fits))
    if len(sentences) < 4:
        sentences.append(rng.choice(k.extras))
    if len(sentences) > 4:
        # Keep the opening and the material (or the first feature); drop one of the rest.
        del sentences[rng.randrange(2, len(sentences))]
    return title, " ".join(sentences[:4])


IMPORTED_PREFIX = "[외부 판매처 상품]"


# Listings a marketplace feed brought in with their markup intact (nothing may render it), and one saved on a Mac
# in decomposed Hangul (NFD): the import stores text in NFC, so it displays, wraps and matches like the rest.
_IMPORTED = (
    (
        Spec("padding", "kids", "duck-down", "스카이 블루", frozenset({"heavy", "short", "hooded"})),
        "[토리키즈] 아동 덕다운 헤비 후드 패딩 <b>신상</b> 스카이 블루",
        f"{IMPORTED_PREFIX} <b>눈에 잘 띄는</b> 하늘색이라 등원길에도 안심입니다. 덕다운 충전재와 후드로 "
        "한겨울에도 따뜻합니다. <script>alert('xss')</script> 아동 110~150 사이즈.",
    ),
    (
        Spec("earbuds", "unisex", "", "화이트", frozenset({"wireless", "anc"})),
        "[소리랩] 무선 이어폰 <i>ANC</i> 화이트",
        f"{IMPORTED_PREFIX} <ul><li>노이즈 캔슬링</li><li>블루투스 5.3</li></ul> 지하철에서도 조용하게 "
        "음악을 들을 수 있는 무선 이어폰입니다.",
    ),
    (
        Spec("jokbal", "unisex", "", "", frozenset({"tonight"})),
        "[고향족발] 앞다리 족발 오늘밤도착",
        f'{IMPORTED_PREFIX} 국내산 앞다리 족발 &amp; 막국수 세트. <img src=x onerror="alert(1)"> '
        "밤 9시 전 주문 시 당일 밤 도착합니다.",
    ),
    (
        Spec("knit", "unspecified", "cashmere", "아이보리", frozenset()),
        unicodedata.normalize("NFD", "[한결] 캐시미어 꽈배기 니트 아이보리"),
        unicodedata.normalize(
            "NFD", f"{IMPORTED_PREFIX} 캐시미어 100% 꽈배기 니트입니다.<br>손세탁 후 뉘어서 건조해 주세요."
        ),
    ),
)


def bigrams(text: str) -> list[str]:
    """Character bigrams of each word (a word of one character is its own term): Korean search without a
    morphological analyser. "롱패딩을" gives 롱패, 패딩, 딩을, so it matches the query "패딩"."""
    grams = []
    for word in unicodedata.normalize("NFC", text).lower().split():
        word = "".join(c for c in word if c.isalnum())
        if len(word) == 1:
            grams.append(word)
        grams.extend(word[i : i + 2] for i in range(len(word) - 1))
    return grams


def _scores(
    rng: random.Random,
    need: Need,
    products: list[Product],
    verdicts: list[Verdict],
    lexical: list[float],
    popularity: list[float],
) -> dict[str, list[float]]:
    """The three systems' scores of every product for a query (the generator ranks the top 50-100).

    hybrid-v3 sees the hidden relevance through some noise plus the bigram score; bm25-bigram sees only the
    words (with a small popularity prior); keyword-match counts the query's words that appear as whole words in
    the title, exactly as typed ("노이즈 캔슬링" misses "노이즈캔슬링", "패딩" misses "롱패딩"), and breaks ties by
    popularity.
    """
    top = max(lexical) or 1.0
    titles = [set(unicodedata.normalize("NFC", p.title).split()) for p in products]
    words = need.text.split()
    return {
        "hybrid-v3": [
            round(
                0.3
                + 0.09 * v.grade
                + 0.1 * (p.kind in need.kinds)
                + 0.04 * (p.kind in need.related)
                + 0.12 * s / top
                + rng.gauss(0, 0.07),
                4,
            )
            for p, v, s in zip(products, verdicts, lexical, strict=True)
        ],
        "bm25-bigram": [round(s + 0.05 * pop, 4) for s, pop in zip(lexical, popularity, strict=True)],
        "keyword-match": [
            round(sum(w in t for w in words) + 0.9 * pop, 3) for t, pop in zip(titles, popularity, strict=True)
        ],
    }


# Query traffic tiers as a shop's search logs would give them: the first queries are the most searched.
TIERS = (("head", 8), ("torso", 16), ("tail", len(QUERIES)))


def department(need: Need) -> str:
    return KINDS[sorted(need.kinds)[0]].department


def brand_of(title: str) -> str:
    """The brand in a title's leading brackets ("[노스힐] ..." → 노스힐)."""
    title = unicodedata.normalize("NFC", title)
    return title[1 : title.index("]")] if title.startswith("[") and "]" in title else title.split()[0]


def _attributes(p: Product) -> dict:
    # Listings without a colour family (bags, electronics ...) say "none" rather than null.
    return {"brand": brand_of(p.title), "category": p.kind, "colour": p.colour_family or "none", "audience": p.audience}


VOCABULARY = Vocabulary(
    queries=QUERIES,
    kinds=tuple(KINDS),
    colours=dict(COLOURS),
    listings=250,
    numbers=range(100000, 999999),
    docid="g{number}",
    url="https://shop.example/ko/goods/{number}",
    imported=_IMPORTED,
    spec=_spec,
    variants=_variants,
    words=_words,
    tokens=bigrams,
    scores=_scores,
    tiers=TIERS,
    department=department,
    attributes=_attributes,
)


@cache
def demo_data(seed: int = SEED) -> DemoData:
    """The Korean demo's products, hidden relevance and runs, the same for the same seed."""
    return generate(VOCABULARY, seed)


PROFILES = {
    "minji": Profile(slip=0.14, lean=0.0, unsure=0.7, pace=11.0),  # careful
    "junho": Profile(slip=0.22, lean=0.6, unsure=0.4, pace=8.0),  # quick and lenient
    "seoyeon": Profile(slip=0.2, lean=-0.6, unsure=0.6, pace=15.0),  # slow and strict
}


UNCLEAR_NOTES: dict[str, tuple[str, ...]] = {
    "kids": ("아동용인지 알 수 없음 — 상세 설명에 사이즈가 없습니다.", "성인용인지 아이용인지 표기가 없습니다."),
    "women": ("여성용인지 남녀공용인지 상세 설명에 나와 있지 않습니다.", "핏 정보가 없어 남성 전용일 수도 있습니다."),
    "men": ("사이즈 표기가 없어 여성용일 수도 있습니다.", "누구를 위한 상품인지 본문만으로는 알 수 없습니다."),
}


SUBSTITUTE_UNSURE = (
    "이런 대체 상품도 인정되는지 질의 설명이 모호합니다.",
    "구매자가 이걸 대신 살지 모르겠습니다. 리드 확인 부탁드립니다.",
)


IMPORTED_UNSURE = (
    "외부 판매처 상품이라 태그가 섞여 무엇을 파는지 알기 어렵습니다.",
    "본문이 태그 뒤에서 잘린 것 같습니다.",
)


MISS_NOTES = {
    "audience": ("상품은 맞는데 대상이 다릅니다.", "검색어와 다른 대상을 위한 상품입니다."),
    "material": ("상품은 맞는데 소재가 다릅니다.", "소재가 검색어와 맞지 않습니다."),
    "feature": ("검색어가 요구하는 기능이 있다는 말이 없습니다.", "핵심 기능이 빠져 있습니다."),
    "colour": ("상품은 맞는데 색상이 다릅니다.",),
    "kind": ("찾는 상품이 아니라 가까운 대체 상품입니다.",),
}


REASONS = {
    "audience": "검색어가 말하는 대상과 다른 사람을 위한 상품",
    "material": "검색어가 말하는 소재가 아님",
    "feature": "검색어가 요구하는 기능이 없음",
    "colour": "검색어가 말하는 색상이 아님",
    "kind": "찾는 상품이 아닌 대체 상품",
}


RECHECK_NOTE = "질의 설명을 다시 읽고 등급을 바꿨습니다."


def adjudication_note(misses: tuple[str, ...], grade: int) -> str:
    """The lead's note on a settled dispute."""
    reason = REASONS[misses[0]] if misses else "검색어의 조건을 모두 충족"
    name = str(SCALE[grade]["name"])
    return f"{reason}: 질의 설명에 따라 {name}{josa(name, '으로', '로')} 판정합니다."


WORDS = Words(
    unclear=UNCLEAR_NOTES,
    imported=IMPORTED_UNSURE,
    substitute=SUBSTITUTE_UNSURE,
    misses=MISS_NOTES,
    imported_prefix=IMPORTED_PREFIX,
    resolved=(
        "브랜드 사이즈표를 확인해 대상이 누구인지 알았습니다.",
        "브랜드 공식몰에서 원래 상품 페이지를 찾아 보고 판정했습니다.",
        "질의 설명에 이 대체 상품은 부분 적합이라고 되어 있습니다.",
    ),
)
