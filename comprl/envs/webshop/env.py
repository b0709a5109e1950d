"""WebShop-small as a comprl text environment: shop a 1,000-product store by searching and clicking.

``comprl/WebShop-Small-v0`` plays a goal from the shipped catalogue (``data/webshop/``, made by
`comprl.envs.webshop.catalogue`): the first page shows an instruction such as "i need a long lasting vegan
lipstick in red, and price lower than 30.00 dollars"; the agent searches, pages through the results, opens a
product, picks its options and clicks Buy Now, which ends the episode.

Pages and actions follow the original WebShop's text mode (page parts joined by ``[SEP]``):

- search page: ``search[query]`` (the only page with a search box);
- results page: 10 products per page out of the best 50, ``click[next >]``, ``click[< prev]``,
  ``click[back to search]``, and ``click[<asin>]`` to open a product;
- product page: ``click[<option value>]`` selects that value of its group (a later click in the same group
  replaces it), ``click[description]`` / ``click[features]`` / ``click[reviews]`` open sub-pages,
  ``click[< prev]`` goes back, ``click[buy now]`` buys with the options selected.

Actions are case-insensitive; ``info["admissible_actions"]`` lists the page's clickables as ``click[...]``
actions, or ``search[<your query>]`` on the search page. Anything else (an unknown button, a search without
a search box, a malformed, empty or over-long action) is answered with feedback and counted in
``info["invalid_action"]``; it never raises.

Reward. Buy Now is scored as WebShop's ``get_reward`` does (``web_agent_site/engine/goal.py`` on the master
branch; the paper's environment imports the same file through webshop-minimal)::

    score = (attributes matched + options matched + [price <= cap]) / (attributes + options + 1) * r_type

- ``similarity(a, b)``: thefuzz's token-set ratio as WebShop calls it (both texts lower-cased, non-word
  characters made spaces; 100 when one text's words are a subset of the other's), rounded to an integer.
- An attribute matches when one of the bought product's attributes has similarity > 85 with it, or it
  occurs verbatim in the product's title, its features joined, or its description (`attribute_matched`).
- Each wanted option is counted at most once: it matches when some selected value, of any group, reduced by
  `colour_word` (the first of WebShop's colour words it contains, "wine red" -> "red"), has similarity > 85
  with the wanted option's text. That text is what WebShop's synthetic goals (the paper's setting) hand to
  the matcher, the (name, value) pair: the colour word when the name or value is exactly one, else
  "name value" (`wanted_option_text`). So "x-small" is matched by a selected "small" (a subset), "12 pack" is
  not matched by "2 pack" ("size 12 pack" vs "2 pack": 80), and "wine red" is matched by any selected red.
- ``[price <= cap]`` is 1 when the product's price is at most the goal's cap.
- ``r_type`` (`type_reward`): the title score is the share of the goal product's title noun tokens (repeats
  counted) whose word the bought title has; 0 when it is 0, 0.1 when below 0.1, else 1 when the two products
  share their search query, at least two category levels, or the title score is above 0.2, else 0.5.

The env returns the paper's binary reward: 1.0 when the score is 1.0 (``info["success"]``) and 0.0
otherwise; ``info["score"]`` holds the score itself (0.0 until Buy Now).

Goals and seeds (``split`` argument):

- ``"test"``: ``reset(seed=s)`` plays test goal ``s mod 500``;
- ``"train"``: ``reset(seed=s)`` draws a training goal from the seeded generator, weighted by attribute
  rarity (the original's goal weights);
- ``"auto"`` (default, the registered id): seeds from `EVAL_SEED_OFFSET` on (the training loop's evaluation
  seeds) play test goal ``(s - EVAL_SEED_OFFSET) mod 500``; smaller seeds draw training goals.

Deviations from the original WebShop (princeton-nlp/WebShop), all deliberate:

- Catalogue and goals are synthetic (generated from one seed, shipped as JSONL), not scraped Amazon
  products and crowd-written instructions; titles, texts and instructions come from templates.
- Search is BM25 from DuckDB's full-text-search extension (Porter stemmer, English stop words, k1=0.9 and
  b=0.4 as in pyserini's defaults) over title, description, first feature and option values (the fields
  of the original index), instead of a pyserini/Lucene index.
- The type reward's nouns are known by construction (brand, product type, capitalised words of the title's
  ending: `Product.title_nouns`), where the original tags the title with spaCy's ``en_core_web_sm``.
- `similarity` is rapidfuzz's token-set ratio (Indel distance, as python-Levenshtein and thefuzz >= 0.20
  compute it); thefuzz 0.19, which WebShop pins, falls back to difflib without python-Levenshtein. On every
  option and attribute comparison the shipped catalogue's goals can make, both give the same match decision.
- The catalogue avoids option values whose WebShop colour word is not one of their own words ("blueberry"
  -> "blue", "light wash" -> "ash"): the original reward never matches such a value, not even with itself, so
  a goal asking for one could not be won.
- Each product has one fixed price (the original draws one from a product's price range when it loads);
  there is no Attributes sub-page; clicking a product title does nothing (as in the original, its id is the
  link).
- The episode cap is `max_turns` actions (default 10, the paper's WebShop setting). The reward is binary,
  as the paper describes its rewards; the paper's code instead passes the score through as the reward and
  logs any purchase as a success (``info["score"]`` is that reward).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
from rapidfuzz import fuzz

from comprl import duckdb_files
from comprl.envs.base import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    GameStep,
    TextEnv,
    choose_by_seed,
    extract_answer,
    seed_split,
)
from comprl.envs.webshop.catalogue import DATA_DIR, Catalogue, Goal, Product, load

DEFAULT_MAX_TURNS = 10
"""Actions per episode: the paper's code caps WebShop episodes at 10 steps."""

