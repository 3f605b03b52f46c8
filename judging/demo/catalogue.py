"""The English demo's vocabulary (``load_demo``): its queries, the words its listings are written from, its three
rankers and its annotators' habits and notes. judging/demo/generator.py makes the demo from them (products,
hidden relevance, runs, judgments), as it makes the Korean one from judging/demo/catalogue_ko.py."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
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

SLUG = "shop"


NAME = "Product search — apparel & outdoor"


SEED = 2026


SYSTEMS = ("bm25", "dense-v2", "random-baseline")


LEAD = "lead"


ANNOTATORS = ("alice", "bob", "carol")
# The interface language kept on the demo team's accounts: "" follows the browser.
LANGUAGE = ""


# Who judged what, as a lead would find it a few days in (annotators by position, see loader._judge): queries
# done twice over, some by one annotator so far, one in progress, the rest untouched.
PLAN = {
    "both": ("q01", "q03", "q07", "q11", "q16", "q24"),
    "first_more": ("q02", "q06", "q13", "q19"),
    "second_only": ("q05", "q21", "q28"),
    "started": ("q09",),
}


FILE_STEM = "shop"  # the names of the files the demo imports (shop-topics.tsv ...), shown in the import history


# Demo logins, printed by load_demo. They pass Django's password validators (length, not common, not numeric,
# not too close to the username) so that the demo also works with the validators switched on.
PASSWORDS = {
    "lead": "demo-lead-2026",
    "alice": "demo-alice-2026",
    "bob": "demo-bob-2026",
    "carol": "demo-carol-2026",
    "admin": "demo-admin-2026",
}


ROLES = {
    "lead": "campaign lead (runs the campaign; the admin is for the superuser)",
    "alice": "annotator",
    "bob": "annotator",
    "carol": "annotator (judged a small overlap sample)",
    "admin": "superuser",
}


DESCRIPTION = (
    # Annotators read this on their home page: it must not say which rankers are compared.
    "Relevance judgments for the product search of an outdoor and apparel shop: the top 10 results of "
    "several rankers are pooled, and each product is judged by two people without knowing who ranked it."
)


SCALE = [
    {
        "value": 0,
        "name": "Not relevant",
        "description": "A different product, or the right kind of product that misses so much of the query "
        "that the searcher would not consider it.",
        "examples": "“wool knit sweater” → merino wool socks; a cotton cardigan.\n"
        "“kids rain jacket” → an adult men's rain jacket.\n"
        "“2 person backpacking tent” → a 1-person tent, a sleeping bag.",
    },
    {
        "value": 1,
        "name": "Partially relevant",
        "description": "The right kind of product that misses one thing the query asks for (material, "
        "audience, a feature, the colour), or a close substitute that meets the query "
        "otherwise.",
        "examples": "“wool knit sweater” → an acrylic knit sweater; a lambswool cardigan.\n"
        "“waterproof hiking boots women” → women's hiking boots that are not waterproof.\n"
        "“rain poncho” → a rain jacket.",
    },
    {
        "value": 2,
        "name": "Highly relevant",
        "description": "Exactly what the searcher asked for: the product type and every stated requirement match.",
        "examples": "“wool knit sweater” → a merino cable-knit jumper.\n"
        "“kids rain jacket” → a kids' hooded rain shell, sizes 4–12.\n"
        "“brown leather belt” → a chestnut full-grain leather belt.",
    },
]


GUIDELINES = """\
## What you are judging

Each pair shows one search query and one product listing from the shop. Decide how well the listing answers the \
query for a typical shopper who typed it. Read the **query's description** first: it says what counts as relevant \
and what does not, and it wins over your own taste. Judge the listing as written (title and description), not the \
brand or the price, and not whether you would buy it.

## How to grade

### 2 Highly relevant

The product type is right and every requirement in the query is met (material, audience, feature, colour).

- “wool knit sweater” → a merino cable-knit jumper

### 1 Partially relevant

The right type of product that misses one requirement, or a close substitute that meets the rest.

- “wool knit sweater” → an acrylic sweater (wrong material), a wool cardigan (a substitute)
- “waterproof hiking boots women” → men's waterproof hiking boots
- “rain poncho” → a rain jacket

### 0 Not relevant

A different product, or one that misses two or more requirements. Kids' products for an adult query (and the \
reverse) are not relevant.

## When you are not sure

Do not force a grade. If the listing does not give you what you need to decide (it does not say who it is for, the \
material is missing, the text looks cut off), press **Unsure**, give your best guess as a tentative grade if you \
have one, and write a short note saying what is missing, e.g. “Can't tell if this is for kids: the listing doesn't \
say.” Unsure pairs are not scored; a lead reviews them. Unsure is for missing evidence, not for hard decisions: if \
the listing says everything and you still hesitate between 1 and 2, pick the grade the description supports.

## Tips

