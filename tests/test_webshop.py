"""Behaviour of comprl's built-in WebShop-small: catalogue, goals, pages, actions, reward and seeding."""

from __future__ import annotations

import json
import string
from dataclasses import replace
from itertools import permutations

import pytest

import comprl.envs
from comprl.envs.base import EVAL_SEED_OFFSET
from comprl.envs.webshop.env import (
    BUY_NOW,
    DEFAULT_MAX_TURNS,
    RESULTS_PER_PAGE,
    SEARCH_PROMPT,
    SUB_PAGES,
    WebShopTextEnv,
    attribute_matched,
    colour_word,
    option_matched,
    score_purchase,
    similarity,
    title_nouns,
    type_reward,
    wanted_option_text,
)
from comprl.envs.webshop.catalogue import DATA_DIR, GOALS_FILE, PRODUCTS_FILE, TEST_GOALS, Goal, Product, generate, load

ENV_ID = "comprl/WebShop-Small-v0"
FIXED_BUTTONS = {"back to search", "next >", "< prev", BUY_NOW, *SUB_PAGES}


@pytest.fixture(scope="module")
def catalogue():
    return load()


@pytest.fixture()
def env():
    """A test-split env with room for long scripted walks (the default cap is 10 actions)."""
    return WebShopTextEnv(split="test", max_turns=50)


def expert_episode(env: WebShopTextEnv, seed: int) -> tuple[list[str], list[str], float, dict]:
    """Search the goal's instruction, page to its product, select the goal's options and buy.

    Returns the observations, the actions, the last reward and the last info.
    """
    observation, info = env.reset(seed=seed)
    goal = env.goal
    observations, actions = [observation], []

    def act(action: str) -> tuple[float, bool, dict]:
        observation, reward, terminated, truncated, info = env.step(action)
        observations.append(observation)
        actions.append(action)
        return reward, terminated or truncated, info

    reward, done, info = act(f"search[{goal.instruction}]")
    target = f"click[{goal.asin.lower()}]"
    while not done and target not in info["admissible_actions"] and "click[next >]" in info["admissible_actions"]:
        reward, done, info = act("click[next >]")
    if not done:
        reward, done, info = act(target)
    for value in goal.options.values():
        if not done:
            reward, done, info = act(f"<answer>click[{value}]</answer>")
    if not done:
        reward, done, info = act(f"click[{BUY_NOW}]")
    return observations, actions, reward, info


def open_goal_product(env: WebShopTextEnv) -> None:
    """From the search page, search the goal's instruction and page to its product, then open it."""
    _, _, _, _, info = env.step(f"search[{env.goal.instruction}]")
    target = f"click[{env.goal.asin.lower()}]"
    while target not in info["admissible_actions"]:
        _, _, _, _, info = env.step("click[next >]")
    env.step(target.upper())


def open_first_product_with_choices(env: WebShopTextEnv, query: str) -> Product:
    """From the search page, search `query` and open the first result that offers two values in a group."""
    _, _, _, _, info = env.step(f"search[{query}]")
    for action in info["admissible_actions"]:
        asin = action.removeprefix("click[").removesuffix("]").upper()
        product = env.shop.by_asin.get(asin)
        if product is not None and any(len(values) >= 2 for values in product.options.values()):
            env.step(action)
            return product
    raise AssertionError(f"no result for {query!r} offers a choice of options")


# --- catalogue and goals -----------------------------------------------------------------------------------


def test_shipped_catalogue_equals_a_fresh_generation():
    fresh = generate().files()
    for name in (PRODUCTS_FILE, GOALS_FILE):
        assert (DATA_DIR / name).read_text(encoding="ascii") == fresh[name], f"{name} differs from generate()"


def test_catalogue_is_small_varied_and_consistent(catalogue):
    products = catalogue.products
    assert len(products) == 1000
    assert len({p.asin for p in products}) == 1000
    assert {p.category for p in products} == {"beauty", "electronics", "fashion", "grocery", "home & garden"}
    assert sum((DATA_DIR / name).stat().st_size for name in (PRODUCTS_FILE, GOALS_FILE)) < 5_000_000
    for product in products:
        assert product.features and product.reviews and product.description and product.title_nouns
        assert 3 <= len(product.attributes) <= 5
        assert 0 < product.price and 1.0 <= product.rating <= 5.0
        assert product.title.isascii() and product.description.isascii()
        # Attributes are always stated in the product's own text, so the text fallback of the reward can see them.
        text = " ".join((product.title, product.description, *product.features)).lower()
        assert all(attribute in text for attribute in product.attributes), product.asin