SPLITS = ("auto", "train", "test")
TASKS = ("small",)
"""The registered WebShop variants (the paper's "small": a 1,000-product catalogue)."""

SEARCH_RETURN = 50
"""Products a search returns, best first (the original's SEARCH_RETURN_N)."""
RESULTS_PER_PAGE = 10
MAX_QUERY_CHARS = 500
"""Longer search queries are refused as invalid actions."""
MATCH_THRESHOLD = 85
"""WebShop counts two attribute or option texts as the same when their `similarity` (0-100) is above this."""

SEP = " [SEP] "
SEARCH_PROMPT = "search[<your query>]"
BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
BUY_NOW = "buy now"
SUB_PAGES = ("description", "features", "reviews")

_ACTION = re.compile(r"(search|click)\s*\[(.*)\]", re.DOTALL)
_QUOTES = "\"'`"

COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)
"""WebShop's colour words (``web_agent_site/engine/normalize.py``), in its order, which decides ties."""

_NON_WORD = re.compile(r"\W")


# ---------------------------------------------------------------------------------------------------------
# Reward (WebShop's ``web_agent_site/engine/goal.py``, the version the paper's environment imports).


def similarity(first: str, second: str) -> int:
    """thefuzz's ``token_set_ratio`` as WebShop calls it: both texts lower-cased with every non-word character
    turned into a space, compared by their shared and their own word sets, the best ratio rounded to an int."""
    return round(fuzz.token_set_ratio(_NON_WORD.sub(" ", first).lower(), _NON_WORD.sub(" ", second).lower()))


def colour_word(text: str) -> str:
    """WebShop's ``normalize_color``: the first `COLOR_SET` word found anywhere in `text`, even inside another
    word ("standard" -> "tan"), else `text` unchanged."""
    return next((colour for colour in COLOR_SET if colour in text), text)