- Listings imported from marketplaces sometimes contain stray HTML such as `<b>` tags or script snippets. Ignore the \
markup and judge the text.
- Duplicate listings (same title and text, different id) get the same grade.
- Aim for 10–20 seconds per pair; take a break every half hour: fatigue shows in the agreement figures.
"""


@dataclass(frozen=True)
class Kind:
    """A product type and what its listings can say."""

    nouns: tuple[str, ...]
    materials: tuple[str, ...]
    audiences: tuple[str, ...]
    uses: tuple[str, ...]
    extras: tuple[str, ...]
    optional: tuple[str, ...] = ()
    one_of: tuple[str, ...] = ()  # exactly one of these (capacity, season rating, support level)
    gear: bool = False  # no audience in the title
    fitted: bool = True  # listings say how it fits (not for scarves, hats, bags...)
    footwear: bool = False  # sized in shoe sizes


MATERIALS = {
    "merino": Trait(
        "Merino Wool",
        (
            "Knitted from fine merino wool that stays warm when damp and resists odour for days.",
            "Made of 100% merino wool, soft enough to wear against the skin.",
        ),
    ),
    "lambswool": Trait(
        "Lambswool",
        (
            "Made from pure lambswool with a soft, slightly brushed handle.",
            "Spun from British lambswool, warm without being bulky.",
        ),
    ),
    "cashmere": Trait(
        "Cashmere",
        (
            "Two-ply grade-A cashmere, light and remarkably warm.",
            "Made from pure cashmere that gets softer with every wear.",
        ),
    ),
    "alpaca": Trait(
        "Alpaca-Blend",
        (
            "An alpaca and wool blend that is lighter than it looks and very warm.",
            "Knitted from a baby alpaca blend with a gentle halo.",
        ),
    ),
    "cotton": Trait(
        "Cotton",
        (
            "Made from midweight cotton that softens with every wash.",
            "Combed cotton with a smooth, breathable finish.",
        ),
    ),
    "organic-cotton": Trait(
        "Organic Cotton",
        (
            "Made from GOTS-certified organic cotton, grown without synthetic pesticides.",
            "Organic cotton jersey, certified from field to finished garment.",
        ),
    ),
    "linen": Trait(
        "Linen",
        (
            "Cut from breathable European linen that keeps you cool on hot days.",
            "Washed linen with a relaxed, lived-in texture.",
        ),
    ),
    "viscose": Trait(
        "",
        (
            "Flowing viscose fabric with a soft drape.",
            "Made from a light viscose crepe that does not cling.",
        ),
    ),
    "acrylic": Trait(
        "",
        (
            "Knitted from a soft acrylic yarn that holds its shape and is easy to wash.",
            "Easy-care acrylic knit, no hand washing needed.",
        ),
    ),
    "recycled-polyester": Trait(
        "Recycled",
        (
            "The fabric is made from recycled polyester.",
            "Made with recycled polyester from post-consumer bottles.",
        ),
    ),
    "nylon": Trait(
        "",
        (
            "The shell is a lightweight ripstop nylon with a water-repellent finish.",
            "Made from tough, lightweight nylon.",
        ),
    ),
    "nylon-elastane": Trait(
        "",
        (
            "Four-way stretch nylon–elastane fabric that moves with you and wicks sweat.",
            "Soft, squat-proof stretch fabric (78% nylon, 22% elastane).",
        ),
    ),
    "leather": Trait(
        "Leather",
        (
            "Made from full-grain leather that develops a patina with use.",
            "Full-grain leather, oiled for a soft, water-resistant finish.",
        ),
    ),
    "suede": Trait(
        "Suede",
        (
            "Soft suede with a water-repellent treatment.",
            "Made from brushed suede that is pre-treated against stains.",
        ),
    ),
    "synthetic": Trait(
        "",
        (
            "Synthetic uppers keep the weight down and dry quickly.",
            "Made from hard-wearing synthetic materials that dry fast.",
        ),
    ),
    "mesh": Trait(
        "",
        (
            "Engineered mesh uppers keep your feet cool on long runs.",
            "A breathable mesh upper with a protective toe bumper.",
        ),
    ),
    "down": Trait(
        "Down",
        (
            "Filled with 650-fill-power responsibly sourced down.",
            "Insulated with RDS-certified duck down for a high warmth-to-weight ratio.",
        ),
    ),
    "synthetic-fill": Trait(
        "Synthetic-Fill",
        (
            "Insulated with synthetic fill that keeps you warm even when it gets wet.",
            "Recycled synthetic insulation, an animal-free alternative to down.",
        ),
    ),
    "fleece": Trait(
        "Fleece",
        (
            "Made from recycled polyester fleece (200 g/m²) that traps warmth without the weight.",
            "A midweight grid fleece that breathes well when you are moving.",
        ),
    ),
    "softshell": Trait(
        "Softshell",
        (
            "Stretchy, wind-resistant softshell fabric with a brushed inner face.",
            "A tough softshell that shrugs off wind and light showers.",
        ),
    ),
    "denim": Trait(
        "Denim",
        (
            "Made from rigid 12 oz cotton denim that breaks in beautifully.",
            "Washed cotton denim with a touch of stretch.",
        ),
    ),
    "canvas": Trait(
        "Canvas",
        (
            "Made from heavy waxed cotton canvas.",
            "Tough cotton canvas with a stitched edge.",
        ),
    ),
    "straw": Trait(
        "Straw",
        (
            "Woven from natural paper straw, light and breathable.",
            "Hand-woven raffia straw with a cotton sweatband.",
        ),
    ),
}


FEATURES = {
    "waterproof": Trait(
        "Waterproof",
        (
            "A waterproof, breathable membrane keeps water out while letting sweat escape.",
            "Fully waterproof with taped seams.",
        ),
    ),
    "insulated": Trait(
        "Insulated",
        (
            "Lightweight insulation keeps you warm down to about -10 °C.",
            "Insulated with a thin layer of synthetic wadding for cold days.",
        ),
    ),
    "fleece-lined": Trait("Fleece-Lined", ("Lined with soft fleece for extra warmth.",)),
    "packable": Trait(
        "Packable",
        (
            "Packs down into its own pocket for easy carrying.",
            "Stuffs into a stuff sack the size of a water bottle.",
        ),
    ),
    "hooded": Trait(
        "Hooded",
        (
            "An adjustable hood with a stiffened peak keeps rain off your face.",
            "The hood rolls away into the collar when you don't need it.",
        ),
    ),
    "reflective": Trait("Reflective", ("Reflective details make you visible in low light.",)),
    "quick-dry": Trait("Quick-Dry", ("Dries quickly after a wash, a swim or a sudden shower.",)),
    "convertible": Trait("Convertible", ("Zip-off legs turn them into shorts when it warms up.",)),
    "touchscreen": Trait("Touchscreen", ("Touchscreen-compatible fingertips, so your phone works with them on.",)),
    "high-support": Trait("High-Support", ("High support with moulded cups and wide straps for running and HIIT.",)),
    "medium-support": Trait("Medium-Support", ("Medium support for gym sessions and cycling.",)),
    "low-support": Trait("Light-Support", ("Light support for yoga, pilates and lounging.",)),
    "wide-brim": Trait("Wide-Brim", ("A wide 9 cm brim shades your face, neck and shoulders.",)),
    "upf50": Trait("UPF 50+", ("UPF 50+ fabric blocks 98% of UV rays.",)),
    "summer": Trait("Summer", ("Comfort rated to +10 °C: a light bag for warm nights.",)),
    "3-season": Trait("3-Season", ("Comfort rated to 0 °C, for spring, summer and autumn trips.",)),
    "4-season": Trait("4-Season", ("Comfort rated to -12 °C for winter camping and high altitude.",)),
    "one-person": Trait("1-Person", ("Sleeps one, with a porch big enough for a pack and boots.",)),
    "two-person": Trait("2-Person", ("Sleeps two, with a door and a porch on each side.",)),
    "three-person": Trait("3-Person", ("Sleeps three, or two with plenty of room for gear.",)),
    "20l": Trait("20L", ("20 litres: enough for a day's food, water and a spare layer.",)),
    "30l": Trait("30L", ("30 litres with a padded hip belt for long day hikes.",)),
    "45l": Trait("45L", ("45 litres, big enough for a weekend hut-to-hut trip.",)),
    "rain-cover": Trait("", ("An integrated rain cover tucks into the base.",)),
}


KINDS = {
    "sweater": Kind(
        ("Sweater", "Crew-Neck Sweater", "Cable-Knit Jumper", "Roll-Neck Jumper"),
        ("merino", "lambswool", "cashmere", "alpaca", "cotton", "acrylic"),
        ("women", "men", "kids", "unisex"),
        ("cold mornings", "layering from autumn to spring", "weekends by the fire"),
        (
            "Hand wash cold and dry flat.",
            "Ribbed cuffs and hem keep the shape.",
            "A relaxed fit that layers over a shirt.",
        ),
    ),
    "cardigan": Kind(
        ("Cardigan", "Button Cardigan", "Longline Cardigan"),
        ("merino", "lambswool", "cashmere", "alpaca", "cotton", "acrylic"),
        ("women", "men", "kids"),
        ("chilly offices", "layering over a dress or shirt", "cool evenings"),
        ("Horn-effect buttons and two patch pockets.", "Hand wash cold and dry flat."),
    ),
    "t-shirt": Kind(
        ("T-Shirt", "Crew Tee", "Pocket Tee", "V-Neck Tee"),
        ("organic-cotton", "cotton", "merino", "recycled-polyester"),
        ("women", "men", "kids", "unisex"),
        ("everyday wear", "travel", "warm days on the trail"),
        ("Machine washable at 30 °C.", "A regular fit that keeps its shape after washing."),
        optional=("quick-dry",),
    ),
    "base-layer": Kind(
        ("Base Layer Top", "Long-Sleeve Base Layer", "Thermal Leggings"),
        ("merino", "recycled-polyester"),
        ("women", "men", "kids", "unisex"),
        ("ski days", "winter hiking", "cold-weather running"),
        ("Flatlock seams prevent chafing under a pack.", "A close fit for wearing next to the skin."),
    ),
    "hiking-boots": Kind(
        ("Hiking Boots", "Trekking Boots", "Mid Hiking Boots"),
        ("leather", "suede", "synthetic"),
        ("women", "men", "kids", "unisex"),
        ("day hikes on rocky paths", "multi-day treks", "muddy hill walks"),
        (
            "A grippy rubber outsole with deep lugs.",
            "Comes with a spare pair of laces.",
            "A padded collar protects your ankles.",
        ),
        optional=("waterproof", "insulated"),
        footwear=True,
    ),
    "trail-shoes": Kind(
        ("Trail Running Shoes", "Trail Runners"),
        ("mesh", "synthetic"),
        ("women", "men", "unisex"),
        ("technical trail runs", "muddy off-road routes", "ultra distances"),
        ("5 mm lugs grip on mud and wet rock.", "A rock plate protects against sharp stones.", "8 mm drop."),
        optional=("waterproof", "reflective"),
        footwear=True,
    ),
    "snow-boots": Kind(
        ("Snow Boots", "Winter Boots"),
        ("synthetic", "suede", "leather"),
        ("women", "men", "kids"),
        ("snowy pavements", "sledging days", "winter walks"),
        ("A removable felt liner dries overnight.", "A snow collar keeps powder out."),
        optional=("waterproof", "fleece-lined"),
        one_of=("insulated",),
        footwear=True,
    ),
    "chelsea-boots": Kind(
        ("Chelsea Boots",),
        ("leather", "suede"),
        ("women", "men", "unisex"),
        ("everyday wear", "the office and the pub", "city walks"),
        ("Elastic side panels and a pull tab make them easy to slip on.", "A stacked heel and a Goodyear-welted sole."),
        optional=("waterproof",),
        footwear=True,
    ),
    "rain-jacket": Kind(
        ("Rain Jacket", "Rain Shell", "Waterproof Jacket"),
        ("nylon", "recycled-polyester"),
        ("women", "men", "kids", "unisex"),
        ("wet commutes", "walks in changeable weather", "hiking in the rain"),
        (
            "Fully taped seams and a storm flap over the zip.",
            "Pit zips let heat out on the climbs.",
            "Hand pockets sit above a hip belt.",
        ),
        optional=("packable", "hooded", "reflective"),
    ),
    "down-jacket": Kind(
        ("Down Jacket", "Puffer Jacket", "Quilted Jacket"),
        ("down", "synthetic-fill"),
        ("women", "men", "kids"),
        ("cold winter days", "belay stances and camp evenings", "the school run in January"),
        ("Two zipped hand pockets and an internal stash pocket.", "Elasticated cuffs seal in the warmth."),
        optional=("packable", "hooded"),
    ),
    "fleece": Kind(
        ("Fleece Jacket", "Fleece Pullover", "Half-Zip Fleece"),
        ("fleece",),
        ("women", "men", "kids", "unisex"),
        ("cool evenings at camp", "layering under a shell", "chilly mornings"),
        ("Machine washable and quick to dry.", "Zipped chest pocket."),
    ),
    "softshell": Kind(
        ("Softshell Jacket",),
        ("softshell",),
        ("women", "men", "kids"),
        ("breezy ridge walks", "active days in cool weather", "cycling to work"),
        ("Two zipped hand pockets.", "A high collar blocks the wind."),
        optional=("hooded", "reflective"),
    ),
    "denim-jacket": Kind(
        ("Denim Jacket", "Denim Trucker Jacket"),
        ("denim",),
        ("women", "men", "kids", "unisex"),
        ("everyday layering", "spring evenings", "festival season"),
        ("Classic chest pockets with button flaps.", "Gets better with every wash."),
        optional=("fleece-lined",),
    ),
    "poncho": Kind(
        ("Rain Poncho",),
        ("nylon", "recycled-polyester"),
        ("unisex", "kids"),
        ("festivals, theme parks and hikes", "covering you and your backpack in a downpour"),
        ("Press-stud sides turn it into a shelter.", "One size fits most."),
        optional=("packable", "reflective"),
        fitted=False,
    ),
    "hiking-pants": Kind(
        ("Hiking Trousers", "Trek Pants", "Walking Trousers"),
        ("nylon", "recycled-polyester", "softshell"),
        ("women", "men", "kids"),
        ("long days in the hills", "trekking in changeable weather", "everyday walks"),
        ("Articulated knees and a gusseted crotch.", "Zipped thigh pocket fits a map."),
        optional=("waterproof", "quick-dry", "convertible"),
    ),
    "leggings": Kind(
        ("Yoga Leggings", "Running Tights", "High-Waist Leggings"),
        ("nylon-elastane", "organic-cotton"),
        ("women", "kids"),
        ("yoga and pilates", "runs and gym sessions", "everyday wear"),
        ("A high waistband stays put when you move.", "Hidden key pocket in the waistband."),
        optional=("quick-dry", "reflective"),
    ),
    "sports-bra": Kind(
        ("Sports Bra",),
        ("nylon-elastane", "recycled-polyester"),
        ("women",),
        ("training sessions", "running", "the gym"),
        ("Removable pads.", "A racerback design frees your shoulders."),
        one_of=("high-support", "medium-support", "low-support"),
    ),
    "dress": Kind(
        ("Summer Dress", "Midi Dress", "Shirt Dress", "Wrap Dress"),
        ("linen", "cotton", "viscose", "organic-cotton"),
        ("women", "kids"),
        ("warm days", "holidays and weddings", "summer evenings"),
        ("Side pockets, of course.", "A tie waist you can adjust.", "Machine washable at 30 °C."),
    ),
    "swim-shorts": Kind(
        ("Swim Shorts", "Board Shorts"),
        ("recycled-polyester", "nylon"),
        ("men", "kids"),
        ("the beach and the pool", "holidays", "surfing"),
        ("A mesh lining and a drawstring waist.", "A zipped back pocket for keys."),
        optional=("quick-dry",),
    ),
    "socks": Kind(
        ("Hiking Socks", "Crew Socks", "Boot Socks"),
        ("merino", "cotton", "alpaca", "recycled-polyester"),
        ("women", "men", "kids", "unisex"),
        ("long days in boots", "everyday wear", "trail running"),
        ("Cushioned under the heel and ball of the foot.", "Sold as a pair.", "Seamless toes prevent blisters."),
        fitted=False,
    ),
    "gloves": Kind(
        ("Gloves", "Mittens", "Liner Gloves"),
        ("merino", "fleece", "leather", "synthetic"),
        ("women", "men", "kids", "unisex"),
        ("cold commutes", "winter walks", "ski touring"),
        ("A clip keeps the pair together.", "Pre-curved fingers for a natural grip."),
        optional=("insulated", "waterproof", "touchscreen"),
        fitted=False,
    ),
    "beanie": Kind(
        ("Beanie", "Bobble Hat", "Rib-Knit Beanie"),
        ("merino", "lambswool", "acrylic", "cashmere", "cotton"),
        ("unisex", "kids", "women", "men"),
        ("cold mornings", "winter walks", "ski days"),
        ("A deep turn-up covers your ears.", "One size fits most."),
        optional=("fleece-lined",),
        fitted=False,
    ),
    "scarf": Kind(
        ("Scarf", "Wrap Scarf", "Ribbed Scarf"),
        ("cashmere", "lambswool", "merino", "cotton", "viscose"),
        ("unisex", "women", "men"),
        ("cold days", "travel", "autumn walks"),
        ("180 × 30 cm with fringed ends.", "Gift boxed."),
        fitted=False,
    ),
    "sun-hat": Kind(
        ("Sun Hat", "Bucket Hat", "Straw Hat"),
        ("cotton", "straw", "nylon"),
        ("women", "men", "kids", "unisex"),
        ("beach days", "summer hikes", "gardening"),
        ("An adjustable chin cord keeps it on in the wind.", "Packs flat into a bag."),
        optional=("wide-brim", "upf50"),
        fitted=False,
    ),
    "belt": Kind(
        ("Belt", "Jeans Belt", "Dress Belt"),
        ("leather", "canvas", "suede"),
        ("men", "women", "unisex"),
        ("jeans and chinos", "everyday wear", "the office"),
        ("A solid brass buckle.", "35 mm wide; cut to size at home.", "Made in Spain."),
        fitted=False,
    ),
    "backpack": Kind(
        ("Hiking Backpack", "Daypack", "Trekking Pack"),
        ("nylon", "recycled-polyester", "canvas"),
        ("unisex", "women", "kids"),
        ("day hikes", "travel and commuting", "hut-to-hut trips"),
        ("A hydration sleeve and side bottle pockets.", "An adjustable back system fits most torso lengths."),
        optional=("rain-cover",),
        one_of=("20l", "30l", "45l"),
        fitted=False,
    ),
    "sleeping-bag": Kind(
        ("Sleeping Bag", "Mummy Sleeping Bag"),
        ("down", "synthetic-fill"),
        ("unisex", "kids"),
        ("camping trips", "backpacking", "festivals"),
        ("Comes with a compression sack.", "A two-way zip opens it for ventilation."),
        one_of=("summer", "3-season", "4-season"),
        gear=True,
    ),
    "tent": Kind(
        ("Backpacking Tent", "Dome Tent", "Tunnel Tent"),
        ("nylon",),
        ("unisex",),
        ("wild camping", "long-distance hikes", "weekend campsites"),
        (
            "Pitches in under five minutes, inner and fly together.",
            "Weighs 1.6 kg packed.",
            "Aluminium poles and a 3000 mm hydrostatic head.",
        ),
        one_of=("one-person", "two-person", "three-person"),
        gear=True,
    ),
}


# (name in a listing, colour family a query can ask for)
COLOURS = (
    ("Black", "black"),
    ("Jet Black", "black"),
    ("Charcoal", "grey"),
    ("Heather Grey", "grey"),
    ("Navy", "blue"),
    ("Slate Blue", "blue"),
    ("Forest Green", "green"),
    ("Olive", "green"),
    ("Oatmeal", "neutral"),
    ("Stone", "neutral"),
    ("Ivory", "neutral"),
    ("Walnut", "brown"),
    ("Chestnut", "brown"),
    ("Tan", "brown"),
    ("Cognac", "brown"),
    ("Rust", "red"),
    ("Berry", "red"),
    ("Mustard", "yellow"),
    ("Sunflower Yellow", "yellow"),
    ("Coral", "pink"),
)


BRANDS = (
    "Fjellmark",
    "Northpeak",
    "Harrow & Pine",
    "Lumen Outdoor",
    "Kestrel",
    "Alder Row",
    "Tidewater",
    "Basalt",
    "Summit Supply Co.",
    "Marlow Knitwear",
    "Cairn",
    "Wren & Hale",
)


KIDS_BRANDS = ("Little Trekker", "Bramble Kids", "Puddle & Pine")


MODELS = (
    "Ridgeline",
    "Halden",
    "Drift",
    "Skye",
    "Tarn",
    "Brecon",
    "Fells",
    "Cirrus",
    "Juniper",
    "Moorland",
    "Torridon",
    "Alta",
    "Vega",
    "Loch",
)


AUDIENCE_WORDS = {"women": "Women's", "men": "Men's", "kids": "Kids'", "unisex": "", "unspecified": ""}


FITS = {
    "women": ("Designed for women; true to size.", "Women's fit — size up if you layer underneath."),
    "men": ("Men's regular fit.", "Designed for men, sizes S–XXL."),
    "kids": (
        "Sized for kids aged 4–12, with a little room to grow.",
        "Kids' sizes 104–164 cm.",
        "Made for children: easy zips and tough seams for the playground.",
    ),
    "unisex": ("Unisex sizing from XS to XL.", "A unisex fit; women may want to size down."),
    "unspecified": (),
}


SHOE_FITS = {
    "women": ("Built on a women's last; EU sizes 36–42.", "Women's fit with a narrower heel."),
    "men": ("Men's sizes EU 40–47.", "Built on a men's last with a roomy toe box."),
    "kids": (
        "Kids' sizes EU 28–38, with a little room to grow.",
        "Made for children, with easy hook-and-loop closures.",
    ),
    "unisex": ("Unisex sizing, EU 36–47.", "A unisex fit; women may want to go half a size down."),
    "unspecified": (),
}


OPENINGS = (
    "A {noun} made for {use}.",
    "This {noun} is built for {use}.",
    "Our best-selling {noun} for {use}.",
    "A dependable {noun} for {use}.",
)


PLURAL_OPENINGS = (
    "{Noun} made for {use}.",
    "These {noun} are built for {use}.",
    "Our best-selling {noun} for {use}.",
    "A dependable pair of {noun} for {use}.",
)


PLURALS = (
    "Boots",
    "Shoes",
    "Runners",
    "Trousers",
    "Pants",
    "Leggings",
    "Tights",
    "Shorts",
    "Socks",
    "Gloves",
    "Mittens",
)


QUERIES = (
    need(
        "q01",
        "wool knit sweater",
        "A knitted pullover sweater (or jumper) made mostly of wool: merino, lambswool, alpaca blends and "
        "cashmere all count. Highly relevant: a wool sweater for anyone. Partially relevant: a wool "
        "cardigan, or a knit sweater in cotton or acrylic. Not relevant: other wool items such as socks, "
        "scarves or beanies.",
        "sweater",
        related="cardigan",
        materials="merino lambswool alpaca cashmere",
    ),
    need(
        "q02",
        "waterproof hiking boots women",
        "Hiking boots for women that are waterproof (a membrane or a stated waterproof construction); "
        "unisex boots count. Highly relevant: waterproof women's or unisex hiking boots. Partially "
        "relevant: women's hiking boots that are not waterproof, waterproof men's hiking boots, or "
        "waterproof women's trail shoes and snow boots. Not relevant: kids' boots, Chelsea boots.",
        "hiking-boots",
        related="trail-shoes snow-boots",
        features="waterproof",
        audiences="women unisex",
    ),
    need(
        "q03",
        "kids rain jacket",
        "A waterproof rain jacket for a child. Highly relevant: kids' rain jackets and rain shells. "
        "Partially relevant: kids' ponchos and softshell jackets, and rain jackets whose listing does not "
        "say who they are for. Not relevant: adult rain jackets, umbrellas, wellies.",
        "rain-jacket",
        related="poncho softshell",
        audiences="kids",
    ),
    need(
        "q04",
        "men's down jacket",
        "A men's (or unisex) insulated jacket filled with down. Highly relevant: men's down jackets and "
        "down puffers. Partially relevant: men's puffers with synthetic fill, women's down jackets. Not "
        "relevant: kids' jackets, fleeces, down sleeping bags.",
        "down-jacket",
        materials="down",
        audiences="men unisex",
    ),
    need(
        "q05",
        "merino base layer",
        "A thermal base layer (top or leggings) in merino wool, worn next to the skin. Highly relevant: "
        "merino base layers for anyone. Partially relevant: base layers in synthetic fabrics, merino "
        "T-shirts. Not relevant: merino socks, sweaters or beanies.",
        "base-layer",
        related="t-shirt",
        materials="merino",
    ),
    need(
        "q06",
        "trail running shoes",
        "Running shoes made for off-road trails (lugged outsole, protective upper). Highly relevant: any "
        "trail running shoe, waterproof or not. Not relevant: hiking boots, socks, road running shoes.",
        "trail-shoes",
    ),
    need(
        "q07",
        "packable rain jacket",
        "A lightweight rain jacket that packs into its own pocket or a small bag, for travel or as an "
        "emergency layer. Highly relevant: rain jackets or shells described as packable. Partially "
        "relevant: rain jackets not said to pack down, packable ponchos. Not relevant: packable down "
        "jackets (not waterproof).",
        "rain-jacket",
        related="poncho",
        features="packable",
    ),
    need(
        "q08",
        "insulated winter gloves",
        "Gloves or mittens with insulation for cold weather. Highly relevant: gloves or mittens described "
        "as insulated. Partially relevant: gloves without insulation (merino, fleece or leather gloves, "
        "liners). Not relevant: hats, scarves.",
        "gloves",
        features="insulated",
    ),
    need(
        "q09",
        "linen summer dress",
        "A dress in linen for warm weather. Highly relevant: linen dresses. Partially relevant: summer "
        "dresses in cotton or viscose. Not relevant: linen scarves, swimwear.",
        "dress",
        materials="linen",
    ),
    need(
        "q10",
        "organic cotton t-shirt",
        "A T-shirt made of certified organic cotton. Highly relevant: tees that state organic cotton. "
        "Partially relevant: T-shirts in another fabric (ordinary cotton, merino, polyester). Not "
        "relevant: other organic cotton garments such as leggings or dresses.",
        "t-shirt",
        materials="organic-cotton",
    ),
    need(
        "q11",
        "kids fleece jacket",
        "A fleece jacket or pullover for a child. Highly relevant: kids' fleece jackets, pullovers and "
        "half-zips. Partially relevant: kids' softshell jackets, and fleeces whose listing does not give "
        "the size range. Not relevant: adult fleeces.",
        "fleece",
        related="softshell",
        audiences="kids",
    ),
    need(
        "q12",
        "waterproof hiking trousers",
        "Trousers for walking in the rain. Highly relevant: hiking trousers described as waterproof. "
        "Partially relevant: hiking trousers that are only quick-drying or water-repellent. Not relevant: "
        "leggings, waterproof jackets.",
        "hiking-pants",
        features="waterproof",
    ),
    need(
        "q13",
        "cashmere scarf",
        "A scarf or wrap made of cashmere. Highly relevant: cashmere scarves. Partially relevant: scarves "
        "in other fine wools (merino, lambswool). Not relevant: cotton or viscose scarves, cashmere "
        "sweaters.",
        "scarf",
        materials="cashmere",
        near_materials="merino lambswool alpaca",
    ),
    need(
        "q14",
        "merino wool beanie",
        "A beanie or knitted hat in merino wool. Highly relevant: merino beanies. Partially relevant: "
        "beanies in other wools (lambswool, alpaca, cashmere). Not relevant: acrylic or cotton beanies, "
        "merino scarves.",
        "beanie",
        materials="merino",
        near_materials="lambswool alpaca cashmere",
    ),
    need(
        "q15",
        "high support sports bra",
        "A sports bra with high support for running and high-impact training. Highly relevant: bras "
        "described as high support. Partially relevant: medium-support bras. Not relevant: light-support "
        "bras, crop tops.",
        "sports-bra",
        features="high-support",
        near_features="medium-support",
    ),
    need(
        "q16",
        "black yoga leggings",
        "Black leggings to wear for yoga. Highly relevant: black leggings or tights. Partially relevant: "
        "leggings in another colour. Not relevant: joggers, shorts.",
        "leggings",
        colours="black",
    ),
    need(
        "q17",
        "brown leather belt",
        "A leather belt in a brown shade (tan, chestnut, walnut, cognac). Highly relevant: brown leather "
        "belts. Partially relevant: leather belts in another colour, brown suede belts. Not relevant: "
        "canvas belts.",
        "belt",
        materials="leather",
        near_materials="suede",
        colours="brown",
    ),
    need(
        "q18",
        "3 season sleeping bag",
        "A sleeping bag for spring-to-autumn camping (comfortable around 0 °C). Highly relevant: bags sold "
        "as 3-season. Partially relevant: 4-season bags (warmer and heavier than needed). Not relevant: "
        "summer bags, tents, mats.",
        "sleeping-bag",
        features="3-season",
        near_features="4-season",
    ),
    need(
        "q19",
        "2 person backpacking tent",
        "A lightweight tent for two people to carry on multi-day hikes. Highly relevant: 2-person tents. "
        "Partially relevant: 3-person tents (roomy but heavier). Not relevant: 1-person tents, sleeping "
        "bags.",
        "tent",
        features="two-person",
        near_features="three-person",
    ),
    need(
        "q20",
        "30l hiking backpack",
        "A hiking backpack of about 30 litres, enough for a long day hike. Highly relevant: packs of 28–32 "
        "litres. Partially relevant: 20 L daypacks and 45 L packs. Not relevant: bum bags, totes, "
        "suitcases.",
        "backpack",
        features="30l",
    ),
    need(
        "q21",
        "kids snow boots",
        "Warm winter boots for a child playing in snow. Highly relevant: kids' snow boots. Partially "
        "relevant: kids' hiking boots, and snow boots whose listing does not give the age range. Not "
        "relevant: adult snow boots, wellies.",
        "snow-boots",
        related="hiking-boots",
        audiences="kids",
    ),
    need(
        "q22",
        "merino hiking socks",
        "Hiking socks made of merino wool (blends with at least half merino count). Highly relevant: "
        "merino hiking or boot socks. Partially relevant: hiking socks in other materials. Not relevant: "
        "base layers, gloves.",
        "socks",
        materials="merino",
    ),
    need(
        "q23",
        "wide brim sun hat",
        "A hat with a brim wide enough to shade the face and neck. Highly relevant: sun hats described as "
        "wide-brimmed. Partially relevant: bucket hats and other sun hats with a narrow brim. Not "
        "relevant: caps, beanies.",
        "sun-hat",
        features="wide-brim",
    ),
    need(
        "q24",
        "suede chelsea boots",
        "Chelsea boots (ankle high, elastic side panels) in suede. Highly relevant: suede Chelsea boots. "
        "Partially relevant: leather Chelsea boots. Not relevant: suede hiking or snow boots.",
        "chelsea-boots",
        materials="suede",
    ),
    need(
        "q25",
        "women's softshell jacket",
        "A softshell jacket (stretchy, wind-resistant) cut for women; unisex counts. Highly relevant: "
        "women's or unisex softshells. Partially relevant: men's softshells, women's fleece or rain "
        "jackets. Not relevant: kids' jackets.",
        "softshell",
        related="fleece rain-jacket",
        audiences="women unisex",
    ),
    need(
        "q26",
        "men's swim shorts",
        "Swim shorts or board shorts for men. Highly relevant: men's swim or board shorts. Partially "
        "relevant: swim shorts whose listing does not say the fit. Not relevant: kids' swim shorts, "
        "running shorts.",
        "swim-shorts",
        audiences="men unisex",
    ),
    need(
        "q27",
        "denim jacket",
        "A jacket made of denim, such as a classic trucker jacket, lined or not, for anyone. Highly "
        "relevant: any denim jacket. Not relevant: denim jeans or shirts, other casual jackets.",
        "denim-jacket",
    ),
    need(
        "q28",
        "rain poncho",
        "A waterproof poncho worn over clothes (and often over a backpack). Highly relevant: rain ponchos. "
        "Partially relevant: rain jackets (same need, different form). Not relevant: umbrellas, waterproof "
        "trousers.",
        "poncho",
        related="rain-jacket",
    ),
)


def _spec(
    rng: random.Random,
    kind: str,
    *,
    audience: str | None = None,
    material: str | None = None,
    colour_family: str | None = None,
    avoid_colours: Iterable[str] = (),
    features: Iterable[str] = (),
    avoid_features: Iterable[str] = (),
) -> Spec:
    k = KINDS[kind]
    if audience is None:
        audience = rng.choice(k.audiences)
        if not k.gear and rng.random() < 0.15:
            audience = "unspecified"  # listings that never say who they are for
    material = material or rng.choice(k.materials)
    colours = [
        name
        for name, fam in COLOURS
        if (colour_family is None or fam == colour_family) and fam not in set(avoid_colours)
    ]
    chosen = set(features)
    avoid = set(avoid_features)
    if k.one_of and not chosen & set(k.one_of):
        chosen.add(rng.choice([f for f in k.one_of if f not in avoid] or list(k.one_of)))
    chosen |= {f for f in k.optional if f not in avoid and rng.random() < 0.35}
    return Spec(kind, audience, material, rng.choice(colours), frozenset(chosen))


def _variants(rng: random.Random, need: Need) -> list[Spec]:
    """Listings written to sit near one query: four that meet it and four that miss one requirement."""
    kinds = sorted(need.kinds)

    def meets(**overrides: Any) -> Spec:
        kind = overrides.pop("kind", rng.choice(kinds))
        k = KINDS[kind]
        audiences = [a for a in k.audiences if not need.audiences or a in need.audiences]
        materials = [m for m in k.materials if not need.materials or m in need.materials]
        args: dict[str, Any] = {
            "audience": rng.choice(audiences or list(k.audiences)),
            "material": rng.choice(materials or list(k.materials)),
            "colour_family": rng.choice(sorted(need.colours)) if need.colours else None,
            "features": need.features,
        }
        args.update(overrides)
        return _spec(rng, kind, **args)

    specs = [meets() for _ in range(4)]
    misses: list[Callable[[], Spec]] = []
    if need.related:
        related = sorted(need.related)
        misses.append(lambda: meets(kind=rng.choice(related)))
    if need.audiences:
        audiences = [
            a for a in ("women", "men", "kids", "unisex") if a not in need.audiences and a in KINDS[kinds[0]].audiences
        ]
        if audiences:
            misses.append(lambda: meets(audience=rng.choice(audiences)))
        if not KINDS[kinds[0]].gear:  # listings that never say who they are for are common
            misses += [lambda: meets(audience="unspecified")] * 2
    if need.materials:
        materials = [m for k in kinds for m in KINDS[k].materials if m not in need.materials]
        if materials:
            misses.append(lambda: meets(material=rng.choice(materials)))
    if need.features:
        near = sorted(need.near_features or ())
        misses.append(lambda: meets(features=near[:1], avoid_features=need.features))
    if need.colours:
        misses.append(lambda: meets(colour_family=None, avoid_colours=need.colours))
    while misses and len(specs) < 8:
        for miss in misses[: 8 - len(specs)]:
            specs.append(miss())
    return specs


def _words(rng: random.Random, spec: Spec) -> tuple[str, str]:
    """A natural-sounding title and 2-4 sentence description for a product."""
    k = KINDS[spec.kind]
    noun = rng.choice(k.nouns)
    brand = rng.choice(KIDS_BRANDS) if spec.audience == "kids" and rng.random() < 0.5 else rng.choice(BRANDS)
    parts = [brand]
    if rng.random() < 0.4:
        parts.append(rng.choice(MODELS))
    if not k.gear:
        parts.append(AUDIENCE_WORDS[spec.audience])
    feature_order = [f for f in FEATURES if f in spec.features]
    title_features = [FEATURES[f].word for f in feature_order if FEATURES[f].word][:2]
    parts.extend(title_features)
    material_word = MATERIALS[spec.material].word
    if material_word and material_word.split()[0].lower() not in noun.lower():
        parts.append(material_word)
    parts.append(noun)
    title = " ".join(p for p in parts if p) + f" – {spec.colour}"

    noun_lc = noun.lower().replace("t-shirt", "T-shirt").replace("chelsea", "Chelsea")
    openings = PLURAL_OPENINGS if noun.endswith(PLURALS) else OPENINGS
    sentences = [rng.choice(openings).format(noun=noun_lc, Noun=noun_lc.capitalize(), use=rng.choice(k.uses))]
    sentences.append(rng.choice(MATERIALS[spec.material].sentences))
    feature_sentences = [rng.choice(FEATURES[f].sentences) for f in feature_order]
    rng.shuffle(feature_sentences)
    sentences.extend(feature_sentences[:2])
    fits = (SHOE_FITS if k.footwear else FITS)[spec.audience]
    if fits and k.fitted and not k.gear and rng.random() < 0.7:
        sentences.append(rng.choice(fits))
    if len(sentences) < 4:
        sentences.append(rng.choice(k.extras))
    if len(sentences) > 4:
        # Keep the opening and the material; drop one of the rest so descriptions stay short.
        del sentences[rng.randrange(2, len(sentences))]
    return title, " ".join(sentences[:4])


# Listings imported from a marketplace with their markup intact, to show that nothing is rendered unescaped.
_IMPORTED = (
    (
        Spec("rain-jacket", "kids", "nylon", "Sunflower Yellow", frozenset({"hooded"})),
        "Puddle & Pine Kids' Rain Jacket – Sunflower Yellow",
        "Imported listing: <b>Bold</b> sunflower yellow so little ones are easy to spot at the school gate. "
        "Fully taped seams and a peaked hood keep the rain out. <script>alert('xss')</script> Sizes 3–10 years.",
    ),
    (
        Spec("trail-shoes", "unisex", "mesh", "Slate Blue", frozenset({"waterproof"})),
        "Kestrel Trail Runner GTX <i>New Season</i> – Slate Blue",
        "Imported listing: <ul><li>Waterproof membrane</li><li>Lugged outsole</li></ul> A trail running shoe "
        "for wet, muddy routes. Unisex sizing.",
    ),
    (
        Spec("belt", "unisex", "leather", "Chestnut", frozenset()),
        "Harrow & Pine Leather Belt – Chestnut",
        'Imported listing: Full-grain leather belt with a solid brass buckle. <img src=x onerror="alert(1)"> '
        "Chestnut brown finish, 35 mm wide.",
    ),
    (
        Spec("sweater", "unspecified", "lambswool", "Oatmeal", frozenset()),
        "Donegal Cable-Knit Jumper – Oatmeal",
        "Imported listing: Hand-knitted in Donegal &amp; finished by hand.<br>Pure lambswool, chunky cable knit.",
    ),
)


_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    # A crude stemmer, as a shop's first search engine would have: boots -> boot, kids' -> kid.
    return [
        t[:-1] if len(t) > 3 and t.endswith("s") and not t.endswith("ss") else t
        for t in _TOKEN.findall(text.lower())
        if len(t) > 1
    ]


def _scores(
    rng: random.Random,
    need: Need,
    products: list[Product],
    verdicts: list[Verdict],
    lexical: list[float],
    popularity: list[float],
) -> dict[str, list[float]]:
    """The three systems' scores of every product for a query (the generator ranks the top 50-100).

    Their quality differs for real: dense-v2 sees the hidden relevance through some noise (and, like many
    embedding models, cares more about the kind of product than about its audience or material), bm25 sees
    only the words (with a small popularity prior so that it always fills its list), random-baseline nothing.
    """
    top = max(lexical) or 1.0
    return {
        "bm25": [round(s + 0.05 * pop, 4) for s, pop in zip(lexical, popularity, strict=True)],
        "dense-v2": [
            round(
                0.3
                + 0.09 * v.grade
                + 0.12 * (p.kind in need.kinds)
                + 0.05 * (p.kind in need.related)
                + 0.1 * s / top
                + rng.gauss(0, 0.07),
                4,
            )
            for p, v, s in zip(products, verdicts, lexical, strict=True)
        ],
        "random-baseline": [round(rng.random(), 3) for _ in products],
    }


# Query traffic tiers as a shop's search logs would give them: the first queries are the most searched.
TIERS = (("head", 9), ("torso", 18), ("tail", len(QUERIES)))


def department(need: Need) -> str:
    kind = KINDS[sorted(need.kinds)[0]]
    return "footwear" if kind.footwear else "gear" if kind.gear else "clothing"


def brand_of(title: str) -> str:
    """The brand a title starts with (the catalogue's brands; an imported listing's first word otherwise)."""
    known = [b for b in (*BRANDS, *KIDS_BRANDS) if title.startswith(b + " ")]
    return max(known, key=len) if known else title.split()[0]


def _attributes(p: Product) -> dict:
    return {"brand": brand_of(p.title), "category": p.kind, "colour": p.colour_family, "audience": p.audience}


VOCABULARY = Vocabulary(
    queries=QUERIES,
    kinds=tuple(KINDS),
    colours=dict(COLOURS),
    listings=280,
    numbers=range(10000, 99999),
    docid="p{number}",
    url="https://shop.example/p/{number}",
    imported=_IMPORTED,
    spec=_spec,
    variants=_variants,
    words=_words,
    tokens=_tokens,
    scores=_scores,
    tiers=TIERS,
    department=department,
    attributes=_attributes,
)


@cache
def demo_data(seed: int = SEED) -> DemoData:
    """The demo's products, hidden relevance and runs, the same for the same seed."""
    return generate(VOCABULARY, seed)