def test_option_values_are_unique_and_each_matches_itself(catalogue):
    confused = set()
    for product in catalogue.products:
        values = [value for values in product.options.values() for value in values]
        assert len(values) == len(set(values)), product.asin
        assert not FIXED_BUTTONS & set(values)
        for group, offered in product.options.items():
            assert all(option_matched(group, value, [value]) for value in offered), product.asin
            confused |= {
                (wanted, other)
                for wanted, other in permutations(offered, 2)
                if option_matched(group, wanted, [other])
            }
    # WebShop's matcher accepts some wrong values of a group: every (wanted, selected) pair it confuses here.
    assert len(confused) == 14
    assert {("x-small", "small"), ("xx-large", "large"), ("1.7 fl oz", "1 fl oz"), ("12 x 20 inch", "20 x 20 inch"),
            ("4.25 ounce (pack of 6)", "8 ounce (pack of 2)")} <= confused


def test_goals_are_consistent_with_their_target_products(catalogue):
    by_asin = {p.asin: p for p in catalogue.products}
    for goal in catalogue.goals:
        target = by_asin[goal.asin]
        assert set(goal.attributes) <= set(target.attributes)
        assert all(target.options[group] and value in target.options[group] for group, value in goal.options.items())
        assert target.price <= goal.price_upper
        assert goal.instruction.endswith(f", and price lower than {goal.price_upper:.2f} dollars")
        assert goal.weight > 0
        assert score_purchase(goal, target, target, goal.options).total == 1.0


def test_train_and_test_goals_are_disjoint(catalogue):
    test = [g for g in catalogue.goals if g.split == "test"]
    train = [g for g in catalogue.goals if g.split == "train"]
    assert len(test) == TEST_GOALS and len(train) + len(test) == len(catalogue.goals) and len(train) > 1000
    assert not {g.goal_id for g in test} & {g.goal_id for g in train}
    assert not {g.instruction for g in test} & {g.instruction for g in train}

    def key(goal: Goal) -> tuple:
        return goal.asin, frozenset(goal.attributes), frozenset(goal.options.items())

    assert not {key(g) for g in test} & {key(g) for g in train}


# --- seeding ---------------------------------------------------------------------------------------------


def test_same_seed_gives_same_goal_and_pages():
    runs = []
    for _ in range(2):
        env = WebShopTextEnv()
        observations, actions, _, _ = expert_episode(env, seed=7)
        runs.append((env.goal, observations, actions))
    assert runs[0] == runs[1]
    goals = {WebShopTextEnv().reset(seed=seed)[0] for seed in range(20)}
    assert len(goals) > 10


def test_seeds_pick_goals_by_split(catalogue):
    test_goals = [g for g in catalogue.goals if g.split == "test"]
    test_env, train_env, auto_env = WebShopTextEnv(split="test"), WebShopTextEnv(split="train"), WebShopTextEnv()
    for seed in (0, 3, 499, 500):
        test_env.reset(seed=seed)
        assert test_env.goal == test_goals[seed % TEST_GOALS]
        auto_env.reset(seed=EVAL_SEED_OFFSET + seed)
        assert auto_env.goal == test_goals[seed % TEST_GOALS]
    for seed in range(30):
        train_env.reset(seed=seed)
        auto_env.reset(seed=seed)
        assert train_env.goal.split == "train" and auto_env.goal == train_env.goal


# --- pages and actions -------------------------------------------------------------------------------------


def test_search_page_offers_only_search(env):
    observation, info = env.reset(seed=0)
    assert observation.startswith(f"WebShop [SEP] Instruction: [SEP] {env.goal.instruction} [SEP] Search")
    assert info["admissible_actions"] == [SEARCH_PROMPT] and info["score"] == 0.0