def wanted_option_text(group: str, value: str) -> str:
    """The text WebShop's option reward compares a wanted option as.

    The paper's environment plays WebShop's synthetic goals, which keep the wanted options as a dict; the
    reward hands each (name, value) pair as it is to ``normalize_color`` and the fuzzy matcher. A pair becomes
    a colour word only when its name or its value is exactly one; otherwise the matcher reads it as the text
    "name value" (``("size", "12 pack")`` is compared as "size 12 pack").
    """
    return next((colour for colour in COLOR_SET if colour in (group, value)), f"{group} {value}")


@dataclass(frozen=True)
class PurchaseScore:
    """The parts of the WebShop score of one purchase."""

    attributes_matched: int
    attributes_wanted: int
    options_matched: int
    options_wanted: int
    price_ok: bool
    type_reward: float
    """r_type: 1, 0.5, 0.1 or 0 (see `type_reward`)."""

    @property
    def total(self) -> float:
        """``(attributes matched + options matched + [price ok]) / (attributes + options + 1) * r_type``."""
        matched = self.attributes_matched + self.options_matched + int(self.price_ok)
        return matched / (self.attributes_wanted + self.options_wanted + 1) * self.type_reward


def attribute_matched(attribute: str, product: Product) -> bool:
    """Whether `product` has the wanted `attribute`: one of its own attributes is `similar` (above the
    threshold), or the attribute occurs verbatim in its lower-cased title, its features joined by spaces, or its
    description (each text checked on its own)."""
    if any(similarity(own, attribute) > MATCH_THRESHOLD for own in product.attributes):
        return True
    texts = (product.title, " ".join(product.features), product.description)
    return any(attribute in text.lower() for text in texts)


def option_matched(group: str, wanted: str, chosen: Sequence[str]) -> bool:
    """Whether one of the `chosen` option values (of any group) counts for the wanted value of `group`: its
    `colour_word` is `similar` (above the threshold) to the `wanted_option_text`."""
    target = wanted_option_text(group, wanted)
    return any(similarity(colour_word(value), target) > MATCH_THRESHOLD for value in chosen)


def title_nouns(product: Product) -> list[str]:
    """The noun tokens of `product`'s title, repeats included, in title order (where WebShop runs spaCy's
    tagger, the nouns are known by construction: `Product.title_nouns`)."""
    nouns = set(product.title_nouns)
    return [word for word in re.findall(r"[\w'-]+", product.title.lower()) if word in nouns]


def type_reward(wanted: Product, bought: Product) -> float:
    """r_type, how far `bought` is the kind of product `wanted` is.

    title score = distinct wanted title nouns that `bought`'s title has / wanted title noun tokens (0.2 when
    the wanted title has none); r_type is 0 when the title score is 0, 0.1 when it is below 0.1, else 1 when the
    two share their search query, or at least two category levels, or the title score is above 0.2, else 0.5.
    """
    wanted_nouns = title_nouns(wanted)
    shared = len(set(wanted_nouns) & set(title_nouns(bought)))
    title_score = shared / len(wanted_nouns) if wanted_nouns else 0.2
    if title_score == 0.0:
        return 0.0
    if title_score < 0.1:
        return 0.1
    related = wanted.query == bought.query or len(set(wanted.path) & set(bought.path)) >= 2
    return 1.0 if related or title_score > 0.2 else 0.5


def score_purchase(goal: Goal, wanted: Product, bought: Product, selected: Mapping[str, str]) -> PurchaseScore:
    """Score buying `bought` with the `selected` options (group -> value) for `goal`, whose product is `wanted`."""
    chosen = list(selected.values())
    return PurchaseScore(
        attributes_matched=sum(attribute_matched(attribute, bought) for attribute in goal.attributes),
        attributes_wanted=len(goal.attributes),
        options_matched=sum(option_matched(group, value, chosen) for group, value in goal.options.items()),
        options_wanted=len(goal.options),
        price_ok=bought.price <= goal.price_upper,
        type_reward=type_reward(wanted, bought),
    )


# ---------------------------------------------------------------------------------------------------------
# Search and the loaded shop.


