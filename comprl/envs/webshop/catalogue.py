"""The WebShop-small catalogue: 1,000 synthetic products and their shopping goals, made from one seed.

The catalogue ships in ``data/webshop/`` (``products.jsonl`` and ``goals.jsonl``); this module is how it was
made and how it is read. Regenerate it with::

    python -m comprl.envs.webshop.catalogue            # writes data/webshop/ from seed 233

Generation uses only ``random.Random`` (whose streams Python keeps stable), so the same seed gives the same
bytes on every platform; a test checks that the shipped files equal a fresh generation.

What is made:

- Products: 5 categories (beauty, electronics, fashion, grocery, home & garden), 8 product types each, 25
  products per type. Every product has an ASIN-like id, a brand, an Amazon-style title, a category path, a
  description, bullet features, 3 to 5 attributes (e.g. "vegan", "easy to clean") drawn with per-attribute
  popularity weights, option groups (colour, size, flavor, ...) with a few values each (none that
  WebShop's colour normalisation turns into a colour word it does not contain, which could never be
  matched), one price, a star rating and short reviews. Attribute text always appears somewhere in the
  product's own text, as in the original, whose attributes were mined from it.
- Goals: two per product, each naming the target product, 1 to 3 of its attributes, one value for most of its
  option groups and a price cap (a multiple of ten above the price), written as a lower-case shopping
  instruction ("i need a long lasting vegan lipstick in red, and price lower than 30.00 dollars").
  Each goal carries a sampling weight: the mean, over its attributes, of 1 / (number of goals naming that
  attribute), so goals with rare attributes are drawn more often (the original WebShop's goal weights).
- Split: the goals are shuffled with the seed; the first `TEST_GOALS` form the test split, the rest train.
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_SEED = 233
"""The seed of the shipped catalogue (the original WebShop shuffles its goals with random.seed(233))."""

PRODUCTS_PER_TYPE = 25
GOALS_PER_PRODUCT = 2
TEST_GOALS = 500
"""Size of the test split (the original's convention: the first 500 shuffled goals are the test goals)."""

DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "webshop"
"""Where the shipped catalogue lives: ``data/webshop/`` at the repository root."""
PRODUCTS_FILE = "products.jsonl"
GOALS_FILE = "goals.jsonl"


@dataclass(frozen=True)
class Review:
    """One customer review."""

    stars: int
    """1 to 5."""
    title: str
    body: str


@dataclass(frozen=True)
class Product:
    """One catalogue product."""

    asin: str
    """Ten upper-case characters starting with "B0", as Amazon's ids do; clicked (in any case) on result pages."""
    category: str
    """One of the five categories, e.g. "beauty"."""
    path: tuple[str, ...]
    """Category path from the store's top department down to the product type ("... > makeup > lipstick")."""
    product_type: str
    """The product-type noun phrase, e.g. "lipstick"."""
    query: str
    """The search term the product was "collected" under (the original's scraping query): its product type."""
    brand: str
    title: str
    title_nouns: tuple[str, ...]
    """The nouns of the title, known by construction (brand, product type, nouns of the title's ending);
    the type reward compares them, where the original tags the title's words with spaCy."""
    price: float
    rating: float
    rating_count: int
    description: str
    features: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Mapping[str, tuple[str, ...]]
    """Option group -> values offered, in page order; every value is unique within the product."""
    reviews: tuple[Review, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples as lists)."""
        return {
            "asin": self.asin,
            "category": self.category,
            "path": list(self.path),
            "product_type": self.product_type,
            "query": self.query,
            "brand": self.brand,
            "title": self.title,
            "title_nouns": list(self.title_nouns),
            "price": self.price,
            "rating": self.rating,
            "rating_count": self.rating_count,
            "description": self.description,
            "features": list(self.features),
            "attributes": list(self.attributes),
            "options": {group: list(values) for group, values in self.options.items()},
            "reviews": [{"stars": r.stars, "title": r.title, "body": r.body} for r in self.reviews],
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Product:
        """The inverse of `to_json`."""
        return cls(
            asin=record["asin"],
            category=record["category"],
            path=tuple(record["path"]),
            product_type=record["product_type"],
            query=record["query"],
            brand=record["brand"],
            title=record["title"],
            title_nouns=tuple(record["title_nouns"]),
            price=float(record["price"]),
            rating=float(record["rating"]),
            rating_count=int(record["rating_count"]),
            description=record["description"],
            features=tuple(record["features"]),
            attributes=tuple(record["attributes"]),
            options={group: tuple(values) for group, values in record["options"].items()},
            reviews=tuple(Review(r["stars"], r["title"], r["body"]) for r in record["reviews"]),
        )


@dataclass(frozen=True)
class Goal:
    """One shopping task: buy `asin` (or any product as good) with these attributes and options, under a cap."""

    goal_id: int
    """Position in ``goals.jsonl``."""
    split: str
    """"train" or "test"."""
    asin: str
    """The product the goal was written from."""
    instruction: str
    attributes: tuple[str, ...]
    options: Mapping[str, str]
    """Option group -> the value wanted."""
    price_upper: float
    weight: float
    """Training sampling weight (rarer attributes weigh more; see the module docstring)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "goal_id": self.goal_id,
            "split": self.split,
            "asin": self.asin,
            "instruction": self.instruction,
            "attributes": list(self.attributes),
            "options": dict(self.options),
            "price_upper": self.price_upper,
            "weight": self.weight,
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Goal:
        """The inverse of `to_json`."""
        return cls(
            goal_id=int(record["goal_id"]),
            split=record["split"],
            asin=record["asin"],
            instruction=record["instruction"],
            attributes=tuple(record["attributes"]),
            options=dict(record["options"]),
            price_upper=float(record["price_upper"]),
            weight=float(record["weight"]),
        )


# ---------------------------------------------------------------------------------------------------------
# Vocabulary. Every word is ASCII (observations are printable ASCII). Brands are invented.


@dataclass(frozen=True)
class _OptionGroup:
    name: str
    values: tuple[str, ...]
    phrases: tuple[str, ...]
    """Ways an instruction asks for a value ("in {value}")."""


@dataclass(frozen=True)
class _ProductType:
    noun: str
    plural: bool
    path: tuple[str, ...]
    """Category path below the department."""
    descriptors: tuple[str, ...]
    """Title adjectives ("matte", "slim")."""
    tails: tuple[str, ...]
    """Endings of titles ("Lip Color for Women"); nouns are capitalised here, other words are not."""
    attributes: tuple[str, ...]
    """Type-specific attributes (popularity weight 2 each)."""
    options: tuple[_OptionGroup, ...]
    price: tuple[float, float]
    details: tuple[str, ...]
    """Description sentences about this kind of product."""
    department: str = ""
    """The store department at the top of the path, when not the category's."""


@dataclass(frozen=True)
class _Category:
    name: str
    department: str
    """Top of the category path of its types (unless a type names its own)."""
    brands: tuple[str, ...]
    attributes: Mapping[str, int]
    """Category-wide attributes and their popularity weights."""
    types: tuple[_ProductType, ...]


def _group(name: str, *values: str) -> _OptionGroup:
    phrases = {
        "color": ("in {v}", "in {v} color", "in the color {v}"),
        "size": ("in size {v}", "in {v} size", "in a size of {v}"),
        "flavor": ("in {v} flavor", "with {v} flavor", "in the {v} flavor"),
        "scent": ("with {v} scent", "in the {v} scent", "in {v} scent"),
        "style": ("in {v} style", "in the {v} style"),
        "material": ("made of {v}", "in {v}"),
    }[name]
    return _OptionGroup(name, values, phrases)


_CLOTHING_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")

_CATEGORIES: tuple[_Category, ...] = (
    _Category(
        "beauty",
        "beauty & personal care",
        ("Lumera", "Velvessa", "PureGlow", "Bloomi", "Dermalux", "Rosefield", "Silkara", "Aurelle", "Glowpeak"),
        {"cruelty free": 3, "vegan": 3, "long lasting": 3, "paraben free": 2, "natural ingredients": 2,
         "easy to use": 2, "dermatologist tested": 1, "travel size": 1, "hypoallergenic": 1, "non toxic": 1},
        (
            _ProductType(
                "lipstick", False, ("makeup", "lips", "lipstick"),
                ("matte", "creamy", "satin", "liquid", "moisturizing"),
                ("Lip Color for Women", "full Coverage Lip Makeup", "smooth Lip Stick"),
                ("highly pigmented", "waterproof", "smudge proof"),
                (_group("color", "red", "nude", "pink", "berry", "coral", "plum", "brown"),
                 _group("size", "1 count", "2 pack", "3 pack")),
                (6, 28),
                ("One swipe gives rich, even color.", "The formula glides on without tugging.",
                 "It keeps lips comfortable for hours."),
            ),
            _ProductType(
                "mascara", False, ("makeup", "eyes", "mascara"),
                ("volumizing", "lengthening", "curling", "defining"),
                ("for Lashes", "Eye Makeup for natural Look", "with Precision Brush"),
                ("waterproof", "smudge proof", "clump free"),
                (_group("color", "black", "brown", "navy", "plum"),),
                (5, 25),
                ("The shaped brush reaches every lash.", "It builds volume without flaking.",
                 "Removes easily with warm water and cleanser."),
            ),
            _ProductType(
                "nail polish", False, ("foot, hand & nail care", "nail art & polish", "nail polish"),
                ("glossy", "gel effect", "shimmer", "classic"),
                ("Nail Lacquer", "Manicure Color", "Salon Finish Nail Color"),
                ("quick dry", "chip resistant", "non toxic"),
                (_group("color", "red", "pink", "nude", "coral", "purple", "white", "gold"),
                 _group("size", "0.5 fl oz", "2 pack", "6 pack")),
                (4, 20),
                ("Two thin coats give full coverage.", "The wide brush makes even strokes easy.",
                 "Wears for days without chipping."),
            ),
            _ProductType(
                "shampoo", False, ("hair care", "shampoo & conditioner", "shampoo"),
                ("hydrating", "clarifying", "volumizing", "repairing", "smoothing"),
                ("for Women and Men", "daily Hair Wash", "for all Hair Types"),
                ("sulfate free", "color safe", "dry hair", "hair growth"),
                (_group("scent", "coconut", "lavender", "citrus", "mint", "unscented", "rose"),
                 _group("size", "8 fl oz", "12 fl oz", "16 fl oz", "33.8 fl oz")),
                (7, 35),
                ("A rich lather cleans without stripping natural oils.", "Leaves hair soft and easy to comb.",
                 "Gentle enough for daily washing."),
            ),
            _ProductType(
                "face moisturizer", False, ("skin care", "face", "moisturizers"),
                ("lightweight", "daily", "hydrating", "overnight", "gel"),
                ("Face Cream", "facial Lotion for Women and Men", "Skin Care Cream"),
                ("sensitive skin", "oil free", "anti aging", "hyaluronic acid", "spf 30"),
                (_group("scent", "unscented", "aloe", "green tea", "rose"),
                 _group("size", "1.7 oz", "2.5 oz", "3.4 oz")),
                (10, 45),
                ("Absorbs quickly and leaves no greasy film.", "Keeps skin hydrated from morning to night.",
                 "Works well under makeup."),
            ),
            _ProductType(
                "body lotion", False, ("skin care", "body", "lotions"),
                ("nourishing", "daily", "whipped", "intensive", "light"),
                ("Body Cream", "moisturizing Skin Lotion", "Hand and Body Moisturizer"),
                ("dry skin", "shea butter", "non greasy"),
                (_group("scent", "coconut", "vanilla", "lavender", "unscented", "cucumber"),
                 _group("size", "8.5 fl oz", "16 fl oz", "32 fl oz")),
                (6, 25),
                ("Smooths rough elbows and knees.", "Sinks in fast so you can dress right away.",
                 "A little goes a long way."),
            ),
            _ProductType(
                "makeup brush set", False, ("tools & accessories", "makeup brushes & tools", "brush sets"),
                ("professional", "soft", "premium", "complete"),
                ("Foundation blending Brushes", "Face and Eye Makeup Brushes", "cosmetic Brush Kit"),
                ("synthetic hair", "easy to clean", "travel case"),
                (_group("color", "rose gold", "black", "pink", "white", "purple"),
                 _group("size", "5 piece", "12 piece", "16 piece")),
                (8, 35),
                ("Dense bristles blend powder and cream evenly.", "Each brush has a sturdy handle.",
                 "Covers face, eyes and brows."),
            ),
            _ProductType(
                "perfume", False, ("fragrance", "women's", "eau de parfum"),
                ("elegant", "fresh", "signature", "classic"),
                ("Eau de Parfum Spray for Women", "Fragrance Mist", "Perfume Spray"),
                ("gift set", "alcohol free", "refillable"),
                (_group("scent", "floral", "vanilla", "citrus", "woody", "fresh"),
                 _group("size", "1 fl oz", "1.7 fl oz", "3.4 fl oz")),
                (20, 90),
                ("Opens bright and settles into a warm base.", "A few sprays last all day.",
                 "Comes in a glass bottle with a fine mist sprayer."),
            ),
        ),
    ),
    _Category(
        "electronics",
        "electronics",
        ("Voltix", "Nexora", "Zentrix", "Kovo", "Lumatek", "Auralink", "Sonique", "Gridway", "Portiva"),
        {"easy to use": 3, "lightweight": 2, "high speed": 2, "heavy duty": 1, "compact design": 2,
         "plug and play": 1, "easy to install": 2, "durable": 2},
        (
            _ProductType(
                "charging cable", False, ("cell phones & accessories", "accessories", "cables"),
                ("braided", "durable", "fast", "extra long"),
                ("USB Cord for Phones", "Phone Charger Cord", "Data Sync Cord"),
                ("fast charging", "usb c", "nylon braided"),
                (_group("color", "black", "white", "red", "blue", "gray"),
                 _group("size", "3 ft", "6 ft", "10 ft")),
                (5, 20),
                ("The reinforced joints survive thousands of bends.", "Transfers data as well as power.",
                 "Works with phones, tablets and laptops."),
            ),
            _ProductType(
                "wireless earbuds", True, ("headphones, earbuds & accessories", "earbud headphones"),
                ("true wireless", "sport", "mini", "premium"),
                ("with Charging Case", "in Ear Headphones", "stereo Earphones with Mic"),
                ("noise cancelling", "bluetooth", "water resistant", "long battery life", "touch control"),
                (_group("color", "black", "white", "navy", "rose gold"),),
                (20, 120),
                ("The case adds several full charges.", "Pairs once and reconnects automatically.",
                 "Soft tips seal out outside noise."),
            ),
            _ProductType(
                "phone case", False, ("cell phones & accessories", "cases, holsters & sleeves", "basic cases"),
                ("slim", "rugged", "clear", "magnetic"),
                ("protective Phone Cover", "shockproof Bumper Cover", "thin Phone Cover"),
                ("shockproof", "anti scratch", "wireless charging compatible"),
                (_group("color", "clear", "black", "blue", "purple", "green", "pink"),
                 _group("size", "iphone 14", "iphone 15", "iphone 15 pro", "galaxy s23")),
                (6, 30),
                ("Raised edges protect the screen and camera.", "The grip keeps it from slipping.",
                 "Precise cutouts leave every port open."),
            ),
            _ProductType(
                "wall charger", False, ("cell phones & accessories", "chargers & power adapters", "wall chargers"),
                ("dual port", "mini", "compact", "foldable"),
                ("USB Power Adapter", "fast Charger Block", "Phone Charger Plug"),
                ("fast charging", "usb c", "foldable plug"),
                (_group("color", "white", "black"),
                 _group("size", "20w", "30w", "65w")),
                (9, 45),
                ("Charges a phone to half in about half an hour.", "Smart chips protect against overheating.",
                 "Small enough for a pocket."),
            ),
            _ProductType(
                "bluetooth speaker", False, ("portable audio & video", "portable bluetooth speakers"),
                ("portable", "outdoor", "mini", "party"),
                ("with deep Bass", "wireless stereo Sound Box", "for Home and Travel"),
                ("waterproof", "long battery life", "deep bass", "built in microphone"),
                (_group("color", "black", "blue", "red", "teal", "gray"),),
                (20, 90),
                ("Fills a room with clear sound.", "Pairs two speakers for stereo.",
                 "A strap makes it easy to carry."),
            ),
            _ProductType(
                "computer mouse", False, ("computers & accessories", "keyboards, mice & accessories", "mice"),
                ("wireless", "ergonomic", "silent", "slim"),
                ("for Laptop and PC", "optical Mouse with USB Receiver", "cordless Mouse"),
                ("ergonomic design", "silent click", "rechargeable"),
                (_group("color", "black", "white", "gray", "pink"),
                 _group("style", "2.4g receiver", "bt 5.0", "dual mode")),
                (8, 40),
                ("Tracks smoothly on most surfaces.", "The curved shape supports the hand.",
                 "Sleeps automatically to save power."),
            ),
            _ProductType(
                "smart watch", False, ("wearable technology", "smartwatches"),
                ("fitness", "sport", "slim", "classic"),
                ("Fitness Tracker for Women and Men", "Activity Tracker with Touch Screen", "Health Watch"),
                ("heart rate monitor", "water resistant", "long battery life", "sleep tracking"),
                (_group("color", "black", "silver", "rose gold", "blue"),
                 _group("size", "41mm", "45mm")),
                (30, 150),
                ("Tracks steps, heart rate and sleep.", "Shows messages and calls from your phone.",
                 "The band swaps without tools."),
            ),
            _ProductType(
                "webcam", False, ("computers & accessories", "computer accessories & peripherals", "webcams"),
                ("hd", "streaming", "wide angle", "compact"),
                ("for Video Calls", "USB Computer Camera", "for Laptop and Desktop"),
                ("high definition", "built in microphone", "auto focus"),
                (_group("size", "1080p", "2k", "4k"),),
                (20, 80),
                ("Clips onto a monitor or stands on a desk.", "Adjusts to low light by itself.",
                 "A privacy cover slides over the lens."),
            ),
        ),
    ),
    _Category(
        "fashion",
        "clothing, shoes & jewelry",
        ("Northlane", "Solstice", "Marlowe", "Tidewell", "Urbane", "Kestrel", "Fernway", "Halden", "Bellamy"),
        {"machine washable": 3, "soft material": 2, "lightweight": 2, "breathable": 2, "comfortable fit": 2,
         "high quality": 1, "everyday wear": 1},
        (
            _ProductType(
                "t-shirt", False, ("men", "clothing", "shirts", "t-shirts"),
                ("classic", "basic", "vintage", "athletic"),
                ("for Men", "casual Cotton Tee", "short Sleeve Top"),
                ("short sleeve", "cotton", "crew neck", "moisture wicking"),
                (_group("color", "black", "white", "navy", "heather gray", "olive", "red"),
                 _group("size", *_CLOTHING_SIZES)),
                (8, 30),
                ("Cut for an easy fit through the chest.", "The collar keeps its shape wash after wash.",
                 "Pairs with jeans or shorts."),
            ),
            _ProductType(
                "jeans", True, ("women", "clothing", "jeans"),
                ("skinny", "straight leg", "bootcut", "mom"),
                ("for Women", "Denim Pants", "stretch Denim Trousers"),
                ("high waist", "stretch fabric", "button closure"),
                (_group("color", "indigo", "stone", "black", "charcoal"),
                 _group("size", "24", "26", "28", "30", "32")),
                (20, 60),
                ("The stretch denim moves with you.", "Five pockets hold the essentials.",
                 "Keeps its color after many washes."),
            ),
            _ProductType(
                "running shoes", True, ("men", "shoes", "athletic", "running"),
                ("lightweight", "cushioned", "trail", "road"),
                ("for Men", "athletic Sneakers", "Walking Tennis Sneakers"),
                ("non slip", "rubber sole", "memory foam", "arch support"),
                (_group("color", "black", "gray", "navy", "blue", "white"),
                 _group("size", "7", "8", "9", "10", "11", "12")),
                (30, 110),
                ("The knit upper keeps feet cool.", "A grippy outsole holds wet pavement.",
                 "Springy foam softens every stride."),
            ),
            _ProductType(
                "hoodie", False, ("women", "clothing", "fashion hoodies & sweatshirts"),
                ("oversized", "cropped", "zip up", "pullover"),
                ("for Women", "casual Sweatshirt with Pocket", "hooded Pullover Top"),
                ("long sleeve", "fleece lined", "drawstring closure"),
                (_group("color", "black", "gray", "pink", "green", "burgundy"),
                 _group("size", *_CLOTHING_SIZES[:5])),
                (18, 50),
                ("Brushed fleece inside keeps you warm.", "A roomy front pocket holds your phone.",
                 "Ribbed cuffs hold the sleeves in place."),
            ),
            _ProductType(
                "dress", False, ("women", "clothing", "dresses"),
                ("floral", "wrap", "maxi", "casual"),
                ("for Women", "Summer Sundress", "flowy midi Dress"),
                ("short sleeve", "v neck", "elastic waist"),
                (_group("color", "black", "floral print", "navy", "red", "green"),
                 _group("size", *_CLOTHING_SIZES[:5])),
                (20, 60),
                ("Drapes lightly and moves with you.", "Dress it up or down.",
                 "A lined skirt keeps it from being see-through."),
            ),
            _ProductType(
                "leggings", True, ("women", "clothing", "active", "leggings"),
                ("yoga", "workout", "seamless", "athletic"),
                ("for Women", "Yoga Pants", "Workout Tights"),
                ("high waist", "tummy control", "moisture wicking"),
                (_group("color", "black", "navy", "gray", "wine red"),
                 _group("size", *_CLOTHING_SIZES[:5])),
                (12, 35),
                ("The four way stretch fabric moves with you.", "A wide waistband stays put.",
                 "Opaque even in deep squats."),
            ),
            _ProductType(
                "baseball cap", False, ("men", "accessories", "hats & caps", "baseball caps"),
                ("classic", "washed", "low profile", "vintage"),
                ("for Men and Women", "Dad Hat", "Sun Hat"),
                ("adjustable strap", "cotton", "sun protection"),
                (_group("color", "black", "khaki", "navy", "red", "white"),),
                (8, 25),
                ("A curved brim shades the eyes.", "Soft cotton twill feels worn in from day one.",
                 "The strap fits most heads."),
            ),
            _ProductType(
                "socks", True, ("men", "clothing", "socks & hosiery", "athletic socks"),
                ("athletic", "crew", "ankle", "cushioned"),
                ("for Men", "Sport Socks", "Running Socks"),
                ("cushioned sole", "moisture wicking", "arch support"),
                (_group("color", "black", "white", "gray", "assorted"),
                 _group("style", "6 pairs", "12 pairs")),
                (8, 25),
                ("A padded sole eases long days on your feet.", "The cuff stays up without pinching.",
                 "Reinforced heel and toe last longer."),
            ),
        ),
    ),
    _Category(
        "grocery",
        "grocery & gourmet food",
        ("Harvestly", "Goldacre", "Meadowbrook", "Sunvale", "Oakridge", "Greenleaf", "Brightfield", "Kindroot"),
        {"gluten free": 3, "non gmo": 3, "usda organic": 2, "kosher certified": 2, "natural ingredients": 2,
         "low calorie": 1, "sugar free": 1, "keto friendly": 1, "dairy free": 1, "plant based": 1},
        (
            _ProductType(
                "crackers", True, ("snack foods", "crackers"),
                ("crispy", "thin", "artisan", "baked"),
                ("Snack Crackers", "crunchy Snack", "Party Crackers"),
                ("whole grain", "low sodium", "individually wrapped"),
                (_group("flavor", "sea salt", "cheddar", "garden herb", "black pepper", "original"),
                 _group("size", "4.25 ounce (pack of 1)", "4.25 ounce (pack of 6)", "8 ounce (pack of 2)")),
                (3, 25),
                ("Crunchy and light, good with cheese or dips.", "Baked in small batches.",
                 "A handy snack for lunch boxes."),
            ),
            _ProductType(
                "ground coffee", False, ("beverages", "coffee, tea & cocoa", "coffee", "ground coffee"),
                ("smooth", "bold", "rich", "signature"),
                ("Arabica Coffee", "Drip Coffee", "Coffee Grounds"),
                ("fair trade", "arabica beans", "decaf"),
                (_group("flavor", "medium roast", "dark roast", "french vanilla", "hazelnut", "breakfast blend"),
                 _group("size", "12 ounce", "24 ounce", "2 pound")),
                (7, 30),
                ("Roasted in small batches for a full body.", "Brews well in drip machines and pour overs.",
                 "Notes of cocoa and toasted nuts."),
            ),
            _ProductType(
                "protein bars", True, ("snack foods", "bars", "protein bars"),
                ("chewy", "crunchy", "soft baked", "layered"),
                ("Snack Bars", "Meal Replacement Bars", "Energy Bars"),
                ("high protein", "low sugar", "individually wrapped"),
                (_group("flavor", "chocolate peanut butter", "cookie dough", "vanilla almond", "salted caramel"),
                 _group("size", "12 count", "24 count")),
                (12, 40),
                ("Each bar packs a filling snack.", "Easy to toss in a gym bag.",
                 "Made without artificial colors."),
            ),
            _ProductType(
                "green tea", False, ("beverages", "coffee, tea & cocoa", "tea", "green tea"),
                ("premium", "loose leaf style", "classic", "pure"),
                ("Tea Bags", "herbal Tea Blend", "hot or iced Tea"),
                ("antioxidant rich", "caffeinated", "compostable bags"),
                (_group("flavor", "jasmine", "mint", "lemon", "original", "honey ginger"),
                 _group("size", "20 count", "40 count", "100 count")),
                (4, 20),
                ("Steeps to a clean, grassy cup.", "Good hot or over ice.",
                 "Each bag is sealed for freshness."),
            ),
            _ProductType(
                "olive oil", False, ("pantry staples", "cooking oils", "olive oil"),
                ("extra virgin", "mild", "robust", "first harvest"),
                ("for Cooking and Salads", "Cooking Oil", "in Glass Bottle"),
                ("cold pressed", "single origin", "glass bottle"),
                (_group("flavor", "classic", "garlic infused", "lemon infused", "basil infused"),
                 _group("size", "16.9 fl oz", "25.3 fl oz", "34 fl oz")),
                (9, 35),
                ("Fruity with a peppery finish.", "Good for dressings and gentle sauteing.",
                 "Pressed within hours of harvest."),
            ),
            _ProductType(
                "mixed nuts", True, ("snack foods", "nuts & seeds", "mixed nuts"),
                ("deluxe", "roasted", "premium", "classic"),
                ("Snack Mix", "Nut Assortment", "Party Snack"),
                ("resealable bag", "high protein", "no shells"),
                (_group("flavor", "low sodium", "unsalted", "honey roasted", "smoked"),
                 _group("size", "16 ounce", "30 ounce", "40 ounce")),
                (8, 30),
                ("Cashews, almonds, pecans and more.", "Roasted for a deep crunch.",
                 "A healthy snack for work or travel."),
            ),
            _ProductType(
                "granola", False, ("breakfast foods", "cereals", "granola"),
                ("crunchy", "clustered", "ancient grain", "homestyle"),
                ("Breakfast Cereal", "Granola Clusters", "Yogurt Topping"),
                ("whole grain", "low sugar", "high fiber"),
                (_group("flavor", "honey almond", "dark chocolate", "strawberry", "coconut"),
                 _group("size", "11 ounce", "12 ounce (pack of 3)")),
                (5, 25),
                ("Big clusters with toasted oats.", "Great with milk or yogurt.",
                 "Sweetened lightly with honey."),
            ),
            _ProductType(
                "pasta sauce", False, ("pantry staples", "sauces", "pasta sauces"),
                ("classic", "chunky", "slow simmered", "homestyle"),
                ("Tomato Sauce", "Marinara Jar", "italian Cooking Sauce"),
                ("no sugar added", "low sodium", "vegetarian"),
                (_group("flavor", "marinara", "tomato basil", "roasted garlic", "arrabbiata"),
                 _group("size", "24 ounce", "24 ounce (pack of 2)", "32 ounce")),
                (4, 20),
                ("Made with ripe tomatoes and olive oil.", "Simmered slowly for a rich taste.",
                 "Ready to heat and serve."),
            ),
        ),
    ),
    _Category(
        "home & garden",
        "home & kitchen",
        ("Hearthwell", "Nestora", "Oakhaven", "Casabel", "Timbercraft", "Linenly", "Evergrove", "Stillwater"),
        {"easy to clean": 3, "easy to assemble": 2, "heavy duty": 2, "space saving": 1, "eco friendly": 1,
         "high quality": 1, "durable": 2},
        (
            _ProductType(
                "coffee mug", False, ("kitchen & dining", "dining & entertaining", "drinkware", "mugs"),
                ("ceramic", "stoneware", "large", "classic"),
                ("Tea Cup", "Coffee Cup for Home and Office", "Latte Mug"),
                ("dishwasher safe", "microwave safe", "lead free"),
                (_group("color", "white", "black", "sage green", "blue", "terracotta"),
                 _group("size", "12 oz", "16 oz", "20 oz")),
                (8, 35),
                ("A wide handle fits the whole hand.", "Keeps coffee hot a little longer.",
                 "The glaze resists stains."),
            ),
            _ProductType(
                "bed sheet set", False, ("bedding", "sheets & pillowcases", "sheet & pillowcase sets"),
                ("soft", "luxury", "cooling", "brushed"),
                ("with Pillowcases", "Bedding Sheets", "4 Piece Bed Set"),
                ("deep pocket", "wrinkle free", "cooling"),
                (_group("color", "white", "gray", "navy", "sage", "blush pink", "beige"),
                 _group("size", "twin", "full", "queen", "king")),
                (20, 80),
                ("Deep pockets hold thick mattresses.", "Soft from the first night.",
                 "Includes a flat sheet, a fitted sheet and pillowcases."),
            ),
            _ProductType(
                "throw pillow covers", True, ("home decor", "decorative pillows", "throw pillow covers"),
                ("decorative", "boho", "modern", "farmhouse"),
                ("for Couch and Sofa", "Cushion Cases Set of 2", "square Pillow Cases"),
                ("living room", "hidden zipper", "velvet"),
                (_group("color", "beige", "gray", "navy", "mustard yellow", "emerald green"),
                 _group("size", "18 x 18 inch", "20 x 20 inch", "12 x 20 inch")),
                (8, 25),
                ("A hidden zipper keeps the look clean.", "Brightens a sofa or bed in minutes.",
                 "Inserts are not included."),
            ),
            _ProductType(
                "storage basket", False, ("storage & organization", "baskets, bins & containers", "baskets"),
                ("woven", "collapsible", "large", "rectangular"),
                ("for Shelves", "Closet Organizer Bin", "Toy and Blanket Storage"),
                ("foldable", "with handles", "cotton rope"),
                (_group("color", "natural", "white", "gray", "black"),
                 _group("size", "small", "medium", "large", "set of 3")),
                (10, 40),
                ("Sturdy sides hold their shape when full.", "Folds flat when not in use.",
                 "Keeps shelves and closets tidy."),
            ),
            _ProductType(
                "cutting board", False, ("kitchen & dining", "kitchen utensils & gadgets", "cutting boards"),
                ("thick", "reversible", "extra large", "classic"),
                ("for Kitchen", "Chopping Block", "Serving Board"),
                ("juice groove", "non slip", "dishwasher safe"),
                (_group("material", "bamboo", "acacia wood", "plastic"),
                 _group("size", "small", "medium", "large", "set of 3")),
                (10, 40),
                ("Gentle on knife edges.", "A groove catches juices from meat and fruit.",
                 "Doubles as a serving tray."),
            ),
            _ProductType(
                "garden hose", False, ("gardening & lawn care", "watering equipment", "garden hoses"),
                ("flexible", "lightweight", "expandable", "premium"),
                ("with Spray Nozzle", "Water Hose for Yard", "outdoor watering Hose"),
                ("kink free", "leak proof", "brass fittings"),
                (_group("color", "green", "blue", "black"),
                 _group("size", "25 ft", "50 ft", "75 ft", "100 ft")),
                (15, 60),
                ("Solid fittings screw on without leaks.", "Coils up neatly after use.",
                 "Stays flexible in cold weather."),
                department="patio, lawn & garden",
            ),
            _ProductType(
                "plant pot", False, ("gardening & lawn care", "pots, planters & container accessories", "planters"),
                ("ceramic", "modern", "round", "glazed"),
                ("for indoor Plants", "Flower Planter with Saucer", "Succulent Pot"),
                ("drainage hole", "indoor outdoor", "with saucer"),
                (_group("color", "white", "black", "terracotta", "gray", "sage"),
                 _group("size", "4 inch", "6 inch", "8 inch", "set of 3")),
                (10, 45),
                ("A drainage hole keeps roots healthy.", "Suits herbs, succulents and small palms.",
                 "The matte finish suits any room."),
                department="patio, lawn & garden",
            ),
            _ProductType(
                "desk lamp", False, ("lighting & ceiling fans", "lamps & shades", "desk lamps"),
                ("led", "modern", "adjustable", "foldable"),
                ("for Home Office", "Reading Light", "Table Lamp for Study"),
                ("dimmable", "usb charging port", "eye caring", "touch control"),
                (_group("color", "black", "white", "silver"),
                 _group("style", "weighted base", "clamp mount")),
                (15, 50),
                ("Three color modes for work or rest.", "The arm bends to aim the light.",
                 "Uses little power."),
            ),
        ),
    ),
)
"""The five categories, eight product types each."""

_OPENERS = ("i need", "i am looking for", "i want", "find me", "i'm looking for", "i would like",
            "get me", "can you find me", "i'd like to buy", "i want to buy", "show me", "please find")

_FEATURE_TEMPLATES = (
    "{ATTR}: one of the main reasons customers choose this {noun}.",
    "{ATTR}: built in from the start, not added as an afterthought.",
    "{ATTR}: checked on every batch before it leaves our warehouse.",
    "{ATTR}: what our {noun} is known for.",
)
_GUARANTEE = (
    "SATISFACTION GUARANTEE: if you are not happy, contact us for a refund or replacement.",
    "WHAT YOU GET: one {noun} as described; any of the listed options.",
    "CUSTOMER CARE: our team answers questions within one day.",
)
_POSITIVE_TITLES = ("Love it", "Works great", "Exactly as described", "Great value", "Would buy again",
                    "Five stars", "Very happy with this")
_MIXED_TITLES = ("It's okay", "Decent for the price", "Not bad", "Good but not perfect")
_NEGATIVE_TITLES = ("Not what I expected", "Disappointed", "Would not buy again")
_POSITIVE_BODIES = (
    "I bought the {value} one because it says {attr}, and it delivers. {Brand} did a good job.",
    "Arrived quickly and well packed. The {attr} claim is true.",
    "Second time buying this {noun}. The {value} is my favorite.",
    "Exactly what I wanted, and the price was right. Recommended.",
)
_MIXED_BODIES = (
    "The {noun} is fine, but the {value} looked a little different from the photos.",
    "Does the job. The listing says {attr}; I have my doubts.",
)
_NEGATIVE_BODIES = (
    "The {value} {noun} I got did not match the listing.",
    "Not what I hoped for after a few weeks of use. I would look elsewhere.",
)


# ---------------------------------------------------------------------------------------------------------
# Generation.


_ACRONYMS = {"usb": "USB", "hd": "HD", "led": "LED", "spf": "SPF", "gmo": "GMO", "usda": "USDA"}


def _title_case(text: str) -> str:
    """Capitalise every word for a title ("long lasting" -> "Long Lasting", "usb c" -> "USB C")."""
    return " ".join(_ACRONYMS.get(word, word[:1].upper() + word[1:]) for word in text.split())


def _article(phrase: str, plural: bool) -> str:
    """ "a " or "an " before a singular phrase (by its first sound), nothing before a plural one."""
    if plural:
        return ""
    vowel_sound = phrase[:1] in "aeiou" and not phrase.startswith(("usb", "uni", "usda"))
    return "an " if vowel_sound else "a "


def _weighted_sample(rng: random.Random, weights: Mapping[str, int], k: int) -> list[str]:
    """`k` distinct keys of `weights`, each draw proportional to the weights of the keys still left."""
    pool = dict(weights)
    chosen: list[str] = []
    for _ in range(min(k, len(pool))):
        names = list(pool)
        pick = rng.choices(names, weights=[pool[name] for name in names])[0]
        chosen.append(pick)
        del pool[pick]
    return chosen


def _price(rng: random.Random, low: float, high: float) -> float:
    """A shop-like price in [low, high]: whole dollars ending in .99, .49 or .95."""
    dollars = rng.randint(int(low), int(high) - 1)
    return round(dollars + rng.choice((0.99, 0.49, 0.95)), 2)


def _asin(rng: random.Random, taken: set[str]) -> str:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    while True:
        asin = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _product(rng: random.Random, category: _Category, kind: _ProductType, asin: str) -> Product:
    brand = rng.choice(category.brands)
    popularity = dict(category.attributes) | {attribute: 2 for attribute in kind.attributes}
    attributes = _weighted_sample(rng, popularity, rng.choice((3, 4, 4, 5)))
    if not any(attribute in kind.attributes for attribute in attributes):
        attributes[-1] = rng.choice(kind.attributes)
    options = {}
    for group in kind.options:
        offered = set(rng.sample(group.values, _option_count(rng, group)))
        options[group.name] = tuple(value for value in group.values if value in offered)
    descriptor = rng.choice(kind.descriptors)
    tail = rng.choice(kind.tails)
    title = (
        f"{brand} {_title_case(descriptor)} {_title_case(kind.noun)}, "
        f"{' '.join(_title_case(a) for a in attributes[:2])} {_title_case(tail)}"
    )
    nouns = [*brand.lower().split(), *kind.noun.split(), *(w.lower() for w in tail.split() if w[:1].isupper())]
    details = rng.sample(kind.details, 2)
    description = (
        f"Meet the {brand} {descriptor} {kind.noun}. Highlights: {', '.join(attributes[:-1])} and "
        f"{attributes[-1]}. {' '.join(details)} Every {brand} product is checked before it ships."
    )
    features = tuple(
        rng.choice(_FEATURE_TEMPLATES).format(ATTR=attribute.upper(), noun=kind.noun) for attribute in attributes
    ) + (rng.choice(_GUARANTEE).format(noun=kind.noun),)
    rating = round(rng.uniform(3.2, 5.0), 1)
    path = (kind.department or category.department, *kind.path)
    return Product(
        asin=asin,
        category=category.name,
        path=path,
        product_type=kind.noun,
        query=kind.noun,
        brand=brand,
        title=title,
        title_nouns=tuple(dict.fromkeys(nouns)),
        price=_price(rng, *kind.price),
        rating=rating,
        rating_count=rng.randint(3, 2500),
        description=description,
        features=features,
        attributes=tuple(attributes),
        options=options,
        reviews=_reviews(rng, brand, kind, attributes, options, rating),
    )


def _option_count(rng: random.Random, group: _OptionGroup) -> int:
    """How many of a group's values one product offers: at least 2 (a real choice), at most 5."""
    return rng.randint(min(2, len(group.values)), min(5, len(group.values)))


def _reviews(
    rng: random.Random,
    brand: str,
    kind: _ProductType,
    attributes: Sequence[str],
    options: Mapping[str, tuple[str, ...]],
    rating: float,
) -> tuple[Review, ...]:
    values = [value for values in options.values() for value in values] or [kind.noun]
    reviews = []
    for _ in range(rng.randint(1, 3)):
        stars = max(1, min(5, round(rng.gauss(rating, 1.0))))
        if stars >= 4:
            titles, bodies = _POSITIVE_TITLES, _POSITIVE_BODIES
        elif stars == 3:
            titles, bodies = _MIXED_TITLES, _MIXED_BODIES
        else:
            titles, bodies = _NEGATIVE_TITLES, _NEGATIVE_BODIES
        body = rng.choice(bodies).format(
            value=rng.choice(values), attr=rng.choice(attributes), noun=kind.noun, Brand=brand
        )
        reviews.append(Review(stars, rng.choice(titles), body))
    return tuple(reviews)


def _price_cap(rng: random.Random, price: float) -> float:
    """A cap above `price`, drawn as the original does: the larger of two of the next four multiples of ten."""
    multiples = [10.0 * n for n in range(1, 100) if 10.0 * n > price][:4]
    return max(rng.sample(multiples, 2))


def _instruction(
    rng: random.Random, kind: _ProductType, attributes: Sequence[str], options: Mapping[str, str], price_upper: float
) -> str:
    joined = rng.choice((" and ", " ", ", ")).join(attributes)
    subject = f"{_article(joined, kind.plural)}{joined} {kind.noun}"
    phrases_by_group = {group.name: group.phrases for group in kind.options}
    wanted = [rng.choice(phrases_by_group[group]).format(v=value) for group, value in options.items()]
    option_text = f" {' and '.join(wanted)}" if wanted else ""
    return f"{rng.choice(_OPENERS)} {subject}{option_text}, and price lower than {price_upper:.2f} dollars"


@dataclass(frozen=True)
class Catalogue:
    """Products and goals, as generated or as read from ``data/webshop/``."""

    products: tuple[Product, ...]
    goals: tuple[Goal, ...]

    def files(self) -> dict[str, str]:
        """The text of ``products.jsonl`` and ``goals.jsonl``, one compact JSON object per line."""

        def lines(records: Sequence[Product] | Sequence[Goal]) -> str:
            return "".join(json.dumps(r.to_json(), separators=(",", ":"), ensure_ascii=True) + "\n" for r in records)

        return {PRODUCTS_FILE: lines(self.products), GOALS_FILE: lines(self.goals)}

    def write(self, directory: Path) -> None:
        """Write both files into `directory` (created when missing)."""
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in self.files().items():
            (directory / name).write_text(text, encoding="ascii")


def generate(seed: int = DEFAULT_SEED) -> Catalogue:
    """Build the catalogue and goals from `seed` (see the module docstring); pure and deterministic."""
    rng = random.Random(seed)
    taken: set[str] = set()
    kinds = {kind.noun: kind for category in _CATEGORIES for kind in category.types}
    products = [
        _product(rng, category, kind, _asin(rng, taken))
        for category in _CATEGORIES
        for kind in category.types
        for _ in range(PRODUCTS_PER_TYPE)
    ]
    rng.shuffle(products)

    drafts: list[tuple[str, str, tuple[str, ...], dict[str, str], float]] = []
    seen: set[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]] = set()
    for product in products:
        kind = kinds[product.product_type]
        for _ in range(GOALS_PER_PRODUCT):
            count = min(len(product.attributes), rng.choices((1, 2, 3), weights=(3, 5, 2))[0])
            attributes = tuple(rng.sample(product.attributes, count))
            options = {
                group: rng.choice(values) for group, values in product.options.items() if rng.random() < 0.85
            }
            key = (product.asin, tuple(sorted(attributes)), tuple(sorted(options.items())))
            if key in seen:
                continue
            seen.add(key)
            price_upper = _price_cap(rng, product.price)
            instruction = _instruction(rng, kind, attributes, options, price_upper)
            drafts.append((product.asin, instruction, attributes, options, price_upper))
    rng.shuffle(drafts)

    counts = Counter(attribute for _, _, attributes, _, _ in drafts for attribute in attributes)
    goals = tuple(
        Goal(
            goal_id=goal_id,
            split="test" if goal_id < TEST_GOALS else "train",
            asin=asin,
            instruction=instruction,
            attributes=attributes,
            options=options,
            price_upper=price_upper,
            weight=round(sum(1.0 / counts[a] for a in attributes) / len(attributes), 8),
        )
        for goal_id, (asin, instruction, attributes, options, price_upper) in enumerate(drafts)
    )
    return Catalogue(tuple(products), goals)


def load(directory: Path = DATA_DIR) -> Catalogue:
    """Read the catalogue from `directory`; a missing file raises FileNotFoundError naming the fix."""
    paths = [directory / PRODUCTS_FILE, directory / GOALS_FILE]
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(
                f"WebShop catalogue file {path} is missing; regenerate it with "
                f"`python -m comprl.envs.webshop.catalogue --out {directory}`"
            )
    products_path, goals_path = paths
    with products_path.open(encoding="ascii") as file:
        products = tuple(Product.from_json(json.loads(line)) for line in file)
    with goals_path.open(encoding="ascii") as file:
        goals = tuple(Goal.from_json(json.loads(line)) for line in file)
    return Catalogue(products, goals)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: write the catalogue generated from ``--seed`` into ``--out``."""
    parser = argparse.ArgumentParser(description="Generate the WebShop-small catalogue and goals.")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"generator seed (default {DEFAULT_SEED})")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help=f"output folder (default {DATA_DIR})")
    args = parser.parse_args(argv)
    catalogue = generate(args.seed)
    catalogue.write(args.out)
    print(f"wrote {len(catalogue.products)} products and {len(catalogue.goals)} goals to {args.out}")


if __name__ == "__main__":
    main()