def test_results_are_paged_ten_at_a_time(env):
    env.reset(seed=0)
    observation, _, _, _, info = env.step("search[vegan]")
    assert "Page 1 (Total results: 50)" in observation and "< Prev" not in observation
    seen: list[str] = []
    for page in range(1, 6):
        products = [a for a in info["admissible_actions"] if a.startswith("click[b0")]
        assert len(products) == RESULTS_PER_PAGE and f"Page {page} (Total results: 50)" in observation
        assert ("click[< prev]" in info["admissible_actions"]) == (page > 1)
        assert ("click[next >]" in info["admissible_actions"]) == (page < 5)
        seen += products
        if page < 5:
            observation, _, _, _, info = env.step("click[next >]")
    assert len(set(seen)) == 50
    observation, _, _, _, info = env.step("click[< prev]")
    assert "Page 4 (Total results: 50)" in observation
    observation, _, _, _, info = env.step("click[back to search]")
    assert info["admissible_actions"] == [SEARCH_PROMPT]


def test_search_stems_words_and_ranks_the_product_type_first(env):
    env.reset(seed=0)
    _, _, _, _, info = env.step("search[Lipsticks]")
    top = [
        env.shop.by_asin[a[len("click[") : -1].upper()] for a in info["admissible_actions"] if a.startswith("click[b0")
    ]
    assert len(top) == RESULTS_PER_PAGE and all(product.product_type == "lipstick" for product in top)


def test_option_selection_replaces_within_a_group_and_resets_per_product(env):
    env.reset(seed=0)
    product = open_first_product_with_choices(env, "t-shirt")
    group, values = next((g, v) for g, v in product.options.items() if len(v) >= 2)
    observation, _, _, _, info = env.step(f"CLICK[{values[0].upper()}]")
    assert not info["invalid_action"] and env.selected_options == {group: values[0]}
    assert f"{group} [SEP] {' [SEP] '.join(values)}" in observation
    env.step(f"click[{values[1]}]")
    assert env.selected_options == {group: values[1]}
    for sub_page in SUB_PAGES:
        observation, _, _, _, info = env.step(f"click[{sub_page}]")
        assert info["admissible_actions"] == ["click[back to search]", "click[< prev]"]
        env.step("click[< prev]")
        assert env.page == "item" and env.selected_options == {group: values[1]}
    env.step("click[< prev]")
    assert env.page == "results"
    env.step(f"click[{product.asin}]")
    assert env.selected_options == {}


def test_admissible_actions_are_all_accepted(env):
    env.reset(seed=1)
    env.step("search[coffee mug]")
    product_click = next(a for a in env.action_words if a.startswith("click[b0"))
    env.step(product_click)
    for action in env.action_words:
        if action != f"click[{BUY_NOW}]":
            assert env.parse_action(action) == action


def test_invalid_and_adversarial_actions_get_feedback_not_errors(env):
    observation, _ = env.reset(seed=2)
    adversarial = [
        "", "   ", "click[nothing like this]", "search[]", "search[   ]", "click[", "buy now", "x" * 10_000,
        "search[" + "a" * 10_000 + "]", "<answer>search[mug]", "search[mug]</answer>", "click[\u2603]",
        "click[b0zzzzzzzz]", "search[\u00e9t\u00e9 \U0001F600]", "search[a]; DROP TABLE products; --]",
    ]
    printable = set(string.printable)
    for action in adversarial[:-2]:
        observation, reward, terminated, truncated, info = env.step(action)
        assert info["invalid_action"] and reward == 0.0 and not terminated, action[:40]
        assert observation.startswith("Invalid action:") and set(observation) <= printable
        assert env.page == "search"
    env.reset(seed=2)
    for action in adversarial[-2:]:  # a search of odd text is valid on the search page and simply finds little
        observation, _, _, _, info = env.step(action)
        assert not info["invalid_action"] and env.page == "results" and set(observation) <= printable
        env.step("click[back to search]")
    env.step("search[mug]")
    observation, _, _, _, info = env.step("search[mug]")
    assert info["invalid_action"] and env.page == "results"
    with pytest.raises(TypeError):
        env.step(None)


def test_episode_is_capped_at_ten_actions_by_default():
    env = WebShopTextEnv()
    env.reset(seed=0)
    outcomes = [env.step("click[nowhere]") for _ in range(10)]
    assert [truncated for *_, truncated, _ in outcomes] == [False] * 9 + [True]
    assert outcomes[-1][-1]["invalid_actions"] == 10


# --- reward ----------------------------------------------------------------------------------------------