def _connect_with_fts() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the fts extension loaded from the installed wheel (no download)."""
    spec = importlib.util.find_spec("duckdb_extension_fts")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("WebShop search needs the package duckdb-extension-fts: pip install duckdb-extension-fts")
    connection = duckdb_files.connect(threads=1)
    version = connection.execute("PRAGMA version").fetchone()[0]
    file = Path(next(iter(spec.submodule_search_locations))) / "extensions" / version / "fts.duckdb_extension"
    if not file.exists():
        raise ImportError(f"{file} does not exist: duckdb {version} needs duckdb-extension-fts=={version.lstrip('v')}")
    quoted = str(file).replace("'", "''")
    connection.execute(f"LOAD '{quoted}'")
    return connection


def _indexed_text(product: Product) -> str:
    """What search sees of a product, as in the original index: title, description, first feature, options."""
    options = ", and ".join(f"{group}: {', '.join(values)}" for group, values in product.options.items())
    return " ".join((product.title, product.description, product.features[0], options))


class ProductSearch:
    """BM25 ranking of the catalogue for a free-text query (DuckDB full-text search)."""

    def __init__(self, products: Sequence[Product]) -> None:
        self._connection = _connect_with_fts()
        self._connection.execute("CREATE TABLE products (idx INTEGER, contents VARCHAR)")
        self._connection.executemany(
            "INSERT INTO products VALUES (?, ?)",
            [(i, _indexed_text(product)) for i, product in enumerate(products)],
        )
        self._connection.execute(
            "PRAGMA create_fts_index('products', 'idx', 'contents', stemmer='porter', stopwords='english', "
            "ignore='(\\.|[^a-z0-9])+', strip_accents=1, lower=1)"
        )

    def search(self, query: str, limit: int = SEARCH_RETURN) -> tuple[int, ...]:
        """Indices of the best `limit` products for `query`, best first (ties by catalogue order)."""
        rows = (
            self._connection.cursor()
            .execute(
                "SELECT idx FROM (SELECT idx, fts_main_products.match_bm25(idx, ?, k := 0.9, b := 0.4) AS score "
                "FROM products) WHERE score IS NOT NULL ORDER BY score DESC, idx LIMIT ?",
                [query, limit],
            )
            .fetchall()
        )
        return tuple(int(row[0]) for row in rows)


class Shop:
    """The catalogue, its goals by split, and its search index (built once per data folder and process)."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.products = catalogue.products
        self.by_asin: Mapping[str, Product] = {product.asin: product for product in self.products}
        self.train_goals = tuple(goal for goal in catalogue.goals if goal.split == "train")
        self.test_goals = tuple(goal for goal in catalogue.goals if goal.split == "test")
        weights = np.array([goal.weight for goal in self.train_goals], dtype=float)
        self.train_probabilities = weights / weights.sum()
        self.search = ProductSearch(self.products)


@lru_cache(maxsize=None)
def open_shop(data_dir: Path = DATA_DIR) -> Shop:
    """The `Shop` of a catalogue folder, loaded on first use and then shared by every env of the process."""
    return Shop(load(data_dir))


# ---------------------------------------------------------------------------------------------------------
# The environment.


