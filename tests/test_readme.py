"""README.md's profiles table is the one generated from ``comprl.config.PROFILES`` (``comprl profiles --readme``)."""

from __future__ import annotations

import dataclasses

import pytest

from comprl.config import PROFILES
from comprl.kit import profile_table
from comprl.kit.cli import main


def test_the_readmes_profiles_table_is_the_generated_one():
    text = profile_table.README.read_text()
    assert profile_table.with_table(text) == text, (
        "README.md's profiles table differs from comprl.config.PROFILES; run: .venv/bin/comprl profiles --readme"
    )


def test_the_table_has_a_column_per_profile_and_reads_each_setting_from_its_config(monkeypatch):
    lines = profile_table.markdown().splitlines()
    assert lines[0] == "| setting | " + " | ".join(
        f"`{name}`" + (" (the paper's)" if name == "paper" else "") for name in PROFILES
    ) + " |"
    changed = dataclasses.replace(
        PROFILES["cpu"], steps=7, extractor=dataclasses.replace(PROFILES["cpu"].extractor, max_new_tokens=99)
    )
    monkeypatch.setitem(PROFILES, "cpu", changed)
    column = list(PROFILES).index("cpu") + 1
    rows = {line.split(" | ")[0].lstrip("| "): line.strip("|").split(" | ")
            for line in profile_table.markdown().splitlines()}
    assert rows["steps"][column].strip() == "7"
    assert rows["lesson cap, tokens (`extractor.max_new_tokens`)"][column].strip() == "99"


def test_the_paper_profile_reads_the_papers_settings():
    rows = {line.split(" | ")[0].lstrip("| "): line.strip("| ").split(" | ")[-1]
            for line in profile_table.markdown().splitlines()[2:]}
    assert rows["instances x rollouts (K) per step"] == "16 x 8"
    assert rows["turns"] == "30" and rows["steps"] == "128"
    assert rows["retrieval protocol"] == "official code's" and rows["MiniHack view"] == "official"
    assert rows["constrained choice"] == "no"


def test_a_readme_without_the_markers_is_refused_naming_them(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    with pytest.raises(ValueError, match="README.md needs the line '<!-- profiles table"):
        profile_table.rewrite_readme(readme)


def test_comprl_profiles_readme_rewrites_only_the_table(tmp_path, monkeypatch, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\n{profile_table.BEGIN}\n| stale |\n{profile_table.END}\n\nafter\n")
    monkeypatch.setattr(profile_table, "README", readme)
    assert main(["profiles", "--readme"]) == 0
    assert readme.read_text() == (
        f"# title\n\n{profile_table.BEGIN}\n{profile_table.markdown()}{profile_table.END}\n\nafter\n"
    )
    main(["profiles", "--markdown"])
    assert profile_table.markdown() in capsys.readouterr().out