LIPSTICK = Product(
    asin="B0TEST0001",
    category="beauty",
    path=("beauty & personal care", "makeup", "lips", "lipstick"),
    product_type="lipstick",
    query="lipstick",
    brand="Lumera",
    title="Lumera Matte Lipstick, Long Lasting Vegan Lip Color for Women",
    title_nouns=("lumera", "lipstick", "lip", "color", "women"),
    price=12.99,
    rating=4.5,
    rating_count=10,
    description="A matte lipstick.",
    features=("LONG LASTING: stays on all day.", "VEGAN: no animal ingredients."),
    attributes=("long lasting", "vegan"),
    options={"color": ("red", "nude", "wine red"), "size": ("1 count", "2 pack", "12 pack")},
    reviews=(),
)
GOAL = Goal(
    goal_id=0,
    split="test",
    asin=LIPSTICK.asin,
    instruction="i need a long lasting vegan lipstick in red, and price lower than 30.00 dollars",
    attributes=("long lasting", "vegan"),
    options={"color": "red", "size": "2 pack"},
    price_upper=30.0,
    weight=1.0,
)
HOSE = replace(
    LIPSTICK,
    asin="B0TEST0002",
    category="home & garden",
    path=("patio, lawn & garden", "watering equipment", "garden hoses"),
    product_type="garden hose",
    query="garden hose",
    title="Verdana Flexible Garden Hose, Long Lasting Vegan Water Hose for Yard",
    title_nouns=("verdana", "garden", "hose", "water", "yard"),
)


def score(bought: Product = LIPSTICK, **selected: str) -> float:
    return score_purchase(GOAL, LIPSTICK, bought, selected or {"color": "red", "size": "2 pack"}).total


def test_full_match_scores_one():
    assert score() == 1.0


def test_similarity_is_webshops_token_set_ratio():
    # The values thefuzz 0.19 (WebShop's pin) gives for the same calls; a pair is passed as the text "name value".
    assert similarity("2 pack", "12 pack") == 92
    assert similarity("2 pack", "size 12 pack") == 80
    assert similarity("x-small", "size small") == 83
    assert similarity("large", "x-large") == similarity("Long-Lasting", "long lasting") == 100  # word subsets
    assert similarity("water proof", "waterproof") == 48
    assert similarity("nude", "red") == 29


def test_colour_words_and_wanted_option_texts_follow_webshop():
    assert colour_word("wine red") == "red"
    assert colour_word("navy blue") == "blue"  # the first word of WebShop's list, not the first of the value
    assert colour_word("standard") == "tan"  # found inside another word
    assert colour_word("12 pack") == "12 pack"
    assert wanted_option_text("color", "red") == "red"  # the value is exactly a colour word
    assert wanted_option_text("color", "wine red") == "color wine red"
    assert wanted_option_text("size", "12 pack") == "size 12 pack"


def test_options_are_matched_as_webshop_matches_them():
    assert option_matched("size", "x-small", ["small"])  # "size x small" holds every word of "small"
    assert not option_matched("size", "small", ["x-small"])  # 83
    assert not option_matched("size", "12 pack", ["2 pack"])  # 80, though the two values alone give 92
    assert option_matched("color", "navy blue", ["sky blue"])  # both read as "blue"
    assert option_matched("color", "red", ["1 count", "red"])  # a selected value of any group may match
    assert not option_matched("flavor", "blueberry", ["blueberry"])  # "blue" vs "flavor blueberry": never won


def test_wrong_option_loses_its_share():
    assert score(color="nude", size="2 pack") == pytest.approx(4 / 5)
    assert score(color="red", size="12 pack") == pytest.approx(4 / 5)  # "size 2 pack" vs "12 pack": 73
    assert score(color="red") == pytest.approx(4 / 5)
    assert score(color="wine red", size="2 pack") == 1.0  # colours are compared by their colour word
    assert score(color="red", style="wine red") == pytest.approx(4 / 5)  # two reds still fill one wanted option


def test_price_over_the_cap_loses_its_share():
    assert score(replace(LIPSTICK, price=30.01)) == pytest.approx(4 / 5)
    assert score(replace(LIPSTICK, price=30.0)) == 1.0