PROFILES = {
    "alice": Profile(slip=0.14, lean=0.0, unsure=0.7, pace=11.0),  # careful
    "bob": Profile(slip=0.22, lean=0.6, unsure=0.4, pace=8.0),  # quick and lenient
    "carol": Profile(slip=0.2, lean=-0.6, unsure=0.6, pace=15.0),  # slow and strict
}


UNCLEAR_NOTES: dict[str, tuple[str, ...]] = {
    "kids": ("Can't tell if this is for kids — listing doesn't say.", "No size range given: adult or kids?"),
    "women": ("Listing doesn't say if this is a women's or a unisex fit.", "No fit info; could be men's only."),
    "men": ("Fit not stated — might be a women's cut.", "Can't tell whose fit this is from the text."),
}


SUBSTITUTE_UNSURE = (
    "Not sure a substitute like this counts here; the description is vague about it.",
    "Would a shopper accept this instead? Leaving it to the lead.",
)


IMPORTED_UNSURE = (
    "Imported listing full of markup; hard to tell what exactly is being sold.",
    "Listing text looks cut off after the markup.",
)


MISS_NOTES = {
    "audience": ("Right product, wrong audience.", "Fit is for a different audience than asked."),
    "material": ("Right product, other material.", "Material doesn't match the query."),
    "feature": ("Doesn't say it has what the query asks for.", "Missing the key feature."),
    "colour": ("Right item, wrong colour.",),
    "kind": ("Close substitute, not the product asked for.",),
}


REASONS = {
    "audience": "Made for a different audience than the query asks for",
    "material": "Not the material the query asks for",
    "feature": "Lacks the feature the query asks for",
    "colour": "Not the colour the query asks for",
    "kind": "A substitute, not the product asked for",
}


RECHECK_NOTE = "Re-read the query description and changed my grade."


def adjudication_note(misses: tuple[str, ...], grade: int) -> str:
    """The lead's note on a settled dispute."""
    reason = REASONS[misses[0]] if misses else "Meets every requirement of the query"
    return f"{reason}: {str(SCALE[grade]['name']).lower()}, as the query description says."


WORDS = Words(
    unclear=UNCLEAR_NOTES,
    imported=IMPORTED_UNSURE,
    substitute=SUBSTITUTE_UNSURE,
    misses=MISS_NOTES,
    imported_prefix="Imported listing",
    resolved=(
        "Checked the brand's size chart: that settles who it is for.",
        "Found the original listing on the brand's site; graded from that.",
        "The description lists this substitute as partially relevant.",
    ),
)