class WebShopTextEnv(TextEnv):
    """WebShop-small as a text environment; see the module docstring for pages, reward, seeds and deviations."""

    def __init__(
        self,
        task: str = "small",
        split: str = "auto",
        max_turns: int = DEFAULT_MAX_TURNS,
        data_dir: str | Path | None = None,
        action_prompt: bool = True,
    ) -> None:
        """Create the env; `split` is "auto", "train" or "test" (which goals seeds play: module docstring)."""
        super().__init__(max_turns=max_turns, action_prompt=action_prompt)
        if task not in TASKS:
            raise ValueError(f"unknown WebShop task {task!r}; accepted: {', '.join(TASKS)}")
        if split not in SPLITS:
            raise ValueError(f"unknown WebShop split {split!r}; accepted: {', '.join(SPLITS)}")
        self.split = split
        self.shop = open_shop(Path(data_dir) if data_dir is not None else DATA_DIR)
        self._seed: int | None = None
        self._goal: Goal | None = None
        self._page = "search"
        self._results: tuple[int, ...] = ()
        self._result_page = 1
        self._product: Product | None = None
        self._selected: dict[str, str] = {}
        self._score = 0.0

    @property
    def goal(self) -> Goal:
        """The goal of the current episode."""
        if self._goal is None:
            raise RuntimeError("no goal yet: call reset() first")
        return self._goal

    @property
    def page(self) -> str:
        """The page shown: "search", "results", "item", "description", "features", "reviews" or "done"."""
        return self._page

    @property
    def selected_options(self) -> Mapping[str, str]:
        """Option group -> value selected on the open product page."""
        return dict(self._selected)

    @property
    def instruction(self) -> str:
        """How to shop, the action syntax and the reply format, for the system prompt."""
        return (
            "You are shopping on WebShop, an online store. Each page is shown as text whose parts are separated "
            "by [SEP]; it starts with your shopping instruction. Find a product that fits the instruction, "
            "select the options it asks for (such as color and size) and buy it, at a price below the limit. "
            "Actions: search[keywords] on the search page; click[button] for a button shown on the page: a "
            f"product id on the results page, '{NEXT_PAGE}', '{PREV_PAGE}', '{BACK_TO_SEARCH}', an option "
            f"value, 'description', 'features', 'reviews' or '{BUY_NOW}'. You have {self.max_turns} actions; "
            f"clicking {BUY_NOW} ends the episode. Reply with exactly one action as {ANSWER_OPEN}ACTION"
            f"{ANSWER_CLOSE}, for example {ANSWER_OPEN}search[red vegan lipstick]{ANSWER_CLOSE}."
        )

    @property
    def action_words(self) -> tuple[str, ...]:
        """The page's admissible actions: ``search[<your query>]`` on the search page, else its clicks."""
        if self._page == "search":
            return (SEARCH_PROMPT,)
        return tuple(f"click[{button}]" for button in self._clickables())

    def parse_action(self, text: str) -> str | None:
        """``search[query]`` (on the search page) or ``click[button]`` (a clickable of the page), else None."""
        candidate = extract_answer(text)
        match = _ACTION.fullmatch(candidate) if candidate is not None else None
        if match is None:
            return None
        verb, argument = match.group(1), match.group(2).strip().strip(_QUOTES).strip()
        if verb == "search":
            if self._page != "search" or not argument or len(argument) > MAX_QUERY_CHARS:
                return None
            return f"search[{argument}]"
        return f"click[{argument}]" if argument in self._clickables() else None

    def _choose_goal(self) -> Goal:
        split, seed = seed_split(self.split, self._seed, "test")
        if split == "test":
            return choose_by_seed(self.shop.test_goals, seed, self.np_random)
        index = int(self.np_random.choice(len(self.shop.train_goals), p=self.shop.train_probabilities))
        return self.shop.train_goals[index]

    def _reset_game(self) -> str:
        self._goal = self._choose_goal()
        self._page = "search"
        self._results = ()
        self._result_page = 1
        self._product = None
        self._selected = {}
        self._score = 0.0
        return self._observe()

    def _info(self, invalid_action: bool) -> dict[str, Any]:
        info = super()._info(invalid_action)
        info["score"] = self._score
        return info

    def _clickables(self) -> tuple[str, ...]:
        """The lower-case button texts of the current page."""
        if self._page == "results":
            paging = (PREV_PAGE,) * (self._result_page > 1) + (NEXT_PAGE,) * (self._result_page < self._page_count())
            return (BACK_TO_SEARCH, *paging, *(self.shop.products[i].asin.lower() for i in self._page_results()))
        if self._page == "item":
            product = self._open_product()
            values = (value.lower() for values in product.options.values() for value in values)
            return (BACK_TO_SEARCH, PREV_PAGE, *values, *SUB_PAGES, BUY_NOW)
        if self._page in SUB_PAGES:
            return (BACK_TO_SEARCH, PREV_PAGE)
        return ()

    def _page_count(self) -> int:
        return max(1, -(-len(self._results) // RESULTS_PER_PAGE))

    def _page_results(self) -> tuple[int, ...]:
        start = (self._result_page - 1) * RESULTS_PER_PAGE
        return self._results[start : start + RESULTS_PER_PAGE]

    def _open_product(self) -> Product:
        if self._product is None:
            raise RuntimeError("no product page is open")
        return self._product

    def _play(self, action_word: str) -> GameStep:
        verb, argument = action_word[:-1].split("[", 1)
        if verb == "search":
            self._results = self.shop.search.search(argument)
            self._result_page = 1
            self._page = "results"
        elif argument == BUY_NOW:
            return self._buy()
        elif argument == BACK_TO_SEARCH:
            self._page = "search"
        elif argument == NEXT_PAGE:
            self._result_page += 1
        elif argument == PREV_PAGE:
            self._go_back()
        elif argument in SUB_PAGES:
            self._page = argument
        elif self._page == "results":
            self._product = self.shop.by_asin[argument.upper()]
            self._selected = {}
            self._page = "item"
        else:
            self._select_option(argument)
        return GameStep(self._observe(), 0.0, False, False)

    def _go_back(self) -> None:
        if self._page == "results":
            self._result_page -= 1
        elif self._page == "item":
            self._page = "results"
        else:
            self._page = "item"

    def _select_option(self, value: str) -> None:
        for group, values in self._open_product().options.items():
            for offered in values:
                if offered.lower() == value:
                    self._selected[group] = offered

    def _buy(self) -> GameStep:
        product = self._open_product()
        score = score_purchase(self.goal, self.shop.by_asin[self.goal.asin], product, self._selected)
        self._score = score.total
        self._page = "done"
        success = self._score == 1.0
        return GameStep(self._observe(), 1.0 if success else 0.0, True, success)

    def _observe(self) -> str:
        header = ["Instruction:", self.goal.instruction]
        if self._page == "search":
            return SEP.join(["WebShop", *header, "Search"])
        if self._page == "results":
            paging = ["< Prev"] * (self._result_page > 1) + ["Next >"] * (self._result_page < self._page_count())
            listing = [
                part
                for i in self._page_results()
                for part in (
                    self.shop.products[i].asin,
                    self.shop.products[i].title,
                    f"${self.shop.products[i].price:.2f}",
                )
            ]
            page_line = f"Page {self._result_page} (Total results: {len(self._results)})"
            return SEP.join([*header, "Back to Search", page_line, *paging, *listing])
        if self._page == "done":
            return self._receipt()
        product = self._open_product()
        top = [*header, "Back to Search", "< Prev"]
        if self._page == "item":
            options = [part for group, values in product.options.items() for part in (group, *values)]
            details = [product.title, f"Price: ${product.price:.2f}", f"Rating: {product.rating:.1f}"]
            return SEP.join([*top, *options, *details, "Description", "Features", "Reviews", "Buy Now"])
        if self._page == "description":
            return SEP.join([*top, product.description])
        if self._page == "features":
            return SEP.join([*top, *product.features])
        reviews = [part for r in product.reviews for part in (r.title, f"{r.stars} out of 5 stars", r.body)]
        return SEP.join([*top, *reviews])

    def _receipt(self) -> str:
        product = self._open_product()
        chosen = [f"{group}: {value}" for group, value in self._selected.items()] or ["no options selected"]
        parts = ["Thank you for shopping with us!", "Purchased", product.asin, product.title, *chosen]
        return SEP.join([*parts, "Your score (min 0.0, max 1.0)", f"{self._score:.2f}"])