def test_partial_attribute_match_gives_its_fraction():
    three = replace(GOAL, attributes=("long lasting", "vegan", "cruelty free"))
    selected = {"color": "red", "size": "2 pack"}
    assert score_purchase(three, LIPSTICK, LIPSTICK, selected).total == pytest.approx((2 + 2 + 1) / (3 + 2 + 1))
    one = replace(LIPSTICK, attributes=("long-lasting",), features=(), title="Lumera Matte Lipstick", description="")
    parts = score_purchase(three, LIPSTICK, one, selected)
    assert (parts.attributes_matched, parts.type_reward) == (1, 1.0)
    assert parts.total == pytest.approx((1 + 2 + 1) / (3 + 2 + 1))


def test_missing_attribute_counts_unless_one_text_names_it():
    bare = replace(LIPSTICK, attributes=("long lasting",), features=(), title="Lumera Matte Lipstick")
    assert score(bare) == pytest.approx(4 / 5)
    assert score(replace(bare, description="A vegan formula.")) == 1.0
    split = replace(LIPSTICK, attributes=(), title="Lumera Lipstick Long", features=(), description="Lasting color.")
    assert not attribute_matched("long lasting", split)  # title and description are searched one at a time
    assert attribute_matched("long lasting", replace(split, features=("Stays long", "lasting all day.")))  # joined


def test_wrong_product_type_scores_zero():
    assert type_reward(LIPSTICK, HOSE) == 0.0
    assert score(HOSE) == 0.0


LOTION = replace(
    LIPSTICK, query="body lotion", path=("beauty & personal care", "skin care", "body", "lotions"),
    title="Lumera Body Lotion Cream", title_nouns=("lumera", "body", "lotion", "cream"),
)


def test_type_reward_levels():
    assert type_reward(LIPSTICK, LOTION) == 0.5  # 1 of 5 title nouns (0.2 is not above 0.2), one shared level
    assert type_reward(LIPSTICK, replace(LOTION, path=LIPSTICK.path)) == 1.0  # shares category levels
    assert type_reward(LIPSTICK, replace(LOTION, query="lipstick")) == 1.0  # same search query
    nouns = tuple(f"noun{i}" for i in range(10))
    many = replace(LIPSTICK, title=f"Lumera {' '.join(nouns)}", title_nouns=("lumera", *nouns))
    assert type_reward(many, LOTION) == 0.1  # 1 of 11 nouns


def test_title_score_counts_repeated_nouns():
    repeated = replace(
        LIPSTICK, title="Lumera Lipstick, Lumera Lip Color", title_nouns=("lumera", "lipstick", "lip", "color")
    )
    assert title_nouns(repeated) == ["lumera", "lipstick", "lumera", "lip", "color"]
    assert type_reward(repeated, LOTION) == 0.5  # 1 of 5 noun tokens; 1 of 4 distinct nouns would give 1.0


def test_env_reward_is_binary_and_reports_the_score(env):
    _, _, reward, info = expert_episode(env, seed=0)
    assert reward == 1.0 and info["success"] and info["score"] == 1.0
    seed = next(seed for seed in range(TEST_GOALS) if env.reset(seed=seed) and env.goal.options)
    env.reset(seed=seed)
    goal = env.goal
    open_goal_product(env)
    observation, reward, terminated, _, info = env.step("click[buy now]")  # no options selected
    expected = (len(goal.attributes) + 1) / (len(goal.attributes) + len(goal.options) + 1)
    assert terminated and reward == 0.0 and not info["success"]
    assert info["score"] == pytest.approx(expected) and expected < 1.0
    assert observation.startswith("Thank you for shopping with us!") and f"{expected:.2f}" in observation


def test_scripted_expert_wins_test_goals():
    env = WebShopTextEnv(split="test")
    assert env.max_turns == DEFAULT_MAX_TURNS == 10
    wins = 0
    for seed in range(25):
        _, actions, reward, info = expert_episode(env, seed)
        wins += reward == 1.0 and info["success"] and len(actions) <= env.max_turns
    assert wins >= 20


def test_registered_id_builds_the_env():
    assert ENV_ID in comprl.envs.ENV_IDS
    env = comprl.envs.make(ENV_ID, max_turns=5)
    observation, info = env.reset(seed=EVAL_SEED_OFFSET)
    assert env.observation_space.contains(observation) and "WebShop" in info["instruction"]
    observation, reward, terminated, truncated, info = env.step("<answer>search[red lipstick]</answer>")
    assert env.observation_space.contains(observation) and not info["invalid_action"]
    json.dumps(info)
