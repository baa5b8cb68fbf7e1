"""Rules on their own: patterns, command splitting, path spellings and the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from dsh_permissions import Rule
from dsh_permissions._rules import (
    CompiledRule,
    Subject,
    Unit,
    Verdict,
    command_units,
    compile_rules,
    evaluate,
    path_matcher,
    path_units,
)
from hypothesis import given, settings
from hypothesis import strategies as st

ALLOW = Verdict("allow")
DENY = Verdict("deny", "mode says no")


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("docs/**", ["docs", "docs/a.md", "docs/x/y/z.md"], ["docsx", "src/docs/a.md"]),
        ("docs/*.md", ["docs/a.md"], ["docs/x/a.md", "docs/a.txt"]),
        ("**/*.py", ["a.py", "src/a.py", "src/x/a.py", "/abs/a.py"], ["a.pyc"]),
        ("**", ["a", "a/b", "/a/b"], []),
        ("/etc/**", ["/etc", "/etc/passwd"], ["/etcetera", "etc/passwd"]),
        ("src/?.py", ["src/a.py"], ["src/ab.py", "src//.py"]),
        ("[!.]*", ["a"], [".env"]),
    ],
)
def test_path_patterns(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    """'*' stays within a segment, '**' crosses them and 'dir/**' includes the directory itself."""
    matches = path_matcher(pattern)
    assert [p for p in matching if not matches(p)] == []
    assert [p for p in not_matching if matches(p)] == []


@pytest.mark.parametrize(
    ("command", "units"),
    [
        ("git status", [("git status", False)]),
        ("git status && rm -rf build", [("git status", False), ("rm -rf build", False)]),
        (
            "a; b || c | d & e\nf",
            [("a", False), ("b", False), ("c", False), ("d", False), ("e", False), ("f", False)],
        ),
        ("echo 'a; b' \"c && d\"", [("echo 'a; b' \"c && d\"", False)]),
        ("make 2>&1 | tee log", [("make 2>&1", False), ("tee log", False)]),
        ("ls &> out", [("ls &> out", False)]),
        ("echo $(rm -rf ~)", [("echo $(rm -rf ~)", True), ("rm -rf ~", False)]),
        ("echo `id`; ls", [("echo `id`", True), ("id", False), ("ls", False)]),
        ("FOO=1 BAR=2 git push", [("git push", False)]),
        ("(cd sub && make)", [("cd sub", False), ("make", False)]),
        ("if true; then rm x; fi", [("true", False), ("rm x", False)]),
        ("for f in $(ls); do rm $f; done", [("$(ls)", True), ("ls", False), ("rm $f", False)]),
        ("x=$(id)", [("$(id)", True), ("id", False)]),
        ("time -p make", [("make", False)]),
        ("echo a\\;b", [("echo a\\;b", False)]),
        # a separator inside a substitution belongs to it; the commands inside are units too
        ("echo $(a; b); c", [("echo $(a; b)", True), ("a", False), ("b", False), ("c", False)]),
        ("cat <(ls; pwd) | wc", [("cat <(ls; pwd)", True), ("ls", False), ("pwd", False), ("wc", False)]),
        ("echo `a; b`; c", [("echo `a; b`", True), ("a", False), ("b", False), ("c", False)]),
        ("echo '$(a)' '`b`'", [("echo '$(a)' '`b`'", False)]),
        ("echo \"$(a)\"", [("echo \"$(a)\"", True), ("a", False)]),
        ("FOO='a b' git push", [("git push", False)]),
        ("{ a; b; }", [("a", False), ("b", False)]),
        # a comment runs nothing; a heredoc's text is data, but its substitutions run
        ("ls # ; rm x", [("ls", False)]),
        ("ls # c\nrm x", [("ls", False), ("rm x", False)]),
        ("cat <<EOF\nrm -rf /\nEOF\nls", [("cat <<EOF\nrm -rf /\nEOF", False), ("ls", False)]),
        ("cat <<EOF\n$(id)\nEOF", [("cat <<EOF\n$(id)\nEOF", True), ("id", False)]),
        # ANSI-C quoting makes its command opaque; the grammar reads past it (bash does too)
        ("echo $'\\''; rm -rf /", [("echo $'\\''", True), ("rm -rf /", False)]),
        # text the grammar cannot read: the rest of the line is one opaque unit, and the commands
        # it read after the break are units that no allow rule covers
        ("ls; ) ; rm -rf /", [("ls", False), (") ; rm -rf /", True), ("rm -rf /", True)]),
        ("ls; echo 'unclosed; rm -rf /", [("ls", False), ("echo 'unclosed; rm -rf /", True)]),
        ("ls \\", [("ls \\", True)]),
    ],
)
def test_command_units(command: str, units: list[tuple[str, bool]]) -> None:
    """A command line splits into simple commands outside quotes; substitutions make a unit opaque."""
    assert [(unit.spellings[0], unit.opaque) for unit in command_units(command)] == units


@pytest.mark.parametrize(
    ("command", "spellings"),
    [
        ("'rm' -rf /", ("'rm' -rf /", "rm -rf /")),
        ("\\rm -rf x", ("\\rm -rf x", "rm -rf x")),
        ('r""m x', ('r""m x', "rm x")),
        ("make 2>&1", ("make 2>&1",)),
        ("git push origin '--force'", ("git push origin '--force'", "git push origin --force")),
    ],
)
def test_a_command_is_also_spelled_as_its_words(command: str, spellings: tuple[str, ...]) -> None:
    """Besides the text as written, a command is spelled as the words bash runs (quotes and escapes gone)."""
    (unit,) = command_units(command)
    assert unit.spellings == spellings


# A command line made of simple commands whose words may quote separators: the splitter must
# find exactly those commands, each spelled as written and as its words.
_plain = st.text("abcxyz-./=", min_size=1, max_size=4).filter(lambda word: not word[0] == "=")
_quoted_text = st.text("ab ;&|()<>$`#\n", max_size=5)
_word = st.one_of(
    _plain.map(lambda w: (w, w)),
    _quoted_text.map(lambda t: (f"'{t}'", t)),
    _quoted_text.filter(lambda t: "$" not in t and "`" not in t).map(lambda t: (f'"{t}"', t)),
    st.sampled_from(";&|()<>").map(lambda c: (f"\\{c}", c)),
)
_simple = st.lists(_word, min_size=1, max_size=4).filter(
    lambda words: words[0][1] not in {"if", "then", "else", "elif", "do", "while", "until", "time", "!", "{"}
    and "=" not in words[0][1]
    and words[-1][1] != "}"
)
_line = st.lists(_simple, min_size=1, max_size=4).flatmap(
    lambda commands: st.tuples(
        st.just(commands),
        st.lists(st.sampled_from([";", " && ", " || ", " | ", " & ", "\n", " |& "]), min_size=len(commands) - 1,
                 max_size=len(commands) - 1),
    )
)


@settings(max_examples=400, deadline=None)
@given(line=_line)
def test_generated_lines_split_into_their_commands(line: tuple[list[list[tuple[str, str]]], list[str]]) -> None:
    """Any line of simple commands joined by separators gives back those commands, as written and as words."""
    commands, separators = line
    written = [" ".join(w for w, _ in words) for words in commands]
    text = written[0] + "".join(sep + part for sep, part in zip(separators, written[1:], strict=True))
    units = command_units(text)
    assert [unit.spellings[0] for unit in units] == written
    assert [unit.spellings[-1] for unit in units] == [" ".join(v for _, v in words) for words in commands]
    assert not any(unit.opaque for unit in units)


@settings(max_examples=1000, deadline=None)
@given(command=st.text(" \t\nab;&|()<>$`'\"\\#{}=", max_size=30))
def test_any_text_splits_into_pieces_of_itself(command: str) -> None:
    """Whatever the text, splitting never raises, and each unit is spelled as a piece of it."""
    for unit in command_units(command):
        assert unit.spellings[0] in command, unit


def test_path_units_spell_inside_paths_both_ways(tmp_path: Path) -> None:
    """Inside the workspace a location is spelled relative and absolute; a symlink adds its target."""
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "link").symlink_to(tmp_path, target_is_directory=True)
    assert path_units("docs/a.md", str(ws)) == (Unit(("docs/a.md", str(ws / "docs/a.md"))),)
    assert path_units(".", str(ws)) == (Unit((".", str(ws))),)
    assert path_units("link/x", str(ws)) == (
        Unit(("link/x", str(ws / "link/x"))),
        Unit((str(tmp_path / "x"),)),
    )
    assert path_units("../x", str(ws)) == (Unit((str(tmp_path / "x"),)),)


def test_compile_rules_accepts_the_short_form_and_checks_rules() -> None:
    """'bash(git status*)' is tool and pattern in one; empty or doubled patterns are refused by index."""
    [rule] = compile_rules([Rule(tool="bash(git status*)", action="allow")])
    assert (rule.tool, rule.pattern, rule.label) == ("bash", "git status*", "allow bash(git status*)")
    with pytest.raises(ValueError, match=r"rules\[1\]: the pattern is given twice"):
        compile_rules([Rule(tool="bash", action="ask"), Rule(tool="bash(x)", pattern="y", action="ask")])
    with pytest.raises(ValueError, match=r"rules\[0\]: the pattern is empty"):
        compile_rules([Rule(tool="bash", pattern=" ", action="deny")])
    with pytest.raises(ValueError, match=r"rules\[0\]: tool is empty"):
        compile_rules([Rule(tool="", action="deny")])


def rules(*specs: tuple[str, str]) -> tuple[CompiledRule, ...]:
    return compile_rules([Rule(tool=tool, action=action) for tool, action in specs])  # type: ignore[arg-type]


def bash(command: str) -> Subject:
    return Subject("command", command_units(command), command)


class TestEvaluate:
    def test_deny_beats_everything_wherever_it_is(self) -> None:
        """A matching deny rule wins over an earlier allow."""
        verdict = evaluate(
            rules(("bash", "allow"), ("bash(rm *)", "deny")), "bash", bash("ls; rm -rf x"), ALLOW
        )
        assert verdict.action == "deny"
        assert (
            verdict.reason
            == "the permissions rule 'deny bash(rm *)' (plugins.permissions.rules[1]) forbids it"
        )

    def test_first_matching_allow_or_ask_decides_each_unit(self) -> None:
        """Among allow and ask rules the first match decides: specific rules go first."""
        ordered = rules(("bash(git status*)", "allow"), ("bash", "ask"))
        assert evaluate(ordered, "bash", bash("git status -s"), ALLOW).action == "allow"
        assert evaluate(ordered, "bash", bash("git push"), ALLOW).action == "ask"
        assert evaluate(ordered, "bash", bash("git status; git push"), ALLOW).action == "ask"

    def test_allow_must_cover_every_unit_to_lift_a_mode_denial(self) -> None:
        """An allow rule lifts the mode's denial only for commands it covers entirely."""
        allow_status = rules(("bash(git status*)", "allow"))
        assert evaluate(allow_status, "bash", bash("git status"), DENY).action == "allow"
        assert evaluate(allow_status, "bash", bash("git status && rm -rf /"), DENY) == DENY
        assert evaluate(allow_status, "bash", bash("git status $(rm -rf /)"), DENY) == DENY

    def test_ask_covers_opaque_commands_and_partial_coverage_with_a_permissive_mode(self) -> None:
        """Ask matches substitutions too, and still asks when the mode allows the rest."""
        ask_rm = rules(("bash(rm *)", "ask"))
        assert evaluate(ask_rm, "bash", bash("rm $(cat list)"), ALLOW).action == "ask"
        assert evaluate(ask_rm, "bash", bash("ls; rm x"), ALLOW).action == "ask"
        assert evaluate(ask_rm, "bash", bash("ls; rm x"), DENY) == DENY
        assert evaluate(ask_rm, "bash", bash("ls"), ALLOW) == ALLOW

    def test_deny_sees_through_quotes_and_escapes(self) -> None:
        """A deny rule catches a command however its words are quoted (these once slipped past `rm *`)."""
        deny_rm = rules(("bash", "allow"), ("bash(rm *)", "deny"), ("bash(* --force*)", "deny"))
        for command in ("'rm' -rf /", "\\rm -rf /", 'r""m -rf /', "ls; 'rm' x", "git push origin '--force'"):
            assert evaluate(deny_rm, "bash", bash(command), ALLOW).action == "deny", command

    def test_unreadable_text_is_never_allowed_by_a_rule(self) -> None:
        """An allow rule cannot cover what follows ANSI-C quoting or an unclosed quote."""
        allow_echo = rules(("bash(echo *)", "allow"))
        assert evaluate(allow_echo, "bash", bash("echo $'\\''; rm -rf /"), DENY) == DENY
        assert evaluate(allow_echo, "bash", bash("echo $'\\'' ; rm -rf / ; echo '"), DENY) == DENY
        assert evaluate(allow_echo, "bash", bash("echo 'a"), DENY) == DENY
        assert evaluate(allow_echo, "bash", bash("echo 'a; b'"), DENY).action == "allow"

    def test_tool_globs_and_patternless_rules(self) -> None:
        """'*' names every tool; a rule without a pattern covers every call of its tool."""
        assert evaluate(rules(("*", "ask")), "anything", Subject(None, ()), ALLOW).action == "ask"
        assert evaluate(rules(("write_*", "deny")), "write_file", Subject(None, ()), ALLOW).action == "deny"
        patterned = rules(("custom(x*)", "deny"))
        assert evaluate(patterned, "custom", Subject(None, ()), ALLOW) == ALLOW

    def test_path_rules_need_every_location_for_allow_and_one_for_deny(self) -> None:
        """A path through a symlink is allowed only if its target is covered too, denied if either is."""
        subject = Subject(
            "path", (Unit(("docs/link/x", "/ws/docs/link/x")), Unit(("/etc/x",))), "docs/link/x"
        )
        assert evaluate(rules(("write_file(docs/**)", "allow")), "write_file", subject, DENY) == DENY
        assert evaluate(rules(("write_file(/etc/**)", "deny")), "write_file", subject, ALLOW).action == "deny"
        both = rules(("write_file(docs/**)", "allow"), ("write_file(/etc/**)", "allow"))
        assert evaluate(both, "write_file", subject, DENY).action == "allow"
